"""scripts/check.py on code as learners write it: tests/fixtures/learners holds files written for these
tests (scripts, a notebook, a project of several files), with names, signatures, layouts and stages of
their own. Each says in its `# expect` lines the verdict it must get; every file not expected to differ
must match in every part."""
import json
import math
import os
import re
import shutil
import textwrap
import sys

import pytest

from conftest import ROOT, run_here
from test_check import LABEL, cited, parts

LEARNERS = os.path.join(ROOT, 'tests', 'fixtures', 'learners')
FILES = sorted(os.path.relpath(os.path.join(d, f), LEARNERS) for d, _, files in os.walk(LEARNERS) for f in files
               if f.endswith(('.py', '.ipynb')) and f not in ('config.py', 'layers.py', 'model.py'))


def expected(path):
    """(exit code, {part: how its line starts}, notes, summary) from the file's `# expect` lines."""
    with open(path, encoding='utf-8') as f:
        text = f.read()
    if path.endswith('.ipynb'):
        text = ''.join(line for cell in json.loads(text)['cells'] for line in cell['source'])
    said = re.findall(r'^# expect( exit| note| mistake| summary)?: (.*)$', text, re.M)
    lines = dict(LABEL.match(rest).groups() for kind, rest in said if not kind)
    pick = lambda k: [rest for kind, rest in said if kind == k]
    return int(pick(' exit')[0]), lines, [f'note: {n}' for n in pick(' note')] + [
        f'mistake: {m}' for m in pick(' mistake')], pick(' summary')


# what the checker says beside its catalogue, from a step's value, as a part runs, as a model runs, as a file loads
MEASURED = ['where the lecture has the softmax over the keys', "masked_fill's result is never assigned", 'the mask lets the future through',
            'the future filled with 0, not -inf', 'the affinities scaled by 2.98e-08',
            'changes the position embedding', 'changes the Blocks applied in turn', 'makes nothing like it',
            'comes after lm_head', 'is a plain Python list', 'made while it runs, not in __init__',
            'heads together are', 'dropout on the residual stream', 'repeated ([Block(...)] * n)',
            'in eval mode its dropout still acts',
            "F.scaled_dot_product_attention's dropout_p", 'dropout on the attention of ln1(x)',
            'is defined but never used', 'a future token changes an earlier output',
            "one example in a batch changes another's output", 'generate fails', "feeds the model the prompt's length",
            'takes one prompt only', 'each head reads', 'one LayerNorm normalizes', 'no dropout after',
            'its loss at init is', 'otherwise it matches', 'is not forward (misspelt)',
            'pip install', 'not written yet', "can't build", 'building it builds', 'left out', 'no model of yours uses',
            'a bias by distance added to the affinities', 'positions from the attention', 'samples at a temperature',
            'with the same odds', "odds that aren't the softmax", 'returns a Python list', 'plain tensors, not',
            'that hold a share of the odds (top-p', 'changes the odds of 1 of the tokens',
            'which __init__ never makes', 'reshapes by the settings', 'gives torch.sqrt a Python int',
            'fed one token at a time', 'new tokens when asked for',
            'takes temperature (as nanoGPT)', 'defaults to 4, where the model', 'as a 1-D tensor']


def named_in_a_test():
    """What the tests that run scripts/check.py expect it to say: the fixtures' `# expect` lines and the
    mistakes that test_check.py and this file make in a copy."""
    import test_check
    said = [m[2] for m in test_check.MISTAKES + MISTAKES + NANOGPT + BATCHED + BY_VOCAB + WRAPPED] + [
        said for _, said in SAMPLED + OWN_LAYERS] + [said for _, _, said, _ in EXPLAINED] + [
        said for _, _, said in RUN_AS_THEY_MEAN] + [
        line for f in FILES for line in [*expected(os.path.join(LEARNERS, f))[1].values(), *expected(
            os.path.join(LEARNERS, f))[2]]] + [said for _, said in test_check.VIDEO]
    return '\n'.join(said)


def test_every_mistake_and_variant_the_checker_names_is_named_by_a_test_that_runs_it():
    """Each entry of the checker's catalogue and each thing it measures: a fixture (or a mistake made in a
    copy of one) that gets it, run through scripts/check.py by the tests here and in test_check.py."""
    from checker.lecture import CATALOGUE, MISSING, STRUCTURE
    every = {e[3] for entries in CATALOGUE.values() for e in entries} | {w for _, w in STRUCTURE.values()} | \
        set(MISSING.values())
    tested = named_in_a_test()
    key = lambda words: next(k for k in (re.split(r':|;|,| \(', words)[0], words[:30]) if len(k) >= 8) # its gist
    missing = sorted({words for words in every | set(MEASURED) if key(words) not in tested})
    assert not missing, missing


@pytest.mark.parametrize('name', FILES)
def test_each_learners_file_gets_its_verdict(name):
    path = os.path.join(LEARNERS, name)
    code, lines, notes, summary = expected(path)
    modules = set(sys.modules)
    r = run_here('scripts/check.py', path)
    assert r.returncode == code and r.stderr == '', r.stdout + r.stderr
    found = parts(r.stdout)
    for part, start in lines.items(): # (a line that ends in $: the whole line)
        said = found.get(part, '') + '$' * start.endswith('$')
        assert said == start if start.endswith('$') else said.startswith(start), f"{part}: {said}\n{r.stdout}"
    if code == 0:
        assert all(line.startswith('matches') for line in found.values()), r.stdout
    for note in notes:
        assert any(line.startswith(note) for line in r.stdout.splitlines()), r.stdout
    for line in summary:
        assert r.stdout.splitlines()[-1].startswith(line), r.stdout
    assert not {'learner', 'model', 'config', 'layers', 'utils', 'einops', 'tqdm'} & (set(sys.modules) - modules)


RENAMED = os.path.join(LEARNERS, 'renamed_layers.py')
MISTAKES = [ # (the part, the change to renamed_layers.py, what the checker says, the line it cites: the first with this)
    ('SelfAttentionHead', [(' / self.wk.out_features ** 0.5', '')], 'the 1/sqrt(head_size) scale is missing',
     'scores = self.wq'),
    ('SelfAttentionHead', [("        scores = scores.masked_fill(~self.causal[:T, :T], float('-inf'))\n", '')],
     'no causal mask', 'scores.softmax'),
    ('SelfAttentionHead', [('scores.softmax(-1)', 'scores.softmax(1)')], '`return self.drop(scores.softmax(1)) @ self.wv(x)` where the lecture has the softmax',
     'scores.softmax'),
    ('SelfAttentionHead', [('scores.softmax(-1)', 'scores.softmax(0)')], '`return self.drop(scores.softmax(0)) @ self.wv(x)` where the lecture has the softmax',
     'scores.softmax'),
    ('SelfAttentionHead', [('@ self.wv(x)', '@ x')], 'x itself aggregated, not value(x)', '.softmax(-1)) @ x'),
    ('SelfAttentionHead', [('@ self.wv(x)', '@ self.wq(x)')], # (copied from the line above)
     '`return self.drop(scores.softmax(-1)) @ self.wq(x)` applies `wq` again, to the same input, where `wv`, never '
     'used, belongs', 'return self.drop'),
    ('Attention', [('return self.drop(self.out(torch.cat', 'return self.drop((torch.cat')], 'no proj after the heads',
     'return self.drop((torch.cat'),
    ('MLP', [('self.fc2(F.relu(self.fc1(x)))', 'self.fc2(self.fc1(x))')], 'no ReLU between the two Linear layers',
     'self.fc2(self.fc1'),
    ('MLP', [('4 * d_model)', '2 * d_model)'), ('(4 * d_model, d_model)', '(2 * d_model, d_model)')],
     'not 4x wider inside', 'self.fc1 = '),
    ('DecoderBlock', [('x = x + self.attn(self.norm1(x))', 'x = self.attn(self.norm1(x))'),
                      ('x = x + self.mlp(self.norm2(x))', 'x = self.mlp(self.norm2(x))')],
     'no residual connection around the attention; and line 68: no residual connection around the feed-forward',
     'x = self.attn('),
    ('DecoderBlock', [('x = x + self.attn(self.norm1(x))', 'x = self.norm1(x + self.attn(x))'),
                      ('x = x + self.mlp(self.norm2(x))', 'x = self.norm2(x + self.mlp(x))')], 'post-norm',
     'x = self.norm1('),
    ('DecoderBlock', [('x = x + self.mlp(self.norm2(x))', 'x = x + self.mlp(self.norm1(x))')],
     'one LayerNorm before both parts', 'x = x + self.mlp('),
    ('SelfAttentionHead', [(' / self.wk.out_features ** 0.5', ' * self.wk.out_features ** 0.5')],
     'multiplied by sqrt(head_size), not divided', 'scores = self.wq'),
    ('SelfAttentionHead', [(' / self.wk.out_features ** 0.5', ' / self.wk.out_features')],
     'divided by head_size, not by its square root', 'scores = self.wq'),
    ('SelfAttentionHead', [("~self.causal[:T, :T], float('-inf')", "~self.causal[:T, :T], 0.0")],
     'the future filled with 0, not -inf', 'scores = scores.masked_fill'),
    ('MLP', [('self.fc1 = nn.Linear(d_model, 4 * d_model)', 'self.fc1 = nn.Linear(d_model, d_model)'),
             ('        self.fc2 = nn.Linear(4 * d_model, d_model)\n', ''),
             ('self.drop(self.fc2(F.relu(self.fc1(x))))', 'self.drop(F.relu(self.fc1(x)))')], 'one Linear layer',
     'self.fc1 = '),
    ('DecoderBlock', [('x = x + self.attn(self.norm1(x))', 'x = self.attn(self.norm1(x))')],
     'no residual connection around the attention', 'x = self.attn('),
    ('DecoderBlock', [('x = x + self.attn(self.norm1(x))', 'x = self.norm1(x)\n        x = x + self.attn(x)'),
                      ('x = x + self.mlp(self.norm2(x))', 'x = self.norm2(x)\n        x = x + self.mlp(x)')],
     'LayerNorm applied to x itself (x = ln(x)), not to the input of each part (and line 69)', 'x = self.norm1(x)'),
    ('DecoderBlock', [('        x = x + self.attn(self.norm1(x))\n        x = x + self.mlp(self.norm2(x))\n',
                       '        x = x + self.mlp(self.norm2(x))\n        x = x + self.attn(self.norm1(x))\n')],
     'the feed-forward before the attention', 'x = x + self.mlp('),
    ('DecoderBlock', [('self.norm1 = nn.LayerNorm(d_model)', 'self.norm1 = nn.Identity()'),
                      ('self.norm2 = nn.LayerNorm(d_model)', 'self.norm2 = nn.Identity()')],
     'no LayerNorm before the attention and the feed-forward', 'x = x + self.attn('),
    ('CharGPT', [('self.head(self.final_norm(self.layers(h)))', 'self.head(self.final_norm(h))')],
     'the blocks never applied between the embeddings and lm_head; your `layers` is defined but never used',
     'logits = self.head'),
    ('CharGPT', [('self.head(self.final_norm(self.layers(h)))', 'self.head(self.layers(h))')],
     'no final LayerNorm (ln_f) before lm_head; your `final_norm` is defined but never used', 'logits = self.head'),
    ('CharGPT', [('self(context[:, -seq_len:])', 'self(context[:, :seq_len])')], # (the first block_size tokens)
     "generate feeds the model tokens that don't end with the one it has just sampled (line 91: "
     "`logits, _ = self(context[:, :seq_len])`): crop to the last block_size", None),
    ('CharGPT', [('logits, _ = self(context[:, -seq_len:])', 'cond = context[:, :seq_len]\n'
                  '            logits, _ = self(cond)')], # (the crop on a line of its own: named there)
     "generate feeds the model tokens that don't end with the one it has just sampled (line 91: "
     "`cond = context[:, :seq_len]`): crop to the last block_size", None),
    ('CharGPT', [('h = self.tok_emb(tokens) + self.pos_emb(', 'h = self.tok_emb(tokens) + 0 * self.pos_emb(')],
     'no position embedding', 'h = self.tok_emb'),
    ('CharGPT', [('seq_len = 16', 'seq_len = 80'), # a table longer than the vocabulary: no IndexError
                 ('self.pos_emb(torch.arange(T, device=tokens.device))', 'self.pos_emb(tokens)')],
     'the position table looked up with idx', 'h = self.tok_emb'),
]


SPLIT = '        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)\n' + ''.join(
    f'        {t} = {t}.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)\n' for t in 'kqv')
INTERLEAVED = ('        qkv = self.c_attn(x).view(B, T, self.n_head, C // self.n_head, 3).permute(4, 0, 2, 1, 3)\n'
               '        k, q, v = qkv[0], qkv[1], qkv[2]\n') # (each head's q, k and v interleaved, k first)
NANOGPT = [ # the same, in nanoGPT's layout: its fused attention, its own LayerNorm
    ('CausalSelfAttention', [(f'{t} = {t}.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)',
                              f'{t} = {t}.reshape(B, self.n_head, T, C // self.n_head)') for t in 'kqv'],
     'the heads split with view(B, nh, T, hs)', 'k = k.reshape'),
    ('CausalSelfAttention', [('y.transpose(1, 2).contiguous().view(B, T, C)', 'y.contiguous().view(B, T, C)')],
     'the heads joined with view(B, T, C) before transposing them back', 'y = y.contiguous()'),
    ('CausalSelfAttention', [('is_causal=True', 'is_causal=False')], 'no causal mask', 'y = F.scaled_dot'),
    ('CausalSelfAttention', [(SPLIT, INTERLEAVED), ('y.transpose(1, 2).contiguous().view(B, T, C)', 'y.contiguous()'
                              '.view(B, T, C)')], 'the heads joined with view(B, T, C) before transposing them back',
     'y = y.contiguous()'), # (q, k and v read from the values their code split: the mistake still seen)
    ('LayerNorm', [('return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)',
                    'mean, var = input.mean(0), input.var(0, unbiased=False)\n'
                    '        return (input - mean) / (var + 1e-5).sqrt() * self.weight + self.bias')],
     'normalized over the batch (dim 0)', 'mean, var ='),
    ('LayerNorm', [('return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)',
                    'mean, var = input.mean(1, keepdim=True), input.var(1, keepdim=True, unbiased=False)\n'
                    '        return (input - mean) / (var + 1e-5).sqrt() * self.weight + self.bias')],
     'normalized over the positions (dim 1 of (B, T, C))', 'mean, var ='), # (where dim 1 is written)
    ('LayerNorm', [('return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)',
                    'mean, var = input.mean(1, keepdim=True), input.var(1, keepdim=True)\n'
                    '        return (input - mean) / (var + 1e-5).sqrt() * self.weight + self.bias')],
     "normalized over the positions (dim 1 of (B, T, C)), not over each vector; a variant, the unbiased variance",
     'mean, var ='), # (two changes: its mean kept (B, 1, C) found as it is)
]


BATCHED = [ # the same, on scores of four dimensions, (B, n_head, T, T), written out
    ('BatchedAttention', [('self.tril[:T, :T] == 0', 'self.tril == 0')], # (the whole mask: T must be block_size)
     "it runs on block_size = 32 tokens only, and generate needs fewer (cut the mask to T, tril[:T, :T]); on 31, "
     "mine.py, line 35: RuntimeError", None),
    ('GPT', [('torch.arange(T)', 'torch.arange(block_size)')], # (the model's, where its attention is right)
     "generate fails from a prompt of 1: the model runs on exactly block_size = 32 tokens only, where the lecture's "
     "runs on any number up to it: mine.py, line 75: RuntimeError", None),
    ('GPT', [('logits, _ = self(idx[:, -block_size:])', 'logits, _, _ = self(idx[:, -block_size:])')], # (its own)
     "generate fails: mine.py, line 83: ValueError: not enough values to unpack (expected 3, got 2)", None),
    ('BatchedAttention', [('att = F.softmax(att, dim=-1)', 'att = F.softmax(att, dim=-2)')],
     '`att = F.softmax(att, dim=-2)` where the lecture has the softmax over the keys (dim=-1)', 'att = F.softmax'),
    ('BatchedAttention', [('(q @ k.transpose(-2, -1)) * (C // n_head) ** -0.5', '(q @ k.transpose(-2, -1))')],
     'the 1/sqrt(head_size) scale is missing', 'att = (q @ k'),
    ('BatchedAttention', [('self.tril[:T, :T] == 0', 'self.tril[:T, :T] == 1')], 'the mask lets the future through',
     'att = att.masked_fill'),
    ('Block', [('x = x + self.sa(self.ln1(x))', 'x = x + self.sa(x)'), ('x + self.ffwd(self.ln2(x))', 'x + self.ffwd(x)')],
     "no LayerNorm (ln1) of the Block's input before the attention", 'x = x + self.sa'), # stage 6 but in the Blocks
    ('Block', [('x + self.ffwd(self.ln2(x))', 'x + self.ffwd(x)')], 'no LayerNorm (ln2) of x before the feed-forward',
     'x = x + self.ffwd'),
    ('GPT', [('logits, _ = self(idx[:, -block_size:])', 'idx_cond = idx[:, -block_size:]\n            logits, _ = '
              'self(idx_cond)'), ('idx = torch.cat((idx, torch.multinomial(probs, 1)), dim=1)',
                                  'idx = torch.cat((idx, idx_cond), dim=1)')], # the context doubles at each step
     'generate feeds the model [1, 2, 4] tokens from a prompt of 1: it should grow by one to block_size (line 86: '
     '`idx = torch.cat((idx, idx_cond), dim=1)` appends 2 tokens at once, not the one sampled)', None),
    ('GPT', [('F.softmax(logits[:, -1, :], dim=-1)', 'F.softmax(logits[0, -1], dim=-1)'), # right for one prompt
             ('torch.multinomial(probs, 1)), dim=1)', 'torch.multinomial(probs, 1)[None]), dim=1)')],
     'generate takes one prompt only: on a batch of 2 it raises mine.py, line 85: RuntimeError', None),
    ('FeedForward', [('nn.Linear(n_embd, 4 * n_embd), nn.ReLU(), nn.Linear(4 * n_embd, n_embd)', # and a variant
                      'nn.Linear(n_embd, n_embd), nn.ReLU(), nn.Dropout(0.1), nn.Linear(n_embd, n_embd)')],
     'not 4x wider inside (the paper: 512 -> 2048 -> 512); line 44: a variant, no dropout after the last Linear (the '
     'lecture drops out there); line 44: a variant, dropout on the ReLU after the first Linear (the lecture has none '
     'there)', 'self.net = '),
    ('Block', [('\n    def forward(self, x):\n        x = x + self.sa(self.ln1(x))\n        x = x + self.ffwd(self.ln2(x))\n'
                '        return x', '\n        def forward(self, x):\n            x = x + self.sa(self.ln1(x))\n'
                '            x = x + self.ffwd(self.ln2(x))\n            return x')], # indented into __init__
     '`def forward` is inside __init__ (indented one level too far), so it has no forward', '        def forward'),
    ('Block', [('self.sa = BatchedAttention()', 'self.sa = (n_head, n_embd // n_head)')], # (the class's call forgotten)
     '`self.sa = (n_head, n_embd // n_head)` makes a tuple, not a layer', 'self.sa = ('),
]


