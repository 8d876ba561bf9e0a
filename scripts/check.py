"""
Check my code: the GPT you wrote along with the lecture, compared part by part with gpt.py's (or with
the lecture's model at the stage you are at), and the likely mistake named where a part differs.

    python scripts/check.py my_gpt.py
    python scripts/check.py my_notebook.ipynb       # its code cells, in order

In a running notebook, without saving a file: import check; check.here(globals())
Only your imports, settings and definitions run: no data is read, nothing trains or samples. Names,
signatures and layout are yours: each part is found by what it is. Exit code 0 when every part found
matches, 1 when one differs, 2 when the file can't be checked (scripts/README.md: how).
"""
import ast
import builtins
import dis
import importlib.abc
import importlib.util
import inspect
import json
import math
import os
import re
import sys
import traceback
import types

import torch
import torch.nn as nn

import common
from check_parts import (ATTENTIONS, CONFIGS, DROPOUT, LAYOUTS, LECTURE, MEANING, PLAUSIBLE, STAGES, Context,
                         block_size, difference, layers, norm, out_of, search, stage_of, structure, verdict, width)

NOISE = 0.05 # added to every weight before comparing: no two layers alike (two LayerNorms are, at init)
ORDER = ['LayerNorm', *ATTENTIONS, 'FeedForward', 'Block', 'the model'] # the parts, in the report's order
OURS = (os.path.dirname(torch.__file__), os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.__file__))


class CantCheck(Exception):
    """The file can't be checked: exit code 2."""


class Missing(Exception):
    """A part called a package that isn't installed here."""


# ------------ loading: the imports, settings and definitions, in order; nothing else

class StandIn:
    """A name from a package that isn't installed. While the file loads it is anything (a decorator hands
    back what it decorates, a base class is nn.Module); called by a part being checked, it raises Missing."""
    loading = True

    def __init__(self, name):
        self.name = name

    def __getattr__(self, attr):
        if attr.startswith('__'):
            raise AttributeError(attr)
        return StandIn(f'{self.name}.{attr}')

    def __call__(self, *args, **kwargs):
        if not StandIn.loading:
            raise Missing(self.name)
        return args[0] if len(args) == 1 and callable(args[0]) and not kwargs else self

    __getitem__ = __or__ = __ror__ = lambda self, other: self # annotations: Float[Tensor, 'b t'], Tensor | None
    __mro_entries__ = lambda self, bases: (nn.Module,)


class StandInModule(types.ModuleType):
    """A module that isn't installed, and a package: its submodules stand in too."""

    def __init__(self, name):
        super().__init__(name)
        self.__path__ = []

    __getattr__ = lambda self, attr: StandIn(self.__name__).__getattr__(attr)


