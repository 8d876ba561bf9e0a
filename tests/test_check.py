"""scripts/check.py on a learner's file written the lecture's way (tests/fixtures/lecture_gpt.py, whose
top level would fail on a missing data file, then loop forever): nothing but its definitions runs,
every part of the right file matches, and each mistake of the catalogue is found and named."""
import json
import os
import re

import pytest

from conftest import ROOT, run_here

with open(os.path.join(ROOT, 'tests', 'fixtures', 'lecture_gpt.py'), encoding='utf-8') as f:
    LECTURE = f.read()
SMALL = [('block_size = 256', 'block_size = 16'), ('n_embd = 384', 'n_embd = 32'), ('n_head = 6', 'n_head = 4'),
         ('n_layer = 6', 'n_layer = 2')] # the lecture's stage-6 size: fast to check


LABEL = re.compile(r'(\S+(?: \((?:cell|line) \d+\))?)\s+(.*)') # a part, with its cell where it has versions


def parts(stdout):
    """{part: what the checker says of it}, from its lines but the notes, the mistakes of no part and the summary."""
    return dict(LABEL.match(line).groups() for line in stdout.splitlines()[:-1]
                if not line.startswith(('note:', 'mistake:')))


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
    assert 'the past never hears the future, batch rows never talk, generate crops to block_size and runs past it' in lines[
        'BigramLanguageModel']
    assert r.stdout.endswith('\n5 of 5 parts match gpt.py\n')
    assert os.listdir(tmp_path) == ['mine.py'] # no data read, nothing written


@pytest.mark.parametrize('script', ['gpt.py', 'bigram.py'])
def test_our_own_scripts_match(script):
    r = run_here('scripts/check.py', os.path.join(ROOT, script))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == ('5 of 5 parts match gpt.py' if script == 'gpt.py' else
                                         '1 of 1 parts match the lecture at stage 1 (bigram, 22:11)')
    if script == 'gpt.py': # the attention the fast_attention switch turns on: no part of the model built
        assert 'note: no model of yours uses BatchedMultiHeadAttention: not checked' in r.stdout
    else: # what holds, said as a success: a bigram reads one token, so it runs on past block_size uncropped
        assert re.search(r'^BigramLanguageModel  matches stage 1 \(bigram, 22:11\); the past never hears the future, '
                         r'batch rows never talk, generate runs past block_size, loss at init \d\.\d\d \(about ln 65 = '
                         r'4\.17 expected\)$', r.stdout, re.M), r.stdout


