"""
Step 5, explaining: what a part does that no output shows, measured as it runs: (kind, words, at).
"""
import ast, contextlib, difflib, inspect, re

import torch
import torch.nn as nn

from checker import build
from checker.build import code_lines, safe_modules
from checker.lecture import LAYER, MEANING, norm, out_of
from checker.load import message
from checker.run import Trace, call, tensors

SDPA = 'scaled_dot_product_attention'

def own_lines(m):
    """The (file, line)s of the code of m's class and of the learner's classes it derives from."""
    return set().union(*(code_lines(c) for c in type(m).__mro__ if not c.__module__.startswith('torch')))

def forward_inside(cls):
    """def forward indented into __init__, or misspelt (def foward): the class has none of its own."""
    code = getattr(vars(cls).get('__init__'), '__code__', None)
    inner = [c for c in (code.co_consts if code else ()) if getattr(c, 'co_name', None) == 'forward']
    if cls.forward is not nn.Module.forward:
        return []
    if inner:
        words = "`def forward` is inside __init__ (indented one level too far), so it has no forward"
        return [('mistake', words, (inner[0].co_filename, inner[0].co_firstlineno))]
    methods = [n for n, f in vars(cls).items() if inspect.isfunction(f)]
    near = difflib.get_close_matches('forward', methods, 1, 0.7) # (def foward)
    if not near:
        return []
    code = vars(cls)[near[0]].__code__
    words = f"`def {near[0]}` is not forward (misspelt), so it has no forward"
    return [('mistake', f"{words}: PyTorch calls forward", (code.co_filename, code.co_firstlineno))]

def batched(events, x, m, learner):
    """[a mistake] where m's own torch.cat joins tensors of x's batch and length along the batch or the positions,
    not side by side (torch.cat without its dim, or dim=1)."""
    mine, axes = own_lines(m), ['the batch', 'the positions (time)']
    for e in [e for e in events if e.name == 'cat' and e.at in mine and e.outs]:
        parts, out = tensors(e.args[:1]), e.outs[0]
        joined = [d for d in range(2) if len(parts) > 1 and out.dim() == parts[0].dim() == 3
                  and all(p.shape[:2] == x.shape[:2] for p in parts) and out.shape[d] != x.shape[d]]
        if joined:
            return [('mistake', f"`{learner.source(e.at)}` joins its {len(parts)} tensors along dim {joined[0]}, "
                                f"{axes[joined[0]]}: side by side is torch.cat(..., dim=-1)", e.at)]
    return []

def assigned(m, name, learner):
    """The line of m's __init__ that sets self.name, or None."""
    init = getattr(type(m).__init__, '__code__', None)
    lines = [(init.co_filename, line) for *_, line in init.co_lines() if line] if init else []
    return next((at for at in lines if re.match(rf"self\.{name}\s*=", learner.source(at))), None)

def not_a_layer(m, e, learner):
    """A value where forward calls a layer (self.sa = (n_head, head_size)): named at the line that makes it."""
    if not isinstance(e, TypeError) or 'object is not callable' not in str(e):
        return []
    for name, value in [(n, v) for n, v in vars(m).items() if f"'{type(v).__name__}' object" in str(e)]:
        at = assigned(m, name, learner)
        if at:
            return [('mistake', f"`{learner.source(at)}` makes a {type(value).__name__}, not a layer: "
                                f"{message(e)}", at)]
    return []

def lacking(m, learner):
    """{name: line} of what m's forward reads as self.name that m has not (nor sets there): self.blocks, self.ln_f."""
    code = getattr(type(m).forward, '__code__', None)
    lines = sorted({(code.co_filename, line) for *_, line in code.co_lines() if line}) if code else []
    lacks, made = {}, {n for at in lines for n in re.findall(r"\bself\.(\w+)\s*=(?!=)", learner.source(at))}
    for at in lines:
        for name in re.findall(r"\bself\.(\w+)", learner.source(at)):
            if not hasattr(m, name) and name not in made:
                lacks.setdefault(name, at)
    return lacks

def never_made(m, e, learner):
    """The layers m's forward calls that its __init__ never makes, each at its line."""
    if not isinstance(e, AttributeError) or 'has no attribute' not in str(e):
        return []
    return [('mistake', f"its forward uses `self.{name}`, which __init__ never makes", at)
            for name, at in lacking(m, learner).items()]

