"""
The GPT of "Let's build GPT: from scratch, in code, spelled out" (Andrej Karpathy, 2023):
a character-level, decoder-only Transformer trained on Tiny Shakespeare.

    python gpt.py                                    # the lecture's run (a GPU: minutes; a CPU: hours)
    python gpt.py --preset=cpu                       # no GPU: val loss 1.63 in 2 minutes on 2 cores
    python gpt.py --resume=True                      # continue from out/ckpt.pt
    python scripts/sample.py --prompt="ROMEO:"       # sample from out/best.pt without training

Any hyperparameter below can be set as --key=value. Importing this file does nothing.
"""
import argparse
import ast
import atexit
import errno
import gc
import hashlib
import io
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from contextlib import nullcontext

import torch
import torch.nn as nn
from torch.nn import functional as F

# hyperparameters
batch_size = 64 # how many independent sequences will we process in parallel?
block_size = 256 # what is the maximum context length for predictions?
max_iters = 5000 # how many optimizer steps to take
eval_interval = 500 # evaluate train and val loss every this many steps
learning_rate = 3e-4 # AdamW's step size
device = 'cuda' if torch.cuda.is_available() else 'mps' if torch.backends.mps.is_available() else 'cpu'
         # an NVIDIA GPU (cuda) if there is one, else an Apple GPU (mps), else the CPU
eval_iters = 200 # how many batches each loss estimate averages over
n_embd = 384 # width of the residual stream
n_head = 6 # attention heads per block; each is n_embd // n_head = 64 wide
n_layer = 6 # how many Blocks
dropout = 0.2 # probability of zeroing an activation during training
seed = 1337 # for torch.manual_seed: the initial weights and the batches
input_file = '' # a text file of your own to train on (lecture EX2); '' is Tiny Shakespeare
max_new_tokens = 500 # length of the sample printed at the end
progress_seconds = 30.0 # a progress line at least this often, in training and in evaluations (0: none)
preset = '' # a named group of settings from PRESETS below, applied before the command line: 'cpu'
out_dir = 'out' # where checkpoints and the loss log go ('' turns checkpoints off)
resume = False # continue from out_dir/ckpt.pt
# learning-rate schedule: off by default, so the default run is the lecture's constant lr
lr_decay = False # linear warmup, then cosine decay to min_lr at max_iters
warmup_iters = 100 # with lr_decay: steps of linear warmup
min_lr = 3e-5 # with lr_decay: the rate at max_iters
# for a GPU short of memory: gradient accumulation, off (1) by default
grad_accum = 1 # each batch goes forward and backward in this many parts: the same step in less memory
# speed switches: they only take effect on CUDA; on CPU and MPS the run stays float32 and exact
use_tf32 = True # TF32 tensor cores for float32 matmuls
use_bf16 = True # bfloat16 autocast for the forward pass (AdamW keeps float32 weights)
use_compile = True # torch.compile each Block: fused kernels; all n_layer Blocks share one compile
compile_mode = 'default' # 'max-autotune-no-cudagraphs' tunes longer; others need use_cuda_graph off
use_fused_adamw = True # one fused kernel for the whole AdamW update
use_pinned = True # each batch's offsets go to the GPU from page-locked memory, without a wait
use_cuda_graph = True # record one training step and one eval batch as CUDA graphs, then replay
                      # them: one launch instead of hundreds of small kernels per step
fast_attention = None # EX1: all heads in one batched matmul + F.scaled_dot_product_attention;
                      # None means on for CUDA, off elsewhere (the lecture's per-head math)
# ------------
config_keys = [k for k, v in globals().items()
               if not k.startswith('_') and isinstance(v, (bool, int, float, str, type(None)))]

# --preset=cpu: a 2-minute run on a 2-core CPU, chosen with scripts/cpu_sweep.py (README: No GPU?);
# on the CPU even where a GPU is, so that it prints the README's numbers (--device=mps to try a Mac's)
PRESETS = {
    'cpu': dict(device='cpu', n_layer=3, n_head=4, n_embd=96, block_size=64, batch_size=32, dropout=0.0,
                learning_rate=4e-3, lr_decay=True, warmup_iters=50, min_lr=4e-4, max_iters=2200,
                eval_interval=550, eval_iters=40, fast_attention=True),
}

DATA_URL = 'https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt'
DATA_SHA256 = '86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed'
# its 65 characters, sorted: the lecture's vocabulary, for a state_dict, which holds none
DATA_CHARS = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
INPUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'input.txt')

# ------------
# data: read the text, build the vocabulary, encode it, split it

def read_text(path=INPUT_PATH, url=DATA_URL):
    """The training text. Tiny Shakespeare is downloaded from url and checked on first use;
    with url=None, path is a file of your own (--input_file), used without a check."""
    if not os.path.exists(path):
        if url is None:
            fail(f"{path}: no such file")
        download(url, path)
    hint = '' if url is None else ' Delete it to download Tiny Shakespeare again.'
    try:
        with open(path, 'rb') as f:
            raw = f.read()
        # as the lecture's open(path, 'r') reads it: Windows line endings (\r\n) become \n
        text = raw.decode('utf-8').replace('\r\n', '\n').replace('\r', '\n')
    except (OSError, UnicodeDecodeError) as e:
        fail(f"cannot read {path}: {why_unreadable(e)}.{hint}")
    if url is not None and hashlib.sha256(text.encode()).hexdigest() != DATA_SHA256:
        print(f"note: {path} is not Tiny Shakespeare (sha256 differs); training on it as it is "
              "(delete it to download Tiny Shakespeare again)")
    return text


def make_codec(chars):
    """encode: string -> list of integers; decode: list of integers -> string"""
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}
    encode = lambda s: [stoi[c] for c in s]
    decode = lambda l: ''.join([itos[i] for i in l])
    return encode, decode


def split_data(data):
    """first 90% train, the rest val"""
    n = int(0.9 * len(data))
    return data[:n], data[n:]

# ------------
# data loading and evaluation

def get_batch(data):
    """A batch of inputs x and targets y (y is x shifted by one) from random offsets into data."""
    # randint draws on the CPU generator, so the batches are the lecture's on every device;
    # one gather replaces the lecture's Python loop of slices and picks the same characters
    ix = torch.randint(len(data) - block_size, (batch_size,))
    if use_pinned and data.is_cuda: # a plain copy would make the CPU wait for the GPU every step
        ix = ix.pin_memory().to(data.device, non_blocking=True)
    else:
        ix = ix.to(data.device)
    t = torch.arange(block_size, device=data.device)
    x = data[ix[:, None] + t]     # (B,T)
    y = data[ix[:, None] + t + 1] # (B,T)
    return x.to(device), y.to(device)


@torch.no_grad()
def estimate_loss(model, splits, batch_loss=None):
    """Mean loss over eval_iters batches of each split: far less noisy than one batch's loss.
    batch_loss(X, Y) computes one batch's loss (default: forward_loss; gpt.py may pass a CUDA
    graph of it)."""
    batch_loss = batch_loss or (lambda X, Y: forward_loss(model, X, Y))
    out = {}
    model.eval()
    for split, data in splits.items():
        losses = torch.zeros(eval_iters, device=device)
        for k in range(eval_iters):
            X, Y = get_batch(data)
            losses[k] = batch_loss(X, Y) # stays on the device: one sync per split, not per batch
        out[split] = losses.mean().item()
    model.train()
    return out


