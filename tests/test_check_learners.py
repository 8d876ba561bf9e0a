"""scripts/check.py on code as learners write it: tests/fixtures/learners holds files written for these
tests (scripts, a notebook, a project of several files), with names, signatures, layouts and stages of
their own. Each says in its `# expect` lines the verdict it must get; every file not expected to differ
must match in every part."""
import json
import os
import re
import sys

import pytest

from conftest import ROOT, run_here
from test_check import parts

LEARNERS = os.path.join(ROOT, 'tests', 'fixtures', 'learners')
FILES = sorted(os.path.relpath(os.path.join(d, f), LEARNERS) for d, _, files in os.walk(LEARNERS) for f in files
               if f.endswith(('.py', '.ipynb')) and f not in ('config.py', 'layers.py', 'model.py'))


def expected(path):
    """(exit code, {part: how its line starts}, notes, summary) from the file's `# expect` lines."""
    with open(path, encoding='utf-8') as f:
        text = f.read()
    if path.endswith('.ipynb'):
        text = ''.join(line for cell in json.loads(text)['cells'] for line in cell['source'])
    said = re.findall(r'^# expect( exit| note| summary)?: (.*)$', text, re.M)
    lines = {rest.split()[0]: rest.split(None, 1)[1] for kind, rest in said if not kind}
    pick = lambda k: [rest for kind, rest in said if kind == k]
    return int(pick(' exit')[0]), lines, pick(' note'), pick(' summary')


def test_the_corpus_covers_every_kind_of_variation():
    assert len(FILES) >= 20
    kinds = ''.join(expected(os.path.join(LEARNERS, f))[1].__repr__() for f in FILES)
    for variant in ('GELU', 'bias in key', 'rotary', 'shares the token embedding', 'sinusoidal', 'stage 2', 'stage 3',
                    'stage 4', 'stage 5', 'stage 6', 'as in the video', 'never used', 'pip install'):
        assert variant in kinds, variant


@pytest.mark.parametrize('name', FILES)
def test_each_learners_file_gets_its_verdict(name):
    path = os.path.join(LEARNERS, name)
    code, lines, notes, summary = expected(path)
    modules = set(sys.modules)
    r = run_here('scripts/check.py', path)
    assert r.returncode == code and r.stderr == '', r.stdout + r.stderr
    found = parts(r.stdout)
    for part, start in lines.items():
        assert found.get(part, '').startswith(start), f"{part}: {found.get(part)}\n{r.stdout}"
    if code == 0:
        assert all(line.startswith('matches') for line in found.values()), r.stdout
    for note in notes:
        assert any(line.startswith(f'note: {note}') for line in r.stdout.splitlines()), r.stdout
    for line in summary:
        assert r.stdout.splitlines()[-1].startswith(line), r.stdout
    assert not {'learner', 'model', 'config', 'layers', 'utils', 'einops', 'tqdm'} & (set(sys.modules) - modules)


