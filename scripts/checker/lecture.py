"""
What the checker knows of the lecture: the names learners give its settings and layers, its stages, each
part's computation (on the learner's own layers, `lay`), the catalogue of mistakes and variants, and what a
module of the learner's is, whatever its name: by its layers, and by whether its positions hear each other.
"""
import contextlib, itertools, math

import torch
import torch.nn as nn
from torch.nn import functional as F

# a setting, and the names learners give it (compared in lower case, without underscores)
SETTINGS = {
    'n_embd': 'n_embd n_embed n_embedding n_embeddings d_model emb_dim embed_dim embd_dim embedding_dim '
              'embedding_size embed_size emb_size embd_size hidden_size hidden_dim d_emb model_dim dim width c '
              'channels n_embds num_embed num_embd emb',
    'n_head': 'n_head n_heads num_heads num_head nhead nheads heads head_count n_attn_heads num_attention_heads h',
    'n_layer': 'n_layer n_layers num_layers nlayers layers depth n_block n_blocks num_blocks num_block n_decoder '
               'num_decoder_layers l',
    'block_size': 'block_size context_length context_len context_size ctx_len ctx_size seq_len seq_length '
                  'max_seq_len sequence_length max_len max_length n_ctx ctx context max_context block '
                  'context_window max_seq_length n_positions',
    'head_size': 'head_size head_dim d_head d_k dk hs head_dimension',
    'ffwd_size': 'd_ff dff ff_dim ffn_dim ffwd_dim dim_ff dim_feedforward inner_dim mlp_dim d_inner ff_size ffn_size '
                 'ffwd_size intermediate_size hidden_dim_ff',
    'dropout': 'dropout dropout_rate dropout_p p_dropout drop drop_rate dropout_prob pdrop resid_pdrop p_drop',
    'vocab_size': 'vocab_size n_vocab vocab num_tokens n_tokens vocab_len vocabulary_size num_chars n_chars '
                  'vocab_dim tgt_vocab_size v', 'bias': 'bias use_bias', 'device': 'device'}
norm = lambda name: name.lower().replace('_', '')
MEANING = {norm(n): m for m, names in SETTINGS.items() for n in names.split()}
# what a value must be to be taken for a setting
PLAUSIBLE = {'size': lambda v: type(v) is int and v >= 1, 'dropout': lambda v: type(v) in (int, float) and 0 <= v < 1,
             'bias': lambda v: type(v) is bool, 'device': lambda v: isinstance(v, (str, torch.device))}
# what the file never sets is the lecture's final config
LECTURE = dict(n_embd=384, n_head=6, n_layer=6, block_size=256, head_size=64, ffwd_size=1536, dropout=0.2,
               vocab_size=65, bias=True, device='cpu')
# a parameter by one of these names takes the settings as one object
CONFIGS = 'config cfg conf args params hparams hp settings opt opts options hyperparams model_config gpt_config'
# a layer's role in its part, and the names learners give it
LAYERS = {
    'key': 'key k keys w_k k_proj to_k key_proj k_linear key_layer linear_k wk w_key',
    'query': 'query q queries w_q q_proj to_q query_proj q_linear query_layer linear_q wq w_query',
    'value': 'value v values w_v v_proj to_v value_proj v_linear value_layer linear_v wv w_value'}
LAYER = {norm(n): m for m, names in LAYERS.items() for n in names.split()}
# stage: (what it added, where in the video); 7 is gpt.py's model
STAGES = {1: ('bigram', '22:11'), 2: ('one self-attention head', '1:02:00'), 3: ('multi-head attention', '1:21:59'),
          4: ('feed-forward', '1:24:25'), 5: ('residual connections', '1:26:48'), 6: ('LayerNorm', '1:32:51'),
          7: ('scaled up, dropout', '1:37:49')}
ATTENTIONS = ('Head', 'MultiHeadAttention', 'fused attention')

# ------------ each part as the lecture computes it; o: the options, which the catalogue below changes

def out_of(result):
    """The output tensor of a part that returns (out, ...), {'logits': ...} or out."""
    result = result.get('logits', next(iter(result.values()), None)) if isinstance(result, dict) else result
    return result[0] if isinstance(result, (tuple, list)) and result else result

