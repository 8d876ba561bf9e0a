"""
Step 3, running: every tensor a part makes, at the learner's line, and what each was made from; what each
module of a model receives; forward and generate called by what their parameters mean; what must hold of a
model whatever its weights.
"""
import ast, contextlib, copy, functools, inspect, math, re, traceback

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

from checker.build import meaning, safe_modules
from checker.lecture import MEANING, norm, out_of
from checker.roles import vocab
from checker.load import NOTEBOOK, OURS, message

def tensors(tree):
    """The tensors in nested tuples, lists and dicts."""
    if isinstance(tree, torch.Tensor):
        return [tree]
    tree = list(tree.values()) if isinstance(tree, dict) else tree
    return [t for item in tree for t in tensors(item)] if isinstance(tree, (tuple, list)) else []

class Event:
    """A torch call ('softmax', ...) or a module's ('module'), at the learner's line: its arguments, its output
    tensors and their values then (before an in-place op), the events that made its inputs (-1: the input)."""
    def __init__(self, name, at, args, kwargs, out, module=None, parents=()):
        self.name, self.at, self.args, self.kwargs, self.module, self.parents = name, at, args, kwargs, module, parents
        self.outs = tensors(out)
        self.values = [t.detach().clone() for t in self.outs]

class Trace(TorchFunctionMode):
    """The torch calls and module calls made inside `with Trace(learner) as t:`, in t.events."""
    def __init__(self, learner):
        super().__init__()
        self.learner, self.events, self.made = learner, [], {} # made: id(tensor) -> the event that made it
    def record(self, name, args, kwargs, out, module=None):
        parents = {self.made[id(t)] for t in tensors((args, kwargs)) if id(t) in self.made}
        self.events.append(Event(name, self.learner.line(), args, kwargs, out, module, parents))
        if module is None: # (a module's output is made by the calls inside it)
            self.made.update({id(t): len(self.events) - 1 for t in self.events[-1].outs})
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if tensors(out) and getattr(func, '__name__', '') != '__get__':
            self.record(getattr(func, '__name__', '?').strip('_'), args, kwargs or {}, out)
        return out
    def __enter__(self):
        self.hook = nn.modules.module.register_module_forward_hook(
            lambda m, args, out: self.record('module', args, {}, out, m))
        return super().__enter__()
    def __exit__(self, *exc):
        self.hook.remove()
        return super().__exit__(*exc)
    def leading_to(self, out):
        """The events whose results the tensor out is made from."""
        todo, seen = [self.made[id(t)] for t in tensors(out) if id(t) in self.made], set()
        while todo:
            i = todo.pop()
            if i >= 0 and i not in seen:
                seen.add(i)
                todo += self.events[i].parents
        return seen

def capture(m, ctx):
    """Run a model on its tokens once, in eval mode, and keep in ctx.inputs what each module inside receives."""
    keep, x = lambda s, args, kwargs: ctx.inputs.setdefault(id(s), (args, kwargs)), None
    hooks = [s.register_forward_pre_hook(keep, with_kwargs=True) for s in safe_modules(m)]
    with contextlib.suppress(Exception), torch.no_grad(): # (a model that fails: its own line says why, later)
        (x, *_), kwargs = ctx.example(m)
        logits_of(m.eval(), x) if x.dtype == torch.long else m(x, **kwargs)
        ctx.ran.add(id(m)) # (run through: what it holds and never got, it never runs)
    for h in hooks:
        h.remove()
    # a model's input: its tokens, not the targets logits_of passed
    if x is not None and x.dtype == torch.long:
        ctx.inputs[id(m)] = (x,), {}

TARGETS = {norm(n) for n in 'targets target y labels label tgt targ yb ys target_ids'.split()}

def targets_of(m):
    """The name of the parameter of m.forward that takes the targets, or None."""
    return next((p.name for p in list(inspect.signature(m.forward).parameters.values())[1:]
                 if norm(p.name) in TARGETS), None)

def by_position(out, V):
    """Logits of (B, vocab, T), as F.cross_entropy takes them, turned back to (B, T, vocab)."""
    return out.transpose(1, 2) if out.dim() == 3 and out.shape[1] == V != out.shape[2] else out

