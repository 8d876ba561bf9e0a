"""
Step 3, running: a model run once, what each module inside receives kept; the torch calls a part makes,
each at the learner's line; forward and generate called by what their parameters mean; what must hold.
"""
import contextlib, inspect, math

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

from checker.build import safe_modules
from checker.lecture import norm, out_of, vocab
from checker.load import message

TRACED = {'softmax', 'masked_fill', 'masked_fill_', 'matmul', 'bmm', 'einsum', 'mul', 'rmul', 'truediv', 'div',
          'cat', 'view', 'reshape', 'transpose', 'dropout', 'scaled_dot_product_attention', 'mean', 'where'}
MATMULS = ('matmul', 'bmm', 'einsum')

class Event:
    """A torch call ('softmax', ...) or a module call ('module'), at the learner's line that made it."""
    def __init__(self, name, at, args, kwargs, out, module=None):
        self.name, self.at, self.args, self.kwargs, self.out, self.module = name, at, args, kwargs, out, module
        self.value = out.detach().clone() if name in MATMULS else None # (before an in-place op changes it)
    def tensors(self):
        return [t for t in (*self.args, *self.kwargs.values()) if isinstance(t, torch.Tensor)]

class Trace(TorchFunctionMode):
    """The torch calls and module calls made inside `with Trace(learner) as t:`, in t.events."""
    def __init__(self, learner):
        super().__init__()
        self.learner, self.events = learner, []
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if getattr(func, '__name__', '').strip('_') in TRACED:
            self.events.append(Event(func.__name__.strip('_'), self.learner.line(), args, kwargs or {}, out))
        return out
    def __enter__(self):
        self.hook = nn.modules.module.register_module_forward_hook(
            lambda m, args, out: self.events.append(Event('module', self.learner.line(), args, {}, out, m)))
        return super().__enter__()
    def __exit__(self, *exc):
        self.hook.remove()
        return super().__exit__(*exc)

def capture(m, ctx):
    """Run a model on its tokens once, in eval mode, and keep in ctx.inputs what each module inside receives."""
    keep, x = lambda s, args, kwargs: ctx.inputs.setdefault(id(s), (args, kwargs)), None
    hooks = [s.register_forward_pre_hook(keep, with_kwargs=True) for s in safe_modules(m)]
    with contextlib.suppress(Exception), torch.no_grad(): # (a model that fails: its own line says why, later)
        (x, *_), kwargs = ctx.example(m)
        logits_of(m.eval(), x) if x.dtype == torch.long else m(x, **kwargs)
    for h in hooks:
        h.remove()
    if x is not None and x.dtype == torch.long: # a model's input: its tokens, not the targets logits_of passed
        ctx.inputs[id(m)] = (x,), {}

TARGETS = {norm(n) for n in 'targets target y labels label tgt targ yb ys target_ids'.split()}

def targets_of(m):
    """The name of the parameter of m.forward that takes the targets, or None."""
    return next((p.name for p in list(inspect.signature(m.forward).parameters.values())[1:]
                 if norm(p.name) in TARGETS), None)

def logits_of(m, idx):
    """(B,T,vocab) logits; with targets where it gives fewer without (nanoGPT); (B,vocab,T) turned back."""
    targets, params = targets_of(m), inspect.signature(m.forward).parameters
    out = out_of(m(idx, **{targets: idx}) if targets and params[targets].default is params[targets].empty else m(idx))
    full = lambda out: isinstance(out, torch.Tensor) and out.numel() == idx.numel() * vocab(m)
    if not full(out) and targets:
        out = out_of(m(idx, **{targets: idx}))
    if full(out) and out.dim() == 3 and out.shape[1:] == (vocab(m), idx.shape[1]) != out.shape[1:][::-1]:
        out = out.transpose(1, 2)
    return out.reshape(*idx.shape, -1) if full(out) else out

def call(m, args, kwargs):
    return logits_of(m, args[0]) if args[0].dtype == torch.long and not kwargs else out_of(m(*args, **kwargs))

IDX = {norm(n) for n in 'idx context x tokens input_ids inputs input ids prompt start start_tokens seq sequence '
                        'indices token_ids cond idx_cond prefix src context_tokens'.split()}
COUNT = ('new', 'len', 'num', 'max', 'count', 'step', 'token', 'char', 'many') # words in a count's name

def generated(m, idx):
    """None where m.generate runs from idx, else what it raised: called by what its parameters mean (idx, 2 new
    tokens, the CPU, the rest their defaults); a first parameter by no known name, idx, else the count."""
    errors = []
    for first_is_idx in (True, False):
        kwargs, params = {}, inspect.signature(m.generate).parameters.values()
        try:
            for i, p in enumerate(p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)):
                name = norm(p.name)
                counts = name == 'n' or any(w in name for w in COUNT) and name not in IDX
                if name in IDX or i == 0 and p.default is p.empty and not counts and first_is_idx:
                    kwargs[p.name], first_is_idx = idx, False
                elif counts or p.annotation is int and p.default is p.empty:
                    kwargs[p.name] = 2
                elif name == 'device':
                    kwargs[p.name] = 'cpu'
                elif p.default is p.empty:
                    raise TypeError(f"generate's parameter {p.name} means nothing the checker knows")
            m.generate(**kwargs)
            return None
        except Exception as e:
            errors.append(e)
    return errors[0]

def invariants(m, T, learner):
    """([what fails of: the past never hears the future, batch rows never talk, generate goes past block_size
    and from one token, the loss at init near ln(vocab)], the loss at init)."""
    V, g = vocab(m), torch.Generator().manual_seed(0)
    idx, targets = torch.randint(V, (2, T), generator=g), torch.randint(V, (2, T), generator=g)
    later, other = idx.clone(), idx.clone()
    later[:, T // 2:], other[1] = (later[:, T // 2:] + 1) % V, (other[1] + 1) % V
    problems, loss, failed = [], None, {}
    try:
        with torch.no_grad():
            logits = logits_of(m.eval(), idx)
            problems += ["a future token changes an earlier output"] * (
                not torch.allclose(logits_of(m, later)[:, :T // 2], logits[:, :T // 2], atol=1e-5))
            problems += ["one example in a batch changes another's output"] * (
                not torch.allclose(logits_of(m, other)[0], logits[0], atol=1e-5))
            if targets_of(m):
                out = m(idx, **{targets_of(m): targets}) # (logits, loss), {'loss': ...}, or the loss alone
                loss = out.get('loss') if isinstance(out, dict) else out[1] if isinstance(out, (tuple, list)) else out
            for start, what in ((idx[:1], 'past block_size'), (idx[:1, :1], 'from one token')):
                e = generated(m, start) if hasattr(m, 'generate') else None
                if e is not None and learner.raised(e): # (the checker's call failing is not their mistake)
                    crop = ' (crop idx to the last block_size)' * ('out of range' in str(e) and start.shape[1] > 1)
                    failed.setdefault(message(e), []).append(what + crop)
    except Exception as e: # the model itself fails: its own line says where
        return [f"running it raised {message(e)}"], None
    problems += [f"generate fails {' and '.join(dict.fromkeys(whats))}: {said}" for said, whats in failed.items()]
    loss = loss if isinstance(loss, torch.Tensor) and loss.numel() == 1 else None
    if loss is not None and not math.log(V) - 0.1 < loss.item() < math.log(V) + 1:
        problems.append(f"its loss at init is {loss.item():.2f}, not near ln {V} = {math.log(V):.2f} (the lecture's "
                        "4.2 to 4.9)")
    return problems, loss