def attend(q, k, v, x, o):
    """softmax(q @ k^T * scale, the future masked) @ v, on (..., T, hs) each; v None: no value layer."""
    T, hs = q.shape[-2], q.shape[-1]
    q, k = (rotate(q, o['rotary']), rotate(k, o['rotary'])) if o['rotary'] else (q, k)
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
    a, b = (t[..., 0::2], t[..., 1::2]) if kind == 'pairs' else (t[..., :d // 2], t[..., d // 2:])
    turned = (a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos())
    return torch.stack(turned, -1).flatten(-2) if kind == 'pairs' else torch.cat(turned, -1)

def mha(lay, x, o):
    heads = [attend(*qkv_of(h)[0][0](x), x, dict(ATTENTION, rotary=o['rotary'])) if o.get('rotary') else out_of(h(x))
             for h in lay['heads']] # (rotary: the heads' queries and keys turned here, by their own layers)
    out = torch.cat(heads, dim=-1) # (B,T,nh*hs)
    return lay['proj'](out) if lay['proj'] is not None and o.get('proj', True) else out

def fused(lay, x, o):
    """Every head at once from (B,T,X) queries, keys and values, as nanoGPT's CausalSelfAttention."""
    q, k, v = lay['qkv'](x)
    (B, T, X), nh = q.shape, lay['n_head']
    split = lambda t: t.reshape(B, nh, T, X // nh) if o['split'] == 'view' else t.view(B, T, nh, -1).transpose(1, 2)
    out = attend(split(q), split(k), split(v), x, o) # (B,nh,T,hs)
    out = out.reshape(B, T, X) if o['merge'] == 'view' else out.transpose(1, 2).reshape(B, T, X)
    return lay['proj'](out) if lay['proj'] is not None and o['proj'] else out

def ffwd(lay, x, o):
    """Linear, ReLU, Linear (the video at 1:24:25: Linear, ReLU); a LayerNorm first, where it has one."""
    x, linears = lay['norm'](x) if lay['norm'] is not None else x, lay['linears']
    if o['act'] == 'swiglu': # three: a gate, its values, and back to n_embd
        return linears[2](F.silu(linears[0](x)) * linears[1](x))
    act = {'relu': F.relu, 'none': lambda t: t, 'gelu': F.gelu, 'silu': F.silu,
           'tanh': lambda t: F.gelu(t, approximate='tanh'), 'relu2': lambda t: F.relu(t).square()}[o['act']]
    for i, linear in enumerate(linears):
        x = act(linear(x)) if i < len(linears) - 1 or len(linears) == 1 else linear(x)
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
    x, pos, T = lay['tok'](idx), lay['pos'], idx.shape[1] # (B,T,C)
    if lay['bigram']:
        return x
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

ATTENTION = dict(scale='hs', mask='before', dim=-1, kq=False, values=True, rotary=None)
LECTURES = { # role: (its computation, its options as the lecture has them)
    'Head': (lambda lay, x, o: attend(*lay['qkv'](x), x, o), ATTENTION),
    'MultiHeadAttention': (mha, dict(proj=True)),
    'fused attention': (fused, dict(ATTENTION, split='heads', merge='heads', proj=True)),
    'FeedForward': (ffwd, dict(act='relu')), 'Block': (block, dict(residual='both', norm='pre', swap=False)),
    'the model': (model, dict(positions='table', final=True, body=True)),
    'LayerNorm': (layernorm, dict(var='biased', rms=False, dim=-1))}

# role: [(option, value, kind, what it is, where the line cited shows it)]. Each entry changes one option of
# that role's computation above; kind: a 'mistake', what the 'video' did before the published code, or a
# 'variant' other code has (named, not counted against the part). Where no one entry gives the learner's
# output, they are tried in pairs.
VIDEO_SCALE = ('scaled by C**-0.5, C = n_embd, as the video from 1:16:56 (C from x.shape); the published code and '
               'gpt.py scale by head_size**-0.5')
ROPE = 'rotary position embeddings (RoPE) on q and k; the lecture adds a position table'
HEAD = [
    ('scale', 'none', 'mistake', 'the 1/sqrt(head_size) scale is missing', 'scores'),
    ('scale', 'C', 'video', VIDEO_SCALE, 'scores'),
    ('scale', 'times', 'mistake', 'multiplied by sqrt(head_size), not divided', 'scores'),
    ('scale', 'full', 'mistake', 'divided by head_size, not by its square root', 'scores'),
    ('mask', 'none', 'mistake', 'no causal mask: the future talks to the past', 'mask'),
    ('mask', 'after', 'mistake', 'the mask applied after the softmax', 'mask'),
    ('mask', 'zero', 'mistake', 'the future filled with 0, not -inf, before the softmax', 'mask'),
    ('dim', -2, 'mistake', 'the softmax over the wrong dimension (dim=1, not -1)', 'softmax'),
    ('dim', 0, 'mistake', 'the softmax over the batch (dim=0), not over the keys (dim=-1)', 'softmax'),
    ('kq', True, 'mistake', 'k @ q^T for q @ k^T', 'scores'),
    ('values', False, 'mistake', 'x itself aggregated, not value(x)', 'values'),
    ('rotary', 'pairs', 'variant', ROPE, None), ('rotary', 'halves', 'variant', ROPE, None)]
NO_PROJ = ('proj', False, 'mistake', 'no proj after the heads', 'cat')
CATALOGUE = {
    'Head': HEAD, 'MultiHeadAttention': [NO_PROJ, *HEAD[-2:]],
    'fused attention': HEAD[:-3] + HEAD[-2:] + [NO_PROJ, # (x split in heads is not aggregated)
        ('split', 'view', 'mistake', 'the heads split with view(B, nh, T, hs), not view(B, T, nh, hs).transpose(1, 2)',
         'split'),
        ('merge', 'view', 'mistake', 'the heads joined with view(B, T, C) before transposing them back', 'merge')],
    'FeedForward': [
        ('act', 'none', 'mistake', 'no ReLU between the two Linear layers', 'linear'),
        ('act', 'gelu', 'variant', "GELU for ReLU (the lecture's is ReLU)", None),
        ('act', 'tanh', 'variant', "GELU (tanh approximation) for ReLU (the lecture's is ReLU)", None),
        ('act', 'silu', 'variant', "SiLU for ReLU (the lecture's is ReLU)", None),
        ('act', 'relu2', 'variant', "ReLU squared for ReLU (the lecture's is ReLU)", None),
        ('act', 'swiglu', 'variant', "SwiGLU: silu(x W) * (x V), then back (the lecture's is ReLU)", None)],
    'Block': [
        ('residual', 'none', 'mistake', 'no residual connections (x = x + ...)', 'sa'),
        ('residual', 'ffwd', 'mistake', 'no residual connection around the attention', 'sa'),
        ('residual', 'sa', 'mistake', 'no residual connection around the feed-forward', 'ffwd'),
        ('norm', 'post', 'mistake', 'post-norm, as the paper: LayerNorm after each add, not before each part', 'ln'),
        ('norm', 'stream', 'mistake', 'LayerNorm applied to x itself (x = ln(x)), not to the input of each part', 'ln'),
        ('norm', 'same', 'mistake', 'one LayerNorm before both parts, not ln1 and ln2', 'ffwd'),
        ('swap', True, 'mistake', 'the feed-forward before the attention', 'ffwd')],
    'the model': [
        ('positions', 'none', 'mistake', 'no position embedding', 'tok'),
        ('positions', 'tokens', 'mistake', 'the position table looked up with idx, not with torch.arange(T)', 'pos'),
        ('final', False, 'mistake', 'no final LayerNorm (ln_f) before lm_head', 'head'),
        ('body', False, 'mistake', 'the blocks never applied between the embeddings and lm_head', 'head')],
    'LayerNorm': [
        ('var', 'unbiased', 'variant', "the unbiased variance (x.var()), where nn.LayerNorm's is biased", None),
        ('rms', True, 'variant', 'RMSNorm: no mean subtracted', None),
        ('dim', 0, 'mistake', 'normalized over the batch (dim 0), as BatchNorm, not over each vector', 'mean')]}
# what the layers of a part say, where its output can't: (kind, words, where the line cited shows it)
STRUCTURE = {
    'no proj': ('mistake', 'no proj after the heads (the lecture adds it with the residual connections)', 'cat'),
    'one linear': ('mistake', 'one Linear layer; from 1:26:48 it is Linear(C, 4C), ReLU, Linear(4C, C)', 'linear'),
    'not 4x': ('mistake', 'not 4x wider inside (the paper: 512 -> 2048 -> 512)', 'linear'),
    'set width': ('variant', "its inner width set by a setting of yours, not 4x (the lecture's 4 * n_embd)", None),
    'no norms': ('mistake', 'no LayerNorm before the attention and the feed-forward (pre-norm, 1:32:51)', 'sa'),
    'one head': ('mistake', 'one head as wide as n_embd, not n_head heads of n_embd // n_head and a proj', 'sa made'),
    'no ln_f': ('mistake', 'no final LayerNorm (ln_f) before lm_head', 'head'),
    'no positions': ('mistake', 'no position embedding', 'tok'),
    'last of blocks': ('video', 'the last LayerNorm as the last of blocks, as the video from 1:32:51; the published '
                                'code names it ln_f', None),
    'qkv bias': ('variant', "bias in key, query and value (the lecture's have none)", None),
    'tied': ('variant', "lm_head shares the token embedding's weights (the lecture's are separate)", None),
    'rotary': ('variant', 'rotary position embeddings (RoPE) in the attention, for a position table', None),
    'fixed positions': ('variant', 'a fixed (sinusoidal) position table; the lecture learns one', None)}

# ------------ what a module of the learner's is, whatever its name, and how its layers map onto the lecture's

layers = lambda m, kind: [(n, c) for n, c in m.named_children() if isinstance(c, kind)]
n_heads = lambda m: next((v for k, v in vars(m).items() if MEANING.get(norm(k)) == 'n_head' and type(v) is int), None)
vocab = lambda m: next(e.num_embeddings for e in m.modules() if isinstance(e, nn.Embedding))

class Context:
    """What the parts share: settings, roles, captured inputs, the parts checked, the classes rotating q, k."""
    def __init__(self, settings):
        self.settings, self.memo, self.inputs, self.parts, self.rotary = settings, {}, {}, set(), set()
    def role_of(self, m):
        if id(m) not in self.memo:
            self.memo[id(m)] = None # a module inside itself is nothing, and one the checker can't make sense of
            with contextlib.suppress(Exception):
                self.memo[id(m)] = find_role(m, self)
        return self.memo[id(m)]
    def example(self, m):
        """(args, kwargs) of the shape m's model gave it, else guessed; new numbers (a NaN upstream stays there)."""
        g = torch.Generator().manual_seed(0)
        (x, *rest), kwargs = self.inputs.get(id(m)) or ((torch.zeros(2, block_size(m, self.settings), *[] if any(
            isinstance(e, nn.Embedding) for e in m.modules()) else [width(m)]),), {})
        return (torch.randn(x.shape, generator=g) if x.dim() == 3 else torch.randint(vocab(m), x.shape, generator=g),
                *rest), kwargs

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

def mixes_tokens(m, ctx):
    """Whether a part's outputs in the middle hear the first or the last position's input; None: it can't run."""
    with contextlib.suppress(Exception):
        (x, *rest), kwargs, outs = *ctx.example(m), []
        changed = x.clone()
        changed[:, [0, -1]] = torch.randn(x.shape[0], 2, x.shape[-1])
        for each in (x, changed):
            with torch.no_grad(), torch.random.fork_rng(): # (the same random numbers: dropout left on mixes nothing)
                torch.manual_seed(0)
                outs.append(out_of(m.eval()(each, *rest, **kwargs))[:, 1:-1])
        return not torch.allclose(*outs, rtol=1e-4, atol=1e-5)

def find_role(m, ctx):
    if isinstance(m, (nn.LayerNorm, getattr(nn, 'RMSNorm', nn.LayerNorm))):
        return 'LayerNorm'
    if type(m).__module__.startswith('torch.') and not isinstance(m, (nn.Sequential, nn.ModuleList)) or \
            not list(m.parameters()): # a layer of PyTorch's, or one without weights
        return None
    if isinstance(m, (nn.ModuleList, nn.ModuleDict)):
        kinds = {ctx.role_of(s) for s in m.children()} - {None, 'LayerNorm'}
        return 'blocks' if 'Block' in kinds else kinds.pop() if len(kinds) == 1 else None
    if any(isinstance(s, nn.Embedding) for s in m.modules()):
        return 'the model'
    if not any(isinstance(s, nn.Linear) for s in m.modules()):
        return 'LayerNorm' if all(p.dim() == 1 for p in m.parameters()) else None
    kids, mixes, name = [ctx.role_of(c) for c in m.children()], mixes_tokens(m, ctx), type(m).__name__.lower()
    if mixes is None: # it can't run alone: its name says what it is meant to be
        mixes = not any(w in name for w in ('feed', 'mlp', 'ffn', 'ffwd'))
    if 'Block' in kids or not mixes:
        return 'blocks' if 'Block' in kids else 'FeedForward'
    if 'FeedForward' in kids and set(kids) & set(ATTENTIONS):
        return 'Block'
    if set(kids) & set(ATTENTIONS):
        return 'MultiHeadAttention'
    linears = [c for c in m.children() if isinstance(c, nn.Linear)]
    fused = len(linears) > 3 or any(c.out_features == 3 * c.in_features for c in linears) or n_heads(m)
    return 'fused attention' if fused or 'multi' in name else 'Head'

def qkv_of(m):
    """[ways to make (q, k, v) with m's Linears]: by name, else every order (v None: none), else fused; the rest."""
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
                      f"{', '.join(n for n, _ in layers(m, nn.Linear)) or 'none'})")

def fused_layouts(m, ctx):
    makers, rest = qkv_of(m)
    X = makers[0](torch.zeros(1, 1, width(m)))[0].shape[-1]
    counts = [n_heads(m)] if n_heads(m) and X % n_heads(m) == 0 else dict.fromkeys( # (its own count, if it keeps one)
        h for h in [ctx.settings('n_head'), *range(1, 65)] if X % h == 0)
    return [dict(qkv=q, n_head=h, proj=rest[-1] if rest else None) for h in counts for q in makers]

def block_layouts(m, ctx):
    kids = list(m.named_children())
    sa = next((c for _, c in kids if ctx.role_of(c) in ATTENTIONS and not isinstance(c, nn.ModuleList)), None)
    ff = next((c for _, c in kids if ctx.role_of(c) == 'FeedForward'), None)
    heads = next((c for _, c in kids if isinstance(c, nn.ModuleList) and ctx.role_of(c) == 'Head'), None)
    if sa is None and heads is not None: # the heads and their proj in the Block itself
        sa = lambda x: mha(dict(heads=heads, proj=next((c for _, c in layers(m, nn.Linear)[::-1]), None)), x, {})
    if sa is None or ff is None:
        raise LookupError(f"has no {'attention' if sa is None else 'feed-forward'} part that can be told apart")
    norms = [c for _, c in kids if ctx.role_of(c) == 'LayerNorm'] # (ln1, ln2 in the order they are made, first)
    pairs = [list(p) for p in itertools.permutations(norms, 2)] or [[c, c] for c in norms[:1]]
    return [dict(sa=sa, ffwd=ff, norms=p) for p in pairs or [[nn.Identity(), nn.Identity()]]]

def model_layouts(m, ctx):
    kids = [kid for n, c in m.named_children() # (those of a ModuleDict too: nanoGPT's transformer)
            for kid in (c.named_children() if isinstance(c, nn.ModuleDict) else [(n, c)])]
    embeddings = [c for _, c in kids if isinstance(c, nn.Embedding)] or \
        [s for s in m.modules() if isinstance(s, nn.Embedding)]
    head = next((c for _, c in kids[::-1] if isinstance(c, nn.Linear) and
                 c.out_features in {e.num_embeddings for e in embeddings}), None)
    tok = next((e for e in embeddings if head is None or e.num_embeddings == head.out_features), embeddings[0])
    lay = dict(tok=tok, head=head, body=[], final=None, bigram=head is None and tok.embedding_dim == tok.num_embeddings,
               pos=next((e for e in embeddings if e is not tok), None), structure=[], extra=[])
    C, T = tok.embedding_dim, block_size(m, ctx.settings)
    tables = [(t, fixed) for fixed, items in ((False, m.parameters(recurse=False)), (True, m.buffers(recurse=False)))
              for t in items if t.shape[-1] == C and t.numel() // C >= T and t.numel() % C == 0]
    if lay['pos'] is None and tables: # a table of its own: a Parameter (learned) or a buffer (fixed)
        lay['pos'], lay['structure'] = tables[0][0], ['fixed positions'] * tables[0][1]
    for _, c in kids:
        kind = ctx.role_of(c)
        if kind == 'blocks' and not any(b is a for b in c for a in lay['body']): # (one list in two containers: once)
            lay['body'] += [b for b in c if ctx.role_of(b) != 'LayerNorm']
            if isinstance(c, nn.Sequential) and ctx.role_of(c[-1]) == 'LayerNorm':
                lay['final'], lay['structure'] = c[-1], lay['structure'] + ['last of blocks']
        elif kind == 'LayerNorm':
            lay['final'] = c
        elif kind in (*ATTENTIONS, 'FeedForward', 'Block'):
            lay['body'].append(c)
    if any(ctx.role_of(b) == 'Block' for b in lay['body']): # from stage 5 the body is Blocks, nothing else
        lay['extra'] = [b for b in lay['body'] if ctx.role_of(b) != 'Block']
    lay['structure'] += ['tied'] * (head.weight is tok.weight if head is not None else not lay['bigram'])
    return [lay]

def ffwd_layouts(m, ctx):
    """Its Linears, and a LayerNorm before the first of them (the Block's ln2, moved inside)."""
    inside = [s for s in list(m.modules())[1:] if isinstance(s, nn.Linear) or ctx.role_of(s) == 'LayerNorm']
    first = inside[0] if inside and not isinstance(inside[0], nn.Linear) else None
    return [dict(linears=[s for s in inside if isinstance(s, nn.Linear)], norm=first)]

def norm_layouts(m, ctx):
    ones = [p for p in m.parameters() if p.dim() == 1]
    eps = next((v for k, v in vars(m).items() if 'eps' in k and type(v) is float), 1e-5)
    return [dict(weight=ones[0], bias=ones[1] if len(ones) > 1 else None, eps=eps)]

LAYOUTS = { # role: the ways the learner's layers may map to the lecture's (all that its names leave open)
    'Head': lambda m, ctx: [dict(qkv=q) for q in qkv_of(m)[0]], 'fused attention': fused_layouts,
    'MultiHeadAttention': lambda m, ctx: [dict(heads=[h for c in m.children() for h in (
        c if isinstance(c, nn.ModuleList) else [c]) if ctx.role_of(h) in ATTENTIONS], proj=next(
        (c for _, c in layers(m, nn.Linear)[::-1]), None))],
    'Block': block_layouts, 'the model': model_layouts, 'LayerNorm': norm_layouts, 'FeedForward': ffwd_layouts}

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

# ------------ the learner's part beside the lecture's

TOL = 1e-4 # relative: the same math in another order differs by about 1e-6; a mistake, by far more

def close(a, b):
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.shape != b.shape:
        return False
    a, b = (t.float().nan_to_num(1e4, 1e4, -1e4) for t in (a, b))
    return (a - b).abs().max().item() <= TOL * max(1.0, b.abs().max().item())

def search(kind, layouts, mine, x):
    """(the catalogue's changes, none, one or two, and the layout that give the learner's output) or (None, ...)."""
    (compute, defaults), entries = LECTURES[kind], CATALOGUE.get(kind, [])
    def same(lay, changes):
        with contextlib.suppress(Exception), torch.no_grad(): # (a change their layers can't make: False)
            return close(mine, compute(lay, x, dict(defaults, **{e[0]: e[1] for e in changes})))
        return False
    tries = [((), lay) for lay in layouts] + [((e,), lay) for e in entries for lay in layouts] + \
        [(pair, layouts[0]) for pair in itertools.combinations(entries, 2) if pair[0][0] != pair[1][0]]
    return next(((changes, lay) for changes, lay in tries if same(lay, changes)), (None, layouts[0]))
