"""
What the attention heads of a trained model look at. For a prompt, each head's weights wei[i, j]
(the lecture at 1:11:38: how much character j contributes to the output at character i), computed
from a checkpoint that gpt.py saved, as its Head class computes them.

    python scripts/attention_map.py                        # the latest run's best.pt: where each head looks
    python scripts/attention_map.py --layer=0 --head=1     # one head's weights as a map
    python scripts/attention_map.py --png=heads.png        # every head's, as one picture (matplotlib)
    python scripts/attention_map.py --ckpt=runs/a --prompt=@scene.txt

Layers and heads count from 0, as model.blocks[layer].sa.heads[head] does.
"""
import os
import sys

import torch
from torch.nn import functional as F

import common  # noqa: E402 (beside this file)
from common import fail, gpt  # noqa: E402
import sample  # noqa: E402 (beside this file)

PROMPT = "First Citizen:\nBefore we proceed any further, hear me speak.\n" # Tiny Shakespeare's first lines
SHADES = ' .:-=+*#%@' # a weight under 0.1 is blank, 0.9 or more is @


def attention_weights(model, idx):
    """Every head's wei for the sequence idx (1,T): a (n_layer, n_head, T, T) tensor, each row
    summing to 1. The input of each Block's attention is caught on its way (the output of ln1),
    then each Head's query, key, mask and softmax are applied to it as Head.forward does."""
    inputs = []
    hooks = [block.ln1.register_forward_hook(lambda module, args, out: inputs.append(out))
             for block in model.blocks]
    try:
        with torch.no_grad():
            model(idx)
    finally:
        for hook in hooks:
            hook.remove()
    T = idx.shape[1]
    layers = []
    for block, x in zip(model.blocks, inputs):
        heads = []
        for head in block.sa.heads:
            k, q = head.key(x), head.query(x)
            wei = q @ k.transpose(-2, -1) * k.shape[-1]**-0.5
            wei = wei.masked_fill(head.tril[:T, :T] == 0, float('-inf'))
            heads.append(F.softmax(wei, dim=-1)[0]) # (T,T); dropout is off in eval mode
        layers.append(torch.stack(heads))
    return torch.stack(layers)


def shown(c):
    """c as the map shows it: a newline and a space as marks that can be seen (and a newline as
    one that keeps the rows apart)."""
    return {'\n': '\u21b5', ' ': '\u00b7'}.get(c, c)


def summary(wei):
    """A row per head: its weight on the character itself, on the one before, and on those further
    back, and how far back it looks, each averaged over the positions of the prompt but the first
    (which can only look at itself)."""
    T = wei.shape[-1]
    back = torch.arange(T)[:, None] - torch.arange(T)[None, :] # (T,T): i - j
    lines = ['| layer | head | on itself | on the character before | further back | mean distance back |',
             '| ---: | ---: | ---: | ---: | ---: | ---: |']
    for layer, heads in enumerate(wei):
        for h, w in enumerate(heads):
            itself = w.diagonal()[1:].mean().item()
            before = w.diagonal(-1).mean().item()
            distance = (w * back).sum(-1)[1:].mean().item()
            lines.append(f'| {layer} | {h} | {itself:.2f} | {before:.2f} | {1 - itself - before:.2f} '
                         f'| {distance:.1f} |')
    return '\n'.join(lines)


def heat_map(w, text):
    """One head's weights as rows of shades: row i, column j is how much character j gives to i."""
    lines = ['    ' + ''.join(shown(c) for c in text)]
    for i, c in enumerate(text):
        top = w[i].argmax().item()
        cells = ''.join(SHADES[min(9, int(x * 10))] for x in w[i, :i + 1].tolist())
        lines.append(f"{shown(c)!s:>3} {cells.ljust(len(text))}  most on {shown(text[top])!r} "
                     f"({i - top} back), {w[i, top].item():.2f}")
    return '\n'.join(lines)