MISTAKES = [ # (the part, the change, what the checker says, the line it cites: the first holding this)
    ('Head', [('wei = q @ k.transpose(-2,-1) * k.shape[-1]**-0.5', 'wei = q @ k.transpose(-2,-1)')],
     'the 1/sqrt(head_size) scale is missing', 'wei = q @ k'),
    ('Head', [('        wei = wei.masked_fill(self.tril[:T, :T] == 0, float(\'-inf\'))\n', '')],
     'no causal mask: the future talks to the past', 'wei = F.softmax'),
    ('Head', [('        wei = wei.masked_fill(self.tril[:T, :T] == 0, float(\'-inf\'))\n        wei = F.softmax(wei, dim=-1)\n',
               '        wei = F.softmax(wei, dim=-1)\n        wei = wei.masked_fill(self.tril[:T, :T] == 0, 0)\n')],
     'the mask applied after the softmax', 'wei = wei.masked_fill'),
    ('Head', [('wei = F.softmax(wei, dim=-1)', 'wei = F.softmax(wei, dim=1)')],
     '`wei = F.softmax(wei, dim=1)` where the lecture has the softmax over the keys', 'wei = F.softmax'),
    ('Head', [('out = wei @ v', 'out = wei @ x')], 'x itself aggregated, not value(x)', 'out = wei @ x'),
    ('MultiHeadAttention', [('        self.proj = nn.Linear(head_size * num_heads, n_embd)\n', ''),
                            ('self.dropout(self.proj(out))', 'self.dropout(out)')], 'no proj after the heads',
     'out = torch.cat'),
    ('MultiHeadAttention', [('self.dropout(self.proj(out))', 'self.dropout(out)')], 'no proj after the heads',
     'out = torch.cat'),
    ('MultiHeadAttention', [('self.dropout(self.proj(out))', 'self.dropout(self.proj(self.proj(out)))')],
     '`out = self.dropout(self.proj(self.proj(out)))` applies `proj` a second time: the lecture applies it once',
     'out = self.dropout'),
    ('FeedFoward', [('            nn.ReLU(),\n', '')], 'no ReLU between the two Linear layers', 'nn.Linear(n_embd, 4'),
    ('FeedFoward', [('nn.ReLU(),', 'nn.Identity(),')], 'no ReLU between the two Linear layers', 'nn.Linear(n_embd, 4'),
    ('FeedFoward', [('nn.Linear(n_embd, 4 * n_embd)', 'nn.Linear(n_embd, n_embd)'),
                    ('nn.Linear(4 * n_embd, n_embd)', 'nn.Linear(n_embd, n_embd)')], 'not 4x wider inside',
     'nn.Linear(n_embd, n_embd),'),
    ('Block', [('x = x + self.sa(self.ln1(x))', 'x = self.sa(self.ln1(x))'),
               ('x = x + self.ffwd(self.ln2(x))', 'x = self.ffwd(self.ln2(x))')],
     'no residual connection around the attention; and line 125: no residual connection around the feed-forward',
     'x = self.sa('),
    ('Block', [('x = x + self.sa(self.ln1(x))', 'x = self.ln1(x + self.sa(x))'),
               ('x = x + self.ffwd(self.ln2(x))', 'x = self.ln2(x + self.ffwd(x))')], 'post-norm', 'x = self.ln1('),
    ('Block', [('        x = x + self.sa(self.ln1(x))\n        x = x + self.ffwd(self.ln2(x))\n',
                '        x = x + self.ffwd(self.ln2(x))\n        x = x + self.sa(self.ln1(x))\n')],
     'the feed-forward before the attention', 'x = x + self.ffwd'),
    ('BigramLanguageModel', [('        self.ln_f = nn.LayerNorm(n_embd)\n', ''), ('        x = self.ln_f(x)\n', '')],
     'no final LayerNorm (ln_f) before lm_head', 'logits = self.lm_head'),
    ('BigramLanguageModel', [('        x = self.ln_f(x)\n', '')], 'no final LayerNorm (ln_f) before lm_head',
     'logits = self.lm_head'),
    ('BigramLanguageModel', [('x = tok_emb + pos_emb', 'x = tok_emb')], 'no position embedding', 'tok_emb = self.'),
    ('BigramLanguageModel', [('        self.position_embedding_table = nn.Embedding(block_size, n_embd)\n', ''),
                             ('        pos_emb = self.position_embedding_table(torch.arange(T, device=device))\n', ''),
                             ('x = tok_emb + pos_emb', 'x = tok_emb')], 'no position embedding', 'tok_emb = self.'),
]


def cited(text, marker):
    """Where the checker says a mistake is: 'line N', N the first line of text that holds marker."""
    return f"line {text[:text.index(marker)].count(chr(10)) + 1}"


@pytest.mark.parametrize('part, changes, named, at', MISTAKES, ids=[f'{p}: {n}' for p, _, n, _ in MISTAKES])
def test_each_mistake_is_flagged_in_its_part_and_named_at_its_line(part, changes, named, at, tmp_path):
    text = edited(*changes)
    r, lines = check(tmp_path, text)
    assert r.returncode == 1 and r.stderr == '', r.stderr
    assert lines[part].startswith('differs: ') and f"{cited(text, at)}: {named}" in lines[part], r.stdout
    assert r.stdout.splitlines()[-1].endswith(f"look at {part}") # the summary points at it, and only at it
    assert sum(line.startswith('matches') for line in lines.values()) == len(lines) - 1


