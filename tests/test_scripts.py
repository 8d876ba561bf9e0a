"""The scripts in scripts/ run as a learner runs them, tiny, and answer a mistake in one line."""
import json
import os
import re
import struct
import time

import pytest
import torch

from conftest import needs_input, run_here


@needs_input
def test_progression_prints_the_table_and_json(tmp_path):
    out, started = tmp_path / 'p.json', time.time()
    r = run_here(os.path.join('scripts', 'progression.py'), '--stages', '1,2', '--max_iters', '20',
                 '--eval_iters', '2', '--device', 'cpu', '--json', str(out), '--jobs', '1')
    assert r.returncode == 0, r.stderr
    took = re.search(r'^(\d+) s in all, PyTorch ', r.stdout, re.M) # (the run's own time: within the test's)
    assert took and int(took.group(1)) <= time.time() - started + 1, r.stdout
    table = [line for line in r.stdout.splitlines() if line.startswith('|')]
    assert table[0].startswith('| stage | what was added | parameters | train loss | val loss |')
    assert len(table) == 2 + 2 and all(line.count('|') == 8 for line in table)
    rows = json.loads(out.read_text())
    assert [row['stage'] for row in rows] == [1, 2]
    assert [row['params'] for row in rows] == [65 * 65, 7_553]  # the bigram table; stage 2
    for row, line in zip(rows, table[2:]):
        assert f"| {row['train']:.4f} | {row['val']:.4f} |" in line
    for row in rows: # a line per evaluation as each stage trains, with the speed since the one before
        assert re.search(rf"^stage {row['stage']} step 20: train loss {row['train']:.4f}, val loss "
                         rf"{row['val']:.4f} \| [\d.]+s, [\d.]+ ms/step$", r.stdout, re.M)


def test_one_job_trains_with_every_thread_torch_has(monkeypatch, capsys):
    """--jobs 1: the stage trains in this process, on all the threads it has (side by side, a worker takes one),
    with the overrides given (one evaluation, at the end)."""
    import gpt, progression
    given, done = [], flushed(monkeypatch, progression)
    def train_stage(stage, device, overrides, threads):
        given.append((threads, overrides))
        return dict(stage=stage, added='', params=1, train=1.0, val=1.0, lecture_val='', seconds=0)
    monkeypatch.setattr(progression, 'train_stage', train_stage)
    monkeypatch.setattr(gpt, 'read_text', lambda: None)
    progression.main(['--stages', '1', '--max_iters', '3', '--eval_iters', '2', '--device', 'cpu', '--jobs', '1'])
    assert given == [(0, dict(max_iters=3, eval_iters=2, eval_interval=3))] # (threads 0: all)
    assert 'stage 1 done: val loss' in capsys.readouterr().out and done == [True]


def flushed(monkeypatch, module):
    """[whether each 'stage N done' line is flushed at once] as module prints them (seen live through a pipe)."""
    done, show = [], print
    def spy(*args, **kwargs):
        if ' done: val loss ' in str(args[:1]):
            done.append(bool(kwargs.get('flush')))
        show(*args, **kwargs)
    monkeypatch.setattr(module, 'print', spy, raising=False)
    return done


def test_on_a_cpu_the_stages_train_side_by_side_by_default_one_thread_a_worker(monkeypatch, capsys):
    """No --jobs on a CPU: as many stages at a time as it has cores (at most the stages), each worker on one
    thread (not each on all of them), the largest stage started first."""
    import gpt, progression
    given = []
    def side_by_side(work, jobs):
        given.append((work, jobs))
        yield from (dict(stage=w[0], added='', params=1, train=1.0, val=1.0, lecture_val='', seconds=0) for w in work)
    monkeypatch.setattr(os, 'cpu_count', lambda: 2)
    monkeypatch.setattr(progression, 'train_side_by_side', side_by_side)
    monkeypatch.setattr(gpt, 'read_text', lambda: None)
    done = flushed(monkeypatch, progression)
    progression.main(['--stages', '1,2,3', '--max_iters', '1', '--device', 'cpu'])
    [(work, jobs)] = given
    assert done == [True, True, True]
    assert jobs == 2 and [w[3] for w in work] == [1, 1, 1] and '2 at a time' in capsys.readouterr().out
    assert [w[0] for w in work] == [3, 2, 1] # (the largest first: the cores end together)


