"""
Step 6, report: the models run once; each part checked from the smallest up, and one found wrong then run as
the lecture computes it (a consequence named once, at its cause); what holds of each model whatever its
weights; a line a part, the summary, the exit code (2 too where a part calls a package that isn't here).
"""
import contextlib

import torch
import torch.nn as nn

from checker.build import Settings, classes_of, meaning, put_back, safe_modules, supply
from checker.compare import check_part
from checker.lecture import ATTENTIONS, LAYOUTS, STAGES, Context, block_size, layers, stage_of
from checker.load import CantCheck, StandIn, message, misspelt
from checker.run import capture, invariants

NOISE = 0.05 # added to every weight before comparing: no two layers alike (two LayerNorms are, at init)
ORDER = ['LayerNorm', *ATTENTIONS, 'FeedForward', 'Block', 'the model'] # the parts, in the report's order

def parts_of(built, ctx):
    """[(order, label, instance or why not, role)] of the learner's parts; an inline feed-forward too."""
    parts = []
    for cls, m in built.items():
        kind = None if isinstance(m, str) else ctx.role_of(m)
        if isinstance(m, str) or kind in ORDER: # (a module of no role of the lecture's is no part)
            parts.append((ORDER.index(kind) if kind else len(ORDER), cls.__name__, m, kind))
        parts += [(ORDER.index('FeedForward'), f"{cls.__name__}.{n}", c, 'FeedForward') # an inline one
                  for n, c in layers(m, nn.Sequential) if ctx.role_of(c) == 'FeedForward' != kind] if kind else []
    return sorted(parts, key=lambda p: p[0])

def unbuilt(why, label):
    """A part that can't be built: a stub, its own mistake, another part's, or the checker's guess's."""
    by = getattr(why, 'by', None)
    if by is not None and by.__name__ != label:
        return f"building it builds {by.__name__}, which raised (its line says where)", 'skip', None
    if 'NotImplementedError' in why:
        return f"not written yet: {why}", 'cant', None
    return why, 'differs' if by else 'cant', None

def model_line(m, line, status, fixed, settings, learner):
    """The model's line and status, with what holds whatever its weights."""
    problems, loss = invariants(m, block_size(m, settings), learner)
    if problems:
        said = '; '.join(problems)
        return (f"differs: {said}; otherwise it {line}" if status == 'ok' else f"{line}; and {said}"), 'differs'
    held = "the past never hears the future, batch rows never talk" + (
        ", generate goes past block_size" if block_size(m, settings, cap=None) <= 256 else ", generate runs") * \
        hasattr(m, 'generate') + (f", loss at init {loss.item():.2f}" if loss is not None else '')
    return f"{line}; {'with ' + ', '.join(fixed) + ' as the lecture computes it, ' if fixed else ''}{held}", status

