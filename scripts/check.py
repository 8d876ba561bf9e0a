"""
Check my code: the GPT you wrote along with the lecture, compared part by part with gpt.py's, and
the likely mistake named where a part differs (scripts/README.md: how).

    python scripts/check.py my_gpt.py
    python scripts/check.py my_notebook.ipynb       # its code cells, in order

Only your imports, hyperparameters and definitions run: no data is read, nothing trains or samples.
Exit code 0 when every part found matches, 1 otherwise.
"""
import ast
import functools
import inspect
import json
import math
import os
import sys

import torch
import torch.nn as nn
from torch.nn import functional as F

import common
from common import gpt
import bigram  # noqa: E402 (beside gpt.py)

VOCAB = 65 # Tiny Shakespeare's characters
TOL = 1e-4 # the same math in another order differs by about 1e-6; a mistake, by far more
CALLS = {'is_available', 'int', 'float', 'min', 'max', 'round'} # what a hyperparameter may call
PLAIN = (ast.Constant, ast.Name, ast.Attribute, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp,
         ast.Tuple, ast.List, ast.Call, ast.keyword, ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)


def sources(path):
    """[(where, code)]: the file, or a notebook's code cells (their ! and % lines left out)."""
    if not os.path.isfile(path):
        common.fail(f"no file at {path}")
    with open(path, encoding='utf-8', errors='replace') as f:
        text = f.read()
    if path.endswith('.ipynb'):
        try:
            cells = [(i, c) for i, c in enumerate(json.loads(text)['cells'], 1) if c['cell_type'] == 'code']
        except (ValueError, KeyError, TypeError):
            common.fail(f"{path} is not a notebook: no code cells in its JSON")
        strip = lambda code: '\n'.join('' if line.lstrip()[:1] in '!%' else line for line in code.splitlines())
        return [(f"cell {i}, ", strip(''.join(c['source']))) for i, c in cells]
    if not path.endswith('.py'):
        common.fail(f"{path} is neither a Python file (.py) nor a notebook (.ipynb)")
    return [('', text)]


def is_setting(node):
    """name = a hyperparameter: numbers, names and arithmetic, or the choice of device."""
    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
        return False
    if not all(isinstance(t, ast.Name) for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
        return False
    nodes = list(ast.walk(node.value))
    calls = {getattr(n.func, 'attr', getattr(n.func, 'id', None)) for n in nodes if isinstance(n, ast.Call)}
    return all(isinstance(n, PLAIN) for n in nodes) and calls <= CALLS


def load(path):
    """The learner's names after its imports, hyperparameters and definitions ran, in order."""
    names = {'__name__': 'learner', 'vocab_size': VOCAB}
    for where, code in sources(path):
        try:
            tree = ast.parse(code)
        except SyntaxError as e:
            common.fail(f"{path}, {where}line {e.lineno}: a syntax error: {e.msg}")
        for node in tree.body:
            definition = isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))
            if definition or is_setting(node):
                try:
                    exec(compile(ast.Module([node], []), path, 'exec'), names)
                except Exception as e: # a setting made from the data, which never ran, is left out
                    if definition:
                        common.fail(f"{path}, {where}line {node.lineno}: running it raised {type(e).__name__}: {e}")
    names.update(device='cpu', vocab_size=VOCAB)
    return names


def head(h, x, scale=None, mask='before', dim=-1, kq=False, values=True):
    """Head.forward with a mistake: the scale, the mask, the softmax's dim, k @ q^T, x for value(x)."""
    T = x.shape[1]
    k, q = h.key(x), h.query(x)
    wei = (k @ q.transpose(-2, -1) if kq else q @ k.transpose(-2, -1)) * (scale or k.shape[-1]**-0.5)
    future = torch.ones(T, T).tril() == 0
    wei = F.softmax(wei.masked_fill(future, float('-inf')) if mask == 'before' else wei, dim=dim)
    wei = wei.masked_fill(future, 0) if mask == 'after' else wei
    return wei @ (h.value(x) if values else x)


