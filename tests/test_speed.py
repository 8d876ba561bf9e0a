"""The speed switches and the bench script on a CPU (no test asserts a time)."""
import json
import os
import re
import subprocess
import sys

import torch

import bench
import gpt
from conftest import ROOT, TINY_GPT, losses, needs_input, run_here, sample

SWITCHES = ('use_tf32', 'use_bf16', 'use_compile', 'use_fused_adamw')


def test_speed_switches_are_off_on_a_cpu_unless_forced():
    """None, the default, means: where the device has it, so a CPU run keeps the lecture's float32,
    per-head math; True forces a switch anywhere, False turns it off."""
    assert all(getattr(gpt, key) is None for key in (*SWITCHES, 'fast_attention'))
    gpt.configure(['--device=cpu'])
    assert not any(getattr(gpt, key) for key in (*SWITCHES, 'fast_attention'))
    assert not torch.backends.cuda.matmul.allow_tf32
    gpt.configure(['--device=cpu', *(f'--{key}=True' for key in (*SWITCHES, 'fast_attention'))])
    assert all(getattr(gpt, key) is True for key in (*SWITCHES, 'fast_attention'))
    gpt.configure(['--device=cpu', *(f'--{key}=None' for key in (*SWITCHES, 'fast_attention'))])
    assert not any(getattr(gpt, key) for key in (*SWITCHES, 'fast_attention'))


@needs_input
def test_cudas_switch_set_forced_on_a_cpu_trains_saves_resumes_exactly_and_samples(tmp_path, monkeypatch):
    """Every switch that CUDA gets, forced on: each Block compiled, fused AdamW, bfloat16 autocast, the
    batched heads. A change that breaks that path fails here, without a GPU. torch.compile runs with its
    aot_eager backend: the same tracing as the default inductor's, without inductor's C++ build (45 s
    here, cold)."""
    compile_, compiled = torch.nn.Module.compile, []
    monkeypatch.setattr(torch.nn.Module, 'compile', lambda self, **kw: compiled.append(type(self).__name__) or
                        compile_(self, backend='aot_eager', **kw))
    forced = [*TINY_GPT, '--n_layer=2', *(f'--{key}=True' for key in (*SWITCHES, 'fast_attention'))]
    whole = run_here('gpt.py', *forced, f'--out_dir={tmp_path / "whole"}')
    assert whole.returncode == 0, whole.stderr
    assert compiled == ['Block', 'Block'] # each of the n_layer Blocks
    assert ' '.join(f'{key}=True' for key in SWITCHES[:2]) in whole.stdout # the config in effect, printed
    assert 'use_compile=True use_fused_adamw=True fast_attention=True' in whole.stdout
    assert {'ckpt.pt', 'best.pt', 'log.csv'} <= set(os.listdir(tmp_path / 'whole'))
    part = run_here('gpt.py', *forced, f'--out_dir={tmp_path / "part"}', '--max_iters=20')
    resumed = run_here('gpt.py', *forced, f'--out_dir={tmp_path / "part"}', '--resume=True')
    assert resumed.returncode == 0 and part.returncode == 0, resumed.stderr
    assert losses(resumed.stdout)[30] == losses(whole.stdout)[30]
    assert sample(resumed.stdout, 30) == sample(whole.stdout, 30) and len(sample(whole.stdout, 30)) > 400


def test_compiling_the_blocks_keeps_the_state_dict(tiny):
    model = gpt.GPTLanguageModel(65)
    keys = list(model.state_dict())
    for block in model.blocks: # as gpt.py does; it compiles lazily, at the first call
        block.compile()
    assert list(model.state_dict()) == keys
    assert all(block._compiled_call_impl is not None for block in model.blocks)


def test_bench_runs_on_cpu():
    r = run_here(os.path.join('scripts', 'bench.py'), '--n_layer=1', '--n_embd=32', '--n_head=2',
                 '--block_size=16', '--batch_size=4', '--steps=3', '--warmup=1', '--peak_tflops=1',
                 '--device=cpu', '--evals=1', '--eval_iters=2', '--saves=1', '--profile=2')
    assert r.returncode == 0, r.stderr
    assert 'use_compile=False' in r.stdout and 'fast_attention=False' in r.stdout # gpt.py's config line
    assert re.search(r'[\d.]+ ms/step, [\d,]+ tok/s, [\d.]+ TFLOP/step, MFU [\d.]+% of 1 TFLOP/s', r.stdout)
    assert re.search(r'estimate_loss 1: [\d.]+ s for 2 x 2 batches', r.stdout)
    assert re.search(r'checkpoint 1: [\d.]+ s for [\d.]+ MB', r.stdout)
    profile = r.stdout.split('profile of 2 steps, by self_cpu_time_total:\n')[1]
    assert 'aten::mm' in profile and 'Optimizer.step' in profile # the matmuls and AdamW's update


