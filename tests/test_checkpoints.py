"""Checkpoints: exact resume, Ctrl-C, atomic saves, clear errors; sampling from a checkpoint."""
import errno
import os
import random
import re
import runpy
import select
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time

import pytest
import torch
from torch.nn import functional as F

import gpt
from conftest import ROOT, needs_input, run_here
from test_model import lecture_layout
from test_scripts import losses

pytestmark = needs_input

# dropout stays on (0.2), so an exact resume must restore the RNG state too
TINY = ['--n_layer=1', '--n_head=2', '--n_embd=16', '--block_size=16', '--batch_size=8',
        '--eval_interval=50', '--eval_iters=5', '--max_new_tokens=80', '--device=cpu']


def loss_lines(stdout):
    return re.findall(r'^step \d+: train loss [\d.]+, val loss [\d.]+', stdout, re.M)


@pytest.fixture(scope='module')
def uninterrupted(tmp_path_factory):
    """300 steps in one go: the run every interrupted run must reproduce."""
    out = tmp_path_factory.mktemp('a')
    r = run_here('gpt.py', *TINY, '--max_iters=300', f'--out_dir={out}')
    assert r.returncode == 0, r.stderr
    return r.stdout, out


@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM]) # Ctrl-C; kill, or a scheduler's
def test_ctrl_c_saves_and_resume_gives_the_same_losses(uninterrupted, tmp_path, signum):
    full, full_dir = uninterrupted
    out = tmp_path / 'my run' # a space: the command printed to resume must quote it
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, 'gpt.py'), *TINY,
                          '--max_iters=100000', f'--out_dir={out}'],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = []
    for line in p.stdout:
        first.append(line)
        if line.startswith('step 50:'):
            p.send_signal(signum)
            break
    try:
        rest, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        raise
    first = ''.join(first) + rest
    assert p.returncode == 128 + signum, err # 130, 143: as a shell reports either signal
    name = 'Ctrl-C' if signum == signal.SIGINT else 'SIGTERM'
    assert err == f"\n{name}: saving a checkpoint after this step ({name} again quits without saving)\n"
    stopped = int(re.search(r'stopped at step (\d+)(?: during its evaluation)?; saved (.*ckpt\.pt)',
                            first).group(1))
    assert 50 <= stopped < 300
    python, script, *args = shlex.split(re.search(r'^resume with: (.*)$', first, re.M).group(1))
    assert python == 'python' and script == os.path.join(ROOT, 'gpt.py') and args[-1] == '--resume=True'
    assert os.path.exists(out / 'ckpt.pt')

    r = run_here(script, *args, '--max_iters=300') # as printed, but to the uninterrupted run's end
    assert r.returncode == 0, r.stderr
    assert f'resumed from {out / "ckpt.pt"} at step {stopped}' in r.stdout
    assert loss_lines(first) + loss_lines(r.stdout) == loss_lines(full)
    sample = lambda out: out.rsplit('best.pt\n', 1)[1].rsplit('\n', 2)[0] # without the timing line
    assert sample(full) == sample(r.stdout)
    steps = lambda d: [row.split(',')[0] for row in open(d / 'log.csv').read().splitlines()]
    assert steps(out) == steps(full_dir)


def test_ctrl_c_during_an_evaluation_stops_it_and_resume_does_it_again(uninterrupted, tmp_path, monkeypatch):
    """An evaluation of the lecture's config takes 13 minutes on a CPU: Ctrl-C must not wait for it."""
    full, full_dir = uninterrupted
    cross_entropy, eval_batches = F.cross_entropy, []
    def ctrl_c_in_the_second_evaluation(*args, **kwargs):
        if not torch.is_grad_enabled(): # estimate_loss runs under no_grad; training does not
            eval_batches.append(1)
            if len(eval_batches) == 13: # the third batch of the evaluation at step 50
                signal.raise_signal(signal.SIGINT)
        return cross_entropy(*args, **kwargs)
    monkeypatch.setattr(F, 'cross_entropy', ctrl_c_in_the_second_evaluation)
    a = run_here('gpt.py', *TINY, '--max_iters=300', f'--out_dir={tmp_path}')
    assert a.returncode == 130, a.stderr
    assert f'stopped at step 50 during its evaluation; saved {tmp_path / "ckpt.pt"}' in a.stdout
    assert len(eval_batches) == 13 and loss_lines(a.stdout) == loss_lines(full)[:1]
    saved = torch.load(tmp_path / 'ckpt.pt', weights_only=True)
    assert saved['step'] == 50 and saved['evaluated'] is False
    monkeypatch.undo()
    b = run_here('gpt.py', *TINY, '--max_iters=300', f'--out_dir={tmp_path}', '--resume=True')
    assert b.returncode == 0, b.stderr
    assert loss_lines(a.stdout) + loss_lines(b.stdout) == loss_lines(full) # step 50's evaluation, redone
    sample = lambda out: out.rsplit('best.pt\n', 1)[1].rsplit('\n', 2)[0]
    assert sample(b.stdout) == sample(full)
    steps = lambda d: [row.split(',')[:3] for row in (d / 'log.csv').read_text().splitlines()]
    assert steps(tmp_path) == steps(full_dir) # the same rows, but for the seconds
    assert torch.load(tmp_path / 'best.pt', weights_only=True)['best_val_loss'] == \
        torch.load(full_dir / 'best.pt', weights_only=True)['best_val_loss']


def test_a_second_sigterm_quits_at_once_without_saving(tmp_path, monkeypatch):
    cross_entropy, train_batches = F.cross_entropy, []
    def sigterm_twice_in_step_20(*args, **kwargs):
        if torch.is_grad_enabled():
            train_batches.append(1)
            if len(train_batches) == 20:
                signal.raise_signal(signal.SIGTERM) # save after this step...
                signal.raise_signal(signal.SIGTERM) # ...no: quit now
        return cross_entropy(*args, **kwargs)
    monkeypatch.setattr(F, 'cross_entropy', sigterm_twice_in_step_20)
    r = run_here('gpt.py', *TINY, '--max_iters=100', f'--out_dir={tmp_path}')
    assert r.returncode == 143, r.stderr # the signal's own code, as after the first one
    assert r.stderr.endswith('SIGTERM again quits without saving)\n\ninterrupted; nothing saved since the '
                             'last checkpoint\n'), r.stderr
    assert 'stopped at step' not in r.stdout and len(train_batches) == 20
    assert torch.load(tmp_path / 'ckpt.pt', weights_only=True)['step'] == 0 # step 0's, untouched


