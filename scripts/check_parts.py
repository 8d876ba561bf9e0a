"""
The lecture's parts, as scripts/check.py knows them: the names learners give their settings and layers,
the lecture's stages, what a module is (a Head, a Block, ...) whatever its name, the ways a learner's
layers map onto its part, each part's computation as the lecture has it, and the catalogue of mistakes
and variants, as changes to that computation. The layers in a computation (`lay`) are the learner's
own; the glue between them is the lecture's.
"""
import itertools
import math

import torch
import torch.nn as nn
from torch.nn import functional as F

# a setting, and the names learners give it (compared in lower case, without underscores)
SETTINGS = {
    'n_embd': 'n_embd n_embed n_embedding n_embeddings d_model emb_dim embed_dim embd_dim embedding_dim '
              'embedding_size embed_size emb_size embd_size hidden_size hidden_dim d_emb model_dim dim width c '
              'channels',
    'n_head': 'n_head n_heads num_heads num_head nhead nheads heads head_count n_attn_heads num_attention_heads',
    'n_layer': 'n_layer n_layers num_layers nlayers layers depth n_block n_blocks num_blocks num_block',
    'block_size': 'block_size context_length context_len context_size ctx_len ctx_size seq_len seq_length '
                  'max_seq_len sequence_length max_len max_length n_ctx ctx context max_context block',
    'head_size': 'head_size head_dim d_head d_k dk hs head_dimension',
    'ffwd_size': 'd_ff dff ff_dim ffn_dim ffwd_dim dim_ff dim_feedforward inner_dim mlp_dim d_inner ff_size ffn_size '
                 'ffwd_size intermediate_size',
    'dropout': 'dropout dropout_rate dropout_p p_dropout drop drop_rate dropout_prob pdrop resid_pdrop',
    'vocab_size': 'vocab_size n_vocab vocab num_tokens n_tokens vocab_len vocabulary_size',
    'bias': 'bias use_bias',
    'device': 'device',
}
# what a value must be to be taken for a setting
PLAUSIBLE = {'size': lambda v: type(v) is int and v >= 1, 'dropout': lambda v: type(v) in (int, float) and 0 <= v < 1,
             'bias': lambda v: type(v) is bool, 'device': lambda v: isinstance(v, (str, torch.device))}
# what a class that reads a setting the file never sets gets: the lecture's final config
LECTURE = dict(n_embd=384, n_head=6, n_layer=6, block_size=256, head_size=64, ffwd_size=1536, dropout=0.2,
               vocab_size=65, bias=True, device='cpu')
# a constructor parameter by one of these names takes the settings as one object
CONFIGS = 'config cfg conf args params hparams hp settings opt opts options hyperparams model_config gpt_config'
# a layer's role in its part, and the names learners give it
LAYERS = {
    'key': 'key k keys w_k k_proj to_k key_proj k_linear key_layer linear_k',
    'query': 'query q queries w_q q_proj to_q query_proj q_linear query_layer linear_q',
    'value': 'value v values w_v v_proj to_v value_proj v_linear value_layer linear_v',
    'ln1': 'ln1 ln_1 norm1 norm_1 attn_norm norm_attn ln_attn attention_norm layer_norm1 layernorm1 layer_norm_1 '
           'ln_sa sa_norm norm_sa pre_attn_norm input_layernorm',
    'ln2': 'ln2 ln_2 norm2 norm_2 ffn_norm ffwd_norm mlp_norm norm_ffn norm_ffwd norm_mlp ln_ffn ln_ffwd ln_mlp '
           'layer_norm2 layernorm2 layer_norm_2 post_attention_layernorm',
}
# stage: (what it added, where in the video); 7 is gpt.py's model
STAGES = {1: ('bigram', '22:11'), 2: ('one self-attention head', '1:02:00'), 3: ('multi-head attention', '1:21:59'),
          4: ('feed-forward', '1:24:25'), 5: ('residual connections', '1:26:48'), 6: ('LayerNorm', '1:32:51'),
          7: ('scaled up, dropout', '1:37:49')}