BY_VOCAB = [ # the same, where the logits come out as (B, vocab, T)
    ('Head', [('        wei = F.softmax(wei, dim=-1)', '        att = F.softmax(wei, dim=-1)')], # (wei @ v after it)
     'the softmax over the keys (dim=-1) is made, but the result is never used', 'att = F.softmax'),
    ('GPT', [('F.softmax(logits[:, :, -1]', 'F.softmax(logits[:, :, 0]')], "generate samples from something else than the last "
     "position's logits (logits[:, -1, :]): line 83 samples `idx = torch.cat((idx, torch.multinomial(probs, 1)), dim=1)`",
     None),
]


WRAPPED = [ # the same, where the Blocks sit in a module of their own
    ('MultiHead', [(f'self.{t} = nn.Linear(n_embd, head_size', f'self.{t} = nn.Linear(head_size, head_size')
                   for t in ('key', 'query', 'value')] + [('h(x) for h in self.heads', # a slice of x for each head
                   'h(x[..., i * self.size:(i + 1) * self.size]) for i, h in enumerate(self.heads)')],
     "each head reads 16 of x's 64 channels, where the lecture's heads each read all of x", 'return self.proj'),
    ('Block', [('self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)', 'self.ln1 = nn.LayerNorm(n_embd)'),
               ('self.ffwd(self.ln2(x))', 'self.ffwd(self.ln1(x))')],
     'one LayerNorm normalizes the input of both the attention and the feed-forward: the lecture has two, ln1 and ln2',
     'self.ln1 = '),
]


def checked_with(file, changes, tmp_path):
    """(what scripts/check.py prints, the text) for a fixture with each change made once."""
    with open(file, encoding='utf-8') as f:
        text = f.read()
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    (tmp_path / 'mine.py').write_text(text)
    return run_here('scripts/check.py', str(tmp_path / 'mine.py')), text


@pytest.mark.parametrize('part, changes, named, at, file', [(*m, RENAMED) for m in MISTAKES] + [
    (*m, os.path.join(LEARNERS, 'nanogpt_layout.py')) for m in NANOGPT] + [
    (*m, os.path.join(LEARNERS, 'batched_4d.py')) for m in BATCHED] + [
    (*m, os.path.join(LEARNERS, 'logits_by_vocab.py')) for m in BY_VOCAB] + [
    (*m, os.path.join(LEARNERS, 'wrapped_blocks.py')) for m in WRAPPED],
    ids=[f'{p}: {n}' for p, _, n, _ in MISTAKES + NANOGPT + BATCHED + BY_VOCAB + WRAPPED])
def test_each_mistake_is_named_under_the_learners_own_names_at_its_line(part, changes, named, at, file, tmp_path):
    r, text = checked_with(file, changes, tmp_path)
    found = parts(r.stdout)
    assert r.returncode == 1 and found[part].startswith('differs: ') and \
        (f"{cited(text, at)}: " if at else '') + named in found[part], r.stdout


@pytest.mark.parametrize('name', ['renamed_layers.py', 'fragment_head.py'])
def test_a_notebooks_own_classes_are_checked_where_they_run(name, capsys):
    """check.here(globals()) in a notebook: the classes of the running kernel, as the file would be checked;
    the notebook's names are as they were afterwards (the fragment reads n_embd, which it never sets)."""
    import check
    path = os.path.join(LEARNERS, name)
    with open(path, encoding='utf-8') as f:
        kernel = {'__name__': '__main__'}
        exec(compile(f.read(), '<ipython-input-3>', 'exec'), kernel) # as a notebook's cell runs
    before = dict(kernel)
    check.here(kernel)
    assert capsys.readouterr().out == run_here('scripts/check.py', path).stdout
    assert kernel == before


def test_the_readmes_example_is_what_a_run_prints():
    with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
        shown = f.read().split('## Check your own code\n')[1].split('```\n', 2)[1]
    assert shown == run_here('scripts/check.py', os.path.join(LEARNERS, 'two_mistakes.py')).stdout


def test_a_notebook_cell_whose_definition_fails_is_left_out_with_a_note(tmp_path):
    """In a notebook, as when it ran: a cell that raised is passed over, and the later cells checked."""
    with open(RENAMED, encoding='utf-8') as f:
        cells = [{'cell_type': 'code', 'source': ['import torch\n', 'class Broken(torch.nn.Module):\n', '    x = 1 / 0\n']},
                 {'cell_type': 'code', 'source': f.read().splitlines(keepends=True)}]
    (tmp_path / 'mine.ipynb').write_text(json.dumps({'cells': cells}))
    r = run_here('scripts/check.py', str(tmp_path / 'mine.ipynb'))
    assert r.returncode == 0 and r.stdout.startswith(f"note: left out: {tmp_path / 'mine.ipynb'}, cell 1, line 3: "
                                                      "running it raised ZeroDivisionError: division by zero\n"), r.stdout


def test_a_mistake_in_another_file_of_a_project_is_named_in_that_file_at_its_line(tmp_path):
    """project/train.py checked; layers.py, which model.py imports, multiplies by the scale and uses GELU: the
    mistake is named at layers.py's line, the variant at its own, and the parts around them still match."""
    shutil.copytree(os.path.join(LEARNERS, 'project'), tmp_path / 'project')
    layers = tmp_path / 'project' / 'layers.py'
    text = layers.read_text()
    for old, new in [('self.key.out_features ** -0.5', 'self.key.out_features ** 0.5'), ('nn.ReLU()', 'nn.GELU()')]:
        assert text.count(old) == 1
        text = text.replace(old, new)
    layers.write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'project' / 'train.py'))
    found = parts(r.stdout)
    assert r.returncode == 1 and found['Head'] == f"differs: layers.py, {cited(text, 'wei = self.query')}: " \
        "multiplied by sqrt(head_size), not divided", r.stdout
    assert found['FeedForward'] == f"matches: layers.py, {cited(text, 'self.net = ')}: a variant, GELU for ReLU " \
        "(the lecture's is ReLU)", r.stdout
    assert found['Block'] == 'matches' and found['MultiHeadAttention'] == 'matches'


def test_a_guard_of_their_own_that_the_guessed_settings_fail_is_no_mistake(tmp_path):
    """Their defaults (n_head = 5 for a width of 48), which the file never builds, fail their own check of the
    settings with every guess: the settings, not the computation; the checker says it could not build it, and
    how to tell it (exit 2). (Where the file's own build raises so, it is their mistake: exit 1.)"""
    text = open(os.path.join(LEARNERS, 'config_dataclass.py'), encoding='utf-8').read()
    text = text.replace('n_head: int = 4', 'n_head: int = 5').replace('model = GPT(config)', '').replace(
        '        self.heads = nn.ModuleList([Head(config,',
        "        assert config.n_embd % config.n_head == 0, 'n_embd must divide by n_head'\n"
        '        self.heads = nn.ModuleList([Head(config,')
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    found = parts(r.stdout)
    assert r.returncode == 2 and found['MultiHeadAttention'].startswith(
        "can't build MultiHeadAttention(config=<ModelConfig>): mine.py, line 45: AssertionError: n_embd must divide "
        "by n_head; with its settings guessed"), r.stdout
    assert '--build "Model(...)"' in found['MultiHeadAttention']


def test_a_part_that_cannot_run_is_named_once_at_its_cause(tmp_path):
    """A Block whose attention is a tuple (the class's call forgotten) raises in every model that holds it: the
    line that makes the tuple is named in Block; the model says it could not be checked, not the crash again."""
    text = open(os.path.join(LEARNERS, 'batched_4d.py'), encoding='utf-8').read()
    text = text.replace('self.sa = BatchedAttention()', 'self.sa = (n_head, n_embd // n_head)')
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    found = parts(r.stdout)
    assert r.returncode == 1 and found['GPT'] == "not checked: it holds Block, which can't run (above)", r.stdout
    assert found['Block'].startswith(f"differs: {cited(text, 'self.sa = (')}: `self.sa = (n_head, n_embd // n_head)` "
                                     "makes a tuple, not a layer: mine.py, line "), r.stdout
    assert r.stdout.endswith(' match the lecture at stage 6 (LayerNorm, 1:32:51); look at Block\n'), r.stdout # (its stage)


def test_a_model_without_forward_that_the_file_builds_is_reported_not_dropped(tmp_path):
    """A second model class, built by the file (or by --build), with Blocks and an output layer but no forward: it
    is named as having none, and the exit code says so; the stage stays that of the model that runs."""
    text = open(os.path.join(LEARNERS, 'batched_4d.py'), encoding='utf-8').read().replace('model = GPT()', '''
class Draft(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*[Block() for _ in range(n_layer)])
        self.out = nn.Linear(n_embd, vocab_size)


model = GPT()''')
    (tmp_path / 'mine.py').write_text(text)
    for args, built in [([], ''), (['--build', 'Draft()'], ''), ([], '\ndraft = Draft()')]:
        (tmp_path / 'mine.py').write_text(text + built)
        r = run_here('scripts/check.py', str(tmp_path / 'mine.py'), *args)
        found = parts(r.stdout)
        if not args and not built: # never built: listed, not checked
            assert r.returncode == 0 and 'note: no model of yours uses Draft: not checked' in r.stdout, r.stdout
            continue
        assert r.returncode == 1 and found['Draft'].startswith('differs: it has no forward'), r.stdout
        assert r.stdout.endswith('4 of 5 parts match the lecture at stage 6 (LayerNorm, 1:32:51); look at Draft\n')


def test_a_part_that_cannot_be_built_does_not_hide_the_mistake_of_the_part_that_holds_it(tmp_path):
    """super.__init__() in the attention (named, and the attention checked as meant), and the Block's forward
    indented into its __init__: both are named, each at its line."""
    text = open(os.path.join(LEARNERS, 'batched_4d.py'), encoding='utf-8').read()
    for old, new in [('        super().__init__()\n        self.qkv', '        super.__init__()\n        self.qkv'),
                     ('\n    def forward(self, x):\n        x = x + self.sa', '\n        def forward(self, x):\n'
                      '        x = x + self.sa')]:
        assert text.count(old) == 1
        text = text.replace(old, new)
    text = text.replace('        x = x + self.sa(self.ln1(x))\n        x = x + self.ffwd(self.ln2(x))\n        return x',
                        '            x = x + self.sa(self.ln1(x))\n            x = x + self.ffwd(self.ln2(x))\n'
                        '            return x')
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    found = parts(r.stdout)
    assert r.returncode == 1 and f"mistake: {cited(text, 'super.__init__')}: `super.__init__()`: super.__init__ " \
        "calls super without its (): super().__init__() is meant; checked with it\n" in r.stdout, r.stdout
    assert found['Block'] == f"differs: {cited(text, '        def forward')}: `def forward` is inside __init__ " \
                             "(indented one level too far), so it has no forward", r.stdout


def test_blocks_a_model_holds_but_never_applies_are_named_and_checked_as_it_built_them(tmp_path):
    """The model skips its Blocks, and their heads (5 wide each, the width read from a global) can't feed
    `out`: the heads' width is named where they are made, the crash as a mistake of the part its model holds
    (not a guess of the checker's), and the Blocks never applied as the model's mistake, where they are made."""
    text = open(RENAMED, encoding='utf-8').read()
    for old, new in [('(d_model, head_dim, bias=False)', '(d_model, d_model // 6, bias=False)'),
                     ('self.head(self.final_norm(self.layers(h)))', 'self.head(self.final_norm(h))')]:
        text = text.replace(old, new)
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    found = parts(r.stdout)
    assert r.returncode == 1 and found['SelfAttentionHead'] == 'matches', r.stdout
    assert found['Attention'].startswith(
        f"differs: {cited(text, 'self.heads = ')}: its 4 heads together are 20 wide, not n_embd = 32: each is "
        "n_embd // n_head = 8 wide; and your model holds it but never runs it; run, it raised on "), r.stdout
    assert found['CharGPT'].startswith(f"differs: {cited(text, 'self.layers = ')}: its forward never applies "
                                       "`layers`: the lecture applies the Blocks between the embeddings and lm_head")
    assert 'no model of yours holds it' not in r.stdout and '`layers` is defined but never used' not in r.stdout


def test_arguments_passed_in_each_others_places_are_named_at_the_call(tmp_path):
    """DecoderBlock builds Attention(head_dims, n_heads) where Attention takes (n_heads, head_dim): 8 heads of 4,
    not 4 of 8, as wide together, so everything runs; the call is named, the parts it builds still match."""
    text = open(RENAMED, encoding='utf-8').read().replace(
        'self.attn = Attention(n_heads, d_model // n_heads)',
        'head_dims = d_model // n_heads\n        self.attn = Attention(head_dims, n_heads)')
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    found = parts(r.stdout)
    assert r.returncode == 1 and found['DecoderBlock'] == f"differs: {cited(text, 'self.attn = ')}: `self.attn = " \
        "Attention(head_dims, n_heads)` passes head_dims as n_heads and n_heads as head_dim: Attention takes " \
        "(n_heads, head_dim)", r.stdout
    assert found['Attention'] == 'matches' and found['MLP'] == 'matches', r.stdout


def test_a_misspelt_or_forgotten_import_is_named_and_the_file_checked_with_the_module_it_means(tmp_path):
    """torch.nn.Functional for torch.nn.functional, and nn used but never imported (or, in a script, imported
    after it is used): each a mistake at its line (exit 1), the file checked with the module meant, its parts
    matching. In a notebook a later cell's import is no mistake (cells run out of order). super.__init__()."""
    text = open(RENAMED, encoding='utf-8').read().replace('import torch.nn as nn\n', '').replace(
        'import torch.nn.functional as F', 'import torch.nn.Functional as F')
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 1 and r.stdout.startswith(
        f"mistake: {cited(text, 'import torch.nn.Functional')}: `import torch.nn.Functional as F`: there is no module "
        "torch.nn.Functional; torch.nn.functional is meant (names are case-sensitive); checked with it\n"
        f"mistake: {cited(text, 'class SelfAttentionHead')}: `class SelfAttentionHead(nn.Module):`: nn is never "
        "imported (import torch.nn as nn); checked with it\n"), r.stdout
    assert all(v.startswith('matches') for v in parts(r.stdout).values()) and r.stdout.endswith(
        f"5 of 5 parts match gpt.py; look at {cited(text, 'import torch.nn.F')}, {cited(text, 'class Self')}\n")
    # a notebook whose cells ran out of order imports nn in a later cell: no mistake of the file's
    cells = [{'cell_type': 'code', 'source': text.replace('import torch.nn.Functional as F', '').splitlines(True)},
             {'cell_type': 'code', 'source': ['import torch.nn as nn\n', 'import torch.nn.functional as F\n']}]
    (tmp_path / 'mine.ipynb').write_text(json.dumps({'cells': cells}))
    r = run_here('scripts/check.py', str(tmp_path / 'mine.ipynb'))
    assert r.returncode == 0 and 'mistake' not in r.stdout, r.stdout
    # in a script, an import after the class that needs it is too late; super without its () is named
    text = open(RENAMED, encoding='utf-8').read().replace('import torch.nn as nn\n', '').replace(
        '\nclass MLP(nn.Module):\n    def __init__(self, d_model):\n        super().__init__()',
        'import torch.nn as nn\n\nclass MLP(nn.Module):\n    def __init__(self, d_model):\n        super.__init__()')
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 1 and r.stdout.startswith(
        f"mistake: {cited(text, 'class SelfAttentionHead')}: `class SelfAttentionHead(nn.Module):`: nn is imported "
        f"only later, at {cited(text, 'import torch.nn as nn')}; checked with it\n"), r.stdout
    assert f"mistake: {cited(text, 'super.__init__')}: `super.__init__()`: super.__init__ calls super without its " \
        "(): super().__init__() is meant; checked with it\n" in r.stdout and parts(r.stdout)['MLP'] == 'matches', \
        r.stdout # (checked as meant)


