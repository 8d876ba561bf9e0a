"""
What a module of the learner's is, whatever its name, and how its layers map onto the lecture's: its role (by
its layers and by what it does), the ways its layers may stand for the lecture's (LAYOUTS), and its stage.
"""
import contextlib, functools, inspect, itertools, math, re, weakref

import torch
import torch.nn as nn

from checker.lecture import ATTENTIONS, LAYER, MEANING, SEQUENCES, Steps, mha, norm, out_of

layers = lambda m, kind: [(n, c) for n, c in m.named_children() if isinstance(c, kind)]
n_heads = lambda m: next(
    (v for k, v in vars(m).items() if MEANING.get(norm(k)) == 'n_head' and type(v) is int), None
)
VOCABS = {} # id(model) -> (a weak reference to it, its vocabulary's size): asked at every call of the model

def vocab(m):
    """The vocabulary's size: the rows of the token table (the Embedding as large as a Linear's output: lm_head's),
    else of the first Embedding."""
    ref, size = VOCABS.get(id(m), (None, None))
    if ref is None or ref() is not m:
        tables = [e.num_embeddings for e in m.modules() if isinstance(e, nn.Embedding)]
        outs = {s.out_features for s in m.modules() if isinstance(s, nn.Linear)}
        size = next((n for n in tables if n in outs), tables[0])
        VOCABS[id(m)] = weakref.ref(m), size
    return size
has = lambda m, kind: any(isinstance(s, kind) for s in m.modules())

class Context:
    """What the parts share: settings, roles, each module's input, the parts checked, whether an attention
    places the tokens (RoPE, ALiBi); the batch and the context length they are checked at."""
    def __init__(self, settings):
        self.settings, self.memo, self.kinds, self.inputs, self.parts = settings, {}, {}, {}, set()
        self.positions = False
        self.B, self.T, self.held = 2, None, set() # held: the modules inside a model
        self.listed = set() # the modules in an nn.ModuleList (the heads of a MultiHeadAttention)
        self.ran = set() # the models that ran through
    def role_of(self, m):
        if id(m) not in self.memo:
            self.memo[id(m)] = None # (a module inside itself; one the checker can't make sense of)
            shapes = [(type(s), [p.shape for p in s._parameters.values() if p is not None])
                      for s in m.modules()]
            plain = [(k, v) for k, v in vars(m).items() if type(v) in (int, float, str, bool)]
            alike = type(m), repr(shapes), repr(plain)
            with contextlib.suppress(Exception): # (the 16 heads of 24 Blocks alike: one found for all)
                self.memo[id(m)] = self.kinds[alike] if alike in self.kinds else find_role(m, self)
                self.kinds[alike] = self.memo[id(m)]
        return self.memo[id(m)]
    def example(self, m):
        """(args, kwargs) of the shape m's model gave it, else guessed; new numbers (a NaN upstream stays)."""
        g, shape = torch.Generator().manual_seed(0), [] if has(m, nn.Embedding) else [width(m)]
        T = block_size(m, self.settings) # (a part no model gives an input: the models' length, where its mask
        if self.T: # is long enough, else one of its own)
            T = self.T if self.T <= T else context_length(m, self.settings)
        (x, *rest), kwargs = self.inputs.get(id(m)) or ((torch.zeros(self.B, T, *shape),), {})
        x = torch.randn(x.shape, generator=g) if x.dim() == 3 else torch.randint(vocab(m), x.shape, generator=g)
        return (x, *rest), kwargs
    def call(self, m, x):
        """m's output for x, with what else its model gives it (a rotary table)."""
        (_, *rest), kwargs = self.inputs.get(id(m), ((None,), {}))
        return out_of(m(x, *rest, **kwargs))

@functools.lru_cache(maxsize=256)
def remade(cls):
    """Whether a class's forward registers its buffers again (a mask as long as each input)."""
    with contextlib.suppress(OSError, TypeError):
        return 'register_buffer(' in inspect.getsource(cls.forward)
    return False

