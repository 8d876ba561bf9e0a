"""
Step 4, compare: a part beside the lecture's, computed step by step on its own layers and input. Where no
tensor of theirs equals the lecture's next value, the two part: what their code does there is named at its
line, and the walk goes on to the next difference.
"""
import contextlib, re
from typing import NamedTuple

import torch

from checker import explain
from checker.explain import SDPA # PyTorch's attention: the scale, the mask and the softmax in one call
from checker.lecture import ACTIVATIONS, CATALOGUE, FOR_RELU, HINTS, LECTURES, MISSING, STEP, Steps
from checker.load import message
from checker.run import tensors

TOL = 1e-4 # relative: the same math in another order differs by about 1e-6; a mistake, by far more
ALIBI = 'a bias by distance added to the affinities (ALiBi), for a position table'
INSIDE = ('q @ k^T', 'scaled', 'masked', 'softmax', 'masked after') # the steps it makes unseen
AFTER = ('masked', 'softmax', 'ln_f', 'blocks') # a step skipped is shown where what follows takes its input

class Finding(NamedTuple):
    """A 'mistake', the 'video''s way, a 'variant', a 'note' or why it 'cant' be checked, in a part ('': none)."""
    part: str
    kind: str
    words: str
    at: tuple = None

def close(a, b):
    """The same values: the finite ones within TOL, the infinite ones (a mask's -inf) alike."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.shape != b.shape:
        return False
    a, b = a.float(), b.float()
    finite, other = a.isfinite(), b.isfinite()
    if not finite.all() or not other.all(): # (a mask's -inf)
        if not torch.equal(finite, other) or not torch.equal(
            a[~finite].nan_to_num(), b[~finite].nan_to_num()
        ):
            return False
        a, b = a[finite], b[finite]
    return not a.numel() or (a - b).abs().max().item() <= TOL * max(
        1e-6, a.abs().max().item(), b.abs().max().item()
    )

def size(t):
    """The sum and the largest of a tensor's finite values' sizes: close tensors have close sums."""
    t = t.float().nan_to_num(0, 0, 0).abs()
    return t.sum().item(), t.max().item() if t.numel() else 0

def canon(t, B, T):
    """t as (B, T, the rest): (B,nh,T,hs), (B*nh,T,hs), (B,T,nh,hs), (B,T,C) alike; (T,C) as (1,T,C)."""
    if t.dim() >= 3 and t.shape[0] > B and t.shape[0] % B == 0: # the heads in the batch
        t = t.reshape(B, -1, *t.shape[1:])
    t = t if t.dim() >= 2 and t.shape[0] == B else t[None]
    if t.dim() >= 3 and t.shape[1] == 1 and T not in t.shape: # (a mean over the positions, kept: each)
        t = t.expand(t.shape[0], T, *t.shape[2:])
    time = [d for d in range(1, t.dim()) if t.shape[d] == T]
    return t.movedim(time[0], 1).reshape(t.shape[0], T, -1) if time else None

def relayout(c, like, B, T):
    """A tensor as canon gives it, laid out as `like`."""
    where = canon(torch.arange(like.numel()).reshape(like.shape), B, T).reshape(-1)
    out = torch.empty(like.numel(), dtype=c.dtype)
    out[where] = c.reshape(-1)
    return out.reshape(like.shape)

class Theirs:
    """The tensors a part of theirs made, as canon gives them, and those its output is made of."""
    def __init__(self, trace, out, B, T, learner, m):
        self.events, self.B, self.T, self.learner, self.m = trace.events, B, T, learner, m
        self.own, self.used = explain.own_lines(m), trace.leading_to(out)
        self.out = self.canon(out)
        self.found = [(i, c) for i, e in enumerate(self.events) if e.module is None
                      for c in map(self.canon, e.values) if c is not None]
        self.shaped, self.seen = {}, {} # shape: [(event, tensor, size)], to pass most over; what find found
        for i, c in self.found:
            self.shaped.setdefault(c.shape, []).append((i, c, size(c)))
        self.sdpa = next((i for i in sorted(self.used) if self.events[i].name == SDPA), None)
    def canon(self, t):
        return canon(t, self.B, self.T) if isinstance(t, torch.Tensor) and t.dim() else None
    def find(self, value, used=True):
        """The event that made value, in any layout (one the output is made of); kept: walks ask again."""
        key = isinstance(value, torch.Tensor) and (used, value.shape, value.detach().float().numpy().tobytes())
        if key not in self.seen:
            c = self.canon(value)
            shape, (n, top) = (c.shape, size(c)) if c is not None else (None, (0, 0))
            # (what close allows, summed)
            near = lambda m: abs(m[0] - n) <= TOL * c.numel() * max(m[1], top, 1e-6)
            self.seen[key] = next((i for i, t, m in self.shaped.get(shape, ())
                                   if (i in self.used or not used) and near(m) and close(t, c)), None)
        return self.seen[key]
    def after(self, i):
        """The events that take event i's result (-1: the input), of those the output is made of."""
        return [k for k in sorted(self.used) if i in self.events[k].parents]
    def where(self, i):
        """The part's own line that makes event i's result: the call's, or that of the layer that returns it
        (in an nn.Sequential, where that was made)."""
        if i is None or i < 0:
            return None
        t = self.events[i].outs[0]
        # (a Dropout in eval: not)
        returns = lambda w: any(o is t for o in w.outs) and not any(a is t for a in tensors(w.args))
        for w in [w for w in self.events[i:] if w.module not in (None, self.m) and returns(w)]:
            made, child = w.module.__dict__.get('_made_at'), any(w.module is c for c in self.m.children())
            if child and w.at in self.own or made and (not child and made in self.own or w.at is None):
                return w.at if child and w.at else made
        return self.events[i].at
    def called(self, i):
        """The part's own line that calls the layer of theirs whose result event i is (self.blocks(x)); else
        where(i)."""
        t, child = self.events[i].outs[0], lambda w: any(w.module is c for c in self.m.children())
        returns = lambda w: child(w) and w.at in self.own and any(o is t for o in w.outs)
        calls = [w.at for w in self.events[i:] if returns(w)]
        return calls[0] if calls else self.where(i)
    def source(self, i):
        text = self.learner.source(self.where(i)) if self.where(i) else ''
        return text if len(text) <= 70 else text[:67] + '...'

