"""
What the checker knows of the lecture: the names learners give its settings and layers, its stages, each part's
computation step by step (on the learner's own layers, `lay`), and the changes learners make to it.
"""
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
                  'context_window max_seq_length n_positions ctx_win context_win',
    'head_size': 'head_size head_dim d_head d_k dk hs head_dimension',
    'ffwd_size': 'd_ff dff n_dff n_ff ff_dim ffn_dim ffwd_dim dim_ff dim_feedforward inner_dim mlp_dim '
                 'd_inner ff_size ffn_size ffwd_size intermediate_size hidden_dim_ff',
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
# (as norm() reads a name: model_config)
CONFIGS = 'config cfg conf args params hparams hp settings opt opts options hyperparams modelconfig gptconfig'
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
SEQUENCES = (nn.ModuleList, nn.Sequential)

# ------------ each part as the lecture computes it, step by step

class Steps:
    """at(name, value, before): a step's value; swaps: 'skip' (its value is before) or the learner's value."""
    def __init__(self, swaps=None):
        self.swaps, self.values, self.before, self.made = swaps or {}, {}, {}, {}
    def __call__(self, name, value, before=None):
        swap, self.made[name], self.before[name] = self.swaps.get(name), value, before
        if swap is None:
            self.values[name] = value
        else:
            self.values[name] = before if swap == 'skip' else swap(value)
        return self.values[name]

# each step's value in the lecture's words; what a learner's code that skips it lacks
STEP = {'q': 'the queries', 'k': 'the keys', 'v': 'the values', 'q @ k^T': 'the affinities q @ k^T',
        'scaled': 'the affinities scaled by head_size**-0.5', 'masked': 'the future masked with -inf before the softmax',
        'softmax': 'the softmax over the keys (dim=-1)', 'masked after': 'the weights with the future zeroed',
        'wei @ v': 'the weighted sum of the values, wei @ v', 'merged': 'the heads side by side again, (B, T, C)',
        'cat': "the heads' outputs side by side (torch.cat)", 'proj': 'proj of the heads side by side',
        'linear 1': 'the first Linear (n_embd to 4 * n_embd)', 'relu': 'the ReLU after the first Linear',
        'linear 2': 'the second Linear (back to n_embd)', 'ln1': "ln1 of the Block's input, before the attention",
        'sa': 'the attention of ln1(x)', 'x + sa': 'the residual connection x + sa(ln1(x))',
        'ln2': 'ln2 of x, before the feed-forward', 'ffwd': 'the feed-forward of ln2(x)',
        'x + ffwd': 'the residual connection x + ffwd(ln2(x))', 'tok': 'the token embeddings',
        'pos': 'the position embeddings of 0 .. T-1', 'x': 'the position embedding added to the token embedding',
        'blocks': 'the Blocks applied in turn', 'ln_f': 'ln_f after the last Block', 'logits': 'lm_head, the logits',
        'mean': 'the mean of each vector', 'variance': 'the variance of each vector (biased)',
        'normalized': '(x - mean) / sqrt(variance + eps)', 'affine': 'the normalized x times its weight, plus its bias',
        'output': "the part's output"}
MISSING = {'scaled': 'the 1/sqrt(head_size) scale is missing',
           'masked': 'no causal mask: the future talks to the past',
           'softmax': 'no softmax: the masked affinities are used as the weights', 'proj': 'no proj after the heads',
           'relu': 'no ReLU between the two Linear layers', 'x + sa': 'no residual connection around the attention',
           'x + ffwd': 'no residual connection around the feed-forward', 'x': 'no position embedding',
           'ln_f': 'no final LayerNorm (ln_f) before lm_head', 'mean': 'no mean subtracted',
           'blocks': 'the blocks never applied between the embeddings and lm_head',
           'ln1': "no LayerNorm (ln1) of the Block's input before the attention",
           'ln2': 'no LayerNorm (ln2) of x before the feed-forward'}

