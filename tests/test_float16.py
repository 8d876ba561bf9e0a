"""float16 autocast with a GradScaler, as on a GPU without bfloat16 (Colab's T4): forced with
use_fp16 on this CPU, where PyTorch runs float16 autocast and GradScaler('cpu') too."""
import pytest
import torch

import gpt
from conftest import TINY_GPT, losses, needs_input, run_here, sample

pytestmark = needs_input

FAST = [*TINY_GPT, '--learning_rate=3e-3', '--max_iters=60', '--eval_interval=20']


def log(folder):
    """{step: (train, val)} from out/log.csv, to 6 decimals: finer than the printed 4."""
    rows = (folder / 'log.csv').read_text().splitlines()[1:]
    return {int(s): (float(t), float(v)) for s, t, v, _ in (row.split(',') for row in rows)}


@pytest.mark.trains
def test_float16_tracks_float32(tmp_path):
    """The same run in float16 and in float32: the same batches and dropout masks, matmuls rounded to
    float16's 11 significant bits (a relative 0.0005) instead of float32's 24. Measured with
    ATEN_CPU_CAPABILITY avx512, avx2 and default, the losses differed by 0.00095 at most over these 60
    steps; 0.005 allows five times that, while the loss falls by more than 0.4 in between."""
    runs = {}
    for fp16 in (False, True):
        r = run_here('gpt.py', *FAST, f'--use_fp16={fp16}', f'--out_dir={tmp_path / str(fp16)}')
        assert r.returncode == 0, r.stderr
        assert f' use_fp16={fp16} ' in r.stdout
        runs[fp16] = log(tmp_path / str(fp16))
    assert sorted(runs[True]) == sorted(runs[False]) == [0, 20, 40, 60]
    difference = max(abs(a - b) for step in runs[True] for a, b in zip(runs[True][step], runs[False][step]))
    assert 0 < difference <= 0.005, difference # 0: float16 did not run
    assert runs[True][60][1] < runs[True][0][1] - 0.4
    scalers = {fp16: torch.load(tmp_path / str(fp16) / 'ckpt.pt', weights_only=True)['scaler'] for fp16 in runs}
    assert scalers[False] == {} and scalers[True]['scale'] == 2.0**16 # GradScaler's first scale, kept: no overflow


def test_float16_resumes_exactly(tmp_path):
    """Stopped at step 40, then resumed to 60: what one run of 60 steps prints, in float16 too."""
    fp16 = [*FAST, '--use_fp16=True', f'--out_dir={tmp_path}']
    whole = run_here('gpt.py', *fp16, '--out_dir=')
    first = run_here('gpt.py', *fp16, '--max_iters=40')
    second = run_here('gpt.py', *fp16, '--resume=True')
    assert second.returncode == 0, second.stderr
    assert {**losses(first.stdout), **losses(second.stdout)} == losses(whole.stdout)
    assert sample(second.stdout, 60) == sample(whole.stdout, 60)


def test_the_scalers_state_is_saved_and_restored(tmp_path, tiny):
    """The scale that a run has grown or cut comes back on resume: where a gradient overflowed,
    GradScaler halved it; every 2,000 steps without one, it doubled."""
    r = run_here('gpt.py', *TINY_GPT, '--use_fp16=True', '--max_iters=10', f'--out_dir={tmp_path}')
    assert r.returncode == 0, r.stderr
    ckpt = torch.load(tmp_path / 'ckpt.pt', weights_only=True)
    ckpt['scaler'].update(scale=1024.0, _growth_tracker=7)
    torch.save(ckpt, tmp_path / 'ckpt.pt')
    for key, value in ckpt['config'].items():
        setattr(gpt, key, value)
    model = gpt.GPTLanguageModel(len(ckpt['chars']))
    optimizer = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler('cpu')
    gpt.load_checkpoint(str(tmp_path / 'ckpt.pt'), model, optimizer, scaler, ckpt['chars'])
    assert scaler.get_scale() == 1024.0 and scaler.state_dict()['_growth_tracker'] == 7
    plain = torch.amp.GradScaler('cpu', enabled=False) # a float32 run resumed from it: nothing to restore
    gpt.load_checkpoint(str(tmp_path / 'ckpt.pt'), model, optimizer, plain, ckpt['chars'])
    assert plain.state_dict() == {}


@pytest.mark.parametrize('major, args, fp16, bf16', [
    (7, [], True, False), # a T4 or a V100: float16 tensor cores, no bfloat16
    (8, [], False, True), # an A100, an H100: bfloat16, as before
    (7, ['--use_bf16=False'], False, False), # mixed precision off: float32
    (8, ['--use_fp16=True'], True, False), # forced
])
def test_cuda_without_bfloat16_gets_float16(major, args, fp16, bf16, monkeypatch):
    """configure on a pretend CUDA GPU of the given generation (this machine has none)."""
    monkeypatch.setattr(torch, 'zeros', lambda *a, **k: torch.tensor([0.0])) # the device check passes
    monkeypatch.setattr(torch.cuda, 'get_device_capability', lambda device=None: (major, 0))
    gpt.configure(['--device=cuda', *args]) # the TF32 flags it sets are put back after (conftest.py)
    assert (gpt.use_fp16, gpt.use_bf16) == (fp16, bf16)


def test_float16_is_off_on_a_cpu_unless_asked_for():
    gpt.configure(['--device=cpu'])
    assert not gpt.use_fp16 and not gpt.use_bf16
    gpt.configure(['--device=cpu', '--use_fp16=True'])
    assert gpt.use_fp16
