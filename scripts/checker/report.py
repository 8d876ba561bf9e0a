"""
Step 6, report: each part checked from the smallest up, one found wrong then run as the lecture's (a
consequence named once, at its cause); what holds of each model whatever its weights. The findings are data;
the words are made from them at the end.
"""
import ast, contextlib, inspect, math, re

import torch
import torch.nn as nn

from checker.build import Settings, classes_of, code_lines, meaning, put_back, reached, safe_modules, supply
from checker import explain
from checker.compare import Finding
from checker.devices import moved, on_gpu
from checker.part import check_part
from checker.lecture import ATTENTIONS, STAGES
from checker.roles import LAYOUTS, Context, block_size, context_length, layers, stage_of, vocab
from checker.load import NOTEBOOK, CantCheck, Missing, StandIn, message
from checker.run import capture, invariants, raised_at, runs_at

NOISE = 0.05 # added to every weight before comparing: no two layers alike (two LayerNorms are, at init)
ORDER = ['LayerNorm', *ATTENTIONS, 'FeedForward', 'Block', 'the model'] # the parts, in the report's order

class Part:
    """A part: label, role, instance, status ('ok', 'differs', 'cant', 'skip': not counted), stage, findings;
    a model's parts run as the lecture's, loss at init, and what fails of what must hold of it."""
    def __init__(self, label, kind, m, cls=None):
        self.label, self.kind, self.m, self.status, self.stage, self.findings = label, kind, m, 'ok', 7, []
        self.fixed, self.loss, self.whole, self.cls = [], None, [], cls

class Report:
    """What the check found: the parts, the notes of no part, the latest model's stage; lines, exit code."""
    def __init__(self, learner, builder):
        self.learner, self.builder, self.parts, self.findings, self.stage = learner, builder, [], [], 7
    @property
    def code(self):
        checked = [p for p in self.parts if p.status != 'skip']
        if not checked or any(p.status == 'cant' for p in checked):
            return 2
        return 1 if any(p.status == 'differs' for p in checked) or self.learner.notes.get('slips') else 0

no_forward = lambda m: type(m).forward is nn.Module.forward and type(m).__call__ is nn.Module.__call__

lines_of = lambda cls: {at for at in code_lines(cls) if at[1] is not None}

def versions(built, builder):
    """{class: instance}, with the earlier versions of a class a notebook defines again (each stage of
    the lecture as BigramLanguageModel) that a language model of theirs holds, before the latest; unless
    the same code."""
    learner, taken = builder.learner, {id(m) for m in built.values()}
    # (and a model's, whose class is left out: an excerpt)
    names = {c.__name__ for c in built} | {type(m).__name__ for m, _ in builder.models}
    text = lambda cls: [learner.source(at) for at in sorted(lines_of(cls))]
    models = [m for m, _ in builder.models if any(isinstance(s, nn.Embedding) for s in safe_modules(m))]
    earlier = {type(s): s for m in models for s in safe_modules(m)[::-1] if type(s).__name__ in names and
               type(s) not in built and type(s).__module__ in learner.own and id(s) not in taken}
    seen, kept = {(c.__name__, *text(c)) for c in built}, {}
    for c, m in earlier.items(): # (a class defined again in the same words: once)
        if (c.__name__, *text(c)) not in seen:
            seen.add((c.__name__, *text(c)))
            kept[c] = m
    return {**kept, **built}

def held_by(builder, built):
    """The names of the learner's classes its models hold (nn.LayerNorm is not theirs), and those a version of
    one of them holds (a notebook's later model, which it never builds itself: the checker builds it alone)."""
    theirs = lambda m: {
        type(s).__name__ for s in safe_modules(m) if not type(s).__module__.startswith('torch.')
    }
    models = [m for m, _ in builder.models]
    names = builder.made.union(*map(theirs, models))
    # (beside a language model, a module of theirs built alone, holding none of theirs, shows the math: the
    # lecture's LayerNorm1d)
    lms = [m for m in models if any(isinstance(s, nn.Embedding) for s in safe_modules(m))]
    if models and not lms: # (a module built alone to draw it: what holds the parts is not built)
        return set()
    alone = {type(m).__name__ for m in models if lms and theirs(m) == {type(m).__name__}}
    names -= alone - set().union(*map(theirs, lms))
    versions = [m for m in built.values() if isinstance(m, nn.Module)]
    while True:
        more = set().union(*(theirs(m) for m in versions if type(m).__name__ in names))
        if more <= names:
            return names
        names |= more

