"""
Step 2, build: the learner's settings by meaning; their models built as and where their code builds them (a
cell, main()); a class no model holds built alone, through its signature, each parameter filled by meaning.
"""
import ast, builtins, contextlib, copy, dis, inspect, sys, traceback, types

import torch
import torch.nn as nn

from checker.lecture import CONFIGS, LECTURE, MEANING, PLAUSIBLE, SETTINGS, norm
from checker.load import CantCheck, StandIn, builds, message, run_selected

RANK = {norm(n): i for names in SETTINGS.values() for i, n in enumerate(names.split())} # n_embd before C

def meaning(name):
    """The setting a name means: by the table, else by its end (tgt_vocab_size, model_n_embd)."""
    name = norm(name)
    return MEANING.get(name) or next((MEANING[k] for k in sorted(MEANING, key=len, reverse=True)
                                      if len(k) >= 5 and name.endswith(k)), None)

class Settings:
    """The learner's settings by meaning (names, then configs, then config classes; n_embd before C), else the
    lecture's; the device is the CPU. Also a config or args the file never made: settings.n_embd."""
    def __init__(self, names, own):
        meant = lambda d: sum(isinstance(k, str) and norm(k) in MEANING for k in d) >= 2 # a config's keys
        self.configs = [v for k, v in names.items() if not k.startswith('__') and (
            isinstance(v, dict) and meant(v) or isinstance(v, types.SimpleNamespace) or not isinstance(v, type)
            and type(v).__module__ in own and not isinstance(v, nn.Module) and meant(getattr(v, '__dict__', {})))]
        self.classes = [v for v in names.values() if isinstance(v, type) and v.__module__ in own
                        and not issubclass(v, nn.Module) and meant(vars(v))]
        self.found, rank = {}, {}
        for source in [names] + [c if isinstance(c, dict) else vars(c) for c in self.configs + self.classes]:
            for key, value in list(source.items()):
                meant = isinstance(key, str) and MEANING.get(norm(key))
                if meant and PLAUSIBLE.get(meant, PLAUSIBLE['size'])(value) and RANK[norm(key)] < rank.get(meant, 99):
                    self.found[meant], rank[meant] = value, RANK[norm(key)]
    def __call__(self, meant):
        if meant in self.found and meant != 'device':
            return self.found[meant]
        if meant == 'n_head':
            return next(h for h in (LECTURE['n_head'], 8, 4, 2, 1) if self('n_embd') % h == 0)
        return self('n_embd') // self('n_head') if meant == 'head_size' else 4 * self('n_embd') \
            if meant == 'ffwd_size' else LECTURE[meant]
    def __getattr__(self, name):
        if name.startswith(('use_', 'is_', 'enable')): # a switch (use_rope): off
            return False
        if name.startswith('__') or not meaning(name):
            raise AttributeError(name)
        return self(meaning(name))
    __getitem__ = __getattr__
    get = lambda self, name, default=None: getattr(self, name, default)

class Scope(dict):
    """A build call's names: its file's, builtins, else what a name means, else a config object."""
    def __init__(self, chain, settings):
        self.chain, self.settings = chain, settings
    def __missing__(self, name):
        scope = next((s for s in self.chain if name in s), None)
        return scope[name] if scope is not None else getattr(builtins, name) if hasattr(builtins, name) else \
            self.settings(meaning(name)) if meaning(name) else self.settings

def filled(config, settings):
    """A copy of a config, those of its settings the data was to set (vocab_size: int = 0) the lecture's."""
    with contextlib.suppress(Exception): # (a config that can't be copied is used as it is)
        config = copy.copy(config)
        fields = config if isinstance(config, dict) else {k: getattr(config, k) for k in dir(config) if k[0] != '_'}
        for key, value in list(fields.items()):
            if meaning(key) and not PLAUSIBLE.get(meaning(key), PLAUSIBLE['size'])(value):
                config.__setitem__(key, settings(meaning(key))) if isinstance(config, dict) else \
                    setattr(config, key, settings(meaning(key)))
    return config

def arguments(cls, settings, own):
    """cls's parameters without a default, filled by meaning (a config: theirs, else one made)."""
    kwargs = {}
    for p in [p for p in inspect.signature(cls).parameters.values() if p.default is p.empty and p.kind not in (
            p.VAR_POSITIONAL, p.VAR_KEYWORD)]:
        kind = p.annotation if isinstance(p.annotation, type) and p.annotation.__module__ in own else None
        if meaning(p.name) or not (kind or norm(p.name) in CONFIGS.split()):
            kwargs[p.name] = settings(meaning(p.name) or 'n_embd') # (a name that says nothing: a width)
            continue
        made = [c for c in settings.configs if kind is None or isinstance(c, kind)]
        classes = [kind] if kind else settings.classes
        kwargs[p.name] = filled(made[0] if made else classes[0](**arguments(classes[0], settings, own)) if classes
                                else settings, settings)
    return kwargs

def codes(cls):
    """The code of a class's own methods, and of the functions defined in them."""
    found = [f.__code__ for f in vars(cls).values() if inspect.isfunction(f)]
    for code in found:
        found += [c for c in code.co_consts if inspect.iscode(c)]
    return found

