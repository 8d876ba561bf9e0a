"""
Step 4, a part checked: the walk beside the lecture's steps (compare.py), what its layers say, what is measured
as it runs.
"""
import ast, contextlib, dis, inspect

import torch

from checker import explain
from checker.build import meanings
from checker.compare import Theirs, inline_activation, lecture, parting, walk
from checker.explain import SDPA
from checker.lecture import ATTENTIONS, LECTURES, STEP, STRUCTURE, Steps, out_of
from checker.roles import LAYOUTS, layers, places, stage_of, traced_layouts, width
from checker.load import Missing, message
from checker.run import Trace, call, cause_of

# where the lecture drops out
DROPPED = {'Head': ('softmax', 'masked after'), 'fused attention': ('softmax', 'masked after', 'proj'),
           'MultiHeadAttention': ('proj',), 'FeedForward': ('linear 2', 'linear 3')}

def shorter(m, x, rest, kwargs, learner):
    """[a mistake] where an attention checked at block_size (its model's only length) fails on fewer
    tokens."""
    try:
        with torch.no_grad():
            m.eval()(x[:, :-1], *rest, **kwargs)
        return []
    except Exception as e:
        code = getattr(type(m).forward, '__code__', None)
        loads = [i for i in dis.get_instructions(code) if i.opname == 'LOAD_GLOBAL'] if code else []
        read = {i.argval: i.positions.lineno for i in loads}
        sizes = [n for n in ('T', 'B', 'C') if n in read and type(type(m).forward.__globals__.get(n)) is int]
        at = (code.co_filename, read[sizes[0]]) if sizes else None
        if sizes: # (B, T, C = x.shape never written: the file's own T, from a cell before)
            shown = ', '.join(f"{n} = {type(m).forward.__globals__[n]}" for n in sizes)
            words = (f"its forward reads {', '.join(sizes)} from the file's globals ({shown}), not from its "
                     f"input (B, T, C = x.shape): on {x.shape[1] - 1} tokens, {message(e)}")
        else:
            words = (f"it runs on block_size = {x.shape[1]} tokens only, and generate needs fewer "
                     f"(cut the mask to T, tril[:T, :T]); on {x.shape[1] - 1}, {message(e)}")
        return [('mistake', words, at)] if learner.raised(e) else []