def test_ctrl_c_during_the_last_evaluation_leaves_it_to_do(tmp_path, monkeypatch):
    cross_entropy, eval_batches = F.cross_entropy, []
    def ctrl_c_in_the_last_evaluation(*args, **kwargs):
        if not torch.is_grad_enabled():
            eval_batches.append(1)
            if len(eval_batches) == 12: # the evaluation at step 100, after the last step
                signal.raise_signal(signal.SIGINT)
        return cross_entropy(*args, **kwargs)
    monkeypatch.setattr(F, 'cross_entropy', ctrl_c_in_the_last_evaluation)
    a = run_here('gpt.py', *TINY, '--max_iters=100', '--eval_interval=100', f'--out_dir={tmp_path}')
    assert a.returncode == 130 and 'stopped at step 100 during its evaluation' in a.stdout, a.stderr
    monkeypatch.undo()
    b = run_here('gpt.py', *TINY, '--max_iters=100', '--eval_interval=100', f'--out_dir={tmp_path}',
                 '--resume=True')
    assert b.returncode == 0, b.stderr
    assert 'nothing left to train' not in b.stdout
    assert [line.split(':')[0] for line in loss_lines(b.stdout)] == ['step 100']
    assert torch.load(tmp_path / 'ckpt.pt', weights_only=True)['evaluated'] is True


def test_resume_from_an_evaluation_checkpoint(uninterrupted, tmp_path):
    full, _ = uninterrupted
    a = run_here('gpt.py', *TINY, '--max_iters=100', f'--out_dir={tmp_path}')
    with open(tmp_path / 'log.csv', 'ab') as f: # dropped on resume: the row of a step past the
        # checkpoint (a kill -9 after the log's write, before the checkpoint's), damaged rows (not a
        # ValueError), and a row a full disk cut short ('50,4.1,...' here)
        f.write(b'150,2.0,2.1,9.9\ngarbage\n\xff\xfe,1\n\n5')
    assert torch.load(tmp_path / 'ckpt.pt', weights_only=True)['eval_seconds'] > 0 # for the time left
    b = run_here('gpt.py', *TINY, '--max_iters=300', f'--out_dir={tmp_path}', '--resume=True',
            '--progress_seconds=1e-9') # progress lines after every step change no number
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    assert loss_lines(a.stdout) + loss_lines(b.stdout) == loss_lines(full)
    assert re.search(r'^step 101/300 \| .* left$', b.stdout, re.M)
    steps = [row.split(',')[0] for row in (tmp_path / 'log.csv').read_text().splitlines()]
    assert steps == ['step'] + [str(s) for s in range(0, 301, 50)]
    assert torch.load(tmp_path / 'ckpt.pt', weights_only=True)['step'] == 300
    c = run_here('gpt.py', *TINY, '--max_iters=300', f'--out_dir={tmp_path}', '--resume=True') # finished
    assert c.returncode == 0 and 'note: max_iters is 300: nothing left to train' in c.stdout, c.stderr
    assert loss_lines(c.stdout) == [] and torch.load(tmp_path / 'ckpt.pt', weights_only=True)['step'] == 300


def test_best_checkpoint_holds_the_lowest_val_loss(uninterrupted):
    full, out = uninterrupted
    best = min(v for _, v in losses(full).values())
    checkpoint = torch.load(out / 'best.pt', weights_only=True)
    assert round(checkpoint['best_val_loss'], 4) == best
    assert checkpoint['chars'][:2] == ['\n', ' '] and len(checkpoint['chars']) == 65
    assert {'model', 'optimizer', 'step', 'config', 'rng_cpu'} <= checkpoint.keys()
    assert round(losses(full)[checkpoint['step']][1], 4) == best # the model of that evaluation
    assert sorted(os.listdir(out)) == ['best.pt', 'ckpt.pt', 'log.csv'] # no temporary file left


def test_best_stays_at_the_lowest_val_loss_when_val_loss_rises(tmp_path):
    """Random letters, each as likely as any other: nothing in them can be learnt, so the model's
    near-uniform start is about as good as it gets, and training fits only the train split's
    noise. Val loss goes up and down from there: best.pt keeps the lowest, not the latest model,
    nor that of the latest fall."""
    rng = random.Random(0)
    (tmp_path / 'letters.txt').write_text(''.join(rng.choice('abcdefghij') for _ in range(3000)))
    r = run_here('gpt.py', f'--input_file={tmp_path / "letters.txt"}', '--n_layer=1', '--n_head=2',
                 '--n_embd=32', '--block_size=16', '--batch_size=16', '--dropout=0.0', '--learning_rate=1e-2',
                 '--max_iters=100', '--eval_interval=10', '--eval_iters=5', '--max_new_tokens=0',
                 '--device=cpu', f'--out_dir={tmp_path / "out"}')
    assert r.returncode == 0, r.stderr
    rows = [row.split(',') for row in (tmp_path / 'out' / 'log.csv').read_text().splitlines()[1:]]
    val = {int(step): float(v) for step, _, v, _ in rows}
    lowest = min(val, key=val.get)
    after = [step for step in val if step > lowest]
    assert any(val[b] < val[a] for a, b in zip(after, after[1:])), val # what the test needs: a later fall
    best = torch.load(tmp_path / 'out' / 'best.pt', weights_only=True)
    assert best['step'] == lowest and round(best['best_val_loss'], 6) == val[lowest]
    assert f"best val loss {val[lowest]:.4f} in" in r.stdout


def test_a_save_gets_the_mode_of_any_new_file(tmp_path):
    """mkstemp makes its temporary file private (0600): a checkpoint only its owner could read."""
    gpt.save_atomically(str(tmp_path / 'saved'), lambda f: f.write(b'step 500'))
    (tmp_path / 'plain').write_bytes(b'step 500') # the mode the umask gives a new file
    assert stat.S_IMODE(os.stat(tmp_path / 'saved').st_mode) == stat.S_IMODE(os.stat(tmp_path / 'plain').st_mode)


def test_best_is_a_second_name_of_the_checkpoint_until_the_next_save(tmp_path):
    ckpt, best = str(tmp_path / 'ckpt.pt'), str(tmp_path / 'best.pt')
    gpt.save_atomically(ckpt, lambda f: f.write(b'step 500'))
    gpt.link_atomically(ckpt, best)
    assert os.path.samefile(ckpt, best) # no second write
    gpt.save_atomically(ckpt, lambda f: f.write(b'step 1000'))
    assert open(best, 'rb').read() == b'step 500' and open(ckpt, 'rb').read() == b'step 1000'
    gpt.link_atomically(ckpt, best) # a newer best replaces the older
    assert open(best, 'rb').read() == b'step 1000'
    assert sorted(os.listdir(tmp_path)) == ['best.pt', 'ckpt.pt']


def test_best_is_a_copy_where_the_file_system_has_no_hard_links(tmp_path, monkeypatch):
    def no_links(src, dst):
        raise PermissionError('hard links are not supported here')
    monkeypatch.setattr(os, 'link', no_links)
    ckpt, best = str(tmp_path / 'ckpt.pt'), str(tmp_path / 'best.pt')
    gpt.save_atomically(ckpt, lambda f: f.write(b'step 500'))
    gpt.link_atomically(ckpt, best)
    assert not os.path.samefile(ckpt, best) and open(best, 'rb').read() == b'step 500'
    assert sorted(os.listdir(tmp_path)) == ['best.pt', 'ckpt.pt']


