"""
A small sweep for a CPU: run gpt.py with a few settings, each as a whole process, and print
the val loss it reached against the wall time it took (start-up, data, training, evals and
the sample all included). This is how the CPU preset in README.md was chosen.

    python scripts/cpu_sweep.py                  # every setting below, once (17 minutes here)
    python scripts/cpu_sweep.py --only preset --repeat 3
    python scripts/cpu_sweep.py --try="--n_layer=3 --n_embd=96 --max_iters=1500"

Wall times depend on the machine: rerun it on yours before you trust the table.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# what every setting shares: no dropout (a short run does not overfit), the lecture's model
# with the batched-heads attention (the same math, faster on a CPU too), and few evaluations
COMMON = '--device=cpu --dropout=0.0 --fast_attention=True --lr_decay=True --out_dir='
SETTINGS = {
    # nanoGPT's CPU recipe from its README, on our code: same model, batch, lr and schedule
    'nanogpt-recipe': '--n_layer=4 --n_head=4 --n_embd=128 --block_size=64 --batch_size=12 '
                      '--learning_rate=1e-3 --min_lr=1e-4 --warmup_iters=100 --max_iters=2000 '
                      '--eval_interval=250 --eval_iters=20',
    # the same model with a bigger batch or a longer context
    'b16-lr2e-3': '--n_layer=4 --n_head=4 --n_embd=128 --block_size=64 --batch_size=16 '
                  '--learning_rate=2e-3 --min_lr=2e-4 --warmup_iters=50 --max_iters=1600 '
                  '--eval_interval=800 --eval_iters=40',
    'b32-lr2e-3': '--n_layer=4 --n_head=4 --n_embd=128 --block_size=64 --batch_size=32 '
                  '--learning_rate=2e-3 --min_lr=2e-4 --warmup_iters=50 --max_iters=900 '
                  '--eval_interval=450 --eval_iters=40',
    'block128': '--n_layer=4 --n_head=4 --n_embd=128 --block_size=128 --batch_size=16 '
                '--learning_rate=2e-3 --min_lr=2e-4 --warmup_iters=50 --max_iters=900 '
                '--eval_interval=450 --eval_iters=20',
    # smaller models see more characters in the same time, and take a higher learning rate
    '3x128-lr3e-3': '--n_layer=3 --n_head=4 --n_embd=128 --block_size=64 --batch_size=32 '
                    '--learning_rate=3e-3 --min_lr=3e-4 --warmup_iters=50 --max_iters=1200 '
                    '--eval_interval=600 --eval_iters=40',
    '4x96-lr3e-3': '--n_layer=4 --n_head=4 --n_embd=96 --block_size=64 --batch_size=32 '
                   '--learning_rate=3e-3 --min_lr=3e-4 --warmup_iters=50 --max_iters=1300 '
                   '--eval_interval=650 --eval_iters=40',
    '4x96-lr5e-3': '--n_layer=4 --n_head=4 --n_embd=96 --block_size=64 --batch_size=32 '
                   '--learning_rate=5e-3 --min_lr=5e-4 --warmup_iters=50 --max_iters=1300 '
                   '--eval_interval=650 --eval_iters=40',
    '4x96-1600': '--n_layer=4 --n_head=4 --n_embd=96 --block_size=64 --batch_size=32 '
                 '--learning_rate=3e-3 --min_lr=3e-4 --warmup_iters=50 --max_iters=1600 '
                 '--eval_interval=800 --eval_iters=40',
    '4x64-2000': '--n_layer=4 --n_head=4 --n_embd=64 --block_size=64 --batch_size=32 '
                 '--learning_rate=5e-3 --min_lr=5e-4 --warmup_iters=50 --max_iters=2000 '
                 '--eval_interval=1000 --eval_iters=40',
    '4x64-2500': '--n_layer=4 --n_head=4 --n_embd=64 --block_size=64 --batch_size=32 '
                 '--learning_rate=5e-3 --min_lr=5e-4 --warmup_iters=50 --max_iters=2500 '
                 '--eval_interval=1250 --eval_iters=40',
    '3x96-2000': '--n_layer=3 --n_head=4 --n_embd=96 --block_size=64 --batch_size=32 '
                 '--learning_rate=4e-3 --min_lr=4e-4 --warmup_iters=50 --max_iters=2000 '
                 '--eval_interval=1000 --eval_iters=40',
    # what gpt.py --preset=cpu runs: 3x96-2000, a little longer
    'preset': '--preset=cpu',
}


def run(overrides, label):
    """Run gpt.py once, showing its progress lines as they come; return (wall seconds, final val
    loss, best val loss)."""
    args = [sys.executable, os.path.join(ROOT, 'gpt.py'), *COMMON.split(), *overrides.split()]
    t0 = time.time()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        for line in p.stdout:
            lines.append(line)
            if line.startswith('step '):
                print(f"  {label}: {line}", end='', flush=True)
    except BaseException: # Ctrl-C, or whoever read our output stopped reading (| head)
        p.kill() # a run cut short measures nothing
        p.wait()
        raise
    seconds = time.time() - t0
    if p.wait() != 0:
        sys.exit(f"error: gpt.py failed with {overrides}: {lines[-1].strip() if lines else '(no output)'}")
    output = ''.join(lines)
    vals = [float(v) for v in re.findall(r'^step \d+: train loss [\d.]+, val loss ([\d.]+)', output, re.M)]
    return seconds, vals[-1], min(vals)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.error = lambda message: p.exit(2, f"error: {message} (see --help)\n") # one line, not argparse's usage
    p.add_argument('--only', nargs='+', choices=SETTINGS, metavar='NAME',
                   help='run only these settings: ' + ', '.join(SETTINGS))
    p.add_argument('--try', dest='extra', action='append', default=[], metavar='OVERRIDES',
                   help='a setting of your own, as gpt.py overrides: --try="--n_layer=2 --max_iters=1500" '
                        '(repeatable)')
    p.add_argument('--repeat', type=int, default=1,
                   help='runs per setting; the table shows medians (default: %(default)s)')
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error(f"--repeat must be at least 1, got {args.repeat}")
    settings = {name: SETTINGS[name] for name in (args.only or ([] if args.extra else SETTINGS))}
    settings.update({f'try-{i + 1}': extra for i, extra in enumerate(args.extra)})

    rows, stopped = [], False
    try:
        for name, overrides in settings.items():
            runs = []
            for i in range(args.repeat):
                label = f"run {len(rows) * args.repeat + i + 1}/{len(settings) * args.repeat}, {name}"
                runs.append(run(overrides, label))
                print(f"{label}: {runs[-1][0]:.1f} s, val loss {runs[-1][1]:.4f}", flush=True)
            rows.append((name, *(statistics.median(r[k] for r in runs) for k in range(3)), overrides))
    except KeyboardInterrupt:
        stopped = True
        print(f"\nCtrl-C: stopped; the table has the {len(rows)} of {len(settings)} settings that finished",
              flush=True)
    print(f"\n| setting | wall s (median of {args.repeat}) | final val loss | best val loss | overrides |")
    print('| --- | ---: | ---: | ---: | --- |')
    for name, seconds, final, best, overrides in rows:
        print(f"| {name} | {seconds:.1f} | {final:.4f} | {best:.4f} | `{overrides}` |")
    print(f"\ncommon to all: `{COMMON}`")
    if stopped:
        sys.exit(130)


if __name__ == '__main__':
    try:
        main(sys.argv[1:])
        sys.stdout.flush() # here, so that a closed pipe is caught below rather than at exit
    except BrokenPipeError: # as gpt.exit_on_broken_pipe: nothing left to flush, no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except OSError as e: # as gpt.os_error: e.g. the disk filled up under the output (> file)
        sys.exit(f"error: {e.strerror}: {e.filename}" if e.filename else f"error: {e.strerror or e}")