class Siblings(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The modules beside the learner's file, loaded as it is: imports, settings and definitions only."""

    def __init__(self, folder, notes):
        self.folder, self.notes, self.loaded = folder, notes, []

    def find_spec(self, name, path, target=None):
        base = os.path.join(self.folder, *name.split('.'))
        for file, package in ((base + '.py', False), (os.path.join(base, '__init__.py'), True)):
            if os.path.isfile(file) and name.split('.')[0] not in sys.stdlib_module_names:
                return importlib.util.spec_from_file_location(
                    name, file, loader=self, submodule_search_locations=[base] if package else None)

    create_module = lambda self, spec: None # the default module

    def exec_module(self, module):
        self.loaded.append(module.__name__)
        with open(module.__file__, encoding='utf-8', errors='replace') as f:
            run_selected(parse(f.read(), module.__file__), vars(module), module.__file__, self.notes)


def cell(source):
    """A notebook cell's Python: without its shell (!), magic (%) and help (obj?) lines; a cell magic whose
    body isn't Python (%%bash) is left out, %%writefile of a .py file kept."""
    magic = source.lstrip().split('\n', 1)[0] if source.lstrip().startswith('%%') else ''
    if magic and not magic.startswith(('%%time', '%%capture')) and not re.match(r'%%writefile .*\.py\s*$', magic):
        return ''
    return '\n'.join('' if re.match(r'\s*([!%?]|[\w.]+\?\??\s*$)', line) else line for line in source.splitlines())


def sources(path):
    """[(where, code)]: the file, or a notebook's code cells."""
    if not os.path.isfile(path):
        raise CantCheck(f"no file at {path}")
    if not path.endswith(('.py', '.ipynb')):
        raise CantCheck(f"{path} is neither a Python file (.py) nor a notebook (.ipynb)")
    with open(path, encoding='utf-8', errors='replace') as f:
        text = f.read()
    if path.endswith('.py'):
        return [(path, text)]
    try:
        cells = [(i, c) for i, c in enumerate(json.loads(text)['cells'], 1) if c['cell_type'] == 'code']
    except (ValueError, KeyError, TypeError):
        raise CantCheck(f"{path} is not a notebook: no code cells in its JSON") from None
    return [(f"{path}, cell {i}", cell(''.join(c['source']))) for i, c in cells]


def parse(code, where):
    try:
        return ast.parse(code)
    except SyntaxError as e:
        raise CantCheck(f"{where}, line {e.lineno}: a syntax error: {e.msg}") from None


PLAIN = (ast.Constant, ast.Name, ast.Attribute, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp,
         ast.Tuple, ast.List, ast.Dict, ast.Set, ast.Call, ast.keyword, ast.Subscript, ast.Slice, ast.Starred,
         ast.JoinedStr, ast.FormattedValue, ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)
SAFE = {int, float, bool, str, dict, list, tuple, set, min, max, round, abs, pow, len, torch.cuda.is_available,
        torch.backends.mps.is_available}


def safe_call(func, names):
    """What a setting may call: arithmetic, a device query, a class (a config) but a module or a tensor."""
    if not all(isinstance(n, (ast.Name, ast.Attribute, ast.Load)) for n in ast.walk(func)):
        return False
    try:
        f = eval(compile(ast.Expression(func), '', 'eval'), names)
    except Exception:
        return False
    if isinstance(f, type):
        return not issubclass(f, (nn.Module, torch.Tensor))
    return any(f is s for s in SAFE) or getattr(f, '__module__', None) == 'math'


def is_setting(node, names):
    """name = numbers, names, arithmetic, a device's choice or a config: nothing that reads data or trains."""
    if isinstance(node, ast.If):
        return all(is_setting(n, names) for n in node.body + node.orelse) and is_setting(ast.Expr(node.test), names)
    if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.Expr)) or node.value is None:
        return False
    nodes = list(ast.walk(node.value))
    return all(isinstance(n, PLAIN) for n in nodes) and all(safe_call(n.func, names) for n in nodes
                                                            if isinstance(n, ast.Call))


def run(nodes, where, names):
    exec(compile(ast.Module(nodes, []), where, 'exec'), names)


def import_(node, names, where, notes):
    """An import; a package that isn't installed stands in, and the notes say so."""
    if getattr(node, 'level', 0) == 1 and not names.get('__package__'): # from .model import GPT: the file beside
        node = ast.Import(node.names) if node.module is None else ast.ImportFrom(node.module, node.names, 0)
        ast.fix_missing_locations(ast.copy_location(node, node))
    for _ in range(20):
        try:
            return run([node], where, names)
        except ModuleNotFoundError as e:
            if not e.name or e.name in sys.modules:
                raise
            sys.modules[e.name] = StandInModule(e.name)
            notes.setdefault('stand-ins', []).append(e.name.split('.')[0])
        except ImportError: # a name that the installed package lacks
            for alias in node.names:
                try:
                    run([ast.ImportFrom(node.module, [alias], node.level)], where, names)
                except ImportError:
                    names[alias.asname or alias.name] = StandIn(f'{node.module}.{alias.name}')
            return