RENAMED = os.path.join(LEARNERS, 'renamed_layers.py')
MISTAKES = [ # (the part, the change to renamed_layers.py, what the checker says)
    ('SelfAttentionHead', [(' / self.wk.out_features ** 0.5', '')], 'the 1/sqrt(head_size) scale is missing'),
    ('SelfAttentionHead', [("        scores = scores.masked_fill(~self.causal[:T, :T], float('-inf'))\n", '')],
     'no causal mask'),
    ('SelfAttentionHead', [('scores.softmax(-1)', 'scores.softmax(1)')], 'the softmax over the wrong dimension'),
    ('SelfAttentionHead', [('scores.softmax(-1)', 'scores.softmax(0)')], 'the softmax over the batch'),
    ('SelfAttentionHead', [('self.wq(x) @ self.wk(x)', 'self.wk(x) @ self.wq(x)')], 'k @ q^T for q @ k^T'),
    ('SelfAttentionHead', [('@ self.wv(x)', '@ x')], 'x itself aggregated, not value(x)'),
    ('Attention', [('return self.drop(self.out(torch.cat', 'return self.drop((torch.cat')], 'no proj after the heads'),
    ('MLP', [('self.fc2(F.relu(self.fc1(x)))', 'self.fc2(self.fc1(x))')], 'no ReLU between the two Linear layers'),
    ('MLP', [('4 * d_model)', '2 * d_model)'), ('(4 * d_model, d_model)', '(2 * d_model, d_model)')],
     'not 4x wider inside'),
    ('DecoderBlock', [('x = x + self.attn(self.norm1(x))', 'x = self.attn(self.norm1(x))'),
                      ('x = x + self.mlp(self.norm2(x))', 'x = self.mlp(self.norm2(x))')], 'no residual connections'),
    ('DecoderBlock', [('x = x + self.attn(self.norm1(x))', 'x = self.norm1(x + self.attn(x))'),
                      ('x = x + self.mlp(self.norm2(x))', 'x = self.norm2(x + self.mlp(x))')], 'post-norm'),
    ('DecoderBlock', [('x = x + self.mlp(self.norm2(x))', 'x = x + self.mlp(self.norm1(x))')],
     'one LayerNorm before both parts'),
    ('SelfAttentionHead', [(' / self.wk.out_features ** 0.5', ' * self.wk.out_features ** 0.5')],
     'multiplied by sqrt(head_size), not divided'),
    ('SelfAttentionHead', [(' / self.wk.out_features ** 0.5', ' / self.wk.out_features')],
     'divided by head_size, not by its square root'),
    ('SelfAttentionHead', [("~self.causal[:T, :T], float('-inf')", "~self.causal[:T, :T], 0.0")],
     'the future filled with 0, not -inf'),
    ('MLP', [('self.fc1 = nn.Linear(d_model, 4 * d_model)', 'self.fc1 = nn.Linear(d_model, d_model)'),
             ('        self.fc2 = nn.Linear(4 * d_model, d_model)\n', ''),
             ('self.drop(self.fc2(F.relu(self.fc1(x))))', 'self.drop(F.relu(self.fc1(x)))')], 'one Linear layer'),
    ('DecoderBlock', [('x = x + self.attn(self.norm1(x))', 'x = self.attn(self.norm1(x))')],
     'no residual connection around the attention'),
    ('DecoderBlock', [('x = x + self.attn(self.norm1(x))', 'x = self.norm1(x)\n        x = x + self.attn(x)'),
                      ('x = x + self.mlp(self.norm2(x))', 'x = self.norm2(x)\n        x = x + self.mlp(x)')],
     'LayerNorm applied to x itself'),
    ('DecoderBlock', [('        x = x + self.attn(self.norm1(x))\n        x = x + self.mlp(self.norm2(x))\n',
                       '        x = x + self.mlp(self.norm2(x))\n        x = x + self.attn(self.norm1(x))\n')],
     'the feed-forward before the attention'),
    ('DecoderBlock', [('self.norm1 = nn.LayerNorm(d_model)', 'self.norm1 = nn.Identity()'),
                      ('self.norm2 = nn.LayerNorm(d_model)', 'self.norm2 = nn.Identity()')],
     'no LayerNorm before the attention and the feed-forward'),
    ('CharGPT', [('self.head(self.final_norm(self.layers(h)))', 'self.head(self.final_norm(h))')],
     'the blocks never applied between the embeddings and lm_head; your `layers` is defined but never used'),
    ('CharGPT', [('self.head(self.final_norm(self.layers(h)))', 'self.head(self.layers(h))')],
     'no final LayerNorm (ln_f) before lm_head; your `final_norm` is defined but never used'),
    ('CharGPT', [('h = self.tok_emb(tokens) + self.pos_emb(', 'h = self.tok_emb(tokens) + 0 * self.pos_emb(')],
     'no position embedding'),
    ('CharGPT', [('seq_len = 16', 'seq_len = 80'), # a table longer than the vocabulary: no IndexError
                 ('self.pos_emb(torch.arange(T, device=tokens.device))', 'self.pos_emb(tokens)')],
     'the position table looked up with idx'),
]


NANOGPT = [ # the same, in nanoGPT's layout: its fused attention, its own LayerNorm
    ('CausalSelfAttention', [(f'{t} = {t}.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)',
                              f'{t} = {t}.reshape(B, self.n_head, T, C // self.n_head)') for t in 'kqv'],
     'the heads split with view(B, nh, T, hs)'),
    ('CausalSelfAttention', [('y.transpose(1, 2).contiguous().view(B, T, C)', 'y.contiguous().view(B, T, C)')],
     'the heads joined with view(B, T, C) before transposing them back'),
    ('CausalSelfAttention', [('is_causal=True', 'is_causal=False')], 'no causal mask'),
    ('LayerNorm', [('return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)',
                    'mean, var = input.mean(0), input.var(0, unbiased=False)\n'
                    '        return (input - mean) / (var + 1e-5).sqrt() * self.weight + self.bias')],
     'normalized over the batch (dim 0)'),
]


@pytest.mark.parametrize('part, changes, named, file', [(*m, RENAMED) for m in MISTAKES] + [
    (*m, os.path.join(LEARNERS, 'nanogpt_layout.py')) for m in NANOGPT], ids=[f'{p}: {n}' for p, _, n in MISTAKES + NANOGPT])
def test_each_mistake_is_named_under_the_learners_own_names(part, changes, named, file, tmp_path):
    with open(file, encoding='utf-8') as f:
        text = f.read()
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'))
    found = parts(r.stdout)
    assert r.returncode == 1 and found[part].startswith(f'differs: likely {named}'), r.stdout


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