# ------------ the walk

def lecture(compute, lay, x, o, swaps):
    """The lecture's steps for x (None: their layers can't make them so)."""
    steps = Steps(swaps)
    with torch.no_grad(), contextlib.suppress(Exception):
        steps('output', compute(lay, x, o, steps))
        return steps

def parting(steps, theirs):
    """The index of the step after the last their code makes too (F.scaled_dot_product_attention makes those
    it hides); None: the same output; -1: no steps."""
    if steps is None:
        return -1
    names = list(steps.values)[:-1]
    made = [
        theirs.sdpa is not None and n in INSIDE or theirs.find(steps.values[n]) is not None for n in names
    ]
    last = max((i for i, m in enumerate(made) if m), default=-1)
    same = theirs.out is not None and close(theirs.out, theirs.canon(steps.values['output']))
    return None if same and last == len(names) - 1 else last + 1

def walk(kind, lay, x, theirs, context=7):
    """([(kind, words, at)] of what their part does otherwise, step by step; whether that is all; the steps)."""
    compute, o = LECTURES[kind][0], dict(LECTURES[kind][1])
    if kind == 'Block' and context == 4: # the lecture's first Blocks: no residual connections
        o['residual'] = False
    run, swaps, said = lambda o, swaps: lecture(compute, lay, x, o, swaps), {}, []
    for _ in range(6):
        steps = run(o, swaps)
        i = parting(steps, theirs)
        if i is None:
            return said, True, steps
        chosen = best(kind, steps, max(i, 0), o, swaps, theirs, run)
        if chosen is None:
            at = theirs.where(next(iter(replacements(steps, i, theirs)), (None,))[0]) if steps else None
            words = nothing(steps, i, theirs) if steps else cant_run(compute, lay, x, o)
            return said + [sliced(lay, x, theirs) or ('mistake', words, at)], False, steps
        (rank, what, o, swaps), new = chosen
        said += finding(rank, what, steps, new, i, theirs)
    return said, False, steps

