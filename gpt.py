"""The GPT of "Let's build GPT: from scratch, in code, spelled out" (Andrej Karpathy, 2023) on Tiny Shakespeare.
`python gpt.py` is the lecture's run (a GPU: minutes; a CPU: a day); `--preset=cpu` a small model in under 3
minutes on 2 cores; `--help` explains every setting. Importing it does nothing."""
import ast
import difflib
import hashlib
import math
import os
import shlex
import signal
import sys
import time

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
eval_iters = 200 # how many batches each loss estimate averages over
n_embd = 384 # width of the residual stream
n_head = 6 # attention heads per block; each is n_embd // n_head = 64 wide
n_layer = 6 # how many Blocks
dropout = 0.2 # probability of zeroing an activation during training
# not in the lecture
seed = 1337 # for torch.manual_seed: the initial weights and the batches
input_file = '' # a text file of your own to train on (lecture EX2); '' is Tiny Shakespeare
out_dir = 'out' # where ckpt.pt, best.pt and log.csv go ('' saves nothing)
resume = False # go on from out_dir/ckpt.pt
preset = '' # 'cpu': the settings in PRESETS below, then the other options
lr_decay = False # linear warmup, then cosine decay to min_lr (the lecture's lr is constant)
warmup_iters = 100 # with lr_decay: steps of linear warmup
min_lr = 3e-5 # with lr_decay: the rate at max_iters
# speed switches. None: on where the device has it (CUDA), so CPU and MPS runs keep the lecture's float32
# math; True forces one anywhere PyTorch can run it (a test forces them all on a CPU); False: off
use_tf32 = None # TF32 tensor cores for float32 matmuls
use_bf16 = None # bfloat16 autocast (AdamW keeps float32 weights); float16 where the GPU lacks bfloat16 (a T4)
use_fp16 = False # float16 autocast, its gradients scaled (GradScaler) so that small ones don't round to 0
use_compile = None # torch.compile each Block into fused kernels
use_fused_adamw = None # one fused kernel for the whole AdamW update
fast_attention = None # EX1: all heads in one batched matmul
# ------------
config_keys = {k: type(v) for k, v in globals().items() # each setting's type, from its default
               if not k.startswith('_') and isinstance(v, (bool, int, float, str, type(None)))}
PRESETS = {'cpu': dict(device='cpu', n_layer=3, n_head=4, n_embd=96, block_size=64, batch_size=32, dropout=0.0,
                       learning_rate=4e-3, lr_decay=True, warmup_iters=50, min_lr=4e-4, max_iters=2200,
                       eval_interval=550, eval_iters=40, fast_attention=True, out_dir='out-cpu')} # scripts/cpu_sweep.py
DATA_URL = 'https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt'
DATA_SHA256 = '86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed'
INPUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'input.txt')

def read_text():
    """input_file, or Tiny Shakespeare: downloaded on first use, checked against its sha256, written whole."""
    if input_file or os.path.exists(INPUT_PATH):
        with open(input_file or INPUT_PATH, 'rb') as f:
            raw = f.read()
    else:
        print(f"downloading Tiny Shakespeare from {DATA_URL}")
        try:
            import requests
            raw = requests.get(DATA_URL, timeout=30).content
        except Exception as e:
            fail(f"could not download it ({type(e).__name__}): fetch {DATA_URL} by hand to {INPUT_PATH}")
    if not input_file and hashlib.sha256(raw).hexdigest() != DATA_SHA256:
        fail(f"not Tiny Shakespeare (its sha256 differs): delete {INPUT_PATH}, or fetch {DATA_URL} by hand")
    if not input_file and not os.path.exists(INPUT_PATH):
        with open(INPUT_PATH + '.tmp', 'wb') as f: # then renamed: never half-written
            f.write(raw)
        os.replace(INPUT_PATH + '.tmp', INPUT_PATH)
    return raw.decode().replace('\r\n', '\n') # as open(path, 'r') reads it

def get_batch(data):
    """Inputs x and targets y (x shifted by one) at batch_size random offsets into data."""
    ix = torch.randint(len(data) - block_size, (batch_size,)) # drawn on the CPU: the lecture's batches anywhere
    ix = ix.pin_memory().to(data.device, non_blocking=True) if data.is_cuda else ix
    t = torch.arange(block_size, device=data.device)
    return data[ix[:, None] + t], data[ix[:, None] + t + 1] # (B,T), (B,T): one gather, not a loop of slices

