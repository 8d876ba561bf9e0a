"""Exercise EX3: the corpus is rewritten in Tiny Shakespeare's characters, and the runs are gpt.py's."""
import os
import random
import re
import signal
import sys

import pytest
import torch

import gpt
from conftest import INPUT, ROOT, needs_input, run_here, signal_at_call

sys.path.insert(0, os.path.join(ROOT, 'scripts'))
import ex3  # noqa: E402


def test_to_vocabulary_keeps_only_the_given_characters():
    chars = sorted(set("abcdefghijklmnopqrstuvwxyzC '-\n"))
    text = 'Caf\u00e9\t\u201cna\u00efve\u201d\u2014it\u2019s   {x}\n' # accents, a tab, curly quotes, a dash
    assert ex3.to_vocabulary(text, chars) == "Cafe naive-it's x\n"


def test_a_run_decays_to_a_tenth_of_its_rate_and_puts_gpts_settings_back(tiny, monkeypatch):
    """ex3.train is gpt.py's loop with the schedule stretched to its own steps: a finetuning run at
    lr decays towards lr / 10, as the preset's 4e-3 does to 4e-4. gpt's settings are as before after."""
    for key, value in dict(lr_decay=True, warmup_iters=2, eval_iters=1, use_fused_adamw=False).items():
        monkeypatch.setattr(gpt, key, value)
    before = {k: getattr(gpt, k) for k in ('max_iters', 'learning_rate', 'min_lr')}
    rates, get_lr = [], gpt.get_lr
    monkeypatch.setattr(gpt, 'get_lr', lambda step: rates.append(get_lr(step)) or rates[-1])
    data = torch.randint(65, (500,))
    torch.manual_seed(0)
    model = gpt.GPTLanguageModel(65)
    ex3.train(model, {'train': data, 'val': data}, 10, 'finetune', lr=1e-3)
    assert {k: getattr(gpt, k) for k in before} == before
    for key, value in dict(max_iters=10, learning_rate=1e-3, min_lr=1e-4).items():
        monkeypatch.setattr(gpt, key, value)
    assert rates == [get_lr(step) for step in range(10)] and rates[-1] < 2e-4


def corpus(path, words=3000):
    """Random words in Tiny Shakespeare's lowercase letters: a corpus unlike Tiny Shakespeare."""
    rng = random.Random(0)
    path.write_text(' '.join(''.join(rng.choice('etaoinshrdlu') for _ in range(rng.randint(1, 8)))
                             for _ in range(words)))
    return str(path)


@needs_input
def test_ex3_trains_as_gpt_py_does_and_prints_its_table(tmp_path):
    r = run_here('scripts/ex3.py', f'--corpus={corpus(tmp_path / "big.txt")}', '--pretrain_iters=4',
                 '--eval_iters=4', '--warmup_iters=1', '--batch_size=4', cwd=tmp_path) # F: half of P
    assert r.returncode == 0, r.stderr
    rows = re.findall(r'^\| (.+?) \| ([\d,]+) \| ([\d,]+) \| ([\d.]+) \| \d+ \|$', r.stdout, re.M)
    assert [row[:3] for row in rows] == [('scratch, 2 steps', '0', '2'), ('scratch, 6 steps', '0', '6'),
                                         ('pretrain, 4 steps (no finetuning)', '4', '0'),
                                         ('pretrain 4, then finetune 2 steps at lr 0.001', '4', '2'),
                                         ('pretrain 4, then finetune 2 steps at lr 0.004', '4', '2')]
    shakespeare = re.findall(r'^run 3/5, pretrain step 4: .*shakespeare val loss ([\d.]+)', r.stdout, re.M)
    assert shakespeare == [rows[2][3]], r.stdout # (the pretrained model on Tiny Shakespeare, not on its corpus)
    labels = list(dict.fromkeys(re.findall(r'^(run .*?) step \d+: ', r.stdout, re.M))) # each run's, in order
    assert labels == ['run 1/5, scratch-2', 'run 2/5, scratch-6', 'run 3/5, pretrain',
                      'run 4/5, finetune lr 0.001', 'run 5/5, finetune lr 0.004']
    # the scratch runs are `python gpt.py --preset=cpu` with their step counts
    for _, _, steps, val in rows[:2]:
        g = run_here('gpt.py', '--preset=cpu', f'--max_iters={steps}', '--eval_iters=4', '--warmup_iters=1',
                     '--batch_size=4', '--device=cpu', '--out_dir=')
        assert re.findall(r'val loss ([\d.]+)', g.stdout)[-1] == val
    # the finetuning starts from the pretrained weights, not from scratch
    assert rows[3][3] != rows[0][3]
    assert os.listdir(tmp_path) == ['big.txt']


@pytest.mark.parametrize('args, words, code', [
    (['--corpus=missing.txt'], 'error: No such file or directory: missing.txt', 1),
    (['--corpus='], 'error: --corpus is empty: give the larger text to pretrain on', 2),
    (['--corpus=small.txt'], 'small.txt holds only 5 characters', 1),
    (['--corpus=small.txt', '--finetune_iters=0'], 'must be at least 1, got 2200 and 0', 2),
    (['--corpus=small.txt', '--preset=', '--finetune_iters=0'], 'got 5000 and 0', 2), # the lecture's config
    (['--corpus=small.txt', '--max_iters=x'], "--max_iters must be int, got 'x'", 2),
    (['--corpus=small.txt', '--input_file=small.txt'], 'give your larger text as --corpus', 2),
    (['--corpus=small.txt', '--finetune_lr=0'], '--finetune_lr must be > 0', 2),
    (['--pretrain_iters=5'], 'the following arguments are required: --corpus', 2),
])
def test_ex3_bad_options_are_one_line_errors(args, words, code, tmp_path):
    (tmp_path / 'small.txt').write_text('hello')
    if code == 1 and not os.path.exists(INPUT):
        pytest.skip('these read input.txt first')
    r = run_here('scripts/ex3.py', *args, cwd=tmp_path)
    assert r.returncode == code and r.stderr.startswith('error: ') and r.stderr.count('\n') == 1, r.stderr
    assert words in r.stderr


@needs_input
def test_ctrl_c_prints_the_table_of_the_runs_that_finished(tmp_path, monkeypatch):
    # the scratch runs take 2 + 6 steps; Ctrl-C after pretraining's second
    with signal_at_call(monkeypatch, torch.optim.AdamW, 'step', 10, signal.SIGINT) as calls:
        r = run_here('scripts/ex3.py', f'--corpus={corpus(tmp_path / "big.txt")}', '--pretrain_iters=4',
                     '--eval_iters=4', '--warmup_iters=1', '--batch_size=4', cwd=tmp_path)
    assert r.returncode == 130 and r.stderr == '', r.stderr
    assert 'Ctrl-C: stopped; the table has the 2 of 5 runs that finished' in r.stdout
    rows = re.findall(r'^\| (.+?) \| ([\d,]+) \| ([\d,]+) \| ([\d.]+) \| \d+ \|$', r.stdout, re.M)
    assert [row[0] for row in rows] == ['scratch, 2 steps', 'scratch, 6 steps']
    assert 'minus its train loss' not in r.stdout and len(calls) == 10