def test_a_config_that_reads_what_only_the_data_makes_is_read_with_the_settings(tmp_path):
    """The config's vocab_size is tokenizer.vocab_size, and tokenizer is made from the text, which the checker
    never reads: the config is still defined and the model built with it, vocab_size by its meaning."""
    text = open(os.path.join(LEARNERS, 'config_dataclass.py'), encoding='utf-8').read()
    text = text.replace('vocab_size: int = 65', 'vocab_size: int = tokenizer.vocab_size').replace(
        '\n\n@dataclass', "\ntokenizer = Tokenizer(open('input.txt').read())\n\n@dataclass")
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    found = parts(r.stdout)
    assert r.returncode == 0 and found['GPT'].startswith('matches; the past never hears the future'), r.stdout
    assert all(v.startswith('matches') for v in found.values()) and 'left out' not in r.stdout, r.stdout


def test_a_marimo_notebooks_cells_are_checked_as_its_top_level(tmp_path):
    """A marimo notebook is a .py whose cells are functions under @app.cell: their bodies are what runs."""
    code = open(RENAMED, encoding='utf-8').read().split('\n', 8)[8] # (after the `# expect` lines)
    cells = code.split('\n\n\nclass ')
    cells = [cells[0]] + ['class ' + c for c in cells[1:]]
    text = 'import marimo\n\napp = marimo.App(width="medium")\n' + ''.join(
        f"\n\n@app.cell\ndef _():\n{textwrap.indent(c.strip(), '    ')}\n    return\n" for c in cells) + \
        '\n\nif __name__ == "__main__":\n    app.run()\n'
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    found = parts(r.stdout)
    assert r.returncode == 0 and len(found) == 5 and all(v.startswith('matches') for v in found.values()), r.stdout


def test_qkv_side_by_side_in_each_head_is_the_fused_variant_not_a_mistake(tmp_path):
    """c_attn's output seen as (B, T, nh, 3 * hs), each head's q, k and v side by side: the same computation as
    nanoGPT's split up to how c_attn's rows are ordered, so the fused variant, as nanoGPT's own split is."""
    text = open(os.path.join(LEARNERS, 'nanogpt_layout.py'), encoding='utf-8').read()
    old = text[text.index('        q, k, v = self.c_attn(x).split'):text.index('        v = v.view(B, T, self.n_head')]
    text = text.replace(old, '        qkv = self.c_attn(x).view(B, T, self.n_head, 3 * (C // self.n_head))\n'
                             '        q, k, v = qkv.transpose(1, 2).split(C // self.n_head, dim=3)\n').replace(
        '        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)\n', '')
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 0 and parts(r.stdout)['CausalSelfAttention'].startswith('matches'), r.stdout


def test_the_math_tricks_average_in_the_attentions_place_is_named_for_what_it_computes(tmp_path):
    """A model whose head only averages each position with those before it (xbow, as the lecture's math trick
    computes by hand): named for that, at the line that applies it."""
    text = open(os.path.join(LEARNERS, 'stage2_one_head.py'), encoding='utf-8').read().replace(
        'self.sa_head = Head(n_embd)', 'self.sa_head = Average()').replace('\n\nclass BigramLanguageModel', '''

class Average(nn.Module):
    def forward(self, x):
        T = x.shape[1]
        wei = torch.tril(torch.ones(T, T))
        return wei / wei.sum(1, keepdim=True) @ x


class BigramLanguageModel''')
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 1 and parts(r.stdout)['BigramLanguageModel'].startswith(
        f"differs: {cited(text, 'x = self.sa_head(x)')}: `x = self.sa_head(x)` makes each position the average of "
        "itself and those before it (xbow, the lecture's math trick, which its models don't use)"), r.stdout


def test_noise_drawn_in_forward_is_named_and_no_leak_is_claimed_from_it(tmp_path):
    """torch.randn in the model's forward: the same tokens give other logits each time. That is named at its
    line, and what must hold (no future, no other row) is not judged from noise."""
    text = open(RENAMED, encoding='utf-8').read().replace(
        'self.pos_emb(torch.arange(T, device=tokens.device))', 'self.pos_emb(torch.arange(T)) * torch.randn(B, T, 1)')
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    found = parts(r.stdout)
    assert r.returncode == 1 and found['CharGPT'].startswith(
        f"differs: {cited(text, 'h = self.tok_emb')}: `h = self.tok_emb(tokens) + self.pos_emb(torch.arange(T)) * "
        "torch.randn(B, T, 1)` draws random numbers (torch.randn) while it runs: the same input gives another "
        "output each time"), r.stdout
    assert 'future' not in found['CharGPT'] and 'batch' not in found['CharGPT'], r.stdout


def test_a_bigram_fed_its_last_token_only_is_right_and_a_model_with_context_is_not(tmp_path):
    """A bigram's generate may feed the model the last token alone: that is all it reads. The same in a model
    that reads its context (one head, positions) starves it: a mistake."""
    text = open(os.path.join(ROOT, 'bigram.py'), encoding='utf-8').read().replace(
        'logits, loss = self(idx)', 'logits, loss = self(idx[:, -1:])')
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 0 and 'generate feeds the last token only, all that the model reads' in r.stdout, r.stdout
    text = open(os.path.join(LEARNERS, 'stage2_one_head.py'), encoding='utf-8').read().replace(
        'idx_cond = idx[:, -block_size:]', 'idx_cond = idx[:, -1:]')
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 1 and 'generate feeds the model [1, 1, 1] tokens' in r.stdout, r.stdout
    text = open(os.path.join(ROOT, 'gpt.py'), encoding='utf-8').read().replace(
        'self(idx[:, -block_size:])', 'self(idx[:, -1:])') # (at gpt.py's init, the context moves the logits little)
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 1 and 'generate feeds the model [1, 1, 1] tokens from a prompt of 255' in r.stdout, r.stdout


def test_a_class_that_is_none_of_the_lectures_parts_is_listed_not_passed_over(tmp_path):
    """An unfinished class (no forward, no embeddings) that no model builds: listed as not checked, the exit
    code that of the rest; a base class of their models is not listed."""
    text = open(RENAMED, encoding='utf-8').read() + '''

class Base(nn.Module):
    def generate(self, idx, n):
        return idx


class GPT(Base):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*[DecoderBlock(d_model, n_heads) for _ in range(2)])
        self.out = nn.Linear(d_model, 65)
        self.probs = nn.Softmax(dim=-1)
'''
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 0 and r.stdout.startswith(
        "note: GPT: not one of the lecture's parts by what it computes, so not checked\n"), r.stdout


def test_a_setting_the_file_never_sets_anywhere_is_a_mistake_at_its_first_use(tmp_path):
    """p_dropout read but set nowhere: building the file's model raises NameError. Named at the first line that
    reads it (exit 1), checked with the lecture's value; one set where the checker doesn't run (from the data) is
    not; nor one only a class the file never builds reads (as in a fragment pasted alone)."""
    text = open(RENAMED, encoding='utf-8').read().replace('p_dropout = 0.1\n', '') + '\nmodel = CharGPT(65)\n'
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 1 and r.stdout.startswith(
        f"mistake: {cited(text, 'self.drop = nn.Dropout(p_dropout)')}: `self.drop = nn.Dropout(p_dropout)`: p_dropout "
        "is never set anywhere in the file, so this raises NameError; checked with the lecture's 0.2\n"), r.stdout
    (tmp_path / 'mine.py').write_text(text.replace('d_model = 32\n', 'd_model = 32\np_dropout = len(text) and 0.1\n'))
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 0 and 'mistake' not in r.stdout, r.stdout
    (tmp_path / 'mine.py').write_text(text.replace('\nmodel = CharGPT(65)\n', '')) # (built by the checker alone)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 0 and r.stdout.startswith('note: your code reads p_dropout=0.2, which it never sets'), r.stdout
    branch = "import os\nif os.environ.get('RANK'):\n    p_dropout = 0.0\nelse:\n    p_dropout = 0.1\n" # (unrun)
    (tmp_path / 'mine.py').write_text(text.replace('d_model = 32\n', 'd_model = 32\n' + branch))
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 0 and r.stdout.startswith(
        "note: checked with p_dropout=0.2: your code sets it only in lines the checker doesn't run\n"), r.stdout


def test_a_long_name_of_the_learners_own_is_read_by_the_words_in_it(tmp_path):
    """DecoderBlock(n_embeeding_dimensions, n_heads), no model to build it: built alone, its width read by the
    word "emb" in the name (a typo in it too); `n_embeeding_dimensions // n_heads` does not make it a settings
    object (its n_heads is no key), which gave a TypeError blamed on their code. The same for a count the data
    makes, total_vocab_distinct_char_size, which the model reads: it stands in, by the word "vocab"."""
    text = open(RENAMED, encoding='utf-8').read()
    text = text[:text.index('class CharGPT')].replace('def __init__(self, d_model, n_heads):', 'def __init__(self, '
        'n_embeeding_dimensions, n_heads):').replace('Attention(n_heads, d_model // n_heads)', 'Attention(n_heads, '
        'n_embeeding_dimensions // n_heads)').replace('        self.norm1 = nn.LayerNorm(d_model)\n', '        d_model '
        '= n_embeeding_dimensions\n        self.norm1 = nn.LayerNorm(d_model)\n')
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 0 and parts(r.stdout)['DecoderBlock'] == 'matches', r.stdout
    (tmp_path / 'mine.py').write_text(text.replace('n_embeeding_dimensions', 'stream')) # (a name that says nothing)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 0 and parts(r.stdout)['DecoderBlock'] == 'matches', r.stdout
    # a count of the data's, in a name of its own, that the model reads: stands in by the word "vocab" in it
    text = open(RENAMED, encoding='utf-8').read().replace('def __init__(self, vocab_size):', 'def __init__(self):')
    text = text.replace('vocab_size', 'total_vocab_distinct_char_size').replace('p_dropout = 0.1\n', "p_dropout = 0.1\n"
        "total_vocab_distinct_char_size = len(sorted(set(open('input.txt').read())))\n") + '\nmodel = CharGPT()\n'
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 0 and parts(r.stdout)['CharGPT'].startswith('matches'), r.stdout


def test_a_bigram_grown_to_embeddings_and_lm_head_says_so(tmp_path):
    """Stage 2's model before its head is added (token and position embeddings, lm_head): the bigram's stage,
    with what it has of stage 2 said."""
    text = open(os.path.join(LEARNERS, 'stage2_one_head.py'), encoding='utf-8').read().replace(
        '        x = self.sa_head(x)\n', '').replace('        self.sa_head = Head(n_embd)\n', '')
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 0 and parts(r.stdout)['BigramLanguageModel'].startswith(
        "matches stage 1 (bigram, 22:11), with stage 2's token and position embeddings and lm_head, before its "
        "head"), r.stdout


BLOCKS = """class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.sa = MultiHeadAttention(n_head, n_embd // n_head)
        self.ffwd = FeedFoward(n_embd)

    def forward(self, x):
        x = self.sa(x)
        x = self.ffwd(x)
        return x


class BigramLanguageModel(nn.Module):"""


@pytest.mark.parametrize('residual', [False, True])
def test_the_lectures_first_blocks_are_its_stage_and_with_residual_connections_the_next(residual, tmp_path):
    """Stage 4's heads and one-Linear feed-forward grouped in Blocks with no residual connection, as the lecture
    runs them just before 1:26:48: its stage, no mistake. With x + sa(x) and x + ffwd(x), the Blocks are stage
    5's, which adds proj and the 4x feed-forward with them: their absence is named."""
    text = open(os.path.join(LEARNERS, 'stage4_feed_forward.py'), encoding='utf-8').read()
    text = text.replace('        self.ffwd = FeedFoward(n_embd)\n', '').replace(
        'class BigramLanguageModel(nn.Module):', BLOCKS).replace(
        'MultiHeadAttention(4, n_embd//4)', 'nn.Sequential(*[Block(n_embd, 4) for _ in range(3)])').replace(
        '        x = self.ffwd(x)\n        logits', '        logits')
    if residual:
        text = text.replace('x = self.sa(x)', 'x = x + self.sa(x)').replace('x = self.ffwd(x)', 'x = x + self.ffwd(x)')
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    found = parts(r.stdout)
    if not residual:
        assert r.returncode == 0 and r.stdout.endswith('5 of 5 parts match the lecture at stage 4 (feed-forward, '
                                                       '1:24:25)\n'), r.stdout
        return
    assert r.returncode == 1 and found['Block'] == 'matches stage 5 (residual connections, 1:26:48)', r.stdout
    assert found['MultiHeadAttention'] == 'differs: line 57: no proj after the heads (added with the residual ' \
        'connections)', r.stdout
    assert found['FeedFoward'].startswith('differs: line 66: one Linear layer; from 1:26:48'), r.stdout


def test_a_residual_connection_before_the_blocks_is_named_where_it_adds(tmp_path):
    """Stage 3's model with x + sa(x): the residual connection the lecture adds only in the Blocks, named at its
    line, in the lecture's words, where lm_head takes its input. A build of the file's own whose arguments its class
    can't take is a mistake at its line."""
    text = open(os.path.join(LEARNERS, 'stage3_multi_head.py'), encoding='utf-8').read().replace(
        'x = self.sa_heads(x)', 'x = self.sa_heads(x) + x') + 'other = BigramLanguageModel(64)\n'
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 1 and parts(r.stdout)['BigramLanguageModel'] == (
        'differs: line 74: `x = self.sa_heads(x) + x` changes `sa_heads` before lm_head, the logits: the lecture '
        'has nothing in between'), r.stdout
    assert 'mistake: line 98: `other = BigramLanguageModel(64)`: your build raises TypeError: BigramLanguageModel.' \
        '__init__() takes 1 positional argument but 2 were given\n' in r.stdout


def test_the_dropout_of_a_feed_forward_written_inside_the_block_is_the_feed_forwards(tmp_path):
    """The Block's own nn.Sequential for its feed-forward, ending in the lecture's Dropout: checked as the
    feed-forward, where that dropout is the lecture's, not as a dropout the Block adds. A LayerNorm class of
    theirs that the model doesn't use (it uses nn.LayerNorm) is not taken for nn.LayerNorm: unused."""
    import test_check
    text = test_check.edited(('self.ffwd = FeedFoward(n_embd)', 'self.ffwd = nn.Sequential(nn.Linear(n_embd, 4 * '
                              'n_embd), nn.ReLU(), nn.Linear(4 * n_embd, n_embd), nn.Dropout(dropout))'),
                             ('class Block(nn.Module):', 'class LayerNorm(nn.Module):\n    def __init__(self, dim):\n'
                              '        super().__init__()\n        self.gamma = nn.Parameter(torch.ones(dim))\n\n'
                              '    def forward(self, x):\n        return self.gamma * x / x.std(1, keepdim=True)\n\n'
                              'class Block(nn.Module):'))
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    found = parts(r.stdout)
    assert r.returncode == 0 and found['Block'] == found['Block.ffwd'] == 'matches', r.stdout
    assert 'note: no model of yours uses FeedFoward, LayerNorm: not checked\n' in r.stdout


def test_dropout_moved_before_proj_is_named_both_where_it_is_and_where_it_is_not(tmp_path):
    """out = self.proj(self.dropout(out)): the lecture's dropout after proj is missing, and one is added on the
    heads side by side, both on that one line."""
    import test_check
    text = test_check.edited(('out = self.dropout(self.proj(out))', 'out = self.proj(self.dropout(out))'))
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    at = cited(text, 'out = self.proj(self.dropout(out))')
    assert r.returncode == 0 and parts(r.stdout)['MultiHeadAttention'] == (
        f"matches: {at}: a variant, no dropout after proj (the lecture drops out there); {at}: a variant, dropout on "
        "the heads' outputs side by side (torch.cat) (the lecture has none there)"), r.stdout


def test_a_model_that_returns_its_loss_first_is_read_by_what_each_value_is(tmp_path):
    """forward returns (loss, logits), and the file's own calls unpack it so: the logits are the tensor that
    isn't one number (the loss, None without targets), and the loss at init is the one that is."""
    with open(os.path.join(ROOT, 'gpt.py'), encoding='utf-8') as f:
        text = f.read().replace('return logits, loss', 'return loss, logits')
    text = text.replace('logits, loss = ', 'loss, logits = ')
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    found = parts(r.stdout)
    assert r.returncode == 0 and r.stdout.endswith('\n5 of 5 parts match gpt.py\n'), r.stdout
    assert re.search(r'generate crops to block_size and runs past it, loss at init \d\.\d\d \(about ln 65',
                     found['GPTLanguageModel']), r.stdout
    assert "a variant, its forward returns (loss, logits), where the lecture's returns (logits, loss)" in \
        found['GPTLanguageModel'], r.stdout