@pytest.mark.parametrize('scale, said', [('T**-0.5', r' = (\d+)\*\*-0\.5 \(T, the number of tokens\), not by'),
                                         ('48**-0.5', r' = (48)\*\*-0\.5, not by')])
def test_a_scale_of_another_number_says_which_number_it_is_the_root_of(scale, said, tmp_path):
    """The length of the text for head_size (T**-0.5), or a head_size of another config: the number under the
    root is named, and the length as such, beside the factor the checker measured."""
    text = edited(('wei = q @ k.transpose(-2,-1) * k.shape[-1]**-0.5', f'wei = q @ k.transpose(-2,-1) * {scale}'))
    r, lines = check(tmp_path, text)
    m = re.search(rf"^differs: {cited(text, 'wei = q @ k')}: the affinities scaled by ([\d.]+){said} head_size\*\*-0\.5 "
                  r"= [\d.]+ \(head_size \d+\)$", lines['Head'])
    assert r.returncode == 1 and m and abs(float(m[1]) - int(m[2]) ** -0.5) < 1e-3, r.stdout


def test_a_device_chosen_in_an_if_with_a_print_is_a_setting_of_theirs(tmp_path):
    """An if/else that sets the device and prints which one is run (quietly), so its device is theirs."""
    text = edited(("device = 'cuda' if torch.cuda.is_available() else 'cpu'",
                   "if torch.cuda.is_available():\n    device = 'cuda'\nelse:\n    device = 'cpu'\n    print('on the CPU')"))
    r, lines = check(tmp_path, text)
    assert r.returncode == 0 and 'never sets' not in r.stdout and 'on the CPU' not in r.stdout, r.stdout


def test_a_block_whose_feed_forward_is_a_missing_package_is_a_block(tmp_path):
    """The Block's feed-forward from a package not installed here: it can't be checked, it says how to check it,
    and the model holding Blocks with norms is not said to be at stage 3 (multi-head attention)."""
    r, lines = check(tmp_path, edited(('import torch\n', 'import torch\nimport moe_layers\n'),
                                      ('self.ffwd = FeedFoward(n_embd)', 'self.ffwd = moe_layers.MoE(n_embd)')))
    assert r.returncode == 2 and lines['Block'] == "can't be checked: your Block calls moe_layers.MoE: pip install " \
        "moe_layers (or put your module moe_layers beside the file) to check it", r.stdout
    assert r.stdout.endswith('\n2 of 4 parts match gpt.py; look at Block, BigramLanguageModel\n'), r.stdout


def test_generate_that_names_multinomials_input_matches(tmp_path):
    r, lines = check(tmp_path, edited(('torch.multinomial(probs, num_samples=1)',
                                       'torch.multinomial(input=probs, num_samples=1)')))
    assert r.returncode == 0 and 'generate crops to block_size and runs past it' in lines['BigramLanguageModel'], r.stdout


def test_generate_that_takes_an_argument_more_is_no_mistake(tmp_path):
    """generate(idx, max_new_tokens, params), which the checker can't call as the lecture's: the rest is checked,
    and generate is said to be not checked (never 'generate runs', never silence)."""
    r, lines = check(tmp_path, edited(('def generate(self, idx, max_new_tokens):',
                                       'def generate(self, idx, max_new_tokens, params):')))
    assert r.returncode == 0 and lines['BigramLanguageModel'].startswith(
        "matches; generate not checked: the checker can't call it (TypeError: generate's parameter params means "
        "nothing the checker knows); the past never hears"), r.stdout


def test_a_mistake_in_a_head_is_named_in_the_head_not_in_the_model_that_holds_it(tmp_path):
    """Without the mask the model's future talks to its past, but the cause is the Head: the model is checked
    with its Head computed as the lecture's, and matches; the count agrees with the lines."""
    r, lines = check(tmp_path, edited(('        wei = wei.masked_fill(self.tril[:T, :T] == 0, float(\'-inf\'))\n', '')))
    assert lines['Head'].startswith('differs: ') and 'future' in lines['Head']
    assert lines['BigramLanguageModel'].startswith('matches; with Head as the lecture computes it, the past never '
                                                   'hears the future'), r.stdout
    assert r.stdout.splitlines()[-1] == '4 of 5 parts match gpt.py; look at Head'


