"""
Exercise EX3: pretrain on a larger data set, then finetune on Tiny Shakespeare with fewer steps
and a lower learning rate. Does the pretraining give a lower val loss than Tiny Shakespeare alone?

    python scripts/ex3.py --corpus=big.txt                       # 5 runs, the CPU preset's model: 7 min
    python scripts/ex3.py --corpus=big.txt --finetune_lr 4e-4 2e-3 --finetune_iters=550
    python scripts/ex3.py --corpus=big.txt --preset= --device=cuda   # the lecture's model, on a GPU

The corpus is any UTF-8 text. It is written in Tiny Shakespeare's 65 characters (tabs become
spaces, curly quotes and dashes plain ones, accents are dropped, other characters removed), so
one model reads both. Don't use the Complete Works of Shakespeare: Tiny Shakespeare is cut from
them, so the model would have seen the val split before it is tested on it.

Every run is `python gpt.py --preset=cpu` (its model, schedule and evaluations) with another
step count or data. Any setting of gpt.py can follow as --key=value: --preset= (empty) gives the
lecture's config. On a GPU too the runs are float32, as on a CPU.
- scratch, F steps: Tiny Shakespeare alone, as many steps as the finetuning
- scratch, P+F steps: Tiny Shakespeare alone, as many steps as pretraining and finetuning together
- pretrain, P steps: the corpus alone; also evaluated on Tiny Shakespeare's val split as it goes
- finetune, F steps: the pretrained weights, then Tiny Shakespeare at --finetune_lr (each one given),
  a fresh AdamW and the scratch runs' batches, so that only the starting weights differ
"""
import os
import re
import sys
import time
import unicodedata

import torch

import common  # noqa: E402 (beside this file)
from common import fail, gpt  # noqa: E402

# characters that have a near twin in Tiny Shakespeare's vocabulary
TWINS = str.maketrans({'\t': ' ', '\u2018': "'", '\u2019': "'", '\u2013': '-', '\u2014': '-'})


def to_vocabulary(text, chars):
    """text written with only the characters in chars: twins replaced, accents dropped
    (é -> e), anything else removed, and runs of spaces made one."""
    text = unicodedata.normalize('NFKD', text.translate(TWINS)) # é -> e + a combining accent
    keep = set(chars)
    text = ''.join(c for c in text if c in keep)
    return re.sub(' {2,}', ' ', text)


def train(model, splits, steps, label, lr=None):
    """gpt.py's loop (with its lr schedule, scaled to `steps`): evaluate every eval_interval
    steps and after the last; the evaluations of the last step. ex4.py trains through it too."""
    settings = {k: getattr(gpt, k) for k in ('max_iters', 'learning_rate', 'min_lr')}
    gpt.max_iters = steps
    if lr is not None:
        gpt.learning_rate, gpt.min_lr = lr, lr / 10
    optimizer, scaler = common.optimizer(model)
    t0 = t_last = time.time()
    step_last = 0
    try:
        for step in range(steps + 1):
            if step % gpt.eval_interval == 0 or step == steps:
                losses = gpt.estimate_loss(model, splits)
                now = time.time() # and the speed since the last evaluation, this one included
                speed = f", {(now - t_last) / (step - step_last) * 1000:.1f} ms/step" if step else ''
                print(f"{label} step {step}: " + ', '.join(f"{k} loss {v:.4f}" for k, v in losses.items())
                      + f" | {now - t0:.0f}s{speed}", flush=True)
                t_last, step_last = now, step
            if step == steps:
                break
            common.train_step(model, optimizer, scaler, *gpt.get_batch(splits['train']), gpt.get_lr(step))
    finally:
        for k, v in settings.items():
            setattr(gpt, k, v)
    return losses, time.time() - t0


def new_model(vocab_size):
    """Built as gpt.py builds it, after torch.manual_seed(gpt.seed): the batches drawn next are the
    ones gpt.py draws."""
    torch.manual_seed(gpt.seed)
    return gpt.GPTLanguageModel(vocab_size).to(gpt.device)


