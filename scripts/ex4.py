"""
Exercise EX4: read a transformer paper, implement a feature, see whether it helps.

Six features from papers, each a function that changes gpt.py's model after it is built (a few
lines, or a small class). Each trains as `python gpt.py --preset=cpu` does (the same loop,
schedule, batches and evaluations; 100 to 160 s a run on 2 cores), on several seeds, next to the
unchanged model on the same seeds:

    python scripts/ex4.py                                      # all six and the baseline, 3 seeds: 42 min
    python scripts/ex4.py --features baseline gelu --seeds 1337 --max_iters 500
    python scripts/ex4.py --device=cuda                        # the same runs on a GPU

The baseline on seed 1337 is `python gpt.py --preset=cpu` itself, so on a CPU it prints that
run's val loss. On a GPU, TF32, bf16 and torch.compile stay off: float32, as on a CPU.
"""
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import common  # noqa: E402 (beside this file)
from common import gpt  # noqa: E402
import ex3  # noqa: E402 (its train(): gpt.py's loop for one model)


def gelu(model):
    for block in model.blocks:
        block.ffwd.net[1] = nn.GELU()


def tied(model):
    model.lm_head.weight = model.token_embedding_table.weight # both (vocab_size, n_embd)


def residual_init(model):
    # every Block adds to the residual stream twice: scale both projections by 1/sqrt(2 n_layer),
    # so the stream's variance at init no longer grows with depth
    with torch.no_grad():
        for block in model.blocks:
            block.sa.proj.weight /= math.sqrt(2 * gpt.n_layer)
            block.ffwd.net[2].weight /= math.sqrt(2 * gpt.n_layer)


def nope(model):
    # the position table stays at zero: with the causal mask, a token can still count how many
    # came before it, which is a sense of position
    nn.init.zeros_(model.position_embedding_table.weight)
    model.position_embedding_table.weight.requires_grad_(False)


def rotate(x):
    """RoPE: turn each pair of channels (2i, 2i+1) of the vector at position t by the angle
    t * 10000**(-2i/hs). A dot product of two turned vectors then depends on how far apart their
    positions are, not on where they are. x: (B,nh,T,hs)"""
    T, hs = x.shape[-2:]
    theta = 10000 ** (-torch.arange(0, hs, 2, device=x.device) / hs) # (hs/2,) one speed per pair
    angle = torch.arange(T, device=x.device)[:, None] * theta        # (T,hs/2)
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]                              # (B,nh,T,hs/2) each
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2) # (B,nh,T,hs)


class RotaryAttention(gpt.BatchedMultiHeadAttention):
    """gpt.py's batched attention (EX1), with the queries and keys turned by rotate()"""

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = ([getattr(h, name)(x) for h in self.heads] for name in ('query', 'key', 'value'))
        q, k, v = (torch.stack(t, dim=1) for t in (q, k, v)) # (B,nh,T,hs)
        p = self.heads[0].dropout.p if self.training else 0.0
        out = F.scaled_dot_product_attention(rotate(q), rotate(k), v, dropout_p=p, is_causal=True)
        out = out.transpose(1, 2).reshape(B, T, -1) # (B,T,nh*hs)
        return self.dropout(self.proj(out))


def rope(model):
    # position goes into attention alone, as an angle, instead of a table added to the tokens
    nope(model)
    for block in model.blocks:
        block.sa.__class__ = RotaryAttention # same parameters, another forward


class SwiGLU(nn.Module):
    """FeedForward with a gate: silu(x W) * (x V), then back to n_embd. Three matrices 2/3 as wide
    as the lecture's two (4 * n_embd), so as many weights where 3 divides 8 * n_embd (96: 256)"""

    def __init__(self, n_embd):
        super().__init__()
        hidden = 2 * 4 * n_embd // 3
        self.w = nn.Linear(n_embd, hidden)
        self.v = nn.Linear(n_embd, hidden)
        self.proj = nn.Linear(hidden, n_embd)
        self.dropout = nn.Dropout(gpt.dropout)

    def forward(self, x):
        return self.dropout(self.proj(F.silu(self.w(x)) * self.v(x)))


def swiglu(model):
    device = model.lm_head.weight.device
    with torch.random.fork_rng(devices=[]): # new weights, but the batches drawn next stay the baseline's
        for block in model.blocks:
            block.ffwd = SwiGLU(gpt.n_embd)
            block.ffwd.apply(model._init_weights)
    model.to(device)


