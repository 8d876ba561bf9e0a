"""
Step 5, explaining: what a part of the learner's does, measured while it runs, at the line of theirs that
does it: (topic, kind, words, at), topic the catalogue's option it explains, kind 'mistake', 'video', 'variant'.
"""
import contextlib

import torch
import torch.nn as nn

from checker.build import code_lines, safe_modules
from checker.lecture import HEAD, out_of
from checker.run import MATMULS, Trace, call

def own_lines(m):
    """The (file, line)s of the code of m's class and of the learner's classes it derives from."""
    return set().union(*(code_lines(c) for c in type(m).__mro__ if not c.__module__.startswith('torch')))

def attention(events, x, m):
    """The attention weights a part makes: the softmax's dimension, what the future gets and why, the scale."""
    found, mine = [], own_lines(m)
    for i, e in enumerate(events):
        w = e.out
        if e.name != 'softmax' or e.at not in mine or w.dim() < 2 or w.shape[-1] != w.shape[-2] or w.shape[-1] < 2:
            continue
        dim = e.kwargs.get('dim', e.args[1] if len(e.args) > 1 else None)
        if dim is not None and dim % w.dim() != w.dim() - 1:
            over = 'the batch' if dim % w.dim() == 0 else 'the queries' if dim % w.dim() == w.dim() - 2 else 'the heads'
            found.append(('dim', 'mistake', f"softmax over dim={dim} ({over}); over the keys it is dim=-1", e.at))
        if w.detach()[..., torch.ones(w.shape[-1], w.shape[-1], dtype=torch.bool).triu(1)].abs().max() > 1e-6:
            found.append(('mask', 'mistake', *why_the_future(events, i, e, mine)))
        found += scale(events, i, e, x, mine)
    return found

def why_the_future(events, i, softmax, mine):
    """Why the future gets weight: (words, at)."""
    fills = [(k, f) for k, f in enumerate(events) if f.name.startswith(('masked_fill', 'where')) and f.at in mine]
    dropped = [f for k, f in fills if f.name == 'masked_fill' and k < i and # (its result used by no later call)
               not any(t is f.out for e in events[k + 1:] for t in e.tensors())]
    if dropped:
        return "masked_fill's result is never assigned (it returns a new tensor): the future talks to the past; " \
               "write wei = wei.masked_fill(...)", dropped[0].at
    zero = [f for k, f in fills if f.kwargs.get('value', f.args[2] if len(f.args) > 2 else None) == 0]
    if fills:
        return ("the mask applied after the softmax: the rows no longer sum to 1" if fills[-1][0] > i else "the future "
                "filled with 0, not -inf, before the softmax: it still gets weight" if zero else "the mask lets the "
                "future through: it must fill the future (above the diagonal) with -inf"), fills[-1][1].at
    return "no causal mask: nothing hides the future before the softmax, so the future talks to the past", softmax.at

def scale(events, i, softmax, x, mine):
    """The factor between q @ k^T (the last matmul of its shape before the softmax) and what the softmax gets."""
    scores = softmax.args[0]
    k, matmul = next(((k, e) for k, e in list(enumerate(events[:i]))[::-1] if e.name in MATMULS and
                      e.out.shape == scores.shape), (0, None))
    keep = torch.isfinite(scores) & (matmul.value.abs() > 1e-3) if matmul else None # (as it came out of the matmul)
    if matmul is None or not keep.any():
        return []
    factor, hs, C = (scores[keep] / matmul.value[keep]).median().item(), matmul.tensors()[0].shape[-1], x.shape[-1]
    at = next((e.at for e in events[k:i] if e.name in ('mul', 'rmul', 'truediv', 'div') and e.at in mine), matmul.at)
    said = {e[1]: e[2:4] for e in HEAD if e[0] == 'scale'} # (kind, words), as the catalogue says them
    named = {hs**-0.5: None, C**-0.5: said['C'], 1.0: said['none'], hs**0.5: said['times'], 1 / hs: said['full']}
    said = next((v for k, v in named.items() if abs(factor - k) <= 1e-3 * k), (
        'mistake', f"the scores scaled by {factor:.3g}, not by head_size**-0.5 = {hs**-0.5:.3g} (head_size {hs})"))
    return [('scale', *said, at)] if said else []

def registered(m, events):
    """A module that runs in m but that m doesn't register (a plain list, made in forward): it never trains."""
    inside, mine = {id(s) for s in safe_modules(m)}, own_lines(m)
    lost = [e.module for e in events if e.module is not None and id(e.module) not in inside]
    for module in [s for s in dict.fromkeys(lost) if not any(s is not o and s in safe_modules(o) for o in lost)]:
        holds = lambda v: isinstance(v, (list, tuple, dict)) and any(
            c is module for c in (v.values() if isinstance(v, dict) else v))
        held, at = next((n for n, v in vars(m).items() if holds(v)), None), module.__dict__.get('_made_at')
        if held:
            return [('registered', 'mistake', f"`{held}` is a plain Python {type(vars(m)[held]).__name__}: the "
                     "modules in it are not registered, so model.parameters() misses them and they never train "
                     "(nn.ModuleList registers them)", at)]
        if at in mine and not any(holds(v) for s in safe_modules(m) for v in vars(s).values()):
            return [('registered', 'mistake', f"a {type(module).__name__} made while it runs, not in __init__: it is "
                                              "new at every call and never trains", at)]
    return []