def picture(wei, text, path):
    """Every head's weights in one PNG: layers as rows, heads as columns, row i, column j of each what
    character j gives to i, one colour scale from 0 to 1, the future (which a head can't see) blank."""
    plt = common.pyplot()
    n_layer, n_head, T = wei.shape[0], wei.shape[1], wei.shape[-1]
    side = 2.4 if T <= 40 else 3.8 # inches a map: room for a label a character up to 64
    figure, axes = plt.subplots(n_layer, n_head, figsize=(side * n_head + 1, side * n_layer), dpi=100,
                                squeeze=False)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    labels = [shown(c) for c in text] if T <= 64 else [] # characters, where they fit
    for layer in range(n_layer):
        for h in range(n_head):
            ax = axes[layer][h]
            image = ax.imshow(wei[layer, h].detach().masked_fill(future, float('nan')).numpy(), vmin=0, vmax=1)
            ax.set_title(f'layer {layer}, head {h}', fontsize=9)
            ax.set_xticks(range(len(labels)), labels, fontsize=4)
            ax.set_yticks(range(len(labels)), labels, fontsize=4)
    figure.colorbar(image, ax=axes, shrink=0.8, label="weight of the column's character in the row's")
    common.save_png(figure, path)
    plt.close(figure)


def parse_args(argv):
    p = common.argument_parser(__doc__)
    sample.add_model_options(p, PROMPT, "the text to look at, or @FILE to read it from a file "
                             "(default: the first two lines of Tiny Shakespeare)")
    p.add_argument('--layer', type=int, default=None, help='with --head: the map of that head')
    p.add_argument('--head', type=int, default=None, help='with --layer: the map of that head')
    p.add_argument('--device', default='cpu', help='default: %(default)s')
    p.add_argument('--png', type=os.path.expanduser, default=None,
                   help="also draw every head's weights into this picture (matplotlib)")
    args = sample.checked_model_options(p, p.parse_args(argv))
    if (args.layer is None) != (args.head is None):
        p.error("--layer and --head go together: the map of one head")
    return args


def main(argv):
    args = parse_args(argv)
    common.check_device(args.device)
    gpt.fast_attention = False # the lecture's Head modules, whose weights are read here
    model, checkpoint = sample.load_model(args.ckpt, args.device, args.code)
    chars, block_size = checkpoint['chars'], checkpoint['config']['block_size']
    text = args.prompt
    # the default prompt too may not fit: a model of another text (gpt.py --input_file)
    hint = '; give a prompt of its text with --prompt' if args.prompt == PROMPT else ''
    sample.check_vocabulary(text, chars, hint=hint)
    if len(text) < 2:
        fail(f"the prompt needs at least 2 characters, so that one can look at another (got {len(text)})")
    if len(text) > block_size:
        print(f"note: the prompt has {len(text):,} characters and the model reads {block_size} at a "
              f"time: its last {block_size}")
        text = text[-block_size:]
    encode, _ = common.codec(chars)
    idx = torch.tensor([encode(text)], dtype=torch.long, device=args.device)
    wei = attention_weights(model, idx).cpu()
    n_layer, n_head = wei.shape[:2]
    if args.png:
        picture(wei, text, args.png)
        print(f"wrote {args.png}")
    if args.layer is None:
        print(f"{args.ckpt}: where each of its {n_layer} x {n_head} heads looks, over {len(text)} "
              "characters")
        print(summary(wei))
        print("\nthe map of one head: --layer=L --head=H")
        return
    if not (0 <= args.layer < n_layer and 0 <= args.head < n_head):
        fail(f"this model has layers 0 to {n_layer - 1} and heads 0 to {n_head - 1}, got "
                 f"--layer={args.layer} --head={args.head}")
    print(f"{args.ckpt}, layer {args.layer}, head {args.head}: each row, what the characters up to it "
          "give it")
    print(f"({SHADES[1]} 0.1 of its weight ... {SHADES[-1]} 0.9 or more; {shown(' ')} is a space, "
          f"{shown(chr(10))} a newline)")
    print(heat_map(wei[args.layer, args.head], text))


if __name__ == '__main__':
    common.run(main, sys.argv[1:])
