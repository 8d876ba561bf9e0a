"""
The bigram language model of "Let's build GPT: from scratch, in code, spelled out" (part 1):
each character predicts the next one from a lookup table, with no context at all.

    python bigram.py                     # about 2.49 val loss in a few seconds on a CPU
    python bigram.py --max_iters=10000   # any hyperparameter below can be set as --key=value

Importing this file does nothing.
"""
import ast
import hashlib
import math
import os
import re
import sys
import tempfile

import torch
import torch.nn as nn
from torch.nn import functional as F

# hyperparameters
batch_size = 32 # how many independent sequences will we process in parallel?
block_size = 8 # what is the maximum context length for predictions?
max_iters = 3000 # how many optimizer steps to take
eval_interval = 300 # evaluate train and val loss every this many steps
learning_rate = 1e-2 # AdamW's step size: high, for a tiny model
device = 'cuda' if torch.cuda.is_available() else 'mps' if torch.backends.mps.is_available() else 'cpu'
         # an NVIDIA GPU (cuda) if there is one, else an Apple GPU (mps), else the CPU
eval_iters = 200 # how many batches each loss estimate averages over
seed = 1337 # for torch.manual_seed: the initial weights and the batches
input_file = '' # a text file of your own to train on (lecture EX2); '' is Tiny Shakespeare
# ------------
config_keys = [k for k, v in globals().items()
               if not k.startswith('_') and isinstance(v, (bool, int, float, str))]

DATA_URL = 'https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt'
DATA_SHA256 = '86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed'
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
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}.{hint}")
    except UnicodeDecodeError as e:
        fail(f"cannot read {path}: it is not UTF-8 text "
             f"(byte {e.object[e.start]:#04x} at offset {e.start:,}).{hint}")
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

# ------------
# data loading and evaluation

def get_batch(data):
    """A batch of inputs x and targets y (y is x shifted by one) from random offsets into data."""
    # one gather picks the same characters as the lecture's Python loop of slices, faster
    ix = torch.randint(len(data) - block_size, (batch_size,))
    t = torch.arange(block_size)
    x = data[ix[:, None] + t]     # (B,T)
    y = data[ix[:, None] + t + 1] # (B,T)
    return x.to(device), y.to(device)


@torch.no_grad()
def estimate_loss(model, splits):
    """Mean loss over eval_iters batches of each split: far less noisy than one batch's loss."""
    out = {}
    model.eval()
    for split, data in splits.items():
        losses = torch.zeros(eval_iters, device=device)
        for k in range(eval_iters):
            X, Y = get_batch(data)
            logits, loss = model(X, Y)
            losses[k] = loss # stays on the device: one sync per split instead of one per batch
        out[split] = losses.mean().item()
    model.train()
    return out

# ------------
# super simple bigram model

class BigramLanguageModel(nn.Module):

    def __init__(self, vocab_size):
        super().__init__()
        # each token directly reads off the logits for the next token from a lookup table
        self.token_embedding_table = nn.Embedding(vocab_size, vocab_size)

    def forward(self, idx, targets=None):
        # idx and targets are both (B,T) tensors of integers
        logits = self.token_embedding_table(idx) # (B,T,C)

        if targets is None:
            loss = None
        else:
            # cross_entropy wants the channels second: flatten to (B*T,C) against (B*T)
            B, T, C = logits.shape
            logits = logits.view(B*T, C)
            targets = targets.view(B*T)
            loss = F.cross_entropy(logits, targets)

        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens):
        """Extend idx (B,T) by max_new_tokens sampled tokens."""
        for _ in range(max_new_tokens):
            # get the predictions (a bigram only needs the last token, but this stays general)
            logits, loss = self(idx)
            logits = logits[:, -1, :] # focus only on the last time step: (B,C)
            probs = F.softmax(logits, dim=-1) # (B,C)
            idx_next = torch.multinomial(probs, num_samples=1) # (B,1)
            idx = torch.cat((idx, idx_next), dim=1) # (B,T+1)
        return idx


