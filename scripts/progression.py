"""
The lecture's story as one table: train every stage of the model, from the bigram to the
scaled Transformer, and print its losses next to the ones the video reports.

    python scripts/progression.py                    # stages 1-6 on a CPU: 90 s on a 2-core EPYC
    python scripts/progression.py --stages 2,5       # some stages
    python scripts/progression.py --stages 7         # the scaled model: meant for a GPU
    python scripts/progression.py --json results.json
    python scripts/progression.py --png stages.png   # and each stage's val loss as it trains (matplotlib)

Each stage is built from the classes of bigram.py and gpt.py; only what the lecture had
different at that point (no proj yet, a one-layer feed-forward, no LayerNorm) lives here.
Every stage starts from torch.manual_seed(1337) and builds its modules and draws its batches
in the lecture's order, as the lecture's script at that commit does.
"""
import argparse
import contextlib
import functools
import json
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import time
import traceback

import torch
import torch.nn as nn
from torch.nn import functional as F

import common  # noqa: E402 (beside this file)
from common import fail, gpt  # noqa: E402
import bigram  # noqa: E402 (common puts the project's folder first on the path)

# the lecture's configs: the bigram's, the small one of stages 2-6, and the scaled one
BIGRAM = dict(batch_size=32, block_size=8, learning_rate=1e-2, max_iters=3000, eval_interval=300,
              eval_iters=200)
SMALL = dict(batch_size=32, block_size=8, n_embd=32, n_head=4, n_layer=3, dropout=0.0,
             learning_rate=1e-3, max_iters=5000, eval_interval=500, eval_iters=200)
SCALED = dict(batch_size=64, block_size=256, n_embd=384, n_head=6, n_layer=6, dropout=0.2,
              learning_rate=3e-4, max_iters=5000, eval_interval=500, eval_iters=200)


class LectureStage(nn.Module):
    """Stages 2-6: token + position embeddings, then `body`, then lm_head, with PyTorch's
    default init as in the video (the normal(0, 0.02) init came later)."""

    def __init__(self, vocab_size, make_body):
        super().__init__()
        # built in the lecture's order, so the seed gives the lecture's initial weights
        self.token_embedding_table = nn.Embedding(vocab_size, gpt.n_embd)
        self.position_embedding_table = nn.Embedding(gpt.block_size, gpt.n_embd)
        self.body = make_body()
        self.lm_head = nn.Linear(gpt.n_embd, vocab_size)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        tok_emb = self.token_embedding_table(idx) # (B,T,C)
        pos_emb = self.position_embedding_table(torch.arange(T, device=idx.device)) # (T,C)
        logits = self.lm_head(self.body(tok_emb + pos_emb)) # (B,T,vocab_size)
        if targets is None:
            return logits, None
        B, T, C = logits.shape
        return logits, F.cross_entropy(logits.view(B*T, C), targets.view(B*T))


class ConcatHeads(nn.Module):
    """Stage 3's multi-head attention: the heads side by side, no projection yet."""

    def __init__(self, num_heads, head_size):
        super().__init__()
        self.heads = nn.ModuleList([gpt.Head(head_size) for _ in range(num_heads)])

    def forward(self, x):
        return torch.cat([h(x) for h in self.heads], dim=-1) # (B,T,C)


def without_layernorm(block):
    """Stage 5's block: residual connections, but no LayerNorm yet."""
    block.ln1 = block.ln2 = nn.Identity()
    return block


