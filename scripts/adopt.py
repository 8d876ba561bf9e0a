"""
The GPT you wrote along with the video, in our tools: its state_dict read through your code (--code=my_gpt.py,
or a notebook), your layers mapped onto gpt.py's by role, as scripts/check.py finds them (whatever you named
them), and the mapped model checked to give your model's logits. Used by sample.py, evaluate.py,
attention_map.py and explore.py.
"""
import sys

import torch
import torch.nn as nn

from common import fail, gpt
import check
from checker.build import Settings, classes_of, put_back, supply
from checker.compare import Theirs, close, walk
from checker.lecture import KQ, STAGES, VIDEO_SCALE, out_of
from checker.roles import LAYOUTS, Context
from checker.run import Trace, capture, logits_of

C_HINT = "scripts/check.py says which part, and why"


def probe(make, C):
    """The weight (out, C) and bias (out) of an affine map, read off its outputs for the rows of eye(C), and 0."""
    with torch.no_grad():
        out = make(torch.cat([torch.eye(C), torch.zeros(1, C)])[None])[0] # (C+1, out)
    return (out[:C] - out[C]).T.contiguous(), out[C]


class Mapping:
    """gpt.py's state_dict, filled part by part from the learner's model m (its weights loaded)."""

    def __init__(self, m, settings, code, rep):
        self.m, self.ctx, self.code, self.rep, self.weights = m, Context(settings), code, rep, {}
        torch.manual_seed(0)
        capture(m, self.ctx) # what each of its modules receives, which tells the parts apart
        self.lay = self.layout(m, 'the model')

    def cant(self, m, why):
        """One line: which part, why, and the variants check.py names in it."""
        variants = [f.words for p in self.rep.parts if p.cls is type(m) for f in p.findings
                    if f.kind == 'variant' and 'lm_head shares' not in f.words] # (a tied lm_head maps)
        extra = [v for v in variants if v not in why]
        fail(f"{self.code}: your {type(m).__name__} can't be mapped onto gpt.py's: {why}" +
             (f" ({'; '.join(extra)})" if extra else '' if variants else f" ({C_HINT})"))

    def layout(self, m, kind):
        """The mapping of m's layers onto the lecture's under which m computes as the lecture's part."""
        if self.ctx.role_of(m) != kind:
            self.cant(m, f"it is not a {kind} of the lecture's (it works as {self.ctx.role_of(m) or 'none of them'})")
        try:
            layouts = LAYOUTS[kind](m, self.ctx)
        except LookupError as e:
            self.cant(m, f"it {e.args[0]}")
        if kind == 'the model':
            return layouts[0]
        (x, *rest), kwargs = self.ctx.example(m)
        with torch.no_grad(), Trace(self.rep.learner) as t:
            out = out_of(m(x, *rest, **kwargs))
        theirs = Theirs(t, out, x.shape[0], x.shape[1], self.rep.learner, m)
        found = []
        for lay in layouts: # the first under which it is the lecture's (the video's scale, k @ q^T: mapped)
            found, ok, _ = walk(kind, lay, x, theirs)
            said = [f[1] for f in found]
            if ok and set(said) <= {VIDEO_SCALE, KQ}:
                return dict(lay, video_scale=VIDEO_SCALE in said, kq=KQ in said)
        self.cant(m, f"it computes something else than the lecture's {kind}" + (
            ': ' + ', '.join(f[1] for f in found) if found else ''))

    def put(self, name, tensor):
        self.weights[name] = tensor.detach().float().clone()

    def linear(self, name, layer, C=None):
        """A Linear's weight and bias; of another module that computes W x + b (a Linear, then dropout),
        probed."""
        weight, bias = (layer.weight, layer.bias) if isinstance(layer, nn.Linear) else probe(layer, C)
        self.put(name + '.weight', weight)
        self.put(name + '.bias', bias if bias is not None else torch.zeros(len(weight)))

    def norm(self, name, layer):
        lay = self.layout(layer, 'LayerNorm')
        self.put(name + '.weight', lay['weight'])
        self.put(name + '.bias', lay['bias'] if lay['bias'] is not None else torch.zeros_like(lay['weight']))

    def heads(self, name, sa, C):
        """Each head's key, query and value (bias-free, as gpt.py's), and proj: of Heads, or of one fused layer."""
        if not isinstance(sa, nn.Module):
            self.cant(self.m, "its Blocks hold their heads themselves, with no attention module around them")
        kind = self.ctx.role_of(sa)
        if kind not in ('MultiHeadAttention', 'fused attention'):
            self.cant(sa, "it is one head alone; gpt.py's Block holds n_head heads and a proj")
        lay = self.layout(sa, kind)
        if lay['proj'] is None:
            self.cant(sa, "it has no proj after the heads")
        heads = [self.layout(h, 'Head') for h in lay['heads']] if kind == 'MultiHeadAttention' else [lay]
        qkv = [[probe(lambda x: each['qkv'](x)[i], C) for i in range(3)] for each in heads]
        for each, (q, k, v) in zip(heads, qkv): # the video's C**-0.5 for head_size**-0.5: the same, with q scaled
            q[0].mul_((k[0].shape[0] // (lay['n_head'] if kind == 'fused attention' else 1) / C) ** 0.5
                      if each['video_scale'] else 1)
        if kind == 'fused attention': # (n_head * hs, C) each: head h is the h-th slice of its rows
            qkv = [[(w.chunk(lay['n_head'])[h], b.chunk(lay['n_head'])[h]) for w, b in qkv[0]]
                   for h in range(lay['n_head'])]
        if any(b.abs().max() > 0 for each in qkv for _, b in each):
            self.cant(sa, "its key, query and value have a bias, and gpt.py's have none")
        for h, each in enumerate(qkv):
            names = ('key', 'query', 'value') if heads[h if kind == 'MultiHeadAttention' else 0]['kq'] else \
                ('query', 'key', 'value') # (k @ q^T: their key is gpt.py's query)
            for what, (w, _) in zip(names, each):
                self.put(f"{name}.heads.{h}.{what}.weight", w)
        self.linear(name + '.proj', lay['proj'], C)
        return len(qkv), qkv[0][0][0].shape[0]

    def model(self):
        """gpt.py's config and state_dict for the learner's model."""
        lay, body = self.lay, self.lay['body']
        tok, C = lay['tok'], lay['tok'].embedding_dim
        if lay['pos'] is None or lay['final'] is None or not body:
            self.cant(self.m, "it has no " + ('position table' if lay['pos'] is None else 'final LayerNorm'
                                                   if lay['final'] is None else 'Blocks'))
        self.put('token_embedding_table.weight', tok.weight)
        pos = lay['pos'].weight if isinstance(lay['pos'], nn.Embedding) else lay['pos'].reshape(-1, C)
        self.put('position_embedding_table.weight', pos)
        for i, b in enumerate(body):
            blay = self.layout(b, 'Block')
            n_head, head_size = self.heads(f'blocks.{i}.sa', blay['sa'], C)
            if n_head * head_size != C:
                self.cant(blay['sa'], f"its {n_head} heads are {head_size} wide, not n_embd // n_head = {C // n_head}")
            ff = self.layout(blay['ffwd'], 'FeedForward')
            if len(ff['linears']) != 2 or ff['norm'] is not None:
                self.cant(blay['ffwd'], "it is not Linear, ReLU, Linear")
            for j, layer in zip((0, 2), ff['linears']):
                self.linear(f'blocks.{i}.ffwd.net.{j}', layer)
            for j, layer in enumerate(blay['norms'], 1):
                self.norm(f'blocks.{i}.ln{j}', layer)
        self.norm('ln_f', lay['final'])
        if lay['head'] is None: # lm_head shares the token table's weights
            self.put('lm_head.weight', tok.weight)
            self.put('lm_head.bias', torch.zeros(tok.num_embeddings))
        else:
            self.linear('lm_head', lay['head'])
        config = dict(n_embd=C, n_head=n_head, n_layer=len(body), block_size=len(pos))
        return config, self.weights


def their_model(code, weights, path):
    """The learner's model as their code builds it, their weights loaded, in eval mode; check.py's report; and the
    globals their code reads but never sets, given the lecture's values (as check.py does) until put_back."""
    try:
        rep = check.quietly(check.checked, code)
    except check.CantCheck as e:
        fail(f"{code} can't be read as your GPT's code: {e}")
    builder = rep.builder
    settings = Settings(builder.learner.names, builder.learner.own)
    put = supply(classes_of(builder.learner), settings, set())
    models = [m for m in check.quietly(builder.instances, classes_of(builder.learner), settings).values()
              if isinstance(m, nn.Module) and any(isinstance(s, nn.Embedding) for s in m.modules())]
    mismatch = None
    for m in sorted(models, key=lambda m: -len(list(m.modules()))): # the largest first: the whole model
        try:
            m.load_state_dict(weights)
            return m.eval(), rep, settings, put
        except RuntimeError as e:
            mismatch = mismatch or ' '.join(str(e).split('\n', 1)[-1].split())[:200]
    put_back(put)
    fail(f"{path} does not fit the model that {code} builds" + (f": {mismatch}" if mismatch else " (it builds none)")
         + "; were its settings others when you saved it?")


def adopt(code, weights, path, chars):
    """gpt.py's checkpoint ({'model', 'config', 'chars'}) for the state_dict `weights` of the model in `code`."""
    m, rep, settings, put = their_model(code, weights, path)
    try:
        harmless = ('generate', 'its loss at init') # (their generate and init: not used by our tools)
        wrong = [p for p in rep.parts if p.status in ('differs', 'cant') and not all(
            f.words in p.whole and f.words.startswith(harmless) for f in p.findings if f.kind in ('mistake', 'cant'))]
        if wrong:
            line = next(line for line in rep.lines if line.startswith(wrong[0].label + ' '))
            fail(f"{code}: your model is not the lecture's, so our tools can't run it: {' '.join(line.split())}")
        if rep.stage < 6: # (6 lacks only dropout: no weight)
            fail(f"{code}: your model is that of the lecture at stage {rep.stage} ({', '.join(STAGES[rep.stage])}); "
                 "our tools run the model of its last stage, gpt.py's (dropout and the scaled-up settings change no "
                 "weight)")
        config, state = Mapping(m, settings, code, rep).model()
        if len(state['token_embedding_table.weight']) != len(chars):
            fail(f"{path}: a vocabulary of {len(state['token_embedding_table.weight'])}, not Tiny Shakespeare's "
                 f"{len(chars)} characters")
        for key, value in dict(config, dropout=0.0).items():
            setattr(gpt, key, value)
        ours = gpt.GPTLanguageModel(len(chars)).eval()
        missing = [k for k in ours.load_state_dict(state, strict=False).missing_keys if not k.endswith('.tril')]
        if missing: # (but the heads' masks, which gpt.py makes)
            fail(f"{code}: your model has no layer for gpt.py's {missing[0]}")
        idx = torch.randint(len(chars), (2, config['block_size']), generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            same = close(ours(idx)[0], logits_of(m, idx))
    finally:
        put_back(put)
    if not same:
        variant = [f"{p.label}: {f.words}" for p in rep.parts for f in p.findings if f.kind in ('variant', 'video')]
        fail(f"{code}: with your weights mapped onto gpt.py's, its logits differ from your model's: "
             + (variant[0] if variant else "it computes something gpt.py's model does not"))
    print(f"note: {path} read through your {type(m).__name__} in {code}: " +
          ' '.join(f'{k}={v}' for k, v in config.items()), file=sys.stderr)
    return {'model': ours.state_dict(), 'config': config, 'chars': list(chars)} # (the masks too)
