"""scripts/check.py on a learner's file written the lecture's way (tests/fixtures/lecture_gpt.py, whose
top level would fail on a missing data file, then loop forever): nothing but its definitions runs,
every part of the right file matches, and each mistake of the catalogue is found and named."""
import json
import os

import pytest

from conftest import ROOT, run_here

with open(os.path.join(ROOT, 'tests', 'fixtures', 'lecture_gpt.py'), encoding='utf-8') as f:
    LECTURE = f.read()
SMALL = [('block_size = 256', 'block_size = 16'), ('n_embd = 384', 'n_embd = 32'), ('n_head = 6', 'n_head = 4'),
         ('n_layer = 6', 'n_layer = 2')] # the lecture's stage-6 size: fast to check


def parts(stdout):
    """{part: what the checker says of it}, from its lines but the notes and the summary."""
    return {line.split()[0]: line.split(None, 1)[1] for line in stdout.splitlines()[:-1] if not line.startswith('note:')}


def check(tmp_path, text, name='mine.py'):
    (tmp_path / name).write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / name), cwd=tmp_path)
    return r, parts(r.stdout)


def edited(*changes, text=LECTURE):
    for old, new in [*SMALL, *changes]:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def test_the_lectures_script_matches_in_every_part_and_nothing_else_runs(tmp_path):
    r, lines = check(tmp_path, LECTURE) # the lecture's full config
    assert r.returncode == 0 and r.stderr == '', r.stderr
    assert list(lines) == ['Head', 'MultiHeadAttention', 'FeedFoward', 'Block', 'BigramLanguageModel']
    assert all(line.startswith('matches') for line in lines.values()), r.stdout
    assert 'the past never hears the future, batch rows never talk, generate goes past block_size' in lines[
        'BigramLanguageModel']
    assert r.stdout.endswith('\n5 of 5 parts match gpt.py\n')
    assert os.listdir(tmp_path) == ['mine.py'] # no data read, nothing written


@pytest.mark.parametrize('script', ['gpt.py', 'bigram.py'])
def test_our_own_scripts_match(script):
    r = run_here('scripts/check.py', os.path.join(ROOT, script))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == ('6 of 6 parts match gpt.py' if script == 'gpt.py' else
                                         '1 of 1 parts match the lecture at stage 1 (bigram, 22:11)')


MISTAKES = [ # (the part, the change, what the checker says)
    ('Head', [('wei = q @ k.transpose(-2,-1) * k.shape[-1]**-0.5', 'wei = q @ k.transpose(-2,-1)')],
     'the 1/sqrt(head_size) scale is missing'),
    ('Head', [('        wei = wei.masked_fill(self.tril[:T, :T] == 0, float(\'-inf\'))\n', '')], 'no causal mask'),
    ('Head', [('        wei = wei.masked_fill(self.tril[:T, :T] == 0, float(\'-inf\'))\n        wei = F.softmax(wei, dim=-1)\n',
               '        wei = F.softmax(wei, dim=-1)\n        wei = wei.masked_fill(self.tril[:T, :T] == 0, 0)\n')],
     'the mask applied after the softmax'),
    ('Head', [('wei = F.softmax(wei, dim=-1)', 'wei = F.softmax(wei, dim=1)')], 'the softmax over the wrong dimension'),
    ('Head', [('wei = q @ k.transpose(-2,-1)', 'wei = k @ q.transpose(-2,-1)')], 'k @ q^T for q @ k^T'),
    ('Head', [('out = wei @ v', 'out = wei @ x')], 'x itself aggregated, not value(x)'),
    ('MultiHeadAttention', [('        self.proj = nn.Linear(head_size * num_heads, n_embd)\n', ''),
                            ('self.dropout(self.proj(out))', 'self.dropout(out)')], 'no proj after the heads'),
    ('MultiHeadAttention', [('self.dropout(self.proj(out))', 'self.dropout(out)')], 'no proj after the heads'),
    ('FeedFoward', [('            nn.ReLU(),\n', '')], 'no ReLU between the two Linear layers'),
    ('FeedFoward', [('nn.ReLU(),', 'nn.Identity(),')], 'no ReLU between the two Linear layers'),
    ('FeedFoward', [('nn.Linear(n_embd, 4 * n_embd)', 'nn.Linear(n_embd, n_embd)'),
                    ('nn.Linear(4 * n_embd, n_embd)', 'nn.Linear(n_embd, n_embd)')], 'not 4x wider inside'),
    ('Block', [('x = x + self.sa(self.ln1(x))', 'x = self.sa(self.ln1(x))'),
               ('x = x + self.ffwd(self.ln2(x))', 'x = self.ffwd(self.ln2(x))')], 'no residual connections'),
    ('Block', [('x = x + self.sa(self.ln1(x))', 'x = self.ln1(x + self.sa(x))'),
               ('x = x + self.ffwd(self.ln2(x))', 'x = self.ln2(x + self.ffwd(x))')], 'post-norm'),
    ('Block', [('        x = x + self.sa(self.ln1(x))\n        x = x + self.ffwd(self.ln2(x))\n',
                '        x = x + self.ffwd(self.ln2(x))\n        x = x + self.sa(self.ln1(x))\n')],
     'the feed-forward before the attention'),
    ('BigramLanguageModel', [('        self.ln_f = nn.LayerNorm(n_embd)\n', ''), ('        x = self.ln_f(x)\n', '')],
     'no final LayerNorm (ln_f) before lm_head'),
    ('BigramLanguageModel', [('        x = self.ln_f(x)\n', '')], 'no final LayerNorm (ln_f) before lm_head'),
    ('BigramLanguageModel', [('x = tok_emb + pos_emb', 'x = tok_emb')], 'no position embedding'),
    ('BigramLanguageModel', [('        self.position_embedding_table = nn.Embedding(block_size, n_embd)\n', ''),
                             ('        pos_emb = self.position_embedding_table(torch.arange(T, device=device))\n', ''),
                             ('x = tok_emb + pos_emb', 'x = tok_emb')], 'no position embedding'),
]