norm = lambda name: name.lower().replace('_', '')
MEANING = {norm(n): m for m, names in SETTINGS.items() for n in names.split()}
LAYER = {norm(n): m for m, names in LAYERS.items() for n in names.split()}
ATTENTIONS = ('Head', 'MultiHeadAttention', 'fused attention')
# where the lecture's parts apply dropout (seen in training): on the attention weights, or on activations
DROPOUT = {'Head': ['the attention weights'], 'MultiHeadAttention': ['activations'], 'FeedForward': ['activations'],
           'Block': [], 'the model': []}


# ------------ each part as the lecture computes it; o: the options, changed by the catalogue below

def out_of(result):
    """The output tensor of a part that returns (out, ...), {'logits': ...} or out."""
    if isinstance(result, dict):
        result = result.get('logits', next(iter(result.values()), None))
    return result[0] if isinstance(result, (tuple, list)) else result


def attend(q, k, v, x, o):
    """softmax(q @ k^T * scale, the future masked) @ v, on (..., T, hs) each; v None: no value layer."""
    T, hs = q.shape[-2], q.shape[-1]
    if o['rotary']:
        q, k = rotate(q, o['rotary']), rotate(k, o['rotary'])
    scale = {'hs': hs**-0.5, 'none': 1.0, 'C': x.shape[-1]**-0.5, 'times': hs**0.5, 'full': 1 / hs}[o['scale']]
    wei = (k @ q.transpose(-2, -1) if o['kq'] else q @ k.transpose(-2, -1)) * scale # (..., T, T)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    if o['mask'] in ('before', 'zero'):
        wei = wei.masked_fill(future, float('-inf') if o['mask'] == 'before' else 0.0)
    wei = F.softmax(wei, dim=o['dim'])
    wei = wei.masked_fill(future, 0) if o['mask'] == 'after' else wei
    return wei @ (v if o['values'] else x) if v is not None or not o['values'] else None


