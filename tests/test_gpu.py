"""The speed switches on a CUDA GPU; every test here is skipped on a machine without one."""
import os

import pytest
import torch

import gpt
from conftest import needs_input
from conftest import losses, run

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SMALL = ['--n_layer=2', '--n_head=2', '--n_embd=64', '--block_size=32', '--batch_size=16',
         '--max_iters=60', '--eval_interval=30', '--eval_iters=10']


def test_switches_are_on_with_cuda_by_default():
    gpt.configure(['--device=cuda'])
    assert gpt.use_tf32 and gpt.use_fused_adamw and gpt.use_compile and gpt.fast_attention
    assert gpt.use_bf16 == (torch.cuda.get_device_capability()[0] >= 8)
    assert torch.backends.cuda.matmul.allow_tf32


def test_pinned_get_batch_draws_the_cpu_batches(tiny):
    data = torch.arange(1000)
    torch.manual_seed(0)
    x_gpu, y_gpu = gpt.get_batch(data.cuda())
    torch.manual_seed(0)
    x_cpu, y_cpu = gpt.get_batch(data) # gathered on the CPU, as the lecture does
    assert x_gpu.is_cuda and torch.equal(x_gpu.cpu(), x_cpu) and torch.equal(y_gpu.cpu(), y_cpu)


def test_batched_attention_equals_the_lectures_heads_on_cuda(tiny):
    torch.backends.cuda.matmul.allow_tf32 = False # exact float32 (put back after: conftest.py)
    torch.manual_seed(0)
    lecture = gpt.MultiHeadAttention(4, 8).cuda().eval()
    batched = gpt.BatchedMultiHeadAttention(4, 8).cuda().eval()
    batched.load_state_dict(lecture.state_dict())
    x = torch.randn(3, 16, 32, device='cuda')
    torch.testing.assert_close(batched(x), lecture(x), atol=1e-5, rtol=1e-5)


def trained_small_run(device, out):
    """python gpt.py with SMALL on device, checkpoints into out: its output, once it has learned."""
    r = run('gpt.py', *SMALL, f'--device={device}', f'--out_dir={out}')
    assert r.returncode == 0, r.stderr
    found = losses(r.stdout)
    assert sorted(found) == [0, 30, 60] and found[60][1] < found[0][1] - 0.5
    return r.stdout


def romeo(out, device):
    """30 characters after 'ROMEO:' from out/best.pt, sampled on device."""
    r = run(os.path.join('scripts', 'sample.py'), f'--ckpt={out / "best.pt"}', f'--device={device}',
            '--prompt=ROMEO:')
    assert r.returncode == 0, r.stderr
    return r.stdout


@needs_input
def test_a_compiled_bf16_run_trains_and_its_checkpoint_samples_on_a_cpu(tmp_path):
    out = tmp_path / 'out'
    stdout = trained_small_run('cuda', out)
    assert 'use_bf16=True' in stdout and 'use_fused_adamw=True' in stdout
    sample = romeo(out, 'cpu')
    assert sample.startswith('ROMEO:') and len(sample) >= 36


@needs_input
def test_a_float16_run_trains_and_keeps_its_scale(tmp_path):
    """use_fp16 on CUDA: float16 autocast and the GradScaler, as a T4 runs by itself."""
    stdout = run('gpt.py', *SMALL, '--device=cuda', '--use_fp16=True', f'--out_dir={tmp_path}').stdout
    assert 'use_fp16=True' in stdout and 'use_bf16=False' in stdout
    found = losses(stdout)
    assert sorted(found) == [0, 30, 60] and found[60][1] < found[0][1] - 0.5
    assert torch.load(tmp_path / 'ckpt.pt', weights_only=True)['scaler']['scale'] > 0