def check_part(label, m, kind, ctx, context, learner):
    """(status, [(kind, words, at)], stage, fix(instance): the lecture's part on its layers, or None)."""
    (x, *rest), kwargs = ctx.example(m)
    try:
        with torch.no_grad(), Trace(learner) as t:
            given = x.clone() # (their code may change its input in place)
            t.made[id(given)] = -1
            raw = call(m.eval(), [given, *rest], kwargs) if kind == 'the model' else m.eval()(given, *rest, **kwargs)
    except Exception as e:
        if f'[{type(m).__name__}] is missing the required "forward"' in str(e): # (def foward: PyTorch's runs)
            return 'differs', explain.forward_inside(type(m)) or [
                ('mistake', f"it has no forward (misspelt?): {message(e)}", None)], 7, None
        if isinstance(e, Missing) or not learner.raised(e):
            who = f"your {label}" if isinstance(e, Missing) else 'running it, the checker failed:'
            return 'cant', [('cant', f"can't be checked: {who} {message(e)}", None)], 7, None
        if id(m) not in ctx.inputs and id(m) not in ctx.held: # built alone: the guess may be what failed
            return 'cant', [('cant', f"can't be checked alone: no model of yours holds it, and built as the "
                             f"checker guessed, it raised on {tuple(x.shape)}: {message(e)}", None)], 7, None
        unrun = '' # (where a model ran through and never gave it an input: it never runs it)
        if id(m) not in ctx.inputs and ctx.ran:
            unrun = 'your model holds it but never runs it; run, it '
        widths = [] # (heads too narrow for proj: why it raises)
        with contextlib.suppress(Exception):
            if kind == 'MultiHeadAttention':
                widths = explain.heads_width(LAYOUTS[kind](m, ctx)[0], x, m, learner, True)
        # (the model that holds it: checked with it)
        fix = lectures(kind, ctx) if kind != 'the model' else None
        words = cause_of(e) or f"{unrun}raised on {tuple(x.shape)}: {message(e)}"
        named = explain.not_a_layer(m, e, learner) or explain.never_made(m, e, learner)
        named = named or [('mistake', words, None)]
        return 'differs', widths + explain.batched(t.events, x, m, learner) + named, 7, fix
    events = t.events
    said = explain.swapped(m, learner) + explain.registered(m, events, lambda s: ctx.role_of(s) is not None)
    said += explain.plain_weights(m, events, learner, lambda s: ctx.role_of(s) is not None)
    said += explain.eval_mode(m, [x, *rest], kwargs, learner)
    said += explain.reseeds(m, [x, *rest], kwargs, learner)
    try:
        layouts = LAYOUTS[kind](m, ctx)
    except LookupError as e:
        return 'differs', said or [('mistake', f"your {label} {e.args[0]}", None)], 7, None
    theirs = Theirs(t, out_of(raw), x.shape[0], x.shape[1], learner, m)
    if kind == 'fused attention': # (q, k and v as their code splits the one Linear)
        layouts = traced_layouts(m, layouts, events, *x.shape[:2]) + layouts
    random = any('eval mode' in f[1] or 'while it runs' in f[1] for f in said) # (nothing to compare with)
    never = explain.unused(m, [x, *rest], kwargs, ctx)
    code = '' # (its forward as Python reads it, read once: what it calls)
    with contextlib.suppress(SyntaxError, AttributeError):
        code = ast.unparse(learner.parsed(type(m).forward.__code__)) if never else ''
    for lay in layouts if kind == 'the model' else []: # (a position table its forward never uses: none)
        for n in [n for n, c in m.named_children() if c is lay['pos'] and f'`{n}`' in never]:
            lay['pos'], lay['unused pos'] = None, f"self.{n}(" in code
    wrong, named, stand = explain.reused(m, events, never, learner)
    # (the lecture's steps with the layer they applied in its place: the next difference)
    if stand is not None:
        stand[0].forward = stand[1].forward
    compute, o = LECTURES[kind]
    as_it_is = lambda lay: parting(lecture(compute, lay, x, dict(o), {}), theirs) is None
    # (of many head counts, one that is the
    # lecture's as it is: the others not walked)
    same = [lay for lay in layouts if len(layouts) > 2 and as_it_is(lay)]
    walked = same[:1] or layouts
    try:
        walks = [] if random else [(walk(kind, lay, x, theirs, context), lay) for lay in walked]
    finally:
        if stand is not None:
            del stand[0].forward
    (found, ok, steps), lay = max(walks, key=lambda w: (w[0][1], -sum(f[0] == 'mistake' for f in w[0][0]))) \
        if walks else (([], True, None), layouts[0])
    stage = stage_of(m, kind, lay, ctx)
    said += shorter(m, x, rest, kwargs, learner) if kind in ATTENTIONS and ctx.T is None else []
    if kind == 'MultiHeadAttention' and not explain.miscalled(m, learner): # (else named at that call)
        said += explain.heads_width(lay, x, m, learner)
    if kind == 'the model':
        said += explain.repeated([b for b in lay['body'] if b not in lay['extra']])
    if kind == 'Block':
        said += explain.shared_norm(events, ctx)
    shown = lambda step: (
        theirs.where(theirs.find(steps.values[step])) if steps and step in steps.values else None
    )
    layered = structure(kind, m, lay, stage, max(context, stage), ctx, shown, steps)
    if lay.get('merge') is not None: # (proj learns either order)
        said.append(('variant', "the heads joined channel by channel, where the lecture sets them side by side "
                                "(torch.cat): the same to a proj that learns the order", shown('merged')))
    said += inline_activation(lay['act']) if kind == 'Block' and lay['act'] is not None else []
    said += found + [(*STRUCTURE[k], at) for k, at in layered]
    ctx.positions |= kind in ATTENTIONS and bool(places(m, ctx)) # (rotary, ALiBi: the model's positions)
    said += dropouts(kind, steps, theirs, events, m, context, ctx, lay) if ok and steps is not None else []
    said, never = wrong + said, [n for n in never if n not in named]
    skipped = [] # (where the steps run, the walk says it)
    if kind == 'the model' and steps is None:
        holds_blocks = lambda c: any(ctx.role_of(s) == 'Block' for s in c.modules())
        skipped = [(n, c) for n, c in m.named_children() if f'`{n}`' in never and holds_blocks(c)]
    for n, c in skipped:
        words = f"its forward never applies `{n}`: the lecture applies the Blocks between the embeddings and lm_head"
        said.append(('mistake', words, c.__dict__.get('_made_at')))
    never = [n for n in never if n not in [f'`{n}`' for n, _ in skipped]]
    called = [n for n in never if f"self.{n.strip('`')}(" in code]
    never = [n for n in never if n not in called]
    # (a layer it calls, whose result it drops: named as that)
    if called and not any('the result is never used' in f[1] for f in said):
        verb, it = ('runs', 'it') if len(called) == 1 else ('run', 'them')
        said.append(('note', f"your {', '.join(called)} {verb}, but the output never depends on {it}", None))
    if never:
        verb = 'is' if len(never) == 1 else 'are'
        said.append(('note', f"your {', '.join(never)} {verb} defined but never used", None))
    if not any(f[0] == 'mistake' for f in said):
        return 'ok', said, stage, None
    if not isinstance(raw, torch.Tensor) or kind == 'the model':
        return 'differs', said, stage, None
    return 'differs', said, stage, lectures(kind, ctx, next(i for i, each in enumerate(layouts) if each is lay))

