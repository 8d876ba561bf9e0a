"""
Step 1, load: of the learner's file (a script, a notebook's cells, the modules beside it) only the imports,
settings and definitions run, and the calls that build a model (build.py); never what reads data or trains.
"""
import __future__, argparse, ast, contextlib, difflib, importlib.abc, importlib.machinery, importlib.util, json
import linecache, os, pkgutil, platform, re, sys, textwrap, traceback, types

import torch
import torch.nn as nn

NOTEBOOK = '<notebook>' # the path of a running notebook's code (check.here)
OURS = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        os.path.dirname(os.__file__))

class CantCheck(Exception):
    """The file can't be checked: exit code 2."""

class Missing(Exception):
    """A part called a package that isn't installed here."""

def message(e):
    """The exception in one line, where the learner's code raised it."""
    if isinstance(e, Missing):
        top = e.args[0].split('.')[0]
        return f"calls {e.args[0]}: pip install {top} (or put your module {top} beside the file) to check it"
    frames = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith(OURS)]
    at = f"{os.path.basename(frames[-1].filename)}, line {frames[-1].lineno}: " if frames else ''
    return (at + f"{type(e).__name__}: " + ' '.join(str(e).split())).rstrip(': ')

class Learner:
    """What loading finds: their names, notes, files and their lines, modules, functions."""
    def __init__(self, path):
        self.path, self.notes, self.files, self.functions, self.texts = path, {}, set(), [], {}
        self.module, self.build = types.ModuleType('learner'), lambda call, names, where: None
        self.module.__file__ = os.path.abspath(path)
        self.names, self.own = vars(self.module), {'learner'}
    def raised(self, e):
        """Whether their code raised e (not the checker's): a frame of theirs is in its traceback."""
        return any(f.filename in self.files for f in traceback.extract_tb(e.__traceback__))
    def place(self, at):
        """'line 12', 'cell 3, line 2' or 'model.py, line 7', for (file, line)."""
        where, line = at
        if ', cell ' in where:
            return f"cell {where.rsplit(', cell ', 1)[1]}, line {line}"
        if where == self.path or self.path == NOTEBOOK:
            return f"line {line}"
        return f"{os.path.basename(where)}, line {line}"
    def source(self, at):
        """Their line at (file, line), as they wrote it, without its comment."""
        lines = self.texts.get(at[0]) or linecache.getlines(at[0])
        return lines[at[1] - 1].split('  #')[0].split(' # ')[0].strip() if 0 < at[1] <= len(lines) else ''
    def parsed(self, code):
        """The syntax tree of the function whose code object is code, as they wrote it (its lines numbered from
        its def: code.co_firstlineno + n.lineno - 1 is theirs); SyntaxError where it can't be read."""
        lines = self.texts.get(code.co_filename) or linecache.getlines(code.co_filename)
        last = max(line for *_, line in code.co_lines() if line)
        return ast.parse(
            textwrap.dedent('\n'.join(l.rstrip('\n') for l in lines[code.co_firstlineno - 1 : last]))
        )
    def line(self, *skip):
        """(file, line) of their code running now: its innermost frame (not in a method of skip's)."""
        f = sys._getframe(1)
        while f is not None and (f.f_code.co_filename not in self.files or f.f_locals.get('self', f) in skip):
            f = f.f_back
        return f and (f.f_code.co_filename, f.f_lineno)

# ------------ what isn't installed stands in

class StandIn:
    """A name of a package that isn't installed: anything while models are built; called later, Missing."""
    loading = True
    setting = None # setting(name): the value of the setting a name means (the file's, else the lecture's)
    def __init__(self, name):
        self.name = name
    def __getattr__(self, attr):
        if attr.startswith('__'):
            raise AttributeError(attr)
        value = StandIn.setting(attr) if StandIn.setting and not attr.startswith(('get', 'set')) else None
        # (hyperparameters.n_embd of a module of theirs not here, tiktoken's enc.n_vocab: the settings')
        return StandIn(f'{self.name}.{attr}') if value is None else value
    def __call__(self, *args, **kwargs):
        if self.name.split('.')[0] == 'tqdm' and args: # (a progress bar: what it counts)
            return range(*args) if self.name.endswith('trange') else args[0]
        if not StandIn.loading:
            raise Missing(self.name)
        return args[0] if len(args) == 1 and callable(args[0]) and not kwargs else self
    # annotations: Float[Tensor, 'b t'], Tensor | None
    __getitem__ = __or__ = __ror__ = lambda self, other: self
    __mro_entries__ = lambda self, bases: (nn.Module,)