def rotate(t, kind):
    """Rotary position embeddings (base 10000) on (..., T, d): pairs (2i, 2i+1), or the two halves."""
    T, d = t.shape[-2], t.shape[-1]
    angles = torch.arange(T).float()[:, None] * 10000 ** (-torch.arange(0, d, 2).float() / d) # (T, d/2)
    cos, sin = angles.cos(), angles.sin()
    a, b = (t[..., 0::2], t[..., 1::2]) if kind == 'pairs' else (t[..., :d // 2], t[..., d // 2:])
    turned = (a * cos - b * sin, a * sin + b * cos)
    return torch.stack(turned, -1).flatten(-2) if kind == 'pairs' else torch.cat(turned, -1)


def head(lay, x, o):
    q, k, v = lay['qkv'](x)
    return attend(q, k, v, x, o)


def mha(lay, x, o):
    if o.get('rotary'): # the heads' queries and keys turned here, by their own layers
        heads = [attend(*qkv_of(h)[0][0](x), x, dict(ATTENTION_DEFAULTS, rotary=o['rotary'])) for h in lay['heads']]
    out = torch.cat(heads if o.get('rotary') else [out_of(h(x)) for h in lay['heads']], dim=-1) # (B,T,nh*hs)
    return lay['proj'](out) if lay['proj'] is not None and o['proj'] else out


def fused(lay, x, o):
    """Every head at once from (B,T,X) queries, keys and values, as nanoGPT's CausalSelfAttention."""
    q, k, v = lay['qkv'](x)
    B, T, X = q.shape
    nh = lay['n_head']
    split = lambda t: t.reshape(B, nh, T, X // nh) if o['split'] == 'view' else t.view(B, T, nh, -1).transpose(1, 2)
    out = attend(split(q), split(k), split(v), x, o) # (B,nh,T,hs)
    out = out.reshape(B, T, X) if o['merge'] == 'view' else out.transpose(1, 2).reshape(B, T, X)
    return lay['proj'](out) if lay['proj'] is not None and o['proj'] else out


def ffwd(lay, x, o):
    linears = lay['linears'] # one (the video at 1:24:25: Linear, ReLU) or Linear, ReLU, Linear
    if o['act'] == 'swiglu': # three: a gate, its values, and back to n_embd
        return linears[2](F.silu(linears[0](x)) * linears[1](x))
    act = {'relu': F.relu, 'none': lambda t: t, 'gelu': F.gelu, 'silu': F.silu,
           'tanh': lambda t: F.gelu(t, approximate='tanh')}[o['act']]
    for i, linear in enumerate(linears):
        x = linear(x)
        x = act(x) if i < len(linears) - 1 or len(linears) == 1 else x
    return x


def block(lay, x, o):
    ln1, ln2 = lay['norms']
    parts = [(lay['sa'], ln1, o['residual'] in ('both', 'sa')),
             (lay['ffwd'], ln1 if o['norm'] == 'same' else ln2, o['residual'] in ('both', 'ffwd'))]
    for f, ln, residual in parts[::-1] if o['swap'] else parts:
        if o['norm'] == 'post':
            x = ln(x + out_of(f(x))) if residual else ln(out_of(f(x)))
        else:
            x = ln(x) if o['norm'] == 'stream' else x
            h = out_of(f(x if o['norm'] == 'stream' else ln(x)))
            x = x + h if residual else h
    return x


def model(lay, idx, o):
    x = lay['tok'](idx) # (B,T,C)
    if lay['bigram']:
        return x
    pos, T = lay['pos'], idx.shape[1]
    if pos is not None and o['positions'] == 'tokens' and isinstance(pos, nn.Embedding):
        x = x + pos(idx)
    elif pos is not None and o['positions'] == 'table':
        x = x + (pos(torch.arange(T)) if isinstance(pos, nn.Embedding) else pos.reshape(-1, x.shape[-1])[:T])
    for b in lay['body'] if o['body'] else []:
        x = out_of(b(x))
    x = lay['final'](x) if lay['final'] is not None and o['final'] else x
    return lay['head'](x) if lay['head'] is not None else x @ lay['tok'].weight.T # (B,T,vocab_size)


def layernorm(lay, x, o):
    dims = (0,) if o['dim'] == 0 else (-1,)
    mean = 0 if o['rms'] else x.mean(dims, keepdim=True)
    var = (x - mean).pow(2).mean(dims, keepdim=True) if o['var'] == 'biased' else x.var(dims, keepdim=True)
    out = (x - mean) / torch.sqrt(var + lay['eps']) * lay['weight']
    return out + lay['bias'] if lay['bias'] is not None else out


ATTENTION_DEFAULTS = dict(scale='hs', mask='before', dim=-1, kq=False, values=True, rotary=None)
# role: (its computation, its options as the lecture has them)
LECTURES = {
    'Head': (head, ATTENTION_DEFAULTS),
    'MultiHeadAttention': (mha, dict(proj=True)),
    'fused attention': (fused, dict(ATTENTION_DEFAULTS, split='heads', merge='heads', proj=True)),
    'FeedForward': (ffwd, dict(act='relu')),
    'Block': (block, dict(residual='both', norm='pre', swap=False)),
    'the model': (model, dict(positions='table', final=True, body=True)),
    'LayerNorm': (layernorm, dict(var='biased', rms=False, dim=-1)),
}

# ------------ what a module is, and how its layers map onto the lecture's

layers = lambda m, kind: [(n, c) for n, c in m.named_children() if isinstance(c, kind)]
n_heads = lambda m: next((v for k, v in vars(m).items() if MEANING.get(norm(k)) == 'n_head' and type(v) is int), None)


def children(m):
    """m's children, a ModuleDict's (nanoGPT's transformer) among them."""
    for n, c in m.named_children():
        yield from children(c) if isinstance(c, nn.ModuleDict) else [(n, c)]


def block_size(m, settings, cap=256):
    """The context length a part works at: its mask's size, or its position table's (at most cap)."""
    sizes = [b.shape[-1] for b in m.buffers() if b.dim() >= 2 and b.shape[-1] == b.shape[-2] > 1]
    embeddings = [e for e in m.modules() if isinstance(e, nn.Embedding)]
    if embeddings: # a model: the rows of its position Embedding (not the one lm_head maps back to), or table
        C, outs = embeddings[0].embedding_dim, {c.out_features for c in m.modules() if isinstance(c, nn.Linear)}
        sizes += ([e.num_embeddings for e in embeddings if e.num_embeddings not in outs] or
                  [e.num_embeddings for e in embeddings[1:]]) if len(embeddings) > 1 else []
        sizes += [t.numel() // C for t in [
            *m.parameters(recurse=False), *m.buffers(recurse=False)] if t.dim() >= 2 and t.shape[-1] == C]
    return min(cap or math.inf, sizes[0] if sizes else settings('block_size'))


def width(m):
    first = next((s for s in m.modules() if isinstance(s, (nn.Linear, nn.LayerNorm))), None)
    return first.in_features if isinstance(first, nn.Linear) else first.normalized_shape[0] if first is not None \
        else next(m.parameters()).shape[0]


def mixes_tokens(m, T):
    """Whether a part's output at one position hears another position's input; None: it can't run."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, T, width(m), generator=g)
    other = torch.cat([torch.randn(1, 1, x.shape[-1], generator=g), x[:, 1:]], dim=1)
    try:
        with torch.no_grad():
            return not torch.allclose(out_of(m.eval()(x))[:, 1:], out_of(m(other))[:, 1:])
    except Exception:
        return None


def role(m, T, memo):
    """What a module is in the lecture's model, by its layers and what it does, whatever its name."""
    if id(m) not in memo:
        memo[id(m)] = find_role(m, T, memo)
    return memo[id(m)]


def find_role(m, T, memo):
    if isinstance(m, (nn.LayerNorm, getattr(nn, 'RMSNorm', nn.LayerNorm))):
        return 'LayerNorm'
    if isinstance(m, nn.MultiheadAttention): # PyTorch's: not checked, but an attention in a Block
        return 'torch attention'
    if type(m).__module__.startswith('torch.') and not isinstance(m, (nn.Sequential, nn.ModuleList)) or \
            not list(m.parameters()): # a layer of PyTorch's, or one without weights
        return None
    if isinstance(m, (nn.ModuleList, nn.ModuleDict)):
        kinds = {role(s, T, memo) for s in m.children()} - {None, 'LayerNorm'}
        return 'blocks' if 'Block' in kinds else kinds.pop() if len(kinds) == 1 else None
    if any(isinstance(s, nn.Embedding) for s in m.modules()):
        return 'the model'
    if not any(isinstance(s, nn.Linear) for s in m.modules()):
        return 'LayerNorm' if all(p.dim() == 1 for p in m.parameters()) else None
    kids, mixes, name = [role(c, T, memo) for c in m.children()], mixes_tokens(m, T), type(m).__name__.lower()
    if mixes is None: # it can't run alone: its name says what it is meant to be
        mixes = not any(w in name for w in ('feed', 'mlp', 'ffn', 'ffwd'))
    if 'Block' in kids or not mixes:
        return 'blocks' if 'Block' in kids else 'FeedForward'
    if 'FeedForward' in kids and set(kids) & {*ATTENTIONS, 'torch attention'}:
        return 'Block'
    if 'Head' in kids:
        return 'MultiHeadAttention'
    linears = [c for c in m.children() if isinstance(c, nn.Linear)]
    fused = len(linears) > 3 or any(c.out_features == 3 * c.in_features for c in linears) or n_heads(m)
    return 'fused attention' if fused or 'multi' in name else 'Head'


def qkv_of(m):
    """[the ways to compute (q, k, v) from x with m's Linears]: by their names, else every order of three
    (of two: no value layer, v is None), else one fused Linear; and the Linears left over."""
    linears, named = [c for _, c in layers(m, nn.Linear)], {LAYER.get(norm(n)): c for n, c in layers(m, nn.Linear)}
    shape = lambda c: (c.in_features, c.out_features)
    if 'query' in named and 'key' in named:
        q, k = named['query'], named['key']
        v = named.get('value') or next((c for c in linears if c not in (q, k) and shape(c) == shape(k)), None)
        return [lambda x: [q(x), k(x), v(x) if v is not None else None]], [c for c in linears if c not in (q, k, v)]
    alike = [c for c in linears if shape(c) == shape(linears[0])][:3] if linears else []
    if len(alike) >= 2 and not any(c.out_features == 3 * c.in_features for c in linears):
        orders = [[alike[1], alike[0], *alike[2:]]] + [list(p) for p in itertools.permutations(alike)] # key, query..
        return [lambda x, n=n: [n[0](x), n[1](x), n[2](x) if len(n) > 2 else None] for n in orders], \
            [c for c in linears if c not in alike]
    fused = [c for c in linears if c.out_features % 3 == 0 and c.out_features // 3 <= c.in_features]
    if fused: # nanoGPT's c_attn: q, k and v side by side
        return [lambda x: fused[0](x).chunk(3, dim=-1)], [c for c in linears if c is not fused[0]]
    raise LookupError(f"has no key, query and value layers (its Linear layers: "
                      f"{', '.join(n for n, _ in layers(m, nn.Linear))})")


def mha_layouts(m, ctx):
    heads = [h for c in m.children() for h in (c if isinstance(c, nn.ModuleList) else [c])
             if ctx.role_of(h) == 'Head']
    return [dict(heads=heads, proj=([c for _, c in layers(m, nn.Linear)] or [None])[-1])]


def fused_layouts(m, ctx):
    makers, rest = qkv_of(m)
    X = makers[0](torch.zeros(1, 1, width(m)))[0].shape[-1]
    counts = dict.fromkeys(h for h in [n_heads(m), ctx.settings('n_head'), *range(1, 65)] if h and X % h == 0)
    return [dict(qkv=q, n_head=h, proj=rest[-1] if rest else None) for h in counts for q in makers]


def block_layouts(m, ctx):
    kids = list(m.named_children())
    sa = next((c for _, c in kids if ctx.role_of(c) in ATTENTIONS and not isinstance(c, nn.ModuleList)), None)
    ff = next((c for _, c in kids if ctx.role_of(c) == 'FeedForward'), None)
    heads = [c for _, c in kids if isinstance(c, nn.ModuleList) and ctx.role_of(c) == 'Head']
    if sa is None and heads: # the heads and their proj in the Block itself
        proj = ([c for _, c in layers(m, nn.Linear)] or [None])[-1]
        sa = lambda x: mha(dict(heads=heads[0], proj=proj), x, dict(proj=True))
    torch_mha = [c for _, c in kids if isinstance(c, nn.MultiheadAttention)]
    if sa is None and torch_mha: # PyTorch's, with the causal mask
        a, turn = torch_mha[0], (lambda t: t) if torch_mha[0].batch_first else (lambda t: t.transpose(0, 1))
        sa = lambda x: turn(a(*[turn(x)] * 3, attn_mask=torch.ones(x.shape[1], x.shape[1]).triu(1).bool(),
                              need_weights=False)[0])
    if sa is None or ff is None:
        raise LookupError(f"has no {'attention' if sa is None else 'feed-forward'} part that can be told apart")
    norms = [(n, c) for n, c in kids if ctx.role_of(c) == 'LayerNorm']
    named = {LAYER.get(norm(n)): c for n, c in norms}
    pairs = [[named['ln1'], named['ln2']]] if {'ln1', 'ln2'} <= named.keys() else \
        [list(p) for p in itertools.permutations([c for _, c in norms], 2)] or [[c, c] for _, c in norms[:1]]
    return [dict(sa=sa, ffwd=ff, norms=p) for p in pairs or [[nn.Identity(), nn.Identity()]]]


def model_layouts(m, ctx):
    kids = list(children(m))
    embeddings = [c for _, c in kids if isinstance(c, nn.Embedding)] or \
        [s for s in m.modules() if isinstance(s, nn.Embedding)]
    head = next((c for _, c in kids[::-1] if isinstance(c, nn.Linear) and
                 c.out_features in {e.num_embeddings for e in embeddings}), None)
    tok = next((e for e in embeddings if head is None or e.num_embeddings == head.out_features), embeddings[0])
    lay = dict(tok=tok, head=head, body=[], final=None, bigram=head is None and tok.embedding_dim == tok.num_embeddings,
               pos=next((e for e in embeddings if e is not tok), None), structure=[])
    C, T = tok.embedding_dim, block_size(m, ctx.settings)
    tables = [(t, fixed) for fixed, items in ((False, m.parameters(recurse=False)), (True, m.buffers(recurse=False)))
              for t in items if t.shape[-1] == C and t.numel() // C >= T and t.numel() % C == 0]
    if lay['pos'] is None and tables: # a table of its own: a Parameter (learned) or a buffer (fixed)
        lay['pos'], lay['structure'] = tables[0][0], ['fixed positions'] * tables[0][1]
    for _, c in kids:
        kind = ctx.role_of(c)
        if kind == 'blocks':
            lay['body'] += [b for b in c if ctx.role_of(b) != 'LayerNorm']
            if isinstance(c, nn.Sequential) and ctx.role_of(c[-1]) == 'LayerNorm':
                lay['final'] = c[-1]
                lay['structure'].append('last of blocks')
        elif kind == 'LayerNorm':
            lay['final'] = c
        elif kind in (*ATTENTIONS, 'FeedForward', 'Block'):
            lay['body'].append(c)
    tied = head is not None and head.weight is tok.weight or head is None and not lay['bigram']
    lay['structure'] += ['tied'] * tied
    return [lay]


def norm_layouts(m, ctx):
    ones = [p for p in m.parameters() if p.dim() == 1]
    eps = next((v for k, v in vars(m).items() if 'eps' in k and type(v) is float), 1e-5)
    return [dict(weight=ones[0], bias=ones[1] if len(ones) > 1 else None, eps=eps)]


LAYOUTS = { # role: the ways the learner's layers may map to the lecture's (all that its names leave open)
    'Head': lambda m, ctx: [dict(qkv=q) for q in qkv_of(m)[0]], 'MultiHeadAttention': mha_layouts,
    'fused attention': fused_layouts, 'Block': block_layouts, 'the model': model_layouts, 'LayerNorm': norm_layouts,
    'FeedForward': lambda m, ctx: [dict(linears=[s for s in m.modules() if isinstance(s, nn.Linear)])]}

# role: [(option, value, kind, what it is)]. Each entry changes one option of that role's computation
# above; kind: a 'mistake', what the 'video' did before the published code, or a 'variant' that other
# code does (named, not counted against the part). Where no single entry gives a part's output, they are
# tried in pairs.
ATTENTION = [
    ('scale', 'none', 'mistake', 'the 1/sqrt(head_size) scale is missing'),
    ('scale', 'C', 'video', 'scaled by C**-0.5, C = n_embd, as the video from 1:16:56 (C from x.shape); '
                            'the published code and gpt.py scale by head_size**-0.5'),
    ('scale', 'times', 'mistake', 'multiplied by sqrt(head_size), not divided'),
    ('scale', 'full', 'mistake', 'divided by head_size, not by its square root'),
    ('mask', 'none', 'mistake', 'no causal mask: the future talks to the past'),
    ('mask', 'after', 'mistake', 'the mask applied after the softmax'),
    ('mask', 'zero', 'mistake', 'the future filled with 0, not -inf, before the softmax'),
    ('dim', -2, 'mistake', 'the softmax over the wrong dimension (dim=1, not -1)'),
    ('dim', 0, 'mistake', 'the softmax over the batch (dim=0), not over the keys (dim=-1)'),
    ('kq', True, 'mistake', 'k @ q^T for q @ k^T'),
    ('values', False, 'mistake', 'x itself aggregated, not value(x)'),
    ('rotary', 'pairs', 'variant', 'rotary position embeddings (RoPE) on q and k; the lecture adds a position table'),
    ('rotary', 'halves', 'variant', 'rotary position embeddings (RoPE) on q and k; the lecture adds a position table'),
]
ROTARY = [e for e in ATTENTION if e[0] == 'rotary']
CATALOGUE = {
    'Head': ATTENTION,
    'MultiHeadAttention': [('proj', False, 'mistake', 'no proj after the heads'), *ROTARY],
    'fused attention': [e for e in ATTENTION if e[0] != 'values'] + [ # (x split in heads is not aggregated)
        ('split', 'view', 'mistake', 'the heads split with view(B, nh, T, hs), not view(B, T, nh, hs).transpose(1, 2)'),
        ('merge', 'view', 'mistake', 'the heads joined with view(B, T, C) before transposing them back'),
        ('proj', False, 'mistake', 'no proj after the heads')],
    'FeedForward': [
        ('act', 'none', 'mistake', 'no ReLU between the two Linear layers'),
        ('act', 'gelu', 'variant', "GELU for ReLU (the lecture's is ReLU)"),
        ('act', 'tanh', 'variant', "GELU (tanh approximation) for ReLU (the lecture's is ReLU)"),
        ('act', 'silu', 'variant', "SiLU for ReLU (the lecture's is ReLU)"),
        ('act', 'swiglu', 'variant', "SwiGLU: silu(x W) * (x V), then back; the lecture's is Linear, ReLU, Linear")],
    'Block': [
        ('residual', 'none', 'mistake', 'no residual connections (x = x + ...)'),
        ('residual', 'ffwd', 'mistake', 'no residual connection around the attention'),
        ('residual', 'sa', 'mistake', 'no residual connection around the feed-forward'),
        ('norm', 'post', 'mistake', 'post-norm, as the paper: LayerNorm after each residual add, not before each part'),
        ('norm', 'stream', 'mistake', 'LayerNorm applied to x itself (x = ln(x)), not to the input of each part'),
        ('norm', 'same', 'mistake', 'one LayerNorm before both parts, not ln1 and ln2'),
        ('swap', True, 'mistake', 'the feed-forward before the attention')],
    'the model': [
        ('positions', 'none', 'mistake', 'no position embedding'),
        ('positions', 'tokens', 'mistake', 'the position table looked up with idx, not with torch.arange(T)'),
        ('final', False, 'mistake', 'no final LayerNorm (ln_f) before lm_head'),
        ('body', False, 'mistake', 'the blocks never applied between the embeddings and lm_head')],
    'LayerNorm': [
        ('var', 'unbiased', 'variant', "the unbiased variance (x.var()), where nn.LayerNorm's is biased"),
        ('rms', True, 'variant', 'RMSNorm: no mean subtracted'),
        ('dim', 0, 'mistake', 'normalized over the batch (dim 0), as BatchNorm, not over each vector')],
}
# what the layers of a part say, where its output can't
STRUCTURE = {
    'no proj': ('mistake', 'no proj after the heads (the lecture adds it with the residual connections, 1:26:48)'),
    'one linear': ('mistake', 'one Linear layer; from 1:26:48 it is Linear(C, 4C), ReLU, Linear(4C, C)'),
    'not 4x': ('mistake', 'not 4x wider inside (the paper: 512 -> 2048 -> 512)'),
    'no norms': ('mistake', 'no LayerNorm before the attention and the feed-forward (pre-norm, 1:32:51)'),
    'no ln_f': ('mistake', 'no final LayerNorm (ln_f) before lm_head'),
    'no positions': ('mistake', 'no position embedding'),
    'last of blocks': ('video', 'the last LayerNorm as the last of blocks, as the video from 1:32:51; '
                                'the published code names it ln_f'),
    'qkv bias': ('variant', "bias in key, query and value (the lecture's have none)"),
    'tied': ('variant', "lm_head shares the token embedding's weights (the lecture's are separate)"),
    'rotary': ('variant', 'rotary position embeddings (RoPE) in the attention, for a position table'),
    'fixed positions': ('variant', 'a fixed (sinusoidal) position table; the lecture learns one'),
}


# ------------ the learner's part beside the lecture's

TOL = 1e-4 # relative: the same math in another order differs by about 1e-6; a mistake, by far more


class Context:
    """What the parts share: the settings, each module's role, the parts checked on their own, and the
    attention classes found to rotate their queries and keys (RoPE)."""

    def __init__(self, settings):
        self.settings, self.memo, self.parts, self.rotary = settings, {}, set(), set()

    def role_of(self, m):
        return role(m, block_size(m, self.settings), self.memo)

    def subparts(self, m):
        return [s for s in m.modules() if s is not m and (type(s) in self.parts or id(s) in self.parts)]


def close(a, b):
    if not isinstance(a, torch.Tensor) or a.shape != b.shape:
        return False
    a, b = (t.float().nan_to_num(1e4, 1e4, -1e4) for t in (a, b))
    return (a - b).abs().max().item() <= TOL * max(1.0, b.abs().max().item())


def search(kind, layouts, mine, x):
    """The catalogue's changes (none, one, then two) and the layout that give the learner's output."""
    compute, defaults = LECTURES[kind]
    entries = CATALOGUE.get(kind, [])
    def same(lay, changes):
        try:
            with torch.no_grad():
                return close(mine, compute(lay, x, dict(defaults, **{e[0]: e[1] for e in changes})))
        except Exception: # a change that can't be made with the learner's layers
            return False
    tries = [((), lay) for lay in layouts] + [((e,), lay) for e in entries for lay in layouts] + \
        [(pair, layouts[0]) for pair in itertools.combinations(entries, 2) if pair[0][0] != pair[1][0]]
    return next(((changes, lay) for changes, lay in tries if same(lay, changes)), (None, layouts[0]))


def difference(kind, lay, mine, x):
    try:
        with torch.no_grad():
            ours = LECTURES[kind][0](lay, x, LECTURES[kind][1])
        return f"by {(mine - ours).abs().max().item():.4g}" if mine.shape == ours.shape else \
            f"(its output is {tuple(mine.shape)}, the lecture's {tuple(ours.shape)})"
    except Exception: # the lecture's computation can't be made with the learner's layers
        return "from the lecture's"


# ------------ what a part's layers say, and the words for it

def stage_of(m, kind, lay, ctx):
    """The stage of the lecture that a part's layers belong to (7: gpt.py's)."""
    inside = [s for s in m.modules() if s is not m]
    norms = any(ctx.role_of(s) == 'LayerNorm' for s in inside)
    if kind == 'the model':
        kinds = [ctx.role_of(b) for b in lay['body']]
        if lay['bigram'] or 'Block' not in kinds:
            return 1 if lay['bigram'] or not kinds else 4 if 'FeedForward' in kinds else \
                3 if set(kinds) - {'Head'} else 2
        return 5 if not norms else 7 if any(isinstance(s, nn.Dropout) for s in inside) else 6
    if kind in ('Block', 'MultiHeadAttention', 'fused attention'):
        return (7 if norms else 5) if kind == 'Block' else 7 if lay['proj'] is not None else 3
    return 4 if kind == 'FeedForward' and len(lay['linears']) == 1 else 7


def structure(kind, m, lay, stage, context, ctx):
    """What a part's layers say, where its output can't: STRUCTURE's keys, for the stage of its context."""
    found = []
    if kind in ('MultiHeadAttention', 'fused attention') and lay['proj'] is None and context >= 5:
        found.append('no proj')
    if kind == 'FeedForward':
        linears = lay['linears']
        found += ['one linear'] * (len(linears) == 1 and context >= 5)
        found += ['not 4x'] * (len(linears) == 2 and linears[0].out_features != 4 * linears[0].in_features)
    found += ['no norms'] * (kind == 'Block' and stage < 6 and context >= 6)
    if kind in ('Head', 'fused attention'):
        found += ['qkv bias'] * any(c.bias is not None for _, c in layers(m, nn.Linear)[:3 if kind == 'Head' else 1])
    if kind == 'the model':
        found += lay['structure'] + ['no ln_f'] * (lay['final'] is None and stage >= 6)
        if lay['pos'] is None and not lay['bigram']:
            found.append('rotary' if any(type(s) in ctx.rotary for s in m.modules()) else 'no positions')
    return found


def verdict(changes, keys, stage, never, differs=''):
    """The words for a part: the mistakes named, else matches (at its stage, as the video did, a variant)."""
    said = [(kind, words) for _, _, kind, words in changes or ()] + [STRUCTURE.get(k, k) for k in keys]
    mistakes = list(dict.fromkeys(w for k, w in said if k == 'mistake'))
    tail = f"; your {', '.join(never)} {'is' if len(never) == 1 else 'are'} defined but never used" if never else ''
    if changes is None:
        return f"differs {differs}; none of the catalogued mistakes, alone or in pairs, gives its output" + \
            ''.join(f"; and likely {w}" for w in mistakes) + tail, False
    if mistakes:
        return "differs: likely " + '; and '.join(mistakes) + tail, False
    line = 'matches' + (f" stage {stage} ({', '.join(STAGES[stage])})" if stage < 7 else '')
    line += ', as in the video' * any(k == 'video' for k, _ in said)
    notes = [w if k == 'video' else f"a variant, {w}" for k, w in dict.fromkeys(said)]
    return line + (': ' + '; '.join(notes) if notes else '') + tail, True