def block_size(m, settings, cap=256):
    """The context length a part works at: its mask's size (not one forward makes again at each length), or
    its position table's (at most cap)."""
    sizes = [b.shape[-1] for s in m.modules() if not remade(type(s)) for b in s.buffers(recurse=False)
             if b.dim() >= 2 and b.shape[-1] == b.shape[-2] > 1]
    embeddings = [e for e in m.modules() if isinstance(e, nn.Embedding)]
    if embeddings: # a model: the rows of its position Embedding (not the one lm_head maps to), or table
        C, outs = embeddings[0].embedding_dim, {
            c.out_features for c in m.modules() if isinstance(c, nn.Linear)
        }
        sizes += ([e.num_embeddings for e in embeddings if e.num_embeddings not in outs] or
                  [e.num_embeddings for e in embeddings[1:]]) if len(embeddings) > 1 else []
        sizes += [t.numel() // C for t in [*m.parameters(recurse=False), *m.buffers(recurse=False)]
                  if t.dim() >= 2 and t.shape[-1] == C]
    return min(cap or math.inf, sizes[0] if sizes else settings('block_size'))

def context_length(m, settings, B=2):
    """A length to check at, up to block_size, no size of a layer's (nor the batch's): a time dimension is
    told from the others whatever their order."""
    T = block_size(m, settings)
    sizes = {B} | {d // h for p in m.parameters() for d in p.shape for h in range(1, 65) if d % h == 0}
    return next((t for t in (23, 19, 17, 13, 11, 7, 5, 3) if t <= T and t not in sizes), T)

def width(m):
    first = next((s for s in m.modules() if isinstance(s, (nn.Linear, nn.LayerNorm))), None)
    if isinstance(first, nn.Linear):
        return first.in_features
    if first is not None:
        return first.normalized_shape[0]
    return next(p for p in m.parameters() if p.dim()).shape[0]

def runs(m, ctx, x):
    """m's output for x in eval mode, the same random numbers each time (dropout left on mixes nothing)."""
    with torch.no_grad(), torch.random.fork_rng():
        torch.default_generator.manual_seed(0)
        return ctx.call(m.eval(), x)

def mixes_tokens(m, ctx):
    """Whether a part's outputs in the middle hear the first or the last position; None: it can't run."""
    with contextlib.suppress(Exception):
        x = ctx.example(m)[0][0]
        changed = x.clone()
        changed[:, [0, -1]] = torch.randn(x.shape[0], 2, x.shape[-1])
        return not torch.allclose(
            runs(m, ctx, x)[:, 1:-1], runs(m, ctx, changed)[:, 1:-1], rtol=1e-4, atol=1e-5
        )

def places(m, ctx):
    """Whether an attention's later outputs change where its first two inputs swap: it knows their places."""
    with contextlib.suppress(Exception):
        x = ctx.example(m)[0][0]
        swapped = x[:, [1, 0, *range(2, x.shape[1])]]
        return not torch.allclose(runs(m, ctx, x)[:, 2:], runs(m, ctx, swapped)[:, 2:], rtol=1e-4, atol=1e-5)

def affine(m, ctx):
    """Whether m computes W x + b: nothing (a ReLU) between its Linear layers."""
    with contextlib.suppress(Exception):
        x = ctx.example(m)[0][0]
        zero, one, two = (runs(m, ctx, x * k) for k in (0, 1, 2))
        return torch.allclose(two - one, one - zero, rtol=1e-4, atol=1e-5)

@functools.lru_cache(maxsize=256)
def read_in(cls):
    """The names a class's code reads as self.name, not only sets; None where its source can't be read."""
    with contextlib.suppress(OSError, TypeError):
        refs = re.findall(r'self\.(\w+)(\s*=(?!=))?', inspect.getsource(cls))
        return {name for name, sets in refs if not sets}
    return None

def called(m):
    """The names its class reads as self.name (all its children's where its source can't be read), its source
    read once for all its instances."""
    names = read_in(type(m))
    return names if names is not None else {n for n, _ in m.named_children()}

def find_role(m, ctx):
    if isinstance(m, (nn.LayerNorm, getattr(nn, 'RMSNorm', nn.LayerNorm))):
        return 'LayerNorm'
    if type(m).__module__.startswith('torch.') and not isinstance(m, (nn.Sequential, nn.ModuleList)) or \
            not list(m.parameters()): # a layer of PyTorch's, or one without weights
        return None
    kids = [ctx.role_of(c) for c in m.children()]
    if isinstance(m, (nn.ModuleList, nn.ModuleDict)):
        ctx.listed |= {id(c) for c in m.children()}
        kinds = set(kids) - {None, 'LayerNorm'}
        if 'Block' in kinds:
            return 'blocks'
        return kinds.pop() if len(kinds) == 1 else None
    tables = [e for e in m.modules() if isinstance(e, nn.Embedding)]
    if tables and (has(m, nn.Linear) or any(e.num_embeddings == e.embedding_dim for e in tables)):
        return 'the model' # (not the embeddings alone, in a module of theirs: a bigram's table is square)
    if not has(m, nn.Linear):
        return 'LayerNorm' if all(p.dim() <= 1 for p in m.parameters()) else None
    if 'Block' in kids or 'blocks' in kids:
        return 'blocks'
    if set(kids) & set(ATTENTIONS): # its heads, whatever they compute
        block = {'FeedForward', 'LayerNorm'} & set(kids) # (with norms of its own: a Block)
        return 'Block' if block else 'MultiHeadAttention'
    named = {LAYER.get(norm(n)) for n, _ in layers(m, nn.Linear)} >= {'key', 'query'}
    mixes, name = named or mixes_tokens(m, ctx), type(m).__name__.lower()
    if mixes is None and 'FeedForward' in kids: # it can't run, and holds a feed-forward: a Block
        return 'Block'
    if mixes is None: # it can't run alone: its name says what it is meant to be
        mixes = not any(w in name for w in ('feed', 'mlp', 'ffn', 'ffwd'))
    if not mixes: # a feed-forward; one Linear with nothing after it is a projection, no part
        return None if sum(isinstance(s, nn.Linear) for s in m.modules()) == 1 and affine(m, ctx) else 'FeedForward'
    # (a layer its forward never names: not counted)
    own = [c for n, c in layers(m, nn.Linear) if n in called(m)]
    fused = len(own) > 3 or any(c.out_features == 3 * c.in_features for c in own) or n_heads(m)
    return 'fused attention' if fused or 'multi' in name else 'Head'

def qkv_of(m):
    """[ways to make (q, k, v) with m's Linears]: by name, else every order, else fused; the rest."""
    linears, named = [c for _, c in layers(m, nn.Linear)], {
        LAYER.get(norm(n)): c for n, c in layers(m, nn.Linear)
    }
    shape = lambda c: (c.in_features, c.out_features)
    if 'query' in named and 'key' in named:
        q, k = named['query'], named['key']
        v = named.get('value') or next((c for c in linears if c not in (q, k) and shape(c) == shape(k)), None)
        return [lambda x: [q(x), k(x), v(x) if v is not None else None]], [
            c for c in linears if c not in (q, k, v)
        ]
    alike = [c for c in linears if shape(c) == shape(linears[0])][:3] if linears else []
    if len(alike) >= 2 and not any(c.out_features == 3 * c.in_features for c in linears):
        # key, query
        orders = [[alike[1], alike[0], *alike[2:]]] + [list(p) for p in itertools.permutations(alike)]
        return [lambda x, n=n: [n[0](x), n[1](x), n[2](x) if len(n) > 2 else None] for n in orders], \
            [c for c in linears if c not in alike]
    fused = [c for c in linears if c.out_features % 3 == 0 and c.out_features // 3 <= c.in_features]
    if fused: # nanoGPT's c_attn: q, k and v side by side
        return [lambda x: fused[0](x).chunk(3, dim=-1)], [c for c in linears if c is not fused[0]]
    raise LookupError(f"has no key, query and value layers (its Linear layers: "
                      f"{', '.join(n for n, _ in layers(m, nn.Linear)) or 'none'})")

def projection(m, ctx, linears=None):
    """The layer after the heads: m's last Linear (of linears), or a module of its own around one."""
    linears = [c for _, c in layers(m, nn.Linear)] if linears is None else linears
    return ([c for c in m.children() if c in linears or ctx.role_of(c) is None and not isinstance(c, nn.Linear)
             and sum(isinstance(s, nn.Linear) for s in c.modules()) == 1] or [None])[-1]

def fused_layouts(m, ctx):
    makers, rest = qkv_of(m)
    X = makers[0](torch.zeros(1, 1, width(m)))[0].shape[-1]
    # (its own count, if it keeps one)
    counts = [n_heads(m)] if n_heads(m) and X % n_heads(m) == 0 else dict.fromkeys(
        h for h in [ctx.settings('n_head'), *range(1, 65)] if X % h == 0)
    one = next((c for c in m.modules() if isinstance(c, nn.Linear) and c.out_features == 3 * X), None)
    per_head = lambda h: lambda x: [t.flatten(-2) for t in one(x).unflatten(-1, (h, -1)).chunk(3, dim=-1)]
    # (q, k and v side by side in each head: view(B, T, nh, 3 * hs))
    also = [per_head] if one is not None else []
    return [dict(qkv=q, n_head=h, proj=projection(m, ctx, rest)) for h in counts for q in makers + [
        make(h) for make in also]]

def by_position(t, B, T):
    """t's values as (B, T, the rest), the rest in its own order; None where it has no batch and time."""
    b = next((d for d in range(t.dim()) if t.shape[d] == B), None)
    at = next((d for d in range(t.dim()) if t.shape[d] == T and d != b), None)
    return None if b is None or at is None else t.movedim((b, at), (0, 1)).reshape(B, T, -1)

def columns(t, of, B, T):
    """Which channels of `of` (B, T, N) t's channels are, in t's order; None where one is none of them."""
    keys = {of[..., i].numpy().tobytes(): i for i in range(of.shape[-1])}
    t = by_position(t, B, T) if t.is_floating_point() else None
    found = [keys.get(t[..., j].numpy().tobytes()) for j in range(t.shape[-1])] if t is not None else [None]
    return None if None in found else torch.tensor(found)

def traced_layouts(m, lays, events, B, T):
    """Layouts read from the values their code made: the one Linear's channels that q, k and v are (k first,
    interleaved in each head), and heads joined channel by channel."""
    one = next((c for c in m.modules() if isinstance(c, nn.Linear) and c.out_features % 3 == 0 and any(
        c.out_features == 3 * lay['qkv'](torch.zeros(1, 1, width(m)))[0].shape[-1] for lay in lays)), None)
    made = [e.values[0] for e in events if e.module is one and e.values]
    if one is None or not made or made[0].shape != (B, T, one.out_features):
        return []
    X, y = one.out_features // 3, made[0]
    thirds = {} # their q, k and v: the channels of y, and its heads
    for t in [t for e in events if e.module is None for t in e.values if t.numel() == B * T * X]:
        picked = columns(t, y, B, T)
        if picked is not None and not any(set(picked.tolist()) & set(p.tolist()) for p, _ in thirds.values()):
            thirds[tuple(picked.tolist())] = picked, X // t.shape[-1] if t.dim() == 4 else None
    if len(thirds) != 3:
        return []
    (_, h), proj = next(iter(thirds.values())), lays[0]['proj']
    counts = [h] if h else dict.fromkeys(lay['n_head'] for lay in lays)
    fed = [e.args[0] for e in events if e.module is proj and proj is not None and e.args]
    merge = None
    for t in [t for e in events if e.module is None for t in e.values if t.dim() == 4 and h] if fed else []:
        heads = t.movedim([d for d in range(4) if t.shape[d] == h][0], 2) if h in t.shape else t
        merge = (
            columns(fed[0], by_position(heads, B, T), B, T) if by_position(heads, B, T) is not None else None
        )
        if merge is not None and not torch.equal(merge, torch.arange(X)):
            break
        merge = None
    orders = itertools.permutations([p for p, _ in thirds.values()])
    return [dict(qkv=lambda x, o=o: [one(x)[..., p] for p in o], n_head=h, proj=proj, merge=merge)
            for o in orders for h in counts]

def block_layouts(m, ctx):
    kids = list(m.children())
    sa = next((c for c in kids if ctx.role_of(c) in ATTENTIONS and not isinstance(c, nn.ModuleList)), None)
    ff = next((c for c in kids if ctx.role_of(c) == 'FeedForward'), None)
    heads = next((c for c in kids if isinstance(c, nn.ModuleList) and ctx.role_of(c) == 'Head'), None)
    if sa is None and heads is not None: # the heads and their proj in the Block itself
        proj = projection(m, ctx)
        sa = lambda x: mha(dict(heads=heads, proj=proj), x, {}, Steps())
    act = None
    # the feed-forward's layers in the Block itself: Linear(C, kC), an activation module, Linear(kC, C)
    if ff is None:
        linears = [c for _, c in layers(m, nn.Linear)]
        acts = [c for c in kids if not list(c.parameters()) and not isinstance(c, (nn.Dropout, nn.Identity))]
        if len(linears) == 2 and len(acts) == 1 and linears[0].out_features == linears[1].in_features:
            act, (first, second) = acts[0], linears
            ff = lambda x: second(act(first(x)))
    if sa is None or ff is None:
        raise LookupError(
            f"has no {'attention' if sa is None else 'feed-forward'} part that can be told apart"
        )
    norms = [c for c in kids if ctx.role_of(c) == 'LayerNorm'] # (ln1, ln2 in the order they are made, first)
    pairs = [list(p) for p in itertools.permutations(norms, 2)] or [[c, c] for c in norms[:1]]
    identity = [[nn.Identity(), nn.Identity()]]
    return [dict(sa=sa, ffwd=ff, norms=p, call=ctx.call, act=act) for p in pairs or identity]

def model_layouts(m, ctx):
    kids = [kid for n, c in m.named_children() # (those of a ModuleDict too: nanoGPT's transformer)
            for kid in (c.named_children() if isinstance(c, nn.ModuleDict) else [(n, c)])]
    embeddings = [c for _, c in kids if isinstance(c, nn.Embedding)] or \
        [s for s in m.modules() if isinstance(s, nn.Embedding)]
    # (lm_head as the last of blocks)
    tails = [c[-1] for _, c in kids if isinstance(c, nn.Sequential) and len(c)]
    head = next((c for c in [c for _, c in kids[::-1]] + tails if isinstance(c, nn.Linear) and
                 c.out_features in {e.num_embeddings for e in embeddings}), None)
    tok = next(
        (e for e in embeddings if head is None or e.num_embeddings == head.out_features), embeddings[0]
    )
    lay = dict(tok=tok, head=head, body=[], named=[], final=None, structure=[], extra=[], call=ctx.call,
               pos=next((e for e in embeddings if e is not tok), None),
               bigram=head is None and tok.embedding_dim == tok.num_embeddings)
    C, T = tok.embedding_dim, block_size(m, ctx.settings)
    inside = [b for _, c in kids if ctx.role_of(c) is None and not isinstance(c, nn.Embedding)
              for b in c.buffers(recurse=False)] # (a module of theirs adding sinusoids: x + self.pe[:, :T])
    tables = [(t, fixed) for fixed, items in ((False, m.parameters(recurse=False)),
                                              (True, [*m.buffers(recurse=False), *inside]))
              for t in items if t.shape[-1] == C and t.numel() // C >= T and t.numel() % C == 0]
    if lay['pos'] is None and tables: # a table of its own: a Parameter (learned) or a buffer (fixed)
        table, fixed = tables[0]
        lay['pos'] = table
        if fixed:
            lay['structure'].append('fixed positions')
    for name, c in kids:
        kind = ctx.role_of(c)
        # (or a module of theirs around it)
        listed = [b for k in ([c] if isinstance(c, SEQUENCES) else c.children())
                  for b in (k if isinstance(k, SEQUENCES) else [k])]
        # (a list in two containers: once)
        if kind == 'blocks' and not any(b is a for b in listed for a in lay['body']):
            lay['body'] += [b for b in listed if ctx.role_of(b) != 'LayerNorm' and b is not head]
            last = [b for b in c if b is not head][-1] if isinstance(c, nn.Sequential) else None
            if ctx.role_of(last) == 'LayerNorm':
                lay['final'], lay['structure'] = last, lay['structure'] + ['last of blocks']
        elif kind == 'LayerNorm':
            lay['final'] = c
        elif kind in (*ATTENTIONS, 'FeedForward', 'Block'):
            lay['body'].append(c)
            lay['named'].append((name, c))
    lay['blocks'] = any(ctx.role_of(b) == 'Block' for b in lay['body'])
    # (from stage 5)
    lay['extra'] = [b for b in lay['body'] if ctx.role_of(b) != 'Block'] if lay['blocks'] else []
    # (no lm_head: x @ tok.weight.T)
    tied = head.weight is tok.weight if head is not None else not lay['bigram']
    if tied:
        lay['structure'].append('tied')
    if lay['bigram'] and lay['body']: # (its parts' output taken as the logits: it has no lm_head)
        lay['bigram'], lay['head'] = False, nn.Identity()
        lay['structure'].append('no lm_head')
    return [lay] + inline_block(lay, kids, ctx)

def inline_block(lay, kids, ctx):
    """One Block written out in the model's own forward (its attention, feed-forward, ln1, ln2, then ln_f):
    a layout of stage 6 with one Block, beside the one of stage 4 that runs them in turn."""
    norms = [c for _, c in kids if ctx.role_of(c) == 'LayerNorm']
    sa = [c for _, c in lay['named'] if ctx.role_of(c) in ATTENTIONS]
    ffwd = [c for _, c in lay['named'] if ctx.role_of(c) == 'FeedForward']
    if lay['blocks'] or len(norms) != 3 or len(sa) != 1 or len(ffwd) != 1 or len(lay['named']) != 2:
        return []
    one = dict(norms=norms[:2], sa=sa[0], ffwd=ffwd[0], call=ctx.call)
    return [dict(lay, named=[], inline=one, structure=lay['structure'] + ['one Block inline'])]

def ffwd_layouts(m, ctx):
    """Its Linears, and a LayerNorm before them (the Block's ln2, moved inside)."""
    inside = [s for s in list(m.modules())[1:] if isinstance(s, nn.Linear) or ctx.role_of(s) == 'LayerNorm']
    first = inside[0] if inside and not isinstance(inside[0], nn.Linear) else None
    linears = [s for s in inside if isinstance(s, nn.Linear)]
    swapped = [[linears[1], linears[0], linears[2]]] if len(linears) == 3 else [] # (a gate made second)
    return [dict(linears=each, norm=first) for each in [linears, *swapped]]

def norm_layouts(m, ctx):
    """Its weight and bias, a number per channel; eps; a DyT's alpha, one number."""
    ones = [p for p in m.parameters() if p.numel() > 1]
    alpha = next((p for p in m.parameters() if p.numel() == 1), None)
    eps = next((v for k, v in vars(m).items() if 'eps' in k and type(v) is float), 1e-5)
    return [dict(weight=ones[0], bias=ones[1] if len(ones) > 1 else None, eps=eps, alpha=alpha)]

LAYOUTS = { # role: the ways the learner's layers may map to the lecture's
    'Head': lambda m, ctx: [dict(qkv=q) for q in qkv_of(m)[0]], 'fused attention': fused_layouts,
    'MultiHeadAttention': lambda m, ctx: [dict(heads=[h for c in m.children() for h in (
        c if isinstance(c, nn.ModuleList) else [c]) if ctx.role_of(h) in ATTENTIONS], proj=projection(m, ctx))],
    'Block': block_layouts, 'the model': model_layouts, 'LayerNorm': norm_layouts, 'FeedForward': ffwd_layouts}

def blocks_step(m, ctx):
    """Whether m's Blocks are the lecture's first (1:24:25 to 1:26:48): x = ffwd(sa(x)), with no residual
    connections, no proj after the heads."""
    kinds = ('Block', 'MultiHeadAttention', 'FeedForward')
    parts = [(s, k) for s in m.modules() for k in [ctx.role_of(s)] if k in kinds]
    with contextlib.suppress(Exception): # (layers it can't lay out: not the lecture's first Blocks)
        for s, k in parts:
            lay = LAYOUTS[k](s, ctx)[0]
            # (its feed-forward may be 4x already)
            if k == 'MultiHeadAttention' and stage_of(s, k, lay, ctx) >= 5:
                return False
            if k == 'Block':
                x = ctx.example(s)[0][0]
                chained = ctx.call(lay['ffwd'], ctx.call(lay['sa'], x))
                if not torch.allclose(runs(s, ctx, x), chained, rtol=1e-4, atol=1e-5):
                    return False
        return any(k == 'FeedForward' for _, k in parts)
    return False

def stage_of(m, kind, lay, ctx):
    """The stage of the lecture a part's layers belong to (7: gpt.py's)."""
    norms = any(ctx.role_of(s) == 'LayerNorm' for s in m.modules() if s is not m)
    if kind == 'the model':
        kinds = [ctx.role_of(b) for b in lay['body']]
        if lay.get('inline'):
            return 7 if has(m, nn.Dropout) else 6
        if lay['bigram'] or not kinds:
            return 1
        if 'Block' not in kinds and 'FeedForward' in kinds:
            return 4
        if 'Block' not in kinds:
            return 3 if set(kinds) - {'Head'} else 2
    if kind in ('Block', 'the model'):
        if norms:
            return 7 if kind == 'Block' or has(m, nn.Dropout) else 6
        return 4 if blocks_step(m, ctx) else 5
    if kind in ('MultiHeadAttention', 'fused attention'):
        return 7 if lay['proj'] is not None else 3
    return 4 if kind == 'FeedForward' and len(lay['linears']) == 1 else 7