def out_of(result):
    """The tensor of a part that returns (out, ...), (loss, out), {'logits': ...} or out."""
    result = result.get('logits', next(iter(result.values()), None)) if isinstance(result, dict) else result
    if isinstance(result, (tuple, list)) and result: # (beside it a loss: None, or one number)
        return next((t for t in result if isinstance(t, torch.Tensor) and t.dim()), result[0])
    return result

def attend(q, k, v, x, o, at):
    """wei = softmax(q @ k^T * head_size**-0.5, the future masked), then wei @ v; each (..., T, hs)."""
    T, hs = q.shape[-2], q.shape[-1]
    if o['rotary']:
        q, k = rotate(q, o['rotary']), rotate(k, o['rotary'])
    scale = {'hs': hs**-0.5, 'C': x.shape[-1]**-0.5, 'times': hs**0.5, 'full': 1 / hs}[o['scale']]
    wei = at('q @ k^T', k @ q.transpose(-2, -1) if o['kq'] else q @ k.transpose(-2, -1)) # (..., T, T)
    wei = at('scaled', wei * scale, wei)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    if o['mask'] == 'before':
        wei = at('masked', wei.masked_fill(future, float('-inf')), wei)
    wei = at('softmax', F.softmax(wei, dim=-1), wei)
    if o['mask'] == 'after':
        wei = at('masked after', wei.masked_fill(future, 0.0), wei)
    return at('wei @ v', wei @ (v if o['values'] else x)) # (..., T, hs)