def run_selected(tree, names, where, notes):
    """Run a module's imports, definitions and settings, in order."""
    for node in tree.body:
        guard = isinstance(node, ast.If) and {'__name__', '__main__'} <= {getattr(n, 'id', getattr(n, 'value', None))
                                                                        for n in ast.walk(node.test)}
        if isinstance(node, ast.Try) or guard: # try: import tqdm ...; if __name__ == '__main__': n_embd = ...
            run_selected(ast.Module(node.body, []), names, where, notes)
        elif isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            try:
                import_(node, names, where, notes) if isinstance(node, (ast.Import, ast.ImportFrom)) else \
                    run([node], where, names)
            except Exception as e:
                lines = [f.lineno for f in traceback.extract_tb(e.__traceback__) if f.filename == where]
                said = f"{where}, line {(lines or [node.lineno])[-1]}: running it raised {type(e).__name__}: " \
                       f"{' '.join(str(e).split())}"
                if ', cell ' not in where: # a notebook's cell that failed goes on; a file can't
                    raise CantCheck(said) from None
                notes.setdefault('unread', []).append(said)
        elif not isinstance(node, ast.Expr) and is_setting(node, names):
            try:
                run([node], where, names)
            except Exception: # a setting made from the data, which never ran, is left out
                pass


def load(path):
    """The learner's names after its imports, settings and definitions ran; notes on what stood in; the
    names of its modules (the file's and those beside it)."""
    module, notes = types.ModuleType('learner'), {}
    module.__file__, names = os.path.abspath(path), vars(module)
    sys.modules['learner'] = module # for dataclasses, which look their module up
    siblings = Siblings(os.path.dirname(os.path.abspath(path)), notes)
    sys.meta_path.insert(0, siblings)
    StandIn.loading = True
    try:
        for where, code in sources(path):
            try:
                tree = parse(code, where)
            except CantCheck as e: # a notebook's cell that never ran: left out
                if not path.endswith('.ipynb'):
                    raise
                notes.setdefault('unread', []).append(str(e))
                continue
            run_selected(tree, names, where, notes)
    finally:
        StandIn.loading = False
        sys.meta_path.remove(siblings)
    for name in siblings.loaded: # their classes too, imported here or not
        names.update({f'{name}.{k}': v for k, v in vars(sys.modules[name]).items()
                      if isinstance(v, type) and v.__module__ == name})
    return names, notes, {'learner', *siblings.loaded}


# ------------ settings by meaning, and each class built through its own signature

class Settings:
    """The learner's settings by meaning: module-level names, then dicts and config objects, then config
    classes' defaults. What the file never sets is the lecture's; the device is the CPU."""

    def __init__(self, names, own):
        meant = lambda d: sum(isinstance(k, str) and norm(k) in MEANING for k in d) >= 2 # a config's keys
        self.configs = [v for k, v in names.items() if not k.startswith('__') and (
            isinstance(v, dict) and meant(v) or isinstance(v, types.SimpleNamespace) or not isinstance(v, type)
            and type(v).__module__ in own and not isinstance(v, nn.Module) and meant(getattr(v, '__dict__', {})))]
        self.classes = [v for v in names.values() if isinstance(v, type) and v.__module__ in own
                        and not issubclass(v, nn.Module) and meant(vars(v))]
        self.found = {}
        for source in [names] + [c if isinstance(c, dict) else vars(c) for c in self.configs + self.classes]:
            for key, value in list(source.items()):
                meaning = isinstance(key, str) and MEANING.get(norm(key))
                if meaning and meaning not in self.found and PLAUSIBLE.get(meaning, PLAUSIBLE['size'])(value):
                    self.found[meaning] = value

    def __call__(self, meaning):
        if meaning in self.found and meaning != 'device':
            return self.found[meaning]
        if meaning == 'n_head':
            return next(h for h in (LECTURE['n_head'], 8, 4, 2, 1) if self('n_embd') % h == 0)
        return self('n_embd') // self('n_head') if meaning == 'head_size' else 4 * self('n_embd') \
            if meaning == 'ffwd_size' else LECTURE[meaning]