def forward_loss(model, X, Y):
    with autocast():
        logits, loss = model(X, Y)
    return loss


def train_step(model, optimizer, xb, yb):
    """One step of the lecture's training loop: forward, backward, AdamW update."""
    if grad_accum == 1:
        loss = forward_loss(model, xb, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
    else: # the batch in equal parts, one at a time, so only one part's activations are held; the
          # gradients of each part's mean loss / grad_accum add up to the whole batch's
        optimizer.zero_grad(set_to_none=True)
        for x, y in zip(xb.chunk(grad_accum), yb.chunk(grad_accum)):
            (forward_loss(model, x, y) / grad_accum).backward()
    optimizer.step()


def autocast():
    """bfloat16 autocast on CUDA when use_bf16 is on; otherwise plain float32."""
    if use_bf16 and torch.device(device).type == 'cuda':
        return torch.autocast('cuda', dtype=torch.bfloat16)
    return nullcontext()

# ------------
# the model

class Head(nn.Module):
    """one head of self-attention"""

    def __init__(self, head_size):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        # a buffer, not a parameter: it moves with .to() and is saved, but never trained
        self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)   # (B,T,hs)
        q = self.query(x) # (B,T,hs)
        # affinities, scaled by 1/sqrt(hs) so softmax stays diffuse at init
        wei = q @ k.transpose(-2, -1) * k.shape[-1]**-0.5 # (B,T,hs) @ (B,hs,T) -> (B,T,T)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf')) # the future can't talk to the past
        wei = F.softmax(wei, dim=-1) # (B,T,T)
        wei = self.dropout(wei)
        v = self.value(x) # (B,T,hs)
        out = wei @ v # (B,T,T) @ (B,T,hs) -> (B,T,hs)
        return out


class MultiHeadAttention(nn.Module):
    """multiple heads of self-attention in parallel"""

    def __init__(self, num_heads, head_size):
        super().__init__()
        self.heads = nn.ModuleList([Head(head_size) for _ in range(num_heads)])
        self.proj = nn.Linear(head_size * num_heads, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        out = torch.cat([h(x) for h in self.heads], dim=-1) # (B,T,nh*hs)
        out = self.dropout(self.proj(out))
        return out


class BatchedMultiHeadAttention(MultiHeadAttention):
    """EX1: the same attention with the heads as a batch dimension; same parameters, same math"""

    def forward(self, x):
        B, T, C = x.shape
        nh = len(self.heads)
        # stacking every head's query, key and value weights gives one (3*nh*hs, C) matrix:
        # one matmul computes them all, like nanoGPT's c_attn
        w = torch.cat([torch.cat([h.query.weight for h in self.heads]),
                       torch.cat([h.key.weight for h in self.heads]),
                       torch.cat([h.value.weight for h in self.heads])])
        q, k, v = (x @ w.T).split(w.shape[0] // 3, dim=-1) # 3 x (B,T,nh*hs)
        q, k, v = (t.view(B, T, nh, -1).transpose(1, 2) for t in (q, k, v)) # (B,nh,T,hs)
        p = self.heads[0].dropout.p if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True) # (B,nh,T,hs)
        out = out.transpose(1, 2).reshape(B, T, -1) # (B,T,nh*hs): the heads side by side, as torch.cat
        out = self.dropout(self.proj(out))
        return out


class FeedForward(nn.Module):
    """a simple linear layer followed by a non-linearity: each token thinks on its own"""

    def __init__(self, n_embd):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd), # 4x wider inside, as in the paper (512 -> 2048)
            nn.ReLU(),
            nn.Linear(4 * n_embd, n_embd),
            nn.Dropout(dropout),
        )

    def forward(self, x):
        return self.net(x)


class Block(nn.Module):
    """Transformer block: communication followed by computation"""

    def __init__(self, n_embd, n_head):
        # n_embd: embedding dimension, n_head: the number of heads we'd like
        super().__init__()
        head_size = n_embd // n_head
        attention = BatchedMultiHeadAttention if fast_attention else MultiHeadAttention
        self.sa = attention(n_head, head_size)
        self.ffwd = FeedForward(n_embd)
        self.ln1 = nn.LayerNorm(n_embd)
        self.ln2 = nn.LayerNorm(n_embd)

    def forward(self, x):
        # residual connections, and pre-norm: LayerNorm before each sublayer, a deviation
        # from the paper that the lecture makes too
        x = x + self.sa(self.ln1(x))
        x = x + self.ffwd(self.ln2(x))
        return x


