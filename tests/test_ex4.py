"""Exercise EX4: each feature from a paper changes the model as it says, and the script runs."""
import math
import os
import re
import signal
import sys

import torch
import torch.nn as nn

import gpt
from conftest import ROOT, needs_input, run_here, signal_at_call

sys.path.insert(0, os.path.join(ROOT, 'scripts'))
import ex4  # noqa: E402


def trained(model, steps=3):
    """A few AdamW steps (with weight decay) on random tokens."""
    optimizer = torch.optim.AdamW(model.parameters())
    data = torch.randint(65, (500,))
    for _ in range(steps):
        logits, loss = model(*gpt.get_batch(data))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return model


def test_gelu_replaces_every_relu(tiny):
    model = gpt.GPTLanguageModel(65)
    ex4.gelu(model)
    assert not any(isinstance(m, nn.ReLU) for m in model.modules())
    assert sum(isinstance(m, nn.GELU) for m in model.modules()) == gpt.n_layer


def test_tied_shares_one_matrix_that_stays_shared(tiny):
    model = gpt.GPTLanguageModel(65)
    before = sum(p.numel() for p in model.parameters())
    ex4.tied(model)
    assert sum(p.numel() for p in model.parameters()) == before - 65 * gpt.n_embd
    trained(model)
    assert model.lm_head.weight is model.token_embedding_table.weight


def test_residual_init_scales_both_projections_of_every_block(tiny):
    torch.manual_seed(0)
    plain = gpt.GPTLanguageModel(65)
    torch.manual_seed(0)
    scaled = gpt.GPTLanguageModel(65)
    ex4.residual_init(scaled)
    factor = 1 / math.sqrt(2 * gpt.n_layer)
    for a, b in zip(plain.blocks, scaled.blocks):
        torch.testing.assert_close(b.sa.proj.weight, a.sa.proj.weight * factor)
        torch.testing.assert_close(b.ffwd.net[2].weight, a.ffwd.net[2].weight * factor)
        torch.testing.assert_close(b.sa.heads[0].key.weight, a.sa.heads[0].key.weight) # the rest as it was


def test_nope_has_no_position_information_even_after_training(tiny):
    model = gpt.GPTLanguageModel(65)
    ex4.nope(model)
    trained(model)
    assert not model.position_embedding_table.weight.any()


def test_rotate_turns_each_pair_by_its_position_keeping_lengths():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 10, 8)
    turned = ex4.rotate(x)
    torch.testing.assert_close(turned[:, :, 0], x[:, :, 0]) # position 0: angle 0
    torch.testing.assert_close(turned.norm(dim=-1), x.norm(dim=-1))
    for i in range(4): # pair i turns by 10000**(-2i/8) radians per position: pair 0 by 1
        angle = torch.arange(10.0) * 10000 ** (-i / 4)
        pair = torch.complex(x[..., 2 * i], x[..., 2 * i + 1]) * torch.exp(1j * angle)
        torch.testing.assert_close(turned[..., 2 * i], pair.real)
        torch.testing.assert_close(turned[..., 2 * i + 1], pair.imag)


def test_rotate_makes_a_query_key_score_depend_only_on_their_distance():
    torch.manual_seed(0)
    q, k = torch.randn(2, 8)
    T = 12
    scores = ex4.rotate(q.expand(1, 1, T, 8)) @ ex4.rotate(k.expand(1, 1, T, 8)).transpose(-2, -1) # (1,1,T,T)
    scores = scores[0, 0]
    for shift in range(1, T):
        torch.testing.assert_close(scores[shift:, shift:], scores[:-shift, :-shift])
    assert not torch.allclose(scores[0, 1], scores[0, 2]) # but the distance does count