def label(cls, classes, learner):
    """A class's name; where a notebook defines it more than once, with the cell (or line) of this one."""
    if sum(c.__name__ == cls.__name__ for c in classes) == 1:
        return cls.__name__
    first = min(lines_of(cls), default=None)
    if first is None:
        return f"{cls.__name__} (?)"
    place = learner.place(first).split(', line')[0]
    text = learner.texts.get(first[0], []) # (its `class` line, above its code)
    line = next((i for i in range(min(first[1], len(text)), 0, -1) if re.match(rf'\s*class\s+{cls.__name__}\b',
                                                                           text[i - 1])), first[1])
    return f"{cls.__name__} ({place if place.startswith('cell') else f'line {line}'})"

def parts_of(built, ctx, builder, broken):
    """[Part] in the report's order, an inline feed-forward too; not a class their models don't hold (where
    their models are whole: a build that failed, a model that can't be built or run, may be what leaves it out)."""
    held = set() if broken else held_by(builder, built)
    parts = []
    for cls, m in built.items():
        kind = None if isinstance(m, str) else ctx.role_of(m)
        # a model of theirs: said so
        if kind not in ORDER and any(m is b for b, _ in builder.models) and no_forward(m):
            kind = 'the model'
        if (isinstance(m, str) or kind in ORDER) and (not held or cls.__name__ in held):
            parts.append(Part(label(cls, built, builder.learner), kind, m, cls))
        parts += [Part(f"{cls.__name__}.{n}", 'FeedForward', c) for n, c in layers(m, nn.Sequential)
                  if ctx.role_of(c) == 'FeedForward' != kind] if kind and (not held or cls.__name__ in held) else []
    return sorted(parts, key=lambda p: ORDER.index(p.kind) if p.kind else len(ORDER))

LAID = "the lecture's computation can't run on its layers: "

def unlaid(part):
    """The words of a part the checker can't lay out as the lecture's (its only mistake, or why it can't be
    checked); else None."""
    mistakes = [f.words for f in part.findings if f.kind in ('mistake', 'cant')]
    if part.status == 'cant' and mistakes and not any('pip install' in w for w in mistakes):
        return mistakes[-1]
    return mistakes[0] if part.status == 'differs' and len(mistakes) == 1 and LAID in mistakes[0] else None

def unbuilt(part, why):
    """A part that can't be built: a stub, its own mistake, another part's, or the checker's guess's."""
    by = getattr(why, 'by', None)
    if by is not None and by is not part.cls:
        part.status, why = 'skip', f"building it builds {by.__name__}, which raised (its line says where)"
    elif 'NotImplementedError' in why:
        part.status, why = 'cant', f"not written yet: {why}"
    else:
        # (a package's stand-in in their arithmetic: the checker's guess, not their mistake)
        part.status = 'differs' if by and why.theirs and 'StandIn' not in why else 'cant'
        why += "; with its settings guessed, that is, which may be what fails: tell the checker how your model is " \
               "built (--build \"Model(...)\"), or in your notebook run check.here(globals())" * (part.status == 'cant')
    part.findings.append(Finding(part.label, 'mistake' if part.status == 'differs' else 'cant', why))

def held(part):
    """What holds of a model whatever its weights."""
    V, said = vocab(part.m), [f.words for f in part.findings if f.kind == 'held']
    loss = part.loss
    if loss is not None:
        said.append(f"loss at init {loss.item():.2f} (about ln {V} = {math.log(V):.2f} expected)")
    return ', '.join(["the past never hears the future, batch rows never talk", *said])