class StandInModule(types.ModuleType):
    """A module that isn't installed, and a package: its submodules stand in too."""
    def __init__(self, name):
        super().__init__(name)
        self.__path__, self.__spec__ = [], importlib.machinery.ModuleSpec(name, None, is_package=True)
    __getattr__ = lambda self, attr: StandIn(self.__name__).__getattr__(attr)

def import_(node, learner, names, where):
    """An import; a package that isn't installed stands in (a module of one that is, misspelt, raises)."""
    # from .model import GPT: the file beside
    if getattr(node, 'level', 0) == 1 and not names.get('__package__'):
        node = ast.copy_location(
            ast.ImportFrom(node.module, node.names, 0) if node.module else ast.Import(node.names), node
        )
    before = {k: v for k, v in names.items() if isinstance(v, type)}
    homes = (OURS[1], os.path.dirname(OURS[1])) # (scripts/ and the repository's: our common, gpt, check)
    tops = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or '']
    tops = [t.split('.')[0] for t in tops if t.split('.')[0] in sys.modules]
    ours = {t: sys.modules.pop(t) for t in tops
            if os.path.dirname(getattr(sys.modules[t], '__file__', '') or '') in homes}
    path, sys.path[:] = sys.path[:], [p for p in sys.path if os.path.abspath(p or '.') not in homes]
    try:
        return imported(node, learner, names, where, before)
    finally:
        sys.path[:] = path
        sys.modules.update(ours)

def imported(node, learner, names, where, before):
    for _ in range(20):
        try:
            run([node], where, names)
            # (their class, from a
            # package not here: the one the notebook defined stays)
            for k in [k for k, v in names.items() if isinstance(v, StandIn) and k in before]:
                names[k] = before[k]
            return
        except ModuleNotFoundError as e:
            top = (e.name or '.').split('.')[0]
            if not e.name or not isinstance(sys.modules.get(top), StandInModule) and importlib.util.find_spec(top):
                sys.modules[e.name] = importlib.import_module(spelt(e.name) or e.name) # (none: it raises)
                words = f"there is no module {e.name}; {spelt(e.name)} is meant (names are case-sensitive)"
                learner.notes.setdefault('slips', []).append(
                    ((where, node.lineno), words + '; checked with it')
                )
                continue
            sys.modules[e.name] = StandInModule(e.name)
            learner.notes.setdefault('stand-ins', []).append(top)
        except ImportError as e: # (a module here that needs one not installed: torch.utils.tensorboard)
            wanted = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            wanted = [m for m in wanted if m and not isinstance(sys.modules.get(m), StandInModule)]
            if 'cannot import name' in str(e) or not wanted: # (a name misspelt: theirs)
                raise
            sys.modules.update({m: StandInModule(m) for m in wanted})
            learner.notes.setdefault('stand-ins', []).extend(wanted)

USUAL = {'torch': 'torch', 'nn': 'torch.nn', 'F': 'torch.nn.functional', 'math': 'math', 'np': 'numpy'}

