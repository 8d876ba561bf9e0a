"""Run, for one mutant, only the tests that run the line cosmic-ray changed.

A mutant can change what a test sees only if the test runs its line, so the other tests need not run.
Once per clone, record which test runs which line (in-process and in the scripts tests start):

    python tests/mutation/covering.py map               # the whole suite: 95 s on the 2-core EPYC

then give cosmic-ray this as its test command (the configurations in this folder do):

    python tests/mutation/covering.py run FALLBACK_TEST_FILES...

It reads the changed lines from `git diff`, runs the tests that ran them, quickest first, and stops at
the first failure. A line run at import (outside any test) or by no recorded test gets the fallback
files too, so nothing is skipped on the map's word alone.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / '.mutation-map.json'  # in .gitignore
PYTEST = [sys.executable, '-m', 'pytest', '-x', '-q', '-p', 'no:cacheprovider']


def pytest_runtest_setup(item):
    """As a pytest plugin: each test's coverage context is its name, here and in the scripts it starts."""
    name = item.nodeid.split('[')[0]
    os.environ['MUTATION_TEST'] = name  # the subprocesses' configuration reads ${MUTATION_TEST}
    import coverage
    current = coverage.Coverage.current()
    if current is not None:
        current.switch_context(name)


def make_map():
    with tempfile.TemporaryDirectory() as tmp:
        rc = Path(tmp) / 'coveragerc'
        rc.write_text(f"""[run]
parallel = true
data_file = {tmp}/.coverage
patch = subprocess
sigterm = true
context = ${{MUTATION_TEST}}
source = {ROOT}
omit = {ROOT}/tests/*
""")
        env = dict(os.environ, MUTATION_TEST='import', PYTHONPATH=str(Path(__file__).parent))
        durations = Path(tmp) / 'durations.txt'
        subprocess.run([sys.executable, '-m', 'coverage', 'run', f'--rcfile={rc}', '-m', 'pytest', '-q',
                        '-p', 'no:cacheprovider', '-p', 'covering', '--durations=0', '--durations-min=0',
                        '-n', '2', 'tests'], cwd=ROOT, env=env, stdout=durations.open('w'))
        subprocess.run([sys.executable, '-m', 'coverage', 'combine', f'--rcfile={rc}', '-q'], cwd=ROOT)
        import coverage
        data = coverage.CoverageData(basename=f'{tmp}/.coverage')
        data.read()
        seconds = {}
        for line in durations.read_text().splitlines():
            m = re.match(r'\s*([\d.]+)s (?:call|setup|teardown)\s+(\S+)', line)
            if m:
                name = m.group(2).split('[')[0]
                seconds[name] = seconds.get(name, 0) + float(m.group(1))
        tests = {}
        for path in data.measured_files():
            rel = os.path.relpath(path, ROOT)
            for line, names in data.contexts_by_lineno(path).items():
                # 'import|tests/x.py::test_y' in pytest's own processes; a line run at import, outside any test, is '*'
                names = {n.split('|')[-1] if '::' in n else '*' for n in names}
                tests[f'{rel}:{line}'] = sorted(names, key=lambda n: seconds.get(n, 60))
    MAP.write_text(json.dumps(tests))
    print(f'{len(tests)} lines run by a test, written to {MAP}')


def changed_lines():
    diff = subprocess.run(['git', 'diff', '-U0', '--', '*.py'], cwd=ROOT, capture_output=True, text=True).stdout
    path, lines = None, []
    for row in diff.splitlines():
        if row.startswith('--- a/'):
            path = row[6:]
        m = re.match(r'@@ -(\d+)(?:,(\d+))? ', row)
        if m and path:
            start, count = int(m.group(1)), int(m.group(2) or 1)
            lines += [f'{path}:{n}' for n in range(start, start + max(count, 1))]
    return lines


def run(fallback):
    tests = json.loads(MAP.read_text())
    chosen, unsure = [], False
    for line in changed_lines():
        names = tests.get(line, ['*'])
        chosen += [t for t in names if t != '*' and t not in chosen]
        unsure = unsure or '*' in names
    started = time.time()
    code = subprocess.run(PYTEST + chosen, cwd=ROOT).returncode if chosen else 0
    if code == 0 and unsure:
        code = subprocess.run(PYTEST + fallback, cwd=ROOT).returncode
    print(f'covering.py: {len(chosen)} tests{" and the fallback" * unsure} in {time.time() - started:.1f} s, '
          f'exit {code}', file=sys.stderr)
    return code


if __name__ == '__main__':
    if sys.argv[1:2] == ['map']:
        make_map()
    else:
        sys.exit(run(sys.argv[2:]))
