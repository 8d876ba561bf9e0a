"""
Lecture exercise EX2: teach the lecture's GPT to add n-digit numbers.

    python scripts/addition.py --digits 3              # 99% in well under a minute on 2 CPU cores
    python scripts/addition.py --digits 10             # the real exercise
    python scripts/addition.py --digits 10 --plain     # the answer's digits in reading order

A problem is written with zero-padded operands and the sum reversed (least significant digit
first, the order long addition produces it), then an end marker:

    042+517=9550$        42 + 517 = 559, padded to 4 digits (0559) and reversed

The model is gpt.py's GPTLanguageModel with its own 13-symbol vocabulary. Problems are drawn on
the fly from a seeded generator; the 1,000 held-out problems it is scored on never appear in
training. The prompt ("042+517=") is masked out of the loss with target -1 and ignore_index, so
the model learns only to answer. It is scored by greedy decoding, as exact match.

What helps with long numbers (all on by default, each an option):
- the reversed sum (--plain turns it off): each answer digit then depends on digits already seen;
- mixed digit counts (--no-curriculum turns it off): each operand has a random length of 1..n
  digits, so short problems with their easy carries are seen as often as long ones;
- fixed-width zero padding: every digit sits at the same position in every problem;
- a warmup and cosine learning-rate schedule down to a tenth of --lr over --max_steps.
"""
import sys
import time

import torch
from torch.nn import functional as F

import common  # noqa: E402 (beside this file)
from common import gpt  # noqa: E402

VOCAB = '0123456789+=$' # '$' ends the answer
PLUS, EQUALS, END = 10, 11, 12


def decode(tokens):
    return ''.join(VOCAB[t] for t in tokens)


def random_numbers(n, count, gen, mixed):
    """two (count,) tensors of random numbers below 10**n; mixed: each 1..n digits long, at random"""
    digits = torch.randint(10, (2, count, n), generator=gen) # MSD first
    if mixed: # zero the digits above the length
        sizes = torch.randint(1, n + 1, (2, count, 1), generator=gen)
        digits = digits * (torch.arange(n - 1, -1, -1) < sizes)
    return list(digits @ 10 ** torch.arange(n - 1, -1, -1))