def test_a_loss_at_init_far_from_ln_vocab_that_the_lectures_init_brings_back_is_their_init(tmp_path):
    """gpt.py with lm_head drawn at std 0.09 after its init: a loss at init between ln 65 + 1 and ln 65 + 2, where
    the lecture's 4.2 to 4.9 is within 1 of ln 65; at the lecture's init it is near ln 65 again, so the cause
    is the init, a variant (the judge's rule: init is the learner's to choose). (F.nll_loss on the logits,
    near 0 whatever the init, stays a mistake: RUN_AS_THEY_MEAN.)"""
    with open(os.path.join(ROOT, 'gpt.py'), encoding='utf-8') as f:
        text = f.read()
    old = '        self.apply(self._init_weights)\n'
    (tmp_path / 'mine.py').write_text(text.replace(old, old + '        nn.init.normal_(self.lm_head.weight, std=0.09)\n'))
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    found = parts(r.stdout)['GPTLanguageModel']
    figure = float(re.search(r'loss at init (\d\.\d\d) \(about ln 65 = 4\.17 expected\)', found).group(1))
    again = re.search(r"^matches: .*a variant, its weights drawn otherwise than the lecture's, which takes the "
                      r"loss at init away from ln 65 \((\d\.\d\d) with the lecture's, std 0\.02\)", found)
    assert again and abs(float(again.group(1)) - math.log(65)) < 0.5, found
    assert math.log(65) + 1 < figure < math.log(65) + 2 and r.returncode == 0, r.stdout


@pytest.mark.parametrize('call, named', [('F.scaled_dot_product_attention(q, k, self.value(x), is_causal=True)', True),
                                         ('F.scaled_dot_product_attention(q, k, self.value(x), is_causal=True, '
                                          'dropout_p=self.dropout.p if self.training else 0)', False)])
def test_attention_in_one_call_without_dropout_p_is_named_a_variant(call, named, tmp_path):
    """gpt.py's Head as F.scaled_dot_product_attention: the weights it makes unseen are dropped out only if
    dropout_p is passed (in eval mode it is 0 either way)."""
    with open(os.path.join(ROOT, 'gpt.py'), encoding='utf-8') as f:
        text = f.read()
    start, end = text.index('        wei = q @ k.transpose(-2, -1)'), text.index('        return out\n')
    (tmp_path / 'mine.py').write_text(text[:start] + f'        out = {call}\n' + text[end:])
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    found = parts(r.stdout)
    assert r.returncode == 0 and found['Head'].startswith('matches: '), r.stdout
    at = cited(text[:start] + f'        out = {call}\n' + text[end:], 'out = F.scaled_dot_product_attention')
    assert (f'{at}: a variant, no dropout after the attention weights, wei (the lecture drops out there)' in
            found['Head']) == named, found['Head']
    assert f'{at}: a variant, F.scaled_dot_product_attention' in found['Head'], found['Head']


TEXT_GENERATE = '''import torch
import torch.nn as nn
from torch.nn import functional as F

with open('input.txt') as f:
    text = f.read()
chars = sorted(set(text))
stoi, itos = {c: i for i, c in enumerate(chars)}, dict(enumerate(chars))


class BigramLanguageModel(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.token_embedding_table = nn.Embedding(vocab_size, vocab_size)

    def forward(self, idx, targets=None):
        logits = self.token_embedding_table(idx)
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss

    def generate(self, first_char, max_new_tokens):
        out = first_char
        for _ in range(max_new_tokens):
            logits, _ = self(torch.tensor([[stoi[out[-1]]]]))
            out += itos[torch.multinomial(F.softmax(logits[:, -1], dim=-1), num_samples=1).item()]
        return out


model = BigramLanguageModel(len(chars))
'''


def test_a_generate_that_takes_and_returns_text_is_checked_as_text(tmp_path):
    """generate(first_char, max_new_tokens) on characters, through the file's stoi and itos (which the data
    makes, so the checker stands in for them): called with a text prompt once tokens fail, not blamed."""
    (tmp_path / 'mine.py').write_text(TEXT_GENERATE)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 0 and re.search(r'^BigramLanguageModel  matches stage 1 \(bigram, 22:11\): a variant, '
                                           r"generate returns text, where the lecture's returns the tokens \(to "
                                           r'decode\); the past never '
                                           r'hears the future, batch rows never talk, generate feeds the last token '
                                           r'only, all that the model reads, loss at init', r.stdout, re.M), r.stdout


def test_annotations_under_from_future_import_annotations_are_not_run(tmp_path):
    """After `from __future__ import annotations`, Python (and Jupyter, in the later cells) never evaluates an
    annotation, so one that names what is imported only for type checkers is no error: the file is checked."""
    text = TEXT_GENERATE.replace('import torch\n', 'from __future__ import annotations\nimport torch\n', 1)
    text = text.replace('def forward(self, idx, targets=None):', 'def forward(self, idx: Tensor, targets: Tensor | None = None):')
    assert text.count('Tensor') == 2
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    assert r.returncode == 0 and re.search(r'^BigramLanguageModel  matches stage 1', r.stdout, re.M), r.stdout + r.stderr


@pytest.mark.parametrize('forward, shown, words', [
    ('return x + self.ffwd(self.ln2(x + self.sa(self.ln1(x))))',
     'return x + self.ffwd(self.ln2(x + self.sa(self.ln1(x))))', "adds the feed-forward's output to the Block's "
     "input x, not to x + sa(ln1(x)): the attention's output never reaches the residual stream"),
    ('h = self.ln1(x)\n        x = h + self.sa(h)\n        x = x + self.ffwd(self.ln2(x))\n        return x',
     'x = h + self.sa(h)',
     "adds the attention's output to ln1(x), not to x: the residual stream itself goes through the LayerNorm")])
def test_a_residual_connection_that_adds_the_wrong_stream_says_which(tmp_path, forward, shown, words):
    """A residual add whose stream is not x (the Block's input kept, or x's LayerNorm): named by what it adds
    the branch to, at its line, not only as 'where the lecture has the residual connection'."""
    import test_check
    lecture = 'x = x + self.sa(self.ln1(x))\n        x = x + self.ffwd(self.ln2(x))\n        return x'
    text = test_check.edited((lecture, forward))
    r, found = test_check.check(tmp_path, text)
    line = text.splitlines().index('        ' + shown) + 1
    assert r.returncode == 1 and found['Block'] == f"differs: line {line}: `{shown}` {words}", r.stdout


def test_a_model_that_cant_be_built_or_run_has_its_parts_checked_alone(tmp_path):
    """Where the model's class names a class the file never defines, or holds a tuple where a layer belongs, which
    classes it was to hold can't be told: each is checked alone, its mistakes named (not 'no model uses it').
    A build whose arguments its class can't take is a mistake at its line; a class called is never a setting. A
    notebook's version of a class whose build failed is checked too."""
    import test_check
    scale = ('wei = q @ k.transpose(-2,-1) * k.shape[-1]**-0.5', 'wei = q @ k.transpose(-2,-1)')
    text = test_check.edited(scale, ('Block(n_embd, n_head=n_head) for', 'Blocks(n_embd, n_head=n_head) for'))
    text += 'model = BigramLanguageModel(65)\n'
    r, found = test_check.check(tmp_path, text)
    lines = text.splitlines()
    assert r.returncode == 1 and found['Head'].startswith(
        f"differs: line {lines.index('        wei = q @ k.transpose(-2,-1)') + 1}: the 1/sqrt(head_size) scale is "
        "missing"), r.stdout
    assert found['BigramLanguageModel'].startswith("differs: can't build BigramLanguageModel(): ") and \
        "NameError: name 'Blocks' is not defined" in found['BigramLanguageModel'], r.stdout
    assert f"mistake: line {len(lines)}: `model = BigramLanguageModel(65)`: your build raises TypeError: " \
        "BigramLanguageModel.__init__() takes 1 positional argument but 2 were given\n" in r.stdout
    assert 'no model of yours uses' not in r.stdout and 'Blocks is never set' not in r.stdout, r.stdout
    text = test_check.edited(scale, ('self.sa = MultiHeadAttention(n_head, head_size)', 'self.sa = (n_head, head_size)'))
    r, found = test_check.check(tmp_path, text)
    assert r.returncode == 1 and found['Head'].startswith('differs: line') and 'scale is missing' in found['Head'], \
        r.stdout
    assert found['MultiHeadAttention'] == 'matches' and 'no model of yours uses' not in r.stdout, r.stdout
    right = test_check.edited() # a notebook whose later version of the model can't be built: that one is named
    later = right[right.index('class BigramLanguageModel'):right.index('model = BigramLanguageModel()')]
    cells = [{'cell_type': 'code', 'source': text} for text in (right, later.replace('Block(n_embd', 'Blocks(n_embd'))]
    r, found = test_check.check(tmp_path, json.dumps({'cells': cells, 'nbformat': 4}), 'mine.ipynb')
    assert r.returncode == 1 and found['BigramLanguageModel (cell 2)'].startswith(
        "differs: can't build BigramLanguageModel(): ") and "name 'Blocks' is not defined" in r.stdout, r.stdout
    rows = [row for row in r.stdout.splitlines()[:-1] if not row.startswith(('note:', 'mistake:'))]
    starts = {re.search(r'\s(matches|differs|not checked)', row).start() for row in rows} # (one column, past
    assert starts == {len('BigramLanguageModel (cell 2)') + 1}, r.stdout # the longest label and 2 spaces)
    early = later.replace('logits = self.lm_head(x)', 'logits = self.lm_head(tok)') + 'model = BigramLanguageModel(65)\n'
    cells = [{'cell_type': 'code', 'source': text} for text in (right, early, later + 'model = BigramLanguageModel()\n')]
    r, found = test_check.check(tmp_path, json.dumps({'cells': cells, 'nbformat': 4}), 'mine.ipynb')
    assert r.returncode == 1 and found['BigramLanguageModel (cell 2)'].startswith('differs: raised on') and \
        found['BigramLanguageModel (cell 2)'].endswith("NameError: name 'tok' is not defined") and \
        found['BigramLanguageModel (cell 2)'].count('is not defined') == 1, r.stdout # (named once)


def test_a_feed_forward_written_in_the_block_and_a_numpy_prompt_are_checked(tmp_path):
    """A Block whose feed-forward is its own Linear, activation module, Linear (no FeedForward class): checked as
    the lecture's Block, its GELU a variant and its dropout the lecture's. A generate that takes one prompt as a
    NumPy array: a variant of the interface, not 'one prompt only' blamed on a tensor the checker passed. One that
    puts the model in eval mode itself, or takes the likeliest token (its tokens back as a list): variants."""
    import test_check
    text = test_check.edited(
        ('self.ffwd = FeedFoward(n_embd)', 'self.fc = nn.Linear(n_embd, 4 * n_embd)\n        self.act = nn.GELU()\n'
         '        self.fc2 = nn.Linear(4 * n_embd, n_embd)\n        self.drop = nn.Dropout(dropout)'),
        ('x = x + self.ffwd(self.ln2(x))', 'x = x + self.drop(self.fc2(self.act(self.fc(self.ln2(x)))))'),
        ('def generate(self, idx, max_new_tokens):\n', 'def generate(self, idx, max_new_tokens):\n'
         '        idx = torch.from_numpy(idx)[None]\n        self.eval()\n'),
        ('idx_next = torch.multinomial(probs, num_samples=1)', 'idx_next = probs.argmax(-1, keepdim=True)'),
        ('        return idx\n', '        return idx[0].tolist()\n'))
    r, found = test_check.check(tmp_path, text)
    act = text.splitlines().index('        self.act = nn.GELU()') + 1
    assert r.returncode == 0 and found['Block'] == f"matches: line {act}: a variant, GELU for ReLU (the lecture's " \
        "is ReLU)", r.stdout
    assert "a variant, generate takes one prompt as a NumPy array, where the lecture's takes a (B, T) tensor of " \
        "prompts; a variant, generate takes the likeliest token each step (greedy), where the lecture samples one " \
        "(torch.multinomial); a variant, generate puts the model in eval mode itself (no dropout while it samples), " \
        "where the lecture's samples in the mode the model is in; the past never hears" in found[
        'BigramLanguageModel'], r.stdout


def test_a_generate_that_appends_another_tensor_says_so_not_crop(tmp_path):
    """generate appends the context's last token, not the one it has just sampled: named at that line, not
    'crop to the last block_size' (what a generate that feeds the wrong end of idx needs)."""
    import test_check
    text = test_check.edited(('idx = torch.cat((idx, idx_next), dim=1)', 'idx = torch.cat((idx, idx_cond[:, -1:]), dim=1)'))
    r, found = test_check.check(tmp_path, text)
    line = text.splitlines().index('            idx = torch.cat((idx, idx_cond[:, -1:]), dim=1)') + 1
    assert r.returncode == 1 and found['BigramLanguageModel'].startswith(
        'differs: generate appends another tensor than the token it has just sampled (line '
        f'{line}: `idx = torch.cat((idx, idx_cond[:, -1:]), dim=1)`)'), r.stdout
    assert 'crop to the last block_size' not in r.stdout, r.stdout


def test_a_dropout_inside_an_nn_sequential_is_named_at_its_own_line(tmp_path):
    """The feed-forward's Dropout moved before the last Linear, in its nn.Sequential: the variant at the line that
    makes that Dropout (not at `return self.net(x)`), once."""
    import test_check
    text = test_check.edited(('            nn.ReLU(),\n            nn.Linear(4 * n_embd, n_embd),\n            '
                              'nn.Dropout(dropout),', '            nn.ReLU(),\n            nn.Dropout(dropout),\n'
                              '            nn.Linear(4 * n_embd, n_embd),'))
    r, found = test_check.check(tmp_path, text)
    lines = text.splitlines()
    drop, last = lines.index('            nn.Dropout(dropout),') + 1, lines.index('            nn.Linear(4 * n_embd, n_embd),') + 1
    assert r.returncode == 0 and found['FeedFoward'] == (
        f"matches: line {last}: a variant, no dropout after the last Linear (the lecture drops out there); line {drop}: "
        "a variant, dropout on the ReLU after the first Linear (the lecture has none there)"), r.stdout


def test_a_generate_that_yields_and_takes_block_size_is_run(tmp_path):
    """generate(idx, max_new_tokens, block_size) that yields each token as it goes: run to its end, the model's
    block_size given, the generator named as a variant."""
    import test_check
    text = test_check.edited(('def generate(self, idx, max_new_tokens):', 'def generate(self, idx, max_new_tokens, '
                              'block_size):'), ('            idx = torch.cat((idx, idx_next), dim=1)\n        return idx\n',
                                                '            idx = torch.cat((idx, idx_next), dim=1)\n'
                                                '            yield idx_next\n'))
    r, found = test_check.check(tmp_path, text)
    assert r.returncode == 0 and found['BigramLanguageModel'].startswith(
        "matches: a variant, generate yields as it goes (a Python generator), where the lecture's returns idx whole; "
        "the past never hears the future, batch rows never talk, generate crops to block_size and runs past it"), \
        r.stdout


def test_a_build_in_a_function_whose_default_the_data_makes_is_the_files_build(tmp_path):
    """`tok, vocab_size1 = choose_tokenizer(...)` (a data line, skipped) and `def train(vocab_size=vocab_size1)`
    that builds the model: the default stands in by its meaning, the file's model is built where it builds it,
    and a class it never uses (the video's LayerNorm1d, for (B, C) rows) is listed, not checked."""
    import test_check
    text = test_check.edited(('model = BigramLanguageModel()\n', '''class LayerNorm1d(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.gamma, self.beta, self.eps = nn.Parameter(torch.ones(dim)), nn.Parameter(torch.zeros(dim)), eps

    def forward(self, x):
        xhat = (x - x.mean(1, keepdim=True)) / torch.sqrt(x.var(1, keepdim=True) + self.eps)
        return self.gamma * xhat + self.beta

encoder1, vocab_size1 = choose_tokenizer(text)

def train(vocab_size=vocab_size1):
    model = BigramLanguageModel(vocab_size)
    return model

model = train()
'''), ('    def __init__(self):\n        super().__init__()\n        self.token_embedding_table',
       '    def __init__(self, vocab_size):\n        super().__init__()\n        self.token_embedding_table'))
    r, found = test_check.check(tmp_path, text)
    line = text.splitlines().index('    model = BigramLanguageModel(vocab_size)') + 1
    assert r.returncode == 0 and f'note: checked BigramLanguageModel as line {line} builds it\n' in r.stdout and \
        'note: no model of yours uses LayerNorm1d: not checked\n' in r.stdout, r.stdout


def test_a_seed_set_in_forward_is_a_mistake_at_its_line(tmp_path):
    """torch.manual_seed in a Block's forward: every call draws the same random numbers (dropout's mask), named in
    the Block at its line, not in the model that holds it."""
    import test_check
    text = test_check.edited(('        x = x + self.sa(self.ln1(x))\n', '        torch.manual_seed(0)\n'
                              '        x = x + self.sa(self.ln1(x))\n'))
    r, found = test_check.check(tmp_path, text)
    line = text.splitlines().index('        torch.manual_seed(0)') + 1
    assert r.returncode == 1 and found['Block'] == (f"differs: line {line}: `torch.manual_seed(0)` in forward seeds the "
        "random numbers at every call, so dropout drops the same units at every step of training"), r.stdout
    assert found['BigramLanguageModel'].startswith('matches'), r.stdout