def one_line_error(r, *words):
    assert r.returncode != 0 and r.stderr.startswith('error: ') and r.stderr.count('\n') == 1, r.stderr
    for word in words:
        assert word in r.stderr


def test_resume_with_another_shape_is_a_clear_error(uninterrupted):
    _, out = uninterrupted
    r = run_here('gpt.py', *TINY, '--n_embd=32', '--max_iters=400', f'--out_dir={out}', '--resume=True')
    one_line_error(r, 'cannot resume', 'n_embd=16 there, 32 here')


def test_resume_with_another_vocabulary_or_shape_names_the_difference(capsys):
    saved = dict(optimizer={}, step=500, best_val_loss=2.0, elapsed=60.0, rng_cpu=torch.get_rng_state(),
                 config={k: getattr(gpt, k) for k in gpt.SHAPE_KEYS}, chars=list('abcd'))
    gpt.check_compatible(saved, list('abcd'), 'ckpt.pt') # the same: it resumes
    for key in gpt.SHAPE_KEYS:
        with pytest.raises(SystemExit):
            gpt.check_compatible({**saved, 'config': {**saved['config'], key: 1}}, list('abcd'), 'ckpt.pt')
        assert f"cannot resume from ckpt.pt: {key}=1 there, {getattr(gpt, key)} here\n" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        gpt.check_compatible({**saved, 'chars': list('abc')}, list('abcd'), 'ckpt.pt')
    assert 'a vocabulary of 3 characters there, 4 here\n' in capsys.readouterr().err


def test_resume_without_or_with_a_corrupt_checkpoint(tmp_path):
    one_line_error(run_here('gpt.py', *TINY, f'--out_dir={tmp_path}', '--resume=True'), 'no checkpoint at')
    (tmp_path / 'ckpt.pt').write_bytes(b'PK\x03\x04 half a file')
    one_line_error(run_here('gpt.py', *TINY, f'--out_dir={tmp_path}', '--resume=True'),
                   'not a readable checkpoint')


def test_resume_from_a_checkpoint_with_only_a_model_says_so(uninterrupted, tmp_path):
    """A checkpoint that sample.py can use (model, config, vocabulary) but without the optimizer."""
    _, out = uninterrupted
    checkpoint = torch.load(out / 'ckpt.pt', weights_only=True)
    torch.save({k: checkpoint[k] for k in ('model', 'config', 'chars')}, tmp_path / 'ckpt.pt')
    r = run_here('gpt.py', *TINY, '--max_iters=400', f'--out_dir={tmp_path}', '--resume=True')
    one_line_error(r, f'cannot resume from {tmp_path / "ckpt.pt"}: it has no optimizer, step, '
                      'best_val_loss, elapsed, rng_cpu, only a model to sample from')
    assert run_here('scripts/sample.py', f'--ckpt={tmp_path / "ckpt.pt"}', '--max_new_tokens=5').returncode == 0


# a session of its own with the terminal argv[1] as its controlling one, as a login shell has, and
# SIGHUP as argv[2] says ('SIG_DFL', or 'SIG_IGN' as `trap '' HUP` sets it, whatever the test's own
# was), then the command after it (without a fork in this process, which may hold threads)
ON_A_TERMINAL = ("import fcntl, os, signal, sys, termios; os.setsid(); "
                 "fd = os.open(sys.argv[1], os.O_RDWR | os.O_NOCTTY); fcntl.ioctl(fd, termios.TIOCSCTTY, 0); "
                 "[os.dup2(fd, k) for k in (0, 1, 2)]; signal.signal(signal.SIGHUP, getattr(signal, sys.argv[2])); "
                 "os.execv(sys.argv[3], sys.argv[3:])")


@pytest.mark.skipif(not hasattr(signal, 'SIGHUP'), reason='Windows has no SIGHUP')
@pytest.mark.parametrize('sighup', ['SIG_DFL', 'SIG_IGN'])
def test_a_terminal_that_closes_saves_and_stops_the_run(sighup, tmp_path):
    """The terminal the run prints to closes, or the ssh connection to it drops: SIGHUP. The run
    saves and stops as after Ctrl-C, its prints from then on going nowhere, not failing. Where
    SIGHUP is ignored, the run trains on, printing nowhere, until something else stops it."""
    pty = pytest.importorskip('pty')
    terminal, its_end = pty.openpty()
    p = subprocess.Popen([sys.executable, '-c', ON_A_TERMINAL, os.ttyname(its_end), sighup, sys.executable,
                          os.path.join(ROOT, 'gpt.py'), *TINY, '--max_iters=100000', f'--out_dir={tmp_path}'])
    try:
        printed, deadline = b'', time.time() + 60
        while b'step 50:' not in printed and time.time() < deadline:
            if select.select([terminal], [], [], 1)[0]:
                printed += os.read(terminal, 4096)
        os.close(terminal) # the terminal closes: the run gets SIGHUP
        os.close(its_end)
        if sighup == 'SIG_IGN':
            time.sleep(2) # evaluations every 0.2 s or so: each prints to the terminal that has gone
            assert p.poll() is None, printed.decode() # without TerminalWriter: exit code 1
            p.terminate()
        code = 128 + (signal.SIGHUP if sighup == 'SIG_DFL' else signal.SIGTERM)
        assert p.wait(timeout=60) == code, printed.decode() # not killed by SIGHUP: -1
    finally:
        if p.poll() is None: # nothing of it may outlive the test
            p.kill()
            p.wait()
    saved = torch.load(tmp_path / 'ckpt.pt', weights_only=True)
    assert saved['step'] >= 50 and {'optimizer', 'rng_cpu'} <= saved.keys()
    if sighup == 'SIG_IGN':
        assert saved['step'] > 100 # it trained on after the terminal had gone


@pytest.mark.skipif(not hasattr(os, 'openpty'), reason='needs a pseudo-terminal')
def test_a_print_to_a_terminal_that_has_gone_goes_nowhere():
    """A write to a terminal that has gone fails (EIO): the run's prints go nowhere then, as after
    SIGHUP, instead of ending the run."""
    terminal, its_end = os.openpty()
    os.close(terminal)
    try:
        os.write(its_end, b'step 100: ...\n')
        failed = None
    except OSError as e:
        failed = e.errno
    if failed != errno.EIO: # Linux's: another system's terminals may fail otherwise, or not at all
        os.close(its_end)
        pytest.skip('here a write to a terminal that has gone does not fail with EIO')
    stdout = open(its_end, 'w', closefd=False)
    stream = gpt.TerminalWriter.wrap(stdout, terminal=[its_end])
    assert isinstance(stream.buffer.raw, gpt.TerminalWriter)
    print('step 100: train loss 3.1, val loss 3.2', file=stream, flush=True)
    os.write(its_end, b'gone') # no error: the file descriptor now leads to os.devnull
    assert os.stat(its_end).st_rdev == os.stat(os.devnull).st_rdev
    stream.close()
    stdout.close()
    os.close(its_end)