def main():
    if hasattr(sys.stdout, 'reconfigure'): # a character the output's encoding lacks (Windows: cp1252)
        sys.stdout.reconfigure(errors='replace') # prints as '?', not as a UnicodeEncodeError
    apply_overrides(sys.argv[1:], globals())
    check_settings()
    print(f"device: {device}")
    print('config: ' + ' '.join(f'{k}={globals()[k]}' for k in config_keys))
    torch.manual_seed(seed)

    path = input_file or INPUT_PATH # a text of your own, or Tiny Shakespeare (downloaded once)
    text = read_text(path, url=None if input_file else DATA_URL)
    # here are all the unique characters that occur in this text
    chars = sorted(list(set(text)))
    vocab_size = len(chars)
    encode, decode = make_codec(chars)
    # train and val splits: the first 90% trains, the rest tells us how well we generalize
    data = torch.tensor(encode(text), dtype=torch.long)
    n = int(0.9 * len(data))
    train_data, val_data = data[:n], data[n:]
    if len(val_data) <= block_size:
        fail(f"{path} is too short: its val split (the last 10%) has {len(val_data)} characters, and "
             f"block_size={block_size} needs {block_size + 1}: use a longer text or a smaller --block_size")

    model = BigramLanguageModel(vocab_size)
    m = model.to(device)

    # create a PyTorch optimizer
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    for step in range(max_iters + 1):

        # every once in a while evaluate the loss on train and val sets, and after the last step
        if step % eval_interval == 0 or step == max_iters:
            losses = estimate_loss(model, {'train': train_data, 'val': val_data})
            print(f"step {step}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
            diverged = [v for v in losses.values() if not math.isfinite(v)]
            if diverged:
                fail(f"training diverged at step {step} (a loss of {diverged[0]}): try a lower "
                     f"--learning_rate (now {learning_rate})")
        if step == max_iters:
            break

        # sample a batch of data
        xb, yb = get_batch(train_data)

        # evaluate the loss
        logits, loss = model(xb, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    # generate from the model
    model.eval()
    context = torch.zeros((1, 1), dtype=torch.long, device=device) # token 0: '\n' in Tiny Shakespeare
    print(decode(m.generate(context, max_new_tokens=500)[0].tolist()))

# ------------
# not in the lecture: the command line and its checks, the download, and one-line
# errors instead of tracebacks

# what each setting at the top takes, so that an edit there of another kind (max_iters = 3e3) is a
# one-line error at the start, as it is on the command line
KINDS = dict(batch_size=int, block_size=int, max_iters=int, eval_interval=int, learning_rate=float,
             device=str, eval_iters=int, seed=int, input_file=str)
KIND_NAMES = {int: 'an int (a whole number, written without . or e)', float: 'a number', str: 'a string',
              bool: 'True or False'}


def apply_overrides(argv, namespace):
    """Set top-level hyperparameters from --key=value arguments, each of the kind in KINDS (a
    setting you add at the top: its default's kind)."""
    valid = 'valid keys: ' + ', '.join(f'--{k}' for k in config_keys)
    kinds = {k: KINDS.get(k, type(namespace[k])) for k in config_keys}
    for key in config_keys: # the values at the top of this file, which a learner may have edited
        value = as_kind(namespace[key], kinds[key])
        if value is None:
            fail(f"{key} = {namespace[key]!r} at the top of bigram.py must be {KIND_NAMES[kinds[key]]}",
                 code=2)
        namespace[key] = value
    options = [arg for arg in argv if arg not in ('-h', '--help')]
    for arg in options:
        key, eq, raw = arg[2:].partition('=') if arg.startswith('--') else ('', '', '')
        if key not in config_keys or not eq:
            fail(f"unknown option {arg!r} (use --key=value); {valid}", code=2)
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw # a bare string, e.g. --device=cpu
        if kinds[key] is str and type(value) in (int, float):
            value = raw # --out_dir=2024: a number is a fine name for a folder or a file
        if isinstance(value, str):
            value = os.path.expanduser(value) # --input_file=~/my.txt: the shell leaves a ~ after = alone
        value = as_kind(value, kinds[key])
        if value is None:
            fail(f"--{key} expects {KIND_NAMES[kinds[key]]}, got {raw!r}; {valid}", code=2)
        namespace[key] = value
    if len(options) < len(argv): # --help: each setting with its value (the default, or as the
        # other options set it) and the comment beside it above, or on the line below it
        with open(__file__, encoding='utf-8') as f:
            notes = {key: f'{beside} {below}'.strip() for key, beside, below in
                     re.findall(r'^(\w+) = [^#\n]*(?:# (.*))?(?:\n[ \t]+# (.*))?$', f.read(), re.M)}
        lines = [f'  --{k}={namespace[k]!r}' for k in config_keys]
        width = max(map(len, lines)) + 2
        print(__doc__.strip() + '\n')
        if options:
            print(f"The values below are those of {' '.join(options)}:")
        print('\n'.join((line.ljust(width) + notes.get(k, '')).rstrip()
                        for line, k in zip(lines, config_keys)))
        sys.stdout.flush() # a full disk or a closed pipe under it is caught as for any output
        sys.exit(0)


def check_settings():
    """A value out of range, or a device this machine lacks, is a one-line error here, before the
    run, not a traceback from inside it."""
    for key in ('batch_size', 'block_size', 'eval_interval', 'eval_iters'):
        if globals()[key] < 1:
            fail(f"--{key} must be at least 1, got {globals()[key]}")
    if max_iters < 0:
        fail(f"--max_iters must be at least 0, got {max_iters}")
    if learning_rate <= 0:
        fail(f"--learning_rate must be > 0, got {learning_rate}")
    if not -2**63 <= seed < 2**64: # what torch.manual_seed takes
        fail(f"--seed must be from -2**63 to 2**64 - 1, got {seed}")
    try: # a number made there and read back: fails for --device=cuda on a machine without one,
         # a backend whose plugin is missing (hpu), and meta, whose tensors have a shape but no data
        torch.zeros(1).to(device).item()
    except Exception as e:
        fail(f"cannot use device {device!r}: {str(e).splitlines()[0]}")


def as_kind(value, kind):
    """value if it is of kind, as a float if kind is float and it is an int;
    else None. True is not an int here, nor is 5.0."""
    if kind is float and type(value) is int:
        return float(value)
    return value if type(value) is kind else None


def fail(message, code=1):
    """Stop with a one-line error instead of a traceback."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


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
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix='.tmp-')
    except OSError as e:
        fail(f"cannot write {path}: {e.strerror}; {hint}")
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask) # mkstemp makes it private; give it a normal file's mode
        with os.fdopen(fd, 'wb') as f:
            f.write(r.content)
        os.replace(tmp, path) # atomic: path is either absent or complete
    except BaseException as e:
        os.remove(tmp)
        if isinstance(e, OSError): # a full disk: no partial file, and a one-line error
            fail(f"cannot write {path}: {e.strerror}; {hint}")
        raise
    print(f"saved {len(r.content):,} bytes to {path} (sha256 checked)")


if __name__ == '__main__':
    try:
        main()
        sys.stdout.flush() # here, so that a closed pipe is caught below rather than at exit
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError: # whoever read the output stopped reading (| head): no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except OSError as e: # e.g. the disk filled up under the output (python bigram.py > file)
        fail(f"{e.strerror}: {e.filename}" if e.filename else e.strerror or str(e))
    except RuntimeError as e: # PyTorch's out of memory: a batch too large for the device
        if not re.search("out of memory|can't allocate memory", str(e)):
            raise
        fail(f"{device} ran out of memory; try a smaller --batch_size (now {batch_size}) or "
             f"--block_size (now {block_size})")
    except MemoryError: # Python's own objects filled the machine's memory: a text too long to encode
        hint = (f"; --input_file={input_file} may be too long to encode: try a shorter text"
                if input_file else '')
        fail(f"out of memory (Python's MemoryError): this machine's memory is full{hint}")
