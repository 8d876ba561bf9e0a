r"""
After EX2, the lecture's next step: one GPT as a calculator for + - * and /.

    python scripts/calculator.py                     # 2-digit operands, all four operations
    python scripts/calculator.py --digits 3 --max_steps 6000 --eval_every 1000 --target 0.99 \
        --max_seconds 2600 --decay_by_clock     # 45 minutes, the learning rate decaying by the clock
    python scripts/calculator.py --no-cot            # the answers alone, without the work
    python scripts/calculator.py --ask "57/42" "12*34"    # the trained model answers (out/calculator.pt)
    echo "99-7" | python scripts/calculator.py --ask      # or one problem a line on standard input

A problem has zero-padded n-digit operands, and each answer is written in the order its
pencil-and-paper method produces the digits, then an end marker:

    42+57=990$       sum, n+1 digits, least significant first (99 -> 099 -> 990)
    42-57=-51$       sign (+ or -), then |difference|, n digits, least significant first
    42*57=4932$      product, 2n digits, least significant first (2394)
    57/42=01r15$     quotient, n digits, most significant first (long division), 'r', remainder

For * and / the model first writes its work (chain of thought, off with --no-cot), as on paper:

    42*57=492+0012=4932$
        the partial products 42*7 = 294 and 42*5*10 = 2100, least significant digit first,
        then their sum
    27/14=2000000200+020,7202820999-131=01r13$
        long division, a step per digit of 27: bring the digit down (2, then 27: what remained,
        times 10, plus the digit), estimate how many 14s fit (27/14 rounded: 2), their product
        (28), subtract it as subtraction does, and write the final borrow (999, then '-': 27 - 28
        is below 0); then the digit (the estimate, less 1 after a borrow: 1) and what remains
        (999 + 14 = 13 after a borrow). Every number of the work least significant digit first
        (n+1 digits, n for what remains), as multiplication and subtraction write them, so the
        digits a digit is made of sit at the same distance before it; then the answer.
        Rounding makes an estimate that is off near a multiple of the divisor one too many,
        which the borrow corrects: the model writes the borrow rather than guessing it.

The model is gpt.py's GPTLanguageModel with its own 18-symbol vocabulary. One model learns all
the operations asked for; each batch holds a share of each (--shares; / twice the others),
drawn at random, none of them held out: a quarter with operands of 1 to n digits (--short),
the rest uniform below 10**n, as the held-out problems; a quarter of those of - and / close to
a tie (--tight); 15% of the divisions by 1 to 9 (--small); a divisor of 0 becomes 1. In a
quarter of the steps of long division the estimate is the other one that works (one more, with
a borrow, or one less), its target masked (--other): the model learns to finish a step from
either. The prompt is masked out of the loss (target -1, ignore_index), as in addition.py. It
is scored per operation by greedy decoding, as exact match of the answer (not the work before
it: the answer is what a calculator is for), on 1,000 held-out problems of n-digit operands
(fewer where there are not so many) never seen in training. Training stops once every operation
reaches --target or, for 2 digits, its 570 s of training are up, the learning rate decaying by the
clock (so the steps vary with the machine's speed; --max_steps N alone gives a run that repeats).
At the end it shows, per operation, the first held-out problem as the model writes it, and the
first three it gets wrong, if any, and saves the model (--out).

--ask answers problems with the saved model: the work it wrote, then the answer in reading
order (57/42 = 1 r 15), checked against Python's arithmetic, with a mark where it is wrong.
A problem it cannot take (letters, no operator, an operand longer than it was trained on, a
division by zero) gets one line that says why, and the others are answered.
"""
import io
import os
import re
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import addition  # noqa: E402
import common  # noqa: E402
from common import gpt  # noqa: E402

VOCAB = '0123456789+-*/=r,$' # '$' ends an answer
OPS = '+-*/'
TOKEN = {ch: i for i, ch in enumerate(VOCAB)}


def joined(parts, separator):
    """(B, w_i) token tensors -> one (B, sum of w_i + separators) tensor, the separator between"""
    sep = torch.full((len(parts[0]), 1), TOKEN[separator])
    return torch.cat([t for part in parts for t in (sep, part)][1:], dim=1)


def backwards(x, width):
    """(B,) numbers -> (B, width) digits, least significant first: the order the work writes them"""
    return addition.digits_of(x, width).flip(1)


def decode(tokens):
    return ''.join(VOCAB[t] for t in tokens)