def block(b, x, residual=True, post=False, swap=False):
    """Block.forward with a mistake: no residuals, post-norm, or computation before communication."""
    parts = [(b.sa, b.ln1), (b.ffwd, b.ln2)][::-1 if swap else 1]
    for f, ln in parts:
        x = ln(x + f(x)) if post else x + f(ln(x)) if residual else f(ln(x))
    return x


def model(m, idx, ln_f=True, positions=True):
    """GPTLanguageModel.forward (logits only) without ln_f, or without the position embedding."""
    x = m.token_embedding_table(idx)
    x = x + m.position_embedding_table(torch.arange(idx.shape[1])) if positions else x
    x = m.blocks(x)
    return m.lm_head(m.ln_f(x) if ln_f else x), None


def mistake(forward, drop=None):
    """A change that makes our part run forward(part, *inputs) instead of its own; drop: a module it
    leaves out, where the learner's part has none (else the learner defined it, but never used it)."""
    def change(ref, mine):
        if drop and not hasattr(mine, drop):
            delattr(ref, drop)
        ref.forward = functools.partial(forward, ref)
    return change


def ffwd(inner, relu):
    """A change to FeedForward's net: inner times wider inside (the lecture: 4), with or without ReLU."""
    def change(ref, mine):
        C = gpt.n_embd
        layers = [nn.Linear(C, inner * C), nn.ReLU(), nn.Linear(inner * C, C), nn.Dropout(gpt.dropout)]
        if not relu: # left out, or an Identity in its place
            layers[1:2] = [nn.Identity()] * (len(mine.net) == 4)
        ref.net = nn.Sequential(*layers)
    return change


def last_of_blocks(ref, mine):
    """The video's model from 1:32:51: the final LayerNorm is the last element of blocks; no ln_f."""
    if not (isinstance(getattr(mine, 'blocks', None), nn.Sequential) and isinstance(mine.blocks[-1], nn.LayerNorm)):
        raise LookupError("not the video's layout")
    mistake(lambda m, idx: model(m, idx, ln_f=False), drop='ln_f')(ref, mine)


# part: [(the mistake, or what the video did: True; the change that makes our part make it)]
CATALOGUE = {
    'Head': [
        ('the 1/sqrt(head_size) scale is missing', False, mistake(lambda h, x: head(h, x, scale=1.0))),
        ('scaled by C**-0.5, C = n_embd, as the video from 1:16:56 (C from x.shape); the published code and gpt.py '
         'scale by head_size**-0.5', True, mistake(lambda h, x: head(h, x, scale=gpt.n_embd**-0.5))),
        ('no causal mask: the future talks to the past', False, mistake(lambda h, x: head(h, x, mask=None))),
        ('the mask applied after the softmax', False, mistake(lambda h, x: head(h, x, mask='after'))),
        ('the softmax over the wrong dimension (dim=1, not -1)', False, mistake(lambda h, x: head(h, x, dim=1))),
        ('k @ q^T for q @ k^T', False, mistake(lambda h, x: head(h, x, kq=True))),
        ('x itself aggregated, not value(x)', False, mistake(lambda h, x: head(h, x, values=False)))],
    'MultiHeadAttention': [
        ('no proj after the heads', False,
         mistake(lambda a, x: a.dropout(torch.cat([h(x) for h in a.heads], dim=-1)), drop='proj'))],
    'FeedForward': [
        ('no ReLU between the two Linear layers', False, ffwd(4, relu=False)),
        ('not 4x wider inside (the paper: 512 -> 2048 -> 512)', False, ffwd(1, relu=True))],
    'Block': [
        ('no residual connections (x = x + ...)', False, mistake(lambda b, x: block(b, x, residual=False))),
        ('post-norm, as the paper: LayerNorm after each residual add, not before each part', False,
         mistake(lambda b, x: block(b, x, post=True))),
        ('the feed-forward before the attention', False, mistake(lambda b, x: block(b, x, swap=True)))],
    'the model': [
        ('the last LayerNorm as the last of blocks, as the video from 1:32:51; the published code names it ln_f',
         True, last_of_blocks),
        ('no ln_f before lm_head', False, mistake(lambda m, idx: model(m, idx, ln_f=False), drop='ln_f')),
        ('no position embedding', False,
         mistake(lambda m, idx: model(m, idx, positions=False), drop='position_embedding_table'))],
}
SHARED = {'MultiHeadAttention': ['heads'], 'Block': ['sa', 'ffwd'], 'the model': ['blocks']} # the learner's own