def plain_weights(m, events, learner, checked):
    """Weights their forward uses that are plain tensors, not nn.Parameter (as the video's LayerNorm1d, made
    for no nn.Module): not registered, they never train. Named in m, or in the module of its own no part is."""
    made = {id(t) for e in events for t in e.outs} # (an output kept, self.out = ...: no weight)
    used = {id(t) for e in events for t in tensors((e.args, e.kwargs))} - made
    for s in [s for s in safe_modules(m) if s is m or not checked(s)]:
        own = type(s).parameters is not nn.Module.parameters # (a parameters() of their own: meant as weights)
        # (a mask of 0s and 1s: no weight)
        plain = [n for n, v in vars(s).items() if id(v) in used and v.is_floating_point() and (own or v.requires_grad)
                 and not (v.dim() == 2 and bool(((v == 0) | (v == 1)).all()))]
        if not plain:
            continue
        names = ' and '.join(f'`{n}`' for n in plain)
        words = f"{names} is a plain tensor, not nn.Parameter: not registered, model.parameters() misses it and it " \
                "never trains"
        if plain[1:]:
            words = f"{names} are plain tensors, not nn.Parameter: not registered, model.parameters() misses them " \
                    "and they never train"
        if own:
            words += ": its own parameters() method is not what model.parameters() calls"
        return [('mistake', words, assigned(s, plain[0], learner))]
    return []

COUNTS, SIZES = {'n_head', 'n_layer'}, {'n_embd', 'head_size', 'block_size', 'vocab_size', 'ffwd_size'}

def crossing(call, cls):
    """[(an argument's name, its parameter)] of a call to cls where two cross, or a count is given a size
    (MultiHeadAttention(n_embd, head_size)); and cls's parameters."""
    params = [p for p in inspect.signature(cls).parameters.values() if p.kind <= p.POSITIONAL_OR_KEYWORD]
    given = [(a, p.name) for a, p in zip(call.args, params)] + [(k.value, k.arg) for k in call.keywords]
    meant = [(build.meaning(named(a)), build.meaning(p), named(a), p) for a, p in given]
    pairs = [(x, y) for x, y, *_ in meant]
    plain = lambda *names: all(norm(n or '') in MEANING for n in names) # (by the table, not by a word in it)
    return [(name, p) for a, b, name, p in meant if a and b and a != b and (
        (b, a) in pairs or {a, b} & COUNTS and {a, b} & SIZES and plain(name, p))], params

def swapped(m, learner):
    """A call in m's __init__ of a class of theirs whose arguments cross its parameters, as
    MultiHeadAttention(num_heads, head_size) for (head_size, num_heads): named at the call's line."""
    code = getattr(type(m).__init__, '__code__', None)
    if code is None or code.co_filename not in learner.files:
        return []
    with contextlib.suppress(SyntaxError):
        tree = learner.parsed(code)
        for call in [c for c in ast.walk(tree) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)]:
            cls = learner.names.get(call.func.id)
            if not (isinstance(cls, type) and issubclass(cls, nn.Module) and cls.__module__ in learner.own):
                continue
            crossed, params = crossing(call, cls)
            if crossed:
                at = (code.co_filename, code.co_firstlineno + call.lineno - 1)
                return [('mistake', f"`{learner.source(at)}` passes " + ' and '.join(
                    f"{name} as {p}" for name, p in crossed) + f": {cls.__name__} takes ("
                    f"{', '.join(p.name for p in params)})", at)]
    return []

def miscalled(m, learner):
    """Whether the line that made m gives its class an argument of another meaning."""
    with contextlib.suppress(Exception):
        line = ast.parse(learner.source(m.__dict__['_made_at']).strip().rstrip(':'))
        calls = [c for c in ast.walk(line) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                 and c.func.id == type(m).__name__]
        return bool(calls and crossing(calls[0], type(m))[0])
    return False

