"""
The second part of the lecture's notebook, top to bottom: the mathematical trick of
self-attention, then what lets the network grow deep and large: residual connections,
LayerNorm and dropout. Each step prints its shapes and key numbers; every claim the lecture
makes is checked, and the script exits non-zero if one fails.

    python scripts/data_walkthrough.py          # the first part: data, batches, the bigram
    python scripts/attention_walkthrough.py
"""
import sys

import torch
import torch.nn as nn
from torch.nn import functional as F

import common  # noqa: E402 (beside this file)
from common import fail, gpt  # noqa: E402

torch.set_printoptions(precision=4, sci_mode=False)
failures = []


def check(claim, ok):
    print(f"  [{'ok' if ok else 'FAILED'}] {claim}")
    if not ok:
        failures.append(claim)


def section(title):
    print(f"\n== {title}")


def run_checked(main, doc):
    """`python script.py` for a walkthrough (this one and data_walkthrough.py): no options, -h
    prints doc; run main() and its checks, then exit non-zero if one failed."""
    def checked():
        if sys.argv[1:] in (['-h'], ['--help']):
            print(doc.strip())
            return
        if sys.argv[1:]:
            fail(f"unknown option {sys.argv[1]!r}: this script takes none", code=2)
        failures.clear()
        main()
        print()
        if failures:
            print(f"{len(failures)} check(s) FAILED")
            sys.exit(1)
        print("all checks passed")
    common.run(checked)

# ------------
# the three versions of "each token averages itself and the tokens before it"

def aggregate_loop(x):
    """version 1: for loops, the mean of x[b, :t+1] for every b and t (a 'bag of words')"""
    B, T, C = x.shape
    xbow = torch.zeros((B, T, C))
    for b in range(B):
        for t in range(T):
            xprev = x[b, :t+1] # (t+1,C)
            xbow[b, t] = torch.mean(xprev, 0)
    return xbow


def aggregate_matmul(x):
    """version 2: one matmul with a row-normalized lower-triangular matrix"""
    T = x.shape[1]
    wei = torch.tril(torch.ones(T, T))
    wei = wei / wei.sum(1, keepdim=True)
    return wei @ x # (T,T) @ (B,T,C) -> (B,T,T) @ (B,T,C) -> (B,T,C)


def aggregate_softmax(x, affinities=None):
    """version 3: affinities (zeros: all equal), the future masked to -inf, then softmax"""
    T = x.shape[1]
    tril = torch.tril(torch.ones(T, T))
    wei = torch.zeros((T, T)) if affinities is None else affinities
    wei = wei.masked_fill(tril == 0, float('-inf'))
    wei = F.softmax(wei, dim=-1)
    return wei @ x