def report(learner, builder, classes, settings):
    """The report's lines, and its exit code."""
    built = builder.instances(classes, settings)
    StandIn.loading, ctx = False, Context(settings)
    roots = [m for m in built.values() if isinstance(m, nn.Module)]
    for m in [m for m in roots if not any(m is not r and m in safe_modules(r) for r in roots)]:
        torch.manual_seed(0)
        capture(m, ctx) # what each module inside gets, as the model's code runs it
    parts = parts_of(built, ctx)
    if not parts:
        raise CantCheck("none of the lecture's parts is there (Head, MultiHeadAttention, FeedForward, Block, a model)")
    ctx.parts = {id(m) if '.' in label else type(m) for _, label, m, _ in parts}
    models, stages = [m for *_, m, kind in parts if kind == 'the model'], {} # a class's stage: the latest of its models
    for m in models:
        stage = 7 # (where its layers can't be laid out, its own line says why)
        with contextlib.suppress(Exception):
            stage = stage_of(m, 'the model', LAYOUTS['the model'](m, ctx)[0], ctx)
        stages.update({type(s): max(stage, stages.get(type(s), 0)) for s in m.modules()})
    torch.manual_seed(0)
    with torch.no_grad(): # no two weights alike; each saved, to be put back
        saved = [(p, p.clone()) for p in {id(p): p for m in roots for p in m.parameters()}.values()]
        for p, _ in saved:
            p.add_(torch.randn_like(p) * NOISE)
    results, fixed = [], {}
    for _, label, m, kind in parts:
        try:
            line, status, fix = unbuilt(m, label) if isinstance(m, str) else check_part(
                label, m, kind, ctx, stages.get(type(m), max(stages.values(), default=0)), learner)
        except Exception as e: # a part this checker can't make sense of
            line, status, fix = f"can't be checked: {message(e)}", 'cant', None
        if status == 'cant' and 'pip install' not in line and id(m) not in ctx.inputs and models:
            status = 'skip' # no model holds it, and alone it can't be built or run: their model is what counts
        for s in [s for r in roots for s in safe_modules(r) if fix and (s is m or type(s) is type(m) != nn.Sequential)]:
            with contextlib.suppress(Exception): # (one that can't be computed as the lecture's is checked as it is)
                s.forward, fixed[id(s)] = fix(s), label
        results.append([label, line, status, m, kind])
    with torch.no_grad():
        for p, was in saved:
            p.copy_(was)
    for result in [r for r in results if r[4] == 'the model' and r[2] != 'cant' and not r[1].startswith('raised')]:
        label, line, status, m, kind = result
        inside = list(dict.fromkeys(fixed[id(s)] for s in safe_modules(m) if id(s) in fixed and s is not m))
        try:
            result[1:3] = model_line(m, line, status, inside, settings, learner)
        except Exception as e: # what must hold can't be tried on it
            result[1] += f"; the checker can't run it whole: {message(e)}"
    return lines(learner, builder, results, stages)

def lines(learner, builder, results, stages):
    mistakes = list(dict.fromkeys(learner.mistakes)) # (once each, however often it ran)
    out = [f"mistake: {learner.place(at) + ': ' if at else ''}{words}" for at, words in mistakes]
    missing = list(dict.fromkeys(learner.notes.get('stand-ins', [])))
    out += [f"note: not installed here (nor a file beside yours), so standing in: {', '.join(missing)}; "
            "a part that calls one says so"] * bool(missing)
    out += [f"note: left out: {e}" for e in learner.notes.get('unread', [])]
    given = sorted(f"{name}={value}" for name, value in builder.supplied if meaning(name) != 'vocab_size')
    out += [f"note: your code reads {', '.join(given)}, which it never sets: the lecture's values"] * bool(given)
    built = [f"{label} as {learner.place(at)} builds it" for label, _, _, m, kind in results if kind == 'the model'
             for model, at in builder.models if model is m and at]
    out += [f"note: checked {', '.join(built)}"] * bool(built)
    column = max(20, *(len(label) + 1 for label, *_ in results))
    out += [f"{label:<{column}} {'not checked: ' * (status == 'skip')}{line}" for label, line, status, *_ in results]
    checked = [r for r in results if r[2] != 'skip']
    failed = [label for label, _, status, *_ in checked if status != 'ok']
    last = max(stages.values(), default=7)
    at = 'gpt.py' if last == 7 else f"the lecture at stage {last} ({', '.join(STAGES[last])})"
    out.append(f"{len(checked) - len(failed)} of {len(checked)} parts match {at}" +
               (f"; look at {', '.join(failed)}" if failed else '') +
               (f"; and {len(mistakes)} mistake{'s' * (len(mistakes) > 1)} above" if mistakes else ''))
    return out, 2 if not checked or any(r[2] == 'cant' for r in checked) else 1 if failed or mistakes else 0

def check(learner, builder):
    """The report on the learner's parts, and its exit code; their globals and random numbers as they were."""
    classes = classes_of(learner)
    learner.mistakes += [m for cls in classes for m in misspelt(cls)] # (a running notebook's)
    settings, rng = Settings(learner.names, learner.own), torch.get_rng_state()
    put = supply(classes, settings, builder.supplied)
    try:
        builder.functions()
        return report(learner, builder, classes, settings)
    finally:
        torch.set_rng_state(rng)
        put_back(put)