def report(learner, builder, classes, settings):
    built = versions(builder.instances(classes, settings), builder)
    StandIn.loading, ctx, rep = False, Context(settings), Report(learner, builder)
    roots = [m for m in built.values() if isinstance(m, nn.Module)]
    roots = [m for m in roots if not any(m is not r and m in safe_modules(r) for r in roots)]
    torch.set_default_dtype(torch.float32) # (a notebook's bfloat16: checked in float32)
    # (modules in a plain list too: model.eval() never reaches them)
    within = [s for m in roots for s in reached(m)]
    for m in roots:
        m.float()
    for s in within: # (named once, where they are)
        s.eval()
    ctx.T = min((context_length(m, settings) for m in roots if ctx.role_of(m) == 'the model'), default=None)
    if any(ctx.role_of(m) == 'the model' and not runs_at(m, ctx.T) for m in roots):
        ctx.T = None # (a model that works at its block_size only: checked there)
    ctx.held = {id(s) for m in roots if ctx.role_of(m) == 'the model' for s in safe_modules(m)[1:]}
    theirs = [m for m in roots if ctx.role_of(m) == 'the model' and any(m is b for b, _ in builder.models)]
    # (not one the checker guessed;
    # nor a package)
    raised = [(m, raised_at(m, ctx.T or block_size(m, settings))) for m in theirs]
    unrun = [m for m, e in raised if e is not None and not isinstance(e, Missing) and learner.raised(e)]
    broken = bool(builder.failed or unrun or any(getattr(m, 'theirs', False) for m in built.values()))
    for m in roots:
        torch.default_generator.manual_seed(0)
        capture(m, ctx) # what each module inside gets, as the model's code runs it
    rep.parts = parts_of(built, ctx, builder, broken)
    if not rep.parts:
        raise CantCheck(
            "none of the lecture's parts is there (Head, MultiHeadAttention, FeedForward, Block, a model)"
        )
    ctx.parts = {id(p.m) if '.' in p.label else type(p.m) for p in rep.parts}
    # (its latest's)
    models, stages = [p.m for p in rep.parts if p.kind == 'the model' and not no_forward(p.m)], {}
    others = [
        b for b, _ in builder.models if ctx.role_of(b) == 'the model' and not any(b is m for m in models)
    ]
    for m in models + others: # (a model not reported, its code another's again: its parts at its stage)
        # (layers it never made: no stage of theirs)
        if any(m is u for u in unrun) and explain.lacking(m, learner):
            continue
        stage = 7 # (where its layers can't be laid out, its own line says why)
        with contextlib.suppress(Exception):
            stage = max(stage_of(m, 'the model', lay, ctx) for lay in LAYOUTS['the model'](m, ctx))
        stages.update({type(s): max(stage, stages.get(type(s), 0)) for s in m.modules()})
    rep.stage = max(stages.values(), default=7)
    torch.default_generator.manual_seed(0)
    with torch.no_grad(): # no two weights alike; each saved, to be put back
        saved = [(p, p.clone()) for p in {id(p): p for m in roots for p in m.parameters()}.values()]
        for p, _ in saved:
            p.add_(torch.randn_like(p) * NOISE)
    fixed = {}
    for part in rep.parts:
        if isinstance(part.m, str):
            unbuilt(part, part.m)
            part.findings += [Finding(part.label, *f) for f in explain.forward_inside(part.cls)]
            part.status = 'differs' if len(part.findings) > 1 else part.status
            continue
        fix = None
        try:
            part.status, found, part.stage, fix = check_part(part.label, part.m, part.kind, ctx, stages.get(
                type(part.m), max(stages.values(), default=0)), learner)
            part.findings += [Finding(part.label, *f) for f in found]
        except Exception as e: # a part this checker can't make sense of
            part.status = 'cant'
            part.findings.append(Finding(part.label, 'cant', f"can't be checked: {message(e)}"))
        if part.status == 'cant' and id(part.m) not in ctx.inputs and models and not any(
                'pip install' in f.words for f in part.findings):
            # no model holds it, and alone it can't be built or run: their model is what counts
            part.status = 'skip'
        elif unlaid(part) and id(part.m) in ctx.inputs and ctx.ran:
            # their model runs it through: the checker can't lay its layers out as the lecture's; said, not
            # counted
            why = unlaid(part).removeprefix("can't be checked: ").removeprefix(LAID)
            part.status, part.findings = 'skip', [
                Finding(part.label, 'cant', f"its layers don't lay out as the lecture's ({why})")]
        for s in [s for s in within if fix and (s is part.m or type(s) is type(part.m) != nn.Sequential)]:
            # (one that can't be computed as the lecture's is checked as it is)
            with contextlib.suppress(Exception):
                s.forward, fixed[id(s)] = fix(s), part.label
    with torch.no_grad():
        for p, was in saved:
            p.copy_(was)
    for part in [
        p for p in rep.parts if p.kind == 'the model' and p.status != 'cant' and not no_forward(p.m)
    ]:
        part.fixed = list(dict.fromkeys(fixed[id(s)] for s in safe_modules(part.m) if id(s) in fixed and
                                        s is not part.m))
        try:
            T = ctx.T or block_size(part.m, settings)
            problems, part.loss = invariants(part.m, T, learner, block_size(part.m, settings, cap=None))
            if moved(part.m, learner):
                problems += on_gpu(part.m, T, learner)
        except Exception as e: # what must hold can't be tried on it
            problems = [('note', f"the checker can't run it whole: {message(e)}")]
        # (what must hold can't be told from noise)
        if any('draws random numbers' in f.words for f in part.findings):
            problems = [p for p in problems if p[0] != 'mistake']
        said = ' '.join(f.words for f in part.findings if f.kind == 'mistake') # (a raise already named: once)
        problems = [p for p in problems if p[1].removeprefix('running it raised ') not in said]
        part.findings += [Finding(part.label, kind, words) for kind, words in problems]
        part.whole = [words for kind, words in problems if kind == 'mistake']
        part.status = (
            'differs' if part.status == 'differs' or any(k == 'mistake' for k, _ in problems) else 'ok'
        )
    error = lambda words: re.sub(r'^.*?(\w+Error: |\w+Exception: )', r'\1', words) # the exception, not where
    # a crash of a part it holds: named there, once
    for part in [p for p in rep.parts if p.status == 'differs']:
        raised = {error(f.words) for f in part.findings if f.kind == 'mistake' and 'raised ' in f.words}
        holds = lambda p: not isinstance(p.m, nn.Module) or not isinstance(part.m, nn.Module) or any(
            type(s) is type(p.m) for s in part.m.modules())
        cause = next((p for p in rep.parts[:rep.parts.index(part)] if p.status == 'differs' and holds(p) and any(
            error(f.words) in raised or 'has no forward' in f.words and f"[{p.label}] is missing" in ''.join(raised)
            for f in p.findings if f.kind == 'mistake')), None)
        if cause and '' not in raised and all(f.kind != 'mistake' or 'raised ' in f.words for f in part.findings):
            part.status, part.findings = 'skip', [
                Finding(part.label, 'cant', f"it holds {cause.label}, which can't run (above)")
            ]
    held = held_by(builder, built)
    based = {b for c in classes if c.__name__ in held for b in c.__mro__} # (a base of theirs is used)
    unused = [c.__name__ for c in classes if c.__name__ not in held and c not in based] \
        if held and not broken else []
    if unused:
        rep.findings.append(Finding('', 'note', f"no model of yours uses {', '.join(unused)}: not checked"))
    inside = {type(s) for p in rep.parts if isinstance(p.m, nn.Module) for s in safe_modules(p.m)}
    # (one the checker can't
    # place: said, not passed over; a base of their classes is not one)
    other = [c.__name__ for c, m in built.items() if isinstance(m, nn.Module) and c not in inside and c.__name__
             not in unused and not any(o is not c and issubclass(o, c) for o in built)]
    if other:
        rep.findings.append(Finding('', 'note', f"{', '.join(other)}: not one of the lecture's parts by what it "
                                                "computes, so not checked"))
    return rep