def test_only_a_terminal_write_that_fails_with_eio_goes_nowhere():
    with open(os.devnull, 'w') as null:
        assert gpt.TerminalWriter.wrap(null, terminal=[]) is null # not a terminal: left as it is
    if os.path.exists('/dev/full'): # any other error still counts: a full disk
        with open('/dev/full', 'w') as full:
            stream = gpt.TerminalWriter.wrap(full, terminal=[full.fileno()])
            with pytest.raises(OSError) as e:
                print('x', file=stream, flush=True)
            assert e.value.errno == errno.ENOSPC


@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM])
def test_the_first_signal_asks_to_stop_and_the_second_interrupts(signum, capsys):
    """The second raises KeyboardInterrupt wherever the run is: a save under way is discarded (the
    test below), and gpt.py quits without saving."""
    stop = gpt.StopRequest()
    stop_listening = stop.listen()
    try:
        os.kill(os.getpid(), signum)
        assert stop.requested and stop.exit_code == 128 + signum
        with pytest.raises(KeyboardInterrupt) as quit:
            os.kill(os.getpid(), signum)
        assert quit.value.exit_code == 128 + signum # as the first one's: 130, 143
    finally:
        stop_listening()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler # as conftest set it
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert 'saving a checkpoint after this step' in capsys.readouterr().err


def test_a_crash_while_saving_keeps_the_old_file(tmp_path):
    path = tmp_path / 'ckpt.pt'
    path.write_bytes(b'the previous checkpoint')

    def crash(f):
        f.write(b'half of a new one')
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        gpt.save_atomically(str(path), crash)
    assert path.read_bytes() == b'the previous checkpoint'
    assert os.listdir(tmp_path) == ['ckpt.pt']


def disk_full(f):
    f.write(b'half of a new one')
    raise OSError(28, 'No space left on device')


def torch_save_on_a_full_disk(f): # torch.save turns the OSError into a RuntimeError
    try:
        disk_full(f)
    except OSError:
        raise RuntimeError('[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598')


@pytest.mark.parametrize('write', [disk_full, torch_save_on_a_full_disk])
def test_a_full_disk_is_a_one_line_error_and_keeps_the_old_file(write, tmp_path, capsys):
    path = tmp_path / 'ckpt.pt'
    path.write_bytes(b'the previous checkpoint')
    with pytest.raises(SystemExit) as e:
        gpt.save_atomically(str(path), write)
    err = capsys.readouterr().err
    assert e.value.code == 1 and err.count('\n') == 1, err
    assert err.startswith(f'error: cannot write {path}: No space left on device')
    assert path.read_bytes() == b'the previous checkpoint'
    assert os.listdir(tmp_path) == ['ckpt.pt']


def test_out_of_memory_is_a_one_line_error_that_says_what_to_shrink(monkeypatch):
    def step(*args, **kwargs):
        raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 2.00 GiB.')
    monkeypatch.setattr(torch.optim.AdamW, 'step', step)
    r = run_here('gpt.py', *TINY, '--out_dir=')
    one_line_error(r, 'cpu ran out of memory (CUDA out of memory. Tried to allocate 2.00 GiB.)',
                   '--grad_accum=2 (the same batches in 2 parts), or a smaller --batch_size (now 8)',
                   '--block_size (now 16)', 'a smaller model (--n_layer=1, --n_embd=16)')
    r = run_here('gpt.py', *TINY, '--out_dir=', '--grad_accum=2') # 8 in 4 parts next; in 8, none
    one_line_error(r, '; try --grad_accum=4 (the same batches in 4 parts), or a smaller --batch_size')
    r = run_here('gpt.py', *TINY, '--out_dir=', '--grad_accum=8')
    one_line_error(r, '; try a smaller --batch_size (now 8)')


CPU_ALLOCATOR = ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
                 "you tried to allocate 40000000000 bytes. Error code 12 (Cannot allocate memory)")


@pytest.mark.parametrize('script, words', [
    ('gpt.py', 'error: cpu ran out of memory (40.0 GB asked for); try --grad_accum=2 (the same batches '
               'in 2 parts), or a smaller --batch_size (now 8) or --block_size (now 100000), or a smaller '
               'model (--n_layer=1, --n_embd=16)\n'),
    ('scripts/bench.py', 'error: out of memory (40.0 GB asked for); try a smaller --batch_size or '
                         '--block_size, or a smaller model\n'), # as every other script through gpt.run_main
])
def test_a_block_size_too_large_for_the_cpus_memory_is_a_one_line_error(script, words, monkeypatch):
    def tril(*args, **kwargs): # what the CPU says when the (block_size, block_size) mask does not fit
        raise RuntimeError(CPU_ALLOCATOR)
    monkeypatch.setattr(torch, 'tril', tril)
    r = run_here(script, *TINY, '--block_size=100000', '--out_dir=')
    one_line_error(r, words)


def test_bigram_out_of_memory_is_a_one_line_error_that_says_what_to_shrink(monkeypatch):
    def step(*args, **kwargs): # what the CPU says when a batch does not fit (--batch_size=100000000)
        raise RuntimeError(CPU_ALLOCATOR)
    monkeypatch.setattr(torch.optim.AdamW, 'step', step)
    r = run_here('bigram.py', '--max_iters=1', '--eval_iters=1')
    one_line_error(r, 'error: cpu ran out of memory; try a smaller --batch_size (now 32) or --block_size (now 8)\n')


@pytest.mark.parametrize('script, own_text, words', [
    ('gpt.py', False, "error: out of memory (Python's MemoryError): this machine's memory is full\n"),
    ('gpt.py', True, "error: out of memory (Python's MemoryError): this machine's memory is full; "
                     "--input_file={} may be too long to encode: try a shorter text\n"),
    ('bigram.py', True, "error: out of memory (Python's MemoryError): this machine's memory is full; "
                        "--input_file={} may be too long to encode: try a shorter text\n"),
    ('scripts/data_walkthrough.py', False, # as every other script through gpt.run_main
     "error: out of memory (Python's MemoryError): this machine's memory is full\n"),
])
def test_a_text_too_long_to_encode_is_a_one_line_error(script, own_text, words, tmp_path, monkeypatch):
    """Encoding the text as a list of ints, as the lecture does, takes several bytes per character:
    a text of many GB fills the machine's memory, and Python raises MemoryError."""
    tensor = torch.tensor
    def encoded_text_too_long(data, *args, **kwargs):
        if isinstance(data, list) and len(data) > 10_000:
            raise MemoryError
        return tensor(data, *args, **kwargs)
    monkeypatch.setattr(torch, 'tensor', encoded_text_too_long)
    text = tmp_path / 'my.txt'
    text.write_text('to be or not to be\n' * 1000)
    r = run_here(script, *([f'--input_file={text}'] if own_text else []))
    one_line_error(r, words.format(text))