def test_rope_is_the_batched_attention_plus_rotation(tiny, monkeypatch):
    monkeypatch.setattr(gpt, 'dropout', 0.2) # in eval mode, off in all three computations
    torch.manual_seed(0)
    model = gpt.GPTLanguageModel(65).eval()
    plain = gpt.BatchedMultiHeadAttention(gpt.n_head, gpt.n_embd // gpt.n_head).eval()
    ex4.rope(model)
    sa = model.blocks[0].sa
    plain.load_state_dict(sa.state_dict()) # the same parameters
    x = torch.randn(3, gpt.block_size, gpt.n_embd)
    # the lecture's Head, step by step, with its query and key turned
    heads = []
    for h in sa.heads:
        q, k = (ex4.rotate(m(x)[:, None])[:, 0] for m in (h.query, h.key)) # (B,T,hs)
        wei = (q @ k.transpose(-2, -1) * k.shape[-1]**-0.5).masked_fill(h.tril == 0, float('-inf'))
        heads.append(wei.softmax(dim=-1) @ h.value(x))
    torch.testing.assert_close(sa(x), sa.proj(torch.cat(heads, dim=-1)))
    assert not torch.allclose(sa(x), plain(x), atol=1e-4)
    monkeypatch.setattr(ex4, 'rotate', lambda t: t)
    torch.testing.assert_close(sa(x), plain(x))
    trained(model.train())
    assert not model.position_embedding_table.weight.any() # position comes from rotation alone


def test_swiglu_has_the_feedforwards_weights(tiny):
    weights = lambda ffwd: sum(m.weight.numel() for m in ffwd.modules() if isinstance(m, nn.Linear))
    assert weights(ex4.SwiGLU(96)) == weights(gpt.FeedForward(96)) # the CPU preset's width
    model = gpt.GPTLanguageModel(65)
    ex4.swiglu(model)
    assert all(isinstance(block.ffwd, ex4.SwiGLU) for block in model.blocks)
    x = torch.randn(2, 5, gpt.n_embd)
    ffwd = model.blocks[0].ffwd
    torch.testing.assert_close(ffwd(x), ffwd.proj(nn.functional.silu(ffwd.w(x)) * ffwd.v(x)))
    trained(model)


def test_no_feature_changes_the_batches_drawn_after_it(tiny):
    """So every feature trains on the baseline's batches: a run differs from it by the model alone."""
    torch.manual_seed(0)
    gpt.GPTLanguageModel(65)
    expected = torch.get_rng_state()
    for name, (_, change) in ex4.FEATURES.items():
        torch.manual_seed(0)
        change(gpt.GPTLanguageModel(65))
        assert torch.equal(torch.get_rng_state(), expected), name


@needs_input
def test_the_script_compares_features_with_the_baseline(monkeypatch):
    monkeypatch.setitem(gpt.PRESETS['cpu'], 'eval_iters', 4) # not the preset's 40 batches an evaluation
    r = run_here(os.path.join('scripts', 'ex4.py'), '--features', 'baseline', 'nope', '--seeds', '1',
                 '--max_iters', '4')
    assert r.returncode == 0, r.stderr
    assert re.search(r'^run 2/2, nope seed 1 step 0: train loss [\d.]+, val loss [\d.]+ \| \d+s$', r.stdout, re.M)
    assert re.search(r'^run 2/2, nope seed 1 step 4: train loss [\d.]+, val loss [\d.]+ \| \d+s, [\d.]+ ms/step$',
                     r.stdout, re.M)
    base = re.search(r'^\| baseline \| .* \| 353,537 \| ([\d.]+) \| \1 \|  \| \d+ \|$', r.stdout, re.M)
    nope = re.search(r'^\| nope \| .* \| 347,393 \| [\d.]+ \| ([\d.]+) \| ([+-][\d.]+) \| \d+ \|$', r.stdout, re.M)
    assert base and nope, r.stdout
    assert float(nope[2]) == round(float(nope[1]) - float(base[1]), 4), r.stdout # (+: worse than the baseline)


def test_a_seed_torch_cannot_take_is_one_line():
    r = run_here(os.path.join('scripts', 'ex4.py'), '--seeds', '1', str(2**64))
    assert r.returncode == 2 and r.stderr == (f"error: --seeds must be from -2**63 to 2**64 - 1, got {2**64} "
                                              "(see --help)\n")


def test_the_script_rejects_an_unknown_feature_in_one_line():
    r = run_here(os.path.join('scripts', 'ex4.py'), '--features', 'relu')
    assert r.returncode == 2 and r.stderr.startswith("error: argument --features: invalid choice: 'relu'")
    assert r.stderr.count('\n') == 1


@needs_input
def test_ctrl_c_prints_the_table_of_the_features_that_finished(monkeypatch):
    monkeypatch.setitem(gpt.PRESETS['cpu'], 'eval_iters', 4)
    # baseline's 4 steps, then Ctrl-C after nope's second
    with signal_at_call(monkeypatch, torch.optim.AdamW, 'step', 6, signal.SIGINT) as calls:
        r = run_here(os.path.join('scripts', 'ex4.py'), '--features', 'baseline', 'nope', '--seeds', '1',
                     '--max_iters', '4')
    assert r.returncode == 130 and r.stderr == '', r.stderr
    assert 'Ctrl-C: stopped; the table has the 1 of 2 features whose runs all finished' in r.stdout
    val = re.findall(r'^run 1/2, baseline seed 1 step 4: train loss [\d.]+, val loss ([\d.]+)', r.stdout, re.M)
    assert re.search(rf'^\| baseline \| .* \| 353,537 \| {val[0]} \| {val[0]} \|  \| \d+ \|$', r.stdout, re.M)
    assert '| nope |' not in r.stdout and len(calls) == 6