def unimported(node, learner, names, where):
    """Run a definition; one that uses a usual module the file never imports (nn, or F in a forward) runs with
    it, named; one that uses what only a data line makes (Config's tokenizer.VOCAB_SIZE) with the settings, by
    meaning."""
    from checker.build import Settings, meaning # (build.py imports this module)
    def supply(name, run_time=False):
        later = [(w, i) for w, text in learner.texts.items() for i, line in enumerate(text, 1)
                 if name in bound(line)]
        if run_time and later: # (there when their code runs)
            return
        names[name] = importlib.import_module(USUAL[name])
        as_ = f" as {name}" if name != USUAL[name] else ''
        words = (f"{name} is imported only later, at {learner.place(later[0])}" if later else
                 f"{name} is never imported (import {USUAL[name]}{as_})") + '; checked with it'
        if not later or ', cell ' not in where: # (a notebook's cells may have run out of order)
            learner.notes.setdefault('slips', []).append(((where, node.lineno), words))
    for _ in range(len(USUAL) + 5):
        try:
            done = run([node], where, names)
        except NameError as e:
            # (a, b = ...)
            made = any(re.match(rf"\s*([\w.]+\s*,\s*)*{e.name}\s*(,\s*[\w.]+\s*)*(:[^=]*)?=[^=]", line)
                       for text in learner.texts.values()
                       for line in text)
            if e.name not in USUAL and made and e.name not in names: # (a line the checker skips)
                names[e.name] = Settings(names, learner.own)
                continue
            if e.name not in USUAL and meaning(e.name) and e.name not in names: # (vocab_size=vocab_size in a
                names[e.name] = Settings(names, learner.own)(meaning(e.name)) # def, and no line sets it)
                continue
            if e.name not in USUAL or e.name in names:
                raise
            supply(e.name)
            continue
        used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} # (F.softmax in a forward, later)
        for name in sorted(used & set(USUAL) - set(names)):
            supply(name, run_time=True)
        return done

def mended(node, learner, where):
    """A definition whose super.__init__(...) calls super without its (): run as super().__init__(...), named."""
    for call in [n for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and isinstance(n.func.value, ast.Name) and n.func.value.id == 'super']:
        call.func.value = ast.copy_location(ast.Call(ast.Name('super', ast.Load()), [], []), call.func.value)
        words = "super.__init__ calls super without its (): super().__init__() is meant; checked with it"
        learner.notes.setdefault('slips', []).append(((where, call.lineno), words))
    for call in [n for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr == 'T' and len(n.args) == 2]: # (k.T(-2, -1): the transposed tensor, called)
        call.func.attr = 'transpose'
        words = (
            ".T(-2, -1) calls the transposed tensor, which is no function: .transpose(-2, -1) is meant; "
            "checked with it"
        )
        learner.notes.setdefault('slips', []).append(((where, call.lineno), words))
    return node

def bound(line):
    """The names an import line binds: import torch.nn as nn, from torch import nn, F."""
    m = re.match(r'\s*(from\s+\S+\s+)?import\s+([^#]*)', line)
    if not m:
        return set()
    pieces = [p.strip() for p in m.group(2).strip('()\\ ').split(',')]
    binds = lambda p: p if m.group(1) else p.split('.')[0] # (import torch.nn binds torch)
    return {p.split(' as ')[-1].strip() if ' as ' in p else binds(p) for p in pieces}

def spelt(name):
    """The module of an installed package that a misspelt name means (torch.nn.Functional), or None."""
    parent, _, last = name.rpartition('.')
    with contextlib.suppress(ImportError):
        known = [
            m.name for m in pkgutil.iter_modules(getattr(importlib.import_module(parent), '__path__', []))
        ]
        meant = [k for k in known if k.lower() == last.lower()] or difflib.get_close_matches(
            last, known, 1, 0.8
        )
        return f"{parent}.{meant[0]}" if parent and meant else None