def verdict(part, rep, settings):
    """The words for a part: its mistakes at their lines, else matches (its stage, the video's, variants)."""
    place = lambda f: f"{rep.learner.place(f.at)}: " if f.at else ''
    mistakes = sorted(
        [f for f in part.findings if f.kind == 'mistake'], key=lambda f: f.at[1] if f.at else 1e9
    )
    kinds = {'variant': 'a variant, ', 'video': ''} # (the video's words say so)
    others = list(dict.fromkeys(place(f) + kinds[f.kind] + f.words for f in part.findings if f.kind in kinds))
    notes = [f.words for f in part.findings if f.kind == 'note']
    if part.status in ('cant', 'skip'):
        return ('not checked: ' * (part.status == 'skip')) + next(
            f.words for f in part.findings if f.kind in ('cant', 'mistake')
        )
    if any(f.words not in part.whole for f in mistakes):
        words = list(dict.fromkeys(place(f) + f.words for f in mistakes))
        line = 'differs: ' + '; and '.join(words) + ''.join(f"; {o}" for o in others)
        return line + ''.join(f"; {n}" for n in notes)
    line = 'matches' + (f" stage {part.stage} ({', '.join(STAGES[part.stage])})" if part.stage < 7 else '')
    if part.stage == 1 and part.kind == 'the model' and layers(part.m, nn.Linear): # (the bigram grown)
        positions = sum(isinstance(s, nn.Embedding) for s in part.m.modules()) > 1
        line += f", with stage 2's token{' and position' * positions} embeddings and lm_head, before its head"
    if any(f.kind == 'video' for f in part.findings):
        line += ', as in the video'
    line += ': ' + '; '.join(others) if others else ''
    if part.whole: # (what fails of the whole model first; its variants still named)
        return f"differs: {'; '.join(part.whole)}; otherwise it {line}"
    line += ''.join(f"; {n}" for n in notes)
    if part.kind == 'the model':
        inside = f"with {', '.join(part.fixed)} as the lecture computes it, " if part.fixed else ''
        line += f"; {inside}{held(part)}"
    return line

