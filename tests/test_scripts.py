"""The scripts run as a learner runs them: in this process (run_here) or, where only a process of
its own shows it (the end-to-end run, Ctrl-C, child processes), in a new one."""
import ast
import json
import multiprocessing
import os
import re
import runpy
import shlex
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch

import gpt
from conftest import ROOT, needs_input, run_here

sys.path.insert(0, os.path.join(ROOT, 'scripts'))
import progression  # noqa: E402

TINY_GPT = ['--n_layer=1', '--n_head=2', '--n_embd=16', '--block_size=16', '--batch_size=8',
            '--max_iters=30', '--eval_interval=10', '--eval_iters=5', '--max_new_tokens=50',
            '--device=cpu']


def run(script, *args, cwd=None, timeout=300):
    return subprocess.run([sys.executable, os.path.join(ROOT, script), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def losses(stdout):
    """{step: (train, val)} from the 'step N: train loss X, val loss Y' lines."""
    found = re.findall(r'^step (\d+): train loss ([\d.]+), val loss ([\d.]+)', stdout, re.M)
    return {int(s): (float(t), float(v)) for s, t, v in found}


@needs_input
def test_bigram_prints_the_lectures_exact_losses():
    # what the lecture's bigram.py prints with PyTorch 2.13 on a CPU (same init, batches, steps)
    r = run_here('bigram.py', '--device=cpu') # a GPU draws other random numbers
    assert r.returncode == 0, r.stderr
    assert 'step 0: train loss 4.7305, val loss 4.7241\n' in r.stdout
    assert 'step 2700: train loss 2.4738, val loss 2.4911\n' in r.stdout
    found = losses(r.stdout)
    assert sorted(found) == list(range(0, 3001, 300))  # the last step is evaluated too
    assert abs(found[3000][1] - 2.49) < 0.02
    sample = r.stdout.split('step 3000:')[1].split('\n', 1)[1]
    assert len(sample) >= 500


@needs_input
def test_gpt_prints_the_losses_of_the_lectures_loop(monkeypatch):
    """The lecture's script as the video writes it, at a tiny size: seed, data, model, AdamW, and a
    loop that evaluates every eval_interval steps (and at max_iters - 1) with a .item() per batch,
    each batch stacked from a list of slices. gpt.py prints the same losses at every evaluation the
    two share: the same init, batches, dropout masks and updates, on a CPU."""
    settings = dict(batch_size=4, block_size=16, max_iters=40, eval_interval=10, learning_rate=1e-3,
                    eval_iters=3, n_embd=16, n_head=2, n_layer=2, dropout=0.2)
    r = run_here('gpt.py', *[f'--{k}={v}' for k, v in settings.items()], '--device=cpu', '--out_dir=',
                 '--max_new_tokens=0')
    assert r.returncode == 0, r.stderr
    printed = losses(r.stdout)
    for key, value in dict(settings, device='cpu', fast_attention=False).items():
        monkeypatch.setattr(gpt, key, value) # the classes read them, as the lecture's do

    torch.manual_seed(1337)
    with open(os.path.join(ROOT, 'input.txt'), encoding='utf-8') as f:
        text = f.read()
    chars = sorted(list(set(text)))
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n = int(0.9 * len(data))
    splits = {'train': data[:n], 'val': data[n:]}
    block_size, batch_size = settings['block_size'], settings['batch_size']

    def get_batch(split):
        d = splits[split]
        ix = torch.randint(len(d) - block_size, (batch_size,))
        return (torch.stack([d[i:i + block_size] for i in ix]),
                torch.stack([d[i + 1:i + block_size + 1] for i in ix]))

    @torch.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split in ['train', 'val']:
            found = torch.zeros(settings['eval_iters'])
            for k in range(settings['eval_iters']):
                X, Y = get_batch(split)
                logits, loss = model(X, Y)
                found[k] = loss.item()
            out[split] = found.mean().item()
        model.train()
        return out

    model = gpt.GPTLanguageModel(len(chars))
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings['learning_rate'])
    lecture = {}
    for step in range(settings['max_iters']):
        if step % settings['eval_interval'] == 0 or step == settings['max_iters'] - 1:
            out = estimate_loss()
            lecture[step] = (float(f"{out['train']:.4f}"), float(f"{out['val']:.4f}"))
        xb, yb = get_batch('train')
        logits, loss = model(xb, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    assert sorted(lecture) == [0, 10, 20, 30, 39] and sorted(printed) == [0, 10, 20, 30, 40]
    for step in (0, 10, 20, 30):
        assert printed[step] == lecture[step], step
    assert len(set(lecture.values())) == 5 # it trained: no two evaluations alike


@needs_input
def test_gpt_trains_end_to_end_and_samples(tmp_path):
    r = run('gpt.py', *TINY_GPT, '--progress_seconds=1e-9', cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith('device: cpu\n')
    found = losses(r.stdout)
    assert sorted(found) == [0, 10, 20, 30]
    assert found[30][1] < found[0][1]  # it learned something
    assert re.search(r'^step 20: .* \| [\d.]+s, [\d.]+ ms/step, [\d,]+ tok/s, \d+s left$', r.stdout, re.M)
    assert re.search(r'^step 30: .* \| [\d.]+s, [\d.]+ ms/step, [\d,]+ tok/s$', r.stdout, re.M)
    # progress between evaluations: here after every step, as progress_seconds is tiny
    between = re.findall(r'^step (\d+)/30 \| [\d.]+s, [\d.]+ ms/step, [\d,]+ tok/s, \d+s left$',
                         r.stdout, re.M)
    assert between == [str(n) for n in range(1, 31)]
    # and within each evaluation, after every batch but the last (2 splits x 5 batches)
    during = re.findall(r'^step (\d+): evaluating, batch (\d+)/10 \| [\d.]+s, [\d.]+ ms/batch, \d+s left in '
                        r'this evaluation$', r.stdout, re.M)
    assert during == [(str(s), str(b)) for s in (0, 10, 20, 30) for b in range(1, 10)]
    assert sorted(os.listdir(tmp_path / 'out')) == ['best.pt', 'ckpt.pt', 'log.csv']
    assert len(r.stdout.rsplit('best.pt\n', 1)[1]) >= 50  # the sample


def test_time_left_counts_the_steps_and_the_evaluations_still_to_come(tiny, monkeypatch):
    monkeypatch.setattr(gpt, 'max_iters', 5000)
    monkeypatch.setattr(gpt, 'eval_interval', 500)
    # right after the first evaluation: 5000 steps and 10 evaluations to go (a CPU's speeds)
    assert gpt.time_left(0, 9.0, 800.0, evaluated=True) == '14.7 h left'
    assert gpt.time_left(500, 0.1, 1.0, evaluated=True) == '8 min left'   # 450 s + 9 s
    assert gpt.time_left(4999, 1.0, 10.0, evaluated=False) == '11s left'  # 1 step, the last eval
    monkeypatch.setattr(gpt, 'max_iters', 5100)  # the last step is evaluated too
    assert gpt.time_left(5000, 0.0, 10.0, evaluated=True) == '10s left'
    # seconds up to a minute and a half, minutes up to an hour and a half, then hours
    assert [gpt.duration(s) for s in (89, 90, 5399, 5400)] == ['89s', '2 min', '90 min', '1.5 h']


@pytest.mark.parametrize('script', ['gpt.py', 'bigram.py'])
@pytest.mark.parametrize('arg, words', [
    ('--max_itters=10', ['unknown option', '--max_iters']),
    ('--max_iters=1.5', ['--max_iters expects an int (a whole number', "'1.5'"]),
    ('--max_iters=1e3', ['--max_iters expects an int']),
    ('--max_iters=True', ['--max_iters expects an int']), # a bool is an int to Python, not here
    ('--learning_rate=fast', ['--learning_rate expects a number']),
    ('--max_iters', ['unknown option', 'use --key=value']),
    ('input.txt', ['unknown option']),
])
def test_bad_options_are_one_line_errors(script, arg, words, tmp_path):
    r = run_here(script, arg, cwd=tmp_path)
    assert r.returncode == 2
    assert r.stdout == ''
    assert r.stderr.startswith('error: ') and r.stderr.count('\n') == 1, r.stderr
    assert 'valid keys: ' in r.stderr and '--batch_size' in r.stderr # the foundation issue: for both kinds
    for word in words:
        assert word in r.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('script', ['gpt.py', 'bigram.py'])
@pytest.mark.parametrize('arg, words', [
    ('--batch_size=0', ['--batch_size must be at least 1, got 0']),
    ('--max_iters=-5', ['--max_iters must be at least 0, got -5']),
    ('--learning_rate=-1e-3', ['--learning_rate must be > 0']),
    ('--seed=18446744073709551616', ['--seed must be from -2**63 to 2**64 - 1, got 18446744073709551616']),
])
def test_out_of_range_values_are_one_line_errors(script, arg, words, tmp_path):
    r = run_here(script, arg, '--device=cpu', cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith('error: ') and r.stderr.count('\n') == 1, r.stderr
    for word in words:
        assert word in r.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('args, words', [
    (['--n_embd=64', '--n_head=6'], 'n_embd=64 must be a multiple of n_head=6'),
    (['--n_head=0'], '--n_head must be at least 1, got 0'), # not a ZeroDivisionError
    (['--lr_decay=True', '--min_lr=1e-3'], '--min_lr=0.001 is above --learning_rate=0.0003'),
    (['--preset=cpu', '--learning_rate=3e-4'], '--min_lr=0.0004 is above --learning_rate=0.0003'),
    (['--grad_accum=3'], '--grad_accum=3 must be at least 1 and divide --batch_size=64 into equal parts'),
    (['--grad_accum=0'], '--grad_accum=0 must be at least 1'),
])
def test_gpt_settings_that_cannot_go_together_are_one_line_errors(args, words, tmp_path):
    r = run_here('gpt.py', *args, cwd=tmp_path)
    assert r.returncode == 1 and words in r.stderr and r.stderr.count('\n') == 1, r.stderr


def test_gpt_bool_option_wants_a_bool(tmp_path):
    r = run_here('gpt.py', '--resume=1', cwd=tmp_path)
    assert r.returncode == 2 and '--resume expects True or False' in r.stderr


@pytest.mark.parametrize('script', ['gpt.py', 'bigram.py'])
def test_every_setting_has_a_kind_and_its_default_is_of_it(script):
    namespace = runpy.run_path(os.path.join(ROOT, script)) # imported: nothing runs
    kinds = namespace['KINDS']
    assert list(kinds) == namespace['config_keys'] # the same settings, in the same order
    for key, kind in kinds.items():
        assert namespace['as_kind'](namespace[key], kind) is namespace[key], key


def edited_copy(script, line, edited, folder):
    """A copy of script in folder, with its one line (or start of a line) line made edited: a
    learner's edit at the top of the file. Its path."""
    with open(os.path.join(ROOT, script), encoding='utf-8') as f:
        source = f.read()
    assert source.count(line) == 1
    (folder / script).write_text(source.replace(line, edited))
    return str(folder / script)


@pytest.mark.parametrize('script, line, edited, words', [
    ('gpt.py', 'max_iters = 5000 ', 'max_iters = 5e3 ', 'max_iters = 5000.0 at the top of gpt.py must be an int'),
    ('gpt.py', 'resume = False ', "resume = 'False' ", "resume = 'False' at the top of gpt.py must be True or False"),
    ('gpt.py', 'learning_rate = 3e-4 ', "learning_rate = '3e-4' ", "learning_rate = '3e-4' at the top of gpt.py must be a number"),
    ('gpt.py', 'fast_attention = None ', 'fast_attention = 0 ', 'fast_attention = 0 at the top of gpt.py must be True, False or None'),
    ('bigram.py', 'batch_size = 32 ', 'batch_size = 32.0 ', 'batch_size = 32.0 at the top of bigram.py must be an int'),
])
def test_a_setting_edited_to_the_wrong_kind_is_a_one_line_error(script, line, edited, words, tmp_path):
    """A learner edits the settings at the top of the file: max_iters = 5e3 would end in a
    TypeError deep in the loop, resume = 'False' would resume."""
    r = run_here(edited_copy(script, line, edited, tmp_path), '--device=cpu', cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith('error: ') and words in r.stderr, r.stderr
    assert r.stderr.count('\n') == 1 and r.stdout == ''
    assert os.listdir(tmp_path) == [script]


@pytest.mark.parametrize('script', ['gpt.py', 'bigram.py'])
def test_a_setting_you_add_at_the_top_is_an_option_of_its_kind(script, tmp_path):
    line = "input_file = '' "
    copy = edited_copy(script, line, 'weight_decay = 0.1 # my own\n' + line, tmp_path)
    r = run_here(copy, '--weight_decay=0', '--help', cwd=tmp_path)
    assert r.returncode == 0 and re.search(r'^  --weight_decay=0.0 +my own$', r.stdout, re.M), r.stdout
    r = run_here(copy, '--weight_decay=none', cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("error: --weight_decay expects a number, got 'none'")


@pytest.mark.parametrize('script, line, edited', [
    ('gpt.py', 'dropout = 0.2 ', 'dropout = 0 '), ('bigram.py', 'learning_rate = 1e-2 ', 'learning_rate = 1 ')])
def test_a_float_setting_edited_to_an_int_still_takes_a_float_on_the_command_line(script, line, edited,
                                                                                  tmp_path):
    copy, key = edited_copy(script, line, edited, tmp_path), line.split()[0]
    r = run_here(copy, f'--{key}=0.125', '--bogus=1', cwd=tmp_path)
    assert r.returncode == 2 and 'unknown option' in r.stderr, r.stderr # the float was taken
    r = run_here(copy, '--help', cwd=tmp_path)
    assert f'--{key}={float(edited.split()[2])!r} ' in r.stdout # the file's int, read as a float


@pytest.mark.parametrize('script, first', [('gpt.py', 'The GPT of'), ('bigram.py', 'The bigram'),
                                           ('scripts/bench.py', 'Time training steps')])
def test_help_lists_the_hyperparameters_with_their_comments(script, first):
    r = run_here(script, '--help')
    assert r.returncode == 0 and r.stdout.startswith(first), r.stdout[:200]
    # each setting: its default, then its comment, which wraps onto indented lines below it
    blocks = re.findall(r'^  --(\w+)=(.*(?:\n {8,}\S.*)*)', r.stdout, re.M)
    settings = {key: ' '.join(text.split()) for key, text in blocks}
    assert max(map(len, r.stdout.splitlines())) <= 110
    assert re.match(r'(32|64) +how many independent sequences', settings['batch_size'])
    assert settings['max_iters'].split()[0] in ('3000', '5000')
    assert 'else an Apple GPU (mps), else the CPU' in settings['device'] # its comment is on the line below
    if script == 'gpt.py':  # a comment that goes on over two lines is joined
        assert settings['use_cuda_graph'].endswith('then replay them: one launch instead of hundreds of '
                                                   'small kernels per step')
    if script == 'scripts/bench.py':  # its own settings too, with their comments
        assert settings['steps'].split()[0] == '20' and 'timed steps' in settings['steps']


@pytest.mark.parametrize('script', ['gpt.py', 'bigram.py', 'scripts/bench.py'])
def test_help_shows_the_values_the_other_options_set_wherever_it_stands(script):
    for args in (['--help', '--max_iters=7'], ['--max_iters=7', '--help']):
        r = run_here(script, *args)
        assert r.returncode == 0 and re.search(r'^  --max_iters=7 +how many', r.stdout, re.M), r.stdout
        assert 'The values below are those of --max_iters=7:' in r.stdout
    r = run_here(script, '--help', '--bogus=1')
    assert r.returncode == 2 and r.stderr.startswith("error: unknown option '--bogus=1'")


@pytest.mark.parametrize('script', ['gpt.py', 'scripts/bench.py'])
def test_help_shows_what_a_preset_sets(script):
    r = run_here(script, '--help')
    assert re.search(r'^  --n_layer=6 ', r.stdout, re.M) and 'values below' not in r.stdout
    listed = r.stdout.split('\n--preset=cpu sets, before the other options:\n')[1]
    assert dict(re.findall(r'--(\w+)=(\S+)', listed)) == {k: repr(v) for k, v in gpt.PRESETS['cpu'].items()}
    r = run_here(script, '--preset=cpu', '--n_head=2', '--help') # the preset, then the option over it
    assert re.search(r'^  --n_layer=3 ', r.stdout, re.M) and re.search(r'^  --n_head=2 ', r.stdout, re.M)


# the lecture's definitions in each script, in the order the lecture builds them
LECTURE_ORDER = {
    'bigram.py': ['read_text', 'make_codec', 'get_batch', 'estimate_loss', 'BigramLanguageModel', 'main'],
    'gpt.py': ['read_text', 'make_codec', 'split_data', 'get_batch', 'estimate_loss', 'Head',
               'MultiHeadAttention', 'FeedForward', 'Block', 'GPTLanguageModel', 'get_lr', 'main'],
}


@pytest.mark.parametrize('script', sorted(LECTURE_ORDER))
def test_a_script_reads_in_the_lectures_order_with_the_rest_after_its_loop(script):
    with open(os.path.join(ROOT, script), encoding='utf-8') as f:
        source = f.read()
    defs = [node.name for node in ast.parse(source).body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    assert [name for name in defs if name in LECTURE_ORDER[script]] == LECTURE_ORDER[script]
    assert defs[0] == 'read_text' # right after the hyperparameters: the data
    # what the lecture's script did not need, under a line that says so, after the loop
    rest = source.index('\n# not in the lecture:')
    assert source.index('\ndef main(') < rest < source.index('\ndef apply_overrides(')
    assert source.index('\ndef fail(') > rest


def test_importing_is_silent(tmp_path):
    code = f"import sys; sys.path.insert(0, {ROOT!r}); import gpt, bigram"
    r = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == '' and r.stderr == ''
    assert os.listdir(tmp_path) == []


@needs_input
def test_progression_prints_the_table_and_json(tmp_path):
    out = tmp_path / 'p.json'
    r = run(os.path.join('scripts', 'progression.py'), '--stages', '1,2', '--max_iters', '20',
            '--eval_iters', '2', '--device', 'cpu', '--json', str(out))
    assert r.returncode == 0, r.stderr
    table = [line for line in r.stdout.splitlines() if line.startswith('|')]
    assert table[0].startswith('| stage | what was added | parameters | train loss | val loss |')
    assert len(table) == 2 + 2 and all(line.count('|') == 8 for line in table)
    rows = json.loads(out.read_text())
    assert [row['stage'] for row in rows] == [1, 2]
    assert [row['params'] for row in rows] == [65 * 65, 7_553]  # the bigram table; stage 2
    for row, line in zip(rows, table[2:]):
        assert f"| {row['train']:.4f} | {row['val']:.4f} |" in line
    # a line per evaluation as each stage trains, with the speed since the one before
    for row in rows:
        assert re.search(rf"^stage {row['stage']} step 0: train loss [\d.]+, val loss [\d.]+ \| [\d.]+s$",
                         r.stdout, re.M)
        assert re.search(rf"^stage {row['stage']} step 20: train loss {row['train']:.4f}, val loss "
                         rf"{row['val']:.4f} \| [\d.]+s, [\d.]+ ms/step$", r.stdout, re.M)


def press_ctrl_c(script, *args, after):
    """Run scripts/script as in a terminal (a process group of its own), read the lines it prints
    until after(lines) holds, then press Ctrl-C: SIGINT to the whole group. The process, the lines
    read, all of its stdout and its stderr."""
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, 'scripts', script), *args], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env={**os.environ, 'PYTHONUNBUFFERED': '1'}) # each line as it is printed
    lines = []
    while not after(lines):
        lines.append(p.stdout.readline())
        if not lines[-1]:
            pytest.fail(f"{script} ended before Ctrl-C: {p.communicate()[1]}")
    os.killpg(p.pid, signal.SIGINT)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired: # Ctrl-C did not stop it: nothing of it may outlive the test
        os.killpg(p.pid, signal.SIGKILL)
        raise
    return p, lines, ''.join(lines) + out, err


@needs_input
def test_ctrl_c_stops_progression_and_its_workers_without_a_traceback():
    p, lines, _, err = press_ctrl_c('progression.py', '--stages', '5,6', '--device', 'cpu', '--jobs', '2',
                                    '--eval_iters=1', after=lambda lines: len(lines) == 2)
    assert lines[0].startswith('training stages 5, 6')
    assert lines[1].startswith('stage ') # a worker was training
    assert p.returncode == 130 and err == '', err
    for _ in range(50): # the workers go with the main process
        try:
            os.killpg(p.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.killpg(p.pid, signal.SIGKILL)
        pytest.fail('a worker outlived the main process')


@needs_input
@pytest.mark.parametrize('command', [
    'bench.py --device=cpu --n_layer=1 --n_head=2 --n_embd=32 --block_size=16 --steps=10000',
    'data_walkthrough.py', 'addition.py', 'calculator.py --cot', 'ex3.py --corpus=README.md', 'ex4.py',
    '../bigram.py --max_iters=100000'])
def test_ctrl_c_stops_a_script_without_a_traceback(command):
    p, _, _, err = press_ctrl_c(*command.split(), after=lambda lines: len(lines) == 1) # once it has started
    assert p.returncode == 130 and err == '', err


TINY_TRY = '--n_layer=1 --n_embd=16 --n_head=2 --block_size=8 --eval_iters=1 --max_new_tokens=5'


WRITERS = [ # a short run of each script that prints
    'bigram.py --max_iters=1 --eval_iters=1', f'gpt.py {" ".join(TINY_GPT)} --out_dir=',
    'scripts/attention_walkthrough.py', # data_walkthrough.py stops through the same run_checked
    'scripts/progression.py --stages 1 --max_iters=2 --eval_iters=1',
    'scripts/bench.py --device=cpu --n_layer=1 --n_head=2 --n_embd=16 --block_size=8 --steps=1',
    'scripts/addition.py --digits 1 --max_steps=2',
    'scripts/calculator.py --digits 1 --max_steps=2 --cot',
    f'scripts/ex3.py --corpus={os.path.join(ROOT, "README.md")} --preset= {" ".join(TINY_GPT)}',
    'scripts/ex4.py --features baseline --seeds 1 --max_iters=2',
    f'scripts/cpu_sweep.py --try="{TINY_TRY} --max_iters=2"',
    'gpt.py --help', 'bigram.py --help', 'scripts/bench.py --help', 'scripts/data_walkthrough.py --help']


@needs_input
@pytest.mark.parametrize('command', WRITERS)
def test_a_reader_that_stops_reading_gets_no_traceback(command, tmp_path):
    """`python script.py | head`: a script stops quietly once nobody reads its output. Here nobody
    reads from the start, and the output is block-buffered, as in a pipe."""
    read, write = os.pipe()
    os.close(read) # every write to the pipe now fails: EPIPE, a BrokenPipeError in Python
    with open(write, 'w') as stdout:
        r = run_here(*shlex.split(command), cwd=tmp_path, stdout=stdout)
        assert r.returncode == 1 and r.stderr == '', r.stderr
        stdout.flush() # what the interpreter would do at exit: nothing may be left to write


@needs_input
@pytest.mark.skipif(not os.path.exists('/dev/full'), reason='needs /dev/full, a file that is always full')
@pytest.mark.parametrize('command', WRITERS + ['scripts/plot_losses.py log.csv'])
def test_output_to_a_full_disk_is_one_line(command, tmp_path):
    """`python script.py > file` on a disk that fills up: every write to /dev/full fails with ENOSPC."""
    if 'plot_losses' in command: # it prints only once it has plotted
        pytest.importorskip('matplotlib')
        (tmp_path / 'log.csv').write_text('step,train_loss,val_loss,elapsed_s\n0,4.2,4.2,0.1\n')
    stdout = open('/dev/full', 'w')
    try:
        r = run_here(*shlex.split(command), cwd=tmp_path, stdout=stdout)
    finally: # what is left in stdout's buffer can never be written: drop it
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stdout.fileno())
        os.close(null)
        stdout.close()
    assert r.returncode == 1 and r.stderr == 'error: No space left on device\n', r.stderr


@needs_input
def test_progression_and_its_workers_stop_quietly_when_the_reader_goes(tmp_path):
    """`progression.py | head -1` with two stages side by side: the reader goes once the workers start."""
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONUNBUFFERED'}
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, 'scripts', 'progression.py'), '--stages', '1,2',
                          '--jobs=2', '--max_iters=2', '--eval_iters=1'], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env, start_new_session=True)
    assert p.stdout.readline().startswith('training stages 1, 2')
    p.stdout.close()
    try: # stderr to its end: the workers' too, which stays open until they are gone
        _, err = p.communicate(timeout=60) # with a multiprocessing.Pool, once in a while: forever
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        raise
    assert p.returncode == 1 and err == '', err # without the fix: a traceback in 3 runs of 5 here


def test_progression_raises_a_workers_error_after_its_traceback():
    with pytest.raises(KeyError) as e: # no stage 99: train_stage fails in the worker
        list(progression.train_side_by_side([(99, 'cpu', {}, 1)], jobs=1))
    assert str(e.value.__cause__).startswith('in the process training stage 99:\nTraceback')
    assert str(e.value.__cause__).endswith('KeyError: 99\n')
    assert not multiprocessing.active_children()


@needs_input
def test_progression_says_in_one_line_which_worker_died(capsys):
    """A worker killed (by the system, out of memory, say) leaves the others nothing to wait for."""
    def kill(first_only):
        workers = sorted(multiprocessing.active_children(), key=lambda w: int(w.name.rsplit('-', 1)[1]))
        for w in workers[:1] if first_only else workers:
            w.kill()
    first, rest = threading.Timer(5, kill, (True,)), threading.Timer(60, kill, (False,)) # rest: if it hangs
    first.start()
    rest.start()
    long = {'max_iters': 10**6, 'eval_interval': 10**6, 'eval_iters': 1}
    try:
        with pytest.raises(SystemExit) as e: # the first started trains stage 6
            list(progression.train_side_by_side([(6, 'cpu', long, 1), (5, 'cpu', long, 1)], jobs=2))
    finally:
        hung = rest.finished.is_set() # the main process waited for stage 5 until the test killed it
        first.cancel()
        rest.cancel()
    assert not hung and e.value.code == 1
    assert capsys.readouterr().err == 'error: the process training stage 6 stopped with exit code -9\n'
    assert not multiprocessing.active_children() # stage 5's worker went too


@needs_input
def test_cpu_sweep_shows_each_runs_progress_then_the_table():
    r = run(os.path.join('scripts', 'cpu_sweep.py'), f'--try={TINY_TRY} --max_iters=6 --eval_interval=3',
            f'--try={TINY_TRY} --max_iters=4 --eval_interval=4')
    assert r.returncode == 0, r.stderr
    progress = re.findall(r'^  run \d/2, (try-\d): step (\d+): train loss [\d.]+, val loss ([\d.]+)', r.stdout,
                          re.M)
    assert [(name, step) for name, step, _ in progress] == [('try-1', '0'), ('try-1', '3'), ('try-1', '6'),
                                                           ('try-2', '0'), ('try-2', '4')]
    runs = re.findall(r'^(run \d/2, try-\d): [\d.]+ s, val loss', r.stdout, re.M)
    assert runs == ['run 1/2, try-1', 'run 2/2, try-2']
    table = [line for line in r.stdout.splitlines() if line.startswith('| try-')]
    vals = {name: [float(v) for n, _, v in progress if n == name] for name in ('try-1', 'try-2')}
    for line, name in zip(table, ('try-1', 'try-2')): # final and best val loss, from the lines above
        assert line.startswith(f"| {name} | ") and f"| {vals[name][-1]:.4f} | {min(vals[name]):.4f} |" in line
    assert len(table) == 2


@needs_input
def test_ctrl_c_stops_the_sweep_with_the_table_so_far():
    p, _, out, err = press_ctrl_c( # once the second run is training; the group: the sweep and its gpt.py
        'cpu_sweep.py', f'--try={TINY_TRY} --max_iters=2', f'--try={TINY_TRY} --max_iters=100000',
        after=lambda lines: lines and lines[-1].startswith('  run 2/2, try-2: step 0:'))
    assert p.returncode == 130 and err == '', err
    assert 'Ctrl-C: stopped; the table has the 1 of 2 settings that finished' in out
    assert [line[:8] for line in out.splitlines() if line.startswith('| try-')] == ['| try-1 ']


@pytest.mark.parametrize('script, args, words', [
    ('progression', ['--stages', '0-9'], 'stages are 1 to 7'),
    ('progression', ['--max_iters=-5'], '--max_iters must be at least 1, got -5'),
    ('progression', ['--jobs=0'], '--jobs must be at least 1, got 0'),
    ('progression', ['--json=/no/such/folder/p.json'], '--json /no/such/folder/p.json: no such folder'),
    ('progression', ['--json=/'], '--json /: it is a folder; give the name of a file'),
    ('cpu_sweep', ['--repeat=0'], '--repeat must be at least 1, got 0'),
    ('addition', ['--eval_every=0'], '--eval_every must be at least 1, got 0'),
    ('addition', ['--batch_size=0'], '--batch_size must be at least 1, got 0'),
    ('addition', ['--n_embd=100', '--n_head=3'], '--n_embd=100 must be a multiple of --n_head=3'),
    ('addition', ['--max_seconds=-1'], '--max_seconds must be above 0, got -1.0'),
    ('addition', ['--warmup=-5'], '--warmup must be at least 0, got -5'),
    ('addition', ['--target=2'], 'at most 1 (0.99: 99%), got 2.0'),
    ('calculator', ['--digits=10'], '--digits must be 1 to 9'),
    ('calculator', ['--batch_size=3'], '--batch_size must be at least one problem per operation, got 3'),
    ('calculator', ['--lr=0'], '--lr must be above 0, got 0.0'),
])
def test_scripts_reject_bad_values_in_one_line(script, args, words):
    r = run_here(os.path.join('scripts', f'{script}.py'), *args)
    assert r.returncode == 2 and words in r.stderr and r.stderr.count('\n') == 1, r.stderr


@needs_input
def test_cpu_preset_runs_a_few_steps_and_the_command_line_wins(tmp_path):
    r = run_here('gpt.py', '--max_iters=20', '--preset=cpu', '--eval_interval=10', '--eval_iters=2',
            '--max_new_tokens=20', cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == 'device: cpu' # even where a GPU is: the README's numbers
    config = r.stdout.splitlines()[1]
    for setting in ('n_layer=3', 'n_embd=96', 'block_size=64', 'dropout=0.0', 'lr_decay=True',
                    'fast_attention=True', 'max_iters=20', 'eval_interval=10'):
        assert f' {setting} ' in f' {config} '
    assert sorted(losses(r.stdout)) == [0, 10, 20]


def test_unknown_preset_is_a_one_line_error():
    r = run_here('gpt.py', '--preset=gpu')
    assert r.returncode == 2 and r.stderr == "error: unknown preset 'gpu'; presets: cpu\n"


@needs_input
def test_full_config_on_cpu_prints_the_hint(tmp_path):
    (tmp_path / 'file').write_text('') # an --out_dir it cannot use: it stops before any evaluation
    r = run_here('gpt.py', '--device=cpu', f'--out_dir={tmp_path / "file"}')
    assert r.returncode == 1 and 'cannot write into --out_dir' in r.stderr
    assert 'hint: on a CPU the lecture' in r.stdout and '--preset=cpu' in r.stdout
    assert 'hint' not in run_here('gpt.py', '--preset=cpu', f'--out_dir={tmp_path / "file"}').stdout


def test_a_missing_input_file_fails_before_the_cpu_hint(tmp_path):
    r = run_here('gpt.py', '--device=cpu', f'--input_file={tmp_path / "missing.txt"}', cwd=tmp_path)
    assert r.returncode == 1 and r.stderr == f"error: {tmp_path / 'missing.txt'}: no such file\n"
    assert 'hint' not in r.stdout and os.listdir(tmp_path) == []


@pytest.mark.parametrize('script', ['progression', 'cpu_sweep', 'addition', 'calculator', 'plot_losses',
                                    'sample', 'ex3', 'ex4'])
def test_every_script_with_options_answers_a_wrong_one_in_one_line(script, tmp_path):
    r = run_here(os.path.join('scripts', f'{script}.py'), '--corpus=x', '--no_such_option', cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == '', r.stdout
    assert r.stderr.startswith('error: ') and r.stderr.count('\n') == 1, r.stderr
    assert '--no_such_option' in r.stderr and r.stderr.endswith('(see --help)\n')
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('command', ['gpt.py', 'bigram.py', 'scripts/progression.py', 'scripts/bench.py',
                                     'scripts/sample.py', 'scripts/addition.py', 'scripts/calculator.py',
                                     'scripts/ex3.py --corpus=x',
                                     'scripts/ex4.py'])
@pytest.mark.parametrize('device, words', [
    ('foo', ["device 'foo'", 'cpu', 'cuda', 'mps']),
    # a CPU build of PyTorch says CUDA is missing; a CUDA build on a machine without one, the driver
    ('cuda:7' if torch.cuda.is_available() else 'cuda', ['cannot use device', 'CUDA|NVIDIA driver']),
    ('meta', ["cannot use device 'meta'"]), # PyTorch takes it, but its tensors hold no numbers
    ('hpu', ["cannot use device 'hpu'"]), # Intel Gaudi: PyTorch knows the name, but not without its plugin
])
def test_a_device_this_machine_lacks_is_a_one_line_error(command, device, words, tmp_path):
    script, *args = command.split()
    r = run_here(script, *args, f'--device={device}', cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith('error: ') and r.stderr.count('\n') == 1, r.stderr
    for word in words:
        assert any(w in r.stderr for w in word.split('|')), r.stderr
    assert os.listdir(tmp_path) == []


def test_a_gpu_number_beyond_the_machines_gpus_says_how_many_there_are(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True) # a machine with two GPUs
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 2)
    with pytest.raises(SystemExit) as e:
        gpt.check_device('cuda:7')
    assert e.value.code == 1
    assert capsys.readouterr().err == ("error: cannot use device 'cuda:7': this machine has 2 CUDA GPU(s), "
                                       "cuda:0 to cuda:1\n")


def readme_commands():
    """{script: the --options the README passes to it}, from its bash blocks and inline code."""
    with open(os.path.join(ROOT, 'README.md')) as f:
        text = f.read()
    lines = [line for block in re.findall(r'```bash\n(.*?)```', text, re.S)
             for line in block.replace('\\\n', ' ').splitlines()]
    prose = re.sub(r'```.*?```', '', text, flags=re.S)
    lines += [span.replace('\n', ' ') for span in re.findall(r'`([^`]+)`', prose)]
    commands = {}
    for line in lines:
        for m in re.finditer(r'python (\S+\.py)((?: (?!python )\S+)*)', line.split(' #')[0]):
            commands.setdefault(m.group(1), set()).update(re.findall(r'(?<!\S)(--[a-z_0-9]+)', m.group(2)))
    return commands


def test_every_option_in_the_readme_exists():
    """The README's commands use only options that their scripts have: the docs can't go stale."""
    commands = readme_commands()
    assert len(commands) >= 10 and '--finetune_lr' in commands['scripts/ex3.py']
    helps = {script: run_here(script, '--help').stdout for script in commands}
    helps['scripts/ex3.py'] += helps['gpt.py'] # it passes gpt.py's settings on
    for script, options in commands.items():
        known = set(re.findall(r'--[a-z_0-9]+', helps[script])) | {'--help'}
        assert options <= known, f"{script}: {sorted(options - known)}"


def test_the_video_map_points_at_code_that_exists():
    """README, "Follow the video": every time matches its link, in the video's order, and every
    walkthrough section, class, method, function, stage, question and test it names exists."""
    with open(os.path.join(ROOT, 'README.md')) as f:
        text = f.read()
    section = text.split('\n## Follow the video\n')[1].split('\n## ')[0]
    rows = [line for line in section.splitlines() if line.startswith('| [')]
    assert len(rows) >= 15
    defined = {} # {file: {top-level name: names defined in its body}}
    for path in ['gpt.py', 'bigram.py'] + [f'scripts/{n}' for n in os.listdir(os.path.join(ROOT, 'scripts'))
                                           if n.endswith('.py')]:
        with open(os.path.join(ROOT, path)) as f:
            tree = ast.parse(f.read())
        defined[os.path.basename(path)] = {node.name: {n.name for n in getattr(node, 'body', [])
                                                       if isinstance(n, ast.FunctionDef)}
                                           for node in tree.body
                                           if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    with open(os.path.join(ROOT, 'tests', 'test_lecture_claims.py')) as f:
        claims = f.read()
    last = -1
    for row in rows:
        shown, seconds = re.match(r'\| \[([\d:]+)\]\(https://www\.youtube\.com/watch\?v=kCc8FmEb1nY&t=(\d+)s\)',
                                  row).groups()
        assert sum(int(part) * 60 ** i for i, part in enumerate(reversed(shown.split(':')))) == int(seconds), row
        assert int(seconds) > last, row
        last = int(seconds)
        here = row.split(' | ')[-1]
        for script, first, end in re.findall(r'`(\w+\.py)` §(\d+)(?:-(\d+))?', here):
            with open(os.path.join(ROOT, 'scripts', script)) as f:
                source = f.read()
            for n in range(int(first), int(end or first) + 1):
                assert f'section("{n}. ' in source, f"{script} has no section {n}"
        for script, names in re.findall(r'`(\w+\.py)`(?: §[\d-]+)?: ((?:`[\w.]+`(?:, )?)+)', here):
            for name in re.findall(r'`([\w.]+)`', names):
                top, _, member = name.partition('.')
                assert top in defined[script], f"{script} defines no {top}"
                assert not member or member in defined[script][top], f"{script} defines no {name}"
        for first, end in re.findall(r'stages? (\d+)(?:-(\d+))?', here):
            assert {int(first), int(end or first)} <= set(progression.STAGES), row
        for first, end in re.findall(r'questions? (\d+)(?:-(\d+))?', here):
            assert 1 <= int(first) <= int(end or first) <= 7, row
        for name in re.findall(r'`(test_\w+)`', here):
            assert f'def {name}(' in claims, name
        for path in re.findall(r'`(scripts/\w+\.py)`', here):
            assert os.path.exists(os.path.join(ROOT, path)), path


def test_the_readmes_links_lead_somewhere():
    """Every [text](#anchor) in the README names one of its headings, as GitHub spells their
    anchors, and every link to a file of this repository names a file that exists."""
    with open(os.path.join(ROOT, 'README.md')) as f:
        text = f.read()
    headings = re.findall(r'^#+ (.+)$', text, re.M)
    anchors = {re.sub(r'[^\w\- ]', '', h.lower()).replace(' ', '-') for h in headings}
    assert {'no-gpu', 'on-a-gpu', 'the-lecture-stage-by-stage'} <= anchors
    links = re.findall(r'\]\(([^)\s]+)\)', text)
    inside = [link for link in links if not link.startswith(('http://', 'https://'))]
    assert len(inside) >= 20
    for link in inside:
        path, _, anchor = link.partition('#')
        if path:
            assert os.path.exists(os.path.join(ROOT, path)), link
        else:
            assert anchor in anchors, link
