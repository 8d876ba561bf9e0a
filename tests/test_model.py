"""The model: shapes, causality, size, init, state_dicts, and that it can learn."""
import math
from collections import OrderedDict

import pytest
import torch
import torch.nn as nn
from torch.nn import functional as F

import bigram
import gpt


def test_shapes(tiny):
    x = torch.randn(3, 10, tiny.n_embd)
    assert tiny.Head(8)(x).shape == (3, 10, 8)
    assert tiny.MultiHeadAttention(4, 8)(x).shape == (3, 10, 32)
    assert tiny.FeedForward(32)(x).shape == (3, 10, 32)
    assert tiny.Block(32, 4)(x).shape == (3, 10, 32)
    idx = torch.randint(65, (3, 10))
    logits, loss = tiny.GPTLanguageModel(65)(idx)
    assert logits.shape == (3, 10, 65) and loss is None
    logits, loss = tiny.GPTLanguageModel(65)(idx, idx)
    assert logits.shape == (30, 65) and loss.shape == ()  # the lecture flattens with targets


@pytest.mark.parametrize('fast', [False, True])
def test_changing_a_later_token_leaves_earlier_logits_unchanged(tiny, monkeypatch, fast):
    monkeypatch.setattr(gpt, 'fast_attention', fast)
    torch.manual_seed(0)
    model = tiny.GPTLanguageModel(65).eval()
    idx = torch.randint(65, (2, 16))
    for t in (0, 7, 14):
        changed = idx.clone()
        changed[:, t + 1] = (changed[:, t + 1] + 1) % 65
        a, _ = model(idx)
        b, _ = model(changed)
        assert torch.equal(a[:, :t + 1], b[:, :t + 1])
        assert not torch.allclose(a[:, t + 1], b[:, t + 1])


def test_parameter_count_is_the_lectures(monkeypatch):
    # 10,788,929: the lecture's scaled config with its 65-character vocabulary; the README's table
    count = lambda module: sum(p.numel() for p in module.parameters())
    model = gpt.GPTLanguageModel(65)
    assert count(model) == 10_788_929
    assert {name: count(m) for name, m in model.named_children()} == dict(
        token_embedding_table=65 * 384, position_embedding_table=256 * 384, blocks=6 * 1_773_312,
        ln_f=2 * 384, lm_head=384 * 65 + 65)
    block = model.blocks[0]
    assert count(block.sa.heads) == 3 * 384 * 384 # key, query and value of 6 heads of 64, no bias
    assert count(block.sa.proj) == 384 * 384 + 384
    assert count(block.ffwd) == 2 * 384 * 1536 + 1536 + 384
    assert count(block.ln1) + count(block.ln2) == 2 * (384 + 384)
    monkeypatch.setattr(gpt, 'n_head', 1) # one head of 384: the same weights, differently cut
    assert count(gpt.GPTLanguageModel(65)) == 10_788_929


@pytest.mark.parametrize('n_embd', [96, 384])
def test_initial_loss_is_ln_65_plus_half_the_logits_variance(tiny, monkeypatch, n_embd):
    """README, "Why does the bigram start at 4.7 and the GPT at 4.2?": ln_f gives lm_head inputs of
    variance 1, and its normal(0, 0.02) weights make logits of standard deviation 0.02 * sqrt(n_embd);
    random logits of standard deviation s cost about ln 65 + s**2 / 2."""
    monkeypatch.setattr(gpt, 'n_embd', n_embd)
    monkeypatch.setattr(gpt, 'n_head', 4)
    torch.manual_seed(0)
    model = tiny.GPTLanguageModel(65).eval()
    idx = torch.randint(65, (16, tiny.block_size))
    logits, loss = model(idx, torch.randint(65, (16, tiny.block_size))) # targets that know nothing
    s = 0.02 * math.sqrt(n_embd)
    assert abs(logits.std(dim=-1).mean().item() / s - 1) < 0.15
    assert abs(loss.item() - (math.log(65) + s**2 / 2)) < 0.04


