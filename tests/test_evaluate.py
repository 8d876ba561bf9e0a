"""scripts/evaluate.py: every character of a split counted once, as the loss gpt.py prints."""
import gzip
import math
import os
import random
import re
import sys
import time

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import common
import gpt
from conftest import ROOT, Screen, run_here

sys.path.insert(0, os.path.join(ROOT, 'scripts'))
import evaluate  # noqa: E402

SCRIPT = os.path.join('scripts', 'evaluate.py')


@pytest.mark.parametrize('n, block_size, stride', [(101, 8, 8), (101, 8, 4), (100, 8, 3), (20, 8, 1),
                                                   (9, 8, 4)]) # 9: one window, all of it
def test_windows_score_every_target_once(n, block_size, stride):
    scored = []
    for start, m in evaluate.windows(n, block_size, stride):
        assert start + block_size + 1 <= n and 1 <= m <= block_size
        scored += range(start + block_size - m + 1, start + block_size + 1) # the window's last m targets
    assert scored == list(range(1, n)) # each of data[1:], once, in order


class Bigram(nn.Module):
    """Logits from the last character alone: its loss over a text needs no windows to compute."""

    def __init__(self, vocab_size):
        super().__init__()
        self.table = nn.Embedding(vocab_size, vocab_size)

    def forward(self, idx):
        return self.table(idx), None


@pytest.mark.parametrize('stride, n', [(8, 101), (4, 101), (3, 100), (1, 100)])
def test_every_character_counts_once_in_the_loss(stride, n):
    torch.manual_seed(0)
    model, data = Bigram(7), torch.randint(7, (n,))
    expected = F.cross_entropy(model.table(data[:-1]), data[1:]).item()
    assert evaluate.exact_loss(model, data, 8, stride, batch_size=3) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize('block_size', [16, 15])
def test_windows_side_by_side_are_batches_as_gpt_py_draws_them(tiny, monkeypatch, block_size):
    """Each character after the 1 to block_size before it in its window: gpt.py's loss, over
    windows that tile the text instead of random ones (an odd block_size too)."""
    monkeypatch.setattr(gpt, 'block_size', block_size)
    torch.manual_seed(0)
    model, data = gpt.GPTLanguageModel(65).eval(), torch.randint(65, (5 * block_size + 1,))
    x, y = data[:-1].view(5, block_size), data[1:].view(5, block_size)
    _, loss = model(x, y)
    assert evaluate.exact_loss(model, data, block_size, block_size, batch_size=2) == pytest.approx(loss.item(), rel=1e-5)
    # overlapping by half a block: the same characters, with more before them; not the same loss
    assert evaluate.exact_loss(model, data, block_size, 8) != pytest.approx(loss.item(), rel=1e-5)


@pytest.fixture
def run_of_my_own(tiny, tmp_path, monkeypatch):
    """A folder with a best.pt of an untrained model of TINY's shape, trained on a text of its own."""
    random.seed(0)
    text = ''.join(random.choice('abcde fgh\n') for _ in range(3000))
    (tmp_path / 'my.txt').write_text(text)
    monkeypatch.setattr(gpt, 'input_file', str(tmp_path / 'my.txt')) # as gpt.py --input_file saves it
    chars = sorted(set(text))
    torch.manual_seed(0)
    model = gpt.GPTLanguageModel(len(chars))
    torch.save({'model': model.state_dict(), 'chars': chars, 'config': {k: getattr(gpt, k) for k in gpt.config_keys}},
               tmp_path / 'best.pt')
    return tmp_path, model.eval(), text, chars


def table(stdout):
    return {name: float(loss) for name, loss in re.findall(r'^\| ([^|]+) \| ([\d.]+) \|', stdout, re.M)}