def cant_run(compute, lay, x, o):
    """Words for their layers the lecture's steps can't run on, and where they raise."""
    try:
        compute(lay, x, o, Steps())
    except Exception as e:
        return f"the lecture's computation can't run on its layers: {message(e)}"
    return "the lecture's computation can't run on its layers"

def sliced(lay, x, theirs):
    """A head that gets some of x's channels, where the lecture's each read all of x: (kind, words, at)."""
    heads, C = lay.get('heads') or (), x.shape[-1]
    e = next((e for e in theirs.events if any(e.module is h for h in heads) and
              tensors(e.args) and tensors(e.args)[0].shape[-1] < C), None)
    if e is None:
        return None
    width = tensors(e.args)[0].shape[-1]
    return ('mistake', f"each head reads {width} of x's {C} channels, where the lecture's heads each read all of x",
            e.at)

NEEDS = {0: 0, 1: 1, 2: 0, 3: 1} # a step skipped (1) or replaced (3) matches by itself: one more must too

def best(kind, steps, i, o, swaps, theirs, run):
    """The change at step i that takes the two furthest together: ((rank, what, o, swaps), new steps)."""
    defaults, scored = LECTURES[kind][1], []
    tries = [
        (0, e, dict(o, **{e[0]: e[1]}), swaps) for e in CATALOGUE.get(kind, []) if o[e[0]] == defaults[e[0]]
    ]
    for t in tries + (others(steps, i, o, swaps, theirs) if steps else []):
        new = run(*t[2:])
        p = -1 if new is None else parting(new, theirs)
        p = len(new.values) + 1 if p is None else p
        # (a step of theirs, or the next: the mask first, then the scale)
        names = list(new.values) if new else []
        named = [n for n in (t[1][4] or () if not t[0] else ()) if n in names]
        near = [m for n in named for m in names[names.index(n):][:2]]
        shows = new and (t[0] or not t[1][4] or any(theirs.find(new.values.get(n)) is not None for n in near))
        # (the catalogue's, in a value of theirs)
        if p > i + NEEDS[t[0]] + (t[0] == 1 and len(t[1]) > 1) and shows:
            scored.append((p, t, new))
    top = max((p for p, *_ in scored), default=None)
    return min([(t, new) for p, t, new in scored if p == top], key=lambda c: (c[0][0], not hinted(c[0], theirs, steps)),
               default=None)

def others(steps, i, o, swaps, theirs):
    """Changes at step i: a step skipped (or two), a value of theirs in between, or in its place."""
    names, tries = list(steps.values), []
    name, theirs_for = names[min(i, len(names) - 1)], lambda c: lambda v: relayout(c, v, theirs.B, theirs.T)
    skippable = [n for n in names[:i + 2] if n not in swaps and steps.before.get(n) is not None and (
        n in names[i:i + 2] or theirs.sdpa is not None and n in INSIDE)]
    skips = [(n,) for n in skippable]
    if skippable and names[i:i + 2] == skippable[-2:]: # (the two steps at i at once)
        skips.append(tuple(names[i:i + 2]))
    for skip in skips:
        tries.append((1, skip, o, dict(swaps, **dict.fromkeys(skip, 'skip'))))
    if 0 < i < len(names) - 1 and steps.before.get(name) is steps.values[names[i - 1]]:
        tries += [(2, (names[i - 1], event), o, dict(swaps, **{names[i - 1]: theirs_for(c)}))
                  for event, c in replacements(steps, i, theirs, like=names[i - 1])]
    return tries + [(3, (name, event), o, dict(swaps, **{name: theirs_for(c)}))
                    for event, c in (replacements(steps, i, theirs) if name != 'output' else [])]

