"""
Step 2, build: the learner's settings by meaning; their models built where their code builds them (a cell,
main()); a class no model holds built alone, each parameter filled by what its name means.
"""
import ast, builtins, contextlib, copy, dis, inspect, re, sys, traceback, types

import torch
import torch.nn as nn

from checker.lecture import CONFIGS, LECTURE, MEANING, PLAUSIBLE, SETTINGS, norm
from checker.roles import block_size, has, width
from checker.load import CantCheck, StandIn, builds, message, run_selected

RANK = {norm(n): i for names in SETTINGS.values() for i, n in enumerate(names.split())} # n_embd before C

def meaning(name):
    """The setting a name means: by the table, else by its end (tgt_vocab_size, model_n_embd)."""
    name = norm(name)
    return MEANING.get(name) or next((MEANING[k] for k in sorted(MEANING, key=len, reverse=True)
                                      if len(k) >= 5 and name.endswith(k)), None) or next(
        (meant for pattern, meant in WORDS if re.search(pattern, name)), None) or ( # (n_embeeding_dimensions)
        meaning(name[:-1]) if name.endswith('s') else None) # (head_dims)

# (words in a long name of the learner's own, either way round: head_dim, size_head)
WORDS = [(r'vocab', 'vocab_size'), (r'head.*(size|dim)|^(size|dim).*head$', 'head_size'),
         (r'(^n|num).*heads?$', 'n_head'), (r'(^n|num).*(layers?|blocks?)$', 'n_layer'),
         (r'(block|context|ctx|seq).*(size|len)|^(size|len).*(context|ctx|seq)', 'block_size'),
         (r'(ff|feedforward|mlp|inner).*(dim|size)$', 'ffwd_size'),
         (r'emb.*(dim|size)|^nemb|^(size|dim).*emb', 'n_embd')]

fits = lambda meant, value: PLAUSIBLE.get(meant, PLAUSIBLE['size'])(value)

class Settings:
    """The learner's settings by meaning (in their names, configs, config classes), else the lecture's; the
    device is the CPU. It stands in for a config the file never made: settings.n_embd, settings['n_embd']."""
    def __init__(self, names, own):
        meant = lambda d: sum(isinstance(k, str) and norm(k) in MEANING for k in d) >= 2 # a config's keys
        self.configs = [v for k, v in names.items() if not k.startswith('__') and (
            isinstance(v, dict) and meant(v) or isinstance(v, types.SimpleNamespace) or not isinstance(v, type)
            and type(v).__module__ in own and not isinstance(v, nn.Module) and meant(getattr(v, '__dict__', {})))]
        self.classes = [v for v in names.values() if isinstance(v, type) and v.__module__ in own
                        and not issubclass(v, nn.Module) and meant(vars(v))]
        classes = [v for v in names.values() if isinstance(v, type) and v.__module__ in own]
        self.getters = {g for c in classes for g in getters(c)}
        self.found, rank = {}, {}
        for source in [names] + [c if isinstance(c, dict) else vars(c) for c in self.configs + self.classes]:
            for key, value in list(source.items()):
                meant = isinstance(key, str) and MEANING.get(norm(key))
                if meant and fits(meant, value) and RANK[norm(key)] < rank.get(meant, 99):
                    self.found[meant], rank[meant] = value, RANK[norm(key)]
    def __call__(self, meant):
        if meant in self.found and meant != 'device':
            return self.found[meant]
        if meant == 'n_head':
            return next(h for h in (LECTURE['n_head'], 8, 4, 2, 1) if self('n_embd') % h == 0)
        if meant == 'head_size':
            return self('n_embd') // self('n_head')
        return 4 * self('n_embd') if meant == 'ffwd_size' else LECTURE[meant]
    off = set() # the switches read, taken as off
    def __getattr__(self, name):
        if name.startswith(('use_', 'is_', 'enable')): # a switch (use_rope): off
            Settings.off.add(name)
            return False
        if name in vars(self).get('getters', ()):
            return Lookup(self)
        if name.startswith('__') or not meaning(name):
            raise AttributeError(name)
        return self(meaning(name))
    # (a config's key; a section of a nested config, config['model']['n_embd']: these)
    def __getitem__(self, key):
        if isinstance(key, str) and not meaning(key) and 'emb' in key.lower(): # (config['token_embed'])
            return self('n_embd')
        return self.__getattr__(key) if not isinstance(key, str) or meaning(key) else self
    get = lambda self, name, default=None: getattr(self, name, default)
    def guesses(self):
        """These; then, for a model whose sizes these don't fit, one head as wide as n_embd, and only that."""
        yield self
        for change in ({'head_size': self('n_embd')}, {'head_size': self('n_embd'), 'n_head': 1}):
            other = copy.copy(self)
            other.found = {**self.found, **change}
            yield other