@needs_input
def test_stages_trained_side_by_side_print_their_table_in_the_lectures_order(tmp_path, monkeypatch):
    """--jobs 2: stages 6 and 2 start first, 1 when 2 is done, and they end in whatever order, each seen to end
    alone (as stages of other sizes do: nothing more is started once none are left); the table and the JSON
    keep the lecture's order, each row with the losses its stage printed when it finished."""
    import multiprocessing.connection
    wait = multiprocessing.connection.wait
    monkeypatch.setattr(multiprocessing.connection, 'wait', lambda ready, *a, **kw: wait(ready, *a, **kw)[:1])
    out = tmp_path / 'p.json'
    r = run_here(os.path.join('scripts', 'progression.py'), '--stages', '6,2,1', '--max_iters', '4',
                 '--eval_iters', '1', '--device', 'cpu', '--json', str(out), '--jobs', '2')
    assert r.returncode == 0 and 'training stages 1, 2, 6 on cpu, 2 at a time' in r.stdout, r.stderr
    table = [line for line in r.stdout.splitlines() if line.startswith('| ') and line[2].isdigit()]
    rows = json.loads(out.read_text())
    assert [line.split(' | ')[0] for line in table] == ['| 1', '| 2', '| 6'] and [row['stage'] for row in rows] == [1, 2, 6]
    for row, line in zip(rows, table):
        assert re.search(rf"^stage {row['stage']} done: val loss {row['val']:.4f} ", r.stdout, re.M)
        assert f"| {row['train']:.4f} | {row['val']:.4f} |" in line


@needs_input
def test_progression_draws_each_stages_val_loss_as_it_printed_it(tmp_path, monkeypatch):
    """--png: a PNG of 800 x 500, a line a stage through the val losses its evaluations printed, and the
    video's value for the stage marked at its last step."""
    pytest.importorskip('matplotlib')
    import matplotlib.axes
    drawn, plot = [], matplotlib.axes.Axes.plot
    monkeypatch.setattr(matplotlib.axes.Axes, 'plot', lambda ax, *a, **kw: drawn.append(a) or plot(ax, *a, **kw))
    png = tmp_path / 'stages.png'
    r = run_here(os.path.join('scripts', 'progression.py'), '--stages', '1,2', '--max_iters', '20', '--eval_iters',
                 '2', '--device', 'cpu', '--jobs', '1', '--png', str(png))
    assert r.returncode == 0 and f'wrote {png}\n' in r.stdout, r.stderr
    data = png.read_bytes()
    assert data[:8] == b'\x89PNG\r\n\x1a\n' and struct.unpack('>II', data[16:24]) == (800, 500)
    printed = [[(int(s), float(v)) for s, v in re.findall(rf"^stage {stage} step (\d+): .*?val loss ([\d.]+)",
                                                           r.stdout, re.M)] for stage in (1, 2)]
    assert [list(zip(*args)) for args in drawn[0::2]] == printed # each stage's line
    assert drawn[1::2] == [(20, 2.5), (20, 2.4)] # and the video's val loss, at its last step


TINY_TRY = '--n_layer=1 --n_embd=16 --n_head=2 --block_size=8 --eval_iters=1'


@needs_input
def test_cpu_sweep_shows_each_runs_progress_then_the_table():
    r = run_here(os.path.join('scripts', 'cpu_sweep.py'), f'--try={TINY_TRY} --max_iters=6 --eval_interval=3')
    assert r.returncode == 0, r.stderr
    progress = re.findall(r'^  run 1/1, try-1: step (\d+): train loss [\d.]+, val loss ([\d.]+)', r.stdout, re.M)
    assert [step for step, _ in progress] == ['0', '3', '6']
    vals = [float(v) for _, v in progress]
    table = [line for line in r.stdout.splitlines() if line.startswith('| try-')]
    assert len(table) == 1 and f"| {vals[-1]:.4f} | {min(vals):.4f} |" in table[0] # final and best val loss


@pytest.mark.parametrize('script, args, words', [
    ('progression', ['--stages', '0-9'], 'stages are 1 to 7'),
    ('progression', ['--max_iters=-5'], '--max_iters must be at least 1, got -5'),
    ('progression', ['--json=/no/such/folder/p.json'], '--json /no/such/folder/p.json: no such folder'),
    ('cpu_sweep', ['--repeat=0'], '--repeat must be at least 1, got 0'),
    ('addition', ['--n_embd=100', '--n_head=3'], '--n_embd=100 must be a multiple of --n_head=3'),
    ('addition', ['--target=2'], 'at most 1 (0.99: 99%), got 2.0'),
    ('calculator', ['--digits=10'], '--digits must be 1 to 9'),
    ('calculator', ['--lr=0'], '--lr must be above 0, got 0.0'),
    ('calculator', ['--shares', '1', '2'], "--shares takes a share above 0 for each of --ops '+-*/'"),
    ('calculator', ['--tight=1'], '--tight must be at least 0 and below 1, got 1.0'),
    ('calculator', ['--short=1.5'], '--short must be from 0 to 1, got 1.5'),
    ('calculator', ['--other=2'], '--other must be from 0 to 1, got 2.0'),
    ('calculator', ['--small=-1'], '--small must be from 0 to 1, got -1.0'),
    ('bench', ['--warmup=-1'], '--steps must be at least 1, --warmup'),
    ('ex4', ['--max_iters=0'], '--max_iters must be at least 1, got 0'),
])
def test_scripts_reject_bad_values_in_one_line(script, args, words):
    r = run_here(os.path.join('scripts', f'{script}.py'), *args)
    assert r.returncode == 2 and words in r.stderr and r.stderr.count('\n') == 1, r.stderr


