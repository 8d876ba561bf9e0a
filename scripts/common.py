"""
What the scripts in scripts/ share: gpt.py made importable, the command line with one-line errors,
files written whole or not at all, and the data as gpt.py splits it.
"""
import argparse
import glob
import io
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import gpt  # noqa: E402 (the scripts import it from here)

SEEDS = range(-2**63, 2**64) # what torch.manual_seed takes


fail = gpt.fail # a one-line error instead of a traceback, as gpt.py gives them


def argument_parser(doc, **kwargs):
    """argparse with doc as its --help, and an error in one line (no usage first), exit code 2."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)
    p.error = lambda message: p.exit(2, f"error: {message} (see --help)\n")
    return p


def run(main, *args, shrink=None):
    """main(*args), where Ctrl-C exits with 130, and a file that can't be read or written, or running
    out of memory (with the options to shrink, if given), is a one-line error."""
    try:
        main(*args)
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as e:
        fail(f"{e.strerror}: {e.filename}" if e.filename else str(e))
    except RuntimeError as e:
        if 'out of memory' not in str(e) and "can't allocate memory" not in str(e):
            raise
        fail("out of memory" + (f": try a smaller {shrink}" if shrink else ''))


def latest_run():
    """The folder that gpt.py logged to last, here: out/, the CPU preset's out-cpu/, or another out*/."""
    return os.path.dirname(max(glob.glob(os.path.join('out*', 'log.csv')), key=os.path.getmtime,
                               default=os.path.join('out', 'log.csv')))


def check_output(p, option, path):
    """A one-line error from parser p, now rather than after the work, where the file to write for --option
    can't be: its folder is missing, or path is a folder."""
    if path and (os.path.isdir(path) or not os.path.isdir(os.path.dirname(os.path.abspath(path)))):
        p.error(f"--{option} {path}: " + ("a folder: give a file's name" if os.path.isdir(path) else "no such folder"))


def check_device(name):
    """A one-line error for a device that this machine or this PyTorch lacks."""
    try:
        torch.zeros(1, device=name).item()
    except Exception as e:
        fail(f"cannot use device {name!r}: {str(e).splitlines()[0]}")


def optimizer(model):
    """AdamW as gpt.py makes it (fused where use_fused_adamw is on, else foreach), and its GradScaler
    (a no-op but with use_fp16)."""
    return (torch.optim.AdamW(model.parameters(), lr=gpt.learning_rate, fused=gpt.use_fused_adamw,
                              foreach=not gpt.use_fused_adamw),
            torch.amp.GradScaler(torch.device(gpt.device).type, enabled=gpt.use_fp16))


def train_step(model, optimizer, scaler, xb, yb, lr):
    """A step of gpt.py's loop: forward (in bfloat16 or float16 where configure turned them on),
    backward, AdamW at lr."""
    with gpt.autocast(xb.device.type):
        logits, loss = model(xb, yb)
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    for group in optimizer.param_groups:
        group['lr'] = lr
    scaler.step(optimizer)
    scaler.update()


def save_atomically(path, data):
    """data (bytes) into path.tmp, then renamed over path: a crash never leaves path half-written."""
    with open(path + '.tmp', 'wb') as f:
        f.write(data)
    os.replace(path + '.tmp', path)


def pyplot():
    """matplotlib's pyplot, drawing into files (no screen needed); without matplotlib, a one-line error."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        fail("a picture needs matplotlib, an optional extra: pip install matplotlib")
    return plt


def save_png(figure, path):
    """figure as a PNG at path, written whole (as save_atomically writes)."""
    png = io.BytesIO()
    figure.savefig(png, format='png')
    save_atomically(path, png.getvalue())


def codec(chars):
    """encode: string -> list of integers; decode: list of integers -> string (as gpt.py builds them)"""
    stoi = {ch: i for i, ch in enumerate(chars)}
    return (lambda s: [stoi[c] for c in s]), (lambda l: ''.join(chars[i] for i in l))


def split(data):
    """gpt.py's split: the first 90% train, the rest val."""
    n = int(0.9 * len(data))
    return data[:n], data[n:]


def duration(seconds):
    """'42s', '13 min' or '14.7 h'"""
    if seconds < 90:
        return f"{seconds:.0f}s"
    return f"{seconds / 60:.0f} min" if seconds < 90 * 60 else f"{seconds / 3600:.1f} h"