def test_the_script_prints_the_models_loss_beside_the_compressors(run_of_my_own):
    folder, model, text, chars = run_of_my_own
    r = run_here(SCRIPT, f'--ckpt={folder}', '--device=cpu')
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f'{folder / "best.pt"}: 0.03M parameters, block_size 16, on every character '
                               'of the val split (300)\n')
    encode, _ = common.codec(chars)
    val = torch.tensor(encode(common.split(text)[1]))
    rows = table(r.stdout)
    assert rows['the model, after 1 to 16 characters (as gpt.py counts)'] == \
        round(evaluate.exact_loss(model, val, 16, 16), 4)
    assert rows['the model, after 9 to 16 characters'] == round(evaluate.exact_loss(model, val, 16, 8), 4)
    assert rows['a uniform guess over its 10 characters'] == round(math.log(10), 4)
    assert list(rows) == ['the model, after 1 to 16 characters (as gpt.py counts)', 'the model, after 9 to 16 '
                          'characters', 'a uniform guess over its 10 characters'] + [ # the README's order
        f'{name} -9, {what}' for what in ('the split alone', 'after the train split') for name in ('gzip', 'bzip2', 'xz')]
    train_bytes, val_bytes = (split.encode() for split in common.split(text))
    gzipped = len(gzip.compress(val_bytes, 9)) # bytes, for 300 characters
    assert rows['gzip -9, the split alone'] == round(gzipped * 8 / 300 * math.log(2), 4) # in nats
    after = len(gzip.compress(train_bytes + val_bytes, 9)) - len(gzip.compress(train_bytes, 9)) # what val adds
    assert rows['gzip -9, after the train split'] == round(after * 8 / 300 * math.log(2), 4)
    for name, loss, bits, perplexity in re.findall(r'^\| ([^|]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$', r.stdout, re.M):
        loss = rows[name] # each row's bits and perplexity from its loss in nats, by their definitions
        assert abs(float(bits) - loss / math.log(2)) <= 0.0005 + 0.00005 / math.log(2), name # (loss: 4 places)
        assert abs(float(perplexity) - math.exp(loss)) <= 0.005 + 0.00005 * math.exp(loss), name
    assert len(re.findall(r'^\| [^|]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \|$', r.stdout, re.M)) == len(rows) == 9
    assert run_here(SCRIPT, f'--ckpt={folder}', '--device=cpu', '--split=val').stdout == r.stdout # as given
    r = run_here(SCRIPT, f'--ckpt={folder}', '--device=cpu', '--split=train')
    assert r.returncode == 0 and 'of the train split (2,700)' in r.stdout, r.stderr
    assert len(table(r.stdout)) == 2 + 1 + 3 # no rows "after the train split"


def test_a_text_that_is_not_the_models_is_one_line(run_of_my_own, tmp_path):
    folder, *_ = run_of_my_own
    (tmp_path / 'other.txt').write_text('xyz ' * 500)
    for args, words in [
            ([f'--input_file={tmp_path / "other.txt"}'], f"{tmp_path / 'other.txt'} has characters the model never "
                                                         "saw: 'xyz'"),
            ([f'--input_file={tmp_path / "gone.txt"}'], 'the text the model was trained on, is not there: '
             'give its path with --input_file')]:
        r = run_here(SCRIPT, f'--ckpt={folder}', '--device=cpu', *args)
        assert r.returncode == 1 and r.stderr.startswith('error: ') and r.stderr.count('\n') == 1, r.stderr
        assert words in r.stderr


def test_progress_counts_the_windows_and_the_seconds_by_the_clock(run_of_my_own, monkeypatch):
    """--progress_seconds, with a clock that ticks a second at each reading: a line per batch of 3 windows, up
    to (not at) each pass's count; its seconds since the start rise; its ms per window is the pass's time so
    far over its windows; the last line's seconds are the two passes' whole time, over len(val) - 1 characters."""
    folder, model, text, chars = run_of_my_own
    ticks = iter(range(10**6))
    monkeypatch.setattr(time, 'time', lambda: 1e9 + next(ticks))
    start = time.time()
    r = run_here(SCRIPT, f'--ckpt={folder}', '--device=cpu', '--batch_size=3', '--progress_seconds=0.5')
    end = time.time()
    assert r.returncode == 0, r.stderr
    val = common.split(text)[1]
    lines = re.findall(r'^(side by side|overlapping): window (\d+) of (\d+) \| ([\d.]+)s, ([\d.]+) ms/window, .+ left$',
                       r.stderr, re.M)
    elapsed = [float(s) for *_, s, _ in lines]
    assert len(lines) == r.stderr.count('\n') and elapsed == sorted(set(elapsed)), r.stderr
    for label, stride in [('side by side', 16), ('overlapping', 8)]:
        total = len(evaluate.windows(len(val), 16, stride))
        mine = [line for line in lines if line[0] == label]
        assert [(int(done), int(of)) for _, done, of, *_ in mine] == [(d, total) for d in range(3, total, 3)]
        for _, done, _, so_far, ms in mine: # a pass's own seconds: whole ticks, at least two, at most all so far
            ticks = float(ms) * int(done) / 1000
            assert 1.5 <= ticks <= float(so_far) + 0.05 and abs(ticks - round(ticks)) <= 0.05 * int(done) / 1000
        for (_, d1, _, s1, ms1), (_, d2, _, s2, ms2) in zip(mine, mine[1:]): # the same pass's start, two lines
            assert round(float(ms2) * int(d2) / 1000 - float(ms1) * int(d1) / 1000) == round(float(s2) - float(s1))
        assert re.findall(rf'^{label}: .* ms/window, (.+) left$', r.stderr, re.M) == [ # the rest at that speed
            common.duration((total - int(done)) * float(ms) / 1000) for _, done, _, _, ms in mine]
    seconds = float(re.search(rf"^([\d.]+) s for the model's two passes over {len(val) - 1:,} characters: ",
                              r.stdout, re.M)[1])
    assert elapsed[-1] <= seconds <= end - start
    said = ' '.join(run_here(SCRIPT, '--help').stdout.split())
    assert 'windows of block_size characters per forward pass (default: 16)' in said
    assert 'a progress line on stderr at least this often (0: none; default: 10.0)' in said


