"""
Sample text from a checkpoint that gpt.py saved, without training.

    python scripts/sample.py                  # the latest run's best.pt (out/, out-cpu/), printed as it comes
    python scripts/sample.py --prompt="ROMEO:" --temperature=0.8 --top_k=40 --num_samples=3
    python scripts/sample.py --prompt=@prompt.txt --max_new_tokens=10000 --out=more.txt
    python scripts/sample.py --ckpt=model.pt     # torch.save(model.state_dict(), 'model.pt') in the lecture's code
    python scripts/sample.py --ckpt=mine.pt --code=my_gpt.py   # the GPT you wrote along with the video (or .ipynb)

With no --temperature and no --top_k this is the lecture's plain multinomial sampling.
"""
import argparse
import os
import re
import sys

import torch

import common
from common import fail, gpt

# Tiny Shakespeare's 65 characters, sorted: the vocabulary of a bare state_dict, which holds none
DATA_CHARS = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def positive(kind):
    def parse(text):
        value = kind(text)
        if not 0 < value < float('inf'):
            raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
        return value
    parse.__name__ = kind.__name__
    return parse


def add_model_options(p, prompt_default=None, prompt_help=None):
    """--ckpt, and --prompt where prompt_help is given: this script, attention_map.py, evaluate.py."""
    p.add_argument('--ckpt', type=os.path.expanduser, default=os.path.join(common.latest_run(), 'best.pt'),
                   help="checkpoint, or an out_dir to take its best.pt, or a state_dict of the lecture's "
                   "model of Tiny Shakespeare (default: the latest run's, %(default)s)")
    p.add_argument('--code', type=os.path.expanduser, default=None,
                   help="your .py or .ipynb that made --ckpt, a state_dict of the GPT you wrote along with the video: "
                   "its layers are mapped onto gpt.py's, whatever their names")
    if prompt_help:
        p.add_argument('--prompt', default=prompt_default, help=prompt_help)


def checked_model_options(p, args):
    """args, with --ckpt a file (a run's folder means its best.pt) and --prompt read (@FILE)."""
    if not args.ckpt:
        p.error("--ckpt is empty: give a checkpoint, or a run's folder for its best.pt")
    if os.path.isdir(args.ckpt):
        args.ckpt = os.path.join(args.ckpt, 'best.pt')
    if args.code and not os.path.isfile(args.code):
        p.error(f"--code {args.code}: no such file")
    if getattr(args, 'prompt', None) and args.prompt.startswith('@'):
        try:
            with open(os.path.expanduser(args.prompt[1:]), encoding='utf-8-sig') as f:
                args.prompt = f.read()
        except (OSError, UnicodeDecodeError) as e:
            p.error(f"cannot read the prompt file {args.prompt[1:]!r}: "
                    f"{getattr(e, 'strerror', None) or 'it is not UTF-8 text'}")
    return args


def check_vocabulary(text, chars, what='the prompt', hint=''):
    """A one-line error if text has characters that the model never saw."""
    unknown = sorted(set(text) - set(chars))
    if unknown:
        fail(f"{what} has characters the model never saw: {''.join(unknown)!r}; its vocabulary is "
             f"{''.join(chars)!r}{hint}")


def read_checkpoint(path, code=None):
    """gpt.py's checkpoint, a bare state_dict of the lecture's model of Tiny Shakespeare (its shape read off its
    weights), or with code, a state_dict of the model that code builds, as {'model', 'config', 'chars'}; a
    one-line error for anything else."""
    try:
        ckpt = torch.load(path, map_location='cpu', weights_only=True)
    except FileNotFoundError:
        fail(f"no checkpoint at {path} (gpt.py writes ckpt.pt and best.pt into its --out_dir: out/, or out-cpu/ "
             "for the preset)")
    except Exception as e:
        fail(f"{path} is not a readable checkpoint ({type(e).__name__}): damaged, cut short, or not one")
    state_dict = lambda d: isinstance(d, dict) and d and all(torch.is_tensor(v) for v in d.values())
    unwrapped = lambda d: {k.removeprefix('_orig_mod.'): v for k, v in d.items()} # of a torch.compile'd model
    if code and isinstance(ckpt, dict) and 'chars' not in ckpt: # theirs: a state_dict, or one inside a dict
        found = next((d for d in (ckpt, *ckpt.values()) if state_dict(d)), None)
        if found is None:
            fail(f"{path} holds no state_dict (torch.save(model.state_dict(), '{os.path.basename(path)}'))")
        import adopt # (beside this file: the checker's mapping of your layers onto gpt.py's)
        return adopt.adopt(code, unwrapped(found), path, DATA_CHARS)
    if state_dict(ckpt):
        weights = unwrapped(ckpt)
        table = weights.get('token_embedding_table.weight')
        if table is None or 'position_embedding_table.weight' not in weights or len(table) != len(DATA_CHARS):
            fail(f"{path} holds a state_dict, but not one of the lecture's GPT of Tiny Shakespeare; if it is of "
                 "the GPT you wrote, name your code: --code=my_gpt.py (or .ipynb)")
        heads = {m.group(1) for m in map(re.compile(r'blocks\.0\.sa\.heads\.(\d+)\.').match, weights) if m}
        layers = {m.group(1) for m in map(re.compile(r'blocks\.(\d+)\.').match, weights) if m}
        config = dict(n_embd=table.shape[1], n_head=len(heads) or 1, n_layer=len(layers),
                      block_size=len(weights['position_embedding_table.weight']))
        print(f"note: {path} is a bare state_dict: read with " + ' '.join(f'{k}={v}' for k, v in config.items())
              + " and Tiny Shakespeare's characters", file=sys.stderr)
        return {'model': weights, 'config': config, 'chars': list(DATA_CHARS)}
    if not isinstance(ckpt, dict) or not {'model', 'config', 'chars'} <= ckpt.keys():
        fail(f"{path} is not a checkpoint of gpt.py: it has no model, config and characters")
    return ckpt


