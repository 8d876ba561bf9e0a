"""The lecture's numbers: what its scripts print, ours print too (same seed, same machine kind: a CPU)."""
import os

import pytest
import torch

import gpt
from conftest import ROOT, losses, needs_input, run_here

pytestmark = pytest.mark.trains


@needs_input
def test_bigram_prints_the_lectures_exact_losses():
    # what the lecture's bigram.py prints on a CPU (same init, batches and steps): its loop
    # evaluates every 300 steps, from step 0 to step 2700
    r = run_here('bigram.py', '--device=cpu') # a GPU draws other random numbers
    assert r.returncode == 0, r.stderr
    found = losses(r.stdout)
    assert sorted(found) == list(range(0, 3000, 300))
    assert found[0] == (4.7305, 4.7241) and found[2700] == (2.4738, 2.4911)
    sample = r.stdout.split('step 2700:')[1].split('\n', 1)[1]
    assert len(sample) == 1 + 500 + 1 # the context's token (a newline), 500 new characters, print's newline


def lectures_loop(monkeypatch, settings, lr=None):
    """The lecture's script as the video writes it: seed, data, model, AdamW, and a loop that
    evaluates every eval_interval steps (and at max_iters - 1) with a .item() per batch, each batch
    stacked from a list of slices. lr(step), if given, sets the rate before each step, as gpt.py's
    lr_decay does. Returns {step: (train, val)} as gpt.py prints them, to 4 decimals."""
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
    printed = {}
    for step in range(settings['max_iters']):
        if step % settings['eval_interval'] == 0 or step == settings['max_iters'] - 1:
            out = estimate_loss()
            printed[step] = (float(f"{out['train']:.4f}"), float(f"{out['val']:.4f}"))
        xb, yb = get_batch('train')
        logits, loss = model(xb, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if lr:
            for group in optimizer.param_groups:
                group['lr'] = lr(step)
        optimizer.step()
    return printed


TINY = dict(batch_size=4, block_size=16, max_iters=40, eval_interval=10, learning_rate=1e-3, eval_iters=3,
            n_embd=16, n_head=2, n_layer=2, dropout=0.2)


def gpts_losses(settings, *more):
    r = run_here('gpt.py', *[f'--{k}={v}' for k, v in settings.items()], '--device=cpu', '--out_dir=', *more)
    assert r.returncode == 0, r.stderr
    return losses(r.stdout)


@needs_input
def test_gpt_prints_the_losses_of_the_lectures_loop(monkeypatch):
    """gpt.py prints the lecture's losses at every evaluation the two share: the same init, batches,
    dropout masks and updates, on this CPU, whichever it is."""
    printed, lecture = gpts_losses(TINY), lectures_loop(monkeypatch, TINY)
    assert sorted(lecture) == [0, 10, 20, 30, 39] and sorted(printed) == [0, 10, 20, 30, 40]
    for step in (0, 10, 20, 30):
        assert printed[step] == lecture[step], step
    assert len(set(lecture.values())) == 5 # it trained: no two evaluations alike


@needs_input
def test_the_lr_schedule_is_the_lectures_loop_with_the_rate_set_before_each_step(monkeypatch):
    """lr_decay (the CPU preset's schedule) is the lecture's loop but for the rate each step, and the
    rate is get_lr's (tests/test_model.py checks its values): warmup, then the cosine, to min_lr."""
    settings = dict(TINY, learning_rate=1e-2, min_lr=1e-3, warmup_iters=10, lr_decay=True)
    printed = gpts_losses(settings)
    lecture = lectures_loop(monkeypatch, settings, lr=gpt.get_lr) # get_lr reads the settings from gpt
    for step in (0, 10, 20, 30):
        assert printed[step] == lecture[step], step
    assert lectures_loop(monkeypatch, settings)[30] != lecture[30] # the rates made a difference


@needs_input
def test_the_batched_heads_train_as_the_per_head_ones():
    """EX1's batched heads compute what the per-head modules compute, in another order of float32
    sums: without dropout (the two draw their dropout masks differently), either gives the same
    losses within 0.003. Measured over these 50 steps on seeds 1337, 1 and 2 with ATEN_CPU_CAPABILITY
    avx512, avx2 and default, they differed by 0.0005 at most, while each evaluation here moved the
    val loss by 0.3 or more."""
    small = dict(n_layer=2, n_head=4, n_embd=64, block_size=32, batch_size=16, eval_interval=25, eval_iters=10,
                 max_iters=50, learning_rate=1e-3, dropout=0.0)
    per_head, batched = (gpts_losses(small, f'--fast_attention={b}') for b in (False, True))
    assert sorted(per_head) == sorted(batched) == [0, 25, 50]
    for step in per_head:
        assert max(abs(a - b) for a, b in zip(per_head[step], batched[step])) <= 0.003, step
    assert per_head[50][1] < per_head[25][1] - 0.2 < per_head[0][1] - 0.7 # it trained
