#!/usr/bin/env bash
# Every GPU measurement of the README's "On a GPU" section, in one run, for a machine rented by
# the minute: the whole `python gpt.py` first (timed from the shell, nothing compiled yet, each
# line of its output led by the seconds since it started), then scripts/bench.py with every
# switch on (with its checkpoint writes and a profile: where a step's GPU time goes, kernel by
# kernel), in float16 and in float32, then the candidates for a faster default side by side (the
# whole model compiled, the compiler's CUDA graphs, a compiled optimizer step), without
# torch.compile and with every switch off, then the GPU tests.
#
#   bash scripts/gpu_check.sh 2>&1 | tee gpu.log
#
# Options after it go to every gpt.py and bench.py run (a later option overrides an earlier
# one); STEPS, WARMUP, EVALS, SAVES and PROFILE set the bench's counts. A smoke test on any
# machine:
#
#   STEPS=2 WARMUP=1 EVALS=1 SAVES=1 PROFILE=1 bash scripts/gpu_check.sh --device=cpu --n_layer=1 \
#       --n_head=2 --n_embd=32 --block_size=16 --batch_size=4 --max_iters=2 --eval_iters=1
set -euo pipefail
cd "$(dirname "$0")/.."
# python, else python3 (a plain Ubuntu has only the second); PYTHON=... picks another
python=${PYTHON:-$(command -v python || command -v python3 || echo python)}
steps=${STEPS:-200}
warmup=${WARMUP:-10}
evals=${EVALS:-3}
saves=${SAVES:-3}
profile=${PROFILE:-10}
TIMEFORMAT='wall time: %R s'

# a folder of our own for the checkpoints and the compile caches, removed at the end
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

section() { printf '\n=== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }
# a step that fails is reported and the next one runs: the machine's minutes are not wasted
failed=()
step() { local name=$1; shift; "$@" || failed+=("$name"); }

section "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
    || echo "no nvidia-smi"
"$python" -c 'import sys, torch
gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
print("Python", sys.version.split()[0], "| PyTorch", torch.__version__, "| CUDA", torch.version.cuda,
      "|", gpu)'
git log -1 --format='commit %h %s' 2>/dev/null || true

# Each line of a command's output (stdout and stderr), led by the seconds since the command
# started: where a run's wall time goes, start-up and exit included (the exit: the wall time
# less the last line's seconds). Python's output unbuffered, so that each line comes as printed.
stamped() { # EPOCHREALTIME (bash 5) without its decimal point, a comma in some locales: microseconds
    local start=${EPOCHREALTIME//[!0-9]/} line now
    PYTHONUNBUFFERED=1 "$@" 2>&1 | while IFS= read -r line || [ -n "$line" ]; do
        now=${EPOCHREALTIME//[!0-9]/}
        printf '%4d.%02d s | %s\n' $(((now - start) / 1000000)) $(((now - start) / 10000 % 100)) "$line"
    done # with pipefail, the pipeline fails where the command does
}

# Empty compile caches, as on a fresh machine: the wall time includes compiling.
section "python gpt.py: the whole run"
time step gpt.py stamped env TORCHINDUCTOR_CACHE_DIR="$scratch/inductor" \
    TRITON_CACHE_DIR="$scratch/triton" "$python" gpt.py --out_dir="$scratch/out" "$@"

# bench ROW OPTIONS...: one row of the bench, its failure reported without stopping the rest
bench() { local name=$1; shift; section "bench: $name"; step "bench, $name" "$python" scripts/bench.py \
    --steps="$steps" --warmup="$warmup" --evals="$evals" "$@"; }
bench "every switch on, the default" --saves="$saves" --profile="$profile" "$@"
bench "float16 (use_fp16), as on a GPU without bfloat16" --use_fp16=True "$@"
bench "float32 (TF32 matmuls), for float16 to compare with" --use_bf16=False "$@"
bench "the whole model compiled" --compile_whole "$@"
bench "each Block compiled with CUDA graphs" --compile_mode=reduce-overhead "$@"
bench "the whole model compiled with CUDA graphs" --compile_whole --compile_mode=reduce-overhead "$@"
bench "the optimizer step compiled too" --compile_step "$@"
bench "every switch on but torch.compile" --use_compile=False "$@"
# a sixth of the steps (50 by default): each is about 8 times slower
bench "every switch off, the lecture's per-head float32 path" --steps=$((steps / 6 > 1 ? steps / 6 : 1)) \
    --evals=1 --use_tf32=False --use_bf16=False --use_compile=False --use_fused_adamw=False \
    --fast_attention=False "$@"

section "tests/test_gpu.py"
step tests/test_gpu.py "$python" -m pytest -p no:cacheprovider tests/test_gpu.py

section "done"
if [ ${#failed[@]} -gt 0 ]; then
    printf 'failed: %s\n' "${failed[@]}" >&2
    exit 1
fi
