"""The bigram model of "Let's build GPT" (part 1); `python bigram.py --max_iters 500` sets any setting below."""
import difflib
import hashlib
import os
import sys

import torch
import torch.nn as nn
from torch.nn import functional as F

# hyperparameters
batch_size = 32 # how many independent sequences will we process in parallel?
block_size = 8 # what is the maximum context length for predictions?
max_iters = 3000
eval_interval = 300
learning_rate = 1e-2
device = 'cuda' if torch.cuda.is_available() else 'mps' if torch.backends.mps.is_available() else 'cpu'
eval_iters = 200
# ------------
config_keys = [k for k, v in globals().items() if not k.startswith('_') and isinstance(v, (int, float, str))]
DATA_URL = 'https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt'
DATA_SHA256 = '86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed'
INPUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'input.txt')

def read_text():
    """Tiny Shakespeare: downloaded on first use, checked against its sha256, written whole."""
    if os.path.exists(INPUT_PATH):
        with open(INPUT_PATH, 'rb') as f:
            raw = f.read()
    else:
        print(f"downloading Tiny Shakespeare from {DATA_URL}")
        try:
            import requests
            raw = requests.get(DATA_URL, timeout=30).content
        except Exception as e:
            fail(f"could not download it ({type(e).__name__}): fetch {DATA_URL} by hand to {INPUT_PATH}")
    if hashlib.sha256(raw).hexdigest() != DATA_SHA256:
        fail(f"not Tiny Shakespeare (its sha256 differs): delete {INPUT_PATH}, or fetch {DATA_URL} by hand")
    if not os.path.exists(INPUT_PATH):
        with open(INPUT_PATH + '.tmp', 'wb') as f: # then renamed: never half-written
            f.write(raw)
        os.replace(INPUT_PATH + '.tmp', INPUT_PATH)
    return raw.decode()

def get_batch(data): # inputs x and targets y (x shifted by one) at batch_size random offsets
    ix = torch.randint(len(data) - block_size, (batch_size,))
    t = torch.arange(block_size) # one gather picks the same characters as the lecture's loop of slices
    return data[ix[:, None] + t].to(device), data[ix[:, None] + t + 1].to(device) # (B,T), (B,T)

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
            losses[k] = loss # stays on the device: one wait for it per split, not one per batch
        out[split] = losses.mean().item()
    model.train()
    return out

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
            B, T, C = logits.shape
            logits = logits.view(B*T, C)
            targets = targets.view(B*T)
            loss = F.cross_entropy(logits, targets)

        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens):
        for _ in range(max_new_tokens):
            logits, loss = self(idx) # get the predictions
            logits = logits[:, -1, :] # focus only on the last time step: (B,C)
            probs = F.softmax(logits, dim=-1) # (B,C)
            idx_next = torch.multinomial(probs, num_samples=1) # (B,1)
            idx = torch.cat((idx, idx_next), dim=1) # (B,T+1)
        return idx

def fail(message, code=1):
    print(f"error: {message}", file=sys.stderr) # one line instead of a traceback
    sys.exit(code)

if __name__ == '__main__':
    if '-h' in sys.argv or '--help' in sys.argv: # the settings, with their defaults
        print(__doc__, *(f"  --{k}={globals()[k]!r}" for k in config_keys), sep='\n')
        sys.exit(0)
    args = [] # --key=value, or --key value, of the default's type (an int may stand for a float)
    for arg in sys.argv[1:]:
        glue = args and args[-1].startswith('--') and '=' not in args[-1] and not arg.startswith('--')
        args.append(args.pop() + '=' + arg if glue else arg)
    for arg in args:
        key, eq, raw = arg.removeprefix('--').partition('=')
        if not arg.startswith('--') or not eq or key not in config_keys:
            close = difflib.get_close_matches(key, config_keys, n=1)
            fail(f"unknown option {arg!r}: " + (f"give it a value, as --{key}=VALUE" if key in config_keys else
                 f"did you mean --{close[0]}?" if close else f"the settings are {', '.join(config_keys)}"), 2)
        try:
            globals()[key] = type(globals()[key])(raw)
        except ValueError:
            fail(f"--{key} must be {type(globals()[key]).__name__}, got {raw!r}", 2)
    for keys, ok, must in [('batch_size block_size eval_interval eval_iters', lambda v: v >= 1, 'at least 1'),
                           ('max_iters', lambda v: v >= 0, 'at least 0'),
                           ('learning_rate', lambda v: 0 < v < float('inf'), 'a finite number above 0')]:
        for key in keys.split(): # each setting's range: a bad value stops here, before any work
            if not ok(globals()[key]):
                fail(f"--{key}={globals()[key]!r} must be {must}", 2)
    try: # a number made there and read back: a device that this machine or PyTorch lacks fails here
        torch.zeros(1, device=device).item()
    except Exception as e:
        fail(f"cannot use device {device!r}: {str(e).splitlines()[0]}")
    print(f"device: {device}\nconfig: " + ' '.join(f'{k}={globals()[k]}' for k in config_keys))
    torch.manual_seed(1337)

    text = read_text()
    chars = sorted(list(set(text))) # here are all the unique characters that occur in this text
    vocab_size = len(chars)
    stoi = {ch: i for i, ch in enumerate(chars)} # create a mapping from characters to integers
    itos = {i: ch for i, ch in enumerate(chars)}
    encode = lambda s: [stoi[c] for c in s] # encoder: take a string, output a list of integers
    decode = lambda l: ''.join([itos[i] for i in l]) # decoder: take a list of integers, output a string
    data = torch.tensor(encode(text), dtype=torch.long)
    n = int(0.9*len(data)) # first 90% will be train, rest val
    train_data, val_data = data[:n], data[n:]
    if block_size >= len(val_data): # each batch is block_size + 1 characters of a split
        fail(f"--block_size={block_size} must be below {len(val_data)}, the length of the val split", 2)

    model = BigramLanguageModel(vocab_size)
    m = model.to(device)
    # create a PyTorch optimizer
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    for step in range(max_iters):

        # every once in a while evaluate the loss on train and val sets
        if step % eval_interval == 0:
            losses = estimate_loss(model, {'train': train_data, 'val': val_data})
            print(f"step {step}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")

        # sample a batch of data
        xb, yb = get_batch(train_data)

        # evaluate the loss
        logits, loss = model(xb, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    # generate from the model
    context = torch.zeros((1, 1), dtype=torch.long, device=device)
    print(decode(m.generate(context, max_new_tokens=500)[0].tolist()))