def test_state_dict_round_trip(tiny):
    torch.manual_seed(0)
    a = tiny.GPTLanguageModel(65).eval()
    torch.manual_seed(1)
    b = tiny.GPTLanguageModel(65).eval()
    idx = torch.randint(65, (2, 16))
    assert not torch.equal(a(idx)[0], b(idx)[0])
    b.load_state_dict(a.state_dict(), strict=True)
    assert torch.equal(a(idx)[0], b(idx)[0])


def lecture_layout(vocab_size, n_embd, n_head, n_layer, block_size):
    """The module tree of the lecture's published gpt.py, named as in shared/lecture/README.md,
    built from plain torch modules so it shares no code with ours."""
    def block():
        hs = n_embd // n_head
        head = lambda: nn.ModuleDict(OrderedDict(
            key=nn.Linear(n_embd, hs, bias=False), query=nn.Linear(n_embd, hs, bias=False),
            value=nn.Linear(n_embd, hs, bias=False)))
        heads = nn.ModuleList([head() for _ in range(n_head)])
        for h in heads:
            h.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))
        sa = nn.ModuleDict(OrderedDict(heads=heads, proj=nn.Linear(n_embd, n_embd)))
        ffwd = nn.ModuleDict(OrderedDict(net=nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd), nn.ReLU(), nn.Linear(4 * n_embd, n_embd), nn.Dropout())))
        return nn.ModuleDict(OrderedDict(sa=sa, ffwd=ffwd, ln1=nn.LayerNorm(n_embd), ln2=nn.LayerNorm(n_embd)))
    return nn.ModuleDict(OrderedDict(
        token_embedding_table=nn.Embedding(vocab_size, n_embd),
        position_embedding_table=nn.Embedding(block_size, n_embd),
        blocks=nn.Sequential(*[block() for _ in range(n_layer)]),
        ln_f=nn.LayerNorm(n_embd),
        lm_head=nn.Linear(n_embd, vocab_size)))


def test_lecture_state_dict_loads_strictly_and_back():
    ours = gpt.GPTLanguageModel(65)
    theirs = lecture_layout(65, gpt.n_embd, gpt.n_head, gpt.n_layer, gpt.block_size)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict(), strict=True)
    assert torch.equal(ours.lm_head.weight, theirs.lm_head.weight)
    theirs.load_state_dict(ours.state_dict(), strict=True)


@pytest.mark.parametrize('p', [0.0, 0.2])
def test_batched_attention_equals_the_lectures_heads(tiny, monkeypatch, p):
    """EX1: one batched computation over all heads gives the per-head result, same weights; in
    eval mode dropout is off in both, whatever its rate."""
    monkeypatch.setattr(gpt, 'dropout', p)
    torch.manual_seed(0)
    lecture = tiny.MultiHeadAttention(4, 8).eval()
    batched = tiny.BatchedMultiHeadAttention(4, 8).eval()
    batched.load_state_dict(lecture.state_dict(), strict=True)
    x = torch.randn(3, 16, 32)
    assert torch.allclose(lecture(x), batched(x), atol=1e-6)
    assert torch.allclose(lecture(x[:, :5]), batched(x[:, :5]), atol=1e-6)


def test_dropout_sits_where_the_lecture_puts_it(tiny, monkeypatch):
    """In training, dropout zeroes some attention weights after the softmax, some outputs of the
    projection and some of the feed-forward net's. The same three, recomputed here from the
    weights with F.dropout at those places and the same random numbers, give the same outputs."""
    monkeypatch.setattr(gpt, 'dropout', 0.5)
    torch.manual_seed(0)
    mha, ffwd = tiny.MultiHeadAttention(4, 8), tiny.FeedForward(32) # in training mode, as built
    x = torch.randn(2, 16, 32)
    torch.manual_seed(1)
    got = mha(x), ffwd(x)
    torch.manual_seed(1)
    heads = []
    for h in mha.heads: # the random numbers are drawn in the modules' order: heads, proj, ffwd
        wei = (x @ h.query.weight.T) @ (x @ h.key.weight.T).transpose(-2, -1) * 8**-0.5 # (B,T,T)
        wei = wei.masked_fill(torch.ones(16, 16).tril() == 0, float('-inf')).softmax(dim=-1)
        heads.append(F.dropout(wei, 0.5) @ (x @ h.value.weight.T)) # (B,T,hs)
    expected = (F.dropout(mha.proj(torch.cat(heads, dim=-1)), 0.5),
                F.dropout(ffwd.net[2](F.relu(ffwd.net[0](x))), 0.5))
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)


