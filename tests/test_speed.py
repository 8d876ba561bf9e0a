"""The speed switches and the bench script (CPU only: no test asserts a time)."""
import gc
import json
import os
import re
import subprocess
import sys
import time
import types

import pytest
import torch

import gpt
from conftest import ROOT, needs_input, run_here

sys.path.insert(0, os.path.join(ROOT, 'scripts'))
import bench  # noqa: E402


def test_speed_switches_turn_themselves_off_on_cpu(monkeypatch):
    switches = ('use_tf32', 'use_bf16', 'use_compile', 'use_fused_adamw', 'use_pinned')
    for key in switches:
        monkeypatch.setattr(gpt, key, True)
    monkeypatch.setattr(gpt, 'fast_attention', None)
    monkeypatch.setattr(gpt, 'device', 'cpu')
    assert gpt.configure() == 'cpu'
    assert not any(getattr(gpt, key) for key in switches)
    assert gpt.fast_attention is False  # None means: the lecture's per-head math off CUDA
    assert gpt.autocast().__class__.__name__ == 'nullcontext'  # plain float32
    optimizer = gpt.make_optimizer(gpt.nn.Linear(2, 2))
    assert optimizer.defaults['fused'] in (None, False)


def test_compiling_the_blocks_keeps_the_state_dict(tiny):
    model = gpt.GPTLanguageModel(65)
    keys = list(model.state_dict())
    gpt.compile_blocks(model) # compiles lazily, at the first call: nothing is compiled here
    assert list(model.state_dict()) == keys
    assert all(block._compiled_call_impl is not None for block in model.blocks)


def test_an_unknown_compile_mode_is_a_one_line_error():
    r = run_here('gpt.py', '--compile_mode=fastest', '--device=cpu')
    assert r.returncode == 1 and r.stderr.startswith('error: --compile_mode must be one of')
    assert len(r.stderr.strip().splitlines()) == 1


def test_fast_attention_can_be_asked_for_on_cpu(monkeypatch):
    monkeypatch.setattr(gpt, 'device', 'cpu')
    monkeypatch.setattr(gpt, 'fast_attention', True)
    gpt.configure()
    assert gpt.fast_attention is True


def test_bench_runs_on_cpu():
    r = run_here(os.path.join('scripts', 'bench.py'), '--n_layer=1', '--n_embd=32', '--n_head=2',
                 '--block_size=16', '--batch_size=4', '--steps=3', '--warmup=1', '--peak_tflops=1',
                 '--device=cpu', '--evals=1', '--eval_iters=2', '--saves=1', '--profile=2', '--grad_accum=2')
    assert r.returncode == 0, r.stderr
    assert 'batch_size=4 (grad_accum=2) block_size=16' in r.stdout
    assert re.search(r'estimate_loss 1: [\d.]+ s for 2 x 2 batches', r.stdout)
    assert re.search(r'checkpoint 1: [\d.]+ s for [\d.]+ MB', r.stdout)
    profile = r.stdout.split('profile of 2 steps, by self_cpu_time_total:\n')[1]
    assert 'aten::mm' in profile and 'Optimizer.step' in profile # the matmuls and AdamW's update
    assert 'use_compile=False' in r.stdout and 'fast_attention=False' in r.stdout
    assert 'use_pinned=False' in r.stdout
    assert re.search(r'[\d.]+ ms/step, [\d,]+ tok/s, [\d.]+ TFLOP/step, MFU [\d.]+% of 1 TFLOP/s', r.stdout)


def test_a_step_of_the_lectures_config_is_1_164_tflop():
    """The README's figure for MFU: 6 FLOPs per weight per token (2 forward, 4 backward), the two
    embedding tables left out (a lookup does no multiplying), plus attention's two T x T products
    (scores, weighted sum) of 2 * T * C each per token, 3 times for forward and backward, in every
    layer; over a batch of 64 x 256 tokens."""
    weights = 10_788_929 - 65 * 384 - 256 * 384
    per_token = 6 * weights + 6 * 2 * 256 * 384 * 6 # n_layer = 6
    flops = bench.flops_per_step(gpt.GPTLanguageModel(65))
    assert flops == per_token * 64 * 256 and round(flops / 1e12, 3) == 1.164