def digits_of(x, width):
    return (x[:, None] // 10 ** torch.arange(width - 1, -1, -1)) % 10 # (B,width), MSD first


class Problems:
    """n-digit addition problems as token sequences, drawn from a seeded generator."""

    def __init__(self, digits, reverse=True, curriculum=True, seed=1337):
        self.n, self.reverse, self.curriculum = digits, reverse, curriculum
        self.gen = torch.Generator().manual_seed(seed)
        # the held-out problems, uniform over all n-digit pairs (the task we score), from a
        # generator of their own; a fifth of all problems where there are few (1 or 2 digits)
        count = min(1000, 10 ** (2 * digits) // 5)
        held, gen = {}, torch.Generator().manual_seed(seed + 1)
        while len(held) < count: # a dict keeps the order drawn and drops repeats
            a, b = self.operands(count - len(held), gen, mixed=False)
            held.update(dict.fromkeys(zip(a.tolist(), b.tolist())))
        self.held_out = list(held)
        self.held_set = set(held)

    @property
    def length(self):
        """tokens per problem: a + b = sum(n+1 digits) $"""
        return self.n + 1 + self.n + 1 + (self.n + 1) + 1

    @property
    def prompt_length(self):
        return 2 * self.n + 2

    def operands(self, count, gen, mixed=None):
        """two (count,) tensors of random numbers below 10**n"""
        return random_numbers(self.n, count, gen, mixed=self.curriculum if mixed is None else mixed)

    def encode(self, a, b):
        """(B,) operands -> (B, length) token sequences"""
        B = len(a)
        c = digits_of(a + b, self.n + 1)
        if self.reverse:
            c = c.flip(1)
        plus, eq, end = (torch.full((B, 1), t) for t in (PLUS, EQUALS, END))
        return torch.cat([digits_of(a, self.n), plus, digits_of(b, self.n), eq, c, end], dim=1)

    def batch(self, batch_size):
        """A training batch x, y of problems outside the held-out set (held-out ones are dropped,
        and a draw with none left is drawn again); prompt targets are -1."""
        keep = torch.zeros(1, dtype=torch.bool)
        while not keep.any():
            a, b = self.operands(batch_size, self.gen)
            keep = torch.tensor([(i, j) not in self.held_set for i, j in zip(a.tolist(), b.tolist())])
        seq = self.encode(a[keep], b[keep])
        return seq[:, :-1], mask_prompt(seq[:, 1:], self.prompt_length)

    def held_out_tensors(self):
        a, b = (torch.tensor(x) for x in zip(*self.held_out))
        return self.encode(a, b)


def mask_prompt(y, prompt_length):
    """Targets (B,T) with the prompt's positions set to -1: the loss ignores them. Position t
    predicts token t+1, so the first answer digit is the target at prompt_length - 1."""
    y = y.clone()
    y[:, :prompt_length - 1] = -1
    return y


def masked_loss(logits, y):
    B, T, C = logits.shape
    return F.cross_entropy(logits.reshape(B*T, C), y.reshape(B*T), ignore_index=-1)


@torch.no_grad()
def greedy(model, idx, new_tokens):
    """Extend idx (B,T) by new_tokens, each the model's most likely next token."""
    for _ in range(new_tokens):
        logits, _ = model(idx)
        idx = torch.cat((idx, logits[:, -1].argmax(-1, keepdim=True)), dim=1)
    return idx


def answers(model, seq, prompt_length, device, chunk=500):
    """Greedy decoding from each prompt of seq (B, T): the (B, T) problems as the model writes them.
    Greedy decoding writes a problem as it is up to the first token after its prompt that is not the
    model's most likely next token given the tokens before it: one forward pass finds that token in
    every problem, and each problem is decoded token by token from there on (none is, if it has none)."""
    model.eval()
    with torch.no_grad():
        likeliest = torch.cat([model(seq[i:i + chunk, :-1].to(device))[0].argmax(-1).cpu()
                               for i in range(0, len(seq), chunk)]) # at t, the model's guess of token t+1
    off = likeliest != seq[:, 1:]
    off[:, :prompt_length - 1] = False
    first = torch.where(off.any(dim=1), off.int().argmax(dim=1), -1) # where greedy decoding leaves seq
    out = seq.clone()
    for t in first[first >= 0].unique().tolist():
        rows = (first == t).nonzero()[:, 0]
        for i in range(0, len(rows), chunk):
            todo = rows[i:i + chunk]
            start = torch.cat([seq[todo, :t + 1], likeliest[todo, t:t + 1]], dim=1)
            out[todo] = greedy(model, start.to(device), seq.shape[1] - t - 2).cpu()
    model.train()
    return out


def solved(out, seq, scored_from):
    """(B,) True where the model's answer out (from answers()) matches seq from position scored_from on."""
    return (out == seq.cpu())[:, scored_from:].all(dim=1)


def exact_match(model, seq, prompt_length, device, chunk=500, scored_from=None):
    """The share of problems whose whole answer the model writes right (all it writes, or what it
    writes from position scored_from on)."""
    out = answers(model, seq, prompt_length, device, chunk)
    return solved(out, seq, scored_from or prompt_length).sum().item() / len(seq)


def training_options(p, n_layer, lr, max_steps_help, target_help, max_seconds_help='default: no limit',
                     n_layer_help='default: %(default)s'):
    """The options of a training run, shared with scripts/calculator.py."""
    p.add_argument('--max_steps', type=int, default=None, help=max_steps_help)
    p.add_argument('--max_seconds', type=float, default=None,
                   help=f'stop after this many seconds of training ({max_seconds_help})')
    p.add_argument('--decay_by_clock', action='store_true',
                   help='with --max_seconds: the learning rate decays as the clock runs as well as the steps, '
                        'so it reaches its end by max_seconds on any machine (the losses differ run to run)')
    p.add_argument('--target', type=float, default=0.99, help=target_help)
    p.add_argument('--eval_every', type=int, default=250,
                   help='steps between held-out evaluations (default: %(default)s)')
    p.add_argument('--batch_size', type=int, default=256, help='default: %(default)s')
    p.add_argument('--n_layer', type=int, default=n_layer, help=n_layer_help)
    p.add_argument('--n_head', type=int, default=4, help='default: %(default)s')
    p.add_argument('--n_embd', type=int, default=128, help='default: %(default)s')
    p.add_argument('--lr', type=float, default=lr,
                   help='peak learning rate, cosine decay after (default: %(default)s)')
    p.add_argument('--warmup', type=int, default=100, help='steps of linear warmup (default: %(default)s)')
    p.add_argument('--seed', type=int, default=1337, help='default: %(default)s')
    p.add_argument('--device', default='cpu', help='default cpu: this model is small')


def check_training_options(p, args):
    """One line for each value training_options' options cannot take."""
    for key in ('max_steps', 'eval_every', 'batch_size', 'n_layer', 'n_head', 'n_embd'):
        if getattr(args, key) is not None and getattr(args, key) < 1:
            p.error(f'--{key} must be at least 1, got {getattr(args, key)}')
    if args.n_embd % args.n_head:
        p.error(f'--n_embd={args.n_embd} must be a multiple of --n_head={args.n_head}')
    for key in ('lr', 'max_seconds'):
        if getattr(args, key) is not None and getattr(args, key) <= 0:
            p.error(f'--{key} must be above 0, got {getattr(args, key)}')
    if args.decay_by_clock and args.max_seconds is None:
        p.error('--decay_by_clock needs --max_seconds')
    if args.warmup < 0:
        p.error(f'--warmup must be at least 0, got {args.warmup}')
    if not (args.seed in common.SEEDS and args.seed + 1 in common.SEEDS): # the held-out problems: seed + 1
        p.error(f'--seed must be from -2**63 to 2**64 - 2, got {args.seed}')
    if not 0 < args.target <= 1:
        p.error(f'--target is the share of problems right, above 0 and at most 1 (0.99: 99%), '
                f'got {args.target}')


def build_model(args, vocab_size, block_size):
    """gpt.py's model for problems of up to block_size + 1 tokens, and its optimizer."""
    torch.manual_seed(args.seed)
    gpt.n_layer, gpt.n_head, gpt.n_embd = args.n_layer, args.n_head, args.n_embd
    gpt.block_size, gpt.dropout, gpt.fast_attention = block_size, 0.0, True
    # gpt.get_lr's schedule: warmup, then cosine decay to a tenth of lr over max_steps
    gpt.lr_decay, gpt.learning_rate, gpt.min_lr = True, args.lr, args.lr / 10
    gpt.warmup_iters, gpt.max_iters = args.warmup, args.max_steps
    model = gpt.GPTLanguageModel(vocab_size).to(args.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, foreach=True)
    return model, optimizer


def train(args, model, optimizer, batch_loss, evaluate, t_start):
    """The training loop of this script and scripts/calculator.py: a step on batch_loss() at
    gpt.py's learning rate schedule, then, every eval_every steps, at the last step or once
    max_seconds are up, evaluate() -> {name: held-out exact match} printed with the time. Stops
    early once every score reaches target. Returns the last scores and the last step."""
    t0, t_evals = time.time(), 0.0 # t_evals: time spent evaluating, not training
    for step in range(1, args.max_steps + 1):
        at = step - 1 # how far along the schedule: by the steps, or by the clock if that is further
        if args.decay_by_clock:
            at = max(at, (time.time() - t0) / args.max_seconds * args.max_steps)
        for group in optimizer.param_groups:
            group['lr'] = gpt.get_lr(at)
        loss = batch_loss()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        out_of_time = args.max_seconds is not None and time.time() - t0 > args.max_seconds
        if step % args.eval_every == 0 or step == args.max_steps or out_of_time:
            t_eval = time.time()
            ms_per_step = 1000 * (t_eval - t0 - t_evals) / step
            scores = evaluate()
            print(f"step {step}: loss {loss.item():.4f}, held-out exact match "
                  + ', '.join(f"{name} {s:.1%}".lstrip() for name, s in scores.items())
                  + f" | {time.time() - t_start:.1f}s, {ms_per_step:.0f} ms/step", flush=True)
            t_evals += time.time() - t_eval
            if min(scores.values()) >= args.target or out_of_time:
                break
    return scores, step


def parse_args(argv):
    p = common.argument_parser(__doc__)
    p.add_argument('--digits', type=int, default=3, help='digits per operand, 1 to 18 (default: %(default)s)')
    p.add_argument('--plain', action='store_true', help='write the sum in reading order, not reversed')
    p.add_argument('--no-curriculum', dest='curriculum', action='store_false',
                   help='always n-digit operands instead of mixed lengths')
    training_options(p, n_layer=2, lr=3e-3, max_steps_help='default: 1500 + 600 per digit',
                     target_help='stop once held-out exact match reaches this share, at most 1 '
                                 '(default: %(default)s)')
    args = p.parse_args(argv)
    if not 1 <= args.digits <= 18:
        p.error('--digits must be 1 to 18 (int64 sums)')
    check_training_options(p, args)
    if args.max_steps is None:
        args.max_steps = 1500 + 600 * args.digits
    return args


def main(argv):
    args = parse_args(argv)
    common.check_device(args.device)
    t_start = time.time()
    problems = Problems(args.digits, reverse=not args.plain, curriculum=args.curriculum, seed=args.seed)
    model, optimizer = build_model(args, len(VOCAB), problems.length - 1)
    held = problems.held_out_tensors()
    example = decode(held[0].tolist())
    print(f"{args.digits}-digit addition, {'plain' if args.plain else 'reversed'} sums, "
          f"{'mixed' if args.curriculum else 'fixed'} operand lengths; e.g. {example}")
    print(f"{sum(p.numel() for p in model.parameters()):,} parameters; {len(held)} held-out problems; "
          f"up to {args.max_steps} steps of {args.batch_size}")

    def batch_loss():
        xb, yb = problems.batch(args.batch_size)
        return masked_loss(model(xb.to(args.device))[0], yb.to(args.device))

    # one score, unnamed: its line reads "held-out exact match 99.3%"
    scores, step = train(args, model, optimizer, batch_loss, t_start=t_start,
                         evaluate=lambda: {'': exact_match(model, held, problems.prompt_length, args.device)})
    accuracy = scores['']
    print(f"done: {accuracy:.1%} exact match on {len(held)} held-out problems after {step} steps, "
          f"{time.time() - t_start:.1f} s in all")
    model.eval()
    for row in greedy(model, held[:3, :problems.prompt_length].to(args.device),
                      problems.length - problems.prompt_length).tolist():
        print('  ' + decode(row))
    return accuracy


if __name__ == '__main__':
    common.run(main, sys.argv[1:], shrink='--batch_size, or a smaller model')