def test_batched_attention_drops_attention_weights_in_training_only(tiny, monkeypatch):
    """The batched path passes dropout to F.scaled_dot_product_attention in training mode alone
    (its masks are drawn otherwise than the heads', so only that it acts is compared)."""
    monkeypatch.setattr(gpt, 'dropout', 0.5)
    torch.manual_seed(0)
    batched = tiny.BatchedMultiHeadAttention(4, 8)
    batched.dropout = nn.Identity() # leave the attention weights' dropout alone
    x = torch.randn(2, 16, 32)
    trained, evaluated = batched(x), batched.eval()(x)
    assert not torch.allclose(trained, evaluated)
    assert torch.equal(evaluated, batched(x)) # eval mode: no random numbers


def test_fast_attention_model_matches_and_shares_state_dicts(tiny, monkeypatch):
    torch.manual_seed(0)
    slow = tiny.GPTLanguageModel(65).eval()
    monkeypatch.setattr(gpt, 'fast_attention', True)
    fast = tiny.GPTLanguageModel(65).eval()
    assert isinstance(fast.blocks[0].sa, gpt.BatchedMultiHeadAttention)
    fast.load_state_dict(slow.state_dict(), strict=True)
    idx = torch.randint(65, (2, 16))
    assert torch.allclose(slow(idx)[0], fast(idx)[0], atol=1e-5)