def lines(rep, settings):
    learner, builder = rep.learner, rep.builder
    missing = list(dict.fromkeys(learner.notes.get('stand-ins', [])))
    out = []
    if missing:
        out.append(
            f"note: not installed here (nor a file beside yours), so standing in: {', '.join(missing)}; "
            "a part that calls one says so"
        )
    out += [f"note: left out: {e}" for e in learner.notes.get('unread', [])]
    slips, (values, parameters) = learner.notes.setdefault('slips', []), named(learner)
    for name, value in sorted(builder.supplied): # (one a file of settings never sets: a NameError, theirs)
        at = next(((w, i) for w, text in learner.texts.items() for i, line in enumerate(text, 1)
                   if re.search(rf"\b{name}\b", line)), None)
        made = at is not None and any(
            c.__name__ in builder.made and at in code_lines(c) for c in classes_of(learner)
        )
        # (a fragment alone sets none)
        if made and len(settings.found) > 1 and name not in values | parameters:
            slips.append((at, f"{name} is never set anywhere in the file, so this raises NameError; checked with "
                              f"the lecture's {value}"))
    # (a call whose arguments its class can't take: theirs, whatever the settings)
    for at, words in builder.errors:
        if re.search(r"TypeError: .*(takes \d+ positional arguments? but|unexpected keyword|missing \d+ required)", words):
            slips.append((at, f"your build raises {words}"))
    order = {where: i for i, where in enumerate(learner.texts)} # (files and cells as they come, then lines)
    slips.sort(key=lambda slip: (order.get(slip[0][0], -1), slip[0][1]))
    out += [f"mistake: {learner.place(at)}: `{learner.source(at)}`: {words}" for at, words in slips]
    given = sorted((name, value) for name, value in builder.supplied if meaning(name) != 'vocab_size' and not any(
        f"{name} is never set" in words for _, words in slips))
    elsewhere = {name for name, _ in given if name in values} # (in an if, main())
    never = [f"{name}={value}" for name, value in given if name not in elsewhere]
    if never:
        out.append(f"note: your code reads {', '.join(never)}, which it never sets: the lecture's values")
    if Settings.off: # (use_rope read from a config the file never makes: the other path not checked)
        them = 'it' if len(Settings.off) == 1 else 'them'
        switches = ', '.join(sorted(Settings.off))
        out.append(f"note: checked with {switches} off: your code reads {them} from a config it never makes "
                   f"(make one to check {them} on)")
    if elsewhere:
        them = 'it' if len(elsewhere) == 1 else 'them'
        values = ', '.join(f"{name}={value}" for name, value in given if name in elsewhere)
        out.append(
            f"note: checked with {values}: your code sets {them} only in lines the checker doesn't run"
        )
    built = [f"{p.label} as {learner.place(at)} builds it" for p in rep.parts if p.kind == 'the model'
             for model, at in builder.models if model is p.m and at]
    if built:
        out.append(f"note: checked {', '.join(built)}")
    out += [f"note: {learner.place(at)}: your build raised {words}" for at, words in builder.errors
            if (at, f"your build raises {words}") not in slips]
    out += [f"note: {f.words}" for f in rep.findings if f.kind == 'note']
    column = max(20, *(len(p.label) + 1 for p in rep.parts))
    out += [f"{p.label:<{column}} {verdict(p, rep, settings)}" for p in rep.parts]
    checked = [p for p in rep.parts if p.status != 'skip']
    failed = [p.label for p in checked if p.status != 'ok']
    look = list(dict.fromkeys(failed + [learner.place(at) for at, _ in slips]))
    at = 'gpt.py' if rep.stage == 7 else f"the lecture at stage {rep.stage} ({', '.join(STAGES[rep.stage])})"
    return out + [f"{len(checked) - len(failed)} of {len(checked)} parts match {at}" +
                  (f"; look at {', '.join(look)}" if look else '')]