class Guess(int):
    """A number for a parameter whose name says nothing of its meaning."""


class AnyConfig:
    """The settings as one object, for a class that takes a config the file never made: any name that
    means a setting, as an attribute or a key."""

    def __init__(self, settings):
        self._settings = settings

    def __getattr__(self, name):
        if name.startswith('__') or norm(name) not in MEANING:
            raise AttributeError(name)
        return self._settings(MEANING[norm(name)])

    __getitem__ = __getattr__
    get = lambda self, name, default=None: getattr(self, name, default)


def arguments(cls, settings, own):
    """cls's parameters without a default, filled by meaning (the learner's defaults stay)."""
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return {}
    kwargs = {}
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not p.empty:
            continue
        kind = p.annotation if isinstance(p.annotation, type) and p.annotation.__module__ in own else None
        if norm(p.name) in MEANING:
            kwargs[p.name] = settings(MEANING[norm(p.name)])
        elif kind or norm(p.name) in CONFIGS.split(): # the learner's config object, else one made
            made = [c for c in settings.configs if kind is None or isinstance(c, kind)]
            classes = [kind] if kind else settings.classes
            kwargs[p.name] = made[0] if made else classes[0](**arguments(classes[0], settings, own)) \
                if classes else AnyConfig(settings)
        else: # a name that means nothing known: a guess, which an instance in another part overrides
            kwargs[p.name] = Guess(settings('n_embd'))
    return kwargs


def supply(classes, settings):
    """Each global that the learner's classes read but no code of theirs sets gets the lecture's value, and
    the device is the CPU: [(globals, name, what it was)], to put back."""
    put, seen = [], set()
    codes = [(f.__code__, f.__globals__) for cls in classes for f in vars(cls).values() if inspect.isfunction(f)]
    while codes:
        code, scope = codes.pop()
        codes += [(c, scope) for c in code.co_consts if isinstance(c, types.CodeType)]
        for name in {i.argval for i in dis.get_instructions(code) if i.opname in ('LOAD_GLOBAL', 'LOAD_NAME')}:
            if isinstance(name, str) and norm(name) in MEANING and (id(scope), name) not in seen and \
                    not hasattr(builtins, name) and (name not in scope or MEANING[norm(name)] == 'device'):
                seen.add((id(scope), name))
                put.append((scope, name, scope.get(name, put)))
                scope[name] = settings(MEANING[norm(name)])
    return put


def message(e):
    """The exception in one line, where the learner's code raised it."""
    if isinstance(e, Missing):
        return f"calls {e.args[0]}: pip install {e.args[0].split('.')[0]} to check it"
    frames = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith(OURS)]
    at = f"{os.path.basename(frames[-1].filename)}, line {frames[-1].lineno}: " if frames else ''
    return at + f"{type(e).__name__}: " + ' '.join(str(e).split())


# ------------ running a part

def logits_of(m, idx):
    """(B,T,vocab) logits of a model; with targets where it gives fewer without (nanoGPT: the last position's)."""
    takes = [p for p in inspect.signature(m.forward).parameters.values() if p.kind != p.VAR_KEYWORD]
    out = out_of(m(idx) if len(takes) < 2 or takes[1].default is not takes[1].empty else m(idx, idx))
    full = lambda out: isinstance(out, torch.Tensor) and out.numel() == idx.numel() * vocab(m)
    if not full(out) and len(takes) >= 2:
        out = out_of(m(idx, idx))
    return out.view(*idx.shape, -1) if full(out) else out


call = lambda m, x: logits_of(m, x) if x.dtype == torch.long else out_of(m(x))


# ------------ the check

