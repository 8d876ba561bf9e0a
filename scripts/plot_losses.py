"""
Plot the train and val loss curves from the log.csv that gpt.py writes into out_dir, and print
each run's best and last val loss.

    python scripts/plot_losses.py                        # the latest run's log.csv -> loss.png beside it
    python scripts/plot_losses.py runs/a/log.csv --out=a.png
    python scripts/plot_losses.py runs/a                 # a run's folder: its log.csv
    python scripts/plot_losses.py runs/a runs/b          # runs side by side -> losses.png

Needs matplotlib, an optional extra: pip install matplotlib
"""
import argparse
import csv
import glob
import os
import sys


def read_log(path):
    try:
        with open(path, newline='') as f:
            lines = f.read().split('\n')
        if lines[-1] and len(lines) > 1: # no newline after the last row: a write cut short
            print(f"note: the last row of {path} is incomplete (the run stopped while writing it); "
                  "plotting the rows before it")
        rows = list(csv.DictReader(lines[:-1]))
        return [(int(r['step']), float(r['train_loss']), float(r['val_loss'])) for r in rows]
    except FileNotFoundError:
        sys.exit(f"error: no log at {path} (gpt.py writes one into its --out_dir, out/ by default, "
                 "out-cpu/ for the preset, as it trains)")
    except OSError as e:
        sys.exit(f"error: cannot read {path}: {e.strerror}")
    except (KeyError, ValueError, TypeError):
        sys.exit(f"error: {path} is not a log.csv of gpt.py (step,train_loss,val_loss,elapsed_s)")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.error = lambda message: p.exit(2, f"error: {message} (see --help)\n") # one line, not argparse's usage
    latest = max(glob.glob(os.path.join('out*', 'log.csv')), key=os.path.getmtime, # as common.latest_run()
                 default=os.path.join('out', 'log.csv'))
    p.add_argument('logs', nargs='*', type=os.path.expanduser, default=[latest],
                   help="log.csv files of gpt.py, or the out_dirs they are in (default: the latest run's, %(default)s)")
    p.add_argument('--out', type=os.path.expanduser, default=None,
                   help='the PNG to write (default: loss.png beside the log; for several, losses.png here)')
    p.add_argument('--title', default=None,
                   help="the plot's title (default: the log's path; for several, which line is which)")
    args = p.parse_args(argv)
    logs = {name: os.path.join(name, 'log.csv') if os.path.isdir(name) else name # a run's folder: its log
            for name in args.logs}
    runs = {} # name, as given -> the rows of its log
    for name, log in logs.items():
        runs[name] = read_log(log)
        if not runs[name]:
            sys.exit(f"error: {log} has no evaluations yet")
    first = logs[args.logs[0]]
    try:
        import matplotlib
        matplotlib.use('Agg') # no screen needed
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("error: plotting needs matplotlib, an optional extra: pip install matplotlib")

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, rows in runs.items():
        steps, train, val = zip(*rows)
        best = min(range(len(val)), key=val.__getitem__)
        if len(runs) == 1:
            ax.plot(steps, train, label='train', marker='.')
            ax.plot(steps, val, label='val', marker='.')
            ax.annotate(f'best val {val[best]:.4f}', (steps[best], val[best]), textcoords='offset points',
                        xytext=(0, 12), ha='center')
        else: # a colour a run: val solid, train dashed
            line, = ax.plot(steps, val, marker='.', label=f'{name} (best val {val[best]:.4f})')
            ax.plot(steps, train, color=line.get_color(), linestyle='--', alpha=0.6)
    ax.set_xlabel('step')
    ax.set_ylabel('loss (cross-entropy per character, nats)')
    ax.set_title(args.title or (first if len(runs) == 1 else 'val loss (solid) and train loss (dashed)'))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    out = args.out or (os.path.join(os.path.dirname(first), 'loss.png') if len(runs) == 1 else 'losses.png')
    tmp = os.path.join(os.path.dirname(os.path.abspath(out)), f'.tmp-{os.getpid()}-' + os.path.basename(out))
    try: # into a temporary file, then renamed: an earlier plot is never left half-written
        fig.savefig(tmp, dpi=120, format='png')
        os.replace(tmp, out)
    except BaseException as e: # a full disk, or Ctrl-C: the temporary file goes too
        if os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(e, OSError):
            sys.exit(f"error: cannot write {out}: {e.strerror}")
        raise
    print('| run | best val loss | at step | last val loss | at step |\n| --- | ---: | ---: | ---: | ---: |')
    for name, rows in runs.items():
        step, _, val = min(rows, key=lambda row: row[2])
        print(f"| {name} | {val:.4f} | {step} | {rows[-1][2]:.4f} | {rows[-1][0]} |")
    print(f"wrote {out}")


if __name__ == '__main__':
    try:
        main(sys.argv[1:])
        sys.stdout.flush() # here, so that a closed pipe is caught below rather than at exit
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError: # as gpt.exit_on_broken_pipe (this script imports neither gpt nor torch)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except OSError as e: # as gpt.os_error: e.g. the disk filled up under the output (> file)
        sys.exit(f"error: {e.strerror}: {e.filename}" if e.filename else f"error: {e.strerror or e}")