def stage_body(stage):
    C = gpt.n_embd
    if stage == 2:
        return gpt.Head(C) # one head, head_size = n_embd
    if stage == 3:
        return ConcatHeads(4, C // 4)
    if stage == 4:
        return nn.Sequential(ConcatHeads(4, C // 4), nn.Sequential(nn.Linear(C, C), nn.ReLU()))
    if stage == 5:
        return nn.Sequential(*[without_layernorm(gpt.Block(C, n_head=4)) for _ in range(3)])
    if stage == 6:
        return nn.Sequential(*[gpt.Block(C, n_head=4) for _ in range(3)], nn.LayerNorm(C))


# stage: (what was added, its config, the val loss the video reports)
STAGES = {
    1: ('bigram: a lookup table of next-character logits', BIGRAM, 2.5),
    2: ('token + position embeddings, one self-attention head', SMALL, 2.4),
    3: ('multi-head attention: 4 heads of 8', SMALL, 2.28),
    4: ('+ feed-forward (Linear + ReLU) after attention', SMALL, 2.24),
    5: ('3 blocks with residual connections, proj and a 4x MLP', SMALL, 2.08),
    6: ('+ pre-norm LayerNorm (ln1, ln2, and a final one)', SMALL, 2.06),
    7: ('scaled up: 6 layers, 6 heads, 384 wide, block 256, dropout 0.2', SCALED, 1.48),
}


def build_model(stage, vocab_size):
    if stage == 1:
        return bigram.BigramLanguageModel(vocab_size)
    if stage == 7:
        return gpt.GPTLanguageModel(vocab_size)
    return LectureStage(vocab_size, lambda: stage_body(stage))


@functools.lru_cache
def load_data(device):
    """The vocabulary and the encoded splits: read once per process, shared by its stages."""
    text = gpt.read_text()
    chars = sorted(set(text))
    encode, _ = common.codec(chars)
    return (chars, *common.split(torch.tensor(encode(text), dtype=torch.long).to(device)))


def train_stage(stage, device, overrides, threads):
    """Train one stage exactly as the lecture's loop does; return its row of the table."""
    if threads:
        torch.set_num_threads(threads)
    config = {**STAGES[stage][1], **overrides}
    for key, value in config.items():
        setattr(gpt, key, value)
    gpt.device, gpt.use_bf16 = device, False # float32 everywhere, as the lecture's runs
    chars, train_data, val_data = load_data(device)
    splits = {'train': train_data, 'val': val_data}

    t0 = t_last = time.time()
    step_last = 0
    torch.manual_seed(1337)
    model = build_model(stage, len(chars)).to(device)
    # foreach gives the same numbers as the default loop over tensors, faster on a CPU
    optimizer = torch.optim.AdamW(model.parameters(), lr=config['learning_rate'], foreach=True)
    curve = [] # (step, val loss) at each evaluation
    for step in range(config['max_iters'] + 1):
        if step % config['eval_interval'] == 0 or step == config['max_iters']:
            losses = gpt.estimate_loss(model, splits)
            curve.append((step, round(losses['val'], 4)))
            now = time.time() # and the speed since the last evaluation: stage 7 on a GPU runs for minutes
            speed = f", {(now - t_last) / (step - step_last) * 1000:.1f} ms/step" if step else ''
            print(f"stage {stage} step {step}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}"
                  f" | {now - t0:.1f}s{speed}", flush=True)
            t_last, step_last = now, step
        if step == config['max_iters']:
            break
        xb, yb = gpt.get_batch(train_data) # float32 throughout, as the lecture's runs
        logits, loss = model(xb, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return {'stage': stage, 'added': STAGES[stage][0],
            'params': sum(p.numel() for p in model.parameters()),
            'train': round(losses['train'], 4), 'val': round(losses['val'], 4),
            'lecture_val': STAGES[stage][2], 'seconds': round(time.time() - t0, 1), 'curve': curve}


def picture(rows, path):
    """Each stage's val loss at each evaluation, one line a stage, and the video's value for it marked
    at its last step."""
    plt = common.pyplot()
    figure, ax = plt.subplots(figsize=(8, 5), dpi=100)
    for r in rows:
        steps, vals = zip(*r['curve'])
        line, = ax.plot(steps, vals, label=f"{r['stage']}: {r['added']}")
        ax.plot(steps[-1], r['lecture_val'], marker='_', markersize=22, markeredgewidth=2, color=line.get_color())
    values = [v for r in rows for _, v in r['curve']] + [r['lecture_val'] for r in rows]
    top = max(r['curve'][min(1, len(r['curve']) - 1)][1] for r in rows) # the first drop, and the init's off the top
    ax.set(xlabel='step', ylabel='val loss', ylim=(min(values) - 0.05, top + 0.05),
           title="The lecture's stages (a dash: the video's val loss)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    common.save_png(figure, path)
    plt.close(figure)


def parse_stages(text):
    stages = set()
    try:
        for part in text.split(','):
            first, _, last = part.partition('-')
            stages.update(range(int(first), int(last or first) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected stages like 1-6 or 2,5, got {text!r}") from None
    if not stages or not stages <= STAGES.keys():
        raise argparse.ArgumentTypeError(f"stages are 1 to 7, got {text!r}")
    return sorted(stages)


def markdown(rows):
    lines = ['| stage | what was added | parameters | train loss | val loss | lecture val loss | seconds |',
             '| --- | --- | ---: | ---: | ---: | ---: | ---: |']
    for r in rows:
        lines.append(f"| {r['stage']} | {r['added']} | {r['params']:,} | {r['train']:.4f} | "
                     f"{r['val']:.4f} | {r['lecture_val']} | {r['seconds']} |")
    return '\n'.join(lines)


def main(argv):
    p = common.argument_parser(__doc__)
    p.add_argument('--stages', type=parse_stages, default=parse_stages('1-6'),
                   help="e.g. 1-6, 7 or 2,5 (default: 1-6, the lecture's small config; 7 is the full gpt.py)")
    p.add_argument('--device', default=gpt.device, help='default: %(default)s')
    p.add_argument('--json', type=os.path.expanduser, default=None,
                   help='also write the results to this JSON file')
    p.add_argument('--png', type=os.path.expanduser, default=None,
                   help="also draw each stage's val loss against the step into this picture")
    p.add_argument('--jobs', type=int, default=None,
                   help='stages trained side by side, one thread each (default: the CPU count on a CPU, '
                        'else 1)')
    p.add_argument('--max_iters', type=int, default=None, help='override every stage (for a quick look)')
    p.add_argument('--eval_iters', type=int, default=None, help='override every stage')
    args = p.parse_args(argv)
    overrides = {k: v for k, v in (('max_iters', args.max_iters), ('eval_iters', args.eval_iters)) if v}
    if args.max_iters:
        overrides['eval_interval'] = args.max_iters
    for key in ('max_iters', 'eval_iters', 'jobs'):
        if getattr(args, key) is not None and getattr(args, key) < 1:
            p.error(f"--{key} must be at least 1, got {getattr(args, key)}")
    for name in ('json', 'png'):
        common.check_output(p, name, getattr(args, name)) # now, not after hours
    if args.png:
        common.pyplot() # matplotlib is there: now, not after the training
    common.check_device(args.device)
    on_cpu = torch.device(args.device).type == 'cpu'
    gpt.read_text() # download before any worker starts, if needed
    jobs = max(1, min(args.jobs or (os.cpu_count() if on_cpu else 1), len(args.stages)))
    if 7 in args.stages and on_cpu:
        print("note: stage 7 is the full lecture model: hours on a CPU")
    print(f"training stages {', '.join(map(str, args.stages))} on {args.device}, {jobs} at a time",
          flush=True)

    t0 = time.time()
    work = [(stage, args.device, overrides, 1 if jobs > 1 else 0) for stage in args.stages]
    if jobs == 1:
        rows = []
        for w in work:
            rows.append(train_stage(*w))
            print(f"stage {w[0]} done: val loss {rows[-1]['val']:.4f}", flush=True)
    else:
        done = {}
        # the biggest stages first, so the two cores finish together; closing() ends the workers
        # at once if this loop stops (its print fails when the reader has gone)
        with contextlib.closing(train_side_by_side(sorted(work, key=lambda w: -w[0]), jobs)) as finished:
            for row in finished:
                done[row['stage']] = row
                print(f"stage {row['stage']} done: val loss {row['val']:.4f} ({row['seconds']} s)", flush=True)
        rows = [done[s] for s in args.stages]
    print()
    print(markdown(rows))
    print(f"\n{time.time() - t0:.0f} s in all, PyTorch {torch.__version__}, {args.device}")
    if args.json:
        common.save_atomically(args.json, json.dumps(rows, indent=1).encode())
        print(f"wrote {args.json}")
    if args.png:
        picture(rows, args.png)
        print(f"wrote {args.png}")


def train_side_by_side(work, jobs):
    """Train the stages in processes of their own, `jobs` at a time; yield each row as it comes.
    Each worker sends its row (or its exception) down a pipe of its own, so killing one midway,
    as Ctrl-C or an error here does, can leave nothing locked that another process waits on (a
    multiprocessing.Pool can: its workers share one result queue and its lock)."""
    ctx = multiprocessing.get_context('spawn')
    todo, running = list(work), {} # running: the receiving end of each worker's pipe -> its process
    try:
        while todo or running:
            while todo and len(running) < jobs:
                receive, send = ctx.Pipe(duplex=False)
                # the workers start with Ctrl-C ignored (they inherit that from here): it stops this
                # process alone, which ends them, without a traceback from each of them
                handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
                w = todo.pop(0)
                worker = ctx.Process(target=train_stage_and_send, args=(w, send), daemon=True)
                worker.start()
                signal.signal(signal.SIGINT, handler)
                send.close() # the worker holds the other copy: once it is gone, recv() ends
                running[receive] = worker, w[0]
            for receive in multiprocessing.connection.wait(list(running)):
                worker, stage = running.pop(receive)
                try:
                    row, where = receive.recv()
                except EOFError: # it died without a word (killed: out of memory?)
                    worker.join()
                    fail(f"the process training stage {stage} stopped with exit code {worker.exitcode}")
                worker.join()
                if where: # its own error, raised here: one line if out of memory, else after its traceback
                    raise row from RuntimeError(f"in the process training stage {stage}:\n{where}")
                if isinstance(row, BaseException): # the reader of our output is gone
                    raise row
                yield row
    finally:
        for worker, _ in running.values():
            worker.kill()
        for worker, _ in running.values():
            worker.join()


def train_stage_and_send(w, send):
    """A worker: train one stage; send its row, or what went wrong and where."""
    where = None
    try:
        row = train_stage(*w)
    except BrokenPipeError as e: # nobody reads our output (| head): the main process stops; this worker's
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno()) # last flush must not fail either
        row = e
    except Exception as e:
        row, where = e, traceback.format_exc()
    send.send((row, where))


if __name__ == '__main__':
    common.run(main, sys.argv[1:])