def named(node):
    """The name an argument is written with: n_head, self.n_head, config.n_head, config['n_head']."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    key = isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value
    return key if isinstance(key, str) else ''

def reused(m, events, never, learner):
    """([(kind, words, at)], [names], (the unused Linear, the one applied in its place) or None): a Linear applied
    twice to one input where one of its shape is never used (values = self.query(x), copied from the line above):
    named at the call whose result is named for the unused one (q = self.value(x) for query), else at the second."""
    idle = [(n, c) for n, c in m.named_modules() if f'`{n}`' in never and isinstance(c, nn.Linear)]
    seen = {}
    role = lambda name: LAYER.get(norm(name.split('.')[-1]))
    for e in [e for e in events if isinstance(e.module, nn.Linear) and tensors(e.args)]:
        twin = next((n for n, c in idle if c.weight.shape == e.module.weight.shape), None)
        first = seen.setdefault((id(e.module), id(tensors(e.args)[0])), e)
        if first is not e and twin:
            used = next(n for n, c in m.named_modules() if c is e.module)
            stand = (dict(idle)[twin], e.module)
            def named(w): # the role of the name its line assigns the result to
                assigned = re.match(r'\s*(\w+)\s*=', learner.source(w.at) if w.at else '')
                return role(assigned[1]) if assigned else None
            if named(first) == role(twin) != named(e) and e.at: # (the first call's result is named for twin)
                return [('mistake', f"`{learner.source(first.at)}` applies `{used}` where `{twin}`, never used, "
                         f"belongs (`{used}` is applied to the same input again at {learner.place(e.at)})",
                         first.at)], [f'`{twin}`'], stand
            return [('mistake', f"`{learner.source(e.at)}` applies `{used}` again, to the same input, where `{twin}`, "
                     "never used, belongs", e.at)], [f'`{twin}`'], stand
    return [], [], None

def registered(m, events, checked):
    """A module m runs but doesn't register (a plain list, made in forward): it never trains. A plain list in
    a module inside m that is checked on its own (checked(s)) is named there."""
    inside, mine = {id(s) for s in safe_modules(m)}, own_lines(m)
    lost = [e.module for e in events if e.module is not None and id(e.module) not in inside]
    for module in [
        s for s in dict.fromkeys(lost) if not any(s is not o and s in safe_modules(o) for o in lost)
    ]:
        holds = lambda v: isinstance(v, (list, tuple, dict)) and any(
            c is module for c in (v.values() if isinstance(v, dict) else v))
        at = module.__dict__.get('_made_at')
        holders = [(s, n) for s in safe_modules(m) for n, v in vars(s).items() if holds(v)]
        # (named at the innermost part checked that holds it)
        nearer = holders and any(checked(s) and holders[0][0] in safe_modules(s) for s in safe_modules(m)[1:])
        if holders and (holders[0][0] is m or not nearer):
            s, n = holders[0]
            held = f"`{n}`" if s is m else f"`{n}` of {type(s).__name__}"
            return [('mistake', f"{held} is a plain Python {type(vars(s)[n]).__name__}: the "
                     "modules in it are not registered, so model.parameters() misses them and they never train, "
                     "and model.eval() never reaches them (nn.ModuleList registers them)", at)]
        if holders:
            continue
        if at in mine:
            return [('mistake', f"a {type(module).__name__} made while it runs, not in __init__: it is "
                                              "new at every call and never trains", at)]
        if at is not None and list(module.parameters()): # (a global nn.Linear used in forward)
            return [('mistake', f"a {type(module).__name__} made outside {type(m).__name__} runs in its forward: "
                                "it is not registered, so model.parameters() misses it and it never trains", at)]
    return []

def heads_width(lay, x, m, learner, raised=False):
    """Multi-head attention m: n_head heads of n_embd // n_head, together as wide as x (raised: its proj
    raised on them); named where a head's width is written, or given (MultiHeadAttention(n_head, n_embd))."""
    n, C, wide = len(lay['heads']), x.shape[-1], 0
    with contextlib.suppress(Exception), torch.no_grad(): # (a head that needs more than x: not measured)
        wide = sum(out_of(h(x)).shape[-1] for h in lay['heads'])
    at = lay['heads'][0].__dict__.get('_made_at')
    given = set(inspect.signature(type(m).__init__).parameters) - {'self'}
    head = type(lay['heads'][0]).__name__
    with contextlib.suppress(SyntaxError): # (each head n_embd wide, by Head(head_size): where it is given)
        calls = [c for c in ast.walk(ast.parse(learner.source(at or ('', 0)).strip().rstrip(':')))
                 if isinstance(c, ast.Call) and getattr(c.func, 'id', None) == head]
        args = [*calls[0].args, *[k.value for k in calls[0].keywords]] if calls else []
        names = {a.id for a in args if isinstance(a, ast.Name)}
        if wide == n * C and m.__dict__.get('_made_at') and given & names:
            at = m.__dict__['_made_at']
    if raised and wide and n > 1 and wide != C and wide // n == C // n: # (n_embd 32 in 6 heads of 5)
        words = f"its {n} heads of n_embd // n_head = {C // n} are {wide} wide together, where proj takes " \
                f"n_embd = {C}: n_embd is no multiple of n_head (the lecture's proj takes head_size * " \
                "num_heads)"
        return [('mistake', words, at)]
    # (n_embd 256 in 6 heads: 6 of 42, as the lecture's code)
    return [('mistake', f"its {n} heads together are {wide} wide, not n_embd = {C}: each is n_embd // "
             f"n_head = {C // n} wide", at)] if wide and n > 1 and wide // n != C // n else []

