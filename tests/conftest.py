import contextlib
import io
import os
import runpy
import signal
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
INPUT = os.path.join(ROOT, 'input.txt')

import gpt  # noqa: E402

# what gpt.py handles while it trains (Ctrl-C, kill, a terminal that closes)
STOP_SIGNALS = [signal.SIGINT, signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, 'SIGHUP') else [])


def run_here(script, *args, cwd=None, stdout=None):
    """Run a script as `python script args` would, but inside this process: no new interpreter
    and no second import of torch (about 1.5 s each), for checks of what a run prints and how it
    exits, and for short training runs. What the run changes in gpt's settings, torch's random
    numbers and the handlers of Ctrl-C, SIGTERM and SIGHUP (of a run that stopped inside its loop)
    is put back afterwards.
    stdout: a file to print into instead of a string."""
    path = os.path.join(ROOT, script)
    settings, argv, paths, here = dict(vars(gpt)), sys.argv, list(sys.path), os.getcwd()
    rng, handlers = torch.get_rng_state(), {s: signal.getsignal(s) for s in STOP_SIGNALS}
    out, err, code = stdout or io.StringIO(), io.StringIO(), 0
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(path)) # as python does: the script's folder comes first
    try:
        os.chdir(cwd or here)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(path, run_name='__main__')
            except SystemExit as e: # what the interpreter would make of it
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)
                code = e.code if isinstance(e.code, int) else int(e.code is not None)
    finally:
        sys.argv, sys.path[:] = argv, paths
        os.chdir(here)
        vars(gpt).update(settings)
        torch.set_rng_state(rng)
        for s, handler in handlers.items():
            signal.signal(s, handler)
    printed = None if stdout else out.getvalue()
    return subprocess.CompletedProcess([path, *args], code, printed, err.getvalue())


# The tests press Ctrl-C, in this process and in the ones it starts. A test run started with SIGINT
# ignored (a shell script's background job) would pass that on, and the scripts would rightly go on
# ignoring it; a handler of Python's own is reset to the default in a new process.
signal.signal(signal.SIGINT, signal.default_int_handler)


# a model small enough to build and train in milliseconds
TINY = dict(n_embd=32, n_head=4, n_layer=2, block_size=16, batch_size=4, dropout=0.0,
            fast_attention=False, device='cpu')


@pytest.fixture
def tiny(monkeypatch):
    """gpt's classes read its top-level hyperparameters: shrink them for one test."""
    for key, value in TINY.items():
        monkeypatch.setattr(gpt, key, value)
    return gpt


NO_INPUT = "input.txt is absent: python bigram.py (seconds) downloads it"
needs_input = pytest.mark.skipif(not os.path.exists(INPUT), reason=NO_INPUT)


def pytest_terminal_summary(terminalreporter):
    """Say at the end, not only in -rs, why the tests that read Tiny Shakespeare did not run."""
    skipped = [r for r in terminalreporter.stats.get('skipped', []) if NO_INPUT in str(r.longrepr)]
    if skipped:
        terminalreporter.write_line(f"{len(skipped)} tests that read Tiny Shakespeare were skipped: "
                                    f"{NO_INPUT}, then run the tests again", yellow=True)
