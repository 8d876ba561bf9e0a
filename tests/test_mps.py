"""gpt.py on a Mac's GPU (MPS); every test here is skipped on a machine without one.

This project has no Mac: these tests have never run. On a Mac, `python -m pytest tests/test_mps.py`.
"""
import pytest
import torch

import gpt
from conftest import needs_input
from test_gpu import romeo, trained_small_run

pytestmark = pytest.mark.skipif(not torch.backends.mps.is_available(), reason="needs an Apple GPU (MPS)")
SWITCHES = ('use_tf32', 'use_bf16', 'use_compile', 'use_fused_adamw')


def test_the_speed_switches_are_off_on_mps_by_default():
    gpt.configure(['--device=mps'])
    assert not any(getattr(gpt, key) for key in SWITCHES) and gpt.fast_attention is False


def test_get_batch_on_mps_draws_the_cpu_batches(tiny, monkeypatch):
    data = torch.arange(1000)
    torch.manual_seed(0)
    x_cpu, y_cpu = gpt.get_batch(data)
    torch.manual_seed(0)
    x_mps, y_mps = gpt.get_batch(data.to('mps'))
    assert x_mps.device.type == 'mps'
    assert torch.equal(x_mps.cpu(), x_cpu) and torch.equal(y_mps.cpu(), y_cpu)


def test_batched_attention_equals_the_lectures_heads_on_mps(tiny):
    torch.manual_seed(0)
    lecture = gpt.MultiHeadAttention(4, 8).to('mps').eval()
    batched = gpt.BatchedMultiHeadAttention(4, 8).to('mps').eval()
    batched.load_state_dict(lecture.state_dict())
    x = torch.randn(3, 16, 32).to('mps')
    torch.testing.assert_close(batched(x).cpu(), lecture(x).cpu(), atol=1e-5, rtol=1e-5)


@needs_input
def test_a_run_on_mps_trains_and_its_checkpoint_samples_on_mps_and_on_a_cpu(tmp_path):
    out = tmp_path / 'out'
    stdout = trained_small_run('mps', out)
    assert 'use_bf16=False' in stdout and 'fast_attention=False' in stdout
    for device in ('mps', 'cpu'):
        sample = romeo(out, device)
        assert sample.startswith('ROMEO:') and len(sample) == len('ROMEO:') + 30 + 1