def layout(module, shared):
    """[(name, shape)] of the parameters, but those of the parts shared with the learner."""
    return [(n, tuple(p.shape)) for n, p in module.named_parameters() if n.split('.')[0] not in shared]


def run(part, x):
    out = part(x)
    return out[0] if isinstance(out, tuple) else out


def difference(mine, ref, shared, x):
    """How far ref's output is from the learner's on its weights, or why they can't be compared."""
    shared = [n for n in shared if hasattr(ref, n)]
    ours, theirs = dict(layout(ref, shared)), dict(layout(mine, shared))
    module = lambda names: list(dict.fromkeys(n.rsplit('.', 1)[0] for n in names)) # key.weight: key
    missing = module(n for n in ours if n not in theirs) + [n for n in shared if not hasattr(mine, n)]
    extra = module(n for n in theirs if n not in ours)
    if missing or extra:
        return ', '.join([f"has no `{n}`" for n in missing] + [f"has `{n}`, which the lecture's has not"
                                                                for n in extra])
    shapes = [f"`{n}` is {tuple(theirs[n])}, the lecture's {tuple(s)}" for n, s in ours.items() if theirs[n] != s]
    if shapes:
        return ', '.join(shapes)
    for name in shared:
        setattr(ref, name, getattr(mine, name))
    ref.load_state_dict(mine.state_dict(), strict=False)
    with torch.no_grad():
        a, b = run(mine.eval(), x), run(ref.eval(), x)
    if a.shape != b.shape:
        return f"its output is {tuple(a.shape)}, the lecture's {tuple(b.shape)}"
    return (a - b).abs().max().item()


def check_part(part, mine, build_ours, x):
    """The line for one part, and whether it matches (or does as the video did)."""
    shared = SHARED.get(part, [])
    try:
        found = difference(mine, build_ours(), shared, x)
    except Exception as e:
        return f"running it on {tuple(x.shape)} raised {type(e).__name__}: {str(e).splitlines()[0]}", False
    if isinstance(found, float) and found <= TOL:
        return "matches", True
    for mistake, video, change in CATALOGUE.get(part, []):
        try:
            ref = build_ours()
            change(ref, mine)
            same = difference(mine, ref, shared, x)
        except Exception: # this mistake can't be made in the learner's layout
            continue
        if isinstance(same, float) and same <= TOL:
            return (f"matches the video: {mistake}", True) if video else (f"differs: likely {mistake}", False)
    said = f"differs by {found:.4g}" if isinstance(found, float) else f"differs: your {type(mine).__name__} {found}"
    return said + "; none of the catalogued mistakes gives its output", False


def invariants(m, block_size):
    """What holds whatever the weights: the past never hears the future, batch rows never talk,
    generate goes past block_size, and the loss at init is near ln(vocab_size)."""
    torch.manual_seed(0)
    idx, targets = torch.randint(VOCAB, (2, block_size)), torch.randint(VOCAB, (2, block_size))
    half, problems = block_size // 2, []
    with torch.no_grad():
        _, loss = m.eval()(idx, targets)
        logits = run(m, idx)
        later, other = idx.clone(), idx.clone()
        later[:, half:], other[1] = (later[:, half:] + 1) % VOCAB, (other[1] + 1) % VOCAB
        if not torch.allclose(run(m, later)[:, :half], logits[:, :half], atol=1e-5):
            problems.append("a future token changes an earlier output")
        if not torch.allclose(run(m, other)[0], logits[0], atol=1e-5):
            problems.append("one example in a batch changes another's output")
        try:
            if m.generate(idx[:1], max_new_tokens=2).shape != (1, block_size + 2):
                problems.append("generate does not return the context and the new tokens")
        except Exception as e:
            problems.append(f"generate fails past block_size ({type(e).__name__}: crop idx to the last block_size)")
    if loss is None or not math.log(VOCAB) - 0.1 < loss.item() < math.log(VOCAB) + 1:
        problems.append(f"its loss at init is {loss and round(loss.item(), 2)}, not near ln {VOCAB} = "
                        f"{math.log(VOCAB):.2f} (the lecture's 4.2 to 4.9)")
    return problems, loss