def rotate(t, kind):
    """RoPE (base 10000) on (..., T, d): pairs (2i, 2i+1), or the two halves."""
    T, d = t.shape[-2], t.shape[-1]
    angles = torch.arange(T).float()[:, None] * 10000 ** (-torch.arange(0, d, 2).float() / d) # (T, d/2)
    a, b = (t[..., 0::2], t[..., 1::2]) if kind == 'pairs' else (t[..., :d // 2], t[..., d // 2:])
    turned = (a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos())
    return torch.stack(turned, -1).flatten(-2) if kind == 'pairs' else torch.cat(turned, -1)

def head(lay, x, o, at):
    q, k, v = lay['qkv'](x) # (no value layer: x itself, which STRUCTURE names)
    return attend(at('q', q), at('k', k), at('v', x if v is None else v), x, o, at)

def mha(lay, x, o, at):
    out = at('cat', torch.cat([out_of(h(x)) for h in lay['heads']], dim=-1)) # (B,T,nh*hs)
    return at('proj', lay['proj'](out), out) if lay['proj'] is not None else out

def fused(lay, x, o, at):
    """Every head at once, as nanoGPT's CausalSelfAttention."""
    q, k, v = lay['qkv'](x)
    (B, T, X), nh = q.shape, lay['n_head']
    def split(t): # (B,nh,T,hs)
        return t.reshape(B, nh, T, X // nh) if o['split'] == 'view' else t.view(B, T, nh, -1).transpose(1, 2)
    out = attend(at('q', split(q)), at('k', split(k)), at('v', split(v)), x, o, at)
    out = out.reshape(B, T, X) if o['merge'] == 'view' else out.transpose(1, 2).reshape(B, T, X)
    out = out if lay.get('merge') is None else out[..., lay['merge']] # (their order of the channels)
    out = at('merged', out, out)
    return at('proj', lay['proj'](out), out) if lay['proj'] is not None else out

GLU = {'swiglu': F.silu, 'geglu': F.gelu}
ACTIVATIONS = {'relu': F.relu, 'gelu': F.gelu, 'silu': F.silu, 'tanh': lambda t: F.gelu(t, approximate='tanh'),
               'relu2': lambda t: F.relu(t).square()}

def ffwd(lay, x, o, at):
    """Linear, ReLU, Linear (at 1:24:25: Linear, ReLU); a LayerNorm first, where it has one."""
    x, linears = lay['norm'](x) if lay['norm'] is not None else x, lay['linears']
    if o['act'] in GLU: # a gate and its values (two Linear layers, or one of double width), then back
        gate, values = (linears[0](x), linears[1](x)) if len(linears) == 3 else linears[0](x).chunk(2, dim=-1)
        return at(f'linear {len(linears)}', linears[-1](GLU[o['act']](gate) * values))
    for i, linear in enumerate(linears, 1):
        x = at(f'linear {i}', linear(x))
        if i < len(linears) or i == 1:
            x = at('relu' if i == 1 else f'relu {i}', ACTIVATIONS[o['act']](x), x)
    return x

def block(lay, x, o, at):
    """x = x + sa(ln1(x)), then x = x + ffwd(ln2(x)): pre-norm (the paper's norm is after each add)."""
    (ln1, ln2), call = lay['norms'], lay['call']
    branches = [('sa', lay['sa'], 'ln1', ln1), ('ffwd', lay['ffwd'], 'ln2', ln1 if o['norm'] == 'same' else ln2)]
    for name, f, n, ln in branches[::-1] if o['swap'] else branches:
        if o['norm'] == 'post': # x = ln(x + f(x))
            h = at(name, call(f, x))
            x = at(n, ln(at(f'x + {name}', x + h, h)), x + h)
            continue
        if o['norm'] == 'stream': # x = ln(x); x = x + f(x)
            x = at(n, ln(x), x)
        h = at(name, call(f, x if o['norm'] in ('stream', 'branch') else at(n, ln(x), x)))
        h = at(n, ln(h), h) if o['norm'] == 'branch' else h # x = x + ln(f(x))
        x = at(f'x + {name}', x + h, h) if o['residual'] else h # (before 1:26:48: none)
    return x

def model(lay, idx, o, at):
    x, pos, T = at('tok', lay['tok'](idx)), lay['pos'], idx.shape[1] # (B,T,C)
    if lay['bigram']:
        return x
    if pos is not None:
        table = pos(torch.arange(T)) if isinstance(pos, nn.Embedding) else pos.reshape(-1, x.shape[-1])[:T]
        x = at('x', x + at('pos', pos(idx) if o['positions'] == 'tokens' else table), x) # (T,C) each
    if lay['blocks']:
        before = x
        for b in [b for b in lay['body'] if b not in lay['extra']]: # (a part run beside the Blocks: not here)
            x = lay['call'](b, x)
        x = at('blocks', x, before)
    if lay.get('inline'): # (one Block, written out in the model's forward)
        x = at('blocks', block(lay['inline'], x, LECTURES['Block'][1], lambda name, v, before=None: v), x)
    for name, b in [] if lay['blocks'] else lay['named']: # before stage 5: the heads, the feed-forward
        x = at(f'`{name}`', lay['call'](b, x), x)
    x = at('ln_f', lay['final'](x), x) if lay['final'] is not None else x
    logits = lay['head'](x) if lay['head'] is not None else x @ lay['tok'].weight.T # (B,T,vocab)
    return at('logits', logits, x)

def layernorm(lay, x, o, at):
    """(x - mean) / sqrt(variance + eps) (DyT: tanh(alpha * x)), times its weight, plus its bias."""
    dims = o['dim']
    if o['dyt']:
        x = at('normalized', torch.tanh(lay['alpha'] * x))
    else:
        mean = 0 if o['rms'] else at('mean', x.mean(dims, keepdim=True))
        var = x.var(dims, keepdim=True) if o['var'] == 'unbiased' else (x - mean).pow(2).mean(dims, keepdim=True)
        x = at('normalized', (x - mean) / torch.sqrt(at('variance', var) + lay['eps']))
    return at('affine', x * lay['weight'] + (lay['bias'] if lay['bias'] is not None else 0), x)

ATTENTION = dict(scale='hs', mask='before', kq=False, values=True, rotary=None)
LECTURES = { # role: (its computation, its options as the lecture has them)
    'Head': (head, ATTENTION), 'MultiHeadAttention': (mha, {}),
    'fused attention': (fused, dict(ATTENTION, split='heads', merge='heads')),
    'FeedForward': (ffwd, dict(act='relu')), 'Block': (block, dict(norm='pre', swap=False, residual=True)),
    'the model': (model, dict(positions='table')),
    'LayerNorm': (layernorm, dict(var='biased', rms=False, dim=-1, dyt=False))}

# role: [(option, value, kind, words, the steps whose lines are shown)]: an option of the role's computation
# changed, where their code reorders or changes a step; a 'mistake', what the 'video' did, or a 'variant'
VIDEO_SCALE = 'scaled by C**-0.5 (C = n_embd), as the video from 1:16:56; the published code: head_size**-0.5'
ROPE = 'rotary position embeddings (RoPE) on q and k, for a position table'
KQ = 'k @ q^T for q @ k^T: the key and query layers trade names (the same computation)'
HEAD = [
    ('scale', 'C', 'video', VIDEO_SCALE, ('scaled',)),
    ('scale', 'times', 'mistake', 'multiplied by sqrt(head_size), not divided', ('scaled',)),
    ('scale', 'full', 'mistake', 'divided by head_size, not by its square root', ('scaled',)),
    ('mask', 'after', 'mistake', 'the mask applied after the softmax', ('masked after',)),
    ('kq', True, 'variant', KQ, ('q @ k^T',)),
    ('values', False, 'mistake', 'x itself aggregated, not value(x)', ('wei @ v',)),
    ('rotary', 'pairs', 'variant', ROPE, None), ('rotary', 'halves', 'variant', ROPE, None)]
HINTS = {'C': r'\bC\b|embd|embed|d_model|x\.shape|x\.size', 'full': r'head|\bhs\b|d_k|dk\b'} # which, if equal
FOR_RELU = "for ReLU (the lecture's is ReLU)"
CATALOGUE = {
    'Head': HEAD, 'fused attention': HEAD[:-3] + HEAD[-2:] + [ # (x split in heads is not aggregated)
        ('split', 'view', 'mistake', 'the heads split with view(B, nh, T, hs), not view(B, T, nh, hs).transpose',
         ('q', 'k', 'v')),
        ('merge', 'view', 'mistake', 'the heads joined with view(B, T, C) before transposing them back', ('merged',))],
    'FeedForward': [('act', 'gelu', 'variant', f"GELU {FOR_RELU}", ('relu',)),
                    ('act', 'tanh', 'variant', f"GELU (tanh approximation) {FOR_RELU}", ('relu',)),
                    ('act', 'silu', 'variant', f"SiLU {FOR_RELU}", ('relu',)),
                    ('act', 'relu2', 'variant', f"ReLU squared {FOR_RELU}", ('relu',)),
                    ('act', 'swiglu', 'variant', f"SwiGLU: silu(x W) * (x V), then back, {FOR_RELU}", ('linear 2', 'linear 3')),
                    ('act', 'geglu', 'variant', f"GeGLU: gelu(x W) * (x V), then back, {FOR_RELU}", ('linear 2', 'linear 3'))],
    'Block': [
        ('norm', 'post', 'mistake', 'post-norm, as the paper: LayerNorm after each add, not before each part',
         ('ln1',)),
        ('norm', 'stream', 'mistake', 'LayerNorm applied to x itself (x = ln(x)), not to the input of each part',
         ('ln1', 'ln2')),
        ('norm', 'branch', 'mistake', "LayerNorm on each part's output (x + ln(sa(x))), not on its input",
         ('ln1', 'ln2')),
        ('norm', 'same', 'mistake', 'one LayerNorm before both parts, not ln1 and ln2', ('ln2',)),
        ('swap', True, 'mistake', 'the feed-forward before the attention', ('ffwd',))],
    'the model': [('positions', 'tokens', 'mistake', 'the position table looked up with idx, not torch.arange(T)',
                   ('pos',))],
    'LayerNorm': [
        ('var', 'unbiased', 'variant', "the unbiased variance (x.var()); nn.LayerNorm's is biased", None),
        ('rms', True, 'variant', 'RMSNorm: no mean subtracted', None),
        ('dyt', True, 'variant', 'DyT: tanh(alpha * x) for the normalization (Transformers without Normalization)',
         ('normalized',)),
        ('dim', 0, 'mistake', 'normalized over the batch (dim 0), as BatchNorm, not over each vector',
         ('mean',)),
        ('dim', 1, 'mistake', 'normalized over the positions (dim 1 of (B, T, C)), not over each vector',
         ('mean',))]}
STRUCTURE = { # what a part's layers say, where its output can't: (kind, words)
    'no proj': ('mistake', 'no proj after the heads (added with the residual connections)'),
    'one linear': ('mistake', 'one Linear layer; from 1:26:48 it is Linear(C, 4C), ReLU, Linear(4C, C)'),
    'not 4x': ('mistake', 'not 4x wider inside (the paper: 512 -> 2048 -> 512)'),
    'set width': ('variant', "its inner width set by a setting of yours, not 4x (the lecture's 4 * n_embd)"),
    'no norms': ('mistake', 'no LayerNorm before the attention and the feed-forward (pre-norm, 1:32:51)'),
    'one head': ('mistake', 'one head as wide as n_embd, not n_head heads of n_embd // n_head and a proj'),
    'no ln_f': ('mistake', 'no final LayerNorm (ln_f) before lm_head'),
    'no lm_head': ('mistake', "no lm_head: the last part's output is taken as the logits, where the "
                              "lecture's lm_head maps n_embd to vocab_size (from 1:02:00)"),
    'early ln_f': ('variant', 'a final LayerNorm before lm_head, which the lecture adds at stage 6 (ln_f, 1:32:51)'),
    'no positions': ('mistake', 'no position embedding'),
    'last of blocks': ('video', 'the last LayerNorm as the last of blocks, as the video from 1:32:51 (ln_f in '
                                'the published code)'),
    'x for v': ('mistake', 'x itself aggregated, not value(x): it has no value layer'),
    'no value': ('mistake', 'it has no value layer: the lecture aggregates value(x)'),
    'qkv bias': ('variant', "bias in key, query and value (the lecture's have none)"),
    'proj no bias': ('variant', "no bias in proj (the lecture's has one)"),
    'ffwd no bias': ('variant', "no bias in the feed-forward's Linear layers (the lecture's have one)"),
    'lm_head no bias': ('variant', "no bias in lm_head (the lecture's has one)"),
    'norm no bias': ('variant', "a LayerNorm without bias (bias=False; the lecture's have one)"),
    'norm no weights': ('variant', "a LayerNorm that learns nothing (elementwise_affine=False; the lecture's "
                                   "learn a scale and a shift)"),
    'fused qkv': ('variant', 'q, k and v from one Linear, split in three (as nanoGPT)'),
    'heads batched': ('variant', "all heads' q, k and v from one Linear each, the heads a batch dimension "
                                 "(as EX1), where the lecture has a Head module per head"),
    'head proj': ('variant', "a Linear of each head's own after wei @ v, where the lecture's Head returns wei @ v "
                             "(and proj comes once, after the heads side by side)"),
    'kv cache': ('variant', "a cache of keys and values its forward can take, for generate (the lecture's "
                            "has none)"),
    'rmsnorm': ('variant', 'RMSNorm for LayerNorm (nn.RMSNorm)'),
    'eps': ('mistake', "a LayerNorm's eps far above 1e-5 (nn.LayerNorm's second argument is eps, not the dropout): "
                       "it divides by sqrt(var + eps)"),
    'tied': ('variant', "lm_head shares the token embedding's weights (the lecture's are separate)"),
    'positions': ('variant', 'positions from the attention (rotary embeddings, ALiBi), not a position table'),
    'fixed positions': ('variant', 'a fixed (sinusoidal) position table; the lecture learns one'),
    'one Block inline': ('variant', "one Block written out in the model's forward (its attention and "
                                    "feed-forward, each after its LayerNorm, added to x), where the lecture "
                                    "runs a list of Blocks")}