def logits_of(m, idx):
    """(B,T,vocab) logits; with targets where it gives fewer without (nanoGPT); (B,vocab,T) turned back."""
    targets, params = targets_of(m), inspect.signature(m.forward).parameters
    out = out_of(m(idx, **{targets: idx}) if targets and params[targets].default is params[targets].empty else m(idx))
    full = lambda out: isinstance(out, torch.Tensor) and out.numel() == idx.numel() * vocab(m)
    if not full(out) and targets:
        out = out_of(m(idx, **{targets: idx}))
    return by_position(out, vocab(m)).reshape(*idx.shape, -1) if full(out) else out

def call(m, args, kwargs):
    return logits_of(m, args[0]) if args[0].dtype == torch.long and not kwargs else out_of(m(*args, **kwargs))

IDX = {norm(n) for n in 'idx context x tokens input_ids inputs input ids prompt start start_tokens seq sequence '
                        'indices token_ids cond idx_cond prefix src context_tokens'.split()}
COUNT = ('new', 'len', 'num', 'max', 'count', 'step', 'many') # words in a count's name
INPUT = ('idx', 'input', 'prompt', 'context', 'start', 'seq', 'prefix', 'cond', 'src') # in an input's name

def counts(name):
    """Whether a parameter's name says it is a count: max_new_tokens, n, n_chars; not input_tokens."""
    nouns = any(w in name for w in ('token', 'char')) and not any(w in name for w in INPUT)
    return name == 'n' or name not in IDX and (any(w in name for w in COUNT) or nouns)

def counted(kwargs):
    return [v for v in kwargs.values() if type(v) is int]

class Yielded(list):
    """What a generate that is a Python generator yields, in order."""

def generate(m, idx, n, block=None):
    """m.generate(idx, n new tokens), its parameters by what they mean (a first one by no known name: idx, else
    the count, else idx as text; the CPU; block_size; the rest their defaults): (what it returns, what it raised,
    whether it took idx, 'text')."""
    errors, text = [], '\n' * idx.shape[1] if len(idx) == 1 else None
    array = idx[0].numpy() if len(idx) == 1 else None # (a generate that takes a NumPy array)
    row = idx[0] if len(idx) == 1 else None # (or one prompt as a 1-D tensor)
    tries = [(idx, True), (idx, False)] + [(p, True) for p in (row, text, array) if p is not None]
    for prompt, first_is_idx in tries:
        kwargs, params = {}, inspect.signature(m.generate).parameters.values()
        # (generate(initiator_token, max_new_tokens): a count by a name that says so comes after the prompt)
        plainly = [p for p in params if any(w in norm(p.name) for w in COUNT)]
        try:
            for i, p in enumerate(p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)):
                name = norm(p.name)
                first = i == 0 and p.default is p.empty and first_is_idx and (
                    not counts(name) or prompt is text or plainly[:1] not in ([], [p]))
                count = p.annotation is int or type(p.default) is int # (tokens: int = 1, a count)
                if (name in IDX or first) and not count: # (generate(first_char, n))
                    kwargs[p.name], first_is_idx = prompt, False
                # (max_block_size: no count)
                elif meaning(p.name) == 'block_size' and ('block' in name or 'context' in name) and block:
                    kwargs[p.name] = block
                elif counts(name) or count and p.default is p.empty or name in IDX and count:
                    kwargs[p.name] = n
                elif name == 'device':
                    kwargs[p.name] = 'cpu'
                elif re.search(r'temp|top[kp]', name) and p.default is p.empty: # (as the lecture samples)
                    kwargs[p.name] = vocab(m) if 'topk' in name else 1.0
                elif p.default is p.empty and not first_is_idx and not plainly and n not in counted(kwargs):
                    kwargs[p.name] = n # (generate(idx, total): the one left is the count)
                elif p.default is p.empty:
                    raise TypeError(f"generate's parameter {p.name} means nothing the checker knows")
            kind = next((k for p, k in [(text, 'text'), (array, 'array'), (row, 'row')] if prompt is p), True)
            took = any(v is prompt for v in kwargs.values()) and kind
            forward, own = m.forward, vars(m).get('forward')
            def fed(*a, **k): # (their prompt taken apart another way than (B, T): the next try)
                if tensors((a, k)) and tensors((a, k))[0].dim() != 2 and prompt is not array:
                    raise ValueError(f"generate fed the model a {tensors((a, k))[0].dim()}-D tensor")
                return forward(*a, **k)
            m.forward = fed
            try:
                out = m.generate(**kwargs)
            finally:
                del m.forward
                if own is not None:
                    m.forward = own
            out = Yielded(out) if inspect.isgenerator(out) else out # (run to its end)
            # (its tokens back as a list or an array)
            if prompt is array and isinstance(out, (list, type(array))):
                out = torch.as_tensor(out).reshape(1, -1)
            return out, None, took
        except Exception as e:
            errors.append(e)
    return None, errors[0], True