def twice(m, events, ctx):
    """A layer of m's own that runs twice in one forward (value for the query, proj applied twice)."""
    mine, calls = own_lines(m), [{}]
    for e in events:
        if e.module is m: # one forward done
            calls.append({})
        elif e.module is not None and e.at in mine and any(e.module is c for c in m.children()) and \
                list(e.module.parameters()) and ctx.role_of(e.module) not in ('Head', 'Block'): # (a Dropout may)
            calls[-1].setdefault(id(e.module), []).append(e)
    for runs in [runs for forward in calls for runs in forward.values() if len(runs) > 1][:1]:
        name = next(n for n, c in m.named_children() if c is runs[0].module)
        return [('twice', 'mistake', f"`{name}` runs {len(runs)} times (lines "
                                     f"{' and '.join(str(r.at[1]) for r in runs)}); each layer of the lecture's runs "
                                     "once", runs[-1].at)]
    return []

def heads_width(lay, x):
    """Multi-head attention: n_head heads of n_embd // n_head, together as wide as x."""
    n, C = len(lay['heads']), x.shape[-1]
    wide = sum(getattr(getattr(h, 'value', None), 'out_features', 0) for h in lay['heads'])
    return [('heads', 'mistake', f"its {n} heads together are {wide} wide, not n_embd = {C}: each is n_embd // "
             f"n_head = {C // n} wide", lay['heads'][0].__dict__.get('_made_at'))] if (
        wide and n > 1 and wide // n != C // n) else [] # (n_embd 256 in 6 heads: 6 of 42, as the lecture's code)

def residual(block, lay, x, learner):
    """Dropout on the residual stream: attention and feed-forward giving 0, the Block keeps x only in eval mode."""
    zeros = lambda out: torch.zeros_like(out) if isinstance(out, torch.Tensor) else type(out)(zeros(o) for o in out)
    if not all(isinstance(p, nn.Module) for p in (lay['sa'], lay['ffwd'])):
        return []
    hooks, outs = [p.register_forward_hook(lambda p, args, out: zeros(out)) for p in (lay['sa'], lay['ffwd'])], []
    try:
        for train in (False, True):
            torch.manual_seed(0)
            with torch.no_grad(), Trace(learner) as t:
                outs.append(out_of(block.train(train)(x)))
    finally:
        block.eval()
        for h in hooks:
            h.remove()
    return [('dropout', 'mistake', "dropout on the residual stream: in training it drops x itself; the lecture drops "
             "each branch's output before the add", next((e.at for e in t.events if e.name == 'dropout'), None))] if (
        torch.allclose(outs[0], x, atol=1e-6) and not torch.allclose(outs[1], x, atol=1e-6)) else [] # (x: eval only)

def repeated(blocks):
    """Blocks that are one module repeated ([Block()] * n): they share their weights."""
    n = len({id(b) for b in blocks})
    return [('blocks', 'mistake', f"the {len(blocks)} Blocks are {n} repeated ([Block(...)] * n): they share their "
             "weights; build each (for _ in range(n))", blocks[0].__dict__.get('_made_at'))] if n < len(blocks) else []

def extra(lay, events, ctx):
    """What the model runs beside its Blocks, outside the lecture's order (tok + pos, Blocks, ln_f, lm_head)."""
    calls = [e for e in events if e.module is not None]
    last = max((i for i, e in enumerate(calls) if any(e.module is b for b in lay['body'] if b not in lay['extra'])),
               default=0)
    return [('extra', 'mistake', f"a {ctx.role_of(c)} ({type(c).__name__}) runs {'after' if i > last else 'before'} "
             "the Blocks, outside any residual: the lecture's model goes blocks, ln_f, lm_head", calls[i].at)
            for c in lay['extra'] for i in [next((i for i, e in enumerate(calls) if e.module is c), 0)]]

def eval_mode(m, args, kwargs, learner):
    """In eval mode, the same input gives the same output: no dropout acts."""
    with torch.no_grad(), Trace(learner) as t:
        torch.manual_seed(0)
        one, two = call(m.eval(), args, kwargs), call(m, args, kwargs)
    at = next((e.at for e in t.events if e.name == 'dropout' and e.kwargs.get(
        'training', e.args[2] if len(e.args) > 2 else True)), None) # (F.dropout trains by default)
    return [('eval', 'mistake', "in eval mode its dropout still acts (F.dropout trains by default: pass "
             "training=self.training, or use nn.Dropout)", at)] if (
        at and isinstance(one, torch.Tensor) and not torch.equal(one.nan_to_num(), two.nan_to_num())) else []

def unused(m, args, kwargs, ctx):
    """What m's output never depends on: a child (blocks never applied), else m's own layers."""
    theirs = {id(p) for s in m.modules() if s is not m and (type(s) in ctx.parts or id(s) in ctx.parts)
              for p in s.parameters()} # (the parts inside m, each checked on its own)
    m.zero_grad(set_to_none=True)
    with contextlib.suppress(Exception): # (none named where it can't run backward)
        out = call(m, args, kwargs).float().nan_to_num()
        (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(1))).sum().backward()
        idle = [n for n, c in m.named_children() if {p.grad for p in c.parameters()} == {None}] # (no gradient reaches)
        names = [n.rsplit('.', 1)[0] for n, p in m.named_parameters() if id(p) not in theirs and p.grad is None]
        return [f"`{n}`" for n in dict.fromkeys(idle + [n for n in names if n.split('.')[0] not in idle])]
    return []