VIDEO = [
    ([('wei = q @ k.transpose(-2,-1) * k.shape[-1]**-0.5', 'wei = q @ k.transpose(-2,-1) * C**-0.5')],
     'scaled by C**-0.5 (C = n_embd), as the video from 1:16:56'),
    ([('for _ in range(n_layer)])', 'for _ in range(n_layer)], nn.LayerNorm(n_embd))'),
      ('        self.ln_f = nn.LayerNorm(n_embd)\n', ''), ('        x = self.ln_f(x)\n', '')],
     'the last LayerNorm as the last of blocks, as the video from 1:32:51'),
]


@pytest.mark.parametrize('changes, said', VIDEO)
def test_what_the_video_did_is_said_so_and_not_a_mistake(changes, said, tmp_path):
    r, lines = check(tmp_path, edited(*changes))
    assert r.returncode == 0, r.stdout
    assert any(line.startswith('matches, as in the video: ') and said in line for line in lines.values()), r.stdout


def test_k_at_q_transposed_is_the_lectures_computation_with_key_and_query_trading_names(tmp_path):
    """wei = k @ q^T: wei[i, j] = key(x_i) . query(x_j), the lecture's q @ k^T with its two Linear layers named the
    other way round. The same computation, trained alike: a variant at its line, not a mistake (exit 0)."""
    text = edited(('wei = q @ k.transpose(-2,-1)', 'wei = k @ q.transpose(-2,-1)'))
    r, lines = check(tmp_path, text)
    assert r.returncode == 0 and lines['Head'] == f"matches: {cited(text, 'wei = k @ q')}: a variant, k @ q^T for " \
        "q @ k^T: the key and query layers trade names (the same computation)", r.stdout


def test_a_layer_by_another_name_is_found_by_its_role(tmp_path):
    r, lines = check(tmp_path, edited(('self.value = nn', 'self.val = nn'), ('v = self.value(x)', 'v = self.val(x)')))
    assert r.returncode == 0 and lines['Head'] == 'matches', r.stdout
    r, lines = check(tmp_path, edited(('self.value = nn', 'self.val = nn'), ('v = self.value(x)', 'v = x')))
    assert lines['Head'] == "differs: line 80: x itself aggregated, not value(x); your `val` is defined but never used"


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
    script = check(tmp_path, right)[0].stdout # as the script checks, its model built in cell 5
    assert r.returncode == 0 and r.stdout == script.replace('as line ', 'as cell 5, line '), r.stdout
    del cells[4] # the first Head is the last one now
    r, lines = check(tmp_path, json.dumps({'cells': cells, 'nbformat': 4}), 'mine.ipynb')
    assert lines['Head'].startswith('differs: cell 4, line 16: the 1/sqrt(head_size) scale is missing'), r.stdout
    cells[3] = code('x = (\n') # a cell that never ran: the rest is checked
    cells += [code('%%bash\necho not python\n'), code('torch.tril?\n%%time\n'), code(right)]
    r, lines = check(tmp_path, json.dumps({'cells': cells}), 'mine.ipynb')
    assert r.returncode == 0 and r.stdout.startswith(f'note: left out: {tmp_path / "mine.ipynb"}, cell 4, line 1: '
                                                      "a syntax error: '(' was never closed: line 1\n"), r.stdout