class Lookup:
    """A config's method that reads a setting by its name: config.hp('n_embd')."""
    def __init__(self, settings):
        self.settings = settings
    def __call__(self, name, *default):
        return self.settings(meaning(name))

def getters(cls):
    """The methods cls.__init__ calls on a parameter with a string, as config.hp('n_embd'): {'hp'}."""
    code = getattr(cls.__init__, '__code__', None)
    params = code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount] if code else ()
    ops = list(dis.get_instructions(code)) if code else []
    return {b.argval for a, b, c in zip(ops, ops[1:], ops[2:])
            if a.opname == 'LOAD_FAST' and a.argval in params and b.opname in ('LOAD_ATTR', 'LOAD_METHOD')
            and c.opname == 'LOAD_CONST' and isinstance(c.argval, str)}

# what the data cells define, which a notebook's generate may read: Tiny Shakespeare's characters
CHARS = sorted("\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
DATA = dict(chars=CHARS, stoi={c: i for i, c in enumerate(CHARS)}, itos=dict(enumerate(CHARS)),
            encode=lambda s: [CHARS.index(c) for c in s], decode=lambda ids: ''.join(CHARS[i] for i in ids))

class Scope(dict):
    """A build call's names: its file's, builtins, else what a name means, else a config object."""
    def __init__(self, chain, settings):
        self.chain, self.settings = chain, settings
    def __missing__(self, name):
        scope = next((s for s in self.chain if name in s), None)
        if scope is not None:
            return scope[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        return self.settings(meaning(name)) if meaning(name) else self.settings

def filled(config, settings):
    """A copy of a config, what the data was to set in it (vocab_size: int = 0) the lecture's."""
    with contextlib.suppress(Exception): # (a config that can't be copied is used as it is)
        config = copy.copy(config)
        fields = config if isinstance(config, dict) else {k: getattr(config, k) for k in dir(config) if k[0] != '_'}
        for key, value in [(k, v) for k, v in fields.items() if meaning(k) and not fits(meaning(k), v)]:
            config.__setitem__(key, settings(meaning(key))) if isinstance(config, dict) else \
                setattr(config, key, settings(meaning(key)))
    return config

def read_as_config(cls, name):
    """Whether cls.__init__ reads its parameter `name` as settings: name['n_embd'], name.n_embd, name.get()."""
    todo = [cls.__init__.__code__] if hasattr(cls.__init__, '__code__') else []
    for code in todo:
        todo += [c for c in code.co_consts if inspect.iscode(c)]
        ops = list(dis.get_instructions(code))
        if any(op.opname in ('LOAD_FAST', 'LOAD_DEREF') and op.argval == name and (
                ops[i + 1].opname in ('LOAD_ATTR', 'LOAD_METHOD') or ops[i + 1].opname == 'LOAD_CONST' and
                isinstance(ops[i + 1].argval, str) and ops[i + 2].opname in ('BINARY_SUBSCR', 'BINARY_OP'))
               for i, op in enumerate(ops[:-2])): # (n_embd // n_head is no settings: its n_head is no key)
            return True
    return False

def meanings(names):
    """{name: the setting it means}; of two widths, a later hidden_dim is the feed-forward's."""
    meant = {}
    for name in names:
        meant[name] = meaning(name)
        widths = [n for n, m in meant.items() if m == 'n_embd']
        if len(widths) > 1 and re.search('hidden|inner', name.lower()):
            meant[name] = 'ffwd_size'
    return meant

def arguments(cls, settings, own):
    """cls's parameters without a default, filled by meaning (settings: theirs, else one made)."""
    kwargs, meant = {}, meanings(inspect.signature(cls).parameters)
    for p in [p for p in inspect.signature(cls).parameters.values() if p.default is p.empty and p.kind not in (
            p.VAR_POSITIONAL, p.VAR_KEYWORD)]:
        kind = p.annotation if isinstance(p.annotation, type) and p.annotation.__module__ in own else None
        if meant[p.name] or not (kind or norm(p.name) in CONFIGS.split() or read_as_config(cls, p.name)):
            kwargs[p.name] = settings(meant[p.name] or 'n_embd') # (a name that says nothing: a width)
            continue
        made = [c for c in settings.configs if kind is None or isinstance(c, kind)]
        classes = [kind] if kind else settings.classes
        if made: # a config the file makes; else one made of its config class; else the settings themselves
            config = made[0]
        else:
            config = classes[0](**arguments(classes[0], settings, own)) if classes else settings
        kwargs[p.name] = filled(config, settings)
    return kwargs

def codes(cls):
    """The code of a class's own methods (or of a function), and of the functions defined in them."""
    methods = [inspect.unwrap(f) for f in (vars(cls).values() if isinstance(cls, type) else [cls])
               if inspect.isfunction(f)] # (@torch.no_grad()'s)
    found = [f.__code__ for f in methods]
    for code in found:
        found += [c for c in code.co_consts if inspect.iscode(c)]
    return found

def supply(classes, settings, supplied):
    """A setting or a name of the data's that the learner's classes read but never set (or set to None, {}):
    the lecture's, the data's; the device: the CPU. [(globals, name, what it was)]"""
    put, seen, params = [], set(), set()
    for cls in classes:
        with contextlib.suppress(TypeError, ValueError):
            params |= set(inspect.signature(cls).parameters)
        scope = next((f.__globals__ for f in vars(cls).values() if inspect.isfunction(f)), {})
        loads = [i for c in codes(cls) for i in dis.get_instructions(c) if i.opname == 'LOAD_GLOBAL']
        called = {i.argval for i in loads if 'NULL' in i.argrepr} # (Block(...): a class, never a setting)
        # (a function of the file's that reads the data: generate(model, ...) beside the model, its decode)
        functions = [f for f in scope.values() if inspect.isfunction(f) and f.__globals__ is scope]
        data = {i.argval for f in functions for c in codes(f) for i in dis.get_instructions(c)
                if i.opname == 'LOAD_GLOBAL' and i.argval in DATA}
        for name in {i.argval for i in loads} | data:
            # (StandIn: a package's)
            unset = name not in scope or meaning(name) == 'device' or isinstance(scope[name], StandIn) or (
                scope[name] in (None, 0) or name in DATA and scope[name] in ({}, [], ''))
            if (meaning(name) and name not in called or name in DATA) and unset and (id(scope), name) not in seen and \
                    not hasattr(builtins, name):
                seen.add((id(scope), name))
                put.append((scope, name, scope.get(name, put)))
                scope[name] = settings(meaning(name)) if meaning(name) else DATA[name]
                supplied |= {(name, repr(scope[name]))} if put[-1][2] is put and meaning(name) else set()
            elif isinstance(scope.get(name), StandIn) and (norm(name) in CONFIGS.split() or name in params):
                put.append((scope, name, scope[name])) # (a config of a module that isn't here: the settings)
                scope[name] = settings
    return put

def put_back(put):
    for scope, name, was in put:
        scope.pop(name) if was is put else scope.update({name: was})

def classes_of(learner):
    """The learner's nn.Module classes, and those defined inside them."""
    found = [v for v in learner.names.values() if isinstance(v, type)]
    for cls in found:
        found += [v for v in vars(cls).values() if isinstance(v, type) and v not in found]
    return list(dict.fromkeys(v for v in found if issubclass(v, nn.Module) and v.__module__ in learner.own))

class Builder:
    """Builds the learner's models where their code does, each module knowing the line that made it."""
    def __init__(self, learner):
        self.learner, self.models, self.supplied, self.failed, self.errors = learner, [], set(), set(), []
        self.made, self.building = set(), False # the classes their own builds made, by name
        self.tried = [] # the classes whose build of theirs raised (a notebook's earlier version too)
        learner.build = self.build
        Settings.off.clear() # (a check's own)
    def __enter__(self): # from now on a module knows the learner's line that made it
        self.init = init = nn.Module.__init__
        def made(module, *args, **kwargs):
            init(module, *args, **kwargs)
            module.__dict__['_made_at'] = self.learner.line(module)
            theirs = self.building and not type(module).__module__.startswith('torch.') # (nn.LayerNorm: not)
            self.made |= {type(module).__name__} if theirs else set()
        nn.Module.__init__, StandIn.loading = made, True
        return self
    def __exit__(self, *exc):
        nn.Module.__init__ = self.init
    def build(self, call, names, where):
        """Build what the call builds; an argument made from the data (len(chars)) is what its name means."""
        settings = Settings(names, self.learner.own)
        put = supply(classes_of(self.learner), settings, self.supplied)
        configs = {k: filled(v, settings) for k, v in names.items() if any(v is c for c in settings.configs)}
        value = lambda n: eval(
            compile(ast.Expression(n), where, 'eval'), names, Scope([configs, names], settings)
        )
        def given(node, name):
            meant, default = meaning(name or ''), defaults.get(name)
            # (a value from what their file never gives, a JSON config not read: their default, where it is a
            # number; ff_dim=4 may be a factor, not the lecture's width)
            unknown = any(isinstance(n, ast.Name) and n.id not in names and not hasattr(builtins, n.id)
                          for n in ast.walk(node))
            if unknown and type(default) in (int, float, bool):
                return default
            try:
                v = value(node)
            except Exception:
                return settings(meant) if meant else value(node)
            # (len(chars) of ''; a name only data lines set, token_count, taken for a config)
            wrong = type(v) is int and not fits(meant, v) or v is settings
            return settings(meant) if meant and wrong else v
        cls, defaults = None, {}
        try: # (their build failing, the class is built alone: its line says why)
            cls = value(call.func)
            signature = inspect.signature(cls).parameters.values()
            params = [p.name for p in signature] + [None] * len(call.args)
            defaults.update({p.name: p.default for p in signature})
            torch.default_generator.manual_seed(1337) # (not torch.manual_seed: slow, CUDA's too)
            self.building = True
            m = cls(*[given(a, params[i]) for i, a in enumerate(call.args)],
                    **{k.arg: given(k.value, k.arg) for k in call.keywords if k.arg})
            if isinstance(m, nn.Module):
                self.models.append((m, (where, call.lineno)))
                return m
        except Exception as e:
            self.failed.add(message(e))
            self.errors.append(((where, call.lineno), message(e)))
            self.tried += [cls] if isinstance(cls, type) and issubclass(cls, nn.Module) else []
        finally:
            self.building = False
            put_back(put)
    def given(self, expression):
        """The model that --build's expression builds, in the learner's names."""
        torch.default_generator.manual_seed(1337)
        put = supply(classes_of(self.learner), Settings(self.learner.names, self.learner.own), self.supplied)
        try:
            self.building = True
            m = eval(expression, self.learner.names)
        except Exception as e:
            raise CantCheck(f"--build {expression}: {message(e)}") from None
        finally:
            put_back(put)
        if not isinstance(m, nn.Module):
            raise CantCheck(f"--build {expression} builds a {type(m).__name__}, not a model")
        self.models.append((m, None))
    def functions(self):
        """The models built in main(), train(config), ...: its body run as a file's, its defaults live."""
        argv, sys.argv = sys.argv, [self.learner.path]
        for node, names in [(n, ns) for n, ns in self.learner.functions if n.name != '__init__' and
                            builds(n, self.learner, ns) and inspect.isfunction(ns.get(n.name))]:
            fn, settings = names[node.name], Settings(names, self.learner.own)
            local = dict(names)
            for p in inspect.signature(fn).parameters.values():
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    continue
                # (one the data was to make)
                if p.default is not p.empty and not isinstance(p.default, Settings):
                    local[p.name] = p.default
                else:
                    local[p.name] = settings(meaning(p.name)) if meaning(p.name) else settings
            with contextlib.suppress(CantCheck): # (a line of it that can't run: its models are built alone)
                run_selected(ast.Module(node.body, []), self.learner, local, fn.__code__.co_filename)
        sys.argv = argv
    def instances(self, classes, settings):
        """{class: the instance checked, or why it can't be built}: the one their latest model holds, else the
        largest built alone holds; for a stub, the one of its name their model holds."""
        built, alone = {type(s): s for m, _ in self.models for s in safe_modules(m)[::-1]}, {} # (the first)
        for cls in [c for c in classes if c not in built]:
            raised = []
            for guess in settings.guesses(): # the first that builds, unless a later one also runs
                torch.default_generator.manual_seed(1337)
                kwargs = {}
                try:
                    kwargs = arguments(cls, guess, {c.__module__ for c in classes})
                    m = cls(**kwargs)
                except Exception as e:
                    raised.append(message(e))
                    alone.setdefault(cls, unbuilt(cls, kwargs, e, classes, self.failed))
                    continue
                if not isinstance(vars(m).get('_modules'), dict):
                    alone[cls] = Unbuilt(f"{cls.__name__}.__init__ never calls super().__init__()")
                    alone[cls].by = cls
                    break
                works = runs_alone(m, guess)
                alone[cls] = m if works or not isinstance(alone.get(cls), nn.Module) else alone[cls]
                if works:
                    break
            # whatever the sizes, the same error: their code's
            same = len(raised) == 3 and len(set(raised)) == 1
            if isinstance(alone[cls], Unbuilt) and same and not alone[cls].guard:
                alone[cls].theirs = True
        for m in sorted(
            [m for m in alone.values() if isinstance(m, nn.Module)], key=lambda m: len(safe_modules(m))
        ):
            alone.update({type(s): s for s in safe_modules(m)[1:] if type(s) in alone}) # the larger holds it
        named = {type(s).__name__: s for m, _ in self.models for s in safe_modules(m)}
        stub = lambda c: isinstance(alone[c], str) and not alone[c].theirs # (not its own code's mistake)
        return {
            c: built.get(c) or (named.get(c.__name__, alone[c]) if stub(c) else alone[c]) for c in classes
        }

class Unbuilt(str):
    """Why a class can't be built; by: the class whose own code raised; theirs: whether their own build raised
    it too (else the checker's guess may be what fails); guard: whether a check of theirs raised it (a guess
    may fail it)."""
    by, theirs, guard = None, False, False

def unbuilt(cls, kwargs, e, classes, failed):
    shown = ', '.join(
        f"{k}={v!r}" if len(repr(v)) < 30 else f"{k}=<{type(v).__name__}>" for k, v in kwargs.items()
    )
    said = message(e).replace("TypeError: descriptor '__init__' of 'super' object needs an argument",
                              "super.__init__() calls super without its (): super().__init__()")
    why = Unbuilt(f"can't build {cls.__name__}({shown}): {said}")
    why.by = next((c for f in traceback.extract_tb(e.__traceback__)[::-1] for c in classes
                   if (f.filename, f.lineno) in code_lines(c)), None)
    why.theirs = message(e) in failed
    last = traceback.extract_tb(e.__traceback__)[-1]
    theirs = any((last.filename, last.lineno) in code_lines(c) for c in classes)
    why.guard = theirs and isinstance(e, (ValueError, AssertionError))
    return why

def runs_alone(m, settings):
    """Whether a module built alone runs on an input of its size: whether a guess fits it."""
    with contextlib.suppress(Exception), torch.no_grad():
        T = min(8, block_size(m, settings))
        m.eval()(torch.zeros(2, T, dtype=torch.long) if has(m, nn.Embedding) else torch.randn(2, T, width(m)))
        return True
    return False

def code_lines(cls):
    return {(code.co_filename, line) for code in codes(cls) for *_, line in code.co_lines()}

def reached(m):
    """m's modules, and those in plain lists, tuples or dicts of theirs (not registered, but run)."""
    found = {}
    for s in safe_modules(m):
        found.setdefault(id(s), s)
        for k, v in vars(s).items():
            if k == '_modules': # (its registered children come in turn: not walked again from here)
                continue
            items = list(v.values()) if isinstance(v, dict) else v
            for c in [c for c in items if isinstance(c, nn.Module) and id(c) not in found] if isinstance(
                    items, (list, tuple)) else []:
                found.update({id(d): d for d in reached(c)})
    return list(found.values())

def safe_modules(m):
    try:
        return list(m.modules())
    except Exception: # a module of the learner's that never called super().__init__()
        return [m]
