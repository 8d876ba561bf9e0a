"""A setting out of its range stops gpt.py and bigram.py before any work: one line naming the
setting, its value and what it must be, exit code 2, nothing read, downloaded or written."""
import os
import sys

import pytest

import gpt
from conftest import Screen, needs_input, run_here

GPT = [ # one row per class of bad value: what is given, what is said
    # sizes and counts
    (['--batch_size=0'], '--batch_size=0 must be at least 1'),
    (['--block_size=-3'], '--block_size=-3 must be at least 1'),
    (['--n_embd=0'], '--n_embd=0 must be at least 1'),
    (['--n_head=0'], '--n_head=0 must be at least 1'),
    (['--n_layer=-1'], '--n_layer=-1 must be at least 1'),
    (['--eval_interval=0'], '--eval_interval=0 must be at least 1'),
    (['--eval_iters=0'], '--eval_iters=0 must be at least 1'),
    (['--n_embd=30', '--n_head=4'], '--n_embd=30 must be a multiple of n_head=4: each head is n_embd // n_head wide'),
    # steps
    (['--max_iters=-5'], '--max_iters=-5 must be at least 0'),
    (['--warmup_iters=-1'], '--warmup_iters=-1 must be at least 0'),
    # a probability
    (['--dropout=1.5'], '--dropout=1.5 must be a probability below 1: at least 0 and below 1'),
    (['--dropout=1'], '--dropout=1.0 must be a probability below 1: at least 0 and below 1'),
    (['--dropout=-0.1'], '--dropout=-0.1 must be a probability below 1: at least 0 and below 1'),
    # rates and the schedule
    (['--learning_rate=0'], '--learning_rate=0.0 must be a finite number above 0'),
    (['--learning_rate=-1'], '--learning_rate=-1.0 must be a finite number above 0'),
    (['--learning_rate=1e999'], '--learning_rate=inf must be a finite number above 0'),
    (['--lr_decay=True', '--min_lr=1e-3'], '--min_lr=0.001 must be from 0 to learning_rate=0.0003'),
    (['--lr_decay=True', '--min_lr=-1e-5'], '--min_lr=-1e-05 must be from 0 to learning_rate=0.0003'),
    (['--preset=cpu', '--learning_rate=1e-4'], '--min_lr=0.0004 must be from 0 to learning_rate=0.0001'),
    # the random seed
    (['--seed=18446744073709551616'], '--seed=18446744073709551616 must be from -2**63 to 2**64 - 1, as torch.manual_seed takes'),
]


@pytest.mark.parametrize('args, said', GPT, ids=[' '.join(args) for args, _ in GPT])
def test_gpt_refuses_a_bad_setting_in_one_line_before_any_work(args, said, tmp_path):
    # an input_file that is not there: reading it would be another error
    r = run_here('gpt.py', *args, '--input_file=absent.txt', cwd=tmp_path)
    assert (r.returncode, r.stderr, r.stdout) == (2, f'error: {said}\n', '')
    assert os.listdir(tmp_path) == [] # no out/


def config(stdout):
    """{setting: value as printed} from gpt.py's `config:` line: the settings that took effect."""
    line = next(line for line in stdout.splitlines() if line.startswith('config: '))
    return dict(kv.split('=', 1) for kv in line.removeprefix('config: ').split())


SMALL = ['--max_iters=0', '--eval_iters=1', '--n_layer=1', '--block_size=4', '--device=cpu', '--out_dir=']