def test_an_out_dir_that_is_a_file_is_a_one_line_error(tmp_path):
    (tmp_path / 'out').write_text('not a folder')
    r = run_here('gpt.py', *TINY, '--max_iters=10', f'--out_dir={tmp_path / "out"}')
    one_line_error(r, f'cannot write into --out_dir={tmp_path / "out"}: it is a file')


# ------------ scripts/sample.py

def sample(*args):
    return run_here(os.path.join('scripts', 'sample.py'), *args)


def test_sample_with_prompt_temperature_and_top_k(uninterrupted):
    _, out = uninterrupted
    args = [f'--ckpt={out / "best.pt"}', '--prompt=ROMEO:', '--temperature=0.8', '--top_k=10',
            '--max_new_tokens=100', '--num_samples=2', '--device=cpu']
    a, b = sample(*args), sample(*args)
    assert a.returncode == 0, a.stderr
    samples = a.stdout.split('\n---------------\n')
    assert len(samples) == 2 and all(s.startswith('ROMEO:') for s in samples)
    assert len(samples[0]) == len('ROMEO:') + 100
    assert a.stdout == b.stdout  # same seed, same sample
    assert sample(*args, '--seed=7').stdout != a.stdout


def test_sampling_is_the_lectures_multinomial_with_temperature_and_top_k_on_top(uninterrupted, monkeypatch):
    _, out = uninterrupted
    checkpoint = torch.load(out / 'ckpt.pt', weights_only=True)
    for key in gpt.SHAPE_KEYS:
        monkeypatch.setattr(gpt, key, checkpoint['config'][key])
    model = gpt.GPTLanguageModel(65).eval()
    model.load_state_dict(checkpoint['model'])
    _, decode = gpt.make_codec(checkpoint['chars'])
    # one sample, printed as it comes; two, printed at the end; two, sharpened and cut to 10 characters
    for n, options in [(1, []), (2, []), (2, ['--temperature=0.8', '--top_k=10'])]:
        r = sample(f'--ckpt={out / "ckpt.pt"}', '--max_new_tokens=30', '--seed=5', '--device=cpu',
                   f'--num_samples={n}', *options)
        torch.manual_seed(5)
        idx = torch.zeros((n, 1), dtype=torch.long)
        with torch.no_grad():  # the lecture's loop, written out
            for _ in range(30):
                logits, _ = model(idx[:, -16:])
                logits = logits[:, -1, :]
                if options: # the next character from the 10 likeliest, at temperature 0.8
                    logits = logits / 0.8
                    logits[logits < logits.topk(10).values[:, [-1]]] = float('-inf')
                probs = torch.softmax(logits, dim=-1)
                idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
        assert r.stdout == '\n---------------\n'.join(decode(row.tolist()) for row in idx) + '\n'


def test_a_tiny_temperature_picks_the_likeliest_character(tiny):
    """Far below 1, sampling becomes greedy: the largest logit wins. Divided as they are, the
    logits would overflow to inf and the probabilities become NaN."""
    model = gpt.GPTLanguageModel(65)
    idx = torch.zeros((3, 1), dtype=torch.long)
    greedy = model.generate(idx, 10, temperature=1e-30)
    logits, _ = model(greedy[:, :-1])
    assert torch.equal(logits.argmax(-1), greedy[:, 1:]) # each character the likeliest after the ones before
    assert torch.equal(model.generate(idx, 10, temperature=1e-40), greedy) # below float32's smallest normal
    assert torch.equal(model.generate(idx, 10, top_k=1), greedy) # what sample.py's --temperature=0 error offers


def test_sample_to_a_file_and_from_a_prompt_file(uninterrupted, tmp_path):
    _, out = uninterrupted
    (tmp_path / 'prompt.txt').write_text('KING RICHARD:\n')
    r = sample(f'--ckpt={out / "best.pt"}', f'--prompt=@{tmp_path / "prompt.txt"}',
               '--max_new_tokens=200', f'--out={tmp_path / "more.txt"}', '--device=cpu')
    assert r.returncode == 0, r.stderr
    text = (tmp_path / 'more.txt').read_text()
    assert text.startswith('KING RICHARD:\n') and len(text) == len('KING RICHARD:\n') + 200 + 1
    # saved by a Windows editor: a byte-order mark first, \r\n line endings; the same prompt
    (tmp_path / 'prompt.txt').write_bytes(b'\xef\xbb\xbfKING RICHARD:\r\n')
    r = sample(f'--ckpt={out / "best.pt"}', f'--prompt=@{tmp_path / "prompt.txt"}',
               '--max_new_tokens=200', f'--out={tmp_path / "more.txt"}', '--device=cpu')
    assert r.returncode == 0, r.stderr
    assert (tmp_path / 'more.txt').read_text() == text


def test_one_sample_streamed_to_the_screen_is_the_sample_written_to_a_file(uninterrupted, tmp_path,
                                                                           monkeypatch):
    _, out = uninterrupted
    monkeypatch.setenv('HOME', str(tmp_path)) # --out=~/s.txt below: the shell would leave it as it is
    args = [f'--ckpt={out / "best.pt"}', '--prompt=ROMEO:', '--temperature=0.8', '--top_k=10',
            '--max_new_tokens=80', '--seed=3', '--device=cpu']
    streamed = run_here(os.path.join('scripts', 'sample.py'), *args, '--progress_seconds=1e-9')
    written = run_here(os.path.join('scripts', 'sample.py'), *args, '--out=~/s.txt',
                       f'--ckpt={out}', '--progress_seconds=1e-9') # a folder: its best.pt, the same checkpoint
    assert streamed.returncode == written.returncode == 0, streamed.stderr + written.stderr
    assert streamed.stdout == (tmp_path / 's.txt').read_text()
    # a progress line after every character but the last here, on stderr; none where the sample streams
    assert streamed.stderr == ''
    progress = re.findall(r'^(\d+) of 80 characters \| [\d.]+s, [\d.]+ ms/character, \d+s left$',
                          written.stderr, re.M)
    assert progress == [str(k) for k in range(1, 80)] and written.stderr.count('\n') == 79
    assert streamed.stdout.startswith('ROMEO:') and len(streamed.stdout) == len('ROMEO:') + 80 + 1