def unused(m, x, ctx):
    """What m's output never depends on: a child none of whose weights it reaches (blocks never applied),
    else m's own layers (not those of its parts checked on their own)."""
    theirs = {id(p) for s in ctx.subparts(m) for p in s.parameters()}
    m.zero_grad(set_to_none=True)
    try:
        out = call(m, x).float().nan_to_num()
        (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(1))).sum().backward()
    except Exception:
        return []
    idle = [n for n, c in m.named_children() if list(c.parameters()) and all(p.grad is None for p in c.parameters())]
    names = [n.rsplit('.', 1)[0] for n, p in m.named_parameters() if id(p) not in theirs and p.grad is None]
    return [f"`{n}`" for n in dict.fromkeys(idle + [n for n in names if n.split('.')[0] not in idle])]


def dropout_sites(m, x, ctx):
    """Where m's own Dropout layers act in training: on attention weights (rows that sum to 1), or on
    activations."""
    theirs, sites, T = {id(d) for s in ctx.subparts(m) for d in s.modules()}, [], x.shape[1]
    weights = lambda t: t.dim() >= 3 and t.shape[-1] == t.shape[-2] == T and torch.allclose(t.sum(-1), torch.ones(1))
    hooks = [d.register_forward_hook(lambda d, args, out: sites.append(
        'the attention weights' if weights(args[0]) else 'activations'))
        for d in m.modules() if isinstance(d, nn.Dropout) and id(d) not in theirs]
    try:
        with torch.no_grad():
            call(m.train(), x)
    except Exception:
        pass
    for h in hooks:
        h.remove()
    m.eval()
    return sites


def vocab(m):
    return next(e.num_embeddings for e in m.modules() if isinstance(e, nn.Embedding))