class Siblings(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The modules beside the learner's file or in a folder above it, loaded as it is."""
    def __init__(self, learner):
        self.learner = learner
        self.folders = [
            os.path.abspath(os.path.join(os.path.dirname(learner.path), *['..'] * i)) for i in range(4)
        ]
    def find_spec(self, name, path, target=None):
        for folder in self.folders if name.split('.')[0] not in sys.stdlib_module_names else []:
            base = os.path.join(folder, *name.split('.'))
            if os.path.isfile(base + '.py'):
                return importlib.util.spec_from_file_location(name, base + '.py', loader=self)
            if os.path.isfile(os.path.join(base, '__init__.py')) or os.path.isdir(base) and folder != self.folders[0]:
                return importlib.util.spec_from_file_location(
                    name, os.path.join(base, '__init__.py'), loader=self, submodule_search_locations=[base]
                )
    def exec_module(self, module):
        self.learner.own.add(module.__name__)
        self.learner.files.add(module.__file__)
        if os.path.isfile(module.__file__): # (a folder without __init__.py: a package of nothing)
            with open(module.__file__, encoding='utf-8', errors='replace') as f:
                self.learner.texts[module.__file__] = text = f.read().splitlines()
            run_selected(parse('\n'.join(text), module.__file__), self.learner, vars(module), module.__file__)

def forwards(cls):
    """A module class of theirs whose __call__ does its forward's job (a dataclass's): its forward."""
    if isinstance(cls, type) and issubclass(cls, nn.Module) and '__call__' in vars(cls) and \
            cls.forward is nn.Module.forward:
        cls.forward = vars(cls)['__call__'] # (PyTorch's __call__, with its hooks, calls it)
        del cls.__call__

# ------------ what runs: imports, definitions, settings, and the calls that build a model

def cell(source):
    """A notebook cell's Python: no !, % or obj? lines; no cell magic but %%time, %%capture, %%writefile x.py."""
    magic = source.lstrip().split('\n', 1)[0] if source.lstrip().startswith('%%') else ''
    if magic and not magic.startswith(('%%time', '%%capture')) and not re.match(r'%%writefile .*\.py\s*$', magic):
        return ''
    return '\n'.join(
        '' if re.match(r'\s*([!%?]|[\w.]+\?\??\s*$)', line) else line for line in source.splitlines()
    )

def sources(path):
    """[(where, code)]: the file, or a notebook's code cells."""
    if not os.path.isfile(path) or not path.endswith(('.py', '.ipynb')):
        raise CantCheck(f"no file at {path}" if not os.path.isfile(path) else
                        f"{path} is neither a Python file (.py) nor a notebook (.ipynb)")
    with open(path, encoding='utf-8', errors='replace') as f:
        text = f.read()
    if path.endswith('.py'):
        return [(path, text)]
    try:
        notebook = json.loads(text)
        # nbformat 3
        cells = notebook.get('cells') or [c for w in notebook.get('worksheets', []) for c in w['cells']]
        cells = [(i, c.get('source', c.get('input', ''))) for i, c in enumerate(cells, 1) if c['cell_type'] == 'code']
    except (ValueError, KeyError, TypeError, AttributeError) as e: # (ValueError: its JSON breaks off)
        raise CantCheck(
            f"{path} is not a notebook: "
            + (f"its JSON breaks off ({e})" if isinstance(e, ValueError) else "no code cells in its JSON")
        ) from None
    return [(f"{path}, cell {i}", cell(s if isinstance(s, str) else ''.join(s))) for i, s in cells]

def parse(code, where, left=None):
    """The module's code; a marimo notebook's cells (@app.cell functions) as its top level, in order; a
    top-level statement that doesn't parse, not a definition, left out (said in left)."""
    lines, said, gone = code.split('\n'), None, set() # gone: the numbers of the lines left out
    for _ in range(10):
        try:
            tree = ast.parse('\n'.join(lines))
            break
        except SyntaxError as e:
            top = lambda i: lines[i][:1] not in ' \t#)]}' and lines[i].strip() # (a top-level statement)
            first = next((i for i in range(min(e.lineno or 1, len(lines)) - 1, -1, -1) if top(i)), 0)
            end = next((i for i in range(first + 1, len(lines)) if top(i)), len(lines))
            newer = 'f-string' in e.msg and sys.version_info < (3, 12) # (PEP 701's f-strings)
            newer = f" (Python 3.12 reads it, this is {platform.python_version()})" if newer else ''
            said = said or f"{where}, line {e.lineno}: a syntax error: {e.msg}{newer}"
            if left is None or re.match(r'(async\s+)?(def|class)\b|@', lines[first]) or e.lineno is None:
                raise CantCheck(f"{where}, line {e.lineno}: a syntax error: {e.msg}") from None
            lines[first:end] = [''] * (end - first) # (a loop, a print)
            gone |= set(range(first + 1, end + 1))
    else:
        raise CantCheck(said)
    if gone:
        starts = [n for n in sorted(gone) if n - 1 not in gone]
        ends = [n for n in sorted(gone) if n + 1 not in gone]
        spans = ', '.join(f"{a} to {b}" if b > a else f"{a}" for a, b in zip(starts, ends))
        left.append(f"{said}: line{'' if spans.isdigit() else 's'} {spans}")
        linecache.cache[where] = len(code), None, [line + "\n" for line in lines], where # (inspect reads it)
    cell = lambda n: isinstance(n, ast.FunctionDef) and any(
        getattr(d, 'attr', '') == 'cell' for d in n.decorator_list
    )
    tree.body = [inner for node in tree.body for inner in ([i for i in node.body if not isinstance(i, ast.Return)]
                                                          if cell(node) else [node])]
    return tree

PLAIN = (ast.Constant, ast.Name, ast.Attribute, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp,
         ast.Tuple, ast.List, ast.Dict, ast.Set, ast.Call, ast.keyword, ast.Subscript, ast.Slice, ast.Starred,
         ast.JoinedStr, ast.FormattedValue, ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)
SAFE = {int, float, bool, str, dict, list, tuple, set, min, max, round, abs, pow, len, torch.cuda.is_available,
        torch.backends.mps.is_available, torch.mps.is_available, argparse.ArgumentParser,
        torch.set_default_dtype}

def resolve(func, names):
    """What a call's function is, where it is a plain name or attribute, else None."""
    with contextlib.suppress(Exception):
        if all(isinstance(n, (ast.Name, ast.Attribute, ast.Load)) for n in ast.walk(func)):
            return eval(compile(ast.Expression(func), '', 'eval'), names)

def is_setting(node, names):
    """name = numbers, arithmetic, a device, a config, argparse's defaults: nothing that reads data or trains."""
    if isinstance(node, ast.If): # (a print beside the settings, as in a choice of device: run, quietly)
        printed = lambda n: isinstance(n, ast.Expr) and \
            resolve(getattr(n.value, 'func', None), names) is print
        return all(is_setting(n, names) or printed(n) for n in node.body + node.orelse) and \
            is_setting(ast.Expr(node.test), names)
    if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.Expr)) or node.value is None:
        return False
    # (nn.LayerNorm(n_embd))
    layer = lambda f: issubclass(f, nn.Module) and f.__module__.startswith('torch.nn')
    safe = lambda f: layer(f) or not issubclass(f, (nn.Module, torch.Tensor)) if isinstance(f, type) else any(
        f is s for s in SAFE) or getattr(f, '__module__', None) == 'math' or isinstance(
        getattr(f, '__self__', None), (argparse.ArgumentParser, argparse._ArgumentGroup))
    nodes = list(ast.walk(node.value))
    return all(isinstance(n, PLAIN) for n in nodes) and all(safe(resolve(n.func, names)) for n in nodes
                                                            if isinstance(n, ast.Call))