def test_a_bare_state_dict_of_the_lectures_model_samples_as_its_checkpoint_does(uninterrupted, tmp_path):
    """torch.save(model.state_dict(), 'model.pt') at the end of the lecture's own gpt.py: a model
    without its shape and vocabulary, which sample.py reads off the weights and Tiny Shakespeare."""
    _, out = uninterrupted
    weights = torch.load(out / 'best.pt', weights_only=True)['model']
    theirs = lecture_layout(65, n_embd=16, n_head=2, n_layer=1, block_size=16) # TINY's shape
    theirs.load_state_dict(weights, strict=True)
    torch.save(theirs.state_dict(), tmp_path / 'model.pt')
    compiled = {'_orig_mod.' + k: v for k, v in weights.items()} # the state_dict of torch.compile(model)
    torch.save(compiled, tmp_path / 'compiled.pt')
    args = ['--prompt=ROMEO:', '--max_new_tokens=60', '--num_samples=2', '--device=cpu']
    ours = sample(f'--ckpt={out / "best.pt"}', *args)
    for name in ('model.pt', 'compiled.pt'):
        r = sample(f'--ckpt={tmp_path / name}', *args)
        assert r.returncode == 0 and r.stdout == ours.stdout, r.stderr
        assert r.stderr == (f"note: {tmp_path / name} is a bare state_dict: read as GPTLanguageModel with "
                            "n_embd=16 n_head=2 n_layer=1 block_size=16, and Tiny Shakespeare's characters\n")
    # another shape, read off the weights too; attention_map.py loads it the same way
    torch.save(lecture_layout(65, n_embd=24, n_head=3, n_layer=2, block_size=8).state_dict(), tmp_path / 'm.pt')
    r = run_here(os.path.join('scripts', 'attention_map.py'), f'--ckpt={tmp_path / "m.pt"}', '--prompt=ROMEO:')
    assert r.returncode == 0 and 'n_embd=24 n_head=3 n_layer=2 block_size=8' in r.stderr, r.stderr
    assert 'where each of its 2 x 3 heads looks, over 6 characters' in r.stdout
    # what a state_dict cannot tell
    torch.save(lecture_layout(30, 16, 2, 1, 16).state_dict(), tmp_path / 'other_text.pt')
    one_line_error(sample(f'--ckpt={tmp_path / "other_text.pt"}'), 'of a model of 30 characters, not Tiny '
                   "Shakespeare's 65: only gpt.py's own checkpoints keep the characters of another text")
    renamed = {k.replace('.sa.', '.attn.'): v for k, v in weights.items()} # a name not the lecture's
    torch.save(renamed, tmp_path / 'renamed.pt')
    r = sample(f'--ckpt={tmp_path / "renamed.pt"}')
    note, error = r.stderr.splitlines()
    assert r.returncode == 1 and 'n_layer=1 ' in note, r.stderr # its blocks still counted
    assert error.startswith(f'error: {tmp_path / "renamed.pt"} does not fit GPTLanguageModel as this code '
                            'builds it: Missing key(s) in state_dict: "blocks.0.sa.'), error
    torch.save(torch.nn.Linear(2, 2).state_dict(), tmp_path / 'linear.pt')
    one_line_error(sample(f'--ckpt={tmp_path / "linear.pt"}'), 'holds a state_dict, but not one of '
                   'GPTLanguageModel: it has no token_embedding_table.weight')
    # nor can it resume: it has no optimizer
    (tmp_path / 'run').mkdir()
    shutil.copy(tmp_path / 'model.pt', tmp_path / 'run' / 'ckpt.pt')
    r = run_here('gpt.py', *TINY, '--max_iters=400', f'--out_dir={tmp_path / "run"}', '--resume=True')
    assert r.returncode == 1 and r.stderr.splitlines()[1].startswith('error: cannot resume from'), r.stderr
    assert 'only a model to sample from' in r.stderr


def test_sample_errors_are_one_line(uninterrupted, tmp_path):
    _, out = uninterrupted
    ckpt = f'--ckpt={out / "best.pt"}'
    one_line_error(sample(ckpt, '--prompt=caf\u00e9 \u20ac'), 'never saw', "'\u00e9\u20ac'")
    one_line_error(sample(f'--ckpt={tmp_path / "missing.pt"}'), 'no checkpoint at', 'gpt.py writes one')
    (tmp_path / 'bad.pt').write_bytes(b'\x80\x02 not a checkpoint')
    one_line_error(sample(f'--ckpt={tmp_path / "bad.pt"}'), 'not a readable checkpoint')
    (tmp_path / 'cut.pt').write_bytes((out / 'best.pt').read_bytes()[:5000]) # a copy cut short
    one_line_error(sample(f'--ckpt={tmp_path / "cut.pt"}'), 'not a readable checkpoint of gpt.py (damaged, cut short')
    torch.save({'step': 300}, tmp_path / 'other.pt')
    one_line_error(sample(f'--ckpt={tmp_path / "other.pt"}'),
                   'does not hold the model, its config and its vocabulary')
    checkpoint = torch.load(out / 'best.pt', weights_only=True)
    del checkpoint['config']['n_embd']
    torch.save(checkpoint, tmp_path / 'old.pt')
    one_line_error(sample(f'--ckpt={tmp_path / "old.pt"}'), 'is not a checkpoint of gpt.py: its config has no n_embd')
    r = sample(ckpt, f'--prompt=@{tmp_path / "nope.txt"}')
    one_line_error(r, 'cannot read the prompt file', 'nope.txt: No such file or directory')
    assert '[Errno' not in r.stderr
    (tmp_path / 'latin1.txt').write_bytes(b'ROMEO:\n' * 2000 + 'caf\u00e9'.encode('latin-1'))
    one_line_error(sample(ckpt, f'--prompt=@{tmp_path / "latin1.txt"}'),
                   'not UTF-8 text (byte 0xe9 at offset 14,003)') # in the file, not in a buffer of it
    (tmp_path / 'windows.txt').write_bytes(b'ROMEO:\r\nJULIET:\r\n') # '\r' is not in the vocabulary
    r = sample(ckpt, f'--prompt=@{tmp_path / "windows.txt"}', '--max_new_tokens=3')
    assert r.returncode == 0 and r.stdout.startswith('ROMEO:\nJULIET:\n'), r.stderr
    one_line_error(sample(ckpt, '--temperature=0'), # greedy decoding, as a learner may mean by 0
                   '--temperature: must be a number > 0, got 0 (--top_k=1 takes the likeliest character '
                   'every time)')
    nowhere = tmp_path / 'no' / 's.txt' # said before sampling, not after
    one_line_error(sample(ckpt, f'--out={nowhere}'), f'--out {nowhere}: no such folder')
    one_line_error(sample(ckpt, f'--out={tmp_path}'), f'--out {tmp_path}: it is a folder; give the name of a file')
    one_line_error(sample(ckpt, '--temperature=nan'), '--temperature: must be a number > 0, got nan')
    one_line_error(sample(ckpt, '--temperature=1e-320'), '--temperature must be at least 1.2e-38') # 0 in float32
    one_line_error(sample(ckpt, '--top_k=-3'), '--top_k')
    one_line_error(sample(ckpt, '--progress_seconds=-1'), '--progress_seconds must be >= 0, got -1.0')
    one_line_error(sample(ckpt, f'--seed={2**64}'), '--seed must be from -2**63 to 2**64 - 1') # torch's range
    one_line_error(sample(ckpt, '--no_such_option=1'), 'unrecognized')
    one_line_error(sample('--ckpt='), "--ckpt is empty: give a checkpoint, or a run's folder")
    one_line_error(sample(ckpt, '--prompt=@'), '--prompt=@ needs the name of a file after the @')
    torch.save({'model': {'x': torch.zeros(1)}, 'config': {k: 8 for k in gpt.SHAPE_KEYS},
                'chars': list('ab')}, tmp_path / 'other.pt')
    one_line_error(sample(f'--ckpt={tmp_path / "other.pt"}'), 'does not fit GPTLanguageModel')