def test_bench_says_how_long_the_timed_steps_will_take_after_a_slow_warm_up(monkeypatch):
    """The lecture's config on a CPU: 25 steps of 9 s each. After the warm-up, say how long the rest is."""
    clock = iter(range(0, 10**6, 10)) # every reading of the clock 10 s after the one before
    monkeypatch.setattr(time, 'time', lambda: next(clock))
    r = run_here(os.path.join('scripts', 'bench.py'), '--n_layer=1', '--n_embd=32', '--n_head=2',
                 '--block_size=16', '--batch_size=4', '--steps=20', '--warmup=5', '--device=cpu')
    assert r.returncode == 0, r.stderr
    assert 'warm-up: 10.0 s; the 20 timed steps take about 0.7 min more\n' in r.stdout # 2 s a step


def test_bench_rejects_unknown_options():
    r = run_here(os.path.join('scripts', 'bench.py'), '--stepz=3')
    assert r.returncode == 2 and '--steps' in r.stderr and '--n_layer' in r.stderr


@pytest.mark.parametrize('arg, words', [('--steps=0', '--steps must be at least 1, got 0'),
                                        ('--warmup=-1', '--warmup must be at least 0, got -1'),
                                        ('--profile=-2', '--profile must be at least 0, got -2'),
                                        ('--peak_tflops=0', '--peak_tflops must be above 0, got 0.0')])
def test_bench_names_the_value_out_of_range(arg, words):
    r = run_here(os.path.join('scripts', 'bench.py'), '--device=cpu', arg)
    assert r.returncode == 1 and r.stderr == f'error: {words}\n', r.stderr