@pytest.mark.parametrize('n', [10, 15])
def test_a_split_shorter_than_a_window_is_one_line(tiny, tmp_path, monkeypatch, n):
    """block_size 15 and a val split of 10 or 15 characters: one line, naming the window of block_size + 1."""
    monkeypatch.setattr(gpt, 'block_size', 15)
    (tmp_path / 'short.txt').write_text('abcdefgh\n ' * n)
    monkeypatch.setattr(gpt, 'input_file', str(tmp_path / 'short.txt'))
    torch.save({'model': gpt.GPTLanguageModel(10).state_dict(), 'chars': sorted(set('abcdefgh\n ')),
                'config': {k: getattr(gpt, k) for k in gpt.config_keys}}, tmp_path / 'best.pt')
    r = run_here(SCRIPT, f'--ckpt={tmp_path}', '--device=cpu')
    assert r.returncode == 1 and r.stderr.endswith(f"error: the val split has {n} characters; the model reads windows "
                                                   "of 16\n"), r.stderr


def test_the_first_line_is_on_the_screen_before_the_passes_start(run_of_my_own, monkeypatch):
    """Which model and split, written and flushed before the minutes of the two passes (and their progress)."""
    folder, *_ = run_of_my_own
    seen = []
    monkeypatch.setattr(sys, 'stdout', Screen('out', seen))
    monkeypatch.setattr(sys, 'stderr', Screen('err', seen))
    evaluate.main([f'--ckpt={folder}', '--device=cpu', '--batch_size=2', '--progress_seconds=1e-9'])
    monkeypatch.undo()
    first = next(i for i, (_, text) in enumerate(seen) if 'on every character of the val split' in (text or ''))
    progress = next(i for i, (name, _) in enumerate(seen) if name == 'err')
    assert ('out', None) in seen[first:progress], seen[:progress + 1] # (None: a flush)


@pytest.mark.parametrize('block_size', [1, 3, 10])
def test_the_overlapping_pass_names_the_context_it_gives(tiny, tmp_path, monkeypatch, block_size):
    """Half a block apart (at least 1): after block_size - half + 1 to block_size characters, for small and
    for even-but-not-by-4 block sizes too."""
    monkeypatch.setattr(gpt, 'block_size', block_size)
    random.seed(1)
    (tmp_path / 'my.txt').write_text(''.join(random.choice('abcd \n') for _ in range(600)))
    monkeypatch.setattr(gpt, 'input_file', str(tmp_path / 'my.txt'))
    torch.save({'model': gpt.GPTLanguageModel(6).state_dict(), 'chars': sorted(set('abcd \n')),
                'config': {k: getattr(gpt, k) for k in gpt.config_keys}}, tmp_path / 'best.pt')
    r = run_here(SCRIPT, f'--ckpt={tmp_path}', '--device=cpu')
    half = max(1, block_size // 2)
    assert r.returncode == 0 and list(table(r.stdout))[:2] == [
        f'the model, after 1 to {block_size} characters (as gpt.py counts)',
        f'the model, after {block_size - half + 1} to {block_size} characters'], r.stdout


def test_progress_lines_come_every_progress_seconds_and_never_with_0(run_of_my_own, monkeypatch):
    """A clock ticking a second a reading: with --progress_seconds=3.5, lines at least 3.5 s apart, and some;
    with 0, none; a negative value is refused in one line."""
    folder, *_ = run_of_my_own
    ticks = iter(range(10**6))
    monkeypatch.setattr(time, 'time', lambda: 1e9 + next(ticks))
    r = run_here(SCRIPT, f'--ckpt={folder}', '--device=cpu', '--batch_size=1', '--progress_seconds=3.5')
    seconds = [float(s) for s in re.findall(r'^side by side: window \d+ of \d+ \| ([\d.]+)s', r.stderr, re.M)]
    assert r.returncode == 0 and len(seconds) > 3 and all(b - a >= 3.5 for a, b in zip(seconds, seconds[1:])), r.stderr
    r = run_here(SCRIPT, f'--ckpt={folder}', '--device=cpu', '--batch_size=1', '--progress_seconds=0')
    assert r.returncode == 0 and r.stderr == '', r.stderr
    r = run_here(SCRIPT, f'--ckpt={folder}', '--device=cpu', '--progress_seconds=-0.5')
    assert r.returncode == 2 and r.stderr == 'error: --progress_seconds must be >= 0, got -0.5 (see --help)\n'


def test_bzip2_runs_at_the_level_its_row_names():
    """On a text of 1.2 MB (Tiny Shakespeare's size), bzip2 -9 as named: its blocks are 900 kB, 800 kB at -8.
    (gzip's -8 and -9, and xz's, give the same sizes at this size: only a header byte tells them apart.)"""
    import bz2
    random.seed(0)
    words = [''.join(random.choice('abcdefghij') for _ in range(random.randint(1, 8))) for _ in range(2000)]
    data = ' '.join(random.choice(words) for _ in range(200_000)).encode()[:1_200_000]
    ours = evaluate.COMPRESSORS['bzip2 -9'](data)
    assert ours == bz2.compress(data, 9) and len(ours) != len(bz2.compress(data, 8))