def raised_at(m, T):
    """What their model raises, run on T tokens; None: it runs."""
    try:
        with torch.no_grad():
            logits_of(m.eval(), torch.randint(vocab(m), (2, T)))
    except Exception as e:
        return e
    return None

runs_at = lambda m, T: raised_at(m, T) is None

def failed(m, e, lengths, start, block, learner):
    """Where generate failed: past block_size (idx not cropped), on fewer tokens than the model runs on, or on
    the None its forward returns without targets."""
    back = without_targets(m, learner)
    if back:
        return (f": its forward returns None without targets ({learner.place(back)}: `{learner.source(back)}` is "
                "reached only with them)")
    if 'out of range' in str(e) and max(lengths) > block:
        return ' past block_size (crop idx to the last block_size)'
    # (a cache: a token at a time)
    if 'out of range' in str(e) and lengths and start + len(lengths) - 1 > block:
        return (f" past block_size: fed one token at a time, its positions pass the {block} of the position table "
                "(crop, or start the cache again, at block_size)")
    if lengths and not runs_at(m, lengths[-1]) and runs_at(m, block): # (the model's fault, not generate's)
        return (f" from a prompt of {start}: the model runs on exactly block_size = {block} tokens only, "
                "where the lecture's runs on any number up to it")
    return ''

def without_targets(m, learner):
    """(file, line) of the return that only targets reach, where forward returns None without them."""
    code = getattr(type(m).forward, '__code__', None)
    with contextlib.suppress(Exception), torch.no_grad():
        if code is not None and m(torch.zeros(1, 1, dtype=torch.long)) is None:
            tree = learner.parsed(code)
            back = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Return) and n.value is not None]
            return (code.co_filename, code.co_firstlineno + min(back) - 1) if back else None
    return None

def assigned(learner, at):
    """The line before a call at `at` (self(idx_cond)), in its function, that last sets the name it passes;
    else at."""
    passed = re.search(r'\(\s*(\w+)', learner.source(at))
    for i in range(at[1] - 1, max(0, at[1] - 30), -1) if passed else []:
        if re.match(rf'{passed[1]}\s*=[^=]', learner.source((at[0], i))):
            return at[0], i
        if learner.source((at[0], i)).startswith('def '): # (in the same function only)
            break
    return at