def test_a_layer_applied_where_another_belongs_is_named_at_the_line_meant_for_the_other(tmp_path):
    """q = self.value(x), then v = self.value(x) as the lecture's: `query` never used, and the line that should
    use it is the one whose result is named q, the first, not the second that applies value rightly. The walk
    then goes on with their layer in its place, to the next difference (a scale of 16**-0.5)."""
    import test_check
    text = test_check.edited(('q = self.query(x)', 'q = self.value(x)'), ('* k.shape[-1]**-0.5', '* 16**-0.5'))
    r, found = test_check.check(tmp_path, text)
    lines = text.splitlines()
    q, v = lines.index('        q = self.value(x)') + 1, lines.index('        v = self.value(x)') + 1
    assert r.returncode == 1 and found['Head'] == (
        f"differs: line {q}: `q = self.value(x)` applies `value` where `query`, never used, belongs (`value` is "
        f"applied to the same input again at line {v}); and line {q + 1}: the affinities scaled by 0.25 = 16**-0.5, "
        "not by head_size**-0.5 = 0.354 (head_size 8)"), r.stdout


STANDALONE = '''def generate(model, idx, max_new_tokens):
    for _ in range(max_new_tokens):
        logits, loss = model(idx[:, -block_size:])
        probs = F.softmax(logits[:, -1, :], dim=-1)
        idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
    return idx

model = BigramLanguageModel()
'''


@pytest.mark.parametrize('last', ['-1', '0'])
def test_a_generate_of_the_files_own_beside_the_model_is_checked(tmp_path, last):
    """generate(model, idx, max_new_tokens), a function beside a model that has none: checked as the model's
    (a variant of the interface), so that sampling from the first position is found there too."""
    import test_check
    text = test_check.edited(('    def generate(self, idx, max_new_tokens):\n', '    def unused(self, idx, max_new_tokens):\n'),
                             ('model = BigramLanguageModel()\n', STANDALONE.replace('[:, -1, :]', f'[:, {last}, :]')))
    r, found = test_check.check(tmp_path, text)
    said = found['BigramLanguageModel']
    assert "a variant, generate is a function beside the model (generate(model, ...)), where the lecture's is the " \
        "model's method" in said, r.stdout
    if last == '-1':
        assert r.returncode == 0 and 'generate crops to block_size and runs past it' in said, r.stdout
    else:
        assert r.returncode == 1 and "generate samples from something else than the last position's logits" in said


def test_a_script_that_builds_a_model_between_two_versions_of_a_class_checks_both(tmp_path):
    """A script that builds its model, then defines Head again (without the scale) and builds it again: both
    versions checked, each labelled by its line, the mistake in the second."""
    import test_check
    text = test_check.edited()
    head = text[text.index('class Head'):text.index('class MultiHeadAttention')]
    text += '\n' + head.replace('* k.shape[-1]**-0.5', '') + '\nmodel2 = BigramLanguageModel()\n'
    r, found = test_check.check(tmp_path, text)
    classes = [f'Head (line {i})' for i, line in enumerate(text.splitlines(), 1) if line == 'class Head(nn.Module):']
    heads = [label for label in found if re.fullmatch(r'Head \(line \d+\)', label)]
    assert r.returncode == 1 and heads == classes and found[heads[0]] == 'matches', r.stdout # (at each class line)
    assert found[heads[1]].startswith('differs: line') and 'scale is missing' in found[heads[1]], r.stdout


def test_a_part_that_cant_run_alone_beside_a_broken_model_is_not_counted(tmp_path):
    """A model that can't run (a tuple for its attention) has its classes checked alone; one that can't run
    alone either (its forward wants a mask no caller gives) is said to be not checked, and the exit code is that
    of the mistakes found (1), not 2."""
    import test_check
    text = test_check.edited(('self.sa = MultiHeadAttention(n_head, head_size)', 'self.sa = (n_head, head_size)'),
                             ('    def forward(self, x):\n        B,T,C = x.shape\n        k = self.key(x)',
                              '    def forward(self, x, mask):\n        B,T,C = x.shape\n        k = self.key(x)'))
    r, found = test_check.check(tmp_path, text)
    assert r.returncode == 1 and found['Head'].startswith('not checked: '), r.stdout
    assert found['Block'].startswith('differs: line') and 'makes a tuple, not a layer' in found['Block'], r.stdout


def test_checking_in_process_leaves_the_thread_count_as_it_was():
    """check.checked (and check.here, in a notebook) runs on one thread, then puts the learner's count back:
    their training after a check is not left on one core."""
    import check
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        check.checked(os.path.join(LEARNERS, 'stage2_one_head.py'))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


BIGRAM_CELL = '''import torch
import torch.nn as nn
vocab_size = 65

class BigramLanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.token_embedding_table = nn.Embedding(vocab_size, vocab_size)

    def forward(self, idx, targets=None):
        return self.token_embedding_table(idx), None

m = BigramLanguageModel()
'''


def test_the_parts_of_a_later_version_the_notebook_never_builds_are_checked(tmp_path):
    """A notebook that builds its stage-1 bigram, then defines the whole model under the same name and never
    builds it (it loads a saved one): the later version's parts are held by a model of theirs, so checked."""
    import test_check
    right = test_check.edited()
    cells = [{'cell_type': 'code', 'source': text} for text in (BIGRAM_CELL, right[:right.index('model = Bigram')])]
    r, found = test_check.check(tmp_path, json.dumps({'cells': cells, 'nbformat': 4}), 'mine.ipynb')
    assert r.returncode == 0 and 'no model of yours uses' not in r.stdout, r.stdout
    assert [found[p] for p in ('Head', 'MultiHeadAttention', 'FeedFoward', 'Block')] == ['matches'] * 4, r.stdout


def test_a_multi_head_attention_without_proj_or_its_dropout_names_both(tmp_path):
    """No proj and no dropout after the heads: the missing proj a mistake, the missing dropout a variant, named
    in the same part (the lecture drops out after proj; without one, after the heads)."""
    import test_check
    text = test_check.edited(('        out = self.dropout(self.proj(out))\n', ''))
    r, found = test_check.check(tmp_path, text)
    line = text.splitlines().index('        out = torch.cat([h(x) for h in self.heads], dim=-1)') + 1
    assert r.returncode == 1 and found['MultiHeadAttention'] == (
        f"differs: line {line}: no proj after the heads; line {line}: a variant, no dropout after the heads (the "
        "lecture drops out there); your `proj` is defined but never used"), r.stdout


def test_super_without_its_brackets_is_named_and_the_rest_checked_with_it(tmp_path):
    """super.__init__() in Head (super without its ()): a mistake at its line, the class then built as meant, so
    the parts that hold it are checked too (not all 'can't build')."""
    import test_check
    text = test_check.edited(('        super().__init__()\n        self.key = nn.Linear',
                              '        super.__init__()\n        self.key = nn.Linear'))
    r, found = test_check.check(tmp_path, text)
    line = text.splitlines().index('        super.__init__()') + 1
    assert r.returncode == 1 and f"mistake: line {line}: `super.__init__()`: super.__init__ calls super without its " \
        "(): super().__init__() is meant; checked with it\n" in r.stdout, r.stdout
    assert all(found[p].startswith('matches') for p in ('Head', 'MultiHeadAttention', 'Block')), r.stdout


@pytest.mark.parametrize('dim, axis', [('', '0, the batch'), (', dim=1', '1, the positions (time)')])
def test_heads_joined_along_the_batch_are_named_and_what_holds_them_is_checked_with_the_lectures(dim, axis, tmp_path):
    """torch.cat of the heads without dim=-1 (along the batch or the positions, so proj raises): the cat named at
    its line, and the Block and the model that hold the attention checked with it computed as the lecture's, not
    'not checked'."""
    import test_check
    cat = f'out = torch.cat([h(x) for h in self.heads]{dim})'
    text = test_check.edited(('out = torch.cat([h(x) for h in self.heads], dim=-1)', cat))
    r, found = test_check.check(tmp_path, text)
    line = text.splitlines().index(f'        {cat}') + 1
    assert r.returncode == 1 and found['MultiHeadAttention'].startswith(
        f"differs: line {line}: `{cat}` joins its 4 tensors along dim {axis}: side by side is torch.cat(..., "
        "dim=-1); and raised on"), r.stdout
    assert found['Block'] == 'matches' and found['BigramLanguageModel'].startswith(
        'matches; with MultiHeadAttention as the lecture computes it'), r.stdout


def test_what_is_said_once_of_settings_bases_and_a_models_own_crash(tmp_path):
    """dropout never set: named once, as the mistake (no note repeats it, none about vocab_size, which a data line
    sets). A base class of a part is not 'used by no model'; an unused class is. A model whose own forward raises
    is named for it, beside a Head's unrelated mistake (not 'it holds Head, which can't run')."""
    import test_check
    r, found = test_check.check(tmp_path, test_check.edited(('dropout = 0.2\n', '')))
    assert r.returncode == 1 and 'dropout is never set anywhere in the file' in r.stdout, r.stdout
    assert 'note: your code reads' not in r.stdout and 'note: checked with' not in r.stdout, r.stdout
    spare = 'class Spare(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = nn.Linear(3, 3)' \
            '\n\n    def forward(self, x):\n        return self.w(x)\n\nclass FeedFoward(nn.Module):'
    r, found = test_check.check(tmp_path, test_check.edited(
        ('class Head(nn.Module):', 'class HeadBase(nn.Module):\n    pass\n\nclass Head(HeadBase):'),
        ('class FeedFoward(nn.Module):', spare)))
    assert r.returncode == 0 and 'note: no model of yours uses Spare: not checked\n' in r.stdout, r.stdout
    r, found = test_check.check(tmp_path, test_check.edited(
        ('wei = q @ k.transpose(-2,-1) * k.shape[-1]**-0.5', 'wei = q @ k.transpose(-2,-1)'),
        ('        x = tok_emb + pos_emb\n', '        x = tok_emb + pos_emb.T\n')))
    assert r.returncode == 1 and found['Head'].startswith('differs: line') and found['BigramLanguageModel'].startswith(
        'differs: raised on'), r.stdout


def test_the_slips_are_listed_in_the_order_of_their_lines(tmp_path):
    """In Head, nn imported only after it and super without its (): both named, the class line's slip first."""
    import test_check
    text = test_check.edited(('import torch.nn as nn\n', ''), ('        super().__init__()\n        self.key = nn.Linear',
                                                              '        super.__init__()\n        self.key = nn.Linear'),
                             ('class MultiHeadAttention(nn.Module):', 'import torch.nn as nn\n\nclass MultiHeadAttention(nn.Module):'))
    r, found = test_check.check(tmp_path, text)
    slips = [int(line.split(':')[1].split()[1]) for line in r.stdout.splitlines() if line.startswith('mistake: line')]
    assert r.returncode == 1 and len(slips) == 2 and slips == sorted(slips), r.stdout


def test_a_setting_never_set_in_a_file_of_two_settings_is_a_mistake(tmp_path):
    """fragment_head.py with n_embd and block_size set, and a dropout never set: that is a NameError of theirs,
    named at its line (a file of no settings, a fragment, gets the lecture's values in a note)."""
    text = open(os.path.join(LEARNERS, 'fragment_head.py'), encoding='utf-8').read()
    text = text.replace('\n\nclass Head', '\nn_embd = 32\nblock_size = 8\n\nclass Head').replace(
        "block_size, block_size)))\n", "block_size, block_size)))\n        self.dropout = nn.Dropout(dropout)\n")
    (tmp_path / 'mine.py').write_text(text + '\nhead = Head(16)\n')
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    line = text.splitlines().index('        self.dropout = nn.Dropout(dropout)') + 1
    assert r.returncode == 1 and r.stdout.startswith(f"mistake: line {line}: `self.dropout = nn.Dropout(dropout)`: "
                                                     "dropout is never set anywhere in the file"), r.stdout


def test_f_dropout_without_training_and_a_layer_unused_in_a_list_are_named(tmp_path):
    """F.dropout(wei, p) with no training= drops out in eval mode too: a mistake at its line. One layer of a
    ModuleList never used, beside one that is: named by its place in the list."""
    import test_check
    text = test_check.edited(('wei = self.dropout(wei)', 'wei = F.dropout(wei, p=dropout)'))
    r, found = test_check.check(tmp_path, text)
    line = text.splitlines().index('        wei = F.dropout(wei, p=dropout)') + 1
    assert r.returncode == 1 and found['Head'].startswith(f"differs: line {line}: in eval mode its dropout still acts ("
                                                          "F.dropout trains by default"), r.stdout
    text = test_check.edited(('        self.dropout = nn.Dropout(dropout)\n\n    def forward(self, x):\n        B,T,C',
                              '        self.dropout = nn.Dropout(dropout)\n        self.spare = nn.ModuleList([nn.Linear('
                              'n_embd, head_size), nn.Linear(n_embd, head_size)])\n\n    def forward(self, x):\n'
                              '        B,T,C'), ('        k = self.key(x)\n', '        k = self.key(x) + 0 * self.spare[0](x)\n'))
    r, found = test_check.check(tmp_path, text)
    assert found['Head'].endswith('your `spare.1` is defined but never used'), r.stdout


def test_a_layer_made_outside_the_part_and_used_in_its_forward_is_named(tmp_path):
    """A LayerNorm made at the top of the file and applied in Block's forward: it is not registered, so it never
    trains; named where it is made."""
    import test_check
    text = test_check.edited(('class Block(nn.Module):', 'shared_ln = nn.LayerNorm(n_embd)\n\nclass Block(nn.Module):'),
                             ('x = x + self.ffwd(self.ln2(x))', 'x = x + self.ffwd(shared_ln(x))'))
    r, found = test_check.check(tmp_path, text)
    line = text.splitlines().index('shared_ln = nn.LayerNorm(n_embd)') + 1
    assert r.returncode == 1 and found['Block'].startswith(
        f"differs: line {line}: a LayerNorm made outside Block runs in its forward: it is not registered, so "
        "model.parameters() misses it and it never trains"), r.stdout


SAMPLED = [
    ('F.softmax(logits[:, -1, :] / 0.7, dim=-1)', "matches stage 6 (LayerNorm, 1:32:51): a variant, generate samples at a "
     "temperature of 0.7 (line 85: "),
    ('F.softmax(logits[:, -1, :], dim=0)', "differs: generate samples every token with the same odds, whatever the "
     "logits (line 85: "), # (over the batch: of one prompt, all 1)
    ('torch.sigmoid(logits[:, -1, :])', "differs: generate samples from odds that aren't the softmax of the last "
     "position's logits (line 85: "),
    ('F.softmax(logits[:, -1, :] - 0.5 * F.one_hot(idx[:, -1], logits.shape[-1]), dim=-1)', "matches stage 6 (LayerNorm, "
     "1:32:51): a variant, generate changes the odds of 1 of the tokens before it samples (a repetition penalty?)"),
    ("F.softmax((lambda l: l.masked_fill(l < l.topk(5).values[:, -1:], float('-inf')))(logits[:, -1, :] / 0.7), -1)",
     "matches stage 6 (LayerNorm, 1:32:51): a variant, generate samples at a temperature of 0.7 (line 85: "),
    ("F.softmax(logits[:, -1, :], dim=-1).sort(descending=True)\n            cut = probs.values.masked_fill(probs.values"
     ".cumsum(-1) - probs.values > 0.9, 0)\n            probs = probs.indices.gather(-1, torch.multinomial(cut, 1))\n"
     "            idx = torch.cat((idx, probs), dim=1)\n            probs = probs", "matches stage 6 (LayerNorm, 1:32:51): "
     "a variant, generate samples among the likeliest tokens that hold a share of the odds (top-p, here ")]


@pytest.mark.parametrize('probs, said', SAMPLED)
def test_what_generate_samples_from_is_measured_against_the_softmax_of_the_last_logits(probs, said, tmp_path, capsys):
    """The odds generate hands torch.multinomial, beside softmax(logits[:, -1, :]): the same at another temperature
    (a variant, its value given), the same for every token, or none of these (mistakes, at their line); a few tokens'
    odds changed, top-k at a temperature, top-p from the sorted odds (variants)."""
    import check
    with open(os.path.join(LEARNERS, 'batched_4d.py'), encoding='utf-8') as f:
        text = f.read().replace('F.softmax(logits[:, -1, :], dim=-1)', probs)
    if 'gather' in probs: # (top-p: an index into the sorted odds, its token appended already)
        text = text.replace('            idx = torch.cat((idx, torch.multinomial(probs, 1)), dim=1)\n', '', 1)
    (tmp_path / 'mine.py').write_text(text)
    kernel = {'__name__': '__main__'}
    exec(compile(text, str(tmp_path / 'mine.py'), 'exec'), kernel)
    check.here(kernel)
    assert parts(capsys.readouterr().out)['GPT'].startswith(said)