def lectures(kind, ctx, which=0):
    """fix(instance): its forward as the lecture computes it on its layers (layout which), where it can be."""
    compute, defaults = LECTURES[kind]
    def fix(s):
        lay = LAYOUTS[kind](s, ctx)[which]
        compute(lay, ctx.example(s)[0][0], defaults, Steps())
        return lambda *a, **k: compute(lay, a[0], defaults, Steps())
    return fix

WEI = (('softmax', 'masked after'), 'the attention weights, wei')
# (no proj: the heads)
PROJ, LAST = (('cat', 'merged', 'proj'), 'proj'), (('linear 2', 'linear 3'), 'the last Linear')
KEPT = {'Head': [WEI], 'fused attention': [WEI, PROJ], 'MultiHeadAttention': [PROJ], 'FeedForward': [LAST]}
# (where the lecture drops out, at stage 7)

def dropouts(kind, steps, theirs, events, m, stage, ctx, lay):
    """Dropout where the lecture has none (on the residual stream: a mistake), none where it has one
    (in a model that drops out); F.scaled_dot_product_attention."""
    mine, found = explain.own_lines(m), []
    drops = [e for e in events if e.name == 'dropout' or type(e.module).__name__ == 'Dropout']
    dropped = {theirs.find(e.args[0], used=False) for e in drops if kind in KEPT and stage == 7} - {None}
    for group, words in KEPT.get(kind, []) if stage == 7 else []:
        last = next((n for n in group[::-1] if n in steps.values), None)
        made = theirs.find(steps.values[last], used=False) if last else None
        if theirs.sdpa is not None and group is WEI[0]: # (its wei unseen: dropout_p given or not)
            e = theirs.events[theirs.sdpa]
            made = theirs.sdpa if 'dropout_p' not in e.kwargs and len(e.args) < 5 else None
        if made is not None and made not in dropped:
            # (no proj)
            heads = last in ('cat', 'merged') or last == 'proj' and steps.swaps.get('proj') == 'skip'
            words = 'the heads' if heads else words
            words = f"no dropout after {words} (the lecture drops out there)"
            found.append(('variant', words, theirs.where(made)))
    inside = {id(s) for c in m.children() if {id(c), type(c)} & ctx.parts for s in c.modules()}
    nested, last = set(), None # (a part's own Dropout, and its F.dropout just before: checked there)
    for j, e in enumerate(events):
        last = j if e.name == 'dropout' else last
        if id(e.module) in inside and isinstance(e.module, torch.nn.Dropout):
            nested |= {j, j if last is None else last}
    lectures = DROPPED.get(kind, ())
    if lay.get('act') is not None: # (a feed-forward in the Block itself: its dropout the lecture's)
        lectures += ('ffwd',)
    chosen = {} # what it drops out: the Dropout module that does (or F.dropout)
    for e in [e for i, e in enumerate(events) if e in drops and e.at in mine and i not in nested]:
        made = theirs.find(e.args[0], used=False)
        if made not in chosen or e.module is not None:
            chosen[made] = e
    for made, e in chosen.items():
        step = next(
            (n for n, v in steps.values.items() if made is not None and theirs.find(v, False) == made), None
        )
        at = e.at # (a Dropout inside an nn.Sequential: the line that made it)
        if any(isinstance(s, torch.nn.Sequential) and any(e.module is c for c in s.children()) for s in m.modules()):
            at = e.module.__dict__.get('_made_at') or e.at
        if step in ('x + sa', 'x + ffwd'):
            found.append(('mistake', 'dropout on the residual stream: in training it drops x itself; the lecture '
                                     "drops each branch's output before the add", at))
        elif step and step not in lectures:
            found.append(('variant', f"dropout on {STEP.get(step, step)} (the lecture has none there)", at))
    sdpa = next((e for e in events if e.name == SDPA and e.at in mine), None)
    if sdpa is not None:
        found.append(('variant', 'F.scaled_dot_product_attention: the affinities, their scale, the mask, the '
                                 'softmax and wei @ v in one call', sdpa.at))
    return found

BIASED = {'MultiHeadAttention': 'proj no bias', 'fused attention': 'proj no bias',
          'FeedForward': 'ffwd no bias', 'the model': 'lm_head no bias'}