def named(learner):
    """The names the learner's code gives a value anywhere (set, defined, imported: torch.nn's torch), and its
    parameters'."""
    values, parameters = set(), set()
    for text in learner.texts.values():
        with contextlib.suppress(SyntaxError):
            tree = ast.parse('\n'.join(text))
            # (a name a class's method sets is its own: B, T, C = x.shape sets no setting)
            classes = [c for c in ast.walk(tree) if isinstance(c, ast.ClassDef)]
            local = {id(n) for c in classes for n in ast.walk(c) if n is not c}
            for n in ast.walk(tree):
                stored = isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and id(n) not in local
                values |= {stored and n.id, (getattr(n, 'name', None) or '').split('.')[0], getattr(n, 'asname', None)}
                parameters.add(getattr(n, 'arg', None))
    return values, parameters

def check(learner, builder):
    """The Report; their globals and random numbers left as they were."""
    classes = classes_of(learner)
    built = {type(s) for m, _ in builder.models for s in m.modules()}
    notebook = learner.path.endswith(('.ipynb', NOTEBOOK))
    # (a notebook's class shown again in part, never built: `# rest of the code as before`)
    for c in [c for c in classes if notebook and c not in built]:
        again = any(b.__name__ == c.__name__ for b in built)
        if again and [k for k, v in vars(c).items() if callable(v)] == ['__init__']:
            classes.remove(c)
            words = "it has no forward, and the notebook never builds it (a part shown again, in part)"
            learner.notes.setdefault('unread', []).append(f"{label(c, [c, c], learner)}: {words}")
    # (a train(data) of theirs in nn.Module.train's place, which model.eval() calls: PyTorch's, while checked)
    shadowed = [(c, n, vars(c)[n]) for c in classes for n in ('train', 'eval')
                if inspect.isfunction(vars(c).get(n))]
    for c, n, f in shadowed:
        words = f"its {n}() takes the place of nn.Module.{n}(), which model.eval() and model.train() call"
        at = (f.__code__.co_filename, f.__code__.co_firstlineno)
        learner.notes.setdefault('slips', []).append((at, words))
        setattr(c, n, getattr(nn.Module, n))
    settings, rng = Settings(learner.names, learner.own), torch.get_rng_state()
    put = supply(classes, settings, builder.supplied)
    try:
        builder.functions()
        # (a notebook's version its cell failed to build)
        classes += [c for c in builder.tried if c not in classes]
        rep = report(learner, builder, classes, settings)
        rep.lines = lines(rep, settings)
        return rep
    finally:
        torch.set_rng_state(rng)
        put_back(put)
        for c, n, f in shadowed:
            setattr(c, n, f)