@pytest.mark.parametrize('name, text, said', [
    ('absent.py', None, 'no file at '),
    ('notes.txt', 'class Head: pass', 'is neither a Python file (.py) nor a notebook (.ipynb)'),
    ('mine.ipynb', '{"cells": 3}', 'is not a notebook: no code cells in its JSON'),
    ('mine.py', 'import torch\n\nclass Head(torch.nn.Module)\n    pass\n', 'mine.py, line 3: a syntax error'),
    ('mine.py', 'import torch\nx = 1\n', "none of the lecture's parts"),
    ('mine.py', 'import no_such_module\nclass Config:\n    n_embd = 3\n', "none of the lecture's parts"),
    ('mine.py', 'import torch\nclass Head(torch.nn.Module):\n    size = 1 / 0\n',
     'mine.py, line 3: running it raised ZeroDivisionError: division by zero'),
    ('mine.py', 'import torch\nimport torch.nn.blocks as B\n', # (no module of PyTorch's, nor one like it: no stand-in)
     "mine.py, line 2: running it raised ModuleNotFoundError: No module named 'torch.nn.blocks'"),
])
def test_a_file_it_cannot_check_is_one_line(name, text, said, tmp_path):
    if text is not None:
        (tmp_path / name).write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / name))
    assert r.returncode == 2 and r.stdout == '' and r.stderr.startswith('error: ') and said in r.stderr, r.stderr
    assert r.stderr.count('\n') == 1


def test_a_forward_misspelt_is_named_in_its_part_not_blamed_on_the_checker(tmp_path):
    """def foward: PyTorch's own forward runs and raises; that is the part's mistake, not a failure to check."""
    text = edited(('    def forward(self, x):\n        return self.net(x)', '    def foward(self, x):\n        return self.net(x)'))
    r, lines = check(tmp_path, text)
    assert r.returncode == 1 and lines['FeedFoward'].startswith('differs: line 109: `def foward` is not forward '
                                                                '(misspelt), so it has no forward'), r.stdout


def test_a_part_whose_own_code_fails_to_build_is_named_and_the_parts_that_hold_it_are_not_blamed(tmp_path):
    text = edited(('    def __init__(self, n_embd, n_head):\n        super().__init__()\n        head_size = n_embd // n_head\n',
                   '    def __init__(self, n_embd, n_head):\n        super().__init__()\n        head_size = n_embd // 0\n'))
    r, lines = check(tmp_path, text)
    assert r.returncode == 1 and lines['Head'] == 'matches', r.stdout
    assert lines['Block'] == (f"differs: can't build Block(n_embd=32, n_head=4): mine.py, {cited(text, 'n_embd // 0')}: "
                              "ZeroDivisionError: integer division or modulo by zero")
    assert lines['BigramLanguageModel'] == 'not checked: building it builds Block, which raised (its line says where)'
    assert r.stdout.splitlines()[-1] == '3 of 4 parts match gpt.py; look at Block' # what wasn't checked isn't counted
    r, lines = check(tmp_path, LECTURE[:LECTURE.index('class Block')]) # the script as far as FeedFoward
    assert list(lines) == ['Head', 'MultiHeadAttention', 'FeedFoward'] and r.returncode == 0, r.stdout


def test_a_model_built_as_build_says_and_a_bad_build_is_one_line(tmp_path):
    """--build: how the learner's model is built, where the checker can't tell (arguments that mean nothing
    to it); the model so built is the one checked. An expression that fails is the file's one line, exit 2."""
    text = edited(('class BigramLanguageModel(nn.Module):\n\n    def __init__(self):',
                   'class BigramLanguageModel(nn.Module):\n\n    def __init__(self, a, b):'),
                  ('self.token_embedding_table = nn.Embedding(vocab_size, n_embd)',
                   'self.token_embedding_table = nn.Embedding(a, b)'), ('model = BigramLanguageModel()\n', ''))
    (tmp_path / 'mine.py').write_text(text)
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'), '--build', 'BigramLanguageModel(65, n_embd)')
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == '5 of 5 parts match gpt.py', r.stdout + r.stderr
    r = run_here('scripts/check.py', str(tmp_path / 'mine.py'), '--build', 'BigramLanguageModel(65)')
    assert r.returncode == 2 and r.stdout == '' and r.stderr.startswith('error: --build BigramLanguageModel(65): ') \
        and r.stderr.count('\n') == 1, r.stderr