@torch.no_grad()
def estimate_loss(model, splits):
    """Mean loss over eval_iters batches of each split: far less noisy than one batch's loss."""
    out = {}
    model.eval()
    for split, data in splits.items():
        losses = torch.zeros(eval_iters, device=data.device)
        for k in range(eval_iters):
            X, Y = get_batch(data)
            with autocast(data.device.type):
                logits, loss = model(X, Y)
            losses[k] = loss # stays on the device: one wait for it per split, not one per batch
        out[split] = losses.mean().item()
    model.train()
    return out

# ------------ the model
class Head(nn.Module):
    """one head of self-attention"""

    def __init__(self, head_size):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size))) # not trained
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)   # (B,T,hs)
        q = self.query(x) # (B,T,hs)
        # affinities, scaled by 1/sqrt(hs) so that softmax stays diffuse at init
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
        # every head's query, key and value weights stacked: one (3*nh*hs, C) matmul computes all
        w = torch.cat([getattr(h, name).weight for name in ('query', 'key', 'value') for h in self.heads])
        q, k, v = (x @ w.T).split(w.shape[0] // 3, dim=-1) # 3 x (B,T,nh*hs)
        q, k, v = (t.view(B, T, len(self.heads), -1).transpose(1, 2) for t in (q, k, v)) # (B,nh,T,hs)
        p = self.heads[0].dropout.p if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True) # (B,nh,T,hs)
        out = out.transpose(1, 2).reshape(B, T, -1) # (B,T,nh*hs): the heads side by side, as torch.cat
        return self.dropout(self.proj(out))

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
        self.sa = (BatchedMultiHeadAttention if fast_attention else MultiHeadAttention)(n_head, head_size)
        self.ffwd = FeedForward(n_embd)
        self.ln1 = nn.LayerNorm(n_embd)
        self.ln2 = nn.LayerNorm(n_embd)

    def forward(self, x):
        # residual connections; pre-norm (LayerNorm before each part), as in the lecture, not the paper
        x = x + self.sa(self.ln1(x))
        x = x + self.ffwd(self.ln2(x))
        return x