def builds(node, learner, names):
    """The calls in a statement that build one of the learner's modules (the outermost of each)."""
    found, inner = [], set()
    for n in ast.walk(node):
        f = isinstance(n, ast.Call) and id(n) not in inner and resolve(n.func, names)
        if isinstance(f, type) and issubclass(f, nn.Module) and f.__module__ in learner.own:
            found.append(n)
            inner |= {id(c) for c in ast.walk(n)}
    return found

def run(nodes, where, names): # (after from __future__ import annotations, with it, as Python and Jupyter)
    flags = __future__.annotations.compiler_flag if names.get('annotations') is __future__.annotations else 0
    exec(compile(ast.fix_missing_locations(ast.Module(nodes, [])), where, 'exec', flags), names)

def run_selected(tree, learner, names, where):
    """Run a module's (or a function's) imports, definitions and settings, in order, and build its models."""
    for node in tree.body:
        guard = isinstance(node, ast.If) and {'__name__', '__main__'} <= {
            getattr(n, 'id', getattr(n, 'value', None)) for n in ast.walk(node.test)
        }
        # try: import tqdm ...; if __name__ == '__main__': ...
        if isinstance(node, (ast.Try, ast.With)) or guard:
            run_selected(ast.Module(node.body, []), learner, names, where)
        elif isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
            try:
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    import_(node, learner, names, where)
                else:
                    unimported(mended(node, learner, where), learner, names, where)
                if isinstance(node, ast.FunctionDef):
                    learner.functions.append((node, names))
                forwards(names.get(getattr(node, 'name', None)))
            except Exception as e:
                lines = [f.lineno for f in traceback.extract_tb(e.__traceback__) if f.filename == where]
                said = (
                    f"{where}, line {(lines or [node.lineno])[-1]}: running it raised {type(e).__name__}: "
                    f"{' '.join(str(e).split())}"
                )
                if ', cell ' not in where: # a notebook's cell that failed goes on; a file can't
                    raise CantCheck(said) from None
                learner.notes.setdefault('unread', []).append(said)
        elif is_setting(node, names) and not (
            isinstance(node, ast.Expr) and not isinstance(node.value, ast.Call)
        ):
            # (one made from the data, never read, is left out; argparse exits)
            with contextlib.suppress(BaseException):
                setting(node, learner, names, where)
        for call in (
            builds(node, learner, names) if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Expr)) else []
        ):
            m = learner.build(call, names, where)
            # (model = GPT(...): theirs by that name, which their generate may read)
            if m is not None and call is node.value and isinstance(node, ast.Assign):
                names.update({t.id: m for t in node.targets if isinstance(t, ast.Name)})

