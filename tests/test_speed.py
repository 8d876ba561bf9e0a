"""The speed switches and the bench script (CPU only: no test asserts a time)."""
import os
import re

import gpt
from test_scripts import run


def test_speed_switches_turn_themselves_off_on_cpu(monkeypatch):
    for key in ('use_tf32', 'use_bf16', 'use_compile', 'use_fused_adamw', 'fast_attention'):
        monkeypatch.setattr(gpt, key, True if key != 'fast_attention' else None)
    monkeypatch.setattr(gpt, 'device', 'cpu')
    assert gpt.configure() == 'cpu'
    assert not any([gpt.use_tf32, gpt.use_bf16, gpt.use_compile, gpt.use_fused_adamw])
    assert gpt.fast_attention is False  # None means: the lecture's per-head math off CUDA
    assert gpt.autocast().__class__.__name__ == 'nullcontext'  # plain float32
    optimizer = gpt.make_optimizer(gpt.nn.Linear(2, 2))
    assert optimizer.defaults['fused'] in (None, False)


def test_fast_attention_can_be_asked_for_on_cpu(monkeypatch):
    monkeypatch.setattr(gpt, 'device', 'cpu')
    monkeypatch.setattr(gpt, 'fast_attention', True)
    gpt.configure()
    assert gpt.fast_attention is True


def test_bench_runs_on_cpu():
    r = run(os.path.join('scripts', 'bench.py'), '--n_layer=1', '--n_embd=32', '--n_head=2',
            '--block_size=16', '--batch_size=4', '--steps=3', '--warmup=1', '--peak_tflops=1',
            '--device=cpu')
    assert r.returncode == 0, r.stderr
    assert 'use_compile=False' in r.stdout and 'fast_attention=False' in r.stdout
    assert re.search(r'[\d.]+ ms/step, [\d,]+ tok/s, [\d.]+ TFLOP/step, MFU [\d.]+% of 1 TFLOP/s', r.stdout)


def test_bench_rejects_unknown_options():
    r = run(os.path.join('scripts', 'bench.py'), '--stepz=3')
    assert r.returncode == 2 and '--steps' in r.stderr and '--n_layer' in r.stderr
