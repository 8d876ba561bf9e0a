"""
Time training steps of gpt.py's model: ms per step, tokens per second and model FLOPs
utilization (MFU), after a warm-up, with the device synchronized around the timed steps.

    python scripts/bench.py                                   # the lecture's config, every switch on
    python scripts/bench.py --use_tf32=False --use_bf16=False --use_compile=False \\
        --use_fused_adamw=False --use_pinned=False --use_cuda_graph=False \\
        --fast_attention=False                                # every switch off
    python scripts/bench.py --n_layer=2 --n_embd=64 --block_size=64 --steps=50   # a CPU

Options: --steps=N (timed steps, default 20), --warmup=N (untimed steps first, default 5,
which also covers torch.compile), --peak_tflops=X (the device's peak for MFU; default 989,
an H100/H200's dense bf16), --compile_whole=True (torch.compile the whole model instead of
each Block, for comparison), --evals=N (also time N calls of estimate_loss, the first of which
compiles the eval graph; default 0), --saves=N (also time N checkpoint writes, model and AdamW
state, as gpt.py writes them at each evaluation, to a temporary folder; default 0),
--profile=N (run N more steps under torch.profiler and print the 15 operations or kernels that
took the most time: where a step goes; default 0), and any gpt.py hyperparameter as --key=value.
"""
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gpt  # noqa: E402

steps = 20 # timed steps
warmup = 5 # untimed steps first (they also cover torch.compile)
peak_tflops = 989.0 # an H100/H200's dense bf16 peak
compile_whole = False # compile the whole model as one graph instead of each Block
evals = 0 # how many estimate_loss calls to time after the steps
saves = 0 # how many checkpoint writes to time after that
profile = 0 # how many steps to run under torch.profiler at the end


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
    settings = {k: getattr(gpt, k) for k in gpt.config_keys}
    settings.update(steps=steps, warmup=warmup, peak_tflops=peak_tflops,
                    compile_whole=compile_whole, evals=evals, saves=saves, profile=profile)
    notes = {**gpt.setting_notes(gpt.__file__), **gpt.setting_notes(__file__)}
    gpt.apply_overrides(argv, settings, list(settings), gpt.PRESETS, doc=__doc__, notes=notes)
    for key, value in settings.items():
        setattr(gpt, key, value)
    n_steps, n_warmup, peak = settings['steps'], settings['warmup'], settings['peak_tflops']
    for key, least in [('steps', 1), ('warmup', 0), ('evals', 0), ('saves', 0), ('profile', 0)]:
        if settings[key] < least:
            gpt.fail(f"--{key} must be at least {least}, got {settings[key]}")
    if not peak > 0:
        gpt.fail(f"--peak_tflops must be above 0, got {peak}")
    gpt.configure()
    switches = ['use_tf32', 'use_bf16', 'use_compile', 'compile_mode', 'use_fused_adamw',
                'use_pinned', 'use_cuda_graph', 'fast_attention']
    whole = settings['compile_whole'] and gpt.use_compile
    print(f"device {gpt.device}; " + ', '.join(f"{k}={getattr(gpt, k)}" for k in switches)
          + (', compile_whole=True' if whole else ''))
    parts = f" (grad_accum={gpt.grad_accum})" if gpt.grad_accum > 1 else ''
    print(f"batch_size={gpt.batch_size}{parts} block_size={gpt.block_size} n_layer={gpt.n_layer} "
          f"n_head={gpt.n_head} n_embd={gpt.n_embd}; {n_warmup} warm-up + {n_steps} timed steps")

    torch.manual_seed(gpt.seed)
    data = torch.randint(65, (100_000,), device=gpt.device) # timing needs no real text
    model = gpt.GPTLanguageModel(65).to(gpt.device)
    optimizer = gpt.make_optimizer(model)
    train_model = model
    if whole:
        train_model = torch.compile(model, mode=gpt.compile_mode)
    elif gpt.use_compile:
        gpt.compile_blocks(model)

    step_fn, eval_fn = gpt.step_functions(train_model, optimizer) # as gpt.py runs them

    def step():
        gpt.set_lr(optimizer, gpt.get_lr(0))
        step_fn(*gpt.get_batch(data))

    warmup_steps = max(n_warmup, 4 if gpt.use_cuda_graph else 0) # 4: record the graph too
    t0 = time.time()
    for _ in range(warmup_steps):
        step()
    synchronize()
    t1 = time.time()
    # on a slow CPU, how long the rest takes at the warm-up's pace (which, compiling, says nothing)
    ahead = (t1 - t0) / warmup_steps * n_steps if warmup_steps and not gpt.use_compile else 0
    print(f"warm-up: {t1 - t0:.1f} s" + (f"; the {n_steps} timed steps take about {ahead / 60:.1f} min "
                                          "more" if ahead > 30 else ''), flush=True)
    for _ in range(n_steps):
        step()
    synchronize()
    seconds = (time.time() - t1) / n_steps
    flops = flops_per_step(model)
    print(f"{seconds * 1000:.2f} ms/step, {gpt.batch_size * gpt.block_size / seconds:,.0f} tok/s, "
          f"{flops / 1e12:.3f} TFLOP/step, MFU {flops / seconds / (peak * 1e12):.1%} of {peak:g} TFLOP/s")
    for i in range(settings['evals']): # estimate_loss as gpt.py runs it: 2 splits x eval_iters batches
        t2 = time.time()
        gpt.estimate_loss(train_model, {'train': data, 'val': data}, eval_fn)
        print(f"estimate_loss {i + 1}: {time.time() - t2:.2f} s for 2 x {gpt.eval_iters} batches"
              + (" (compiles the eval graph)" if i == 0 and gpt.use_compile else ""))

    with tempfile.TemporaryDirectory() as folder:
        for i in range(settings['saves']): # what gpt.py writes to ckpt.pt at each evaluation
            path = os.path.join(folder, 'ckpt.pt')
            t3 = time.time()
            chars = [chr(c) for c in range(65)] # a stand-in vocabulary of the real one's size
            gpt.save_checkpoint(path, model, optimizer, n_steps, chars, 1.0, 0.0)
            print(f"checkpoint {i + 1}: {time.time() - t3:.3f} s for {os.path.getsize(path) / 1e6:.1f} MB")

    if settings['profile']:
        on_gpu = torch.device(gpt.device).type == 'cuda'
        activities = [torch.profiler.ProfilerActivity.CPU]
        if on_gpu: # the GPU's own time for each kernel
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(settings['profile']):
                step()
            synchronize()
        sort_by = 'self_device_time_total' if on_gpu else 'self_cpu_time_total'
        print(f"profile of {settings['profile']} steps, by {sort_by}:")
        print(prof.key_averages().table(sort_by=sort_by, row_limit=15))


if __name__ == '__main__':
    gpt.run_main(main, sys.argv[1:], shrink='--batch_size or --block_size, or a smaller model')