def load_model(path, device, code=None):
    """GPTLanguageModel built with the checkpoint's shape, its weights loaded, in eval mode on device;
    and the checkpoint. code: the learner's file whose model made the state_dict at path."""
    ckpt = read_checkpoint(path, code)
    for key in ('n_embd', 'n_head', 'n_layer', 'block_size'):
        setattr(gpt, key, ckpt['config'][key])
    gpt.dropout = 0.0
    model = gpt.GPTLanguageModel(len(ckpt['chars']))
    try:
        model.load_state_dict(ckpt['model'])
    except RuntimeError as e: # 'Error(s) in loading state_dict ...', then what does not fit
        fail(f"{path} does not fit GPTLanguageModel: " + ' '.join(str(e).split('\n', 1)[-1].split())[:200])
    if not all(p.isfinite().all() for p in model.parameters()):
        fail(f"the model in {path} has weights that are not numbers: its training diverged")
    return model.to(device).eval(), ckpt


def main(argv):
    p = common.argument_parser(__doc__)
    add_model_options(p, '', "text to continue, or @FILE to read it from a file (default: a newline, "
                      "as in the lecture)")
    p.add_argument('--max_new_tokens', type=int, default=500, help='characters per sample (default: %(default)s)')
    p.add_argument('--temperature', type=positive(float), default=1.0,
                   help="< 1 is more conservative, > 1 wilder; --top_k=1 is greedy (default: 1.0)")
    p.add_argument('--top_k', type=positive(int), default=None,
                   help='sample only among the k likeliest characters (default: all of them)')
    p.add_argument('--num_samples', type=positive(int), default=1, help='default: %(default)s')
    p.add_argument('--seed', type=int, default=1337, help='the same seed, the same text (default: %(default)s)')
    p.add_argument('--device', default=gpt.device, help='default: %(default)s')
    p.add_argument('--out', type=os.path.expanduser, default=None, help='write the samples to this file')
    args = checked_model_options(p, p.parse_args(argv))
    if args.temperature < 1e-6: # the logits divided by it would overflow
        p.error(f"--temperature must be at least 1e-6, got {args.temperature} (--top_k=1 takes the likeliest)")
    if args.max_new_tokens < 0 or args.seed not in common.SEEDS:
        p.error(f"--max_new_tokens must be >= 0 and --seed an int64, got {args.max_new_tokens} and {args.seed}")
    common.check_output(p, 'out', args.out)
    common.check_device(args.device)
    model, ckpt = load_model(args.ckpt, args.device, args.code)
    encode, decode = common.codec(ckpt['chars'])
    check_vocabulary(args.prompt, ckpt['chars'])
    print(f"note: sampling from {args.ckpt}" + (f" (step {ckpt['step']}, best val loss {ckpt['best_val_loss']:.4f})"
                                                 if 'step' in ckpt else ''), file=sys.stderr)
    start = encode(args.prompt) if args.prompt else [0] # token 0 is '\n', the lecture's start
    context = torch.tensor([start] * args.num_samples, dtype=torch.long, device=args.device)

    torch.manual_seed(args.seed)
    stream = not args.out and args.num_samples == 1 # one sample to the screen: each character as it comes
    print(decode(start) if stream else '', end='', flush=True)
    for _ in range(args.max_new_tokens): # generate's loop one step at a time: the same samples
        context = model.generate(context, 1, temperature=args.temperature, top_k=args.top_k)
        if stream:
            print(decode([context[0, -1].item()]), end='', flush=True)
    if stream:
        print()
        return
    text = '\n---------------\n'.join(decode(row.tolist()) for row in context) + '\n'
    if args.out:
        common.save_atomically(args.out, text.encode('utf-8'))
        print(f"wrote {args.num_samples} sample(s), {len(text):,} characters, to {args.out}")
    else:
        print(text, end='')


if __name__ == '__main__':
    common.run(main, sys.argv[1:], shrink='--num_samples')