def repeated(blocks):
    """Blocks that are one repeated ([Block()] * n): they share their weights."""
    n = len({id(b) for b in blocks})
    return [('mistake', f"the {len(blocks)} Blocks are {n} repeated ([Block(...)] * n): they share their "
             "weights; build each (for _ in range(n))", blocks[0].__dict__.get('_made_at'))] if n < len(blocks) else []

def shared_norm(events, ctx):
    """One LayerNorm for both branches of a Block (ln1 and ln2 as one): their weights are shared."""
    inputs = {}
    for e in events:
        if e.module is not None and ctx.role_of(e.module) == 'LayerNorm' and tensors(e.args):
            inputs.setdefault(e.module, []).append(tensors(e.args)[0])
    differ = lambda xs: any(x.shape != xs[0].shape or not torch.equal(x, xs[0]) for x in xs)
    # (the same input twice: the same result)
    twice = next((n for n, xs in inputs.items() if differ(xs)), None)
    if twice is None:
        return []
    return [('mistake', "one LayerNorm normalizes the input of both the attention and the feed-forward: "
                        "the lecture has two, ln1 and ln2, each with weights of its own",
             twice.__dict__.get('_made_at'))]

def dropping(e):
    """Whether a call drops out: F.dropout (training by default), or SDPA's dropout_p."""
    if e.name == 'dropout':
        return e.kwargs.get('training', e.args[2] if len(e.args) > 2 else True)
    if e.name == SDPA:
        return e.kwargs.get('dropout_p', e.args[4] if len(e.args) > 4 else 0)
    return False

def eval_mode(m, args, kwargs, learner):
    """In eval mode no dropout acts: the same input, the same output."""
    with torch.no_grad(), Trace(learner) as t:
        torch.default_generator.manual_seed(0)
        one = call(m.eval(), args, kwargs)
    at = next((e.at for e in t.events if dropping(e)), None)
    sdpa = at in [e.at for e in t.events if e.name == SDPA]
    drawn = next((e for e in t.events if e.name.startswith(('rand', 'normal', 'bernoulli'))), None)
    if at is None and drawn is None: # (nothing random ran: the same output again, not run)
        return []
    with torch.no_grad():
        two = call(m, args, kwargs)
    if not isinstance(one, torch.Tensor) or torch.equal(one.nan_to_num(), two.nan_to_num()):
        return []
    if at is None and drawn is not None: # (noise made in forward: torch.randn(B, T, C))
        return [('mistake', f"`{learner.source(drawn.at)}` draws random numbers (torch.{drawn.name}) while it runs: "
                 "the same input gives another output each time", drawn.at)]
    if sdpa:
        fix = (
            "F.scaled_dot_product_attention's dropout_p: pass dropout_p=self.dropout if self.training else 0"
        )
    else:
        fix = "F.dropout trains by default: pass training=self.training, or use nn.Dropout"
    return [('mistake', f"in eval mode its dropout still acts ({fix})", at)]

def reseeds(m, args, kwargs, learner):
    """torch.manual_seed called in m's own forward: the same random numbers at every call."""
    seeded, seed, state = [], torch.manual_seed, torch.get_rng_state()
    def watched(*a, **k):
        seeded.append(learner.line())
        return seed(*a, **k)
    torch.manual_seed = watched
    with contextlib.suppress(Exception), torch.no_grad():
        call(m, args, kwargs)
    torch.manual_seed = seed
    torch.set_rng_state(state) # (what it seeded: not left behind)
    at = next((at for at in seeded if at in own_lines(m)), None)
    words = (
        "seeds the random numbers at every call, so dropout drops the same units at every step of training"
    )
    return [('mistake', f"`{learner.source(at)}` in forward {words}", at)] if at else []

def unused(m, args, kwargs, ctx):
    """What m's output never depends on: a child (blocks never applied), else m's own layers."""
    theirs = {id(p) for s in m.modules() if s is not m and (type(s) in ctx.parts or id(s) in ctx.parts)
              for p in s.parameters()} # (the parts inside m, each checked on its own)
    m.zero_grad(set_to_none=True)
    with contextlib.suppress(Exception): # (none named where it can't run backward)
        out = call(m, args, kwargs).float().nan_to_num()
        (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(1))).sum().backward()
        # (no gradient)
        idle = [n for n, c in m.named_children() if {p.grad for p in nn.Module.parameters(c)} == {None}]
        names = [
            n.rsplit('.', 1)[0] for n, p in m.named_parameters() if id(p) not in theirs and p.grad is None
        ]
        return [f"`{n}`" for n in dict.fromkeys(idle + [n for n in names if n.split('.')[0] not in idle])]
    return []