# ------------ scripts/plot_losses.py

def test_plot_losses_writes_a_png(uninterrupted, tmp_path):
    pytest.importorskip('matplotlib')
    _, out = uninterrupted
    r = run_here(os.path.join('scripts', 'plot_losses.py'), str(out / 'log.csv'), f'--out={tmp_path / "l.png"}')
    assert r.returncode == 0, r.stderr
    assert (tmp_path / 'l.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert os.listdir(tmp_path) == ['l.png'] # written to a temporary file, then renamed
    r = run_here(os.path.join('scripts', 'plot_losses.py'), str(out), f'--out={tmp_path / "m.png"}')
    assert r.returncode == 0, r.stderr # a run's folder
    assert (tmp_path / 'm.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    rows = [row.split(',') for row in (out / 'log.csv').read_text().splitlines()[1:]]
    best = min(rows, key=lambda row: float(row[2]))
    table = r.stdout.splitlines()[2:] # the run's best and last val loss
    assert table == [f'| {out} | {float(best[2]):.4f} | {best[0]} | {float(rows[-1][2]):.4f} | 300 |',
                     f'wrote {tmp_path / "m.png"}']
    missing = tmp_path / 'no such folder' / 'l.png'
    r = run_here(os.path.join('scripts', 'plot_losses.py'), str(out / 'log.csv'), f'--out={missing}')
    assert r.returncode == 1 and r.stderr == f'error: cannot write {missing}: No such file or directory\n'


def test_plot_losses_puts_several_runs_side_by_side(uninterrupted, tmp_path):
    pytest.importorskip('matplotlib')
    _, out = uninterrupted
    (tmp_path / 'b').mkdir()
    (tmp_path / 'b' / 'log.csv').write_text('step,train_loss,val_loss,elapsed_s\n0,4.2,4.3,0.1\n'
                                            '50,2.0,2.5,1.0\n100,1.5,2.6,2.0\n')
    r = run_here(os.path.join('scripts', 'plot_losses.py'), str(out / 'log.csv'), 'b', cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[3:] == ['| b | 2.5000 | 50 | 2.6000 | 100 |', 'wrote losses.png']
    assert r.stdout.splitlines()[2].startswith(f'| {out / "log.csv"} | ')
    assert (tmp_path / 'losses.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n' # here, not beside a log
    assert sorted(os.listdir(tmp_path)) == ['b', 'losses.png'] and os.listdir(tmp_path / 'b') == ['log.csv']


def test_plot_losses_skips_a_last_row_cut_short(uninterrupted, tmp_path, capsys):
    """A full disk or a crash while gpt.py appended a row leaves it without its newline."""
    _, out = uninterrupted
    log = tmp_path / 'log.csv'
    log.write_text((out / 'log.csv').read_text() + '350,1.9')
    read_log = runpy.run_path(os.path.join(ROOT, 'scripts', 'plot_losses.py'))['read_log']
    rows = read_log(str(log))
    assert [step for step, _, _ in rows] == list(range(0, 301, 50))
    assert capsys.readouterr().out == (f'note: the last row of {log} is incomplete (the run stopped '
                                       'while writing it); plotting the rows before it\n')
    assert read_log(str(out / 'log.csv')) == rows and capsys.readouterr().out == '' # a whole log


def test_ctrl_c_while_plotting_keeps_the_earlier_plot_and_leaves_no_temporary_file(uninterrupted, tmp_path,
                                                                                   monkeypatch):
    figure = pytest.importorskip('matplotlib.figure')
    _, out = uninterrupted
    (tmp_path / 'l.png').write_bytes(b'an earlier plot')
    def interrupted(fig, path, **kwargs): # half a file, then Ctrl-C
        open(path, 'wb').write(b'\x89PNG half')
        raise KeyboardInterrupt
    monkeypatch.setattr(figure.Figure, 'savefig', interrupted)
    r = run_here(os.path.join('scripts', 'plot_losses.py'), str(out / 'log.csv'),
                 f'--out={tmp_path / "l.png"}')
    assert r.returncode == 130 and r.stderr == '', r.stderr
    assert os.listdir(tmp_path) == ['l.png'] and (tmp_path / 'l.png').read_bytes() == b'an earlier plot'


def test_plot_losses_without_a_log_says_where_logs_come_from(tmp_path):
    r = run_here(os.path.join('scripts', 'plot_losses.py'), cwd=tmp_path)
    one_line_error(r, 'no log at out/log.csv', 'gpt.py writes one')
    assert os.listdir(tmp_path) == []


def test_plot_losses_without_matplotlib_says_how_to_get_it(uninterrupted):
    _, out = uninterrupted
    code = (f"import sys; sys.modules['matplotlib'] = None; sys.path.insert(0, {ROOT + '/scripts'!r}); "
            f"import plot_losses; plot_losses.main([{str(out / 'log.csv')!r}])")
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert r.returncode == 1 and 'pip install matplotlib' in r.stderr and 'Traceback' not in r.stderr


def test_a_run_that_diverges_stops_before_it_saves_a_broken_model(tmp_path):
    r = run_here('gpt.py', *TINY, '--max_iters=300', '--learning_rate=1e30', f'--out_dir={tmp_path}')
    one_line_error(r, 'training diverged at step ', '(a loss of nan): try a lower --learning_rate (now 1e+30)',
                   f'{tmp_path} keeps the checkpoints from before')
    step = int(re.search(r'diverged at step (\d+)', r.stderr).group(1))
    assert f'step {step}: train loss nan' in r.stdout
    saved = torch.load(tmp_path / 'ckpt.pt', weights_only=True)
    assert saved['step'] == step - 50 and all(v.isfinite().all() for v in saved['model'].values())
    assert (tmp_path / 'log.csv').read_text().splitlines()[-1].startswith(f'{step - 50},')
    r = run_here('bigram.py', '--learning_rate=1e9', '--max_iters=100', '--eval_interval=50', '--eval_iters=1')
    one_line_error(r, 'training diverged at step ', 'try a lower --learning_rate (now 1000000000.0)')


def test_a_run_that_ignores_ctrl_c_goes_on(tmp_path, monkeypatch):
    """Started with SIGINT ignored (a background job of a shell script, which Ctrl-C must not
    stop), gpt.py leaves it so, as Python does."""
    adamw_step, calls = torch.optim.AdamW.step, []
    def ctrl_c_at_step_60(self, *args, **kwargs):
        adamw_step(self, *args, **kwargs)
        calls.append(1)
        if len(calls) == 60:
            signal.raise_signal(signal.SIGINT)
    monkeypatch.setattr(torch.optim.AdamW, 'step', ctrl_c_at_step_60)
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        r = run_here('gpt.py', *TINY, '--max_iters=100', f'--out_dir={tmp_path}')
    finally:
        signal.signal(signal.SIGINT, before)
    assert r.returncode == 0 and 'Ctrl-C' not in r.stderr, r.stderr
    assert len(calls) == 100 and torch.load(tmp_path / 'ckpt.pt', weights_only=True)['step'] == 100


def test_ctrl_c_after_the_weights_diverged_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    adamw_step, calls = torch.optim.AdamW.step, []
    def diverge_then_ctrl_c(self, *args, **kwargs):
        adamw_step(self, *args, **kwargs)
        calls.append(1)
        if len(calls) == 60: # 10 steps after the evaluation at step 50
            with torch.no_grad():
                for p in self.param_groups[0]['params']:
                    p.fill_(float('nan'))
            signal.raise_signal(signal.SIGINT)
    monkeypatch.setattr(torch.optim.AdamW, 'step', diverge_then_ctrl_c)
    r = run_here('gpt.py', *TINY, '--max_iters=300', f'--out_dir={tmp_path}')
    assert r.returncode == 130, r.stderr
    assert (f'stopped at step 60; nothing saved: the weights are no longer numbers (training diverged), '
            f'and {tmp_path / "ckpt.pt"} keeps step 50') in r.stdout
    saved = torch.load(tmp_path / 'ckpt.pt', weights_only=True)
    assert saved['step'] == 50 and all(v.isfinite().all() for v in saved['model'].values())
    assert 'Ctrl-C: saving a checkpoint after this step' in r.stderr # stderr here has no file descriptor
    # a model of NaNs all the same (saved by other means): sample.py says what it is
    torch.save({**saved, 'model': {k: torch.full_like(v, float('nan')) for k, v in saved['model'].items()}},
               tmp_path / 'nan.pt')
    one_line_error(sample(f'--ckpt={tmp_path / "nan.pt"}'), 'has weights that are not numbers')


def test_a_new_run_never_overwrites_an_earlier_one(uninterrupted):
    _, out = uninterrupted
    before = (out / 'ckpt.pt').read_bytes()
    r = run_here('gpt.py', *TINY, '--max_iters=10', f'--out_dir={out}')
    one_line_error(r, 'holds an earlier run', '--resume=True', 'another --out_dir')
    assert (out / 'ckpt.pt').read_bytes() == before


def test_resume_after_the_models_code_changed_is_a_one_line_error(uninterrupted, tmp_path):
    """A learner adds a module to GPTLanguageModel, then resumes from a checkpoint saved before."""
    _, out = uninterrupted
    checkpoint = torch.load(out / 'ckpt.pt', weights_only=True)
    del checkpoint['model']['lm_head.bias'] # as if saved by a model without it
    (tmp_path / 'out').mkdir()
    torch.save(checkpoint, tmp_path / 'out' / 'ckpt.pt')
    r = run_here('gpt.py', *TINY, '--max_iters=400', f'--out_dir={tmp_path / "out"}', '--resume=True')
    one_line_error(r, f'{tmp_path / "out" / "ckpt.pt"} does not fit GPTLanguageModel as this code builds it: '
                      'Missing key(s) in state_dict: "lm_head.bias".\n')
    r = sample(f'--ckpt={tmp_path / "out" / "ckpt.pt"}', '--device=cpu')
    one_line_error(r, 'does not fit GPTLanguageModel as this code builds it: Missing key(s)')


def test_a_log_of_a_header_alone_is_no_earlier_run(tmp_path):
    """A run killed (not stopped by Ctrl-C) before its first evaluation ended leaves a log.csv with
    no row and nothing else: a new run starts there. A log with a row is an earlier run's."""
    (tmp_path / 'log.csv').write_text('step,train_loss,val_loss,elapsed_s\n')
    r = run_here('gpt.py', *TINY, '--max_iters=0', '--max_new_tokens=0', f'--out_dir={tmp_path}')
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path)) == ['best.pt', 'ckpt.pt', 'log.csv']
    os.remove(tmp_path / 'ckpt.pt')
    os.remove(tmp_path / 'best.pt')
    r = run_here('gpt.py', *TINY, '--max_iters=0', '--max_new_tokens=0', f'--out_dir={tmp_path}')
    one_line_error(r, f'{tmp_path} holds the best.pt or log.csv of an earlier run')


def test_a_run_removes_the_files_of_saves_cut_short_in_its_out_dir(tmp_path):
    """kill -9 or a power cut during a save leaves its temporary file, hidden, as big as a
    checkpoint: the next run there removes it, and only it."""
    cut = ['.tmp-k3x9a1-ckpt.pt', '.tmp-4242-best.pt', '.tmp-q0e7_z-log.csv']
    for name in cut:
        (tmp_path / name).write_bytes(b'half a file' * 100)
    (tmp_path / '.tmp-notes.txt').write_text('mine')
    r = run_here('gpt.py', *TINY, '--max_iters=0', '--max_new_tokens=0', f'--out_dir={tmp_path}')
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path)) == ['.tmp-notes.txt', 'best.pt', 'ckpt.pt', 'log.csv']
    assert re.findall(r'^note: removed (.*) \(0\.0 MB\), left by a save that was cut short$', r.stdout, re.M) \
        == [str(tmp_path / name) for name in sorted(cut)]


