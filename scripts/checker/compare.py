"""
Step 4, compare: a learner's part beside the lecture's computation on its own layers and the input its model
gives it; where they differ, the catalogue's changes, alone and in pairs, and what it does (explain.py).
"""
import torch
import torch.nn as nn

from checker import explain
from checker.lecture import LAYOUTS, LECTURES, STAGES, STRUCTURE, layers, out_of, search, stage_of
from checker.load import Missing, message
from checker.run import MATMULS, Trace, call

OUTPUT = {'dim', 'mask', 'scale'} # what a part's output shows, and the catalogue explains
SDPA = 'scaled_dot_product_attention' # PyTorch's attention: the scale, the mask and the softmax in one call

def locate(anchor, events, m, lay):
    """Where a catalogued change shows: an op of the part's own code, a layer's call, or where it is made."""
    theirs = set().union(*(explain.own_lines(s) for s in m.modules() if s is not m)) # (the parts inside it)
    ops = [e for e in events if e.module is None and e.at not in theirs] # (its code, and what it calls)
    first = lambda *names: next((e.at for e in ops if e.name in names), None)
    last = lambda *names: next((e.at for e in ops[::-1] if e.name in names), None)
    if anchor in ('sa', 'ffwd', 'tok', 'pos', 'head', 'ln'):
        target = lay['norms'][0] if anchor == 'ln' else lay.get(anchor)
        return next((e.at for e in events if e.module is target and target is not None), None)
    if anchor in ('linear', 'sa made'):
        return (lay['linears'][0] if anchor == 'linear' else lay['sa']).__dict__.get('_made_at')
    return {'scores': lambda: first(*MATMULS, SDPA), 'mask': lambda: first('masked_fill', 'where', 'softmax', SDPA),
            'softmax': lambda: first('softmax', SDPA), 'values': lambda: last(*MATMULS), 'cat': lambda: first('cat'),
            'split': lambda: first('view', 'reshape', 'transpose'), 'merge': lambda: last('view', 'reshape'),
            'mean': lambda: first('mean')}.get(anchor, lambda: None)()

def structure(kind, m, lay, stage, context, ctx):
    """What a part's layers say, where its output can't: STRUCTURE's keys, for the stage of its context."""
    found = ['no proj'] * (kind in ('MultiHeadAttention', 'fused attention') and lay['proj'] is None and context >= 5)
    if kind == 'FeedForward':
        found += ['one linear'] * (len(lay['linears']) == 1 and context >= 5)
        wide = len(lay['linears']) == 2 and lay['linears'][0].out_features != 4 * lay['linears'][0].in_features
        found += ['not 4x' if 'ffwd_size' not in ctx.settings.found else 'set width'] * wide
    if kind == 'Block':
        head = isinstance(lay['sa'], nn.Module) and ctx.role_of(lay['sa']) == 'Head' and \
            [c for _, c in layers(lay['sa'], nn.Linear)] # its key, query and value: each n_embd wide?
        found += ['no norms'] * (stage < 6 and context >= 6)
        found += ['one head'] * bool(head and len(head) >= 2 and all(c.out_features == c.in_features for c in head))
    if kind in ('Head', 'fused attention'):
        found += ['qkv bias'] * any(c.bias is not None for _, c in layers(m, nn.Linear)[:3 if kind == 'Head' else 1])
    if kind == 'the model':
        found += lay['structure'] + ['no ln_f'] * (lay['final'] is None and stage >= 6)
        if lay['pos'] is None and not lay['bigram']:
            found.append('rotary' if any(type(s) in ctx.rotary for s in m.modules()) else 'no positions')
    return found