def replacements(steps, i, theirs, like=None):
    """[(event, canon value)] their code makes from the last step shared, of the size of step like (i)."""
    names = list(steps.values)
    start = theirs.find(steps.values[names[i - 1]]) if i > 0 else -1
    like = theirs.canon(steps.values[names[min(i, len(names) - 1)] if like is None else like])
    found, todo = [], [start] if start is not None else []
    for _ in range(8):
        todo = [k for j in todo for k in theirs.after(j)]
        found += [(k, c) for k in todo for c in map(theirs.canon, theirs.events[k].values)
                  if like is not None and c is not None and c.shape == like.shape]
    if not found and like is not None:
        found = [(k, c) for k, c in theirs.found if k in theirs.used and c.shape == like.shape][:1]
    return list(dict(found).items())

def hinted(t, theirs, steps):
    """Whether their line says which of two readings it is, where both give one number (C = head_size**2)."""
    return not t[0] and t[1][1] in HINTS and bool(re.search(HINTS[t[1][1]], theirs.source(
        theirs.find(steps.values.get('scaled')))))

def finding(rank, what, steps, new, i, theirs):
    """[(kind, words, at)] for the change chosen at step i."""
    if rank == 0: # at the first line of theirs that makes its steps; the other lines named
        made = {theirs.where(theirs.find(new.values[n])) for n in what[4] or () if n in new.values} - {None}
        lines = sorted(made, key=lambda at: at[1]) or [theirs.where(theirs.sdpa)]
        also = ''.join(f" (and {theirs.learner.place(at)})" for at in lines[1:] if at)
        return [(what[2], what[3] + also, lines[0])]
    if rank == 2: # a step of theirs in between
        (name, event), after = what, list(steps.values)[i]
        if after.startswith('relu') and close(new.values[after], new.values[name]): # (sigmoid: ReLU keeps it)
            return [(*activation(after, new.values[after], steps, event, theirs), theirs.where(event))]
        if name == 'scaled' and distance_bias(new.values[name] - steps.values[name]):
            return [('variant', ALIBI, theirs.where(event))]
        if xbow(after, steps, event, theirs, new.values[name]):
            return xbow(after, steps, event, theirs, new.values[name])
        between = theirs.events[event]
        normed = between.name == 'layer_norm' or isinstance(between.module, torch.nn.LayerNorm)
        if after == 'ln_f' and normed: # (LN of LN: the same, rescaled)
            words = (f"`{theirs.source(event)}`: a LayerNorm right before ln_f, two in a row (the video's "
                     "last of blocks and the published ln_f, both kept)")
            return [('variant', words, theirs.where(event))]
        return [('mistake', f"`{theirs.source(event)}` changes {STEP.get(name, name)} before "
                            f"{STEP.get(after, after)}: the lecture has nothing in between", theirs.where(event))]
    if rank == 3: # a value of theirs in the step's place
        name, event = what
        value = relayout(next(c for c in map(theirs.canon, theirs.events[event].values) if c is not None),
                         steps.values[name], theirs.B, theirs.T)
        if name.startswith('relu'):
            return [(*activation(name, value, steps, event, theirs), theirs.where(event))]
        return xbow(name, steps, event, theirs) or [
            ('mistake', described(name, value, steps, event, theirs), theirs.where(event))]
    said = []
    for name in what: # a step skipped: at the line that makes its input (or takes it)
        dropped = theirs.find(new.made[name], used=False)
        made = theirs.sdpa if theirs.sdpa is not None and name in INSIDE else theirs.find(steps.before[name])
        if name in AFTER and made != theirs.sdpa:
            made = next(iter(theirs.after(made) if made is not None else []), None)
        if name in ('ln1', 'ln2'): # shown where the Block's own line takes its input (ln1's: the Block's)
            takers = theirs.after(-1 if made is None else made)
            made = next((k for k in takers if theirs.events[k].at in theirs.own), made)
        if dropped is not None:
            said.append(('mistake', never_used(name, theirs.events[dropped]), theirs.called(dropped)))
        else:
            said.append(
                ('mistake', MISSING.get(name, f"{STEP.get(name, name)} is missing"), theirs.where(made))
            )
    return said