def supply(classes, settings, supplied):
    """A global the learner's classes read but never set: the lecture's value, added to supplied; the device: the
    CPU. [(globals, name, what it was)]"""
    put, seen = [], set()
    for cls in classes:
        scope = next((f.__globals__ for f in vars(cls).values() if inspect.isfunction(f)), {})
        for name in {i.argval for c in codes(cls) for i in dis.get_instructions(c) if i.opname == 'LOAD_GLOBAL'}:
            if meaning(name) and (id(scope), name) not in seen and not hasattr(builtins, name) and \
                    (name not in scope or meaning(name) == 'device'):
                seen.add((id(scope), name))
                put.append((scope, name, scope.get(name, put)))
                scope[name] = settings(meaning(name))
                supplied |= {(name, repr(scope[name]))} if put[-1][2] is put else set()
    return put

def put_back(put):
    for scope, name, was in put:
        scope.pop(name) if was is put else scope.update({name: was})

def classes_of(learner):
    return list(dict.fromkeys(v for v in learner.names.values() if isinstance(v, type) and
                              issubclass(v, nn.Module) and v.__module__ in learner.own))

class Builder:
    """Builds the learner's models where their code does, each module knowing the line that made it."""
    def __init__(self, learner):
        self.learner, self.models, self.supplied = learner, [], set()
        learner.build = self.build
    def __enter__(self): # from now on a module knows the learner's line that made it
        self.init = init = nn.Module.__init__
        def made(module, *args, **kwargs):
            init(module, *args, **kwargs)
            module.__dict__['_made_at'] = self.learner.line(module)
        nn.Module.__init__, StandIn.loading = made, True
        return self
    def __exit__(self, *exc):
        nn.Module.__init__ = self.init
    def build(self, call, names, where):
        """Build what the call builds; an argument made from the data (len(chars)) is what its name means."""
        settings = Settings(names, self.learner.own)
        put = supply(classes_of(self.learner), settings, self.supplied)
        configs = {k: filled(v, settings) for k, v in names.items() if any(v is c for c in settings.configs)}
        value = lambda n: eval(compile(ast.Expression(n), where, 'eval'), names, Scope([configs, names], settings))
        def given(node, name):
            try:
                return value(node)
            except Exception:
                return settings(meaning(name or '')) if meaning(name or '') else value(node)
        with contextlib.suppress(Exception): # (their build failing, the class is built alone: its line says why)
            cls = value(call.func)
            params = [p.name for p in inspect.signature(cls).parameters.values()] + [None] * len(call.args)
            torch.manual_seed(1337)
            m = cls(*[given(a, params[i]) for i, a in enumerate(call.args)],
                    **{k.arg: given(k.value, k.arg) for k in call.keywords if k.arg})
            self.models += [(m, (where, call.lineno))] * isinstance(m, nn.Module)
        put_back(put)
    def functions(self):
        """The models built in main(), train(config), ...: its body run as a file's, its defaults live."""
        argv, sys.argv = sys.argv, [self.learner.path]
        for node, names in [(n, ns) for n, ns in self.learner.functions if n.name != '__init__' and
                            builds(n, self.learner, ns) and inspect.isfunction(ns.get(n.name))]:
            fn = names[node.name]
            settings = Settings(names, self.learner.own)
            local = {**names, **{p.name: p.default if p.default is not p.empty else settings(meaning(p.name)) if
                                 meaning(p.name) else settings for p in inspect.signature(fn).parameters
                                 .values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}}
            with contextlib.suppress(CantCheck): # (a line of it that can't run: its models are built alone)
                run_selected(ast.Module(node.body, []), self.learner, local, fn.__code__.co_filename)
        sys.argv = argv
    def instances(self, classes, settings):
        """{class: the instance checked, or why it can't be built}: the one their latest model holds, else
        the largest built alone holds; for a stub, the one of its name their model holds."""
        built, alone = {type(s): s for m, _ in self.models for s in safe_modules(m)[::-1]}, {} # (the first)
        for cls in [c for c in classes if c not in built]:
            torch.manual_seed(1337)
            kwargs = {}
            try:
                kwargs = arguments(cls, settings, {c.__module__ for c in classes})
                m = alone[cls] = cls(**kwargs)
                if not isinstance(vars(m).get('_modules'), dict):
                    alone[cls] = Unbuilt(f"{cls.__name__}.__init__ never calls super().__init__()")
                    alone[cls].by = cls
            except Exception as e:
                shown = ', '.join(f"{k}={v!r}" if len(repr(v)) < 30 else f"{k}=<{type(v).__name__}>"
                                  for k, v in kwargs.items())
                alone[cls] = Unbuilt(f"can't build {cls.__name__}({shown}): {message(e)}")
                alone[cls].by = next((c for f in traceback.extract_tb(e.__traceback__)[::-1] for c in classes
                                      if (f.filename, f.lineno) in code_lines(c)), None) # (whose own code raised)
        for m in sorted([m for m in alone.values() if isinstance(m, nn.Module)], key=lambda m: len(safe_modules(m))):
            alone.update({type(s): s for s in safe_modules(m)[1:] if type(s) in alone}) # the larger holds it
        named = {type(s).__name__: s for m, _ in self.models for s in safe_modules(m)}
        return {c: built.get(c) or (named.get(c.__name__, alone[c]) if isinstance(alone[c], str) else alone[c])
                for c in classes}

class Unbuilt(str):
    """Why a class can't be built; by: the learner's class whose own code raised (None: not theirs)."""
    by = None

def code_lines(cls):
    """The (file, line)s of the code of a class's own methods."""
    return {(code.co_filename, line) for code in codes(cls) for *_, line in code.co_lines()}

def safe_modules(m):
    try:
        return list(m.modules())
    except Exception: # a module of the learner's that never called super().__init__()
        return [m]