def check_part(label, m, kind, ctx, context, learner):
    """(its line; 'ok', 'differs' or 'cant'; fix(instance): the lecture's computation on its layers, or None)."""
    args, kwargs = ctx.example(m)
    try:
        with torch.no_grad(), Trace(learner) as t:
            raw = call(m.eval(), args, kwargs) if kind == 'the model' else m.eval()(*args, **kwargs)
    except Exception as e:
        if isinstance(e, Missing) or not learner.raised(e):
            return f"can't be checked: {'your ' + label if isinstance(e, Missing) else 'running it, the checker'} " \
                   f"{'' if isinstance(e, Missing) else 'failed: '}{message(e)}", 'cant', None
        if id(m) not in ctx.inputs: # built alone with guessed sizes: the guess may be what failed
            return f"can't be checked alone: no model of yours holds it, and built as the checker guessed, it raised " \
                   f"on {tuple(args[0].shape)}: {message(e)}", 'cant', None
        return f"raised on {tuple(args[0].shape)}: {message(e)}", 'differs', None
    x, mine, events = args[0], out_of(raw), t.events
    measured = explain.registered(m, events) + explain.twice(m, events, ctx) + \
        explain.eval_mode(m, args, kwargs, learner)
    try:
        layouts = LAYOUTS[kind](m, ctx)
    except LookupError as e: # what was measured says why, else its layers
        return verdict(measured, 7, [], False, learner)[0] if measured else f"differs: your {label} {e.args[0]}", \
            'differs', None
    changes, lay = search(kind, layouts, mine, x)
    ctx.rotary |= {type(m)} if any(e[0] == 'rotary' for e in changes or ()) else set()
    stage = stage_of(m, kind, lay, ctx)
    measured += explain.attention(events, x, m) if kind in ('Head', 'fused attention') else \
        explain.heads_width(lay, x) if kind == 'MultiHeadAttention' else \
        explain.residual(m, lay, x, learner) if kind == 'Block' else \
        explain.repeated([b for b in lay['body'] if b not in lay['extra']]) + explain.extra(lay, events, ctx) \
        if kind == 'the model' else []
    topics = {e[0] for e in changes or ()} # where both name one, what was measured says it, if at a line
    measured = [f for f in measured if f[0] not in OUTPUT or changes is None or f[0] in topics and f[3]]
    said = [f for f in measured if f[0] in topics] + [(e[0], e[2], e[3], locate(e[4], events, m, lay))
                                                      for e in changes or () if e[0] not in {f[0] for f in measured}]
    said += [f for f in measured if f[0] not in topics]
    said += [(k, *STRUCTURE[k][:2], locate(STRUCTURE[k][2], events, m, lay))
             for k in structure(kind, m, lay, stage, max(context, stage), ctx)]
    differs = changes is None and not any(f[1] == 'mistake' for f in said)
    line, ok = verdict(said, stage, explain.unused(m, args, kwargs, ctx), differs, learner)
    if ok or not isinstance(raw, torch.Tensor) or kind == 'the model':
        return line, 'ok' if ok else 'differs', None
    (compute, defaults), which = LECTURES[kind], next(i for i, each in enumerate(layouts) if each is lay)
    def fix(s): # s's forward as the lecture computes it on s's layers, where it can be computed
        lay = LAYOUTS[kind](s, ctx)[which]
        compute(lay, ctx.example(s)[0][0], defaults)
        return lambda *a, **k: compute(lay, a[0], defaults)
    return line, 'differs', fix

def verdict(said, stage, never, differs, learner):
    """The words for a part: its mistakes at their lines, else matches (at its stage, as the video, a variant)."""
    at = lambda f: f"{learner.place(f[3])}: " if f[3] else ''
    mistakes = list(dict.fromkeys(at(f) + f[2] for f in sorted(said, key=lambda f: f[3] and f[3][1] or 1e9)
                                  if f[1] == 'mistake'))
    tail = f"; your {', '.join(never)} {'is' if len(never) == 1 else 'are'} defined but never used" if never else ''
    if differs:
        return "differs: none of the catalogued mistakes, alone or in pairs, gives its output, and nothing " \
               "measured explains it" + tail, False
    if mistakes:
        return "differs: " + '; and '.join(mistakes) + tail, False
    line = 'matches' + (f" stage {stage} ({', '.join(STAGES[stage])})" if stage < 7 else '')
    line += ', as in the video' * any(f[1] == 'video' for f in said)
    notes = list(dict.fromkeys(f[2] if f[1] == 'video' else f"a variant, {f[2]}" for f in said))
    return line + (': ' + '; '.join(notes) if notes else '') + tail, True
