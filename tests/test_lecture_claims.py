"""The lecture's claims about attention, each proved on the real classes of gpt.py.

Each test is named for the claim it proves; README.md ("Check your understanding") links here.
Break the mask, the scaling or the buffer in gpt.Head and one of these goes red.
"""
import os
import re
import sys

import pytest
import torch
from torch.nn import functional as F

import bigram
import gpt
from conftest import INPUT, ROOT, needs_input, run_here

sys.path.insert(0, os.path.join(ROOT, 'scripts'))
import attention_walkthrough as walk  # noqa: E402


@pytest.fixture
def head(tiny):
    torch.manual_seed(0)
    return tiny.Head(8).eval()


def encoder(module):
    """Delete the mask, the one line between a decoder and an encoder: a tril of all ones."""
    for m in module.modules():
        if isinstance(m, gpt.Head):
            m.tril.fill_(1.0)
    return module


def attention_weights(head, x):
    """wei of a gpt.Head on x, recomputed from its own key and query layers."""
    T = x.shape[1]
    q, k = head.query(x), head.key(x)
    wei = q @ k.transpose(-2, -1) * k.shape[-1]**-0.5
    wei = wei.masked_fill(head.tril[:T, :T] == 0, float('-inf'))
    return F.softmax(wei, dim=-1)


# Q1: why ones @ B sums the rows of B, and what a normalized tril gives
def test_the_three_aggregation_versions_agree():
    torch.manual_seed(1337)
    x = torch.randn(4, 8, 2)
    xbow = walk.aggregate_loop(x)
    assert torch.allclose(xbow, walk.aggregate_matmul(x), atol=1e-6)
    assert torch.allclose(xbow, walk.aggregate_softmax(x), atol=1e-6)
    b = torch.randn(3, 2)
    assert torch.allclose(torch.ones(3, 3) @ b, b.sum(0).expand(3, 2))


# Q2: why masked_fill(-inf) + softmax: zeros give the average, other affinities other weights
def test_softmax_weights_become_data_dependent_affinities():
    torch.manual_seed(0)
    x = torch.randn(1, 8, 2)
    affinities = torch.randn(8, 8)
    weighted = walk.aggregate_softmax(x, affinities)
    assert not torch.allclose(weighted, walk.aggregate_matmul(x), atol=1e-3)
    assert torch.allclose(weighted[:, 0], x[:, 0])  # the first token still only hears itself


# Q3 and note 2: attention has no notion of space
def test_without_positions_and_mask_permuting_tokens_permutes_outputs(tiny):
    torch.manual_seed(0)
    block = encoder(tiny.Block(32, 4).eval())
    x = torch.randn(2, 16, 32)  # token embeddings, no position embedding added
    perm = torch.randperm(16)
    assert torch.allclose(block(x)[:, perm], block(x[:, perm]), atol=1e-5)


def test_with_the_mask_order_matters(tiny):
    torch.manual_seed(0)
    block = tiny.Block(32, 4).eval()
    x = torch.randn(2, 16, 32)
    perm = torch.randperm(16)
    assert not torch.allclose(block(x)[:, perm], block(x[:, perm]), atol=1e-3)


# Q6 and note 4: decoder vs encoder is one line, the mask
def test_with_the_mask_a_future_token_never_changes_the_past(head):
    x = torch.randn(2, 16, 32)
    for t in range(15):
        changed = x.clone()
        changed[:, t + 1:] = torch.randn(2, 15 - t, 32)
        assert torch.equal(head(x)[:, :t + 1], head(changed)[:, :t + 1])


def test_removing_the_mask_lets_the_future_change_the_past(head):
    encoder(head)
    x = torch.randn(2, 16, 32)
    changed = x.clone()
    changed[:, -1] = torch.randn(2, 32)
    assert not torch.allclose(head(x)[:, 0], head(changed)[:, 0])


# note 3: batches never talk to each other
def test_examples_in_a_batch_are_independent(tiny):
    torch.manual_seed(0)
    model = tiny.GPTLanguageModel(65).eval()
    idx = torch.randint(65, (4, 16))
    changed = idx.clone()
    changed[1] = torch.randint(65, (16,))
    a, _ = model(idx)
    b, _ = model(changed)
    assert not torch.allclose(a[1], b[1])
    for i in (0, 2, 3):
        assert torch.allclose(a[i], b[i], atol=1e-6)


# Q4 and note 1: wei[b,i,j] is how much token j contributes to token i (a directed graph)
def test_wei_ij_is_the_weight_of_token_j_in_token_is_output(head):
    x = torch.randn(2, 16, 32)
    wei = attention_weights(head, x)
    assert torch.allclose(wei.sum(-1), torch.ones(2, 16))
    past = torch.tril(torch.ones(16, 16, dtype=torch.bool))
    assert (wei[:, ~past] == 0).all() and (wei[:, past] > 0).all()  # edges only from j <= i
    v = head.value(x)
    out = head(x)
    for b in range(2):
        for i in range(16):
            mix = sum(wei[b, i, j] * v[b, j] for j in range(16))
            assert torch.allclose(out[b, i], mix, atol=1e-6)