def invariants(m, T):
    """What holds whatever the weights: the past never hears the future, batch rows never talk, generate
    goes past block_size and starts from one token, and the loss at init is near ln(vocab_size)."""
    V, g = vocab(m), torch.Generator().manual_seed(0)
    idx, targets = torch.randint(V, (2, T), generator=g), torch.randint(V, (2, T), generator=g)
    later, other = idx.clone(), idx.clone()
    later[:, T // 2:], other[1] = (later[:, T // 2:] + 1) % V, (other[1] + 1) % V
    problems, loss = [], None
    try:
        with torch.no_grad():
            logits = logits_of(m.eval(), idx)
            if not torch.allclose(logits_of(m, later)[:, :T // 2], logits[:, :T // 2], atol=1e-5):
                problems.append("a future token changes an earlier output")
            if not torch.allclose(logits_of(m, other)[0], logits[0], atol=1e-5):
                problems.append("one example in a batch changes another's output")
            if len(inspect.signature(m.forward).parameters) >= 2:
                out = m(idx, targets) # (logits, loss), or the loss alone
                loss = out[1] if isinstance(out, (tuple, list)) and len(out) > 1 else out
            for start, what in ((idx[:1], 'past block_size'), (idx[:1, :1], 'from one token')):
                try:
                    if hasattr(m, 'generate') and tuple(m.generate(start, 2).shape) != (1, start.shape[1] + 2):
                        problems.append("generate does not return the context and the new tokens")
                except Exception as e:
                    crop = ' (crop idx to the last block_size)' if what == 'past block_size' and \
                        'out of range' in str(e) else ''
                    problems.append(f"generate fails {what}{crop}: {message(e)}")
    except Exception as e: # the model itself fails: its own line says where
        return [f"running it raised {message(e)}"], None
    if isinstance(loss, torch.Tensor) and loss.numel() == 1 and not math.log(V) - 0.1 < loss.item() < math.log(V) + 1:
        problems.append(f"its loss at init is {loss.item():.2f}, not near ln {V} = {math.log(V):.2f} (the lecture's "
                        "4.2 to 4.9)")
    return problems, loss


def check_part(label, m, kind, ctx, context):
    """The line for one part, and 'ok', 'differs' or 'cant' (it can't be checked)."""
    g, T = torch.Generator().manual_seed(0), block_size(m, ctx.settings)
    x = torch.randint(vocab(m), (2, T), generator=g) if kind == 'the model' else \
        torch.randn(2, T, width(m), generator=g)
    try:
        with torch.no_grad():
            mine = call(m.eval(), x)
    except Missing as e:
        return f"can't be checked: your {label} {message(e)}", 'cant'
    except Exception as e:
        return f"raised on {tuple(x.shape)}: {message(e)}", 'differs'
    try:
        layouts = LAYOUTS[kind](m, ctx)
    except LookupError as e:
        return f"differs: your {label} {e.args[0]}", 'differs'
    changes, lay = search(kind, layouts, mine, x)
    stage = stage_of(m, kind, lay, ctx)
    keys, sites = structure(kind, m, lay, stage, max(context, stage), ctx), dropout_sites(m, x, ctx)
    if context == 7 and sites != DROPOUT.get(kind, sites): # the lecture's final model has dropout
        keys.append(('variant', f"dropout here on {' and '.join(dict.fromkeys(sites)) or 'nothing'}, the lecture's " +
                     (f"on {' and '.join(DROPOUT[kind])}" if DROPOUT[kind] else "has none here")))
    if changes and any(e[0] == 'rotary' for e in changes):
        ctx.rotary.add(type(m))
    line, ok = verdict(changes, keys, stage, unused(m, x, ctx), changes is None and difference(kind, lay, mine, x))
    return line, 'ok' if ok else 'differs'


def build(classes, settings):
    """{class: an instance built through its own signature, or why it can't be}. A class that can't be
    built alone, or only with a guess, but is in another, is checked as built there."""
    built, own, guessed = {}, {c.__module__ for c in classes}, set()
    for cls in classes:
        torch.manual_seed(1337)
        kwargs = arguments(cls, settings, own)
        guessed |= {cls} if any(type(v) is Guess for v in kwargs.values()) else set()
        try:
            built[cls] = cls(**kwargs)
        except Exception as e:
            shown = ', '.join(f"{k}={v!r}" if len(repr(v)) < 30 else f"{k}=<{type(v).__name__}>"
                              for k, v in kwargs.items())
            built[cls] = f"can't build {cls.__name__}({shown}): {message(e)}"
    for m in [m for m in built.values() if isinstance(m, nn.Module)]:
        for s in m.modules():
            if s is not m and type(s) in built and (isinstance(built[type(s)], str) or type(s) in guessed):
                built[type(s)], guessed = s, guessed - {type(s)}
    return built


def report(classes, settings, notes, put):
    """The report's lines, and its exit code."""
    built, ctx, parts, lines = build(classes, settings), Context(settings), [], []
    for cls, m in built.items():
        kind = None if isinstance(m, str) else ctx.role_of(m)
        if isinstance(m, str) or kind in ORDER:
            parts.append((ORDER.index(kind) if kind else len(ORDER), cls.__name__, m, kind))
        parts += [(ORDER.index('FeedForward'), f"{cls.__name__}.{n}", c, 'FeedForward') # an inline one
                  for n, c in layers(m, nn.Sequential) if ctx.role_of(c) == 'FeedForward' != kind] if kind else []
    if not parts:
        raise CantCheck("none of the lecture's parts is defined there (a Head, MultiHeadAttention, FeedForward, "
                        "Block or model, whatever their names)")
    parts.sort(key=lambda p: p[0])
    ctx.parts = {id(m) if '.' in label else type(m) for _, label, m, _ in parts}
    models = [m for *_, m, kind in parts if kind == 'the model']
    checks = {id(m): invariants(m, block_size(m, settings)) for m in models} # on the weights as built
    with torch.no_grad(): # then no two weights alike
        torch.manual_seed(0)
        for p in {id(p): p for m in built.values() if isinstance(m, nn.Module) for p in m.parameters()}.values():
            p.add_(torch.randn_like(p) * NOISE)
    stages = {} # a class's context: the latest stage of the models that use it
    for m in models:
        try:
            stage = stage_of(m, 'the model', LAYOUTS['the model'](m, ctx)[0], ctx)
        except Exception: # its own line says why
            stage = 7
        stages.update({type(s): max(stage, stages.get(type(s), 0)) for s in m.modules()})
    results = []
    for _, label, m, kind in parts:
        try:
            line, status = (m, 'cant') if kind is None else check_part(label, m, kind, ctx, stages.get(
                type(m), max(stages.values(), default=0)))
        except Exception as e: # a part this checker can't make sense of
            line, status = f"can't be checked: {message(e)}", 'cant'
        if kind == 'the model' and not line.startswith('raised'):
            problems, loss = checks[id(m)]
            line += '; but ' + '; '.join(problems) if problems else "; the past never hears the future, batch rows " \
                "never talk" + (", generate goes past block_size" if block_size(m, settings, cap=None) <= 256
                                else ", generate runs") * hasattr(m, 'generate') + \
                (f", loss at init {loss.item():.2f}" if loss is not None else '')
            status = 'cant' if any('pip install' in p for p in problems) else 'differs' if problems else status
        results.append((label, line, status))
    missing = list(dict.fromkeys(notes.get('stand-ins', [])))
    lines += [f"note: not installed here (nor a file beside yours), so standing in: {', '.join(missing)}; "
              "a part that calls one says so"] * bool(missing)
    lines += [f"note: left out: {e}" for e in notes.get('unread', [])]
    given = sorted({f"{name}={scope[name]!r}" for scope, name, was in put # vocab_size comes from the data
                    if was is put and MEANING[norm(name)] != 'vocab_size'})
    lines += [f"note: your code reads {', '.join(given)}, which it never sets: the lecture's values"] * bool(given)
    column = max(20, *(len(label) + 1 for label, _, _ in results))
    lines += [f"{label:<{column}} {line}" for label, line, _ in results]
    failed = [label for label, _, status in results if status != 'ok']
    last = max(stages.values(), default=7)
    at = 'gpt.py' if last == 7 else f"the lecture at stage {last} ({', '.join(STAGES[last])})"
    lines.append(f"{len(results) - len(failed)} of {len(results)} parts match {at}" +
                 (f"; look at {', '.join(failed)}" if failed else ''))
    return lines, 2 if any(status == 'cant' for *_, status in results) else 1 if failed else 0


def check_names(names, own, notes):
    """The report on the parts defined in names (own: the names of the learner's modules)."""
    settings = Settings(names, own)
    classes = list(dict.fromkeys(v for v in names.values() if isinstance(v, type) and issubclass(v, nn.Module)
                                 and v.__module__ in own))
    if not classes:
        raise CantCheck("none of the lecture's parts is defined there (no class of torch.nn.Module)")
    put, rng = supply(classes, settings), torch.get_rng_state()
    try:
        return report(classes, settings, notes, put)
    finally: # the learner's globals and random numbers as they were
        torch.set_rng_state(rng)
        for scope, name, was in put:
            scope.pop(name) if was is put else scope.update({name: was})


def here(names):
    """Check the parts defined in a running notebook, without saving a file: check.here(globals())."""
    StandIn.loading = False
    try:
        lines, _ = check_names(names, {names.get('__name__', '__main__')}, {})
    except CantCheck as e:
        lines = [f"error: {e}"]
    print('\n'.join(lines))


def main(argv):
    p = common.argument_parser(__doc__)
    p.add_argument('path', help='your .py file or .ipynb notebook')
    path = p.parse_args(argv).path
    before = set(sys.modules)
    try:
        names, notes, own = load(path)
        lines, code = check_names(names, own, notes)
    except CantCheck as e:
        common.fail(str(e), code=2)
    finally: # the learner's modules and the stand-ins go: another check in this process starts afresh
        for name in set(sys.modules) - before:
            if name == 'learner' or isinstance(sys.modules[name], StandInModule) or \
                    isinstance(getattr(sys.modules[name], '__loader__', None), Siblings):
                del sys.modules[name]
    print('\n'.join(lines))
    return code


if __name__ == '__main__':
    common.run(lambda argv: sys.exit(main(argv)), sys.argv[1:])