def main():
    section("1. the toy input: B,T,C = 4,8,2")
    torch.manual_seed(1337)
    B, T, C = 4, 8, 2
    x = torch.randn(B, T, C)
    print(f"x: {tuple(x.shape)}\nx[0] =\n{x[0]}")

    section("2. version 1: average the past with for loops")
    xbow = aggregate_loop(x)
    print(f"xbow[0] (row t is the mean of x[0, :t+1]) =\n{xbow[0]}")
    check("xbow[0, 1] is the mean of x[0, 0] and x[0, 1]", torch.allclose(xbow[0, 1], (x[0, 0] + x[0, 1]) / 2))

    section("3. the trick: a matrix multiply adds up rows")
    torch.manual_seed(42)
    a = torch.ones(3, 3)
    b = torch.randint(0, 10, (3, 2)).float()
    print(f"a = ones(3,3)\nb =\n{b}\na @ b =\n{a @ b}")
    check("every row of ones @ b is the column sums of b", torch.allclose(a @ b, b.sum(0).expand(3, 2)))
    a = torch.tril(torch.ones(3, 3))
    print(f"a = tril(ones(3,3)) =\n{a}\na @ b =\n{a @ b}")
    check("tril(ones) @ b gives running sums", torch.allclose(a @ b, b.cumsum(0)))
    a = a / a.sum(1, keepdim=True)
    print(f"a / a.sum(1) =\n{a}\na @ b =\n{a @ b}")
    check("normalized rows give running means", torch.allclose(a @ b, b.cumsum(0) / torch.arange(1, 4)[:, None]))

    section("4. version 2: the same average as one matmul")
    xbow2 = aggregate_matmul(x)
    print(f"wei (T,T) @ x (B,T,C) -> {tuple(xbow2.shape)}")
    # a matmul adds in another order than torch.mean, so the last bits can differ: allow 1e-6
    check("version 2 equals version 1", torch.allclose(xbow, xbow2, atol=1e-6))

    section("5. version 3: masked_fill(-inf) + softmax")
    xbow3 = aggregate_softmax(x)
    tril = torch.tril(torch.ones(T, T))
    wei = F.softmax(torch.zeros(T, T).masked_fill(tril == 0, float('-inf')), dim=-1)
    print(f"wei =\n{wei}")
    check("version 3 equals version 1", torch.allclose(xbow, xbow3, atol=1e-6))
    print("  the zeros are affinities: once they depend on the data, tokens weigh their past unequally")

    section("6. version 4: self-attention, one head of size 16 on B,T,C = 4,8,32")
    torch.manual_seed(1337)
    B, T, C = 4, 8, 32
    x = torch.randn(B, T, C)
    head_size = 16
    key = nn.Linear(C, head_size, bias=False)
    query = nn.Linear(C, head_size, bias=False)
    value = nn.Linear(C, head_size, bias=False)
    k = key(x)   # (B,T,16)
    q = query(x) # (B,T,16)
    wei = q @ k.transpose(-2, -1) * head_size**-0.5 # (B,T,16) @ (B,16,T) -> (B,T,T)
    wei = wei.masked_fill(tril == 0, float('-inf'))
    wei = F.softmax(wei, dim=-1)
    v = value(x) # (B,T,16)
    out = wei @ v
    print(f"k, q, v: {tuple(k.shape)}; wei: {tuple(wei.shape)}; out: {tuple(out.shape)}")
    print(f"wei[0] (row i: how much token i takes from each token j <= i) =\n{wei[0].detach()}")
    check("every row of wei sums to 1", torch.allclose(wei.sum(-1), torch.ones(B, T)))
    check("wei is zero above the diagonal: no token hears the future",
          bool((wei.masked_select(tril == 0) == 0).all()))
    check("wei differs between batch elements: the affinities depend on the data",
          not torch.allclose(wei[0], wei[1]))
    gpt.n_embd, gpt.block_size, gpt.dropout = C, T, 0.0
    head = gpt.Head(head_size)
    head.load_state_dict({'key.weight': key.weight, 'query.weight': query.weight,
                          'value.weight': value.weight, 'tril': head.tril})
    check("gpt.Head with the same weights computes the same out", torch.allclose(head(x), out, atol=1e-6))

    section("7. why scale by head_size**-0.5")
    torch.manual_seed(1337)
    k = torch.randn(B, T, head_size)
    q = torch.randn(B, T, head_size)
    raw = q @ k.transpose(-2, -1)
    scaled = raw * head_size**-0.5
    print(f"var(k) = {k.var():.4f}, var(q) = {q.var():.4f}")
    print(f"var(q @ k^T) = {raw.var():.4f} (about head_size = {head_size})")
    print(f"var(q @ k^T * head_size**-0.5) = {scaled.var():.4f} (about 1)")
    check("unscaled variance is near head_size", 0.5 * head_size < raw.var() < 1.5 * head_size)
    check("scaled variance is near 1", 0.5 < scaled.var() < 1.5)

    section("8. softmax sharpens toward one-hot as its inputs grow")
    logits = torch.tensor([0.1, -0.2, 0.3, -0.2, 0.5])
    soft, sharp = F.softmax(logits, dim=-1), F.softmax(logits * 8, dim=-1)
    print(f"softmax(x)     = {soft}\nsoftmax(8 * x) = {sharp}")
    check("multiplying by 8 concentrates the weight on the largest input", sharp.max() > 2 * soft.max())
    print("  at init, unscaled affinities would make each token listen to one other token only")

    section("9. residual connections: a gradient highway from the loss to the input")
    C = 32
    torch.manual_seed(1337)
    blocks = [gpt.FeedForward(C) for _ in range(6)] # stand-ins for the Blocks
    for linear in (m for block in blocks for m in block.modules() if isinstance(m, nn.Linear)):
        nn.init.normal_(linear.weight, std=0.02) # the published init: each block adds little at first
        nn.init.zeros_(linear.bias)
    grads = {}
    for residual in (False, True):
        x = torch.randn(4, 8, C, requires_grad=True)
        h = x
        for block in blocks:
            h = h + block(h) if residual else block(h) # x = x + self.ffwd(x), or without the x +
        h.sum().backward()
        grads[residual] = x.grad
    print(f"d(sum of the output)/d(input) through 6 blocks: without residuals its largest entry is "
          f"{grads[False].abs().max():.1e}, with them its mean is {grads[True].mean():.4f}")
    check("without residual connections the gradient vanishes before it reaches the input",
          grads[False].abs().max() < 1e-6)
    check("with them it arrives whole: each sum passes the gradient straight through (about 1 here)",
          abs(grads[True].mean() - 1) < 0.05)

    section("10. LayerNorm: BatchNorm with the 0 made a 1, each row normalized instead of each column")
    torch.manual_seed(1337)
    x = torch.randn(32, 100) # 32 examples of 100 features
    # the lecture's LayerNorm1d, at init (gamma 1, beta 0): the mean and variance of each row
    xhat = (x - x.mean(1, keepdim=True)) / torch.sqrt(x.var(1, keepdim=True) + 1e-5)
    print(f"row 0: mean {xhat[0].mean():.4f}, std {xhat[0].std():.4f}; "
          f"column 0: mean {xhat[:, 0].mean():.4f}, std {xhat[:, 0].std():.4f}")
    check("every row (one example's features) has mean 0 and std 1",
          torch.allclose(xhat.mean(1), torch.zeros(32), atol=1e-5)
          and torch.allclose(xhat.std(1), torch.ones(32)))
    check("the columns are not normalized: no statistic crosses examples, so no running buffers",
          not torch.allclose(xhat.std(0), torch.ones(100), atol=0.05))
    # nn.LayerNorm divides the variance by n, x.var by n - 1: 0.5% apart for 100 features
    check("nn.LayerNorm(100), as ln1, ln2 and ln_f use it, computes the same up to that",
          torch.allclose(nn.LayerNorm(100)(x), xhat, atol=0.02))

    section("11. dropout 0.2: in training a random fifth of the activations is zeroed, every step anew")
    torch.manual_seed(1337)
    drop = nn.Dropout(0.2)
    x = torch.ones(10000)
    a, b = drop(x), drop(x)
    print(f"zeroed: {(a == 0).float().mean():.3f} of them; the rest become {a[a > 0][0]:.2f} (1 / 0.8)")
    check("about 20% zeroed, the rest scaled by 1/0.8 so the expected value stays 1",
          abs((a == 0).float().mean() - 0.2) < 0.02 and torch.allclose(a[a > 0], torch.tensor(1.25)))
    check("a different subnetwork each time: the masks of two calls differ", not torch.equal(a, b))
    check("in eval mode (estimate_loss, generate) dropout does nothing", torch.equal(drop.eval()(x), x))


if __name__ == '__main__':
    run_checked(main, __doc__)
