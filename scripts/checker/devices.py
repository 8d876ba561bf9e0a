"""
Step 3, on a GPU: where a model's forward meets a tensor left on the CPU (one made without device=, a mask
kept as a plain attribute), found on PyTorch's meta device, which checks devices as CUDA does. Only for a
model their code moves to a GPU.
"""
import ast, contextlib, inspect, linecache, re, types

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map

from checker.build import reached
from checker.run import logits_of, tensors

GPUS = ('cuda', 'mps')
# (a GPU their code names is the meta device here)
gpu = lambda a: 'meta' if isinstance(a, (str, torch.device)) and str(a).split(':')[0] in GPUS else a

class MetaGPU(TorchFunctionMode):
    """Their code's calls, a GPU it names ('cuda', x.cuda()) put on the meta device."""
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, '__name__', '') in GPUS: # (x.cuda(): x on their GPU)
            return args[0].to('meta')
        return func(*map(gpu, args), **{k: gpu(v) for k, v in (kwargs or {}).items()})

class Devices(TorchFunctionMode):
    """Where a tensor on the CPU meets the model's on the meta device (which checks devices as CUDA does):
    self.mixed, {where it was made or what holds it: where it met them}. Each call goes on with its tensors
    moved, to find the next."""
    def __init__(self, learner, held):
        super().__init__()
        # origin: id(tensor) -> (tensor, where it was made)
        self.learner, self.origin, self.mixed = learner, dict(held), {}
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, '__name__', '') in GPUS: # (x.cuda(): x on their GPU)
            return args[0].to('meta')
        args, kwargs = tuple(map(gpu, args)), {k: gpu(v) for k, v in (kwargs or {}).items()}
        given = tensors((args, kwargs))
        on_cpu = [t for t in given if t.device.type == 'cpu' and t.dim() > 0]
        if on_cpu and any(t.device.type == 'meta' for t in given):
            # (a layer's weights outside the model: a layer made outside, or in forward, named as such)
            if any(not isinstance(t, nn.Parameter) for t in on_cpu):
                made = next((self.origin[id(t)][1] for t in on_cpu if id(t) in self.origin), None)
                self.mixed.setdefault(made, self.learner.line())
            moved = lambda t: t.to('meta') if isinstance(t, torch.Tensor) and t.device.type == 'cpu' else t
            args, kwargs = tree_map(moved, (args, kwargs or {}))
        out = func(*args, **(kwargs or {}))
        new = [t for t in tensors(out) if t.device.type == 'cpu' and id(t) not in self.origin]
        for t in new if getattr(func, '__name__', '') != '__get__' else []:
            made = [self.origin[id(g)][1] for g in on_cpu if id(g) in self.origin]
            self.origin[id(t)] = t, made[0] if made else self.learner.line()
        return out

def to_meta(spaces):
    """Set each 'cpu' (a string or a torch.device) in the dicts given, and one level inside their values, to
    'meta': [(where, key, what it was)], to put back."""
    cpu = lambda v: isinstance(v, (str, torch.device)) and str(v).split(':')[0] in ('cpu', *GPUS)
    config = lambda v: hasattr(v, '__dict__') and not callable(v) and not isinstance(v, types.ModuleType)
    swapped = []
    for space in spaces:
        values = [v for v in list(space.values()) if isinstance(v, dict) or config(v)]
        inside = [v if isinstance(v, dict) else vars(v) for v in values]
        for inner in [space] + inside:
            for k, v in list(inner.items()):
                if cpu(v):
                    swapped.append((inner, k, v))
                    inner[k] = 'meta'
    return swapped

def setting(learner, name, code):
    """Their lines that set self.name in code (an __init__): [(file, line)]."""
    lines = [(code.co_filename, n) for _, _, n in code.co_lines() if n] if code else []
    return [at for at in dict.fromkeys(lines) if re.match(rf'self\.{name}\s*=[^=]', learner.source(at))]

def moved(m, learner):
    """Whether their code moves a model of m's class to a GPU: GPT(...).to(device), or model.to(device) or
    model.cuda() of a name set to one, in a file that names cuda or mps. In a notebook: from the cell that
    defines this version of the class to the next that defines it again."""
    name, made = type(m).__name__, getattr(type(m).__init__, '__code__', None)
    cell = lambda f: int(f.rsplit(', cell ', 1)[1]) if ', cell ' in f else 0
    files = sorted(learner.files, key=cell)
    if made is not None and made.co_filename in files:
        later = files[files.index(made.co_filename) + 1:]
        again = [f for f in later if re.search(rf'^class {name}\b', their_text(learner, [f]), re.M)]
        files = files[files.index(made.co_filename):files.index(again[0]) if again else None]
    text = their_text(learner, files)
    names = re.findall(rf'(\w+)\s*=\s*{name}\(', text) + [rf'{name}\(.*\)']
    to_gpu = lambda n: re.search(rf'\b{n}\s*\.\s*(to|cuda)\(', text)
    return bool(re.search('cuda|mps', text)) and any(map(to_gpu, names))