@pytest.mark.trains
def test_model_overfits_one_batch(tiny):
    torch.manual_seed(0)
    model = tiny.GPTLanguageModel(65)
    idx = torch.randint(65, (4, 16))
    targets = torch.randint(65, (4, 16))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(150):
        _, loss = model(idx, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.1  # from ln 65 = 4.17: it memorized 64 random targets


def test_the_learning_rate_warms_up_then_decays_to_min_lr(monkeypatch):
    """lr_decay (the CPU preset's): a linear warmup to learning_rate over warmup_iters steps, then
    half a cosine down to min_lr at max_iters, where it stays; without it the lecture's constant."""
    for key, value in dict(learning_rate=4e-3, min_lr=4e-4, warmup_iters=50, max_iters=2200).items():
        monkeypatch.setattr(gpt, key, value)
    monkeypatch.setattr(gpt, 'lr_decay', False)
    assert {gpt.get_lr(step) for step in (0, 50, 1000, 2200)} == {4e-3}
    monkeypatch.setattr(gpt, 'lr_decay', True)
    lrs = [gpt.get_lr(step) for step in range(2400)]
    assert math.isclose(lrs[0], 4e-3 / 50) # the first step already moves the weights
    assert all(a < b for a, b in zip(lrs[:49], lrs[1:50])) and math.isclose(lrs[49], 4e-3)
    assert math.isclose(lrs[50], 4e-3) # the cosine starts at the top
    assert all(a > b for a, b in zip(lrs[50:2199], lrs[51:2200]))
    assert math.isclose(lrs[(50 + 2200) // 2], (4e-3 + 4e-4) / 2) # halfway down at the middle
    assert all(math.isclose(lr, 4e-4) for lr in lrs[2200:]) # a resumed run that trains on stays there


def test_generate_extends_and_crops_to_block_size(tiny):
    model = tiny.GPTLanguageModel(65).eval()
    out = model.generate(torch.zeros((2, 1), dtype=torch.long), max_new_tokens=40)
    assert out.shape == (2, 41)  # longer than block_size 16: the context was cropped
    assert torch.equal(out[:, :1], torch.zeros((2, 1), dtype=torch.long))


def test_generate_is_deterministic_and_dropout_free_in_eval_mode(tiny, monkeypatch):
    """gpt.py samples after model.eval(): the lecture's script sampled with dropout on."""
    monkeypatch.setattr(gpt, 'dropout', 0.5)
    torch.manual_seed(0)
    model = tiny.GPTLanguageModel(65).eval()
    outs = []
    for _ in range(2):
        torch.manual_seed(3)
        outs.append(model.generate(torch.zeros((1, 1), dtype=torch.long), max_new_tokens=20))
    assert torch.equal(*outs)
    # dropout is off while sampling: the plain eval-mode logits give the same first token
    torch.manual_seed(3)
    logits, _ = model.eval()(torch.zeros((1, 1), dtype=torch.long))
    first = torch.multinomial(torch.softmax(logits[:, -1], -1), 1)
    assert first.item() == outs[0][0, 1].item()


def test_generate_builds_no_graph_for_backward(tiny, monkeypatch):
    """Sampling runs under torch.no_grad(): no step of it keeps activations for a backward pass."""
    model = tiny.GPTLanguageModel(65).eval()
    forward, grad = model.forward, []
    monkeypatch.setattr(model, 'forward', lambda *args: grad.append(torch.is_grad_enabled()) or forward(*args))
    model.generate(torch.zeros((1, 1), dtype=torch.long), max_new_tokens=5)
    assert grad == [False] * 5


def test_top_k_beyond_the_vocabulary_keeps_every_character(tiny):
    """sample.py --top_k=1000 on 65 characters: no character is cut, as without --top_k."""
    torch.manual_seed(0)
    model = tiny.GPTLanguageModel(65).eval()
    samples = []
    for top_k in (None, 65, 1000):
        torch.manual_seed(3)
        samples.append(model.generate(torch.zeros((1, 1), dtype=torch.long), max_new_tokens=20, top_k=top_k))
    assert torch.equal(samples[0], samples[1]) and torch.equal(samples[0], samples[2])


def test_the_bigram_draws_each_character_from_the_row_of_the_one_before():
    """bigram.py's generate, and the same draws made here from the rows of its table."""
    torch.manual_seed(0)
    model = bigram.BigramLanguageModel(65)
    torch.manual_seed(3)
    sampled = model.generate(torch.tensor([[5, 9]]), max_new_tokens=20)[0].tolist()
    torch.manual_seed(3)
    expected = [5, 9]
    with torch.no_grad():
        for _ in range(20):
            probs = F.softmax(model.token_embedding_table.weight[expected[-1]], dim=-1) # (C,)
            expected.append(torch.multinomial(probs[None], num_samples=1).item())
    assert sampled == expected


def test_temperature_and_top_k_as_the_softmax_of_the_scaled_top_logits(tiny):
    """generate(temperature, top_k) draws from softmax(top-k logits / temperature), computed here."""
    torch.manual_seed(0)
    model = tiny.GPTLanguageModel(65).eval()
    idx = torch.zeros((1, 1), dtype=torch.long)
    torch.manual_seed(3)
    drawn = model.generate(idx, 1, temperature=0.5, top_k=5)[0, 1].item()
    with torch.no_grad():
        logits = model(idx)[0][0, -1]
    top = torch.topk(logits, 5)
    probs = torch.zeros(65).index_put_((top.indices,), torch.softmax(top.values / 0.5, -1))
    torch.manual_seed(3)
    assert drawn == torch.multinomial(probs[None], 1).item()
    assert drawn in top.indices.tolist()
    torch.manual_seed(3) # top_k=1: the likeliest, whatever the temperature
    assert model.generate(idx, 1, temperature=1e-30, top_k=1)[0, 1].item() == logits.argmax().item()


def test_encode_decode_round_trip():
    import common
    encode, decode = common.codec(sorted(set('hello world\n')))
    s = 'hello\nworld old'
    assert decode(encode(s)) == s
    assert encode('\n ') == [0, 1]