class GPTLanguageModel(nn.Module):

    def __init__(self, vocab_size):
        super().__init__()
        self.token_embedding_table = nn.Embedding(vocab_size, n_embd)
        self.position_embedding_table = nn.Embedding(block_size, n_embd)
        self.blocks = nn.Sequential(*[Block(n_embd, n_head=n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd) # final layer norm
        self.lm_head = nn.Linear(n_embd, vocab_size)
        # the published lecture code adds this init (the video does not show it): it learns faster
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
        """Extend idx (B,T) by max_new_tokens sampled tokens (after model.eval(): no dropout)."""
        for _ in range(max_new_tokens):
            logits, loss = self(idx[:, -block_size:]) # crop idx to the last block_size tokens
            logits = logits[:, -1, :] / temperature # the last time step: (B,C); < 1 sharpens, > 1 flattens
            if top_k is not None: # only the k likeliest tokens
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits = logits.masked_fill(logits < v[:, [-1]], float('-inf'))
            probs = F.softmax(logits, dim=-1) # (B,C)
            idx_next = torch.multinomial(probs, num_samples=1) # (B,1)
            idx = torch.cat((idx, idx_next), dim=1) # (B,T+1)
        return idx

def get_lr(step): # the lecture's constant rate, or with lr_decay: linear warmup, then cosine down to min_lr
    if not lr_decay:
        return learning_rate
    if step < warmup_iters:
        return learning_rate * (step + 1) / warmup_iters
    progress = min(1.0, (step - warmup_iters) / max(1, max_iters - warmup_iters))
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (learning_rate - min_lr)

def main():
    configure(sys.argv[1:])
    torch.manual_seed(seed)

    text = read_text()
    chars = sorted(list(set(text))) # here are all the unique characters that occur in this text
    vocab_size = len(chars)
    stoi = {ch: i for i, ch in enumerate(chars)} # create a mapping from characters to integers
    itos = {i: ch for i, ch in enumerate(chars)}
    encode = lambda s: [stoi[c] for c in s] # encoder: take a string, output a list of integers
    decode = lambda l: ''.join([itos[i] for i in l]) # decoder: take a list of integers, output a string
    data = torch.tensor(encode(text), dtype=torch.long).to(device) # all of it on the device: 9 MB
    n = int(0.9*len(data)) # first 90% will be train, rest val
    train_data, val_data = data[:n], data[n:]
    if len(val_data) <= block_size:
        fail(f"the text is too short for --block_size={block_size}: its val split has {len(val_data)} characters")

    model = GPTLanguageModel(vocab_size).to(device)
    print(sum(p.numel() for p in model.parameters())/1e6, 'M parameters')
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, # fused: one kernel; foreach: a few ops
                                  fused=use_fused_adamw, foreach=not use_fused_adamw)
    scaler = torch.amp.GradScaler(torch.device(device).type, enabled=use_fp16) # a no-op but for float16
    if use_compile: # the n_layer Blocks share one compiled code: a fraction of the whole model's wait
        for block in model.blocks:
            block.compile()

    ckpt_path, best_path, log_path = (os.path.join(out_dir, f) for f in ('ckpt.pt', 'best.pt', 'log.csv'))
    start, best_val_loss, t0 = 0, float('inf'), time.time()
    if resume:
        start, best_val_loss, t0 = load_checkpoint(ckpt_path, model, optimizer, scaler, chars)
    elif out_dir and os.path.exists(ckpt_path):
        fail(f"{out_dir} holds a run: go on with --resume=True, or start another with another --out_dir")
    elif out_dir:
        os.makedirs(out_dir, exist_ok=True)
    def save(path): # all that an exact resume needs, into path.tmp, then renamed: never half-written
        torch.save({'model': model.state_dict(), 'optimizer': optimizer.state_dict(), 'chars': chars,
                    'config': {k: globals()[k] for k in config_keys}, 'step': step, 'best_val_loss': best_val_loss,
                    'elapsed': time.time() - t0, 'rng': torch.get_rng_state(), 'scaler': scaler.state_dict(),
                    'rng_cuda': torch.cuda.get_rng_state_all() if 'cuda' in device else []}, path + '.tmp')
        os.replace(path + '.tmp', path)
    signal.signal(signal.SIGTERM, signal.default_int_handler) # kill, or a job's time limit: as Ctrl-C
    t_last, step_last = time.time(), start
    for step in range(start, max_iters + 1):

        # every once in a while evaluate the loss on train and val sets (a resumed step's is done)
        if (step % eval_interval == 0 or step == max_iters) and not (resume and step == start):
            losses = estimate_loss(model, {'train': train_data, 'val': val_data})
            now = time.time()
            speed = f", {(now - t_last) / (step - step_last) * 1000:.1f} ms/step" if step > step_last else ''
            print(f"step {step}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f} | "
                  f"{now - t0:.1f}s{speed}", flush=True)
            if out_dir:
                improved, best_val_loss = losses['val'] < best_val_loss, min(best_val_loss, losses['val'])
                save(ckpt_path)
                if improved:
                    save(best_path)
                with open(log_path, 'a' if step else 'w') as f:
                    f.write('' if step else 'step,train_loss,val_loss,elapsed_s\n')
                    f.write(f"{step},{losses['train']:.6f},{losses['val']:.6f},{now - t0:.3f}\n")
            t_last, step_last = time.time(), step
        if step == max_iters:
            break

        # sample a batch of data
        xb, yb = get_batch(train_data)

        # evaluate the loss
        with autocast(xb.device.type):
            logits, loss = model(xb, yb)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward() # without float16: loss.backward()
        for group in optimizer.param_groups:
            group['lr'] = get_lr(step)
        scaler.step(optimizer) # optimizer.step(), skipped where a scaled gradient overflowed
        scaler.update()

    # generate from the model, in eval mode (no dropout), uncompiled (each length would compile again)
    model.eval()
    context = torch.zeros((1, 1), dtype=torch.long, device=device)
    with torch.compiler.set_stance('force_eager' if use_compile else 'default'):
        print(decode(model.generate(context, max_new_tokens=500)[0].tolist()))
    if out_dir: # where the model is, and what to run next
        print(f"the model: {best_path}; next: python scripts/sample.py, scripts/plot_losses.py, scripts/evaluate.py")

# ------------ not in the lecture: the command line, the device, checkpoints, Ctrl-C, one-line errors

def options(argv): # the command line as --key=value options: --key value reads as --key=value
    args = []
    for arg in argv:
        glue = args and args[-1].startswith('--') and '=' not in args[-1] and not arg.startswith('--')
        args.append(args.pop() + '=' + arg if glue else arg)
    return args

def configure(argv):
    """--key=value for the settings above (of its default's type), the checks, and the switches."""
    global use_tf32, use_bf16, use_fp16, use_compile, use_fused_adamw, fast_attention
    if '-h' in argv or '--help' in argv: # each setting with its comment at the top of this file
        comments = {line.split(' = ')[0]: line.partition(' # ')[2].strip() for line in open(__file__, encoding='utf-8')}
        print(__doc__, *(f"  --{k}={globals()[k]!r}".ljust(26) + comments.get(k, '') for k in config_keys), sep='\n')
        sys.exit(0)
    argv = options(argv)
    presets = [arg for arg in argv if arg.startswith('--preset=')]
    for arg in presets[-1:] + [arg for arg in argv if arg not in presets]: # the preset first: the others win
        key, eq, raw = arg.removeprefix('--').partition('=')
        if not arg.startswith('--') or not eq or key not in config_keys:
            close = difflib.get_close_matches(key, config_keys, n=1)
            fail(f"unknown option {arg!r}: " + (f"give it a value, as --{key}=VALUE" if key in config_keys else
                 f"did you mean --{close[0]}?" if close else f"the settings are {', '.join(config_keys)}"), code=2)
        try:
            value = raw if config_keys[key] is str else ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        value = float(value) if config_keys[key] is float and type(value) is int else value
        kinds = (bool, type(None)) if config_keys[key] is type(None) else (config_keys[key],)
        if type(value) not in kinds or key == 'preset' and value not in ('', *PRESETS):
            fail(f"--{key} must be " + (f"one of {list(PRESETS)}" if key == 'preset' else
                                        ' or '.join(k.__name__ for k in kinds)) + f", got {raw!r}", code=2)
        globals()[key] = value
        if key == 'preset':
            globals().update(PRESETS.get(value, {}))
    for keys, ok, must in [ # each setting's range: a bad value stops here, before any work
            ('batch_size block_size n_embd n_head n_layer eval_interval eval_iters', lambda v: v >= 1, 'at least 1'),
            ('max_iters warmup_iters', lambda v: v >= 0, 'at least 0'),
            ('dropout', lambda v: 0 <= v < 1, 'a probability below 1: at least 0 and below 1'),
            ('learning_rate', lambda v: 0 < v < math.inf, 'a finite number above 0'),
            ('min_lr', lambda v: not lr_decay or 0 <= v <= learning_rate, f'from 0 to learning_rate={learning_rate}'),
            ('n_embd', lambda v: v % n_head == 0, f'a multiple of n_head={n_head}: each head is n_embd // n_head wide'),
            ('seed', lambda v: -2**63 <= v < 2**64, 'from -2**63 to 2**64 - 1, as torch.manual_seed takes')]:
        for key in keys.split():
            if not ok(globals()[key]):
                fail(f"--{key}={globals()[key]!r} must be {must}", code=2)
    try: # a number made there and read back: a device that this machine or PyTorch lacks fails here
        torch.zeros(1, device=device).item()
    except Exception as e:
        fail(f"cannot use device {device!r}: {str(e).splitlines()[0]}")
    cuda = torch.device(device).type == 'cuda'
    on = lambda switch, has=cuda: has if switch is None else switch # None: where the device has it
    use_fp16 = use_fp16 or use_bf16 is None and cuda and torch.cuda.get_device_capability(device)[0] < 8 # a T4
    use_tf32, use_fused_adamw, fast_attention = (on(s) for s in (use_tf32, use_fused_adamw, fast_attention))
    use_bf16 = on(use_bf16) and not use_fp16
    use_compile = on(use_compile, cuda and sys.platform != 'win32') # Windows has no Triton to compile with
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = use_tf32
    print(f"device: {device}\nconfig: " + ' '.join(f'{k}={globals()[k]}' for k in config_keys))
    cores = torch.get_num_threads() # a step's FLOPs (as bench.py counts them) at 50 GFLOP/s a core: the EPYC's
    step_s = (72 * n_embd + 12 * block_size) * n_layer * n_embd * batch_size * block_size / 50e9 / cores
    hours = step_s * (max_iters + (max_iters // eval_interval + 1) * eval_iters * 2 / 3) / 3600 # eval: forward only
    if torch.device(device).type == 'cpu' and hours > 1: # say so now, not after an hour of silence
        print(f"note: about {hours:.0f} hours on {cores} CPU cores, the first losses in {step_s * eval_iters / 90:.0f}"
              " minutes; for a CPU, python gpt.py --preset=cpu trains a smaller model in under 3 minutes", flush=True)

def autocast(where): # bfloat16, or float16, where configure turned them on; else float32, the lecture's
    return torch.autocast(where, torch.float16 if use_fp16 else torch.bfloat16, enabled=bool(use_fp16 or use_bf16))

def load_checkpoint(path, model, optimizer, scaler, chars):
    """The model, AdamW, float16's scale and the random numbers as saved: the run goes on as if it never stopped."""
    try:
        ckpt = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:
        fail(f"cannot resume from {path}: {getattr(e, 'strerror', None) or 'damaged, or cut short'}")
    was = ckpt['config']
    shape = [k for k in ('n_embd', 'n_head', 'n_layer', 'block_size') if was[k] != globals()[k]]
    if ckpt['chars'] != chars or shape: # say how to resume it, or how not to collide with it
        saved = f"--preset={was['preset']}" if was.get('preset') else ' '.join(f'--{k}={was[k]}' for k in shape)
        fail(f"cannot resume from {path}: its run " + (f"has {saved}: resume with that" if shape else "read another "
             "text") + ", or give this run another --out_dir")
    model.load_state_dict(ckpt['model'])
    optimizer.load_state_dict(ckpt['optimizer'])
    scaler.load_state_dict(ckpt.get('scaler') or scaler.state_dict()) # float16's scale; saved without it: empty
    torch.set_rng_state(ckpt['rng'].cpu())
    if ckpt['rng_cuda'] and 'cuda' in device:
        torch.cuda.set_rng_state_all([s.cpu() for s in ckpt['rng_cuda']])
    print(f"resumed from {path} at step {ckpt['step']} (best val loss {ckpt['best_val_loss']:.4f})" + (
        ": the run is finished; a larger --max_iters goes on with it" if ckpt['step'] >= max_iters else ''))
    return ckpt['step'], ckpt['best_val_loss'], time.time() - ckpt['elapsed']

def fail(message, code=1):
    print(f"error: {message}", file=sys.stderr) # one line instead of a traceback
    sys.exit(code)

if __name__ == '__main__':
    try:
        main()
    except KeyboardInterrupt: # Ctrl-C or SIGTERM: ckpt.pt holds the last evaluation's step
        again = [sys.argv[0], *(arg for arg in options(sys.argv[1:]) if not arg.startswith('--resume='))]
        resume_with = f"; resume with: python {shlex.join(again)} --resume=True" if out_dir else ''
        fail(f"interrupted{resume_with if os.path.exists(os.path.join(out_dir, 'ckpt.pt')) else ''}", code=130)
    except (OSError, UnicodeDecodeError) as e: # an --input_file or out_dir that can't be read or written
        fail(f"{getattr(e, 'strerror', None) or 'not UTF-8 text'}: {getattr(e, 'filename', None) or input_file}")
    except RuntimeError as e: # out of memory: CUDA's OutOfMemoryError, the CPU's and MPS's
        if 'out of memory' not in str(e) and "can't allocate memory" not in str(e):
            raise
        fail(f"{device} ran out of memory: try a smaller --batch_size (now {batch_size}) or --block_size "
             f"(now {block_size}), or a smaller model (--n_layer={n_layer}, --n_embd={n_embd})")