# Q5 and note 6: "scaled" attention
def test_scaling_keeps_the_variance_near_one_and_softmax_diffuse(head, monkeypatch):
    # unit-Gaussian queries and keys: give the head orthonormal rows, feed it unit-Gaussian x
    torch.manual_seed(0)
    with torch.no_grad():
        for layer in (head.key, head.query):
            layer.weight.copy_(torch.linalg.qr(torch.randn(32, 8))[0].T)
    seen = []
    softmax = F.softmax

    def spy(wei, dim):
        seen.append(wei)
        return softmax(wei, dim=dim)
    monkeypatch.setattr(gpt.F, 'softmax', spy)
    head(torch.randn(64, 16, 32))
    wei = seen[0]
    affinities = wei[torch.isfinite(wei)]
    assert 0.8 < affinities.var() < 1.25  # head_size = 8 would be the variance unscaled
    # at init the weights stay spread out; unscaled, with head_size 64, they collapse to one-hot
    assert softmax(wei, -1)[:, -1].max(-1).values.mean() < 0.5
    q, k = torch.randn(64, 16, 64), torch.randn(64, 16, 64)
    assert softmax(q @ k.transpose(-2, -1), -1).max(-1).values.mean() > 0.8
    assert softmax(q @ k.transpose(-2, -1) * 64**-0.5, -1).max(-1).values.mean() < 0.5


# Q7: why tril is a registered buffer
def test_tril_is_a_buffer_saved_and_moved_but_never_trained(tiny):
    model = tiny.GPTLanguageModel(65)
    head = model.blocks[0].sa.heads[0]
    assert 'tril' in dict(head.named_buffers())
    assert 'blocks.0.sa.heads.0.tril' in model.state_dict()
    assert all(p is not head.tril for p in model.parameters())
    assert head.tril.dtype == torch.float32
    model.to(torch.float64)
    assert head.tril.dtype == torch.float64  # it moves with .to(), as the weights do
    model.to('meta')
    assert head.tril.device.type == 'meta'

    model = tiny.GPTLanguageModel(65)
    before = model.blocks[0].sa.heads[0].tril.clone()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-1)
    idx = torch.randint(65, (4, 16))
    for _ in range(3):
        _, loss = model(idx, idx)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert torch.equal(model.blocks[0].sa.heads[0].tril, before)


# note 5: self- vs cross-attention
def test_cross_attention_output_is_shaped_by_the_queries(head):
    x = torch.randn(2, 5, 32)   # the sequence that asks (queries)
    y = torch.randn(2, 11, 32)  # another sequence that answers (keys and values), e.g. an encoder's
    q, k, v = head.query(x), head.key(y), head.value(y)
    wei = F.softmax(q @ k.transpose(-2, -1) * k.shape[-1]**-0.5, dim=-1)  # (2,5,11): no mask
    out = wei @ v
    assert out.shape == (2, 5, 8)
    y2 = y.clone()
    y2[:, 7] = torch.randn(2, 32)
    out2 = F.softmax(q @ head.key(y2).transpose(-2, -1) * 8**-0.5, dim=-1) @ head.value(y2)
    assert not torch.allclose(out, out2)  # every query hears every position of y


def test_the_walkthrough_runs_and_all_its_checks_pass():
    r = run_here(os.path.join('scripts', 'attention_walkthrough.py'))
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'all checks passed' in r.stdout and 'FAILED' not in r.stdout


@pytest.mark.trains
@needs_input
def test_the_data_walkthrough_runs_and_all_its_checks_pass():
    """The notebook's first part: among its checks, the bigram's loss at init is the video's 4.87."""
    r = run_here(os.path.join('scripts', 'data_walkthrough.py'))
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'all checks passed' in r.stdout and 'FAILED' not in r.stdout
    assert r.stdout.count('[ok]') == 13
    batch = float(re.search(r'as \(B\*T,C\) = \(32, 65\): loss (\d\.\d+);', r.stdout).group(1))
    assert 4.87 <= batch < 4.88 # one batch, as in the video
    torch.manual_seed(1337) # the walkthrough's model, as it builds it; its loss over all of val, here
    with open(INPUT, encoding='utf-8') as f:
        text = f.read()
    chars = sorted(set(text))
    val = torch.tensor([chars.index(c) for c in text[int(0.9 * len(text)):]])
    table = bigram.BigramLanguageModel(len(chars)).token_embedding_table
    whole = F.cross_entropy(table(val[:-1]), val[1:]).item()
    assert f'the loss at init over every position of val: {whole:.4f}' in r.stdout # the README's FAQ: 4.72
    assert 4.72 <= whole < 4.73


@pytest.mark.parametrize('script', ['attention_walkthrough.py', 'data_walkthrough.py'])
def test_the_walkthroughs_reject_options_they_do_not_have(script):
    r = run_here(os.path.join('scripts', script), '--steps=3')
    assert r.returncode == 2 and r.stdout == ''
    assert r.stderr == "error: unknown option '--steps=3': this script takes none\n"