def sampling(m, block, learner):
    """What generate does wrong, from a prompt of 1 token and of block_size - 1, 3 new each: [(kind, words)],
    and ('held', words). The model gets 1, 2, 3 tokens, then block_size - 1, block_size, block_size (or on,
    where it can); generate returns the prompt and the new tokens, sampled from the last position."""
    # given: (what the model got, where)
    fed, probs, said, held, given, drawn = [], [], [], 'generate runs', [], []
    stuck = False
    forward, multinomial, alone = m.forward, torch.multinomial, last_alone(m, block)
    cached = any(w in p.lower() for s in safe_modules(m) for p in inspect.signature(s.forward).parameters
                 for w in ('cache', 'past')) # (keys and values kept between calls)
    modes = [] # whether the model was in training mode at each call
    def watched(*args, **kwargs): # (self(idx) and self.forward(idx) alike)
        modes.append(m.training)
        given.append((tensors((args, kwargs))[0], learner.line()))
        fed.append(forward(*args, **kwargs))
        return fed[-1]
    m.forward = watched
    V, topk = vocab(m), [] # topk: how many tokens it samples among, where not all V
    def sampled(*args, **kwargs): # (multinomial(probs, 1) or multinomial(input=probs, num_samples=1))
        p, token = (args or [kwargs.get('input')])[0], multinomial(*args, **kwargs)
        row = p.reshape(-1, p.shape[-1])[0]
        if p.shape[-1] < V or (p == 0).any(): # (among the top k: an index into them, or a token of them)
            topk.append(int((row > 0).sum()))
        # (sorted: top-p's index)
        if p.shape[-1] < V or bool((row[:-1] >= row[1:]).all() and row[0] > row[-1]):
            return token
        probs.append((p, learner.line()))
        drawn.append(token)
        return token
    torch.multinomial = sampled
    # what their generate appends to idx each step: (their line, how many tokens, whether
    # it is the token just drawn: None where none was)
    cat, cats = torch.cat, []
    def appended(ts, *a, **k):
        if len(ts) == 2 and all(isinstance(t, torch.Tensor) and t.dim() == 2 and not t.is_floating_point() for t in ts):
            last = drawn[-1].reshape(-1) if drawn else None
            cats.append((learner.line(), ts[1].shape[-1], None if last is None else torch.equal(ts[1].reshape(-1), last)))
        return cat(ts, *a, **k)
    torch.cat = appended
    # a notebook's block_size, since made larger
    names = getattr(getattr(m, 'generate', None), '__globals__', {})
    later = {k: v for k, v in names.items() if MEANING.get(norm(k)) == 'block_size' and type(v) is int and v > block
             and learner.path.endswith(('.ipynb', NOTEBOOK))} # (its model was built, and ran, with block's)
    names.update(dict.fromkeys(later, block))
    try:
        phases = [(1, 3), (max(1, block - 1), 3)]
        while phases:
            (start, new), given[:], drawn[:], before = phases.pop(0), [], [], len(fed)
            with torch.no_grad():
                out, e, prompted = generate(m.eval(), torch.zeros(1, start, dtype=torch.long), new, block)
                as_text = prompted in ('text', 'array', 'row') # (one prompt, not a batch)
            lengths = [x.shape[-1] for x, _ in given]
            if len(lengths) == new + 1 and lengths[:2] == [start, start]: # (the prompt run first: harmless)
                del given[0], fed[before], lengths[0]
            if not prompted: # it starts from a token of its own: past block_size from there (a small one)
                phases = [(1, block + 2)] if new == 3 and block <= 64 else []
            if e is not None:
                # (the checker's call, or a settings object of its guess that lacks what they read: said)
                last = traceback.extract_tb(e.__traceback__)[-1]
                if not learner.raised(e) or last.filename.startswith(OURS[1]) and last.name == '__getattr__':
                    return [('note', f"generate not checked: the checker can't call it ({message(e)})")]
                where = failed(m, e, lengths, start, block, learner) # (with what the shorter prompt showed)
                return [*dict.fromkeys(said), *options(m), ('mistake', f"generate fails{where}: {message(e)}")]
            if new == 3 and not prompted:
                said.append(('variant', "generate takes no prompt: it starts from a token of its own, where the "
                                        "lecture's continues the idx it is given"))
                if len(lengths) != new: # (its count takes in the token it starts from)
                    said.append(('variant', f"generate samples {len(lengths)} tokens when asked for {new}: its "
                                            "count is of all it returns, where the lecture's counts the new ones"))
            if new == 3 and prompted in ('array', 'row'):
                one = 'NumPy array' if prompted == 'array' else '1-D tensor'
                said.append(('variant', f"generate takes one prompt as a {one}, where the lecture's takes a (B, T) "
                                        "tensor of prompts"))
            if new == 3 and isinstance(out, Yielded):
                said.append(('variant', "generate yields as it goes (a Python generator), where the lecture's "
                                        "returns idx whole"))
            if new == 3 and type(out) is list and len(out) == new:
                said.append(('variant', "generate returns a Python list of the new tokens, where the lecture's returns "
                                        "idx with them, a (B, T + max_new_tokens) tensor"))
            if new == 3 and isinstance(out, str):
                said.append(('variant', "generate returns text, where the lecture's returns the tokens (to decode)"))
            if new == 3 and out is None and len(lengths) == new: # (it prints as it goes)
                words = "generate returns nothing (None), where the lecture's returns idx with the new tokens"
                said.append(('variant', words))
            cropped, grown = ([min(start + i, b) for i in range(len(lengths))] for b in (block, math.inf))
            short = max(lengths, default=0) if 1 < max(lengths, default=0) < block else 0 # (a crop too short)
            crop = assigned(learner, given[-1][1]) if given and given[-1][1] else None
            # (one short, as its line writes it: idx[:, -block_size+1:])
            one_short = crop is not None and re.search(r'[-+]\s*1\s*\)?\s*:', learner.source(crop))
            # the line that appends too much
            wrong = next(((at, n) for at, n, _ in cats if at and n != 1), None)
            # one that appends another
            other = next((at for at, _, fresh in cats if at and fresh is False), None)
            appends = f" ({learner.place(wrong[0])}: `{learner.source(wrong[0])}` appends {wrong[1]} tokens at " \
                      "once, not the one sampled)" if wrong else ''
            # (not the token just drawn)
            stale = [at for (x, at), d in zip(given[1:], drawn) if len(given) == len(drawn) and x.shape[0] == d.shape[0]
                     and not torch.equal(x[:, -1], d.reshape(x.shape[0], -1)[:, -1])]
            if stale and other:
                said.append(('mistake', f"generate appends another tensor than the token it has just sampled ("
                             f"{learner.place(other)}: `{learner.source(other)}`)"))
            elif stale:
                crop = assigned(learner, stale[0]) if stale[0] else None
                at = f" ({learner.place(crop)}: `{learner.source(crop)}`)" if crop else ''
                said.append(('mistake', f"generate feeds the model tokens that don't end with the one it has just "
                             f"sampled{at}: crop to the last block_size, idx[:, -block_size:]"))
            if set(lengths) == {1} and alone: # (a bigram: the last token is all it reads)
                held = 'generate feeds the last token only, all that the model reads'
            # (the prompt once, then each new token, beside its cache)
            elif set(lengths[1:]) == {1} and cached:
                held = 'generate feeds each new token beside its cache of keys and values'
            elif lengths not in (cropped, grown) and not stuck and one_short and lengths == [
                    min(start + i, short) for i in range(len(lengths))]:
                at = f" ({learner.place(crop)}: `{learner.source(crop)}`)"
                said.append(('mistake', f"generate crops what the model gets to {short} tokens{at}, where "
                                        f"the model takes block_size = {block}: crop to the last block_size, "
                                        "idx[:, -block_size:]"))
            elif lengths not in (cropped, grown) and set(lengths) == {start}:
                # (appends, then drops the first)
                kept = next((f" ({learner.place(at)}: `{learner.source(at)}`)" for at, *_ in cats[::-1] if at and
                             re.search(r'cat\(.*\)\s*\[', learner.source(at))), '')
                said.append(('mistake', f"generate feeds the model the prompt's length only: the context never "
                             f"grows{kept}: keep idx whole, and crop what the model gets to the last block_size"))
                stuck = True # (from any prompt: not a crop too short)
            elif lengths not in (cropped, grown):
                said.append(('mistake', f"generate feeds the model {lengths} tokens from a prompt of {start}: it "
                                        f"should grow by one to block_size{appends}"))
            if lengths == cropped != grown:
                held = 'generate crops to block_size and runs past it'
            elif lengths and max(lengths) > block:
                held = 'generate runs past block_size'
            if not drawn and not topk and greedy(out, fed[before:], start, new, V):
                said.append(('variant', "generate takes the likeliest token each step (greedy), where the "
                                        "lecture samples one (torch.multinomial)"))
            size = out.shape[-1] if isinstance(out, torch.Tensor) else start + new
            # (not their result)
            if size > start + new and prompted and not as_text and not (wrong or other or stale):
                said.append(('mistake', f"generate samples {size - start} new tokens when asked for {new} (the "
                                        "lecture's max_new_tokens counts them)"))
            elif size not in (start + new, new) or size == new != start + new and prompted:
                said.append(('note', f"generate returns {size} tokens for a prompt of {start} and {new} new (the "
                                     "lecture's: both)"))
        kept = len(fed), len(probs)
        modes.clear() # called in training mode: whether it samples in it
        with torch.no_grad():
            generate(m.train(), torch.zeros(1, 1, dtype=torch.long), 1, block)
        if modes and not any(modes):
            said.append(('variant', "generate puts the model in eval mode itself (no dropout while it samples), "
                                    "where the lecture's samples in the mode the model is in"))
        given[:] = []
        with torch.no_grad(): # the lecture's samples each row of idx: a batch of 2 prompts
            out, e, prompted = generate(m.eval(), torch.zeros(2, 1, dtype=torch.long), 2, block)
        del fed[kept[0]:], probs[kept[1]:]
        # (.item() on each token: it prints one stream)
        one = learner.raised(e) and 'converted to Scalar' not in str(e) if e else \
            isinstance(out, torch.Tensor) and out.shape[0] != 2
        if prompted and one and not as_text:
            said.append(('mistake', "generate takes one prompt only: on a batch of 2 it " + (f"raises {message(e)}"
                         if e else f"returns {tuple(out.shape)}") + " (the lecture's samples each row of idx)"))
        elif prompted and not e and not as_text and given and given[0][0].shape[:2] == (1, 2):
            said.append(('variant', "generate reads idx as one prompt: a batch of 2 rows runs as one row of 2 "
                                    "tokens, where the lecture's samples each row"))
    finally:
        del m.forward
        torch.multinomial, torch.cat = multinomial, cat
        names.update(later)
    last = likeliest(fed, V)
    wrong = [at for (p, at), i in zip(probs, last) if p.reshape(-1).argmax() != i] if len(probs) == len(last) else []
    odds = tempered(probs, fed, V, learner) if probs and len(probs) == len(last) else []
    # (a penalty may move the likeliest token)
    if wrong and not any(kind == 'mistake' or 'changes the odds' in words for kind, words in odds):
        at = f": {learner.place(wrong[0])} samples `{learner.source(wrong[0])}`" if wrong[0] else ''
        said.append(('mistake', f"generate samples from something else than the last position's logits "
                                f"(logits[:, -1, :]){at}"))
    else:
        said += odds
    measured = ' '.join(w for _, w in said) # (an option whose effect is named already: once)
    if topk:
        measured += ' top'
    knobs = options(m, measured)
    for p in inspect.signature(m.generate).parameters.values(): # (a context length of its own, smaller)
        if meaning(p.name) == 'block_size' and 'block' in norm(p.name) and type(p.default) is int and p.default < block:
            said.append(('mistake', f"generate's {p.name} defaults to {p.default}, where the model's block_size is "
                                    f"{block}: called without it, generate feeds the model {p.default} tokens at most"))
    said += knobs
    if len(set(topk)) > 1: # (a count that changes with the odds: top-p)
        said.append(('variant', f"generate samples among the likeliest tokens that hold a share of the odds (top-p, "
                                f"here {min(topk)} to {max(topk)} tokens), where the lecture samples among all {V}"))
    elif topk:
        said.append(('variant', f"generate samples among the {min(topk)} likeliest tokens (top-k), where the "
                                f"lecture samples among all {V}"))
    return list(dict.fromkeys(said)) + [('held', held)]