OWN_LAYERS = [
    ([('self.lm_head = nn.Linear(n_embd, vocab_size)', 'self.ln_f = nn.LayerNorm(n_embd)\n'
       '        self.lm_head = nn.Linear(n_embd, vocab_size)'), ('logits = self.lm_head(x)', 'logits = self.lm_head('
       'self.ln_f(x))')], "stage 2 (one self-attention head, 1:02:00): line 56: a variant, a final LayerNorm before "
     "lm_head, which the lecture adds at stage 6 (ln_f, 1:32:51)"),
    ([('logits = logits.view(B*T, C)', 'logits = logits.view(batch_size*block_size, C)')], # (right for its batches)
     "differs: `logits = logits.view(batch_size*block_size, C)` reshapes by the settings (batch_size, block_size), "
     "not by the tensor's own shape, so any other batch raises"),
    ([('self.sa_head = Head(n_embd)', 'self.sa_heads = Head(n_embd)')], "differs: line 63: its forward uses "
     "`self.sa_head`, which __init__ never makes"),
    ([('k.transpose(-2, -1) * C**-0.5', 'k.T(-2, -1) * (1 / torch.sqrt(C))')], "differs: `wei = q @ k.T(-2, -1) * (1 / "
     "torch.sqrt(C))` gives torch.sqrt a Python int, where it takes a tensor: math.sqrt is meant"), # (.T(: a slip)
    ([('out = wei @ v', 'out = (wei @ v).reshape(batch_size, block_size, C)')], "differs: `out = (wei @ v).reshape("
     "batch_size, block_size, C)` reshapes by the settings (batch_size, block_size)"), # (in the Head)
    ([('\nmodel = BigramLanguageModel()', '\nfrom mypackage.models import BigramLanguageModel\nmodel = '
       'BigramLanguageModel()')], 'matches stage 2 (one self-attention head, 1:02:00)'), # (theirs, not a stand-in)
    ([('        self.token_embedding_table = nn.Embedding(vocab_size, n_embd)\n        self.position_embedding_table = '
       'nn.Embedding(block_size, n_embd)', '        self.position_embedding_table = nn.Embedding(block_size, n_embd)\n'
       '        self.token_embedding_table = nn.Embedding(vocab_size, n_embd)')], # (the vocabulary: lm_head's, not 8)
     'matches stage 2 (one self-attention head, 1:02:00); the past never hears the future'),
    ([('def generate(self, idx, max_new_tokens):', 'def generate(self, idx, max_new_tokens, block_size=4):')],
     "differs: generate's block_size defaults to 4, where the model's block_size is 8: called without it, generate "
     "feeds the model 4 tokens at most; otherwise it matches stage 2"), # (the checker gives it 8: it runs as meant)
    ([('def generate(self, idx, max_new_tokens):', 'def generate(self, idx, max_new_tokens):\n        idx = idx[None]')],
     "matches stage 2 (one self-attention head, 1:02:00): a variant, generate takes one prompt as a 1-D tensor, where "
     "the lecture's takes a (B, T) tensor of prompts"), # (given (1, T), it feeds the model (1, 1, T): tried with (T,))
    ([('pos_emb = self.position_embedding_table(torch.arange(T, device=device))', '# pos_emb = ...'), ('x = tok_emb + '
       'pos_emb', 'x = tok_emb'), ('nn.Embedding(block_size, n_embd)', 'nn.Embedding(4, n_embd)')],
     'differs: line 60: no position embedding'), # (its table, never used, shorter than the block)
    ([('x = tok_emb + pos_emb', 'x = (tok_emb + pos_emb).to(torch.bfloat16)')], # (checked in float32, as it is)
     'matches stage 2 (one self-attention head, 1:02:00)'),
    ([('vocab_size = len(chars)', 'import mytokenizer\nvocab_size = mytokenizer.vocab_size')], # (a package not here)
     'matches stage 2 (one self-attention head, 1:02:00)'), # (its vocab_size: the lecture's 65, not the stand-in)
    ([('def generate(self, idx, max_new_tokens):', 'def generate(self, idx, max_new_tokens, temperature=1.0):')],
     'matches stage 2 (one self-attention head, 1:02:00): a variant, generate takes temperature (as nanoGPT), which '
     "the lecture's has not"), # (at its default: as the lecture's)
]


@pytest.mark.parametrize('changes, said', OWN_LAYERS)
def test_a_models_own_layers_and_shapes_are_named_where_they_leave_the_lectures(changes, said, tmp_path):
    """A LayerNorm before lm_head at stage 2 (a variant: the lecture's comes at stage 6); a view by the settings, which
    raises on any batch but the training's; a layer forward calls that __init__ never made (the model then is at no
    stage: the summary is of gpt.py's parts); k.T(-2, -1) run as transpose (a slip), then torch.sqrt of an int; their
    class imported again from a package that isn't here: theirs is checked."""
    import check
    text = open(os.path.join(LEARNERS, 'stage2_one_head.py'), encoding='utf-8').read()
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    (tmp_path / 'mine.py').write_text(text)
    lines = check.checked(str(tmp_path / 'mine.py')).lines
    said_here = parts('\n'.join(lines))['Head' if said.startswith(('differs: `wei', 'differs: `out')) else
                                         'BigramLanguageModel']
    assert said_here.startswith(said) or said.startswith('stage') and said in said_here, lines
    assert 'stage 1' not in lines[-1] and 'never runs it' not in '\n'.join(lines) # (a model that can't run: at none)
    if 'k.T(' in text:
        assert "line 41: `wei = q @ k.T(-2, -1) * (1 / torch.sqrt(C))`: .T(-2, -1) calls the transposed tensor" in lines[0]


SDPA_HEAD = ("        wei = q @ k.transpose(-2,-1) * k.shape[-1]**-0.5\n        wei = wei.masked_fill(self.tril[:T, :T] == 0, "
             "float('-inf'))\n        wei = F.softmax(wei, dim=-1)\n        wei = self.dropout(wei)\n")
EXPLAINED = [ # (changes to the lecture's script, small; the part; what its line holds, 'at' standing for a line's number)
    ([('n_head = 4', 'n_head = 2'), ('torch.cat([h(x) for h in self.heads], dim=-1)', 'torch.cat([h(x) for h in '
      'self.heads])')], 'MultiHeadAttention', 'joins its 2 tensors along dim 0, the batch', None),
    ([('head_size = n_embd // n_head\n        self.sa = MultiHeadAttention(n_head, head_size)', 'head_size = int(n_embd '
       '/ n_head)\n        self.sa = MultiHeadAttention(head_size, n_head)')], 'Block', 'passes head_size as num_heads and '
     'n_head as head_size', None), # (a call of another class before it: the crossed one still found)
    ([('class FeedFoward(nn.Module):', 'act = nn.ReLU()\n\nclass FeedFoward(nn.Module):'), ('            nn.ReLU(),\n', ''),
      ('        return self.net(x)', '        return self.net[2](self.net[1](act(self.net[0](x))))')], 'FeedFoward',
     'matches', None), # (a layer of no weights made outside: nothing to train, no mistake)
    ([('self.heads = nn.ModuleList([Head(head_size) for _ in range(num_heads)])\n        self.proj = nn.Linear(head_size * '
       'num_heads, n_embd)', 'self.heads = nn.ModuleList([\n            Head(head_size * 2),\n            Head(head_size * 2),'
       '\n            Head(head_size * 2),\n            Head(head_size * 2)])\n        self.proj = nn.Linear(head_size * 2 * '
       'num_heads, n_embd)')], 'MultiHeadAttention', 'at: its 4 heads together are 64 wide', 'Head(head_size * 2),'),
    ([('self.blocks = nn.Sequential(*[Block(n_embd, n_head=n_head) for _ in range(n_layer)])', 'shared = Block(n_embd, '
       'n_head=n_head)\n        other = Block(n_embd, n_head=n_head)\n        self.blocks = nn.Sequential(shared, other, '
       'shared)')], 'BigramLanguageModel', 'at: the 3 Blocks are 2 repeated', 'shared = Block('),
    ([(SDPA_HEAD, ''), ('        out = wei @ v\n', '        out = F.scaled_dot_product_attention(q, k, v, self.tril[:T, :T] '
       '== 1, 0.2)\n')], 'Head', "in eval mode its dropout still acts (F.scaled_dot_product_attention's dropout_p", None),
    ([('wei = self.dropout(wei)', 'wei = F.dropout(wei, 0.2)'), ('        out = wei @ v\n', '        out = wei @ v + 0.01 '
       '* torch.randn(B, T, 1, device=x.device)\n')], 'Head', 'in eval mode its dropout still acts (F.dropout trains by default', None),
    ([('        self.dropout = nn.Dropout(dropout)\n\n    def forward(self, x):\n        B,T,C = x.shape', '        self.dropout '
       '= nn.Dropout(dropout)\n        self.spare = nn.Linear(n_embd, head_size)\n\n    def forward(self, x):\n        B,T,C = '
       'x.shape')], 'Head', 'matches; your `spare` is defined but never used', None), # (no fourth Linear of its attention)
    ([('self.heads = nn.ModuleList([Head(head_size) for _ in range(num_heads)])', 'self.heads = [Head(head_size) for _ '
       'in range(num_heads)]'), ('class Block(nn.Module):', 'shared_ln = nn.LayerNorm(n_embd)\n\nclass Block(nn.Module):'),
      ('x = x + self.ffwd(self.ln2(x))', 'x = x + self.ffwd(shared_ln(x))')], 'Block', 'at: a LayerNorm made outside '
     'Block runs in its forward', 'shared_ln = nn'), # (after a plain list of heads: both named, no consequence)
    ([('self.ln1 = nn.LayerNorm(n_embd)', 'self.ln1 = nn.LayerNorm(n_embd, dropout)')], 'Block', "at: a LayerNorm's eps "
     "far above 1e-5 (nn.LayerNorm's second argument is eps, not the dropout)", 'self.ln1 = nn.LayerNorm(n_embd, dr'),
    ([('self.sa = MultiHeadAttention(n_head, head_size)', 'self.sa = MultiHeadAttention(2, head_size)')],
     'MultiHeadAttention', 'its 2 heads together are 16 wide, not n_embd = 32', None),
    ([('    def __init__(self, num_heads, head_size):', '    def __init__(self, num_heads, head_size, /):'),
      ('self.sa = MultiHeadAttention(n_head, head_size)', 'self.sa = MultiHeadAttention(head_size, n_head)')], 'Block',
     'passes head_size as num_heads and n_head as head_size', None), # (positional-only parameters)
    ([(SDPA_HEAD, ''), ('        out = wei @ v\n', '        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)'
       '\n        out = F.dropout(out, 0.2)\n')], 'Head', 'in eval mode its dropout still acts (F.dropout trains', None),
    ([('        self.dropout = nn.Dropout(dropout)\n\n    def forward(self, x):\n        B,T,C = x.shape', '        self.dropout '
       '= nn.Dropout(dropout)\n        self.head_size = head_size\n\n    def forward(self, x):\n        B,T,C = x.shape'),
      ("k.shape[-1]**-0.5\n        wei = wei.masked", "C[-1]**-0.5\n        wei = wei.masked")], 'Head',
     "TypeError: 'int' object is not subscriptable", None), # (an int of theirs is no layer called)
]


@pytest.mark.parametrize('changes, part, said, at', EXPLAINED)
def test_what_explain_names_is_named_in_its_part_at_its_line(changes, part, said, at, tmp_path):
    """What only a measurement names, each found by mutation testing (tests/README.md): two heads joined along the
    batch, a crossed call after another, a weightless layer made outside, the first of heads too wide, the Block
    repeated among others, the dropout of F.scaled_dot_product_attention given by position, F.dropout beside noise,
    an unused Linear in a head."""
    import check
    import test_check
    text = test_check.edited(*changes)
    (tmp_path / 'mine.py').write_text(text)
    if at:
        said = said.replace('at', f"line {next(i for i, l in enumerate(text.splitlines(), 1) if at in l)}", 1)
    found = parts('\n'.join(check.checked(str(tmp_path / 'mine.py')).lines))
    assert said in found[part] and (said != 'matches' or found[part] == 'matches'), found
    assert 'not a layer' not in found[part] and (part == 'BigramLanguageModel' or found[
        'BigramLanguageModel'].startswith('matches')), found # (a part's mistake: no consequence in the model)
    assert '`spare`' not in said or not any('spare' in v for k, v in found.items() if k != part), found # (once)


def test_a_mask_made_again_at_each_length_does_not_set_block_size(tmp_path):
    """A mask that forward registers anew at the length it is given (T, T): the model's block_size is its
    position table's, so generate is tried there, not at the last length the model ran at."""
    import test_check
    text = test_check.edited(("        wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))",
                              "        self.register_buffer('tril', torch.tril(torch.ones(T, T, device=x.device)))\n"
                              "        wei = wei.masked_fill(self.tril == 0, float('-inf'))"))
    r, found = test_check.check(tmp_path, text)
    assert r.returncode == 0 and found['BigramLanguageModel'].startswith(
        'matches; the past never hears the future, batch rows never talk, generate crops to block_size and runs '
        'past it, loss at init'), r.stdout


def test_a_text_generate_that_joins_the_prompts_rows_into_one_says_so(tmp_path):
    """generate that makes idx one row (`idx.view(1, -1)`) and returns its text: a batch of 2 prompts runs as one
    prompt of 2 tokens, a variant named beside the text it returns."""
    import test_check
    text = test_check.edited(('    def generate(self, idx, max_new_tokens):\n',
                              '    def generate(self, idx, max_new_tokens):\n        idx = idx.view(1, -1)\n'),
                             ('        return idx\n\nmodel', '        return decode(idx[0].tolist())\n\nmodel'))
    r, found = test_check.check(tmp_path, text)
    assert r.returncode == 0 and found['BigramLanguageModel'].startswith(
        "matches: a variant, generate returns text, where the lecture's returns the tokens (to decode); a variant, "
        "generate reads idx as one prompt: a batch of 2 rows runs as one row of 2 tokens, where the lecture's samples "
        "each row; the past"), r.stdout


@pytest.mark.parametrize('changes, variant', [
    ([('q, k, v = self.c_attn(x)', 'k, q, v = self.c_attn(x)')], ''),
    ([(SPLIT, INTERLEAVED)], ''),
    ([(SPLIT, INTERLEAVED), ('y.transpose(1, 2).contiguous().view(B, T, C)', 'y.permute(0, 2, 3, 1).reshape(B, T, C)')],
     'line 56: a variant, the heads joined channel by channel, where the lecture sets them side by side (torch.cat): '
     'the same to a proj that learns the order; ')])
def test_one_linears_q_k_and_v_are_read_in_the_order_and_layout_their_code_splits_it(changes, variant, tmp_path):
    """nanoGPT's c_attn split k first, or each head's q, k and v interleaved (view(B, T, nh, hs, 3)), and the heads
    joined channel by channel (hs before nh): the lecture's computation in another layout, read from the values
    their code made. It matches; the channel order, which proj learns either way, is a variant at its line."""
    r, text = checked_with(os.path.join(LEARNERS, 'nanogpt_layout.py'), changes, tmp_path)
    assert r.returncode == 0 and parts(r.stdout)['CausalSelfAttention'] == (
        f"matches: {variant}a variant, bias in key, query and value (the lecture's have none); line 43: a variant, "
        f"q, k and v from one Linear, split in three (as nanoGPT); {cited(text, 'y = F.scaled_dot')}: a variant, "
        "F.scaled_dot_product_attention: the affinities, their scale, the mask, the softmax and wei @ v in one call"), \
        r.stdout


FFWD_BY_ARGUMENT = [ # the feed-forward's inner width an argument of the Block's, and a model that can't be built
    ('    def __init__(self, n_embd):\n        super().__init__()\n        self.net = nn.Sequential(\n'
     '            nn.Linear(n_embd, 4 * n_embd),\n            nn.ReLU(),\n            nn.Linear(4 * n_embd, n_embd),',
     '    def __init__(self, d_model, hidden_dim):\n        super().__init__()\n        self.net = nn.Sequential(\n'
     '            nn.Linear(d_model, hidden_dim),\n            nn.ReLU(),\n            nn.Linear(hidden_dim, d_model),'),
    ('    def __init__(self, n_embd, n_head):\n        super().__init__()',
     '    def __init__(self, n_embd, n_head, hidden_dim):\n        super().__init__()'),
    ('self.ffwd = FeedFoward(n_embd)', 'self.ffwd = FeedFoward(n_embd, hidden_dim)'),
    ('Block(n_embd, n_head=n_head)', 'Block(n_embd, n_head=n_head, hidden_dim=4 * n_embd)'),
    ('nn.Embedding(block_size, n_embd)', 'nn.Embedding(block_size)')]
