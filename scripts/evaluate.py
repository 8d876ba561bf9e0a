"""
The loss of a checkpoint over every character of the val split (or the train split), exactly,
where gpt.py estimates it from eval_iters random batches; in nats per character (the loss gpt.py
prints), bits per character and perplexity, beside what gzip, bzip2 and xz make of the same text.

    python scripts/evaluate.py                          # the latest run's best.pt, on the val split
    python scripts/evaluate.py --ckpt=runs/a --split=train
    python scripts/evaluate.py --ckpt=model.pt          # a state_dict of the lecture's model

It goes over the text twice: in windows of block_size side by side, each character predicted from
the 1 to block_size characters before it in its window, as in gpt.py's batches (the loss they
estimate, without their noise); then in windows that overlap by half, each character (but those
of the first window) predicted from at least half a block before it, as a compressor would use the
model: with as much as it can see of what came before.
"""
import bz2
import gzip
import lzma
import math
import os
import sys
import time

import torch
from torch.nn import functional as F

import common  # noqa: E402 (beside this file)
from common import fail, gpt  # noqa: E402
import sample  # noqa: E402 (beside this file)

COMPRESSORS = { # the formats of the command-line tools with these options
    'gzip -9': lambda b: gzip.compress(b, 9, mtime=0),
    'bzip2 -9': lambda b: bz2.compress(b, 9),
    'xz -9': lambda b: lzma.compress(b, preset=9),
}


def parse_args(argv):
    p = common.argument_parser(__doc__)
    sample.add_model_options(p)
    p.add_argument('--split', choices=['val', 'train'], default='val', help='default: %(default)s')
    p.add_argument('--input_file', type=os.path.expanduser, default=None,
                   help="the text the model was trained on (default: the checkpoint's, which is Tiny "
                   "Shakespeare unless it was trained with --input_file)")
    p.add_argument('--batch_size', type=sample.positive(int), default=16,
                   help='windows of block_size characters per forward pass (default: %(default)s)')
    p.add_argument('--device', default=gpt.device, help='default: %(default)s')
    p.add_argument('--progress_seconds', type=float, default=10.0,
                   help="a progress line on stderr at least this often (0: none; default: %(default)s)")
    args = p.parse_args(argv)
    if not args.progress_seconds >= 0:
        p.error(f"--progress_seconds must be >= 0, got {args.progress_seconds}")
    return sample.checked_model_options(p, args)


def windows(n, block_size, stride):
    """(start, scored) for windows data[start : start + block_size + 1] over n characters, stride
    apart: each target data[1:] in exactly one window, as one of its last `scored` targets. The
    last window is flush with the end of data."""
    starts = list(range(0, n - block_size, stride))
    if starts[-1] != n - block_size - 1:
        starts.append(n - block_size - 1)
    scored, end = [], 0 # end: the targets up to data[end] are scored
    for start in starts:
        scored.append(start + block_size - end)
        end = start + block_size
    return list(zip(starts, scored))


@torch.no_grad()
def exact_loss(model, data, block_size, stride, batch_size=16, progress=None):
    """Mean of -log p(data[t] | the characters before it in its window) over every t >= 1, in
    nats: windows of block_size, stride apart (see windows). progress(done, total) after each batch."""
    todo = windows(len(data), block_size, stride)
    t = torch.arange(block_size + 1, device=data.device)
    sums = [] # of each batch, on the device; added up in float64 on the CPU (MPS has no float64)
    for i in range(0, len(todo), batch_size):
        batch = todo[i:i + batch_size]
        starts = torch.tensor([start for start, _ in batch], device=data.device)
        chunk = data[starts[:, None] + t] # (b, block_size + 1)
        logits, _ = model(chunk[:, :-1])
        nll = F.cross_entropy(logits.transpose(1, 2).float(), chunk[:, 1:], reduction='none') # (b, T)
        scored = torch.tensor([m for _, m in batch], device=data.device)
        sums.append(nll[t[:-1] >= block_size - scored[:, None]].sum()) # each window's last `scored`
        if progress:
            progress(i + len(batch), len(todo))
    return torch.stack(sums).cpu().double().sum().item() / (len(data) - 1)