def check_class(part, cls, args, ours, inputs):
    """Build the learner's part as the lecture does, with the arguments it takes, and check it."""
    args = args[:len([q for q in inspect.signature(cls).parameters.values() if q.default is q.empty])]
    torch.manual_seed(1337)
    try:
        mine = cls(*args)
    except Exception as e:
        return f"can't build {cls.__name__}({', '.join(map(str, args))}): {type(e).__name__}: {e}", False
    if part != 'the model':
        return check_part(part, mine, ours, inputs)
    bigram_like = [n for n, _ in mine.named_parameters()] == ['token_embedding_table.weight']
    reference = bigram.BigramLanguageModel if bigram_like else gpt.GPTLanguageModel
    line, ok = check_part(part, mine, lambda: reference(VOCAB), inputs)
    try:
        problems, loss = invariants(mine, inputs.shape[1])
    except Exception as e:
        problems = [f"running it raised {type(e).__name__}: {str(e).splitlines()[0]}"]
    return line + ('; but ' + '; '.join(problems) if problems else "; the past never hears the future, batch rows "
                   f"never talk, generate goes past block_size, loss at init {loss.item():.2f}"), ok and not problems


def main(argv):
    p = common.argument_parser(__doc__)
    p.add_argument('path', help='your .py file or .ipynb notebook')
    path = p.parse_args(argv).path
    names = load(path)
    number = lambda *keys, default: next((names[k] for k in keys if type(names.get(k)) is int), default)
    n_embd, n_head = number('n_embd', 'n_embed', default=32), number('n_head', default=1)
    settings = dict(n_embd=n_embd, n_head=n_head, n_layer=number('n_layer', default=1), fast_attention=False,
                    block_size=number('block_size', default=8), dropout=float(names.get('dropout', 0.0)))
    vars(gpt).update(settings) # our classes read them, as the lecture's read the learner's
    hs, T = n_embd // n_head, settings['block_size']
    x = torch.randn(2, T, n_embd, generator=torch.Generator().manual_seed(0))
    idx = torch.randint(VOCAB, (2, T), generator=torch.Generator().manual_seed(0))
    parts = [('Head', ['Head'], (hs,), lambda: gpt.Head(hs), x),
             ('MultiHeadAttention', ['MultiHeadAttention'], (n_head, hs),
             lambda: gpt.MultiHeadAttention(n_head, hs), x),
             ('FeedForward', ['FeedForward', 'FeedFoward'], (n_embd,), lambda: gpt.FeedForward(n_embd), x),
             ('Block', ['Block'], (n_embd, n_head), lambda: gpt.Block(n_embd, n_head), x),
             ('the model', ['GPTLanguageModel', 'BigramLanguageModel'], (VOCAB,), None, idx)]
    lines, failed, found = [], [], 0
    for part, classes, args, ours, inputs in parts:
        cls = next((names[c] for c in classes if isinstance(names.get(c), type)), None)
        if cls is None:
            lines.append(f"{classes[0]:<20} not found: no class of that name")
            continue
        line, ok = check_class(part, cls, args, ours, inputs)
        lines.append(f"{cls.__name__:<20} {line}")
        found, failed = found + 1, failed + ([] if ok else [cls.__name__])
    if not found:
        common.fail(f"{path}: none of the lecture's parts (Head, MultiHeadAttention, FeedForward, Block, "
                    "GPTLanguageModel or BigramLanguageModel) is defined there")
    print('\n'.join(lines))
    print(f"{found - len(failed)} of {found} parts match gpt.py" + (f"; look at {', '.join(failed)}" if failed else ''))
    return 1 if failed else 0


if __name__ == '__main__':
    common.run(lambda argv: sys.exit(main(argv)), sys.argv[1:])