@needs_input
def test_the_limits_admit_their_edges(tmp_path):
    """0 steps, dropout 0, min_lr equal to the rate, the largest seed: each is a setting that works."""
    r = run_here('gpt.py', *SMALL, '--dropout=0', '--lr_decay=True', '--min_lr=3e-4', '--warmup_iters=0',
                 f'--seed={2**64 - 1}', '--n_embd=8', '--n_head=8', cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert '\nstep 0: train loss ' in r.stdout
    assert {k: config(r.stdout)[k] for k in ('max_iters', 'dropout', 'lr_decay', 'min_lr', 'warmup_iters', 'seed',
                                             'n_head')} == dict(max_iters='0', dropout='0.0', lr_decay='True',
                                                                min_lr='0.0003', warmup_iters='0', seed=str(2**64 - 1),
                                                                n_head='8')


@needs_input
@pytest.mark.parametrize('args, shown', [
    (['--learning_rate=1e-5', '--n_embd=8', '--n_head=2'], dict(learning_rate='1e-05', lr_decay='False', min_lr='3e-05')),
    (['--preset=cpu', '--lr_decay=False', '--learning_rate=1e-4', '--max_iters=0'],
     dict(learning_rate='0.0001', lr_decay='False', min_lr='0.0004')),
    (['--n_embd=15', '--n_head=5'], dict(n_embd='15', n_head='5')),
])
def test_a_range_that_depends_on_another_setting_holds_only_with_it(args, shown, tmp_path):
    """min_lr is the end of lr_decay's schedule: without lr_decay a rate below it is any rate. n_embd need
    only split into n_head heads."""
    r = run_here('gpt.py', *SMALL, *args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert {k: config(r.stdout)[k] for k in shown} == shown


BIGRAM = [
    (['--batch_size=0'], '--batch_size=0 must be at least 1'),
    (['--block_size=0'], '--block_size=0 must be at least 1'),
    (['--eval_interval=0'], '--eval_interval=0 must be at least 1'),
    (['--eval_iters=-2'], '--eval_iters=-2 must be at least 1'),
    (['--max_iters=-1'], '--max_iters=-1 must be at least 0'),
    (['--learning_rate=0'], '--learning_rate=0.0 must be a finite number above 0'),
    (['--learning_rate=nan'], '--learning_rate=nan must be a finite number above 0'),
    (['--learning_rate=inf'], '--learning_rate=inf must be a finite number above 0'),
    (['--batch_size=1', '--max_iters=0', '--learning_rate=0'], '--learning_rate=0.0 must be a finite number above 0'),
]


@pytest.mark.parametrize('args, said', BIGRAM, ids=[' '.join(args) for args, _ in BIGRAM])
def test_bigram_refuses_a_bad_setting_in_one_line_before_any_work(args, said, tmp_path):
    r = run_here('bigram.py', *args, cwd=tmp_path)
    assert (r.returncode, r.stderr, r.stdout) == (2, f'error: {said}\n', '') # no download: it prints first
    assert os.listdir(tmp_path) == []


@needs_input
def test_bigram_refuses_a_block_longer_than_the_val_split(tmp_path):
    r = run_here('bigram.py', '--block_size=111540', cwd=tmp_path)
    assert r.returncode == 2 and r.stderr == 'error: --block_size=111540 must be below 111540, the length of the val split\n'


def test_a_run_of_hours_on_a_cpu_says_so_before_the_data_is_read(capsys, monkeypatch):
    """The lecture's config on a CPU: the estimate and the command that suits a CPU, first thing."""
    monkeypatch.setattr(gpt.torch, 'get_num_threads', lambda: 2)
    gpt.configure(['--device=cpu'])
    note = capsys.readouterr().out.splitlines()[2]
    assert note == ('note: about 21 hours on 2 CPU cores, the first losses in 26 minutes; for a CPU, '
                    'python gpt.py --preset=cpu trains a smaller model in under 3 minutes')
    seen = [] # and at once, where stdout is a file or a pipe (tee, nohup): the print flushes it
    with monkeypatch.context() as m:
        m.setattr(sys, 'stdout', Screen('out', seen))
        gpt.configure(['--device=cpu'])
    assert ('out', None) in seen[[text for _, text in seen].index(note):]
    gpt.configure(['--device=cpu', '--n_layer=3']) # half the work: half the time
    assert 'note: about 10 hours on 2 CPU cores, the first losses in 13 minutes;' in capsys.readouterr().out
    for argv in (['--preset=cpu'], ['--device=cpu', '--max_iters=100', '--eval_iters=20']):
        gpt.configure(argv)
        assert 'note:' not in capsys.readouterr().out, argv