def setting(node, learner, names, where):
    """Run a line of settings; one reading what only the data makes (config.vocab_size = vocab_size): with the
    settings' value."""
    from checker.build import DATA, Settings, meaning # (build.py imports this module)
    try:
        run([node], where, names)
    except NameError as e:
        if not (meaning(e.name) or e.name in DATA) or e.name in names:
            raise
        # (charsize = len(chars): Tiny Shakespeare's characters)
        names[e.name] = Settings(names, learner.own)(meaning(e.name)) if meaning(e.name) else DATA[e.name]
        run([node], where, names)

def load(path, learner):
    """Run the learner's file's imports, settings and definitions, and build its models (learner.build)."""
    sys.modules['learner'] = learner.module # for dataclasses, which look their module up
    siblings, argv = Siblings(learner), sys.argv
    sys.meta_path.insert(0, siblings)
    sys.argv, StandIn.loading = [path], True # argparse's defaults
    from checker.build import Settings, meaning # (build.py imports this module)
    def value_of(name):
        with contextlib.suppress(KeyError, TypeError): # (device: no setting of the lecture's)
            return meaning(name) and Settings(learner.names, learner.own)(meaning(name))
    StandIn.setting = value_of
    with contextlib.suppress(ImportError): # names NumPy 2 dropped, in code written for NumPy 1
        import numpy
        for old, value in dict(Inf=numpy.inf, Infinity=numpy.inf, PINF=numpy.inf, NINF=-numpy.inf, NaN=numpy.nan,
                               float_=numpy.float64, complex_=numpy.complex128).items():
            setattr(numpy, old, getattr(numpy, old, value))
    try:
        cells = sources(path)
        # (all: cells run out of order)
        learner.texts.update({where: code.splitlines() for where, code in cells})
        for where, code in cells:
            learner.files.add(where)
            try:
                tree = parse(code, where, learner.notes.setdefault('unread', []))
                run_selected(tree, learner, learner.names, where)
            except CantCheck as e: # a notebook's cell that never ran: left out
                if not path.endswith('.ipynb'):
                    raise
                learner.notes.setdefault('unread', []).append(str(e))
    finally:
        sys.argv = argv
        sys.meta_path.remove(siblings)
    for name in learner.own & set(sys.modules) - {'learner'}: # the classes of the modules beside it too
        learner.names.update({f'{name}.{k}': v for k, v in vars(sys.modules[name]).items()
                              if isinstance(v, type) and v.__module__ == name})