FEATURES = {
    'baseline': ('the CPU preset as it is', lambda model: None),
    'gelu': ('GELU instead of ReLU in FeedForward (Hendrycks & Gimpel 2016; GPT-2)', gelu),
    'tied': ("lm_head shares the token embedding's weights (Press & Wolf 2017; "
             "Attention Is All You Need, section 3.4)", tied),
    'residual-init': ('residual projections initialized 1/sqrt(2 n_layer) smaller (GPT-2, section 2.3)',
                      residual_init),
    'nope': ('no position embeddings at all (Haviv et al. 2022)', nope),
    'rope': ('rotary position embeddings in attention, none added to the tokens (Su et al. 2021, RoFormer)',
             rope),
    'swiglu': ('a gated FeedForward, SwiGLU, as wide in weights (Shazeer 2020; LLaMA)', swiglu),
}


def train(feature, seed, splits, vocab_size, label):
    """One model, changed by the feature, through gpt.py's loop (ex3.train, the same one EX3 runs);
    its val loss after the last step, its trained parameters and the seconds it trained."""
    torch.manual_seed(seed)
    model = gpt.GPTLanguageModel(vocab_size).to(gpt.device)
    FEATURES[feature][1](model)
    losses, seconds = ex3.train(model, splits, gpt.max_iters, label)
    return losses['val'], sum(p.numel() for p in model.parameters() if p.requires_grad), seconds


def main(argv):
    p = common.argument_parser(__doc__)
    p.add_argument('--features', nargs='+', choices=list(FEATURES), default=list(FEATURES), metavar='NAME',
                   help='the features to train, baseline included (default: all of %(choices)s)')
    p.add_argument('--seeds', nargs='+', type=int, default=[1337, 1338, 1339],
                   help='a run per feature and seed (default: 1337 1338 1339)')
    p.add_argument('--max_iters', type=int, default=None, help="steps per run (default: the preset's)")
    p.add_argument('--device', default='cpu', help='default: %(default)s')
    args = p.parse_args(argv)
    for seed in args.seeds:
        if seed not in common.SEEDS:
            p.error(f"--seeds must be from -2**63 to 2**64 - 1, got {seed}")
    overrides = ['--preset=cpu', f'--device={args.device}', '--use_tf32=False', '--use_bf16=False',
                 '--use_compile=False']
    if args.max_iters is not None:
        if args.max_iters < 1:
            p.error(f"--max_iters must be at least 1, got {args.max_iters}")
        overrides.append(f'--max_iters={args.max_iters}')
    gpt.configure(overrides)

    text = gpt.read_text()
    chars = sorted(set(text))
    encode, _ = common.codec(chars)
    train_data, val_data = common.split(torch.tensor(encode(text), dtype=torch.long).to(gpt.device))
    splits = {'train': train_data, 'val': val_data}
    runs = len(args.features) * len(args.seeds)
    print(f"{runs} run{'s' if runs > 1 else ''} of the CPU preset, {gpt.max_iters} steps each, "
          f"on {gpt.device}", flush=True)

    t0 = time.time()
    results, stopped = {}, False
    try:
        for feature in args.features:
            for seed in args.seeds:
                label = f"run {len(results) + 1}/{runs}, {feature} seed {seed}"
                results[feature, seed] = train(feature, seed, splits, len(chars), label)
    except KeyboardInterrupt: # the table of what finished, rather than nothing after many minutes
        stopped = True
    done = [f for f in args.features if all((f, s) in results for s in args.seeds)]
    if stopped:
        print(f"\nCtrl-C: stopped; the table has the {len(done)} of {len(args.features)} features whose "
              "runs all finished", flush=True)
        if not done:
            sys.exit(130)

    base = statistics.mean(results['baseline', s][0] for s in args.seeds) if 'baseline' in done else None
    print('\n| feature | what | trained parameters | ' + ' | '.join(f'seed {s}' for s in args.seeds)
          + ' | mean | vs baseline | s per run |')
    print('| --- | --- | ---: | ' + ' | '.join('---:' for _ in args.seeds) + ' | ---: | ---: | ---: |')
    for feature in done:
        vals = [results[feature, s][0] for s in args.seeds]
        mean = statistics.mean(vals)
        diff = f'{mean - base:+.4f}' if base is not None and feature != 'baseline' else ''
        seconds = statistics.mean(results[feature, s][2] for s in args.seeds)
        print(f"| {feature} | {FEATURES[feature][0]} | {results[feature, args.seeds[0]][1]:,} | "
              + ' | '.join(f'{v:.4f}' for v in vals) + f" | {mean:.4f} | {diff} | {seconds:.0f} |")
    print(f"\nval loss after the last step; {time.time() - t0:.0f} s in all, PyTorch {torch.__version__}")
    if stopped:
        sys.exit(130)


if __name__ == '__main__':
    common.run(main, sys.argv[1:])