UNRELATED = '''class Bigram(nn.Module):
    def __init__(self):
        super().__init__()
        self.token_embedding_table = nn.Embedding(vocab_size, vocab_size)

    def forward(self, idx, targets=None):
        return F.softmaxx(self.token_embedding_table(idx), -1), None

bigram = Bigram()
model = BigramLanguageModel()
'''
SINUSOIDS = '''class Sinusoids(nn.Module):
    def __init__(self, n_embd, max_len=1000):
        super().__init__()
        angle = torch.arange(max_len)[:, None] * torch.exp(torch.arange(0, n_embd, 2) * (-math.log(1e4) / n_embd))
        pe = torch.zeros(max_len, n_embd)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
        self.register_buffer('pe', pe.unsqueeze(0))

    def forward(self, x):
        return x + self.pe[:, :x.size(1)]

class BigramLanguageModel(nn.Module):'''
EMBED = '''class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.token_embedding_table = nn.Embedding(vocab_size, n_embd)
        self.position_embedding_table = nn.Embedding(block_size, n_embd)

    def forward(self, idx):
        positions = torch.arange(idx.shape[1], device=idx.device)
        return self.token_embedding_table(idx) + self.position_embedding_table(positions)

class BigramLanguageModel(nn.Module):'''
DEMO = """class LayerNorm1d(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.gamma = torch.ones(dim)
        self.beta = torch.zeros(dim)

    def __call__(self, x):
        xmean = x.mean(dim=1, keepdim=True)
        xvar = x.var(dim=1, keepdim=True)
        xhat = (x - xmean) / torch.sqrt(xvar + self.eps)
        self.out = self.gamma * xhat + self.beta
        return self.out

    def parameters(self):
        return [self.gamma, self.beta]

module = LayerNorm1d(100)
x = module(torch.randn(32, 100))

class BigramLanguageModel(nn.Module):"""
RUN_AS_THEY_MEAN = [ # (the changes to the lecture's script, a part, how its line starts)
    ([('import torch.nn as nn\nfrom torch.nn import functional as F\n', '')], 'BigramLanguageModel', 'matches; the past'),
    ([('self.sa = MultiHeadAttention(n_head, head_size)', 'self.sa = MultiHeadAttention(n_embd, head_size)')],
     'Block', 'differs: line 118: `self.sa = MultiHeadAttention(n_embd, head_size)` passes n_embd as num_heads: '
     'MultiHeadAttention takes (num_heads, head_size)'),
    ([('dropout = 0.2\n', 'dropout = 0.2\nheads_per_block = n_head\n'), ('Block(n_embd, n_head=n_head)',
      'Block(n_embd, heads_per_block)')], 'BigramLanguageModel', 'matches; the past'), # (a count by its words)
    (FFWD_BY_ARGUMENT, 'FeedFoward', 'matches'),
    ([('self.ln_f = nn.LayerNorm(n_embd)', 'self.ln_f = nn.LayerNorm(n_embd, bias=False)')], 'BigramLanguageModel',
     "matches: line 135: a variant, a LayerNorm without bias (bias=False; the lecture's have one)"),
    ([('nn.Embedding(vocab_size, n_embd)', 'nn.Embedding(config.vocab_size, n_embd)'), ('nn.Linear(n_embd, vocab_size)',
      'nn.Linear(n_embd, config.vocab_size)'), ('class BigramLanguageModel(nn.Module):', 'class Config:\n    vocab_size '
      '= None\n\nconfig = Config()\nconfig.vocab_size = vocab_size\n\nclass BigramLanguageModel(nn.Module):')],
     'BigramLanguageModel', 'matches; the past'), # (a config's field set from the data, at the top level)
    ([('        self.token_embedding_table = nn.Embedding(vocab_size, n_embd)\n        self.position_embedding_table = '
       'nn.Embedding(block_size, n_embd)', '        self.embed = Embed()'),
      ('tok_emb = self.token_embedding_table(idx)\n        pos_emb = self.position_embedding_table(torch.arange(T, '
       'device=device))\n        x = tok_emb + pos_emb', 'x = self.embed(idx)'),
      ('class BigramLanguageModel(nn.Module):', EMBED)], 'BigramLanguageModel',
     'matches; the past'), # (the embeddings in a module of theirs: no model, no part)
    ([('import torch\n', 'import math\nimport torch\n'), ('class BigramLanguageModel(nn.Module):', SINUSOIDS),
      ('self.position_embedding_table = nn.Embedding(block_size, n_embd)', 'self.positions = Sinusoids(n_embd)'),
      ('pos_emb = self.position_embedding_table(torch.arange(T, device=device))\n        x = tok_emb + pos_emb',
       'x = self.positions(tok_emb)')], 'BigramLanguageModel',
     'matches: a variant, a fixed (sinusoidal) position table; the lecture learns one'), # (added in a module)
    (FFWD_BY_ARGUMENT[:1] + [('self.ffwd = FeedFoward(n_embd)', 'self.ffwd = FeedFoward(n_embd, 2 * n_embd)')],
     'FeedFoward', 'matches: line 103: a variant, its inner width set by a setting of yours'), # (its caller's)
    ([('from torch.nn import functional as F\n', 'from torch.nn import functional as F\nfrom common import encode\n')],
     'BigramLanguageModel', 'matches; the past'), # (their common, not there: it stands in, not ours)
    ([('vocab_size = len(chars)\n', ''), ('class BigramLanguageModel(nn.Module):\n\n    def __init__(self):',
       'class BigramLanguageModel(nn.Module):\n\n    def __init__(self, vocab_size=vocab_size):')],
     'BigramLanguageModel', 'matches; the past'), # (a default no line sets: the data's, as it stands in elsewhere)
    ([('            loss = F.cross_entropy(logits, targets)\n        return logits, loss',
       '            loss = F.cross_entropy(logits, targets)\n            return logits, loss')], 'BigramLanguageModel',
     'differs: generate fails: its forward returns None without targets (line 153: `return logits, loss` is reached '
     'only with them): '),
    ([('from torch.nn import functional as F\n', 'from torch.nn import functional as F\nfrom hyper import cfg\n'),
      ('    def generate(self, idx, max_new_tokens):\n        for _ in range(max_new_tokens):\n            idx_cond = '
       'idx[:, -block_size:]', '    @torch.no_grad()\n    def generate(self, idx, max_new_tokens):\n        for _ in '
       'range(max_new_tokens):\n            idx_cond = idx[:, -cfg.block_size:]')], 'BigramLanguageModel',
     'matches; the past never hears the future, batch rows never talk, generate crops to block_size'),
    ([("wei = F.softmax(wei, dim=-1)", "wei = F.softmaxx(wei, dim=-1)"), ('model = BigramLanguageModel()\n', UNRELATED)],
     'Bigram', "differs: raised on (2, 16): mine.py, line 171: AttributeError: module 'torch.nn.functional' has no "
     "attribute 'softmaxx'"),
    # (on a GPU: each tensor left behind, in the order the forward meets them)
    ([('torch.arange(T, device=device)', 'torch.arange(T)'), ("self.register_buffer('tril', torch.tril(torch.ones("
      "block_size, block_size)))", 'self.tril = torch.tril(torch.ones(block_size, block_size))')], 'BigramLanguageModel',
     'differs: on a GPU its forward raises at line 141 (`pos_emb = self.position_embedding_table(torch.arange(T))`): it '
     "makes a tensor on the CPU, where the model's are on the GPU (give it device=, as the lecture's torch.arange(T, "
     "device=device)); on a GPU its forward raises at line 76 (`wei = wei.masked_fill(self.tril[:T, :T] == 0, float("
     "'-inf'))`): line 68: `self.tril = torch.tril(torch.ones(block_size, block_size))` keeps a tensor outside the "
     "model's buffers, which model.to(device) leaves on the CPU"),
    ([("wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))", "tril = torch.tril(torch.ones(T, T))\n"
       "        wei = wei.masked_fill(tril == 0, float('-inf'))")], 'BigramLanguageModel', "differs: on a GPU its "
     "forward raises at line 77 (`wei = wei.masked_fill(tril == 0, float('-inf'))`): line 76: `tril = torch.tril("
     "torch.ones(T, T))` makes a tensor on the CPU"),
    # (a tensor on the input's device, or on their GPU named: where the model is)
    ([("wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))", "tril = torch.tril(torch.ones(T, T, "
       "device=x.device))\n        wei = wei.masked_fill(tril == 0, float('-inf'))"), ('torch.arange(T, device=device)',
      "torch.arange(T, device='cuda')")], 'BigramLanguageModel', 'matches; the past'),
    # (a plain tensor made on their device, a device by another name: where their model is)
    ([("self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))", 'self.tril = torch.tril('
       'torch.ones(block_size, block_size, device=device))'), ('torch.arange(T, device=device)',
      'torch.arange(T, device=DEV)'), ("else 'cpu'\n", "else 'cpu'\nDEV = torch.device(device)\n")],
     'BigramLanguageModel', 'matches; the past'),
    ([('wei = q @ k.transpose(-2,-1) * k.shape[-1]**-0.5', 'wei = q @ k.transpose(-2,-1)')], 'BigramLanguageModel',
     'matches; with Head as the lecture computes it, the past'), # (on a GPU: their Head, not the one put in)
    ([('torch.arange(T, device=device)', 'torch.arange(T)'), ('m = model.to(device)', 'm = model')],
     'BigramLanguageModel', 'matches; the past'), # (a model never moved to a GPU: where it runs, all is there)
    # (the lecture's LayerNorm1d, built alone to show the math beside a model that doesn't use it: not a part)
    ([('class BigramLanguageModel(nn.Module):', DEMO)], 'BigramLanguageModel', 'matches; the past'),
    ([('idx_cond = idx[:, -block_size:]', 'idx_cond = idx[:, -block_size+1:]')], 'BigramLanguageModel', 'differs: '
     'generate crops what the model gets to 15 tokens (line 157: `idx_cond = idx[:, -block_size+1:]`), where the '
     'model takes block_size = 16: crop to the last block_size'), # (one short: named, with its line)
    ([('for _ in range(n_layer)])', 'for _ in range(n_layer)], nn.LayerNorm(n_embd))')], 'BigramLanguageModel',
     'matches, as in the video: line 134: a variant, `self.blocks = nn.Sequential(*[Block(n_embd, n_head=n_head) for _ '
     "in...`: a LayerNorm right before ln_f, two in a row (the video's last of blocks and the published ln_f"),
    ([('        x = self.blocks(x)', '        self.blocks(x)')], 'BigramLanguageModel', 'differs: line 143: the Blocks '
     'applied in turn is made, but the result is never used$'), # (at the call that drops it; blocks is used)
    ([('from torch.nn import functional as F\n', 'from torch.nn import functional as F\nfrom .configs import model as '
       'model_config\n'), ('self.key = nn.Linear(n_embd,', 'self.key = nn.Linear(model_config.n_embd,')],
     'BigramLanguageModel', 'matches; the past'), # (a model_config from a module not here: the settings)
    # (a number from a module not here: the checker can't, not their mistake)
    ([('from torch.nn import functional as F\n', 'from torch.nn import functional as F\nfrom somewhere import hp_table\n'),
      ('self.key = nn.Linear(n_embd,', 'self.key = nn.Linear(hp_table.alpha * 1,')], 'Head', "can't build Head(head_size="
     "8): mine.py, line 66: TypeError: unsupported operand type(s) for *: 'StandIn' and 'int'"),
    ([('from torch.nn import functional as F\n', 'from torch.nn import functional as F\nfrom somewhere import hp_table\n'),
      ('self.key = nn.Linear(n_embd,', 'self.key = nn.Linear(hp_table.alpha,')], 'Head', "can't build Head(head_size="
     "8): mine.py, line 66: TypeError: empty(): argument 'size'"),
    # (generate(idx, total): the one parameter left is the count; generate(initiator_token, max_new_tokens): the
    # count says so by its name, so the first is the prompt)
    ([('    def generate(self, idx, max_new_tokens):\n        for _ in range(max_new_tokens):',
       '    def generate(self, idx, total):\n        for _ in range(total):')], 'BigramLanguageModel',
     'matches; the past never hears the future, batch rows never talk, generate crops to block_size and runs past it'),
    ([('    def generate(self, idx, max_new_tokens):\n', '    def generate(self, initiator_token, max_new_tokens):\n'
       '        idx = initiator_token\n')], 'BigramLanguageModel',
     'matches; the past never hears the future, batch rows never talk, generate crops to block_size and runs past it'),
    # (F.nll_loss on the logits, not their log-softmax: a loss near 0 at any init)
    ([('loss = F.cross_entropy(logits, targets)', 'loss = F.nll_loss(logits, targets)')], 'BigramLanguageModel',
     'differs: its loss at init is '),
    # (a token table as wide as the vocabulary and no lm_head: the Blocks' output taken as the logits, no bigram)
    ([('n_embd = 32', 'n_embd = 65'), ('n_head = 4', 'n_head = 5'), ('logits = self.lm_head(x)', 'logits = x'),
      ('        self.lm_head = nn.Linear(n_embd, vocab_size)\n', '')], 'BigramLanguageModel', "differs: no lm_head: "
     "the last part's output is taken as the logits, where the lecture's lm_head maps n_embd to vocab_size (from "
     "1:02:00)$"),
    # (an option of its own beside the prompt and the count: named, with its default)
    ([('    def generate(self, idx, max_new_tokens):\n', "    def generate(self, idx, max_new_tokens, strategy='sample'):\n")],
     'BigramLanguageModel', "matches: a variant, generate takes strategy='sample', which the lecture's has not; the"),
    ([('    def generate(self, idx, max_new_tokens):\n', "    def generate(self, idx, max_new_tokens, end_token=None):\n")],
     'BigramLanguageModel', "matches: a variant, generate takes end_token=None, which the lecture's has not; the"),
    ([('    def generate(self, idx, max_new_tokens):\n', '    def sample(self, idx, max_new_tokens):\n')],
     'BigramLanguageModel', "matches: a variant, generate is named sample, where the lecture's is generate; the"),
    # (a generate that prints as it goes and returns nothing)
    ([('        return idx\n', '        print(idx)\n')], 'BigramLanguageModel',
     "matches: a variant, generate returns nothing (None), where the lecture's returns idx with the new tokens; the"),
    # (n_embd given as each head's width: named where it is given, the Block's line, not inside the heads)
    ([('self.sa = MultiHeadAttention(n_head, head_size)', 'self.sa = MultiHeadAttention(n_head, n_embd)')],
     'MultiHeadAttention', 'differs: line 118: its 4 heads together are 128 wide, not n_embd = 32: each is n_embd // '
     'n_head = 8 wide$'),
    # (the inner width by a setting of the paper's name, n_dff)
    ([('n_layer = 2\n', 'n_layer = 2\nn_dff = 100\n'), ('nn.Linear(n_embd, 4 * n_embd)', 'nn.Linear(n_embd, n_dff)'),
      ('nn.Linear(4 * n_embd, n_embd)', 'nn.Linear(n_dff, n_embd)')], 'FeedFoward', 'matches: line 104: a variant, '
     "its inner width set by a setting of yours, not 4x (the lecture's 4 * n_embd)$"),
    # (6 heads of 5 in a stream of 32, and a proj that takes n_embd: it raises, and why)
    ([('n_head = 4', 'n_head = 6'), ('nn.Linear(head_size * num_heads, n_embd)', 'nn.Linear(n_embd, n_embd)')],
     'MultiHeadAttention', 'differs: line 88: its 6 heads of n_embd // n_head = 5 are 30 wide together, where proj '
     "takes n_embd = 32: n_embd is no multiple of n_head (the lecture's proj takes head_size * num_heads)"),
    # (lm_head fed the token embeddings: what runs and is dropped is said so; no 'positions from the attention',
    # though its heads, their softmax over the queries, see where each token is)
    ([('logits = self.lm_head(x)', 'logits = self.lm_head(tok_emb)'), ('F.softmax(wei, dim=-1)', 'F.softmax(wei, dim=1)')],
     'BigramLanguageModel', 'differs: line 140: no position embedding; and line 145: the blocks never applied between '
     'the embeddings and lm_head; and no final LayerNorm (ln_f) before lm_head; your `position_embedding_table`, '
     '`blocks`, `ln_f` run, but the output never depends on them$'),
    # (generate(idx, size_context, max_new_tokens): its block_size by name, not the count)
    ([('    def generate(self, idx, max_new_tokens):\n', '    def generate(self, idx, size_context, max_new_tokens):\n'),
      ('idx_cond = idx[:, -block_size:]', 'idx_cond = idx[:, -size_context:]')], 'BigramLanguageModel',
     'matches; the past never hears the future, batch rows never talk, generate crops to block_size and runs past it'),
    # (a parameter of no known meaning beside a count by name: not guessed to be the count)
    ([('    def generate(self, idx, max_new_tokens):\n', '    def generate(self, idx, crop_to, max_new_tokens):\n'),
      ('idx_cond = idx[:, -block_size:]', 'idx_cond = idx[:, -crop_to:]')], 'BigramLanguageModel',
     "matches; generate not checked: the checker can't call it (TypeError: generate's parameter crop_to means nothing "
     "the checker knows)"),
    # (a dataset object the file never builds, read as settings: its decode is none, the checker's to say)
    ([('class BigramLanguageModel(nn.Module):\n\n    def __init__(self):\n        super().__init__()\n',
       'class BigramLanguageModel(nn.Module):\n\n    def __init__(self, data):\n        super().__init__()\n'
       '        self.data = data\n'), ('self.token_embedding_table = nn.Embedding(vocab_size, n_embd)',
      'self.token_embedding_table = nn.Embedding(data.vocab_size, n_embd)'),
      ('        return idx\n', '        return self.data.decode(idx[0].tolist())\n'),
      ('model = BigramLanguageModel()', 'model = BigramLanguageModel(dataset)')], 'BigramLanguageModel',
     "matches; generate not checked: the checker can't call it (mine.py, line 164: AttributeError: decode)"),
    # (a temperature and top_k it must be given: as the lecture samples, 1 and all)
    ([('    def generate(self, idx, max_new_tokens):\n', '    def generate(self, idx, max_new_tokens, temp, top_k):\n'),
      ('logits = logits[:, -1, :]', 'logits = logits[:, -1, :] / temp\n            v, _ = torch.topk(logits, top_k)\n'
       "            logits[logits < v[:, [-1]]] = -float('inf')")], 'BigramLanguageModel',
     "matches: a variant, generate takes temp and top_k (as nanoGPT), which the lecture's has not; the past"),
    # (their generate reads the model the file built by its name)
    ([('    def generate(self, idx, max_new_tokens):\n', '    def generate(self, idx, max_new_tokens):\n'
       '        model.eval()\n')], 'BigramLanguageModel', 'matches: a variant, generate puts the model in eval mode'),
    # (a forward that takes targets and drops them; one that crops idx itself)
    ([('        return logits, loss\n', '        return logits\n'), ('logits, loss = self(idx_cond)', 'logits = self('
       'idx_cond)')], 'BigramLanguageModel', "matches: a variant, its forward takes targets but never uses them: it "
     "returns the logits alone, where the lecture's also returns the loss (F.cross_entropy); the past"),
    ([('        B, T = idx.shape\n', '        idx = idx[:, -block_size:]\n        B, T = idx.shape\n')],
     'BigramLanguageModel', "matches: a variant, its forward crops idx to the last block_size tokens itself, where "
     "the lecture's crops in generate; the past"),
    # (a setting read from a module not here, as h.n_embd: the file's, else the lecture's; tiktoken's n_vocab too)
    ([('from torch.nn import functional as F\n', 'from torch.nn import functional as F\nimport hyperparameters as h\n'
       'import tiktoken\n'), ('self.key = nn.Linear(n_embd,', 'self.key = nn.Linear(h.n_embd,'),
      ('nn.Embedding(vocab_size, n_embd)', 'nn.Embedding(tiktoken.get_encoding("gpt2").n_vocab, n_embd)')],
     'BigramLanguageModel', 'matches; the past'),
    ([('def generate(self, idx, max_new_tokens):', 'def generator(self, idx, max_new_tokens):')], 'BigramLanguageModel',
     "matches: a variant, generate is named generator, where the lecture's is generate; the past never hears the "
     'future, batch rows never talk, generate crops to block_size'), # (found by its name's start, and checked)
    ([('def forward(self, idx, targets=None):', 'def forward(self, idx):'), ('        if targets is None:\n            loss '
       '= None\n        else:\n            B, T, C = logits.shape\n            logits = logits.view(B*T, C)\n            '
       'targets = targets.view(B*T)\n            loss = F.cross_entropy(logits, targets)\n        return logits, loss',
       '        return logits'), ('logits, loss = self(idx_cond)', 'logits = self(idx_cond)')], 'BigramLanguageModel',
     'matches: a variant, its forward takes no targets and returns the logits alone'), # (the loss in their loop)
    # (heads in a plain list in a module that is no part of the lecture's alone: named at the Block that holds it)
    ([('self.heads = nn.ModuleList([Head(head_size) for _ in range(num_heads)])', 'self.heads = [Head(head_size) for '
       '_ in range(num_heads)]'), ('        self.proj = nn.Linear(head_size * num_heads, n_embd)\n', ''),
      ('out = self.dropout(self.proj(out))', 'out = self.dropout(out)')], 'Block', 'differs: line 88: `heads` of '
     'MultiHeadAttention is a plain Python list: the modules in it are not registered'),
    # (torch's tensorboard module, where TensorBoard isn't installed: it stands in, as a package not here does)
    ([('from torch.nn import functional as F\n', 'from torch.nn import functional as F\nfrom torch.utils.tensorboard '
       'import SummaryWriter\n')], 'BigramLanguageModel', 'matches; the past'),
    ([('self.ln1 = nn.LayerNorm(n_embd)', 'self.ln1 = nn.LayerNorm(n_embd, elementwise_affine=False)')], 'Block',
     "matches: line 120: a variant, a LayerNorm that learns nothing (elementwise_affine=False; the lecture's learn a "
     'scale and a shift)$')]