def test_a_step_of_the_lectures_config_is_1_164_tflop():
    """The README's figure for MFU: 6 FLOPs per weight per token (2 forward, 4 backward), the two
    embedding tables left out (a lookup does no multiplying), plus attention's two T x T products
    (scores, weighted sum) of 2 * T * C each per token, 3 times for forward and backward, in every
    layer; over a batch of 64 x 256 tokens."""
    weights = 10_788_929 - 65 * 384 - 256 * 384
    per_token = 6 * weights + 6 * 2 * 256 * 384 * 6 # n_layer = 6
    flops = bench.flops_per_step(gpt.GPTLanguageModel(65))
    assert flops == per_token * 64 * 256 and round(flops / 1e12, 3) == 1.164


def test_bench_rejects_bad_options_in_one_line():
    r = run_here(os.path.join('scripts', 'bench.py'), '--stepz=3')
    assert r.returncode == 2 and r.stderr.startswith("error: unknown option '--stepz=3'"), r.stderr
    r = run_here(os.path.join('scripts', 'bench.py'), '--steps=0')
    assert r.returncode == 2 and r.stderr.startswith('error: --steps must be at least 1'), r.stderr


def test_gpu_check_runs_every_measurement_with_options_the_scripts_take(tmp_path):
    """scripts/gpu_check.sh, with a stand-in for python that records each command and fails the
    bench without torch.compile: every command runs, in order, with the options given last; each set
    of options is one gpt.py or bench.py accepts; the whole run's lines are timed; the failure is
    named and the exit is 1."""
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
    assert r.returncode == 1, r.stderr
    assert r.stderr.endswith('failed: bench, every switch on but torch.compile\n'), r.stderr
    run = r.stdout.split('=== python gpt.py')[1].split('\n=== ')[0]
    assert re.findall(r'^ +\d+\.\d\d s \| (.*)$', run, re.M) == ['device: cuda', 'the sample'], run
    records = [json.loads(line) for line in log.read_text().splitlines()]
    calls = [args for _, args in records]
    assert [args[0] for args in calls] == ['-c', 'gpt.py', *['scripts/bench.py'] * 9, '-m']
    compile_cache = records[1][0]
    assert compile_cache and not os.path.exists(os.path.dirname(compile_cache)) # removed at the end
    for script, *args in calls[1:-1]:
        assert args[-2:] == ['--device=cpu', '--n_layer=1'] # the options given, last: they win
        own = ['--steps', '--warmup', '--evals', '--saves', '--profile', '--compile_whole', '--compile_mode',
               '--compile_step']
        gpt.configure([a for a in args if a.split('=')[0] not in own]) # gpt.py takes all the others
        assert gpt.n_layer == 1 and gpt.device == 'cpu'
    bench_rows = [set(args) for args in calls[2:-1]]
    off = {'--use_tf32=False', '--use_bf16=False', '--use_compile=False', '--use_fused_adamw=False',
           '--fast_attention=False'}
    assert not off & bench_rows[0] and {'--steps=12', '--saves=3', '--profile=10'} <= bench_rows[0]
    assert bench_rows[1] - bench_rows[0] == {'--use_fp16=True'} # float16 forced
    assert off & bench_rows[2] == {'--use_bf16=False'} # float32, for float16 to compare with
    assert [row & {'--compile_whole', '--compile_mode=reduce-overhead', '--compile_step'} for row in bench_rows[3:7]] \
        == [{'--compile_whole'}, {'--compile_mode=reduce-overhead'}, {'--compile_whole', '--compile_mode=reduce-overhead'},
            {'--compile_step'}] # the candidates
    assert off & bench_rows[7] == {'--use_compile=False'}
    assert off <= bench_rows[8] and calls[10].index('--steps=2') > calls[10].index('--steps=12') # a sixth
    assert calls[-1] == ['-m', 'pytest', '-p', 'no:cacheprovider', 'tests/test_gpu.py']
    assert '--saves=3' not in ' '.join(calls[3]) and sum('--profile=10' in args for args in calls) == 1