def their_text(learner, files):
    """The text of their files given, as they wrote it."""
    lines = [line.rstrip('\n') for f in files for line in learner.texts.get(f) or linecache.getlines(f)]
    return '\n'.join(lines)

FACTORIES = {'arange', 'ones', 'zeros', 'full', 'empty', 'rand', 'randn', 'randint', 'eye', 'tensor',
             'linspace'}

def at_risk(m, learner):
    """Whether anything their model runs may leave a tensor on the CPU: a plain tensor attribute; in the code
    of its classes, or of their functions, a tensor made without device= (torch.arange(T)), .cpu() or
    'cpu'."""
    modules = reached(m)
    if any(isinstance(v, torch.Tensor) for s in modules for v in vars(s).values()):
        return True
    classes = {c for s in modules for c in type(s).__mro__ if c.__module__ in learner.own}
    # (what __init__ makes is a buffer, which moves with the model, or a plain attribute, above)
    methods = [f for c in classes for n, f in vars(c).items() if n != '__init__']
    codes = [getattr(inspect.unwrap(f), '__code__', None) for f in methods]
    trees = []
    for code in [c for c in codes if c is not None]:
        with contextlib.suppress(SyntaxError, ValueError):
            trees.append(learner.parsed(code))
    called = {n.func.id for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(
        n.func, ast.Name)} # (a function of theirs the model calls: causal_mask(T))
    trees += [node for node, _ in learner.functions if node.name in called]
    made = lambda n: n.func.attr in FACTORIES and not any(k.arg == 'device' for k in n.keywords)
    calls = [n for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(
        n.func, ast.Attribute)]
    cpu = [n for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value == 'cpu']
    return bool(cpu) or any(made(n) or n.func.attr == 'cpu' for n in calls)

def on_gpu(m, T, learner):
    """[('mistake', words)] where its forward, run with the model on a GPU, meets a tensor left on the CPU:
    one made without device= in a forward, or a plain tensor attribute, which model.to(device) leaves
    there. The model's weights, buffers and devices are put on the meta device for the run, then back."""
    if not at_risk(m, learner): # (the run on the meta device is slow: not where nothing can be left behind)
        return []
    put, held = [], {} # put: (where, key, what it was)
    def swap(space, k, v):
        put.append((space, k, space[k]))
        space[k] = v
    # (modules in a plain list, which model.to() never reaches: said elsewhere; here where their code put
    # them)
    modules = reached(m)
    try:
        for s in modules:
            for k, p in [(k, p) for k, p in s._parameters.items() if p is not None]:
                swap(s._parameters, k, nn.Parameter(torch.empty_like(p, device='meta'), p.requires_grad))
            for k, b in [(k, b) for k, b in s._buffers.items() if b is not None]:
                swap(s._buffers, k, b.to('meta'))
            if 'forward' in vars(s): # (their own forward, not the lecture's put in for a part that differs)
                swap(vars(s), 'forward', type(s).forward.__get__(s))
            init = getattr(type(s).__init__, '__code__', None)
            for k, v in [(k, v) for k, v in vars(s).items() if isinstance(v, torch.Tensor)]:
                sets = setting(learner, k, init) if v.dim() > 0 else []
                # (a plain tensor made on, or moved to, their device is where their model is)
                if sets and not any(re.search(r'device|\.to\(|\.cuda\(', learner.source(at)) for at in sets):
                    held[id(v)] = v, sets[0]
                else:
                    swap(vars(s), k, v.to('meta'))
        forwards = [inspect.unwrap(type(s).forward) for s in modules]
        spaces = {id(f.__globals__): f.__globals__ for f in forwards if hasattr(f, '__globals__')}
        put += to_meta([vars(s) for s in modules] + list(spaces.values()))
        watch, idx = Devices(learner, held), torch.zeros(2, T, dtype=torch.long, device='meta')
        try: # (on the meta device a tensor left on the CPU raises: where it runs through, none is)
            with torch.no_grad(), MetaGPU():
                logits_of(m.eval(), idx)
            return []
        except Exception:
            pass
        # (again, each call watched: where, and why)
        with contextlib.suppress(Exception), torch.no_grad(), watch:
            logits_of(m.eval(), idx)
    finally:
        for space, k, v in reversed(put):
            space[k] = v
    said, kept = [], [at for _, at in held.values()]
    for made, at in watch.mixed.items():
        made = made or at
        there = 'it' if made == at else f"{learner.place(made)}: `{learner.source(made)}`"
        if made in kept:
            cause = (f"{there} keeps a tensor outside the model's buffers, which model.to(device) leaves on "
                     "the CPU (the lecture registers its tril as a buffer)")
        else:
            cause = (f"{there} makes a tensor on the CPU, where the model's are on the GPU (give it device=, "
                     "as the lecture's torch.arange(T, device=device))")
        raised = f"on a GPU its forward raises at {learner.place(at)} (`{learner.source(at)}`)"
        said.append(('mistake', f"{raised}: {cause}"))
    return said