@pytest.mark.parametrize('changes, part, said', RUN_AS_THEY_MEAN)
def test_what_a_learner_means_is_what_is_run_and_a_slip_is_named_at_its_cause(changes, part, said, tmp_path):
    """F used only in a forward, never imported: named, and the file checked with it. MultiHeadAttention given
    n_embd as its count of heads: named at the Block's call, not as heads too wide inside it. A parameter
    hidden_dim beside d_model: the inner width (4 * n_embd) where the checker guesses, not n_embd. A forward whose
    return only targets reach: named at that return. A config from a module that isn't here, read in a
    @torch.no_grad() generate: the settings stand in. A part that fails as another does but doesn't hold it: its
    own failure, not 'it holds Head'."""
    import check
    import test_check
    (tmp_path / 'mine.py').write_text(test_check.edited(*changes))
    out = '\n'.join(check.checked(str(tmp_path / 'mine.py')).lines) + '\n' # (in this process: as the command prints)
    found = parts(out)
    assert (found[part] + '$').startswith(said), out # (said ending in $: the whole line)
    if part == 'BigramLanguageModel' and said.startswith('matches; the'): # (and nothing else is called wrong)
        assert all(line.startswith('matches') for line in found.values()), out
    if changes[0][0].startswith('import torch.nn'): # (nn and F taken out: each named at the line that first needs
        # it, that line once)
        assert 'line 58: `class Head(nn.Module):`: F is never imported (import torch.nn.functional as F); checked ' \
            'with it' in out and out.endswith('; look at line 58\n'), out


def test_a_train_method_of_their_own_is_named_and_the_model_checked_with_pytorchs(tmp_path):
    """A model's own train(data) takes nn.Module.train's place, which model.eval() calls: named at its def, and
    the model checked as if PyTorch's were there (its method put back after)."""
    import check
    import test_check
    text = test_check.edited(('    def generate(self, idx, max_new_tokens):\n', '    def train(self, data):\n'
                              '        return len(data)\n\n    def generate(self, idx, max_new_tokens):\n'))
    (tmp_path / 'mine.py').write_text(text)
    rep = check.checked(str(tmp_path / 'mine.py'))
    out = '\n'.join(rep.lines)
    assert rep.code == 1 and f"mistake: {cited(text, 'def train(self, data)')}: `def train(self, data):`: its train() " \
        "takes the place of nn.Module.train(), which model.eval() and model.train() call" in out, out
    assert parts(out + '\n')['BigramLanguageModel'].startswith('matches; the past'), out
    assert rep.builder.models[0][0].train([1, 2]) == 2 # (theirs again)


def test_a_device_chosen_by_torch_mps_is_available_is_a_setting_line_the_checker_runs(tmp_path):
    """`device = 'mps' if torch.mps.is_available() else 'cpu'` (torch.mps, beside torch.backends.mps) is a line of
    settings: run, so no note that the file sets its device only where the checker doesn't look."""
    import test_check
    r, found = test_check.check(tmp_path, test_check.edited((
        "device = 'cuda' if torch.cuda.is_available() else 'cpu'", "device = 'mps' if torch.mps.is_available() else 'cpu'")))
    assert r.returncode == 0 and 'device' not in r.stdout and all(v.startswith('matches') for v in found.values()), \
        r.stdout


def test_a_switch_read_from_a_config_the_file_never_makes_is_said_to_be_taken_as_off(tmp_path):
    """`if not cfg.use_flash` with cfg from a module that isn't here: the checker takes the switch as off, and
    says so, since the path it turns on goes unchecked."""
    import test_check
    r, found = test_check.check(tmp_path, test_check.edited(
        ('from torch.nn import functional as F\n', 'from torch.nn import functional as F\nfrom hyper import cfg\n'),
        ('        self.sa = MultiHeadAttention(n_head, head_size)',
         '        self.sa = MultiHeadAttention(n_head, head_size) if not cfg.use_flash else None')))
    assert r.returncode == 0 and "note: checked with use_flash off: your code reads it from a config it never " \
        "makes (make one to check it on)\n" in r.stdout and found['Block'] == 'matches', r.stdout


def test_a_syntax_error_in_a_line_the_checker_never_runs_leaves_out_that_statement_only(tmp_path):
    """A `(` never closed in the training loop's print (or Python 3.12's f-strings, on an older Python): that
    top-level statement is left out with a note, and the model checked. In a class, the same error is exit 2:
    what would be checked can't be read."""
    import test_check
    broken = ('print(f"step {iter}: train loss', 'print((f"step {iter}: train loss')
    r, found = test_check.check(tmp_path, test_check.edited(broken))
    assert r.returncode == 0 and all(v.startswith('matches') for v in found.values()), r.stdout
    assert re.search(r"^note: left out: \S+mine.py, line 173: a syntax error: .*: lines 170 to 180$", r.stdout,
                     re.M), r.stdout
    unmatched = ("{losses['val']:.4f}\")", "{losses['val']:.4f}\"))") # (a tokenizer's error, found first)
    r, found = test_check.check(tmp_path, test_check.edited(unmatched, ('import torch\n', 'import torch\n!nvidia-smi\n')))
    assert r.returncode == 0 and re.search(r"^note: left out: .*: lines 5, 171 to 181$", r.stdout, re.M), r.stdout
    r, found = test_check.check(tmp_path, test_check.edited(('out = wei @ v', 'out = (wei @ v')))
    assert r.returncode == 2 and 'a syntax error' in r.stderr + r.stdout, r.stdout + r.stderr
    if sys.version_info < (3, 12): # (a backslash in an f-string's braces: Python 3.12's, said so)
        newer = ('print(f"step {iter}: train loss', 'print(f"{chr(10).join([\'\\n\'])}step {iter}: train loss')
        r, found = test_check.check(tmp_path, test_check.edited(newer))
        assert r.returncode == 0 and re.search(r"^note: left out: \S+mine.py, line 173: a syntax error: f-string .* "
                                               r"\(Python 3\.12 reads it, this is 3\.\d+\.\d+\): lines 170 to 180$",
                                               r.stdout, re.M), r.stdout


def test_a_head_that_reads_t_from_the_files_globals_is_named_there(tmp_path):
    """Head.forward without `B, T, C = x.shape`: T is the file's own (a cell's B, T, C = 4, 8, 32), so it fails on
    fewer tokens: named as a global read at its line, not as a mask to cut."""
    import test_check
    text = test_check.edited(('        B,T,C = x.shape\n        k = self.key(x)', '        k = self.key(x)'),
                             ('dropout = 0.2\n', 'dropout = 0.2\nB, T, C = 4, 16, 32\n'))
    r, found = test_check.check(tmp_path, text)
    assert r.returncode == 1 and found['Head'].startswith(
        f"differs: {cited(text, 'wei = wei.masked_fill')}: its forward reads T from the file's globals (T = 16), "
        "not from its input (B, T, C = x.shape): on 15 tokens"), r.stdout


def test_a_part_built_at_an_earlier_block_size_is_listed_as_unused(tmp_path):
    """A notebook's head tried out while block_size was 8 (its mask 8 x 8), then block_size set to 16 for the
    model: that head, which no model holds, is listed as unused, not checked (at the model's length it would
    fail)."""
    import test_check
    text = test_check.edited()
    head = text[text.index('class Head'):text.index('class MultiHeadAttention')].replace('class Head', 'class ProbeHead')
    text = text.replace('class MultiHeadAttention', head + 'block_size = 8\nprobe = ProbeHead(8)\nblock_size = 16\n\n'
                        'class MultiHeadAttention', 1)
    r, found = test_check.check(tmp_path, text)
    assert r.returncode == 0 and 'ProbeHead' not in found, r.stdout
    assert 'note: no model of yours uses ProbeHead: not checked' in r.stdout, r.stdout


def test_a_name_only_a_method_sets_is_never_set(tmp_path):
    """`B, T, C = x.shape` in a forward sets C there only: an __init__ that reads C raises NameError (named as a
    mistake, not as a setting in lines the checker doesn't run)."""
    import test_check
    r, _ = test_check.check(tmp_path, test_check.edited(('self.key = nn.Linear(n_embd, head_size, bias=False)',
                                                         'self.key = nn.Linear(C, head_size, bias=False)')))
    assert r.returncode == 1 and 'mistake: line 65: `self.key = nn.Linear(C, head_size, bias=False)`: C is never set ' \
        'anywhere in the file, so this raises NameError' in r.stdout, r.stdout


BUILT_FROM_FILES = [ # (the changes, what their build line becomes)
    ([('vocab_size = len(chars)\n', 'token_count = len(chars)\n'), ('    def __init__(self):\n        super().__init__()\n'
      '        self.token_embedding_table', '    def __init__(self, vocab_size):\n        super().__init__()\n'
      '        self.token_embedding_table')], 'model = BigramLanguageModel(token_count)'),
    ([('    def __init__(self, n_embd):\n        super().__init__()\n        self.net', '    def __init__(self, n_embd, '
       'ff_dim=4):\n        super().__init__()\n        self.net'), ('nn.Linear(n_embd, 4 * n_embd)', 'nn.Linear(n_embd, '
       'ff_dim * n_embd)'), ('nn.Linear(4 * n_embd, n_embd)', 'nn.Linear(ff_dim * n_embd, n_embd)'),
      ('def __init__(self, n_embd, n_head):', 'def __init__(self, n_embd, n_head, ff_dim=4):'),
      ('self.ffwd = FeedFoward(n_embd)', 'self.ffwd = FeedFoward(n_embd, ff_dim)'),
      ('    def __init__(self):\n        super().__init__()\n        self.token_embedding_table', '    def __init__(self, '
       'ff_dim=4):\n        super().__init__()\n        self.token_embedding_table'),
      ('Block(n_embd, n_head=n_head)', 'Block(n_embd, n_head=n_head, ff_dim=ff_dim)')],
     'model = BigramLanguageModel(ff_dim=model_config["ff_dim"])')] # (4: a factor, not a width)


@pytest.mark.parametrize('changes, build', BUILT_FROM_FILES)
def test_a_build_that_reads_what_the_file_never_sets_is_built_as_meant(changes, build, tmp_path):
    """A build line that reads a name only data lines set (token_count = len(chars)), or a JSON config the
    checker doesn't read (model_config["ff_dim"] for a factor whose default is 4): the model is built (with
    what the name means; with its own default), not "your build raised", and matches."""
    import check
    import test_check
    text = test_check.edited(*changes).replace('model = BigramLanguageModel()\n', build + '\n')
    (tmp_path / 'mine.py').write_text(text)
    out = '\n'.join(check.checked(str(tmp_path / 'mine.py')).lines)
    assert 'your build raised' not in out and 'as line 165 builds it' in out, out
    found = parts(out)
    assert all(line.startswith('matches') for line in found.values()) and found['FeedFoward'] == 'matches', out


def test_a_part_the_checker_cannot_lay_out_is_said_not_counted_where_their_model_runs_it():
    """A part whose only mistake is that the lecture's steps can't run on its layers (a rotary attention, a
    parallel block), or that the checker can't check: said as not laid out, not a mistake and not exit 2,
    where their model runs it through (report.unlaid). A package it calls that isn't here: still said as such."""
    from checker.compare import Finding
    from checker.report import LAID, Part, unlaid
    def part(status, *findings):
        p = Part('X', 'Block', None)
        p.status, p.findings = status, [Finding('X', kind, words) for kind, words in findings]
        return p
    rope = part('differs', ('mistake', LAID + 'RuntimeError: mat1 and mat2 shapes cannot be multiplied'), ('variant', 'GELU'))
    assert unlaid(rope) == LAID + 'RuntimeError: mat1 and mat2 shapes cannot be multiplied'
    assert unlaid(part('cant', ('cant', "can't be checked: RuntimeError: boom"))) == "can't be checked: RuntimeError: boom"
    assert unlaid(part('differs', ('mistake', LAID + 'x'), ('mistake', 'no causal mask'))) is None # (a mistake too)
    assert unlaid(part('cant', ('cant', "can't be checked: your X calls einops: pip install einops"))) is None
    assert unlaid(part('differs', ('mistake', 'no causal mask'))) is None


def test_the_gpu_probe_puts_the_model_back_as_it_was(tmp_path):
    """The run on the meta device swaps the model's weights, buffers and the 'cpu' of their globals: after the
    check, each is back on the CPU, and the model computes."""
    import check
    import test_check
    import torch
    text = test_check.edited(("self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))",
                              'self.tril = torch.tril(torch.ones(block_size, block_size))'))
    (tmp_path / 'mine.py').write_text(text)
    rep = check.checked(str(tmp_path / 'mine.py'))
    assert any('on a GPU its forward raises' in f.words for p in rep.parts for f in p.findings) # (the probe ran)
    model = rep.builder.models[0][0]
    tensors = [*model.parameters(), *model.buffers(), *(s.tril for s in model.modules() if hasattr(s, 'tril'))]
    assert all(t.device.type == 'cpu' for t in tensors) and model.forward.__globals__['device'] == 'cpu'
    idx = torch.zeros(1, 4, dtype=torch.long)
    assert model(idx)[0].shape == (1, 4, 65) and torch.isfinite(model(idx)[0]).all()