def likeliest(fed, V):
    """For each of the model's logits (B, T, vocab) fed, its first row's likeliest last token."""
    return [by_position(f, V)[0, -1].argmax() for f in map(out_of, fed)
            if isinstance(f, torch.Tensor) and f.dim() == 3]

def cause_of(e):
    """Words for a raise whose cause its line shows: a view or reshape by the settings (batch_size * block_size),
    not by the tensor's own shape; a Python number where torch takes a tensor (torch.sqrt(head_size)). Else None."""
    theirs = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith(OURS)]
    text = theirs[-1].line.strip() if theirs and theirs[-1].line else ''
    number = re.match(r"(\w+)\(\): argument '\w+' \(position \d\) must be Tensor, not (int|float)", str(e))
    if number and f'{number[1]}(' in text:
        return (f"`{text}` gives torch.{number[1]} a Python {number[2]}, where it takes a tensor: math.{number[1]}"
                f" is meant ({message(e)})")
    sizes = [n for n in re.findall(r'\w+', text) if 'batch' in n.lower() or MEANING.get(norm(n)) == 'block_size']
    if 'is invalid for input of size' not in str(e) or not re.search(r'\.(view|reshape)\(', text) or not sizes:
        return None
    return (f"`{text}` reshapes by the settings ({', '.join(dict.fromkeys(sizes))}), not by the tensor's own "
            f"shape, so any other batch raises ({message(e)}); the lecture takes B, T, C from the tensor's shape")