def compressed_bits(text, before=''):
    """Bits per character each compressor needs for text, alone, or after `before` (its size taken
    off): what it knows of text from before."""
    data, prior = text.encode(), before.encode()
    return {name: max(0, len(squeeze(prior + data)) - (len(squeeze(prior)) if prior else 0)) * 8 / len(text)
            for name, squeeze in COMPRESSORS.items()} # max: of a tiny text, one may come out a byte smaller


def main(argv):
    args = parse_args(argv)
    common.check_device(args.device)
    model, checkpoint = sample.load_model(args.ckpt, args.device, args.code)
    chars, block_size = checkpoint['chars'], checkpoint['config']['block_size']
    input_file = checkpoint['config'].get('input_file', '') if args.input_file is None else args.input_file
    if input_file and not os.path.exists(input_file):
        fail(f"{input_file}, the text the model was trained on, is not there: give its path "
                 "with --input_file")
    gpt.input_file = input_file
    text = gpt.read_text()
    sample.check_vocabulary(text, chars, what=input_file or gpt.INPUT_PATH,
                            hint=': is it the text the model was trained on? (--input_file)')
    encode, _ = common.codec(chars)
    train, val = common.split(text)
    split = val if args.split == 'val' else train
    if len(split) <= block_size:
        fail(f"the {args.split} split has {len(split):,} characters; the model reads windows of "
                 f"{block_size + 1}")
    data = torch.tensor(encode(split), dtype=torch.long, device=args.device)
    print(f"{args.ckpt}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, block_size "
          f"{block_size}, on every character of the {args.split} split ({len(split):,})", flush=True)

    def progress(label):
        """A line on stderr every progress_seconds while a pass runs."""
        t_start = t_print = time.time()
        def show(done, total):
            nonlocal t_print
            if args.progress_seconds and time.time() - t_print >= args.progress_seconds and done < total:
                t_print = time.time()
                seconds = (t_print - t_start) / done
                left = common.duration((total - done) * seconds)
                print(f"{label}: window {done:,} of {total:,} | {t_print - t0:.1f}s, "
                      f"{seconds * 1000:.1f} ms/window, {left} left", file=sys.stderr, flush=True)
        return show
    t0 = time.time()
    half = max(1, block_size // 2)
    side_by_side = exact_loss(model, data, block_size, block_size, args.batch_size,
                              progress('side by side'))
    overlapping = exact_loss(model, data, block_size, half, args.batch_size, progress('overlapping'))
    seconds = time.time() - t0

    nats = [(f'the model, after 1 to {block_size} characters (as gpt.py counts)', side_by_side),
            (f'the model, after {block_size - half + 1} to {block_size} characters', overlapping),
            (f'a uniform guess over its {len(chars)} characters', math.log(len(chars)))]
    rows = [(name, loss / math.log(2)) for name, loss in nats] # in bits, as the compressors'
    rows += [(f'{name}, the split alone', bits) for name, bits in compressed_bits(split).items()]
    if args.split == 'val': # the model learned from the train split; so may a compressor
        rows += [(f'{name}, after the train split', bits)
                 for name, bits in compressed_bits(split, train).items()]
    print('| predictor | loss (nats per character) | bits per character | perplexity |')
    print('| --- | ---: | ---: | ---: |')
    for name, bits in rows:
        loss = bits * math.log(2)
        print(f"| {name} | {loss:.4f} | {bits:.3f} | {math.exp(loss):.2f} |")
    print(f"{seconds:.1f} s for the model's two passes over {len(split) - 1:,} characters: every character once, "
          f"where training's line averages {checkpoint['config'].get('eval_iters', gpt.eval_iters)} random batches "
          "(so the two differ a little)")


if __name__ == '__main__':
    common.run(main, sys.argv[1:], shrink='--batch_size')
