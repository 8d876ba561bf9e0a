"""The lecture's numbers: what its scripts print, ours print too (same seed, same machine kind: a CPU)."""
import os

import torch

import gpt
from conftest import ROOT, losses, needs_input, run_here


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
                )
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


SMALL = ['--n_layer=2', '--n_head=4', '--n_embd=64', '--block_size=32', '--batch_size=16',
         '--eval_interval=50', '--eval_iters=20', '--out_dir=', '--device=cpu']


@needs_input
def test_gpt_under_small_overrides_prints_the_same_losses_as_before_the_refactor():
    """What gpt.py printed before it was cut down to read like the lecture (commit c590dbd, PyTorch
    2.13 on a CPU): the same numbers now, with the lecture's per-head path and dropout 0.2, and with
    the batched heads (EX1), another dropout and the CPU preset's lr schedule."""
    r = run_here('gpt.py', *SMALL, '--max_iters=100') # the first 100 of those 200 steps
    assert r.returncode == 0, r.stderr
    assert losses(r.stdout) == {0: (4.2004, 4.1971), 50: (3.3717, 3.4098), 100: (3.0177, 3.0141)}
    r = run_here('gpt.py', *SMALL, '--max_iters=200', '--fast_attention=True', '--dropout=0.1', '--lr_decay=True')
    assert r.returncode == 0, r.stderr
    assert losses(r.stdout) == {0: (4.2004, 4.1971), 50: (3.7776, 3.7961), 100: (3.3474, 3.3539),
                                150: (3.0152, 3.0248), 200: (2.9470, 2.9701)}