def structure(kind, m, lay, stage, context, ctx, shown, steps):
    """[(STRUCTURE's key, at)]: what a part's layers say, for its context's stage."""
    made = lambda layer: layer.__dict__.get('_made_at') if layer is not None else None
    attention = kind in ('MultiHeadAttention', 'fused attention')
    found = []
    if attention and lay['proj'] is None and context >= 5:
        found.append(('no proj', shown('cat') or shown('merged')))
    own = lay.get('linears') or [lay.get('proj' if attention else 'head')] # (where the lecture's have a bias)
    unbiased = [layer for layer in own if isinstance(layer, torch.nn.Linear) and layer.bias is None]
    if kind in BIASED and unbiased:
        found.append((BIASED[kind], made(unbiased[0])))
    norms = [*lay.get('norms', ()), lay.get('final')] # (the Block's ln1 and ln2, the model's ln_f)
    plain = [n for n in norms if isinstance(n, torch.nn.LayerNorm) and n.weight is not None
             and n.bias is None]
    if plain:
        found.append(('norm no bias', made(plain[0])))
    fixed = [n for n in norms if isinstance(n, torch.nn.LayerNorm) and n.weight is None]
    if fixed:
        found.append(('norm no weights', made(fixed[0])))
    if kind == 'FeedForward':
        first = lay['linears'][0]
        if len(lay['linears']) == 1 and context >= 5:
            found.append(('one linear', made(first)))
        C, inner = first.in_features, lay['linears'][-1].in_features
        glu = first.out_features == 2 * inner # (a gate and its values from one Linear)
        llama = abs(inner - 8 * C / 3) <= max(1, C / 16) # (a GLU's 8C/3: the weights of 4C with two Linears)
        wide = first.out_features == 4 * C or glu and (inner == 4 * C or llama)
        set_by = False # (FeedForward(d_model, hidden_dim): its width set by its caller)
        with contextlib.suppress(TypeError, ValueError):
            set_by = 'ffwd_size' in meanings(inspect.signature(type(m)).parameters).values()
        if len(lay['linears']) == 2 and not wide:
            set_by = set_by or 'ffwd_size' in ctx.settings.found
            found.append(('set width' if set_by else 'not 4x', made(first)))
    if kind == 'Block':
        sa = lay['sa'] if isinstance(lay['sa'], torch.nn.Module) else None
        head = sa is not None and ctx.role_of(sa) == 'Head' and [c for _, c in layers(sa, torch.nn.Linear)]
        if stage < 6 and context >= 6:
            found.append(('no norms', shown('sa')))
        if head and len(head) >= 2 and all(c.out_features == c.in_features for c in head):
            found.append(('one head', made(sa)))
    if kind == 'Head' and steps and lay['qkv'](steps.values['q'].new_zeros(1, 1, width(m)))[2] is None:
        found.append(('x for v', shown('wei @ v')) if shown('wei @ v') else ('no value', None))
    if kind in ATTENTIONS: # (a cache: past_kv, kv_cache, layer_past)
        if any(w in p.lower() for p in inspect.signature(m.forward).parameters for w in ('cache', 'past')):
            found.append(('kv cache', None))
    if kind in ('Head', 'fused attention'):
        own = [c for _, c in layers(m, torch.nn.Linear)]
        qkv = own[:3] if kind == 'Head' else own[:1]
        if any(c.bias is not None for c in qkv):
            found.append(('qkv bias', None))
        if any(c.out_features == 3 * c.in_features for c in own):
            found.append(('fused qkv', made(own[0])))
        elif kind == 'fused attention' and lay['n_head'] > 1:
            found.append(('heads batched', made(own[0])))
    if kind == 'fused attention' and lay['n_head'] == 1 and lay['proj'] is not None and id(m) in ctx.listed:
        found.append(('head proj', shown('output')))
    if kind in ('Block', 'the model') and any(type(c).__name__ == 'RMSNorm' for c in m.children()):
        found.append(('rmsnorm', None))
    norms = [c for c in m.children() if isinstance(c, torch.nn.LayerNorm)]
    wide = [c for c in norms if c.eps > 1e-3] # (nn.LayerNorm(C, dropout))
    if kind in ('Block', 'the model') and wide:
        found.append(('eps', made(wide[0])))
    if kind == 'the model':
        found += [(k, None) for k in lay['structure']]
        if lay['final'] is None and stage >= 6:
            found.append(('no ln_f', shown('logits')))
        if lay['final'] is not None and stage < 6:
            found.append(('early ln_f', made(lay['final'])))
        # (the video adds lm_head first, then positions)
        # (a table it looks up, its result dropped: no rotary or ALiBi for it)
        if lay['pos'] is None and not lay['bigram'] and stage > 1:
            rotary = ctx.positions and not lay.get('unused pos')
            found.append(('positions', None) if rotary else ('no positions', shown('tok')))
    return found