class Problems:
    """n-digit problems of the given operations as token sequences, from a seeded generator."""

    def __init__(self, digits, ops=OPS, cot=False, seed=1337, held_out=True, shares=None, tight=0.0, short=0.0,
                 other=0.0, small=0.0):
        self.n, self.ops, self.cot = digits, ops, cot
        self.tight, self.short, self.small, self.other = tight, short, small, other
        self.shares = shares or [1] * len(ops) # of each batch, per operation
        self.gen = torch.Generator().manual_seed(seed)
        self.held_out = {} # op -> list of (a, b), uniform over n-digit pairs, from their own generator
        gen = torch.Generator().manual_seed(seed + 1)
        for op in ops if held_out else []:
            count = min(1000, 10 ** (2 * digits) // 5)
            held = {}
            while len(held) < count: # a dict keeps the order drawn and drops repeats
                a, b = self.operands(op, count - len(held), gen, training=False)
                held.update(dict.fromkeys(zip(a.tolist(), b.tolist())))
            self.held_out[op] = list(held)
        self.held_set = {(op, a, b) for op, pairs in self.held_out.items() for a, b in pairs}

    @property
    def prompt_length(self):
        return 2 * self.n + 2

    def length(self, op):
        """tokens per problem of this operation: prompt, work (if any), answer, end marker"""
        one = torch.ones(1, dtype=torch.long)
        return self.prompt_length + self.written(op, one, one).shape[1] + 1

    def answer_start(self, op):
        """where the answer begins in a problem of this operation: after its last '='"""
        one = torch.ones(1, dtype=torch.long)
        return int((self.encode(op, one, one)[0] == TOKEN['=']).nonzero().max()) + 1

    def operands(self, op, count, gen, training=True):
        """two (count,) tensors of random numbers below 10**n, uniform; a divisor is at least 1. In
        training, a share `short` of the problems have operands of a random length of 1 to n digits
        (small numbers are rare otherwise), a share `small` of the divisions have a divisor of 1 to 9,
        and a share `tight` of the problems of - and / are drawn where their comparison is close: b
        within 1 of a for -, a within 1 of its nearest multiple of b for / (a remainder of 0, 1 or b-1)."""
        a, b = addition.random_numbers(self.n, count, gen, mixed=False)
        if training and self.short:
            pick = torch.rand(count, generator=gen) < self.short
            short_a, short_b = addition.random_numbers(self.n, count, gen, mixed=True)
            a, b = torch.where(pick, short_a, a), torch.where(pick, short_b, b)
        b = b.clamp(min=1) if op == '/' else b
        if training and self.small and op == '/':
            pick = torch.rand(count, generator=gen) < self.small
            b = torch.where(pick, torch.randint(1, 10, (count,), generator=gen), b)
        if training and self.tight and op in '-/':
            pick = torch.rand(count, generator=gen) < self.tight
            near = torch.randint(-1, 2, (count,), generator=gen)
            if op == '-':
                b = torch.where(pick, (a + near).clamp(0, 10 ** self.n - 1), b)
            else:
                a = torch.where(pick, (torch.round(a / b).long() * b + near).clamp(0, 10 ** self.n - 1), a)
        return a, b

    def written(self, op, a, b, other=None):
        """(B,) operands -> (B, W) tokens of the work, if any, and the answer; other, (B, n) bools:
        the steps of long division that write the other estimate that works (see batch)"""
        n, B = self.n, len(a)
        if op == '+':
            return backwards(a + b, n + 1)
        if op == '-':
            sign = torch.where(a >= b, TOKEN['+'], TOKEN['-'])[:, None]
            return torch.cat([sign, backwards((a - b).abs(), n)], dim=1)
        if op == '*':
            product = backwards(a * b, 2 * n)
            if not self.cot:
                return product
            # the work: the partial products a * (digit j of b) * 10**j, each least significant
            # digit first (so j zeros lead), then the product as their sum
            partials = [torch.cat([torch.zeros(B, j, dtype=torch.long),
                                   backwards(a * (b // 10 ** j % 10), n + 1)], dim=1)
                        for j in range(n)]
            return joined([joined(partials, '+'), product], '=')
        answer = torch.cat([addition.digits_of(a // b, n), torch.full((B, 1), TOKEN['r']),
                            addition.digits_of(a % b, n)], dim=1)
        if not self.cot:
            return answer
        # the work (see the docstring), a step per digit of a, most significant first: c, what
        # remained times 10 plus the digit; e, c/b rounded, at most 9 (c - e*b is then in [-b/2, b));
        # e*b; c - e*b modulo 10**(n+1) and its borrow, '-' where e was one too many; q, e less the
        # borrow; and what remains, c - q*b
        steps, r = [], torch.zeros_like(a)
        for i in range(n):
            c = 10 * r + a // 10 ** (n - 1 - i) % 10
            e = ((2 * c + b) // (2 * b)).clamp(max=9)
            if other is not None: # the other estimate that works: c // b where rounding gave one more, else one more
                e = torch.where(other[:, i], torch.where(e > c // b, e - 1, (e + 1).clamp(max=9)), e)
            p = e * b
            borrow = c < p
            q = e - borrow.long()
            r = c - q * b
            steps.append(torch.cat([backwards(c, n + 1), e[:, None], backwards(p, n + 1),
                                    backwards((c - p) % 10 ** (n + 1), n + 1),
                                    torch.where(borrow, TOKEN['-'], TOKEN['+'])[:, None], q[:, None],
                                    backwards(r, n)], dim=1))
        return joined([joined(steps, ','), answer], '=')

    def encode(self, op, a, b, other=None):
        """(B,) operands of one operation -> (B, length(op)) token sequences"""
        sign, eq, end = (torch.full((len(a), 1), TOKEN[ch]) for ch in (op, '=', '$'))
        return torch.cat([addition.digits_of(a, self.n), sign, addition.digits_of(b, self.n), eq,
                          self.written(op, a, b, other), end], dim=1)

    def batch(self, batch_size):
        """A training batch: per operation (its problems have a length of their own) a pair x, y
        of its share of the batch, none of them held out; the prompt's targets are -1."""
        batches = []
        bounds = [round(batch_size * sum(self.shares[:i]) / sum(self.shares)) for i in range(len(self.ops) + 1)]
        for i, op in enumerate(self.ops):
            count = max(1, bounds[i + 1] - bounds[i])
            keep = torch.zeros(1, dtype=torch.bool)
            while not keep.any(): # a draw of held-out problems only is drawn again
                a, b = self.operands(op, count, self.gen)
                keep = torch.tensor([(op, x, y) not in self.held_set for x, y in zip(a.tolist(), b.tolist())])
            a, b, other = a[keep], b[keep], None
            if op == '/' and self.cot and self.other:
                other = torch.rand(len(a), self.n, generator=self.gen) < self.other
            seq = self.encode(op, a, b, other)
            y = addition.mask_prompt(seq[:, 1:], self.prompt_length)
            if other is not None: # the estimate is not learned there, what follows it is; a step is
                # 4n+6 tokens and a comma, its estimate after the n+1 digits brought down
                at = self.prompt_length - 1 + (4 * self.n + 7) * torch.arange(self.n) + self.n + 1
                y[:, at] = torch.where(other, -1, y[:, at])
            batches.append((seq[:, :-1], y))
        return batches

    def held_out_tensors(self, op):
        a, b = (torch.tensor(x) for x in zip(*self.held_out[op]))
        return self.encode(op, a, b)


def parse_args(argv):
    p = common.argument_parser(__doc__)
    p.add_argument('--digits', type=int, default=2, help='digits per operand, 1 to 9 (default: %(default)s)')
    p.add_argument('--ops', default=OPS, help="the operations, any of '+-*/' (default: %(default)s)")
    p.add_argument('--no-cot', dest='cot', action='store_false',
                   help='no chain of thought: the answer alone, without the work before it (for * the '
                        'partial products, for / the steps of long division)')
    p.add_argument('--shares', type=float, nargs='+', default=None, metavar='SHARE',
                   help='the share of each batch for each operation, in the order of --ops '
                        '(default: 2 for /, 1 for the others)')
    p.add_argument('--tight', type=float, default=0.25,
                   help='the share of the training problems of - and / drawn where their comparison is close '
                        '(default: %(default)s)')
    p.add_argument('--short', type=float, default=0.25,
                   help='the share of the training problems whose operands have a random length of 1 to n '
                        'digits; the others, as the held-out ones, are uniform below 10**n (default: %(default)s)')
    p.add_argument('--other', type=float, default=0.25,
                   help='the share of the steps of long division in training that write the other estimate '
                        'that works, its target masked (default: %(default)s)')
    p.add_argument('--small', type=float, default=0.15,
                   help='the share of the training divisions whose divisor is 1 to 9 (default: %(default)s)')
    p.add_argument('--out', type=os.path.expanduser, default=os.path.join('out', 'calculator.pt'),
                   help='where training saves the model, and where --ask reads it (default: %(default)s)')
    p.add_argument('--ask', nargs='*', metavar='PROBLEM', default=None,
                   help='answer these problems with the saved model, e.g. --ask "57/42" "12*34"; '
                        'with none, one a line from standard input')
    addition.training_options(p, n_layer=None, lr=1e-3, n_layer_help='default: 2 for 2 digits, 3 otherwise',
                              max_steps_help='default: 1000 for 1 digit, 4000 for 2, 2200 x (digits - 1) beyond',
                              max_seconds_help='default: 570 and --decay_by_clock for 2 digits without --max_steps',
                              target_help='stop once each operation has this held-out exact match (default: %(default)s)')
    p.set_defaults(target=0.995)
    args = p.parse_args(argv)
    if not 1 <= args.digits <= 9:
        p.error('--digits must be 1 to 9 (int64 products)')
    if not args.ops or set(args.ops) - set(OPS) or len(set(args.ops)) < len(args.ops):
        p.error(f"--ops takes each of + - * / at most once, e.g. --ops '+-', got {args.ops!r}")
    addition.check_training_options(p, args)
    if args.batch_size < len(args.ops):
        p.error(f'--batch_size must be at least one problem per operation, got {args.batch_size}')
    if args.digits == 2 and args.max_steps is None and args.max_seconds is None: # 10 minutes in all
        args.max_seconds, args.decay_by_clock = 570, True
    args.n_layer = args.n_layer or (2 if args.digits == 2 else 3)
    if args.max_steps is None:
        args.max_steps = {1: 1000, 2: 4000}.get(args.digits, 2200 * (args.digits - 1))
    args.shares = args.shares or [2 if op == '/' else 1 for op in args.ops]
    if len(args.shares) != len(args.ops) or min(args.shares) <= 0:
        p.error(f"--shares takes a share above 0 for each of --ops {args.ops!r}, got {args.shares}")
    if not 0 <= args.tight < 1:
        p.error(f"--tight must be at least 0 and below 1, got {args.tight}")
    for key in ('short', 'small', 'other'):
        if not 0 <= getattr(args, key) <= 1:
            p.error(f"--{key} must be from 0 to 1, got {getattr(args, key)}")
    if os.path.isdir(args.out): # said now, not after the training
        p.error(f"--out {args.out} is a folder: give the name of a file")
    return args


def save(path, model, problems):
    """The model and what --ask needs to read it, written whole or not at all."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True) # out/, as gpt.py makes it
    buffer = io.BytesIO()
    torch.save({'model': model.state_dict(), 'digits': problems.n, 'ops': problems.ops, 'cot': problems.cot,
                'config': {k: getattr(gpt, k) for k in ('n_layer', 'n_head', 'n_embd', 'block_size')}}, buffer)
    common.save_atomically(path, buffer.getvalue())


def load(path, device):
    """The model saved at path, in eval mode, and its Problems; a one-line error if it can't be read."""
    try:
        ckpt = torch.load(path, map_location='cpu', weights_only=True)
    except FileNotFoundError:
        common.fail(f"no model at {path}: train one first (python scripts/calculator.py --out={path})")
    except Exception as e:
        common.fail(f"{path} is not a readable model of calculator.py ({type(e).__name__})")
    if not isinstance(ckpt, dict) or not {'model', 'digits', 'ops', 'cot', 'config'} <= ckpt.keys():
        common.fail(f"{path} is not a model of calculator.py")
    vars(gpt).update(ckpt['config']) # n_layer, n_head, n_embd, block_size
    gpt.dropout, gpt.fast_attention = 0.0, True
    model = gpt.GPTLanguageModel(len(VOCAB))
    model.load_state_dict(ckpt['model'])
    return model.to(device).eval(), Problems(ckpt['digits'], ckpt['ops'], cot=ckpt['cot'], held_out=False)


def ask(args, lines):
    """Answer each problem in lines with the model at args.out: its work, then its answer in reading
    order, checked against Python's. A problem it cannot take gets one line that says why."""
    model, problems = load(args.out, args.device)
    n, wrong = problems.n, 0
    for line in lines:
        text = ''.join(line.split())
        m = re.fullmatch(r'(\d+)([-+*/])(\d+)', text)
        if not text:
            continue
        why = ("it is not a number, an operation (+ - * /) and a number" if not m else
               f"the model does {', '.join(problems.ops)}, not {m.group(2)}" if m.group(2) not in problems.ops else
               f"the model was trained on numbers of at most {n} digits" if max(map(int, m.group(1, 3))) >= 10 ** n else
               "division by zero" if m.group(2) == '/' and int(m.group(3)) == 0 else None)
        if why:
            print(f"{text}: cannot answer: {why}")
            continue
        a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
        prompt = problems.encode(op, torch.tensor([a]), torch.tensor([b]))[:, :problems.prompt_length]
        out = addition.greedy(model, prompt.to(args.device), problems.length(op) - problems.prompt_length)
        written = decode(out[0, problems.prompt_length:].tolist()).split('$')[0]
        work, _, answer = written.rpartition('=')
        right = {'+': str(a + b), '-': str(a - b), '*': str(a * b), '/': f"{a // b} r {a % b}" if b else ''}[op]
        given = reading_order(op, answer)
        wrong += given != right
        print((f"  work: {work}\n" if work else '') + f"{a}{op}{b} = {given}"
              + ('' if given == right else f"   <- WRONG: {right}"))
    return wrong


def reading_order(op, answer):
    """The answer as the model writes it (see the docstring), in plain reading order; '?' where it
    is not the form the model was trained to write."""
    digits = re.fullmatch(r'\d+', answer[1:] if op == '-' else answer)
    if op == '/':
        m = re.fullmatch(r'(\d+)r(\d+)', answer)
        return f"{int(m.group(1))} r {int(m.group(2))}" if m else f"? ({answer})"
    if not digits or op == '-' and answer[:1] not in '+-':
        return f"? ({answer})"
    number = int(digits.group()[::-1]) # least significant digit first
    return str(-number if op == '-' and answer[0] == '-' else number)


def main(argv):
    args = parse_args(argv)
    common.check_device(args.device)
    if args.ask is not None:
        return ask(args, args.ask or sys.stdin)
    t_start = time.time()
    problems = Problems(args.digits, args.ops, cot=args.cot, seed=args.seed, shares=args.shares, tight=args.tight,
                        short=args.short, other=args.other, small=args.small)
    block = max(map(problems.length, args.ops)) - 1 # the longest problem, less its last token
    model, optimizer = addition.build_model(args, len(VOCAB), block)
    held = {op: problems.held_out_tensors(op) for op in args.ops}
    print(f"{args.digits}-digit operands, {' '.join(args.ops)}; e.g. "
          + ', '.join(decode(seq[0].tolist()) for seq in held.values()))
    print(f"{sum(p.numel() for p in model.parameters()):,} parameters; {sum(map(len, held.values()))} held-out "
          f"problems; up to {args.max_steps} steps of {args.batch_size}"
          + (f" or {args.max_seconds:g} s of training" if args.max_seconds else ''))

    def batch_loss():
        losses = [addition.masked_loss(model(xb.to(args.device))[0], yb.to(args.device))
                  for xb, yb in problems.batch(args.batch_size)]
        return sum(losses) / len(losses) # each operation counts the same

    written, right = {}, {} # per operation, from the last evaluation (shown at the end, not decoded again)

    def evaluate():
        for op, seq in held.items():
            written[op] = addition.answers(model, seq, problems.prompt_length, args.device)
            right[op] = addition.solved(written[op], seq, problems.answer_start(op))
        return {op: right[op].sum().item() / len(right[op]) for op in held}

    scores, step = addition.train(args, model, optimizer, batch_loss, evaluate, t_start)

    print(f"done after {step} steps, {time.time() - t_start:.1f} s in all: "
          + ', '.join(f"{op} {s:.1%}" for op, s in scores.items()))
    for op, seq in held.items(): # the first held-out problem as the model wrote it, then its first mistakes
        out, start = written[op], problems.answer_start(op)
        wrong = (~right[op]).nonzero()[:, 0].tolist()
        print('  ' + decode(out[0].tolist()))
        if wrong:
            print(f"  {op} wrong on {len(wrong)} of {len(seq)}, the first {min(3, len(wrong))}:")
        for i in wrong[:3]:
            print(f"    {decode(out[i].tolist())}, not {decode(seq[i, start:-1].tolist())}")
    save(args.out, model, problems)
    a, b = problems.held_out[args.ops[-1]][0]
    print(f"saved the model to {args.out}; ask it: python scripts/calculator.py --out={args.out} "
          f"--ask \"{a}{args.ops[-1]}{b}\"")
    return scores


if __name__ == '__main__':
    common.run(main, sys.argv[1:], shrink='--batch_size, or a smaller model')