def test_gpu_check_runs_every_measurement_with_options_the_scripts_take(tmp_path):
    """scripts/gpu_check.sh, with a stand-in for python that records each command and fails the
    bench without torch.compile (the only one with --use_compile=False but bf16 on): every command
    runs, in order, with the options given last; each set of options is one gpt.py or bench.py
    accepts; the whole runs' lines are timed; the failure is named and the exit is 1."""
    log = tmp_path / 'calls.txt'
    stand_in = tmp_path / 'python'
    stand_in.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                        "cache = os.environ.get('TORCHINDUCTOR_CACHE_DIR')\n"
                        "if cache: os.makedirs(cache)\n" # as torch.compile would; fails if it was there
                        f"with open({str(log)!r}, 'a') as f:\n"
                        "    print(json.dumps([cache, sys.argv[1:]]), file=f)\n"
                        "if sys.argv[1] == 'gpt.py':\n" # a line to stdout, and one without its newline to stderr
                        "    print('device: cuda', flush=True); print('the sample', end='', file=sys.stderr)\n"
                        "sys.exit(1 if sys.argv[1] == 'scripts/bench.py' and '--use_compile=False' in sys.argv\n"
                        "         and '--use_bf16=False' not in sys.argv else 0)\n")
    stand_in.chmod(0o755)
    # torch.compile, once used in this process, sets TORCHINDUCTOR_CACHE_DIR in its environment
    env = {k: v for k, v in os.environ.items() if k not in ('TORCHINDUCTOR_CACHE_DIR', 'TRITON_CACHE_DIR')}
    r = subprocess.run(['bash', os.path.join(ROOT, 'scripts', 'gpu_check.sh'), '--device=cpu', '--n_layer=1'],
                       env={**env, 'PYTHON': str(stand_in), 'STEPS': '12'}, capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.endswith('failed: bench without torch.compile\n'), r.stderr
    # each line of a whole run's output, led by the seconds since it started: where the time goes
    runs = [part.split('\n=== ')[0] for part in r.stdout.split('=== python gpt.py')[1:]]
    assert len(runs) == 2 and '--use_compile=False' in runs[1].splitlines()[0]
    for run in runs:
        assert re.findall(r'^ +\d+\.\d\d s \| (.*)$', run, re.M) == ['device: cuda', 'the sample'], run
    records = [json.loads(line) for line in log.read_text().splitlines()]
    calls = [args for _, args in records]
    assert [args[0] for args in calls] == ['-c', 'gpt.py', *['scripts/bench.py'] * 4, '-m', 'gpt.py']
    compile_cache = records[1][0]
    assert compile_cache and not os.path.exists(os.path.dirname(compile_cache)) # removed at the end
    for script, *args in calls[1:6] + calls[7:]:
        assert args[-2:] == ['--device=cpu', '--n_layer=1'] # the options given, last: they win
        r = run_here(script, *args, '--help') # --help shows the values, once every option is taken
        assert r.returncode == 0 and "--n_layer=1 " in r.stdout, r.stderr
    off = ('--use_tf32=False --use_bf16=False --use_compile=False --use_fused_adamw=False '
           '--use_pinned=False --use_cuda_graph=False --fast_attention=False').split()
    assert not set(off) & set(calls[2]) and '--steps=12' in calls[2] # every switch on
    # the checkpoint writes timed in the default row alone, the profile in the row without graphs
    assert [i for i, args in enumerate(calls) if any(a.startswith('--saves=') for a in args)] == [2]
    assert [i for i, args in enumerate(calls) if any(a.startswith('--profile=') for a in args)] == [3]
    assert '--saves=3' in calls[2] and '--profile=10' in calls[3]
    assert set(off) & set(calls[3]) == {'--use_cuda_graph=False'}
    assert set(off) & set(calls[4]) == {'--use_compile=False'}
    assert set(off) <= set(calls[5]) and '--steps=2' in calls[5] # every switch off, a sixth of the steps
    assert calls[6] == ['-m', 'pytest', '-p', 'no:cacheprovider', 'tests/test_gpu.py']
    assert set(off) & set(calls[7]) == {'--use_compile=False'} # the whole run again, not compiled
    assert records[7][0] is None and calls[7][1] != calls[1][1] # default caches, its own out_dir


def test_a_checkpoint_of_a_cuda_graph_run_resumes_with_this_runs_adamw(tiny):
    """A CUDA-graph run saves the rate as a tensor and capturable=True; a CPU resume keeps its own."""
    model = gpt.GPTLanguageModel(65)
    optimizer = gpt.make_optimizer(model)
    model(*gpt.get_batch(torch.randint(65, (500,))))[1].backward()
    optimizer.step()
    state = optimizer.state_dict()
    for group in state['param_groups']: # what use_cuda_graph on a GPU writes
        group.update(lr=torch.tensor(3e-4), capturable=True, fused=True, foreach=None)
    fresh = gpt.make_optimizer(model)
    gpt.load_optimizer_state(fresh, state)
    group = fresh.param_groups[0]
    assert group['lr'] == gpt.learning_rate and not torch.is_tensor(group['lr'])
    assert group['foreach'] and not group['capturable'] and not group['fused']
    assert fresh.state[next(model.parameters())]['exp_avg'].abs().sum() > 0 # the moments came along
    gpt.set_lr(fresh, 1e-3)
    fresh.step() # the lecture's AdamW carries on


@needs_input
def test_after_evaluating_the_garbage_collector_skips_the_objects_alive():
    gc.unfreeze()
    try:
        r = run_here('gpt.py', '--device=cpu', '--n_layer=1', '--n_embd=16', '--n_head=2',
                     '--block_size=8', '--max_iters=2', '--eval_iters=1', '--max_new_tokens=1',
                     '--out_dir=')
        assert gc.get_freeze_count() > 100_000 # PyTorch's own objects, among them
    finally:
        gc.unfreeze()
    assert r.returncode == 0, r.stderr
    assert 'step 2: train loss' in r.stdout


def test_where_triton_is_loaded_the_frozen_objects_are_collected_at_exit(monkeypatch):
    """Triton's bindings print each of their objects still alive at exit as a leak (Triton 3.9,
    with PyTorch 2.15): gpt.py unfreezes what gc.freeze() kept, at exit and only there."""
    gc.freeze()
    try:
        monkeypatch.delitem(sys.modules, 'triton', raising=False)
        gpt.unfreeze_for_triton()
        assert gc.get_freeze_count() > 0 # no Triton: frozen to the end, for a faster exit
        monkeypatch.setitem(sys.modules, 'triton', types.ModuleType('triton'))
        gpt.unfreeze_for_triton()
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
    # at a real exit: a hook registered before gpt's runs after it (last in, first out)
    code = ("import atexit, gc, sys, types; atexit.register(lambda: print(gc.get_freeze_count())); "
            f"sys.path.insert(0, {ROOT!r}); import gpt; sys.modules['triton'] = types.ModuleType('triton'); "
            "gc.freeze()")
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == '0\n' and r.stderr == '', r.stderr