@pytest.mark.parametrize('part, changes, named', MISTAKES, ids=[f'{p}: {n}' for p, _, n in MISTAKES])
def test_each_mistake_is_flagged_in_its_part_and_named(part, changes, named, tmp_path):
    r, lines = check(tmp_path, edited(*changes))
    assert r.returncode == 1 and r.stderr == '', r.stderr
    assert lines[part].startswith(f'differs: likely {named}'), r.stdout
    assert part in r.stdout.splitlines()[-1] # the summary points at it
    parts = list(lines)
    for earlier in parts[:parts.index(part)]: # the parts before it are right
        assert lines[earlier].startswith('matches'), r.stdout


def test_a_mistake_that_breaks_causality_fails_the_models_checks_too(tmp_path):
    r, lines = check(tmp_path, edited(('        wei = wei.masked_fill(self.tril[:T, :T] == 0, float(\'-inf\'))\n', '')))
    assert 'a future token changes an earlier output' in lines['BigramLanguageModel']


@pytest.mark.parametrize('changes, said', [
    ([('wei = q @ k.transpose(-2,-1) * k.shape[-1]**-0.5', 'wei = q @ k.transpose(-2,-1) * C**-0.5')],
     'scaled by C**-0.5, C = n_embd, as the video from 1:16:56'),
    ([('for _ in range(n_layer)])', 'for _ in range(n_layer)], nn.LayerNorm(n_embd))'),
      ('        self.ln_f = nn.LayerNorm(n_embd)\n', ''), ('        x = self.ln_f(x)\n', '')],
     'the last LayerNorm as the last of blocks, as the video from 1:32:51'),
])
def test_what_the_video_did_is_said_so_and_not_a_mistake(changes, said, tmp_path):
    r, lines = check(tmp_path, edited(*changes))
    assert r.returncode == 0, r.stdout
    assert any(line.startswith(f'matches, as in the video: {said}') for line in lines.values()), r.stdout


def test_a_layer_by_another_name_is_found_by_its_role(tmp_path):
    r, lines = check(tmp_path, edited(('self.value = nn', 'self.val = nn'), ('v = self.value(x)', 'v = self.val(x)')))
    assert r.returncode == 0 and lines['Head'] == 'matches', r.stdout
    r, lines = check(tmp_path, edited(('self.value = nn', 'self.val = nn'), ('v = self.value(x)', 'v = x')))
    assert lines['Head'] == "differs: likely x itself aggregated, not value(x); your `val` is defined but never used"


