import contextlib
import io
import os
import re
import runpy
import signal
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(1, os.path.join(ROOT, 'scripts'))
INPUT = os.path.join(ROOT, 'input.txt')

import gpt  # noqa: E402

needs_input = pytest.mark.skipif(not os.path.exists(INPUT),
                                 reason="input.txt is absent: python bigram.py (seconds) downloads it")

# `pytest -n auto` (pytest-xdist) runs a worker per core: each gets its share of the cores, for
# torch here and for the processes its tests start, rather than all of them each.
if 'PYTEST_XDIST_WORKER_COUNT' in os.environ:
    threads = max(1, (os.cpu_count() or 1) // int(os.environ['PYTEST_XDIST_WORKER_COUNT']))
    torch.set_num_threads(threads)
    os.environ['OMP_NUM_THREADS'] = str(threads)

# The tests press Ctrl-C, in this process and in the ones it starts. A test run started with SIGINT
# ignored (a shell script's background job) would pass that on to them.
signal.signal(signal.SIGINT, signal.default_int_handler)


def run_here(script, *args, cwd=None):
    """Run a script as `python script args` would, but inside this process: no new interpreter and
    no second import of torch. What the run changes in gpt's settings, torch's random numbers and
    the handlers of Ctrl-C and SIGTERM is put back afterwards."""
    path = os.path.join(ROOT, script)
    settings, argv, paths, here = dict(vars(gpt)), sys.argv, list(sys.path), os.getcwd()
    rng = torch.get_rng_state()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    out, err, code = io.StringIO(), io.StringIO(), 0
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
    return subprocess.CompletedProcess([path, *args], code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def signal_at_call(monkeypatch, owner, name, n, signum):
    """owner.name sends this process signum as its n-th call returns (Ctrl-C is SIGINT, which Python
    raises as KeyboardInterrupt, kill SIGTERM); yields the calls made, one item each."""
    function, calls = getattr(owner, name), []
    def counted(*args, **kwargs):
        out = function(*args, **kwargs)
        calls.append(1)
        if len(calls) == n:
            signal.raise_signal(signum)
        return out
    monkeypatch.setattr(owner, name, counted)
    yield calls
    monkeypatch.setattr(owner, name, function)


def run(script, *args, cwd=None, timeout=300):
    """`python script args` in a process of its own."""
    return subprocess.run([sys.executable, os.path.join(ROOT, script), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


class Screen:
    """A stand-in for sys.stdout or sys.stderr: what is written to it and each flush, in order, into seen as
    (name, text) and (name, None); print's empty end='' left out."""
    def __init__(self, name, seen):
        self.name, self.seen = name, seen

    def write(self, text):
        self.seen.extend([(self.name, text)] if text else [])

    def flush(self):
        self.seen.append((self.name, None))


def losses(stdout):
    """{step: (train, val)} from the 'step N: train loss X, val loss Y' lines."""
    found = re.findall(r'^step (\d+): train loss ([\d.]+), val loss ([\d.]+)', stdout, re.M)
    return {int(s): (float(t), float(v)) for s, t, v in found}


def sample(stdout, step):
    """What a run printed after its last evaluation, the one at step: the sample (and not the line after
    it, which says where the model is)."""
    return stdout.rsplit(f'step {step}: ', 1)[1].split('\n', 1)[1].split('the model: ')[0]


# a gpt.py run of a second or two
TINY_GPT = ['--n_layer=1', '--n_head=2', '--n_embd=16', '--block_size=16', '--batch_size=8',
            '--max_iters=30', '--eval_interval=10', '--eval_iters=5', '--device=cpu']


@pytest.fixture
def tiny(monkeypatch):
    """gpt's classes read its top-level hyperparameters: shrink them for one test."""
    for key, value in dict(n_embd=32, n_head=4, n_layer=2, block_size=16, batch_size=4, dropout=0.0,
                           fast_attention=False, device='cpu', use_bf16=False).items():
        monkeypatch.setattr(gpt, key, value)
    return gpt


@pytest.fixture(autouse=True)
def gpts_settings_put_back():
    """What a test sets in gpt (gpt.configure sets every setting, and TF32's two flags in torch) is
    put back after it. (monkeypatch can't put those flags back: torch keeps them outside __dict__.)"""
    settings = dict(vars(gpt))
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    yield
    vars(gpt).update(settings)
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