def options(m, measured=''):
    """[a variant] for what generate takes beside the prompt and the count, run at its default: nanoGPT's
    temperature and top_k, an option of its own (strategy='greedy')."""
    params = inspect.signature(m.generate).parameters.values()
    nano = [p.name for p in params if re.search(r'temp|top_?[kp]', p.name.lower())]
    knobs = [n for n in nano if not ('temp' in n.lower() and 'temperature of' in measured or
                                     'top' in n.lower() and ' top' in measured)]
    # (what the checker gives it: the prompt, the count, block_size, the device)
    given = lambda p: norm(p.name) in IDX or counts(norm(p.name)) and type(p.default) is int or \
        p.default in ('cpu', 'cuda') or meaning(p.name) in ('block_size', 'device')
    own = [f"{p.name}={p.default!r}" for p in params if p.default is not p.empty and p.name not in nano and
           not given(p)]
    said = [f"{' and '.join(knobs)} (as nanoGPT)"] if knobs else []
    said += [', '.join(own)] if own else []
    return [('variant', f"generate takes {words}, which the lecture's has not") for words in said]

def tempered(probs, fed, V, learner):
    """What generate samples from, beside the softmax of the last logits: the same, one with a temperature (a
    variant), or the same odds for every token (a mistake)."""
    p, at = probs[0]
    z = next(by_position(f, V)[0, -1].double() for f in map(out_of, fed) if isinstance(f, torch.Tensor) and f.dim() == 3)
    p = p.reshape(-1, V)[0].double()
    z, logp = z[p > 0], p[p > 0].log() # (top-k's or top-p's tokens: those it samples among)
    z, logp = z - z.mean(), logp - logp.mean()
    line = f" ({learner.place(at)}: `{learner.source(at)}`)" if at else ''
    if logp.abs().max() < 1e-4:
        return [('mistake', f"generate samples every token with the same odds, whatever the logits{line}, where "
                            "the lecture samples from softmax(logits[:, -1, :], dim=-1)")]
    fits = torch.ones_like(z, dtype=torch.bool)
    for within in (1e-1, 1e-2, 1e-3): # log p = z / temperature + a constant, on the tokens that fit it
        slope = float((z[fits] * logp[fits]).sum() / (z[fits] ** 2).sum().clamp_min(1e-12))
        shift = float((logp - slope * z)[fits].median())
        fits = (logp - slope * z - shift).abs() < within
    if fits.float().mean() < 0.9:
        return [('mistake', f"generate samples from odds that aren't the softmax of the last position's logits"
                            f"{line}, where the lecture samples from softmax(logits[:, -1, :], dim=-1)")]
    if not fits.all():
        return [('variant', f"generate changes the odds of {int((~fits).sum())} of the tokens before it samples (a "
                            f"repetition penalty?){line}, where the lecture samples from the logits as they are")]
    if abs(slope - 1) < 1e-3:
        return []
    return [('variant', f"generate samples at a temperature of {1 / slope:.3g}{line}, where the lecture "
                        "samples at 1, from the softmax of the logits as they are")]