def test_a_notebook_is_its_code_cells_in_order_and_the_last_definition_counts(tmp_path):
    """The lecture's Colab way: a ! cell to fetch the data, a markdown cell, the imports, a first
    Head without the scale, then the whole script in one cell, defining Head again."""
    right = edited()
    wrong = edited(('wei = q @ k.transpose(-2,-1) * k.shape[-1]**-0.5', 'wei = q @ k.transpose(-2,-1)'))
    code = lambda text: {'cell_type': 'code', 'source': text.splitlines(keepends=True)}
    cells = [code('!wget https://example.org/input.txt\n%matplotlib inline'),
             {'cell_type': 'markdown', 'source': ['# the data']},
             code(right[:right.index('torch.manual_seed(1337)')]), # the imports and hyperparameters
             code(wrong[wrong.index('class Head'):wrong.index('class MultiHeadAttention')]),
             code(right)]
    r, lines = check(tmp_path, json.dumps({'cells': cells, 'nbformat': 4}), 'mine.ipynb')
    assert r.returncode == 0 and r.stdout == check(tmp_path, right)[0].stdout # as the script checks
    del cells[4] # the first Head is the last one now
    r, lines = check(tmp_path, json.dumps({'cells': cells, 'nbformat': 4}), 'mine.ipynb')
    assert lines['Head'].startswith('differs: likely the 1/sqrt(head_size) scale is missing'), r.stdout
    cells[3] = code('x = (\n') # a cell that never ran: the rest is checked
    cells += [code('%%bash\necho not python\n'), code('torch.tril?\n%%time\n'), code(right)]
    r, lines = check(tmp_path, json.dumps({'cells': cells}), 'mine.ipynb')
    assert r.returncode == 0 and r.stdout.startswith(f'note: left out: {tmp_path / "mine.ipynb"}, cell 4, line 1: '
                                                      "a syntax error: '(' was never closed\n"), r.stdout


@pytest.mark.parametrize('name, text, said', [
    ('absent.py', None, 'no file at '),
    ('notes.txt', 'class Head: pass', 'is neither a Python file (.py) nor a notebook (.ipynb)'),
    ('mine.ipynb', '{"cells": 3}', 'is not a notebook: no code cells in its JSON'),
    ('mine.py', 'import torch\n\nclass Head(torch.nn.Module)\n    pass\n', 'mine.py, line 3: a syntax error'),
    ('mine.py', 'import torch\nx = 1\n', "none of the lecture's parts"),
    ('mine.py', 'import no_such_module\nclass Config:\n    n_embd = 3\n', "none of the lecture's parts"),
    ('mine.py', 'import torch\nclass Head(torch.nn.Module):\n    size = 1 / 0\n',
     'mine.py, line 3: running it raised ZeroDivisionError: division by zero'),
])
def test_a_file_it_cannot_check_is_one_line(name, text, said, tmp_path):
    if text is not None:
        (tmp_path / name).write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / name))
    assert r.returncode == 2 and r.stdout == '' and r.stderr.startswith('error: ') and said in r.stderr, r.stderr
    assert r.stderr.count('\n') == 1


def test_a_part_it_cannot_build_or_find_is_one_line(tmp_path):
    text = edited(('    def __init__(self, n_embd, n_head):\n        super().__init__()\n        head_size = n_embd // n_head\n',
                   '    def __init__(self, n_embd, n_head):\n        super().__init__()\n        head_size = n_embd // 0\n'))
    r, lines = check(tmp_path, text)
    line = text[:text.index('n_embd // 0')].count('\n') + 1
    assert r.returncode == 2 and lines['Head'] == 'matches', r.stdout
    assert lines['Block'] == (f"can't build Block(n_embd=32, n_head=4): mine.py, line {line}: ZeroDivisionError: "
                              "integer division or modulo by zero")
    r, lines = check(tmp_path, LECTURE[:LECTURE.index('class Block')]) # the script as far as FeedFoward
    assert list(lines) == ['Head', 'MultiHeadAttention', 'FeedFoward'] and r.returncode == 0, r.stdout