def described(name, value, steps, event, theirs):
    """Words for a value of theirs in a step's place, by a property of it."""
    before = steps.before.get(name)
    if name == 'scaled' and isinstance(before, torch.Tensor):
        keep = before.abs() > 1e-3
        factor, hs = (value[keep] / before[keep]).median().item(), steps.values['q'].shape[-1]
        n = round(factor ** -2) if factor > 0 else 0 # (the tokens, a setting)
        root = ''
        if 1 < n < 10 ** 5 and abs(n ** -0.5 / factor - 1) < 1e-3: # the root of a number: which one
            root = f" = {n}**-0.5" + (" (T, the number of tokens)" if n == theirs.T else '')
        return f"the affinities scaled by {factor:.3g}{root}, not by head_size**-0.5 = {hs**-0.5:.3g} (head_size {hs})"
    future = (
        value[..., torch.ones(value.shape[-1], value.shape[-1]).triu(1).bool()] if name == 'masked' else None
    )
    if future is not None and future.isfinite().any() and (future == 0).all():
        return "the future filled with 0, not -inf, before the softmax: it still gets weight"
    if future is not None and future.isfinite().any():
        return "the mask lets the future through: it must fill the future (above the diagonal) with -inf"
    # (what the branch is added to)
    added = value - steps.before[name] if name in ('x + sa', 'x + ffwd') else None
    ln, branch = ('ln1', 'the attention') if name == 'x + sa' else ('ln2', 'the feed-forward')
    if added is not None and close(added, steps.values.get(ln)): # (ln(x) + sa(ln(x)))
        return (f"`{theirs.source(event)}` adds {branch}'s output to {ln}(x), not to x: the residual stream "
                "itself goes through the LayerNorm")
    if name == 'x + ffwd' and {'sa', 'x + sa'} <= set(steps.values): # (x + ffwd(ln2(x + sa(...))): sa lost)
        if close(added, steps.values['x + sa'] - steps.values['sa']):
            return (
                f"`{theirs.source(event)}` adds the feed-forward's output to the Block's input x, not to x + "
                "sa(ln1(x)): the attention's output never reaches the residual stream"
            )
    return f"`{theirs.source(event)}` where the lecture has {STEP.get(name, name)}"

def xbow(name, steps, event, theirs, fed=None):
    """[(kind, words, at)] where the input of the event in step name's place (or fed, before it) is the
    average of each position and those before it (the math trick's xbow, in a model): at the line that
    averages."""
    names, events = list(steps.values), theirs.events
    if fed is None:
        fed = (tensors(events[event].args) or [None])[0] if event is not None and event >= 0 else None
        event = next((p for p in events[event].parents if any(o is fed for o in events[p].outs)), event)
    x = steps.values[names[names.index(name) - 1]] if name in names and names.index(name) else None
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or not close(fed, x.cumsum(1) / torch.arange(
            1, x.shape[1] + 1)[:, None]):
        return []
    return [('mistake', f"`{theirs.source(event)}` makes each position the average of itself and those "
             "before it (xbow, the lecture's math trick, which its models don't use): the lecture has "
             f"{STEP.get(name, name)} of x itself", theirs.where(event))]

ACTIVATION_NAMES = {name.lower(): name for name in torch.nn.modules.activation.__all__}