def greedy(out, fed, start, new, V):
    """Whether each of the new tokens generate returned is the likeliest after the logits before it."""
    # (a count of all it returns: fewer)
    n = min(new, out.shape[-1] - start) if isinstance(out, torch.Tensor) else 0
    with contextlib.suppress(Exception):
        tokens = torch.stack(likeliest(fed[-n:], V)).to(out.dtype)
        return n > 0 and len(fed) >= n and torch.equal(out[0, -n:], tokens)
    return False

def last_only(m, idx):
    """Whether the model called without its targets gives the logits of the last position only."""
    with contextlib.suppress(Exception):
        return bool(targets_of(m)) and out_of(m(idx)).numel() == len(idx) * vocab(m) < idx.numel() * vocab(m)
    return False

def last_alone(m, T):
    """Whether the last position's logits are the same from its token alone (a bigram's): cropping to it is
    harmless."""
    idx = torch.randint(vocab(m), (1, T), generator=torch.Generator().manual_seed(1))
    with contextlib.suppress(Exception), torch.no_grad():
        return torch.allclose(logits_of(m.eval(), idx)[:, -1], logits_of(m, idx[:, -1:])[:, -1], atol=1e-5)
    return False

MODEL = {norm(n) for n in 'model m net gpt lm transformer'.split()}

def standalone(m, learner):
    """The file's own generate beside the model, generate(model, idx, n), bound to m; else None."""
    for node, names in learner.functions:
        fn = names.get(node.name)
        params = list(inspect.signature(fn).parameters) if inspect.isfunction(fn) else []
        if any(w in node.name.lower() for w in ('generate', 'sample')) and params and norm(params[0]) in MODEL:
            return functools.partial(fn, m)
    return None

