"""
Time training steps of gpt.py's model: ms per step, tokens per second and model FLOPs utilization
(MFU), after a warm-up, with the device synchronized around the timed steps. Any gpt.py setting
can follow as --key=value.

    python scripts/bench.py                                   # the lecture's config, every switch on
    python scripts/bench.py --use_tf32=False --use_bf16=False --use_compile=False \\
        --use_fused_adamw=False --fast_attention=False        # every switch off: the lecture's float32
    python scripts/bench.py --n_layer=2 --n_embd=64 --block_size=64 --steps=50   # a CPU
    python scripts/bench.py --compile_whole --compile_mode=reduce-overhead        # other ways to compile
"""
import os
import sys
import tempfile
import time

import torch

import common  # noqa: E402 (beside this file)
from common import gpt  # noqa: E402


def flops_per_step(model):
    """Forward + backward FLOPs of one step: 6 per weight per token, plus attention's T*T work
    (the estimate of the PaLM paper, appendix B, as nanoGPT uses it)."""
    embeddings = model.token_embedding_table.weight.numel() + model.position_embedding_table.weight.numel()
    n = sum(p.numel() for p in model.parameters()) - embeddings
    per_token = 6 * n + 12 * gpt.n_layer * gpt.n_embd * gpt.block_size
    return per_token * gpt.batch_size * gpt.block_size


def synchronize():
    if torch.device(gpt.device).type == 'cuda':
        torch.cuda.synchronize()
    elif torch.device(gpt.device).type == 'mps':
        torch.mps.synchronize()


def main(argv):
    p = common.argument_parser(__doc__, allow_abbrev=False)
    p.add_argument('--steps', type=int, default=20, help='timed steps (default: %(default)s)')
    p.add_argument('--warmup', type=int, default=5, help='untimed steps first; they compile (default: %(default)s)')
    p.add_argument('--peak_tflops', type=float, default=989.0,
                   help="the device's peak, for MFU (default: %(default)s, an H100/H200's dense bf16)")
    p.add_argument('--evals', type=int, default=0, help='also time this many estimate_loss calls')
    p.add_argument('--saves', type=int, default=0, help='also time this many checkpoint writes')
    p.add_argument('--profile', type=int, default=0,
                   help='run this many more steps under torch.profiler: where a step goes')
    p.add_argument('--compile_whole', action='store_true', help='torch.compile the whole model, not each Block')
    p.add_argument('--compile_mode', default=None,
                   help="torch.compile's mode: reduce-overhead (CUDA graphs), max-autotune (default: its default)")
    p.add_argument('--compile_step', action='store_true', help='torch.compile the optimizer step too')
    args, settings = p.parse_known_args(argv)
    if min(args.steps - 1, args.warmup, args.evals, args.saves, args.profile) < 0 or not args.peak_tflops > 0:
        p.error("--steps must be at least 1, --warmup, --evals, --saves and --profile at least 0, "
                "--peak_tflops above 0")
    gpt.configure(settings) # the other options: gpt.py's settings

    torch.manual_seed(gpt.seed)
    data = torch.randint(65, (100_000,), device=gpt.device) # timing needs no real text
    model = gpt.GPTLanguageModel(65).to(gpt.device)
    optimizer, scaler = common.optimizer(model)
    if gpt.use_compile: # gpt.py compiles each Block; the others are candidates for it
        for part in [model] if args.compile_whole else model.blocks:
            part.compile(mode=args.compile_mode)
    if args.compile_step:
        optimizer.step = torch.compile(optimizer.step)

    def step(): # gpt.py's training step
        if args.compile_mode == 'reduce-overhead': # a new step: the CUDA graphs' last outputs may be reused
            torch.compiler.cudagraph_mark_step_begin()
        common.train_step(model, optimizer, scaler, *gpt.get_batch(data), gpt.get_lr(0))

    t0 = time.time()
    for _ in range(args.warmup):
        step()
    synchronize()
    t1 = time.time()
    print(f"device {gpt.device}: {args.warmup} warm-up steps in {t1 - t0:.1f} s", flush=True)
    for _ in range(args.steps):
        step()
    synchronize()
    seconds = (time.time() - t1) / args.steps
    flops = flops_per_step(model)
    print(f"{seconds * 1000:.2f} ms/step, {gpt.batch_size * gpt.block_size / seconds:,.0f} tok/s, "
          f"{flops / 1e12:.3f} TFLOP/step, MFU {flops / seconds / (args.peak_tflops * 1e12):.1%} "
          f"of {args.peak_tflops:g} TFLOP/s")
    for i in range(args.evals): # 2 splits x eval_iters batches, as gpt.py evaluates
        t2 = time.time()
        gpt.estimate_loss(model, {'train': data, 'val': data})
        print(f"estimate_loss {i + 1}: {time.time() - t2:.2f} s for 2 x {gpt.eval_iters} batches")
    with tempfile.TemporaryDirectory() as folder:
        for i in range(args.saves): # what gpt.py writes to ckpt.pt at each evaluation
            path, t3 = os.path.join(folder, 'ckpt.pt'), time.time()
            torch.save({'model': model.state_dict(), 'optimizer': optimizer.state_dict()}, path)
            print(f"checkpoint {i + 1}: {time.time() - t3:.3f} s for {os.path.getsize(path) / 1e6:.1f} MB")
    if args.profile:
        on_gpu = torch.device(gpt.device).type == 'cuda'
        activities = [torch.profiler.ProfilerActivity.CPU] + [torch.profiler.ProfilerActivity.CUDA] * on_gpu
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(args.profile):
                step()
            synchronize()
        sort_by = 'self_device_time_total' if on_gpu else 'self_cpu_time_total'
        print(f"profile of {args.profile} steps, by {sort_by}:")
        print(prof.key_averages().table(sort_by=sort_by, row_limit=15))


if __name__ == '__main__':
    common.run(main, sys.argv[1:], shrink='--batch_size or --block_size, or a smaller model')