def test_a_new_run_never_overwrites_the_best_model_of_an_earlier_one(uninterrupted, tmp_path):
    """ckpt.pt deleted to save room, best.pt kept: a new run's first evaluation would replace it."""
    _, out = uninterrupted
    kept = tmp_path / 'out'
    kept.mkdir()
    shutil.copy(out / 'best.pt', kept / 'best.pt')
    before = (kept / 'best.pt').read_bytes()
    r = run_here('gpt.py', *TINY, '--max_iters=10', f'--out_dir={kept}')
    one_line_error(r, f'{kept} holds the best.pt or log.csv of an earlier run', 'another --out_dir')
    assert (kept / 'best.pt').read_bytes() == before and os.listdir(kept) == ['best.pt']


def test_sampling_out_of_memory_names_the_option_that_sizes_the_batch(uninterrupted, monkeypatch):
    _, out = uninterrupted
    def multinomial(*args, **kwargs): # as the CPU says it (the samples are one batch)
        raise RuntimeError(CPU_ALLOCATOR)
    monkeypatch.setattr(torch, 'multinomial', multinomial)
    one_line_error(sample(f'--ckpt={out / "best.pt"}', '--device=cpu'),
                   'error: out of memory (40.0 GB asked for); try a smaller --num_samples\n')


def test_sample_into_a_reader_that_stops_early_ends_without_a_traceback(uninterrupted):
    _, out = uninterrupted
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, 'scripts', 'sample.py'),
                          f'--ckpt={out / "best.pt"}', '--num_samples=2000', '--max_new_tokens=100',
                          '--device=cpu'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={k: v for k, v in os.environ.items() if k != 'PYTHONUNBUFFERED'})
    p.stdout.readline() # like | head -1: 200 KB do not fit the pipe, so the write fails
    p.stdout.close()
    assert p.wait(timeout=60) == 1
    assert p.stderr.read() == ''