def invariants(m, T, learner, block):
    """([(kind, words) of what fails: the past never hears the future, batch rows never talk (at T), generate
    (at block), the loss at init near ln(vocab)], the loss at init)."""
    V, g = vocab(m), torch.Generator().manual_seed(0)
    idx, targets = torch.randint(V, (2, T), generator=g), torch.randint(V, (2, T), generator=g)
    later, other = idx.clone(), idx.clone()
    later[:, T // 2:], other[1] = (later[:, T // 2:] + 1) % V, (other[1] + 1) % V
    problems, loss = [], None
    try:
        with torch.no_grad():
            logits = logits_of(m.eval(), idx)
            if last_only(m, idx):
                problems.append(('variant', "without targets, the logits of the last position only (as nanoGPT, "
                                            "for generate), where the lecture's are of every position"))
            if not targets_of(m) and isinstance(m(idx), torch.Tensor): # (the loss left to the training loop)
                words = ("its forward takes no targets and returns the logits alone, where the lecture's also "
                         "returns the loss (F.cross_entropy) when given targets")
                problems.append(('variant', words))
            if not torch.allclose(logits_of(m, later)[:, :T // 2], logits[:, :T // 2], atol=1e-5):
                problems.append(('mistake', "a future token changes an earlier output"))
            if not torch.allclose(logits_of(m, other)[0], logits[0], atol=1e-5):
                problems.append(('mistake', "one example in a batch changes another's output"))
            out = m(idx, **{targets_of(m): targets}) if targets_of(m) else None
            loss = loss_in(out)
            if targets_of(m) and isinstance(out, torch.Tensor) and loss is None:
                words = (f"its forward takes {targets_of(m)} but never uses them: it returns the logits "
                         "alone, where the lecture's also returns the loss (F.cross_entropy)")
                problems.append(('variant', words))
            if isinstance(out, (tuple, list)) and len(out) > 1 and loss is not None and out[0] is loss:
                problems.append(('variant', "its forward returns (loss, logits), where the lecture's returns "
                                            "(logits, loss)"))
            with contextlib.suppress(Exception): # (more than block_size tokens: the last block_size kept)
                if out_of(m(torch.randint(V, (1, block + 2), generator=g))).shape[:2] == (1, block):
                    problems.append(('variant', "its forward crops idx to the last block_size tokens itself, "
                                                "where the lecture's crops in generate"))
        beside = None if hasattr(m, 'generate') else standalone(m, learner)
        # (a method by another name: generator, generate_text)
        other = [n for n in dir(type(m)) if re.match('generat|sample', n) and
                 inspect.isfunction(getattr(type(m), n))]
        if beside is None and other and not hasattr(m, 'generate'):
            beside = getattr(m, other[0])
            problems.append(('variant', f"generate is named {other[0]}, where the lecture's is generate"))
        elif beside is not None: # (checked as the model's own, for the time of the check)
            problems.append(('variant', f"generate is a function beside the model ({beside.func.__name__}("
                                        "model, ...)), where the lecture's is the model's method"))
        if beside is not None:
            m.generate = beside
        try:
            problems += sampling(m, block, learner) if hasattr(m, 'generate') else []
        finally:
            if beside is not None:
                del m.generate
    except Exception as e: # the model itself fails: its own line says where
        return [('mistake', cause_of(e) or f"running it raised {message(e)}")], None
    # (at init: about ln V, give or take its noise)
    near = lambda loss: math.log(V) - 0.25 < loss.item() < math.log(V) + 1
    if loss is not None and not near(loss):
        words = f"its loss at init is {loss.item():.2f}, where about ln {V} = {math.log(V):.2f} is expected"
        again = None
        with contextlib.suppress(Exception): # (a model that can't be copied)
            drawn = drawn_as_the_lectures(m)
            with torch.no_grad():
                again = loss_in(drawn(idx, **{targets_of(m): targets}))
        if again is not None and near(again): # (their init, or PyTorch's: what it costs, not a mistake)
            words = f"its weights drawn otherwise than the lecture's, which takes the loss at init away " \
                    f"from ln {V} ({again.item():.2f} with the lecture's, std 0.02)"
            problems.append(('variant', words))
        else:
            problems.append(('mistake', f"{words} (the lecture's 4.2 to 4.9)"))
    return problems, loss

def loss_in(out):
    """The loss in what forward returns with targets ((logits, loss), {'loss': ...}, the loss); else None."""
    loss = out.get('loss') if isinstance(out, dict) else out
    if isinstance(out, (tuple, list)): # (in either order)
        loss = next((t for t in out if isinstance(t, torch.Tensor) and t.numel() == 1), None)
    return loss if isinstance(loss, torch.Tensor) and loss.numel() == 1 else None

def drawn_as_the_lectures(m):
    """A copy of m, its Linear and Embedding weights drawn as the lecture's (normal, std 0.02; biases 0)."""
    m = copy.deepcopy(m)
    for s in m.modules():
        if isinstance(s, (nn.Linear, nn.Embedding)):
            nn.init.normal_(s.weight, std=0.02, generator=torch.Generator().manual_seed(0))
        if isinstance(s, nn.Linear) and s.bias is not None:
            nn.init.zeros_(s.bias)
    return m