def activation(name, value, steps, event, theirs):
    """(kind, words) for what their code makes in the ReLU's place: another nonlinearity of each number alone
    is a variant; a linear function, or one that mixes the numbers, is a mistake."""
    x, y = steps.before[name].reshape(-1).double(), value.reshape(-1).double()
    fit = torch.linalg.lstsq(torch.stack([x, torch.ones_like(x)], 1), y[:, None]).solution
    if (y - fit[0] * x - fit[1]).abs().max() <= TOL * max(y.abs().max().item(), 1e-6):
        linear = f"`{theirs.source(event)}` is linear in the first Linear's output"
        return 'mistake', f"{MISSING['relu']}: {linear}"
    ordered = y[x.argsort()]
    if (ordered.diff().abs().mean() > 0.05 * y.std()).item(): # not one function of each number alone
        return 'mistake', described(name, value, steps, event, theirs)
    e = theirs.events[event]
    name = type(e.module).__name__ if e.module is not None else ACTIVATION_NAMES.get(e.name.replace('_', ''))
    name = name or f"an activation of your own, `{theirs.source(event)}`,"
    return 'variant', f"{name} {FOR_RELU}"

def inline_activation(act):
    """[a variant] for the activation of a feed-forward written in the Block itself, where it is not ReLU."""
    x = torch.linspace(-3, 3, 61)
    with torch.no_grad():
        y = act(x)
    name = next((k for k, f in ACTIVATIONS.items() if torch.allclose(f(x), y, atol=1e-4)), None)
    words = next((e[3] for e in CATALOGUE['FeedForward'] if e[1] == name), f"{type(act).__name__} {FOR_RELU}")
    return [] if name == 'relu' else [('variant', words, act.__dict__.get('_made_at'))]

def distance_bias(added):
    """Whether what is added to the affinities is the same for every example and falls with the distance to
    the key, alike at each distance: a position bias (ALiBi)."""
    T = added.shape[-1]
    rows, d = added[0].reshape(-1, T, T), torch.arange(T)[:, None] - torch.arange(T) # (a head's, each)
    return torch.allclose(added, added[:1].expand_as(added), atol=1e-5) and bool((rows[:, d > 0] < 0).all()) and \
        all(torch.allclose(r[d == k], r[d == k][:1].expand(T - k), atol=1e-5) for r in rows for k in (1, 2))

def never_used(name, e):
    if e.name == 'masked_fill':
        return (
            "masked_fill's result is never assigned (it returns a new tensor): the future talks to the past; "
            "write wei = wei.masked_fill(...)"
        )
    return f"{STEP.get(name, name)} is made, but the result is never used"

def doubled(i, theirs):
    """(the event, the layer's name) where the layer that made event i's result is applied again to it."""
    t = theirs.events[i].outs[0]
    made = [w.module for w in theirs.events if w.module is not None and any(o is t for o in w.outs)]
    layer = made[0] if made else None
    again = [k for k, w in enumerate(theirs.events) if layer is not None and w.module is layer and
             any(a is t for a in tensors(w.args))]
    k = again[0] if again else None
    name = next((f'`{n}`' for n, c in theirs.m.named_modules() if c is layer), 'a layer')
    return (k, name) if k is not None else None

def nothing(steps, i, theirs):
    """Words for a step their code makes nothing like."""
    names = list(steps.values)
    name = names[min(i, len(names) - 1)]
    dropped = theirs.find(steps.values[name], used=False)
    again = doubled(dropped, theirs) if name == 'output' and dropped is not None else None
    if again: # the last layer once more on its own result
        return f"`{theirs.source(again[0])}` applies {again[1]} a second time: the lecture applies it once"
    if name == 'output' and dropped is not None: # what it returns is made from the lecture's output
        return f"`{theirs.source(next(iter(theirs.after(dropped)), None))}` comes after {STEP[names[-2]]}, which " \
               "the lecture returns as it is"
    if dropped is not None:
        return never_used(name, theirs.events[dropped])
    instead = next(iter(replacements(steps, i, theirs)), (None,))[0]
    return f"{STEP.get(name, name)}: your code computes `{theirs.source(instead)}` instead, and what follows " \
           "differs" if instead is not None else f"{STEP.get(name, name)}: your code makes nothing like it"