def main(argv):
    p = common.argument_parser(__doc__, allow_abbrev=False) # every other --key=value goes to gpt.py
    p.add_argument('--corpus', type=os.path.expanduser, required=True,
                   help='the larger text to pretrain on (UTF-8)')
    p.add_argument('--pretrain_iters', type=int, default=None, help="P (default: the config's max_iters)")
    p.add_argument('--finetune_iters', type=int, default=None, help='F (default: half of P)')
    p.add_argument('--finetune_lr', type=float, nargs='+', default=None,
                   help="peak learning rates of the finetuning, a finetuning each (default: a quarter "
                   "of the config's learning_rate, as the exercise suggests, and the rate itself)")
    args, settings = p.parse_known_args(argv)
    for arg in settings:
        if arg[2:].partition('=')[0] not in gpt.config_keys or not arg.startswith('--'):
            p.error(f"unrecognized argument {arg!r}: ex3.py takes its own options and gpt.py's "
                    "settings as --key=value")
    gpt.configure(['--preset=cpu', '--device=cpu', '--use_tf32=False', '--use_bf16=False',
                   '--use_compile=False', *settings])
    P = gpt.max_iters if args.pretrain_iters is None else args.pretrain_iters
    F = P // 2 if args.finetune_iters is None else args.finetune_iters
    rates = args.finetune_lr or [gpt.learning_rate / 4, gpt.learning_rate]
    if min(P, F) < 1:
        p.error(f"--pretrain_iters and --finetune_iters must be at least 1, got {P} and {F}")
    if min(rates) <= 0:
        p.error(f"--finetune_lr must be > 0, got {min(rates):g}")
    if not args.corpus:
        p.error("--corpus is empty: give the larger text to pretrain on")
    if gpt.input_file:
        p.error("--input_file: ex3.py finetunes on Tiny Shakespeare; give your larger text as --corpus")

    text = gpt.read_text()
    chars = sorted(set(text))
    encode, _ = common.codec(chars)
    try:
        with open(args.corpus, encoding='utf-8') as f:
            corpus = to_vocabulary(f.read(), chars)
    except UnicodeDecodeError:
        fail(f"{args.corpus} is not UTF-8 text")
    if len(corpus) < 20 * gpt.block_size:
        fail(f"{args.corpus} holds only {len(corpus):,} characters of Tiny Shakespeare's vocabulary; "
                 f"pretraining needs far more")
    tiny_train, tiny_val = common.split(torch.tensor(encode(text), dtype=torch.long).to(gpt.device))
    big_train, big_val = common.split(torch.tensor(encode(corpus), dtype=torch.long).to(gpt.device))
    print(f"corpus: {args.corpus}, {len(corpus):,} characters in Tiny Shakespeare's vocabulary "
          f"({len(corpus) / len(text):.1f} times Tiny Shakespeare); P={P}, F={F}, on {gpt.device}",
          flush=True)

    tiny = {'train': tiny_train, 'val': tiny_val}
    rows, corpus_gap, stopped = [], None, False
    run = lambda name: f"run {len(rows) + 1}/{3 + len(rates)}, {name}" # a label for its lines
    try:
        losses, seconds = train(new_model(len(chars)), tiny, F, run(f'scratch-{F}'))
        rows.append((f'scratch, {F} steps', 0, F, losses['val'], seconds))
        losses, seconds = train(new_model(len(chars)), tiny, P + F, run(f'scratch-{P + F}'))
        rows.append((f'scratch, {P + F} steps', 0, P + F, losses['val'], seconds))
        pretrained = new_model(len(chars))
        big = {'train': big_train, 'val': big_val, 'shakespeare val': tiny_val}
        losses, seconds = train(pretrained, big, P, run('pretrain'))
        rows.append((f'pretrain, {P} steps (no finetuning)', P, 0, losses['shakespeare val'], seconds))
        corpus_gap = losses['val'] - losses['train']
        pretrain_seconds = seconds
        for lr in rates:
            model = new_model(len(chars)) # the same random numbers as the scratch runs from here
            model.load_state_dict(pretrained.state_dict())
            losses, seconds = train(model, tiny, F, run(f'finetune lr {lr:g}'), lr=lr)
            rows.append((f'pretrain {P}, then finetune {F} steps at lr {lr:g}', P, F, losses['val'],
                         pretrain_seconds + seconds))
    except KeyboardInterrupt: # the table of what finished, rather than nothing after minutes
        stopped = True
        print(f"\nCtrl-C: stopped; the table has the {len(rows)} of {3 + len(rates)} runs that finished",
              flush=True)
        if not rows:
            sys.exit(130)

    print('\n| run | steps on the corpus | steps on Tiny Shakespeare | Tiny Shakespeare val loss '
          '| seconds in all |')
    print('| --- | ---: | ---: | ---: | ---: |')
    for name, p_steps, f_steps, val, seconds in rows:
        print(f"| {name} | {p_steps:,} | {f_steps:,} | {val:.4f} | {seconds:.0f} |")
    gap = ('' if corpus_gap is None else
           f"after pretraining, the corpus's val loss minus its train loss: {corpus_gap:+.4f}; ")
    print(f"\n{gap}PyTorch {torch.__version__}")
    if stopped:
        sys.exit(130)


if __name__ == '__main__':
    common.run(main, sys.argv[1:], shrink='--batch_size or --block_size, or a smaller model')
