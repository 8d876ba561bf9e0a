"""
Sample text from a checkpoint that gpt.py saved, without training.

    python scripts/sample.py                                      # from out/best.pt, printed as it comes
    python scripts/sample.py --prompt="ROMEO:" --temperature=0.8 --top_k=40 --num_samples=3
    python scripts/sample.py --prompt=@prompt.txt --max_new_tokens=10000 --out=more.txt
    python scripts/sample.py --ckpt=model.pt     # torch.save(model.state_dict(), 'model.pt') in the lecture's code

With no --temperature and no --top_k this is the lecture's plain multinomial sampling.
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gpt  # noqa: E402


def positive(kind, hint=''):
    def parse(text):
        value = kind(text)
        if not 0 < value < float('inf'):
            raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}{hint}")
        return value
    parse.__name__ = kind.__name__
    return parse


def add_model_options(p, prompt_default=None, prompt_help=None):
    """--ckpt, and --prompt where prompt_help is given, as this script, attention_map.py and
    evaluate.py take them."""
    p.add_argument('--ckpt', type=os.path.expanduser, default=os.path.join('out', 'best.pt'),
                   help="checkpoint, or an out_dir to take its best.pt, or a state_dict of the lecture's "
                   "model of Tiny Shakespeare (default: %(default)s)")
    if prompt_help:
        p.add_argument('--prompt', default=prompt_default, help=prompt_help)


def check_model_options(p, args):
    """--ckpt and --prompt checked, with their errors through p; a run's folder means its best.pt."""
    if not args.ckpt:
        p.error("--ckpt is empty: give a checkpoint, or a run's folder for its best.pt")
    if getattr(args, 'prompt', None) == '@':
        p.error("--prompt=@ needs the name of a file after the @")
    if os.path.isdir(args.ckpt): # --ckpt=out: the run's best model
        args.ckpt = os.path.join(args.ckpt, 'best.pt')


def parse_args(argv):
    p = gpt.argument_parser(__doc__)
    add_model_options(p, '', "text to continue, or @FILE to read it from a file (default: a newline, "
                      "as in the lecture)")
    p.add_argument('--max_new_tokens', type=int, default=500,
                   help='characters to generate per sample (default: %(default)s)')
    greedy = ' (--top_k=1 takes the likeliest character every time)'
    p.add_argument('--temperature', type=positive(float, greedy), default=1.0,
                   help="< 1 is more conservative, > 1 wilder (default: 1.0, the model's own odds)")
    p.add_argument('--top_k', type=positive(int), default=None,
                   help='sample only among the k likeliest characters (default: all of them)')
    p.add_argument('--num_samples', type=positive(int), default=1, help='default: %(default)s')
    p.add_argument('--seed', type=int, default=1337,
                   help='the same seed gives the same text (default: %(default)s)')
    p.add_argument('--device', default=gpt.device, help='default: %(default)s')
    p.add_argument('--out', type=os.path.expanduser, default=None,
                   help='write the samples to this file instead of printing them')
    p.add_argument('--progress_seconds', type=float, default=10.0,
                   help="a progress line on stderr at least this often while samples that are not "
                   "printed as they come are generated (0: none; default: %(default)s)")
    args = p.parse_args(argv)
    if args.max_new_tokens < 0:
        p.error(f"--max_new_tokens must be >= 0, got {args.max_new_tokens}")
    if not args.progress_seconds >= 0:
        p.error(f"--progress_seconds must be >= 0, got {args.progress_seconds}")
    if args.temperature < torch.finfo(torch.float32).tiny: # the float32 logits would divide by 0
        p.error(f"--temperature must be at least {torch.finfo(torch.float32).tiny:.1e}, "
                f"got {args.temperature}{greedy}")
    if args.seed not in gpt.SEEDS:
        p.error(f"--seed must be from -2**63 to 2**64 - 1, got {args.seed}")
    check_model_options(p, args)
    problem = args.out and gpt.why_cannot_write(args.out) # now, not after sampling
    if problem:
        p.error(f"--out {args.out}: {problem}")
    return args


def read_prompt(prompt):
    if not prompt.startswith('@'):
        return prompt
    path = os.path.expanduser(prompt[1:])
    try:
        with open(path, encoding='utf-8-sig') as f: # -sig: without the byte-order mark some editors put first
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        gpt.fail(f"cannot read the prompt file {path}: {gpt.why_unreadable(e)}")


def check_vocabulary(text, chars, hint='', what='the prompt'):
    """A one-line error if text (what it is: the prompt) has characters that the model never saw."""
    unknown = sorted(set(text) - set(chars))
    if unknown:
        gpt.fail(f"{what} has characters the model never saw: {''.join(unknown)!r} "
                 f"({len(unknown)} of them); its vocabulary is {''.join(chars)!r}{hint}")


def load_model(path, device):
    """Rebuild GPTLanguageModel with the checkpoint's shape and load its weights on device."""
    checkpoint = gpt.load_checkpoint(path, map_location='cpu') # a GPU checkpoint loads anywhere
    for key in gpt.SHAPE_KEYS:
        setattr(gpt, key, checkpoint['config'][key])
    gpt.dropout = 0.0
    model = gpt.GPTLanguageModel(len(checkpoint['chars']))
    gpt.load_weights(model, checkpoint, path)
    if not all(p.isfinite().all() for p in model.parameters()):
        gpt.fail(f"the model in {path} has weights that are not numbers: its training diverged")
    return model.to(device).eval(), checkpoint


def main(argv):
    gpt.print_any_text()
    args = parse_args(argv)
    gpt.check_device(args.device)
    model, checkpoint = load_model(args.ckpt, args.device)
    chars = checkpoint['chars']
    encode, decode = gpt.make_codec(chars)

    prompt = read_prompt(args.prompt)
    check_vocabulary(prompt, chars)
    start = encode(prompt) if prompt else [0] # token 0 is '\n', the lecture's start
    context = torch.tensor([start] * args.num_samples, dtype=torch.long, device=args.device)

    torch.manual_seed(args.seed)
    stream = not args.out and args.num_samples == 1 # one sample to the screen: each character as it comes
    if stream:
        print(decode(start), end='', flush=True)
    t0 = t_print = time.time()
    n = args.max_new_tokens
    for i in range(1, n + 1): # generate's loop one step at a time: the same samples
        context = model.generate(context, 1, temperature=args.temperature, top_k=args.top_k)
        if stream:
            print(decode([context[0, -1].item()]), end='', flush=True)
        elif args.progress_seconds and time.time() - t_print >= args.progress_seconds and i < n:
            t_print = time.time() # the lecture's more.txt, 10,000 characters, takes minutes on a CPU
            seconds = (t_print - t0) / i
            print(f"{i:,} of {n:,} characters | {t_print - t0:.1f}s, {seconds * 1000:.1f} ms/character, "
                  f"{gpt.duration((n - i) * seconds)} left", file=sys.stderr, flush=True)
    if stream:
        print()
        return
    samples = [decode(row.tolist()) for row in context]
    text = '\n---------------\n'.join(samples) + '\n'
    if args.out:
        gpt.save_atomically(args.out, lambda f: f.write(text.encode('utf-8')))
        print(f"wrote {args.num_samples} sample(s), {len(text):,} characters, to {args.out}")
    else:
        print(text, end='')


if __name__ == '__main__':
    gpt.run_main(main, sys.argv[1:], shrink='--num_samples')
