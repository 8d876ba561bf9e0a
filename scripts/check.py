"""
Check my code: the GPT you wrote along with the lecture, compared part by part with gpt.py's (or the
lecture's model at your stage), each mistake named at its line. Names and layout are yours.

    python scripts/check.py my_gpt.py
    python scripts/check.py my_notebook.ipynb       # its code cells, in order

In a running notebook, without saving a file: import check; check.here(globals())
Only your imports, settings, definitions and the lines that build your model run: no data is read,
nothing trains. Exit code 0: every part checked matches; 1: a mistake; 2: the file can't be checked.
"""
import contextlib, copy, io, os, re, sys, warnings

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

import common
from checker.build import Builder, classes_of, codes
from checker.load import NOTEBOOK, CantCheck, Learner, Siblings, StandInModule, load
from checker.report import check

def on_cpu(a):
    """A GPU device ('cuda', 'mps') as the CPU, a half-precision dtype as float32; else a itself."""
    if isinstance(a, (str, torch.device)) and str(a).split(':')[0] in ('cuda', 'mps'):
        return 'cpu'
    return torch.float32 if isinstance(a, torch.dtype) and a in (torch.bfloat16, torch.float16) else a

class OnCPU(TorchFunctionMode):
    """Tensors their code puts on a GPU made on the CPU, where the checker runs; in float32."""
    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, '__name__', '')
        if name in ('cuda', 'mps', 'bfloat16', 'half'): # (x.cuda(), x.half(): x itself)
            return args[0]
        if name in ('to', 'type'): # (x.to('cuda'), x.to(torch.bfloat16): by position)
            args = tuple(map(on_cpu, args))
        if kwargs and ('device' in kwargs or 'dtype' in kwargs):
            kwargs = {k: on_cpu(v) for k, v in kwargs.items()}
        return func(*args, **(kwargs or {}))

# a GPU named ('cuda', "mps:0"; not the usual 'cuda' if available), or half precision
GPU = re.compile(r"""['"](cuda|mps)(:\d+)?\\?['"](?!\s*if\b)|bfloat16|float16|\.half\(\)""")

def on_gpu(path, seen=()):
    """Whether their code (the file, the modules beside it that it imports) names a GPU or half precision:
    then it runs under OnCPU, which slows every torch call."""
    text = ''
    with contextlib.suppress(OSError, UnicodeDecodeError), open(path, encoding='utf-8') as f:
        text = f.read()
    beside = [os.path.join(os.path.dirname(os.path.abspath(path)), f'{name}.py')
              for name in re.findall(r'^\s*(?:from|import)\s+(\w+)', text, re.M)]
    beside = [b for b in beside if os.path.isfile(b) and b not in seen]
    return bool(GPU.search(text)) or any(on_gpu(b, (*seen, path)) for b in beside)

def quietly(run, *args, gpu=True):
    """run(*args), what the learner's code prints or warns kept out of the report, on the CPU (gpu: their
    code names a GPU); on one thread (its tensors are small: more threads only wait on each other)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                warnings.catch_warnings(), OnCPU() if gpu else contextlib.nullcontext():
            warnings.simplefilter('ignore')
            return run(*args)
    finally:
        torch.set_num_threads(threads)

def here(names):
    """Check a running notebook's parts: check.here(globals()); its models as copies, its names left as they were."""
    learner = Learner(NOTEBOOK)
    learner.names, learner.own = names, {names.get('__name__', '__main__')}
    learner.files = {code.co_filename for cls in classes_of(learner) for code in codes(cls)}
    builder = Builder(learner)
    builder.models = [(copy.deepcopy(v), None) for v in list(names.values())
                      if isinstance(v, nn.Module) and type(v).__module__ in learner.own]
    try:
        with builder:
            lines = quietly(check, learner, builder).lines
    except CantCheck as e:
        lines = [f"error: {e}"]
    print('\n'.join(lines))

def checked(path, build=None):
    """The Report on a file (its lines, exit code, parts and findings, the Builder that holds its models);
    build: an expression that builds its model. CantCheck: it can't be checked."""
    before, learner, dtype = set(sys.modules), Learner(path), torch.get_default_dtype()
    try:
        with Builder(learner) as builder:
            gpu = on_gpu(path)
            quietly(load, path, learner, gpu=gpu)
            if build:
                quietly(builder.given, build, gpu=gpu)
            return quietly(check, learner, builder, gpu=gpu)
    finally: # the learner's modules and the stand-ins go: another check in this process starts afresh
        torch.set_default_dtype(dtype)
        # (a misspelt name that stood for the module)
        for name in [n for n in set(sys.modules) - before if n == 'learner' or isinstance(sys.modules[n], StandInModule)
                     or isinstance(getattr(sys.modules[n], '__loader__', None), Siblings) or
                     getattr(sys.modules[n], '__name__', n) != n]:
            del sys.modules[name]

def main(argv):
    p = common.argument_parser(__doc__)
    p.add_argument('path', help='your .py file or .ipynb notebook')
    p.add_argument('--build', metavar='EXPR', help="how your model is built, where the checker can't tell, "
                   "e.g. --build \"GPT(65, 384, 256, 6, 6, 0.2)\"")
    args = p.parse_args(argv)
    try:
        rep = checked(args.path, args.build)
    # a file that can't be checked; or the checker's own failure: one line, never a traceback
    except Exception as e:
        common.fail(str(e) if isinstance(e, CantCheck) else f"the checker failed on {args.path}: {type(e).__name__}: "
                    f"{e} (a bug of the checker's)", code=2)
    print('\n'.join(rep.lines))
    return rep.code

if __name__ == '__main__':
    common.run(lambda argv: sys.exit(main(argv)), sys.argv[1:])