@pytest.mark.parametrize('script', ['progression', 'cpu_sweep', 'addition', 'calculator', 'plot_losses',
                                    'sample', 'attention_map', 'evaluate', 'ex3', 'ex4'])
def test_every_script_with_options_answers_a_wrong_one_in_one_line(script, tmp_path):
    r = run_here(os.path.join('scripts', f'{script}.py'), '--corpus=x', '--no_such_option', cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == '', r.stdout
    assert r.stderr.startswith('error: ') and r.stderr.count('\n') == 1, r.stderr
    assert '--no_such_option' in r.stderr and os.listdir(tmp_path) == []


@pytest.mark.parametrize('command', ['gpt.py', 'bigram.py', 'scripts/progression.py', 'scripts/bench.py',
                                     'scripts/sample.py', 'scripts/addition.py', 'scripts/calculator.py',
                                     'scripts/ex3.py --corpus=x', 'scripts/ex4.py'])
@pytest.mark.parametrize('device, words', [
    ('foo', "cannot use device 'foo': Expected one of cpu, cuda"),
    # a CPU build of PyTorch says CUDA is missing; a CUDA build on a machine without one, the driver
    ('cuda:7' if torch.cuda.is_available() else 'cuda', 'cannot use device'),
    ('meta', "cannot use device 'meta'"), # PyTorch takes it, but its tensors hold no numbers
])
def test_a_device_this_machine_lacks_is_a_one_line_error(command, device, words, tmp_path):
    script, *args = command.split()
    r = run_here(script, *args, f'--device={device}', cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith(f'error: {words}') and r.stderr.count('\n') == 1, r.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('args, words', [
    (['--max_iters=2.5'], "--max_iters must be int, got '2.5'"),
    (['--max_iters', '2.5'], "--max_iters must be int, got '2.5'"),
    (['--max_iter=10'], "unknown option '--max_iter=10': did you mean --max_iters?"),
    (['--bogus=1'], "unknown option '--bogus=1': the settings are batch_size, block_size, "),
])
def test_bigram_answers_a_bad_option_in_one_line(args, words, tmp_path):
    r = run_here('bigram.py', *args, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith(f'error: {words}') and r.stderr.count('\n') == 1, r.stderr


@needs_input
def test_bigram_takes_key_value_options_as_gpt_py_does(tmp_path):
    r = run_here('bigram.py', '--max_iters', '10', '--eval_interval', '5', '--eval_iters', '2', '--device=cpu',
                 cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [line.split(':')[0] for line in r.stdout.splitlines() if line.startswith('step ')] == ['step 0', 'step 5']


def test_bigram_help_lists_its_settings():
    r = run_here('bigram.py', '--help')
    assert r.returncode == 0 and '  --max_iters=3000\n' in r.stdout and '  --learning_rate=0.01\n' in r.stdout


def test_a_file_the_scripts_write_is_whole_or_the_one_before(tmp_path, monkeypatch):
    """common.save_atomically, which writes the scripts' files (a sample's --out, a model, a picture):
    stopped in the middle of the writing, the file that was there is as it was."""
    import common
    path = tmp_path / 'more.txt'
    path.write_bytes(b'the earlier sample')
    class StoppedWriting:
        def __init__(self, f):
            self.f = f
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            self.f.close()
        def write(self, data): # a few bytes, then Ctrl-C
            self.f.write(data[:4])
            raise KeyboardInterrupt
    monkeypatch.setattr(common, 'open', lambda *args, **kwargs: StoppedWriting(open(*args, **kwargs)), raising=False)
    with pytest.raises(KeyboardInterrupt):
        common.save_atomically(str(path), b'a new sample, longer than the last')
    assert path.read_bytes() == b'the earlier sample'