class GPTLanguageModel(nn.Module):

    def __init__(self, vocab_size):
        super().__init__()
        # each token reads an embedding off a lookup table, and each position another
        self.token_embedding_table = nn.Embedding(vocab_size, n_embd)
        self.position_embedding_table = nn.Embedding(block_size, n_embd)
        self.blocks = nn.Sequential(*[Block(n_embd, n_head=n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd) # final layer norm
        self.lm_head = nn.Linear(n_embd, vocab_size)
        # the published lecture code adds this init (the video did not cover it): it learns
        # faster than PyTorch's default init
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        if T > self.position_embedding_table.num_embeddings:
            raise ValueError(f"cannot forward a sequence of length {T}: "
                             f"block_size is only {self.position_embedding_table.num_embeddings}")
        # idx and targets are both (B,T) tensors of integers
        tok_emb = self.token_embedding_table(idx) # (B,T,C)
        pos_emb = self.position_embedding_table(torch.arange(T, device=idx.device)) # (T,C)
        x = tok_emb + pos_emb # (B,T,C)
        x = self.blocks(x) # (B,T,C)
        x = self.ln_f(x) # (B,T,C)
        logits = self.lm_head(x) # (B,T,vocab_size)

        if targets is None:
            loss = None
        else:
            B, T, C = logits.shape
            logits = logits.view(B*T, C)
            targets = targets.view(B*T)
            loss = F.cross_entropy(logits, targets)

        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        """Extend idx (B,T) by max_new_tokens sampled tokens; eval mode, so dropout is off."""
        was_training = self.training
        self.eval()
        for _ in range(max_new_tokens):
            # crop idx to the last block_size tokens: the position table has no more rows
            idx_cond = idx[:, -self.position_embedding_table.num_embeddings:]
            logits, loss = self(idx_cond)
            logits = logits[:, -1, :] # focus only on the last time step: (B,C)
            if temperature != 1.0: # < 1 sharpens the distribution, > 1 flattens it; the largest logit
                # moved to 0 first (softmax is the same) so that a tiny temperature cannot make an inf
                logits = (logits - logits.max(dim=-1, keepdim=True).values) / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits = logits.masked_fill(logits < v[:, [-1]], float('-inf'))
            probs = F.softmax(logits, dim=-1) # (B,C)
            idx_next = torch.multinomial(probs, num_samples=1) # (B,1)
            idx = torch.cat((idx, idx_next), dim=1) # (B,T+1)
        self.train(was_training)
        return idx

# ------------
# training: learning rate, checkpoints, the loop

def set_lr(optimizer, lr):
    for group in optimizer.param_groups:
        if torch.is_tensor(group['lr']):
            group['lr'].fill_(lr) # in place: a recorded CUDA graph reads the rate from there
        else:
            group['lr'] = lr


def get_lr(step):
    """The lecture's constant rate, or with lr_decay: linear warmup, then cosine down to min_lr."""
    if not lr_decay:
        return learning_rate
    if step < warmup_iters:
        return learning_rate * (step + 1) / warmup_iters
    progress = min(1.0, (step - warmup_iters) / max(1, max_iters - warmup_iters))
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (learning_rate - min_lr)


SHAPE_KEYS = ('n_embd', 'n_head', 'n_layer', 'block_size')


def save_checkpoint(path, model, optimizer, step, chars, best_val_loss, elapsed, eval_seconds=0.0,
                    evaluated=True):
    """Everything an exact resume needs, written atomically: a crash never damages the old file."""
    checkpoint = {
        'model': model.state_dict(),
        'optimizer': optimizer.state_dict(),
        'step': step,
        'config': {k: globals()[k] for k in config_keys},
        'chars': chars,
        'best_val_loss': best_val_loss,
        'elapsed': elapsed,
        'eval_seconds': eval_seconds, # how long an evaluation takes, for the time left after a resume
        'evaluated': evaluated, # False: Ctrl-C stopped the evaluation at this step, so resuming redoes it
        'rng_cpu': torch.get_rng_state(),
        'rng_cuda': torch.cuda.get_rng_state_all() if torch.device(device).type == 'cuda' else [],
    }
    save_atomically(path, lambda f: torch.save(checkpoint, f))


def load_checkpoint(path, map_location='cpu'):
    """torch.load with weights_only=True (no code in the file runs); a one-line error if unusable."""
    if not os.path.exists(path):
        fail(f"no checkpoint at {path} (gpt.py writes one into its --out_dir, out/ by default, as it trains)")
    try:
        checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:
        fail(f"{path} is not a readable checkpoint of gpt.py (damaged, cut short, or another kind of "
             f"file: torch.load raised {type(e).__name__})")
    if isinstance(checkpoint, dict) and all(torch.is_tensor(v) for v in checkpoint.values()):
        checkpoint = checkpoint_of_state_dict(checkpoint, path)
    if not isinstance(checkpoint, dict) or not {'model', 'config', 'chars'} <= checkpoint.keys():
        fail(f"{path} is not a checkpoint of gpt.py: it does not hold the model, its config and its "
             "vocabulary, nor is it a state_dict of GPTLanguageModel")
    lacking = [k for k in SHAPE_KEYS if k not in checkpoint['config']]
    if lacking:
        fail(f"{path} is not a checkpoint of gpt.py: its config has no {', '.join(lacking)}")
    return checkpoint


def checkpoint_of_state_dict(state_dict, path):
    """A bare state_dict of GPTLanguageModel, as torch.save(model.state_dict(), path) at the end of
    the lecture's own gpt.py writes it, made a checkpoint to sample from: its shape read off its
    weights, its vocabulary Tiny Shakespeare's (a state_dict holds none)."""
    weights = {k.removeprefix('_orig_mod.'): v for k, v in state_dict.items()} # of a torch.compile'd model
    for key in ('token_embedding_table.weight', 'position_embedding_table.weight'):
        if key not in weights or weights[key].dim() != 2:
            fail(f"{path} holds a state_dict, but not one of GPTLanguageModel: it has no {key}")
    vocab_size, width = weights['token_embedding_table.weight'].shape
    if vocab_size != len(DATA_CHARS):
        fail(f"{path} holds a state_dict of a model of {vocab_size} characters, not Tiny Shakespeare's "
             f"{len(DATA_CHARS)}: only gpt.py's own checkpoints keep the characters of another text")
    layers = {m.group(1) for m in map(re.compile(r'blocks\.(\d+)\.').match, weights) if m}
    heads = {m.group(1) for m in map(re.compile(r'blocks\.0\.sa\.heads\.(\d+)\.').match, weights) if m}
    config = dict(n_embd=width, n_head=len(heads) or 1, n_layer=len(layers),
                  block_size=weights['position_embedding_table.weight'].shape[0])
    print(f"note: {path} is a bare state_dict: read as GPTLanguageModel with "
          + ' '.join(f'{k}={v}' for k, v in config.items()) + ", and Tiny Shakespeare's characters",
          file=sys.stderr)
    return {'model': weights, 'config': config, 'chars': list(DATA_CHARS)}


def load_weights(model, checkpoint, path):
    """The checkpoint's weights into model, or a one-line error that names the ones that do not
    fit: the model's code changed since the checkpoint was saved."""
    try:
        model.load_state_dict(checkpoint['model'])
    except RuntimeError as e: # 'Error(s) in loading state_dict for ...:', then what does not fit
        what = ' '.join(str(e).split('\n', 1)[-1].split())
        fail(f"{path} does not fit GPTLanguageModel as this code builds it: "
             + (what if len(what) <= 200 else what[:200] + '...'))


def check_compatible(checkpoint, chars, path):
    """Resuming needs the training state, and the same model shape and vocabulary; say exactly
    what is missing or differs."""
    lacking = [k for k in ('optimizer', 'step', 'best_val_loss', 'elapsed', 'rng_cpu') if k not in checkpoint]
    if lacking:
        fail(f"cannot resume from {path}: it has no {', '.join(lacking)}, only a model to sample from "
             f"(scripts/sample.py --ckpt={path}); train anew with another --out_dir")
    saved = checkpoint['config']
    diffs = [f"{k}={saved.get(k)} there, {globals()[k]} here" for k in SHAPE_KEYS
             if saved.get(k) != globals()[k]]
    if checkpoint['chars'] != chars:
        diffs.append(f"a vocabulary of {len(checkpoint['chars'])} characters there, {len(chars)} here")
    if diffs:
        fail(f"cannot resume from {path}: " + '; '.join(diffs))


def log_rows(log_path):
    """The rows of log.csv below its header ([] where there is none), without the one after its
    last newline: '', or a row that a full disk or a crash cut short."""
    if not os.path.exists(log_path):
        return []
    with open(log_path, errors='replace') as f:
        return f.read().split('\n')[1:-1]


def start_log(log_path, start_step):
    """Make out_dir and start its log.csv: a header, and on resume the rows up to start_step (not
    those past the checkpoint, nor one that a full disk or a crash cut short)."""
    keep = []
    try:
        os.makedirs(out_dir, exist_ok=True)
        if resume:
            rows = log_rows(log_path)
            steps = [row.split(',')[0] for row in rows]
            keep = [row for row, step in zip(rows, steps) if step.isdigit() and int(step) <= start_step]
        log = '\n'.join(['step,train_loss,val_loss,elapsed_s'] + keep) + '\n'
        save_atomically(log_path, lambda f: f.write(log.encode())) # Ctrl-C here keeps the old log
    except OSError as e:
        problem = 'it is a file' if os.path.isfile(out_dir) else e.strerror
        fail(f"cannot write into --out_dir={out_dir}: {problem}")


def make_optimizer(model):
    if use_cuda_graph: # a replayed update reads its rate and step counts from GPU tensors
        return torch.optim.AdamW(model.parameters(), lr=torch.tensor(learning_rate, device=device),
                                 fused=use_fused_adamw or None, capturable=True)
    if use_fused_adamw: # one fused kernel for the whole update (CUDA)
        return torch.optim.AdamW(model.parameters(), lr=learning_rate, fused=True)
    # foreach: a few ops over all tensors instead of a loop; on a CPU the same numbers, faster
    return torch.optim.AdamW(model.parameters(), lr=learning_rate, foreach=True)


def load_optimizer_state(optimizer, state):
    """AdamW's moments and step counts from a checkpoint, with this run's own settings (fused,
    capturable, the rate as a float or a tensor), whichever device and switches wrote it."""
    own = [{k: v for k, v in group.items() if k != 'params'} for group in optimizer.param_groups]
    optimizer.load_state_dict(state)
    for group, settings in zip(optimizer.param_groups, own):
        group.update(settings)


def time_left(steps_done, seconds_per_step, eval_seconds, evaluated):
    """A rough estimate of the time until training ends: the steps left at the latest speed,
    and the evaluations left at the latest one's duration (evaluated: the one at steps_done)."""
    evals = sum(1 for s in range(steps_done, max_iters + 1) if s % eval_interval == 0 or s == max_iters)
    seconds = (max_iters - steps_done) * seconds_per_step + (evals - evaluated) * eval_seconds
    return duration(seconds) + ' left'


def duration(seconds):
    """'42s', '13 min' or '14.7 h'"""
    if seconds < 90:
        return f"{seconds:.0f}s"
    return f"{seconds / 60:.0f} min" if seconds < 90 * 60 else f"{seconds / 3600:.1f} h"


class StopRequest:
    """The first Ctrl-C asks the loop to save and stop after the current step; a second one quits.
    SIGTERM (kill, timeout, a cluster's scheduler ending a job) and SIGHUP (the terminal closed, or
    the ssh connection to it dropped) do the same."""

    def __init__(self):
        self.requested = False
        self.exit_code = 130 # as a shell reports a process that Ctrl-C stopped: 128 + the signal
        self.terminal = [] # stdout and stderr where they are the terminal: known while it is open

    def __call__(self, signum, frame):
        self.requested = True
        self.exit_code = 128 + signum
        if signum == getattr(signal, 'SIGHUP', None): # the terminal is gone, and a print to it would
            to_nowhere(self.terminal)                  # fail: from now on they go nowhere instead
        name = 'Ctrl-C' if signum == signal.SIGINT else signal.Signals(signum).name
        # straight to the file descriptor: a print here could land inside a print of the loop's,
        # which Python's buffered stdout refuses ("reentrant call")
        message = f"\n{name}: saving a checkpoint after this step ({name} again quits without saving)\n"
        try:
            os.write(sys.stderr.fileno(), message.encode())
        except (AttributeError, OSError): # a stderr without a file descriptor: a notebook's, a test's
            sys.stderr.write(message)
        # the second one raises KeyboardInterrupt at once: a save under way is discarded, not left
        # half-written
        signal.signal(signum, self.quit)

    @staticmethod
    def quit(signum, frame):
        raise Quit(128 + signum)

    def listen(self):
        """Handle Ctrl-C, SIGTERM and SIGHUP (not on Windows) from now on, except one that is
        ignored (a background job of a shell script ignores Ctrl-C, nohup SIGHUP): it stays
        ignored. stdout and stderr, where they are the terminal, write through a TerminalWriter
        meanwhile. Returns what puts the old handlers and streams back."""
        self.terminal = [fd for fd in (1, 2) if os.isatty(fd)]
        signals = [signal.SIGINT, signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, 'SIGHUP') else [])
        before = {s: signal.getsignal(s) for s in signals}
        for s, handler in before.items():
            if handler is not signal.SIG_IGN:
                signal.signal(s, self)
        streams = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = (TerminalWriter.wrap(stream, self.terminal) for stream in streams)

        def stop_listening():
            for s, handler in before.items():
                if handler is not None: # None: a handler from outside Python, which stays
                    signal.signal(s, handler)
            sys.stdout.flush()
            sys.stderr.flush()
            sys.stdout, sys.stderr = streams
        return stop_listening


class Quit(KeyboardInterrupt):
    """A second Ctrl-C, SIGTERM or SIGHUP: quit at once, with that signal's exit code."""

    def __init__(self, exit_code):
        super().__init__()
        self.exit_code = exit_code


class EvaluationStopped(Exception):
    """Ctrl-C during an evaluation: it stops after the current batch, and resuming does it again."""


def main():
    print_any_text()
    apply_overrides(sys.argv[1:], globals(), config_keys, PRESETS)
    device_type = configure()
    print(f"device: {device}")
    print('config: ' + ' '.join(f'{k}={globals()[k]}' for k in config_keys))
    torch.manual_seed(seed)

    path = input_file or INPUT_PATH # a text of your own, or Tiny Shakespeare (downloaded once)
    text = read_text(path, url=None if input_file else DATA_URL)
    # here are all the unique characters that occur in this text
    chars = sorted(list(set(text)))
    vocab_size = len(chars)
    encode, decode = make_codec(chars)
    data = torch.tensor(encode(text), dtype=torch.long)
    train_data, val_data = split_data(data.to(device)) # all of it lives on the device: ~9 MB
    if len(val_data) <= block_size:
        fail(f"{path} is too short: its val split (the last 10%) has {len(val_data)} characters, and "
             f"block_size={block_size} needs {block_size + 1}: use a longer text or a smaller --block_size")
    print(f"{len(text):,} characters, vocab {vocab_size}, "
          f"{len(train_data):,} train / {len(val_data):,} val")
    if device_type == 'cpu' and n_layer * n_embd**2 * block_size * batch_size >= 6 * 384**2 * 256 * 32:
        print("hint: on a CPU the lecture's config takes about 9 s per step and 13 minutes per "
              "evaluation (measured on 2 cores; the whole run: about 15 hours). python gpt.py "
              "--preset=cpu reaches val loss 1.63 in about 100 s (README.md: No GPU?)")

    ckpt_path = os.path.join(out_dir, 'ckpt.pt') if out_dir else ''
    best_path = os.path.join(out_dir, 'best.pt') if out_dir else ''
    log_path = os.path.join(out_dir, 'log.csv') if out_dir else ''
    checkpoint = None
    if resume:
        if not out_dir:
            fail("--resume=True needs an out_dir to resume from")
        checkpoint = load_checkpoint(ckpt_path, map_location=device)
        check_compatible(checkpoint, chars, ckpt_path)
    elif out_dir and os.path.exists(ckpt_path): # a new run would overwrite a trained model
        fail(f"{ckpt_path} holds an earlier run: continue it with --resume=True, or start a new "
             f"one with another --out_dir (or delete {out_dir})")
    elif out_dir and (os.path.exists(best_path) or log_rows(log_path)): # ckpt.pt was deleted; a log
        # of a header alone is a run killed before its first evaluation ended, with nothing to keep
        fail(f"{out_dir} holds the best.pt or log.csv of an earlier run, which a new run would "
             f"overwrite: start it with another --out_dir (or delete {out_dir})")

    model = GPTLanguageModel(vocab_size)
    m = model.to(device)
    # print the number of parameters in the model
    print(sum(p.numel() for p in m.parameters())/1e6, 'M parameters')

    # create a PyTorch optimizer
    optimizer = make_optimizer(model)

    start_step, best_val_loss, elapsed_before, eval_seconds = 0, float('inf'), 0.0, 0.0
    done_eval = None # a step whose evaluation is done already: that of the checkpoint resumed from
    if checkpoint is not None:
        load_weights(model, checkpoint, ckpt_path)
        load_optimizer_state(optimizer, checkpoint['optimizer'])
        start_step = checkpoint['step']
        best_val_loss = checkpoint['best_val_loss']
        elapsed_before = checkpoint['elapsed']
        eval_seconds = checkpoint.get('eval_seconds', 0.0)
        done_eval = start_step if checkpoint.get('evaluated', True) else None # unless Ctrl-C stopped it
        torch.set_rng_state(checkpoint['rng_cpu'].cpu())
        if device_type == 'cuda' and checkpoint.get('rng_cuda'):
            torch.cuda.set_rng_state_all([s.cpu() for s in checkpoint['rng_cuda']])
        print(f"resumed from {ckpt_path} at step {start_step} (best val loss {best_val_loss:.4f})")
        if start_step > max_iters or start_step == done_eval == max_iters:
            print(f"note: max_iters is {max_iters}: nothing left to train (a larger --max_iters trains on)")

    if out_dir:
        start_log(log_path, start_step)
        remove_cut_saves(out_dir)

    if use_compile:
        compile_blocks(model) # compiles on first use: the first eval, then the first step
    step_fn, eval_fn = step_functions(model, optimizer)
    splits = {'train': train_data, 'val': val_data}
    stop = StopRequest()
    stop_listening = stop.listen()
    t0 = time.time() - elapsed_before
    t_last = t_print = time.time()
    step_last = start_step

    def checkpoint_now(path, step, evaluated=True):
        save_checkpoint(path, model, optimizer, step, chars, best_val_loss, time.time() - t0, eval_seconds,
                        evaluated)

    def stop_here(step, evaluated=True):
        """The first Ctrl-C, SIGTERM or SIGHUP: save a checkpoint to resume from at this step, and exit."""
        if not out_dir:
            print(f"stopped at step {step}; nothing saved (out_dir is empty)")
            sys.exit(stop.exit_code)
        if not all(p.isfinite().all() for p in model.parameters()): # diverged since the last evaluation
            print(f"stopped at step {step}; nothing saved: the weights are no longer numbers "
                  f"(training diverged), and {ckpt_path} keeps step {step_last}")
            sys.exit(stop.exit_code)
        checkpoint_now(ckpt_path, step, evaluated)
        again = [sys.argv[0]] + [a for a in sys.argv[1:] if not a.startswith('--resume=')]
        again = subprocess.list2cmdline(again) if os.name == 'nt' else shlex.join(again) # as shells quote
        print(f"stopped at step {step}{'' if evaluated else ' during its evaluation'}; saved {ckpt_path}\n"
              f"resume with: python {again} --resume=True")
        sys.exit(stop.exit_code)

    def eval_batch(X, Y):
        """One batch of estimate_loss. A Ctrl-C stops the evaluation after the current batch, and
        a slow one (the lecture's config on a CPU: 13 minutes) shows its progress, as training does."""
        nonlocal eval_done, t_print
        if stop.requested:
            raise EvaluationStopped
        loss = eval_fn(X, Y)
        eval_done += 1
        total = eval_iters * len(splits)
        if progress_seconds and time.time() - t_print >= progress_seconds and eval_done < total:
            now = t_print = time.time()
            seconds = (now - t_eval) / eval_done
            left = duration((total - eval_done) * seconds)
            print(f"step {step}: evaluating, batch {eval_done}/{total} | {now - t0:.1f}s, "
                  f"{seconds * 1000:.1f} ms/batch, {left} left in this evaluation", flush=True)
        return loss

    def speed(seconds_per_step): # of the training steps, in the progress lines
        return (f"{seconds_per_step * 1000:.1f} ms/step, "
                f"{batch_size * block_size / seconds_per_step:,.0f} tok/s")

    for step in range(start_step, max_iters + 1):

        # every once in a while evaluate the loss on train and val sets, and after the last step
        if (step % eval_interval == 0 or step == max_iters) and step != done_eval:
            t_eval = t_print = time.time() # progress lines only if the evaluation itself takes long
            eval_done, rng = 0, torch.get_rng_state()
            try:
                losses = estimate_loss(model, splits, eval_batch)
            except EvaluationStopped: # resuming draws this evaluation's batches again
                torch.set_rng_state(rng)
                stop_here(step, evaluated=False)
            now = time.time()
            eval_seconds = now - t_eval
            progress = f" | {now - t0:.1f}s"
            if step > step_last: # speed since the last evaluation (this one included)
                progress += ', ' + speed((now - t_last) / (step - step_last))
                if step < max_iters:
                    progress += ', ' + time_left(step, (t_eval - t_last) / (step - step_last),
                                                 eval_seconds, evaluated=True)
            print(f"step {step}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}"
                  + progress, flush=True)
            diverged = [v for v in losses.values() if not math.isfinite(v)]
            if diverged: # stop before a checkpoint of it is saved
                fail(f"training diverged at step {step} (a loss of {diverged[0]}): try a lower "
                     f"--learning_rate (now {learning_rate})"
                     + (f"; {out_dir} keeps the checkpoints from before" if out_dir and step else ''))
            if out_dir:
                with open(log_path, 'a') as f:
                    f.write(f"{step},{losses['train']:.6f},{losses['val']:.6f},{now - t0:.3f}\n")
                improved = losses['val'] < best_val_loss
                best_val_loss = min(best_val_loss, losses['val'])
                checkpoint_now(ckpt_path, step)
                if improved: # best.pt is the same checkpoint: a second name, not a second write
                    link_atomically(ckpt_path, best_path)
            gc.freeze() # Python's garbage collector skips every object alive now from here on (PyTorch
                        # and torch.compile made hundreds of thousands): shorter collections, faster exit
            t_last = t_print = time.time()
            step_last = step
        if step == max_iters:
            break

        if stop.requested:
            stop_here(step)

        # sample a batch of data
        xb, yb = get_batch(train_data)

        # evaluate the loss, backpropagate, update: train_step above
        set_lr(optimizer, get_lr(step))
        step_fn(xb, yb)

        # a slow run (a CPU) also shows its progress between evaluations; on a GPU this times the
        # steps as they are queued (nothing here waits for the GPU)
        if progress_seconds and time.time() - t_print >= progress_seconds:
            now = t_print = time.time()
            seconds = (now - t_last) / (step + 1 - step_last)
            print(f"step {step + 1}/{max_iters} | {now - t0:.1f}s, {speed(seconds)}, "
                  + time_left(step + 1, seconds, eval_seconds, evaluated=False), flush=True)

    stop_listening()
    if out_dir:
        print(f"saved {ckpt_path}; best val loss {best_val_loss:.4f} in {best_path}")

    # generate from the model (uncompiled: each new length would be another compile)
    context = torch.zeros((1, 1), dtype=torch.long, device=device) # token 0: '\n' in Tiny Shakespeare
    with torch.compiler.set_stance('force_eager') if use_compile else nullcontext():
        print(decode(m.generate(context, max_new_tokens=max_new_tokens)[0].tolist()))
    print(f"{time.time() - t0:.1f} s for training, evaluations and this sample")

# ------------
# the speed switches at work: CUDA graphs and torch.compile

class GraphReplay:
    """use_cuda_graph: fn(x, y) recorded once as a CUDA graph, then replayed on each new batch.
    At this model's size the CPU takes longer to launch a step's hundreds of small kernels one by
    one than the GPU takes to run them; a replay launches all of them at once. The first `warmup`
    calls run as usual (on a side stream, as recording requires); they also compile the model."""

    def __init__(self, fn, warmup):
        self.fn, self.warmup, self.graph = fn, warmup, None

    def __call__(self, x, y):
        if self.warmup > 0:
            self.warmup -= 1
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                out = self.fn(x, y)
            torch.cuda.current_stream().wait_stream(side)
            return out
        if self.graph is None: # record: the kernels are captured with fixed buffers, not run
            self.x, self.y = x.clone(), y.clone()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.out = self.fn(self.x, self.y)
        self.x.copy_(x) # the new batch goes into the recorded buffers
        self.y.copy_(y)
        self.graph.replay()
        return self.out # the same tensor each time: the next replay overwrites it


def step_functions(model, optimizer):
    """train_step and forward_loss for this model, as (x, y) -> ... functions: with
    use_cuda_graph, CUDA graphs recorded after 3 warm-up steps and 1 warm-up eval batch."""
    step_fn = lambda xb, yb: train_step(model, optimizer, xb, yb)
    eval_fn = lambda X, Y: forward_loss(model, X, Y)
    if use_cuda_graph:
        return GraphReplay(step_fn, warmup=3), GraphReplay(eval_fn, warmup=1)
    return step_fn, eval_fn


def can_compile():
    """torch.compile on CUDA needs Triton (not on Windows by default); the final sample needs
    torch.compiler.set_stance (PyTorch 2.6)."""
    try:
        import triton # noqa: F401
    except ImportError:
        return False
    return hasattr(torch.compiler, 'set_stance')


def compile_blocks(model):
    """Regional compilation: compile the Block, the part that repeats, in place. All n_layer
    Blocks run the same compiled code (their weights are its inputs), so compiling takes a
    fraction of the whole model's time, and the state_dict keeps its keys."""
    for block in model.blocks:
        block.compile(mode=compile_mode)


@atexit.register
def unfreeze_for_triton():
    """At exit, where Triton is loaded (by any CUDA build of PyTorch on Linux, even on a CPU), give
    the objects that gc.freeze() kept from the garbage collector back to Python's last collection:
    Triton's bindings (nanobind) count each of their objects still alive then as a leak, and print
    about 30 lines of them (Triton 3.9). Elsewhere they stay frozen, and the process exits sooner."""
    if 'triton' in sys.modules:
        gc.unfreeze()

# ------------
# not in the lecture: the command line, checks of the settings and the device, files
# written whole or not at all, the download, and one-line errors instead of tracebacks

# what each setting at the top takes, so that an edit there of another kind (max_iters = 5e3,
# resume = 'False') is a one-line error at the start, as it is on the command line
KINDS = dict(batch_size=int, block_size=int, max_iters=int, eval_interval=int, learning_rate=float,
             device=str, eval_iters=int, n_embd=int, n_head=int, n_layer=int, dropout=float, seed=int,
             input_file=str, max_new_tokens=int, progress_seconds=float, preset=str, out_dir=str,
             resume=bool, lr_decay=bool, warmup_iters=int, min_lr=float, grad_accum=int, use_tf32=bool,
             use_bf16=bool, use_compile=bool, compile_mode=str, use_fused_adamw=bool, use_pinned=bool,
             use_cuda_graph=bool, fast_attention=(bool, type(None)))
WRONG_KIND = object()
KIND_NAMES = {int: 'an int (a whole number, written without . or e)', float: 'a number',
              bool: 'True or False', str: 'a string', (bool, type(None)): 'True, False or None',
              type(None): 'None'}


def apply_overrides(argv, namespace, keys, presets=None, doc=__doc__, notes=None):
    """Set namespace[key] from --key=value arguments for the given keys, each of the kind in
    KINDS (other keys, and settings you add at the top: their default's kind); a --preset=name
    applies presets[name] first, and the other arguments win over it. --help prints doc and each
    key with its value (the default, or as the other arguments set it) and its note (default: its
    comment at the top of this file), then what each preset sets."""
    valid = 'valid keys: ' + ', '.join(f'--{k}' for k in keys)
    kinds = {k: KINDS.get(k, type(namespace[k])) for k in keys}
    for key in keys: # the values at the top of this file, which a learner may have edited
        value = as_kind(namespace[key], kinds[key])
        if value is WRONG_KIND:
            fail(f"{key} = {namespace[key]!r} at the top of gpt.py must be {KIND_NAMES[kinds[key]]}",
                 code=2)
        namespace[key] = value
    options = [arg for arg in argv if arg not in ('-h', '--help')]
    for arg in options:
        key, eq, raw = arg[2:].partition('=') if arg.startswith('--') else ('', '', '')
        if key not in keys or not eq:
            fail(f"unknown option {arg!r} (use --key=value); {valid}", code=2)
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw # a bare string, e.g. --device=cpu
        if kinds[key] is str and type(value) in (int, float):
            value = raw # --out_dir=2024: a number is a fine name for a folder or a file
        if isinstance(value, str):
            value = os.path.expanduser(value) # --out_dir=~/runs: the shell leaves a ~ after = alone
        value = as_kind(value, kinds[key])
        if value is WRONG_KIND:
            fail(f"--{key} expects {KIND_NAMES[kinds[key]]}, got {raw!r}; {valid}", code=2)
        namespace[key] = value
    if presets and namespace.get('preset'):
        if namespace['preset'] not in presets:
            fail(f"unknown preset {namespace['preset']!r}; presets: {', '.join(presets)}", code=2)
        namespace.update(presets[namespace['preset']])
        apply_overrides(options, namespace, keys)
    if len(options) < len(argv): # --help: after the other options, so that it shows their values
        print_help(namespace, keys, options, presets, doc, notes or setting_notes(__file__))
        sys.exit(0)


def argument_parser(doc, **kwargs):
    """argparse for the scripts in scripts/: doc as their --help, and an error is one line (not
    argparse's usage, then the error) with exit code 2."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)
    p.error = lambda message: p.exit(2, f"error: {message} (see --help)\n")
    return p


def print_help(namespace, keys, options, presets, doc, notes):
    """--help: doc, each key with its value and its note, then what each preset sets."""
    lines = [f'  --{k}={namespace[k]!r}' for k in keys]
    width = max(map(len, lines)) + 2
    wrap = lambda text: textwrap.fill(text, 110, subsequent_indent=' ' * width)
    print(doc.strip() + '\n')
    if options:
        print(textwrap.fill(f"The values below are those of {' '.join(options)}:", 110))
    print('\n'.join(wrap(line.ljust(width) + notes.get(k, '')) for line, k in zip(lines, keys)))
    for name, settings in (presets or {}).items():
        print(f"\n--preset={name} sets, before the other options:")
        print(textwrap.fill(' '.join(f'--{k}={v!r}' for k, v in settings.items()), 110,
                            initial_indent='    ', subsequent_indent='    '))
    sys.stdout.flush() # a full disk or a closed pipe under it is caught as for any output


def as_kind(value, kind):
    """value if it is of kind (a type, or a tuple of types), as a float if kind is float and it
    is an int; else WRONG_KIND. True is not an int here, nor is 5.0."""
    if kind is float and type(value) is int:
        return float(value)
    return value if type(value) in (kind if isinstance(kind, tuple) else (kind,)) else WRONG_KIND


def setting_notes(path):
    """{setting: the comment beside it} from the top of the script at path, for --help."""
    notes, key = {}, None
    with open(path, encoding='utf-8') as f:
        for line in f:
            setting, comment = re.match(r'(\w+) = [^#]*(?:# (.*))?', line), re.match(r'\s+# (.*)', line)
            if setting:
                key, notes[setting.group(1)] = setting.group(1), (setting.group(2) or '').strip()
            elif key and comment: # a comment below its setting: it goes on, or it is the only one
                notes[key] = (notes[key] + ' ' + comment.group(1).strip()).lstrip()
            else:
                key = None
    return notes


COMPILE_MODES = ('default', 'reduce-overhead', 'max-autotune', 'max-autotune-no-cudagraphs')
SEEDS = range(-2**63, 2**64) # what torch.manual_seed takes


def configure():
    """Check the settings, and resolve the speed switches for this device: off where
    unsupported, so CPU and MPS runs stay plain float32 and exact."""
    global use_tf32, use_bf16, use_compile, use_fused_adamw, use_pinned, use_cuda_graph, fast_attention
    for key in ('batch_size', 'block_size', 'n_embd', 'n_head', 'n_layer', 'eval_interval', 'eval_iters'):
        if globals()[key] < 1:
            fail(f"--{key} must be at least 1, got {globals()[key]}")
    if n_embd % n_head:
        fail(f"n_embd={n_embd} must be a multiple of n_head={n_head}")
    if grad_accum < 1 or batch_size % grad_accum:
        fail(f"--grad_accum={grad_accum} must be at least 1 and divide --batch_size={batch_size} into "
             "equal parts")
    for key in ('max_iters', 'max_new_tokens', 'warmup_iters', 'progress_seconds'):
        if globals()[key] < 0:
            fail(f"--{key} must be at least 0, got {globals()[key]}")
    if learning_rate <= 0 or min_lr < 0:
        fail(f"--learning_rate must be > 0 and --min_lr >= 0, got {learning_rate} and {min_lr}")
    if lr_decay and min_lr > learning_rate:
        fail(f"--min_lr={min_lr} is above --learning_rate={learning_rate}: lr_decay decays from "
             "learning_rate down to min_lr, so lower --min_lr too")
    if not 0 <= dropout < 1:
        fail(f"--dropout must be in [0, 1), got {dropout}")
    if seed not in SEEDS:
        fail(f"--seed must be from -2**63 to 2**64 - 1, got {seed}")
    if compile_mode not in COMPILE_MODES:
        fail(f"--compile_mode must be one of {', '.join(COMPILE_MODES)}, got {compile_mode!r}")
    device_type = check_device(device)
    if device_type != 'cuda':
        use_tf32 = use_bf16 = use_compile = use_fused_adamw = use_pinned = use_cuda_graph = False
    if use_bf16 and torch.cuda.get_device_capability(device)[0] < 8:
        use_bf16 = False # before Ampere (a T4, a V100) bfloat16 is emulated, slower than float32
        print("note: this GPU has no bfloat16 units; use_bf16 is off")
    if use_compile and not can_compile():
        use_compile = False
        print("note: torch.compile needs Triton (and PyTorch 2.6 or later); use_compile is off")
    if use_cuda_graph and use_compile and compile_mode in ('reduce-overhead', 'max-autotune'):
        fail(f"--compile_mode={compile_mode} records CUDA graphs of its own: "
             "add --use_cuda_graph=False, or use another --compile_mode")
    if fast_attention is None:
        fast_attention = device_type == 'cuda'
    torch.backends.cuda.matmul.allow_tf32 = use_tf32
    torch.backends.cudnn.allow_tf32 = use_tf32
    return device_type


def check_device(name):
    """The device type of name ('cuda', 'mps', 'cpu'), or a one-line error if it can't be used."""
    try:
        parsed = torch.device(name)
    except RuntimeError:
        fail(f"unknown device {name!r}: use cpu, cuda, cuda:N or mps")
    device_type, index = parsed.type, parsed.index
    if device_type == 'cuda' and not torch.cuda.is_available():
        fail(f"cannot use device {name!r}: this PyTorch sees no CUDA GPU (none, no driver, or a CPU build)")
    if device_type == 'cuda' and index is not None and index >= torch.cuda.device_count():
        fail(f"cannot use device {name!r}: this machine has {torch.cuda.device_count()} CUDA GPU(s), "
             f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    if device_type == 'mps' and not torch.backends.mps.is_available():
        fail(f"cannot use device {name!r}: this PyTorch sees no Apple GPU")
    try: # a number made there and read back: fails for a backend this build lacks (xpu), one whose
         # plugin is missing (hpu), and meta, whose tensors have a shape but no data
        torch.zeros(1, device=name).item()
    except Exception as e:
        fail(f"cannot use device {name!r}: {str(e).splitlines()[0]}")
    return device_type


def fail(message, code=1):
    """Stop with a one-line error instead of a traceback."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def print_any_text():
    """A character the output's encoding lacks prints as '?' instead of ending the run with a
    UnicodeEncodeError: a sample of a Chinese --input_file into a file, on Windows, is cp1252."""
    if hasattr(sys.stdout, 'reconfigure'): # not where a notebook has replaced sys.stdout
        sys.stdout.reconfigure(errors='replace')


def exit_on_broken_pipe():
    """Whoever read the output stopped reading (| head): exit without a traceback."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno()) # nothing left to flush at exit
    sys.exit(1)


def to_nowhere(fds):
    """From now on, what is written to these file descriptors goes to os.devnull."""
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in fds:
        os.dup2(null, fd)
    os.close(null)


class TerminalWriter(io.RawIOBase):
    """Writes to a terminal, where a write that fails because the terminal has gone (EIO: it was
    closed, or the ssh connection to it dropped) goes nowhere, as every write after SIGHUP does,
    instead of ending the run: one that ignores SIGHUP (trap '' HUP) trains on."""

    def __init__(self, fd):
        super().__init__()
        self.fd = fd

    @classmethod
    def wrap(cls, stream, terminal):
        """stream (sys.stdout or sys.stderr) written through a TerminalWriter if it writes to
        one of the file descriptors in terminal; otherwise stream itself. Not on Windows, whose
        terminals never hang up this way (no SIGHUP), and whose console wants its own writes."""
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError): # a notebook's, a test's: no file descriptor
            return stream
        if fd not in terminal or not hasattr(signal, 'SIGHUP'):
            return stream
        stream.flush()
        return io.TextIOWrapper(io.BufferedWriter(cls(fd)), encoding=stream.encoding, errors=stream.errors,
                                line_buffering=True)

    def writable(self):
        return True

    def fileno(self):
        return self.fd

    def write(self, b):
        try:
            return os.write(self.fd, b)
        except OSError as e:
            if e.errno != errno.EIO:
                raise
            to_nowhere([self.fd])
            return len(b)


def memory_error(e):
    """What a RuntimeError that means out of memory says, in a few words; None for any other.
    CUDA raises torch.OutOfMemoryError; MPS and the CPU a plain RuntimeError, the CPU with the
    size in bytes (e.g. for the tril of a huge block_size)."""
    if not re.search("out of memory|can't allocate memory", str(e)):
        return None
    asked = re.search(r"tried to allocate (\d+) bytes", str(e))
    return f"{int(asked.group(1)) / 1e9:.1f} GB asked for" if asked else str(e).splitlines()[0][:80]


def run_main(main, *args, shrink=None, advice=None, interrupted=None):
    """Run a script's main(*args): Ctrl-C exits with 130 (printing interrupted, if given), a reader
    that stops reading (| head) ends it with 1, and a full disk, or running out of memory, is a
    one-line error, none with a traceback. Out of memory names the options to shrink, if the script
    has any: shrink, or the whole line advice(what) writes."""
    try:
        main(*args)
        sys.stdout.flush() # here, so that a closed pipe is caught below rather than at exit
    except KeyboardInterrupt as e:
        if interrupted:
            print(interrupted, file=sys.stderr)
        sys.exit(getattr(e, 'exit_code', 130)) # Quit's: the signal's own
    except BrokenPipeError:
        exit_on_broken_pipe()
    except OSError as e: # e.g. the disk filled up under the output (python script.py > file)
        fail(os_error(e))
    except RuntimeError as e:
        what = memory_error(e)
        if what is None:
            raise
        fail(advice(what) if advice
             else f"out of memory ({what})" + (f"; try a smaller {shrink}" if shrink else ''))
    except MemoryError: # Python's own objects filled the machine's memory (PyTorch's raise the above)
        fail(memory_full(input_file))


def memory_advice(what):
    """gpt.py's line for a device out of memory: what to change, the cheapest first."""
    parts = next((n for n in range(grad_accum + 1, batch_size + 1) if batch_size % n == 0), None)
    return (f"{device} ran out of memory ({what}); try "
            + (f"--grad_accum={parts} (the same batches in {parts} parts), or " if parts else '')
            + f"a smaller --batch_size (now {batch_size}) or --block_size (now {block_size}), or a "
            f"smaller model (--n_layer={n_layer}, --n_embd={n_embd})")


def memory_full(text_file=''):
    """Python's MemoryError in a few words. Its own objects filled the machine's memory: most
    likely the list of ints that encodes a text too long (text_file, if one was given)."""
    hint = f"; --input_file={text_file} may be too long to encode: try a shorter text" if text_file else ''
    return f"out of memory (Python's MemoryError): this machine's memory is full{hint}"


def os_error(e):
    """An OSError in a few words: the system's reason, and the file if it names one."""
    return f"{e.strerror}: {e.filename}" if e.filename else e.strerror or str(e)


def why_unreadable(e):
    """In words, why a file could not be read as text: the system's reason ('Is a directory'),
    or the first byte that is not UTF-8 and where it is."""
    if isinstance(e, UnicodeDecodeError):
        return f"it is not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start:,})"
    return e.strerror


def why_cannot_write(path):
    """Why no file can be written at path, to say before the work whose result goes there; None if
    one can (as far as can be told without writing)."""
    if os.path.isdir(path):
        return "it is a folder; give the name of a file"
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        return "no such folder"
    return None


def download(url, path):
    """Fetch url to path, check its sha256, and write it atomically: never a partial file."""
    hint = f"download it by hand from {url} to {path}"
    print(f"downloading Tiny Shakespeare from {url}")
    try:
        import requests
        r = requests.get(url, timeout=30)
        r.raise_for_status()
    except ImportError:
        fail(f"the requests package is missing (pip install requests), or {hint}")
    except requests.RequestException as e:
        reason = f"HTTP {e.response.status_code}" if e.response is not None else type(e).__name__
        fail(f"could not download {url} ({reason}); {hint}")
    digest = hashlib.sha256(r.content).hexdigest()
    if digest != DATA_SHA256:
        fail(f"the download has sha256 {digest}, expected {DATA_SHA256}; {hint}")
    save_atomically(path, lambda f: f.write(r.content))
    print(f"saved {len(r.content):,} bytes to {path} (sha256 checked)")


def save_atomically(path, write):
    """write(f) into a temporary file beside path, then rename it over path in one step. If the
    disk is full or the folder can't be written, path stays as it was: a one-line error."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix='.tmp-', suffix='-' + os.path.basename(path))
    except OSError as e:
        fail(f"cannot write {path}: {e.strerror}")
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask) # mkstemp makes it private; give it a normal file's mode
        with os.fdopen(fd, 'wb') as f:
            write(f)
        os.replace(tmp, path)
    except BaseException as e:
        discard(tmp, path, e)
        raise


def remove_cut_saves(folder):
    """Remove the temporary files in out_dir of saves that a kill -9, a crash or a power cut
    stopped before their rename (hidden files, 139 MB each for the lecture's model), and say so."""
    for name in sorted(os.listdir(folder)):
        if name.startswith('.tmp-') and name.endswith(('-ckpt.pt', '-best.pt', '-log.csv')):
            path = os.path.join(folder, name)
            size = os.path.getsize(path)
            os.remove(path)
            print(f"note: removed {path} ({size / 1e6:.1f} MB), left by a save that was cut short")


def discard(tmp, path, error):
    """Remove the temporary file of a save to path that failed; a full disk or a folder that
    can't be written is a one-line error, anything else (Ctrl-C) goes on up."""
    os.remove(tmp)
    cause = error if isinstance(error, OSError) else error.__context__ # torch.save wraps the OSError
    if isinstance(cause, OSError):
        fail(f"cannot write {path}: {cause.strerror or cause} (an earlier file there is untouched)")


def link_atomically(src, path):
    """Make path a second name of the file at src (a hard link: nothing is written), in one step.
    save_atomically replaces src with a new file, never writing into it, so path keeps these
    contents after src changes. Where the file system has no hard links, path gets a copy."""
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)),
                       f'.tmp-{os.getpid()}-' + os.path.basename(path))
    try:
        os.link(src, tmp)
    except OSError:
        with open(src, 'rb') as f:
            save_atomically(path, lambda g: shutil.copyfileobj(f, g))
        return
    try:
        os.replace(tmp, path)
    except BaseException as e:
        discard(tmp, path, e)
        raise


if __name__ == '__main__':
    run_main(main, advice=memory_advice, interrupted="\ninterrupted; nothing saved since the last checkpoint")
