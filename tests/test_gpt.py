"""gpt.py as a learner runs it: the command line, one-line errors, out_dir, resume and Ctrl-C."""
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest
import torch

import gpt
from conftest import ROOT, TINY_GPT, losses, needs_input, run_here, sample, signal_at_call

pytestmark = needs_input


def test_a_run_trains_saves_and_samples(tmp_path):
    r = run_here('gpt.py', *TINY_GPT, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith('device: cpu\nconfig: batch_size=8 block_size=16 max_iters=30 ')
    found = losses(r.stdout)
    assert sorted(found) == [0, 10, 20, 30] and found[30][1] < found[0][1] # it learned something
    assert re.search(r'^step 0: .* \| [\d.]+s$', r.stdout, re.M)
    assert re.search(r'^step 30: .* \| [\d.]+s, [\d.]+ ms/step$', r.stdout, re.M)
    assert sorted(os.listdir(tmp_path / 'out')) == ['best.pt', 'ckpt.pt', 'log.csv']
    rows = (tmp_path / 'out' / 'log.csv').read_text().splitlines()
    assert rows[0] == 'step,train_loss,val_loss,elapsed_s' and [row.split(',')[0] for row in rows[1:]] == \
        ['0', '10', '20', '30']
    assert len(sample(r.stdout, 30)) >= 50


def test_best_pt_holds_the_lowest_val_loss(tmp_path):
    """A learning rate warming up to one far too high: val loss falls, then rises, and best.pt
    stays behind. (The lowest was at step 10, 3.48 to 3.54, and step 20's 4.75 or more, with
    ATEN_CPU_CAPABILITY avx512, avx2 and default, on 1 thread and 2; a constant 0.3 was chaotic.)"""
    r = run_here('gpt.py', *TINY_GPT, '--learning_rate=2', '--lr_decay=True', '--warmup_iters=40', '--min_lr=2',
                 '--max_iters=40', cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    found = losses(r.stdout)
    best_step = min(found, key=lambda s: found[s][1])
    assert 0 < best_step < 40
    best = torch.load(tmp_path / 'out' / 'best.pt', weights_only=True)
    last = torch.load(tmp_path / 'out' / 'ckpt.pt', weights_only=True)
    assert best['step'] == best_step and last['step'] == 40
    assert round(best['best_val_loss'], 4) == found[best_step][1] == round(last['best_val_loss'], 4)


def test_the_sample_at_the_end_is_the_final_models_with_dropout_off(tmp_path, monkeypatch):
    """What python gpt.py prints last: the trained model's sample in eval mode, drawn with the random numbers
    as they were after the last evaluation (ckpt.pt keeps the model and them). The lecture sampled with
    dropout on; here dropout is 0.5, so a sample drawn with it on would be another text."""
    r = run_here('gpt.py', *TINY_GPT, '--dropout=0.5', cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ckpt = torch.load(tmp_path / 'out' / 'ckpt.pt', weights_only=True)
    for key, value in ckpt['config'].items():
        monkeypatch.setattr(gpt, key, value)
    model = gpt.GPTLanguageModel(len(ckpt['chars']))
    model.load_state_dict(ckpt['model'])
    torch.set_rng_state(ckpt['rng'])
    drawn = model.eval().generate(torch.zeros((1, 1), dtype=torch.long), max_new_tokens=500)[0].tolist()
    assert sample(r.stdout, 30) == ''.join(ckpt['chars'][i] for i in drawn) + '\n'


def test_a_resumed_run_keeps_the_best_model_and_its_loss(tmp_path):
    """best.pt across a resume. The rate warms up to one far too high (as above): the run stops at step 10,
    near its best, and goes on to 40 while val loss rises; best.pt stays the best before the stop, and the
    best loss is carried through (a resume that forgot it would call step 20 an improvement)."""
    args = [*TINY_GPT, '--learning_rate=2', '--lr_decay=True', '--warmup_iters=40', '--min_lr=2']
    first = run_here('gpt.py', *args, '--max_iters=10', cwd=tmp_path)
    second = run_here('gpt.py', *args, '--max_iters=40', '--resume=True', cwd=tmp_path)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    found = {**losses(first.stdout), **losses(second.stdout)}
    best_step = min(found, key=lambda s: found[s][1])
    assert best_step in losses(first.stdout) and sorted(losses(second.stdout)) == [20, 30, 40]
    best = torch.load(tmp_path / 'out' / 'best.pt', weights_only=True)
    last = torch.load(tmp_path / 'out' / 'ckpt.pt', weights_only=True)
    assert best['step'] == best_step and last['step'] == 40
    assert round(best['best_val_loss'], 4) == found[best_step][1] == round(last['best_val_loss'], 4)
    assert f"at step 10 (best val loss {found[best_step][1]:.4f})" in second.stdout


def test_a_stop_while_a_checkpoint_is_written_leaves_the_one_before_whole(tmp_path, monkeypatch):
    """Ctrl-C (or a crash) while step 10's ckpt.pt is being written: what was written so far is lost, the
    ckpt.pt of step 0 is whole, and the run resumes from it."""
    save, calls = torch.save, []
    def cut_short(obj, path, *args, **kwargs): # the 3rd save: step 0's ckpt.pt and best.pt, then step 10's
        calls.append(path)
        if len(calls) == 3:
            with open(path, 'wb') as f:
                f.write(b'PK') # the first bytes of a checkpoint, then the stop
            raise KeyboardInterrupt
        return save(obj, path, *args, **kwargs)
    monkeypatch.setattr(torch, 'save', cut_short)
    r = run_here('gpt.py', *TINY_GPT, cwd=tmp_path)
    monkeypatch.setattr(torch, 'save', save)
    assert r.returncode == 130 and '--resume=True' in r.stderr, r.stderr
    assert torch.load(tmp_path / 'out' / 'ckpt.pt', weights_only=True)['step'] == 0
    r = run_here('gpt.py', *TINY_GPT, '--resume=True', cwd=tmp_path)
    assert r.returncode == 0 and 'resumed from out/ckpt.pt at step 0 ' in r.stdout, r.stderr


@pytest.mark.parametrize('cuda, mps, picked', [(True, True, 'cuda'), (False, True, 'mps'), (False, False, 'cpu')])
def test_the_device_is_cuda_else_mps_else_the_cpu(cuda, mps, picked, tmp_path, monkeypatch):
    """Where this machine lacks the device picked, it says so in one line: the pick is what is shown."""
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, 'is_available', lambda: mps)
    r = run_here('gpt.py', '--max_iters=0', '--eval_iters=1', '--n_layer=1', '--n_embd=8', '--n_head=2',
                 '--block_size=4', '--out_dir=', cwd=tmp_path)
    assert r.stdout.startswith(f'device: {picked}\n') or r.stderr.startswith(f"error: cannot use device '{picked}'")


@pytest.mark.parametrize('args, words', [
    (['--bogus=1'], "unknown option '--bogus=1': the settings are batch_size, block_size, "),
    (['--max_iter=10'], "unknown option '--max_iter=10': did you mean --max_iters?"),
    (['--max_iter', '10'], "unknown option '--max_iter=10': did you mean --max_iters?"),
    (['n_layer=2'], "unknown option 'n_layer=2'"),
    (['--n_layer'], "unknown option '--n_layer': give it a value, as --n_layer=VALUE"),
    (['--n_layer', '2.5'], "--n_layer must be int, got '2.5'"),
    (['--n_layer=2.5'], "--n_layer must be int, got '2.5'"),
    (['--resume=1'], "--resume must be bool, got '1'"),
    (['--learning_rate=fast'], "--learning_rate must be float, got 'fast'"),
    (['--fast_attention=yes'], "--fast_attention must be bool or NoneType, got 'yes'"),
    (['--preset=gpu'], "--preset must be one of ['cpu'], got 'gpu'"),
    (['--preset=cpu', '--fast_attention=None', '--n_head=2.0'], "--n_head must be int, got '2.0'"),
])
def test_a_bad_option_is_one_line_and_exit_code_2(args, words, tmp_path):
    r = run_here('gpt.py', *args, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith(f'error: {words}') and r.stderr.count('\n') == 1, r.stderr
    assert r.stdout == '' and os.listdir(tmp_path) == []


def test_option_types_an_int_for_a_float_and_bare_strings(tmp_path):
    r = run_here('gpt.py', '--learning_rate=1', '--device=cpu', '--out_dir=2024', '--fast_attention=True',
                 '--max_iters=0', '--eval_iters=1', '--n_layer=1', '--n_embd=16', '--n_head=2',
                 '--block_size=8', cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert ' learning_rate=1.0 ' in r.stdout and ' out_dir=2024 ' in r.stdout and 'fast_attention=True' in r.stdout
    assert sorted(os.listdir(tmp_path / '2024')) == ['best.pt', 'ckpt.pt', 'log.csv']


def test_the_cpu_preset_then_the_other_options_wherever_they_stand(tmp_path):
    r = run_here('gpt.py', '--max_iters=4', '--preset=cpu', '--eval_interval=2', '--eval_iters=2',
                 '--out_dir=', cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    config = dict(kv.split('=') for kv in r.stdout.splitlines()[1].removeprefix('config: ').split())
    assert {k: config[k] for k in ('n_layer', 'n_embd', 'max_iters', 'eval_interval', 'lr_decay', 'device')} == \
        dict(n_layer='3', n_embd='96', max_iters='4', eval_interval='2', lr_decay='True', device='cpu')
    assert sorted(losses(r.stdout)) == [0, 2, 4]


def test_help_lists_every_setting_with_its_default_and_its_comment():
    """--help explains each setting with the comment it has at the top of gpt.py: one source."""
    r = run_here('gpt.py', '--help', '--bogus=1')
    assert r.returncode == 0 and r.stdout.startswith(gpt.__doc__)
    with open(os.path.join(ROOT, 'gpt.py'), encoding='utf-8') as f:
        top = f.read().split('# hyperparameters\n')[1].split('# ------------\n')[0]
    lines = {line.split()[0]: line for line in r.stdout.splitlines() if line.startswith('  --')}
    assert list(lines) == [f'--{key}={getattr(gpt, key)!r}' for key in gpt.config_keys]
    for key in gpt.config_keys:
        comment = next(line for line in top.splitlines() if line.startswith(f'{key} = ')).partition(' # ')[2]
        assert lines[f'--{key}={getattr(gpt, key)!r}'].endswith(f'  {comment}'.rstrip()), key
    assert lines['--max_iters=5000'] == '  --max_iters=5000'.ljust(26) + 'how many optimizer steps to take' # a column


@pytest.mark.parametrize('args, words', [
    (['--device=cuda'] if not torch.cuda.is_available() else ['--device=cuda:99'], "cannot use device 'cuda"),
    (['--device=mps'] if not torch.backends.mps.is_available() else ['--device=npu'], "cannot use device '"),
    (['--device=gpu'], "cannot use device 'gpu': Expected one of "),
])
def test_a_device_that_cannot_work_is_one_line(args, words, tmp_path):
    r = run_here('gpt.py', *args, cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith(f'error: {words}') and r.stderr.count('\n') == 1, r.stderr


def test_out_of_memory_is_one_line_naming_what_to_shrink(tmp_path):
    """On a CPU, a key matrix of 2**20 x 2**20 asks for 4 TB at once; on a GPU, CUDA's OutOfMemoryError."""
    r = run_here('gpt.py', '--device=cpu', '--n_embd=1048576', '--n_head=1', '--block_size=8', '--out_dir=',
                 cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert r.stderr == ('error: cpu ran out of memory: try a smaller --batch_size (now 64) or --block_size '
                        '(now 8), or a smaller model (--n_layer=6, --n_embd=1048576)\n')


def test_cudas_out_of_memory_is_one_line_too(tmp_path, monkeypatch):
    """CUDA says 'out of memory' where the CPU says 'can't allocate memory': the same line."""
    def full(*args):
        raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 20.00 GiB')
    monkeypatch.setattr(torch.nn.Embedding, 'forward', full) # (run_here runs gpt.py's classes anew)
    r = run_here('gpt.py', *TINY_GPT, '--out_dir=', cwd=tmp_path)
    assert (r.returncode, r.stderr) == (1, 'error: cpu ran out of memory: try a smaller --batch_size (now 8) or '
                                           '--block_size (now 16), or a smaller model (--n_layer=1, --n_embd=16)\n')


def test_a_new_run_never_overwrites_an_earlier_one(tmp_path):
    assert run_here('gpt.py', *TINY_GPT, '--max_iters=10', cwd=tmp_path).returncode == 0
    before = (tmp_path / 'out' / 'ckpt.pt').read_bytes()
    r = run_here('gpt.py', *TINY_GPT, cwd=tmp_path)
    assert r.returncode == 1 and r.stderr == ('error: out holds a run: go on with --resume=True, or start '
                                              'another with another --out_dir\n')
    assert (tmp_path / 'out' / 'ckpt.pt').read_bytes() == before


@pytest.fixture(scope='module')
def uninterrupted(tmp_path_factory):
    """60 steps with dropout in one go: the run that every resumed run must reproduce."""
    folder = tmp_path_factory.mktemp('whole')
    r = run_here('gpt.py', *TINY_GPT, '--max_iters=60', cwd=folder)
    assert r.returncode == 0, r.stderr
    return r.stdout, (folder / 'out' / 'log.csv').read_text()


@pytest.mark.trains
def test_resume_goes_on_exactly(uninterrupted, tmp_path):
    """Stopped at step 30, then resumed to 60: the same losses, log and sample as in one go (the
    weights, AdamW's moments and the random numbers of dropout and of the batches are all restored)."""
    full, log = uninterrupted
    first = run_here('gpt.py', *TINY_GPT, cwd=tmp_path)
    second = run_here('gpt.py', *TINY_GPT, '--max_iters=60', '--resume=True', cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert 'resumed from out/ckpt.pt at step 30 (best val loss ' in second.stdout
    assert {**losses(first.stdout), **losses(second.stdout)} == losses(full)
    assert 0 not in losses(second.stdout) and 30 not in losses(second.stdout) # done before it stopped
    assert sample(second.stdout, 60) == sample(full, 60)
    strip = lambda text: [row.rsplit(',', 1)[0] for row in text.splitlines()] # without the times
    assert strip((tmp_path / 'out' / 'log.csv').read_text()) == strip(log)


def test_sigterm_stops_and_says_how_to_resume_from_the_last_evaluation(tmp_path, monkeypatch):
    """kill, timeout or a job's time limit: as Ctrl-C (below). The signal comes while the batch
    after step 30's evaluation is drawn: after 2 evaluations of 2 x 5 batches and 30 steps."""
    args = [*TINY_GPT, '--eval_interval=30']
    full = run_here('gpt.py', *args, '--max_iters=90', f'--out_dir={tmp_path / "whole"}').stdout
    out = tmp_path / 'my run' # a space: the command printed to resume must quote it
    def default(signum, frame): # rather than this process dying, as gpt.py would without its handler
        raise AssertionError('gpt.py left SIGTERM to its default action')
    before = signal.signal(signal.SIGTERM, default)
    try:
        with signal_at_call(monkeypatch, torch, 'randint', 51, signal.SIGTERM): # a batch is a randint
            r = run_here('gpt.py', *args, '--max_iters=100000', f'--out_dir={out}')
    finally:
        signal.signal(signal.SIGTERM, before)
    assert r.returncode == 130 and r.stderr.count('\n') == 1 and 'Traceback' not in r.stderr, r.stderr
    python, script, *again = shlex.split(r.stderr.removeprefix('error: interrupted; resume with: '))
    assert python == 'python' and script == os.path.join(ROOT, 'gpt.py') and again[-1] == '--resume=True'
    r = run_here(script, *again, '--max_iters=90') # as printed, to step 90
    assert r.returncode == 0, r.stderr
    assert f'resumed from {out / "ckpt.pt"} at step 30 ' in r.stdout # the last evaluation's checkpoint
    assert losses(r.stdout) == {s: v for s, v in losses(full).items() if s > 30}
    assert sample(r.stdout, 90) == sample(full, 90)


def test_ctrl_c_stops_and_says_how_to_resume(uninterrupted, tmp_path, monkeypatch):
    """Ctrl-C (SIGINT: a KeyboardInterrupt) while the batch after step 40's evaluation is drawn: the
    message gives the command, which goes on from step 40's checkpoint to the uninterrupted run's
    losses."""
    full, _ = uninterrupted
    with signal_at_call(monkeypatch, torch, 'randint', 91, signal.SIGINT): # 5 evaluations of 2 x 5, 40 steps
        r = run_here('gpt.py', *TINY_GPT, '--max_iters=60', cwd=tmp_path)
    assert r.returncode == 130 and sorted(losses(r.stdout)) == [0, 10, 20, 30, 40], r.stderr
    assert r.stderr == (f"error: interrupted; resume with: python {os.path.join(ROOT, 'gpt.py')} "
                        f"{shlex.join(TINY_GPT)} --max_iters=60 --resume=True\n")
    r = run_here('gpt.py', *TINY_GPT, '--max_iters=60', '--resume=True', cwd=tmp_path)
    assert 'resumed from out/ckpt.pt at step 40 ' in r.stdout
    assert losses(r.stdout) == {50: losses(full)[50], 60: losses(full)[60]}
    assert sample(r.stdout, 60) == sample(full, 60)


@pytest.mark.parametrize('make, words', [
    (lambda out: None, 'No such file or directory'),
    (lambda out: (out / 'ckpt.pt').write_bytes(b'PK\x03\x04 cut short'), 'damaged, or cut short'),
])
def test_resuming_from_no_checkpoint_or_a_damaged_one_is_one_line(tmp_path, make, words):
    (tmp_path / 'out').mkdir()
    make(tmp_path / 'out')
    r = run_here('gpt.py', *TINY_GPT, '--resume=True', cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith('error: cannot resume from out/ckpt.pt: ') and \
        words in r.stderr and r.stderr.count('\n') == 1, r.stderr


def test_resuming_with_another_shape_is_one_line(tmp_path):
    """Each setting that shapes the weights, told apart from the checkpoint's: one line naming those that differ."""
    assert run_here('gpt.py', *TINY_GPT, '--max_iters=0', cwd=tmp_path).returncode == 0
    r = run_here('gpt.py', *TINY_GPT, '--n_embd=32', '--resume=True', cwd=tmp_path)
    assert r.returncode == 1 and r.stderr == ('error: cannot resume from out/ckpt.pt: its run has --n_embd=16: '
                                              'resume with that, or give this run another --out_dir\n')
    r = run_here('gpt.py', *TINY_GPT, '--n_head=4', '--n_layer=2', '--block_size=8', '--resume=True', cwd=tmp_path)
    assert r.returncode == 1 and r.stderr == ('error: cannot resume from out/ckpt.pt: its run has --n_head=2 '
                                              '--n_layer=1 --block_size=16: resume with that, or give this run '
                                              'another --out_dir\n'), r.stderr


def test_an_out_dir_that_cannot_be_written_is_one_line(tmp_path):
    (tmp_path / 'file').write_text('not a folder')
    r = run_here('gpt.py', *TINY_GPT, '--out_dir=file', cwd=tmp_path)
    assert r.returncode == 1 and r.stderr == 'error: File exists: file\n', r.stderr


def test_importing_is_silent_and_writes_nothing(tmp_path):
    """Importing gpt, bigram or sample (which explore.py and evaluate.py import) runs nothing, whatever the command
    line, and writes nothing."""
    code = (f"import sys; sys.argv = ['x', '--max_new_tokens=oops']; sys.path[:0] = [{ROOT!r}, "
            f"{os.path.join(ROOT, 'scripts')!r}]; import gpt, bigram, sample")
    r = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == r.stderr == '' and os.listdir(tmp_path) == []


def test_the_preset_runs_in_a_folder_of_its_own_and_the_lecture_run_after_it_in_its_own(tmp_path):
    """A learner's first hour: the CPU preset, then the README's main command, which no longer meets the
    preset's run; resuming the preset's run with other settings says what to run; the scripts after a run
    read the latest run's folder by default."""
    preset = ['--preset=cpu', '--max_iters=4', '--eval_interval=2', '--eval_iters=2']
    r = run_here('gpt.py', *preset, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path / 'out-cpu')) == ['best.pt', 'ckpt.pt', 'log.csv']
    assert r.stdout.endswith('the model: out-cpu/best.pt; next: python scripts/sample.py, scripts/plot_losses.py, '
                             'scripts/evaluate.py\n')
    sampled = run_here('scripts/sample.py', '--max_new_tokens=5', cwd=tmp_path) # its default: out-cpu/best.pt
    assert sampled.returncode == 0 and len(sampled.stdout) >= 5, sampled.stderr
    default = lambda: ' '.join(run_here('scripts/sample.py', '--help', cwd=tmp_path).stdout.split())
    assert "(default: the latest run's, out-cpu/best.pt)" in default()
    r = run_here('gpt.py', *TINY_GPT, cwd=tmp_path)
    assert r.returncode == 0 and sorted(os.listdir(tmp_path / 'out')) == ['best.pt', 'ckpt.pt', 'log.csv'], r.stderr
    assert "(default: the latest run's, out/best.pt)" in default() # the run after it
    r = run_here('gpt.py', *TINY_GPT, '--out_dir=out-cpu', '--resume=True', cwd=tmp_path)
    assert r.returncode == 1 and r.stderr == ('error: cannot resume from out-cpu/ckpt.pt: its run has --preset=cpu: '
                                              'resume with that, or give this run another --out_dir\n')
    r = run_here('gpt.py', *preset, '--resume=True', cwd=tmp_path)
    assert r.returncode == 0 and 'resumed from out-cpu/ckpt.pt at step 4' in r.stdout, r.stderr


def test_resuming_a_finished_run_says_so_and_how_to_go_on_without_training(tmp_path):
    assert run_here('gpt.py', *TINY_GPT, cwd=tmp_path).returncode == 0
    r = run_here('gpt.py', *TINY_GPT, '--resume=True', cwd=tmp_path)
    assert r.returncode == 0 and losses(r.stdout) == {}, r.stderr # no step trained or evaluated again
    assert 'resumed from out/ckpt.pt at step 30 (best val loss ' in r.stdout
    assert ': the run is finished; a larger --max_iters goes on with it\n' in r.stdout
    r = run_here('gpt.py', *TINY_GPT, '--resume', 'True', '--max_iters', '40', cwd=tmp_path) # --key value too
    assert r.returncode == 0 and list(losses(r.stdout)) == [40], r.stderr


def test_ctrl_c_twice_gives_the_same_resume_command(tmp_path, monkeypatch):
    """A resumed run stopped again: the command it prints is the one the first stop printed, with one
    --resume=True, whatever the syntax of the options (--key value or --key=value)."""
    tiny = [arg for arg in TINY_GPT if not arg.startswith('--max_iters')]
    said = []
    for calls, again in ((51, []), (31, ['--resume', 'True'])): # 3 evaluations of 2 x 5 and 20 steps; then 20 more
        with signal_at_call(monkeypatch, torch, 'randint', calls, signal.SIGINT):
            r = run_here('gpt.py', '--max_iters', '60', *tiny, *again, cwd=tmp_path)
        assert r.returncode == 130, r.stderr
        said.append(r.stderr)
    assert said[0] == said[1] == (f"error: interrupted; resume with: python {os.path.join(ROOT, 'gpt.py')} "
                                  f"--max_iters=60 {shlex.join(tiny)} --resume=True\n")


def test_a_resumed_run_keeps_its_clock(tmp_path):
    """The seconds in log.csv and on screen go on from where the stopped run left them, never back to 0."""
    assert run_here('gpt.py', *TINY_GPT, cwd=tmp_path).returncode == 0
    time.sleep(1) # time between the two runs is not the run's
    r = run_here('gpt.py', *TINY_GPT, '--max_iters=60', '--resume=True', cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = [row.split(',') for row in (tmp_path / 'out' / 'log.csv').read_text().splitlines()[1:]]
    seconds = [float(row[3]) for row in rows]
    assert [int(row[0]) for row in rows] == [0, 10, 20, 30, 40, 50, 60] and seconds == sorted(seconds), seconds
    shown = [float(s) for s in re.findall(r'^step \d+: .*\| ([\d.]+)s', r.stdout, re.M)]
    assert len(shown) == 3 and shown[0] >= seconds[3] - 0.05 and shown[-1] - seconds[6] < 0.1, (shown, seconds)
    assert shown[0] - seconds[3] < 1 # (and the second between the runs not counted)


def test_resuming_onto_another_text_is_one_line(tmp_path):
    """A checkpoint of Tiny Shakespeare resumed with --input_file of other characters: one line, no training."""
    assert run_here('gpt.py', *TINY_GPT, '--max_iters=0', cwd=tmp_path).returncode == 0
    (tmp_path / 'other.txt').write_text('0123456789+=' * 500)
    r = run_here('gpt.py', *TINY_GPT, '--input_file=other.txt', '--resume=True', cwd=tmp_path)
    assert r.returncode == 1 and r.stderr == ('error: cannot resume from out/ckpt.pt: its run read another text, '
                                              'or give this run another --out_dir\n'), r.stderr
    assert 'step 10' not in r.stdout
