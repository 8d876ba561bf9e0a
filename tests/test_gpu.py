"""The speed switches on a CUDA GPU; every test here is skipped on a machine without one."""
import os

import pytest
import torch

import gpt
from conftest import needs_input
from test_scripts import losses, run

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SMALL = ['--n_layer=2', '--n_head=2', '--n_embd=64', '--block_size=32', '--batch_size=16',
         '--max_iters=60', '--eval_interval=30', '--eval_iters=10', '--max_new_tokens=40']


def test_switches_stay_on_with_cuda(monkeypatch):
    for key in ('use_tf32', 'use_compile', 'use_fused_adamw', 'use_pinned'):
        monkeypatch.setattr(gpt, key, True)
    monkeypatch.setattr(gpt, 'fast_attention', None)
    monkeypatch.setattr(gpt, 'device', 'cuda')
    assert gpt.configure() == 'cuda'
    assert gpt.use_tf32 and gpt.use_fused_adamw and gpt.use_pinned and gpt.fast_attention
    assert gpt.use_compile == gpt.can_compile()
    assert torch.backends.cuda.matmul.allow_tf32


def test_pinned_get_batch_draws_the_cpu_batches(tiny, monkeypatch):
    data = torch.arange(1000)
    monkeypatch.setattr(gpt, 'use_pinned', True)
    monkeypatch.setattr(gpt, 'device', 'cuda')
    torch.manual_seed(0)
    x_gpu, y_gpu = gpt.get_batch(data.cuda())
    torch.manual_seed(0)
    x_cpu, y_cpu = gpt.get_batch(data) # gathered on the CPU, then copied as the lecture does
    assert x_gpu.is_cuda and torch.equal(x_gpu, x_cpu) and torch.equal(y_gpu, y_cpu)


def test_batched_attention_equals_the_lectures_heads_on_cuda(tiny, monkeypatch):
    monkeypatch.setattr(torch.backends.cuda.matmul, 'allow_tf32', False) # exact float32
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
            '--prompt=ROMEO:', '--max_new_tokens=30')
    assert r.returncode == 0, r.stderr
    return r.stdout


@needs_input
def test_a_compiled_bf16_run_trains_and_its_checkpoint_samples_on_a_cpu(tmp_path):
    out = tmp_path / 'out'
    stdout = trained_small_run('cuda', out)
    assert 'use_bf16=True' in stdout and 'use_fused_adamw=True' in stdout
    sample = romeo(out, 'cpu')
    assert sample.startswith('ROMEO:') and len(sample) >= 36


def test_replayed_steps_train_exactly_like_plain_steps(tiny, monkeypatch):
    """GraphReplay of the whole step (forward, backward, capturable AdamW) changes no number."""
    monkeypatch.setattr(torch.backends.cuda.matmul, 'allow_tf32', False)
    for key, value in dict(device='cuda', use_bf16=False, use_fused_adamw=True).items():
        monkeypatch.setattr(gpt, key, value)
    data = torch.randint(65, (2000,), device='cuda')
    params = []
    for graphed in (False, True):
        monkeypatch.setattr(gpt, 'use_cuda_graph', graphed)
        torch.manual_seed(0)
        model = gpt.GPTLanguageModel(65).cuda()
        optimizer = gpt.make_optimizer(model)
        step = lambda x, y: gpt.train_step(model, optimizer, x, y)
        step = gpt.GraphReplay(step, warmup=2) if graphed else step
        for i in range(6):
            gpt.set_lr(optimizer, 1e-3 * (i + 1)) # a changing rate reaches the recorded update
            step(*gpt.get_batch(data))
        params.append([p.detach().clone() for p in model.parameters()])
    for a, b in zip(*params):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_each_replay_draws_new_dropout_masks():
    replay = gpt.GraphReplay(lambda x, y: torch.nn.functional.dropout(x, 0.5) + y, warmup=1)
    x, y = torch.ones(1000, device='cuda'), torch.zeros(1000, device='cuda')
    masks = [(replay(x, y) > 0).clone() for _ in range(4)]  # eager, recorded, then replays
    assert not torch.equal(masks[1], masks[2]) and not torch.equal(masks[2], masks[3])


@needs_input
def test_grad_accum_with_every_switch_on_trains_as_whole_batches_do():
    """--grad_accum=2 under torch.compile and CUDA graphs: the batch in two parts, about the same
    losses (bfloat16 adds in another order, so not exactly)."""
    found = []
    for parts in (1, 2):
        r = run('gpt.py', *SMALL, '--device=cuda', '--dropout=0', f'--grad_accum={parts}', '--out_dir=')
        assert r.returncode == 0, r.stderr
        found.append(losses(r.stdout))
    assert sorted(found[1]) == [0, 30, 60] and found[1][60][1] < found[1][0][1] - 0.5
    for step in (30, 60):
        assert abs(found[1][step][1] - found[0][step][1]) < 0.05, (step, found)
