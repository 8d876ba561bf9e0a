"""The explorer page's JavaScript, broken by hand one way at a time (no mutation tool reads it), each break
then run against tests/test_explore.py: every one must fail a test. From the repository root:

    python tests/mutation/page_breaks.py            # all of them, about 10 s each
    python tests/mutation/page_breaks.py "no scroll" # one, by its name

It edits scripts/explore_page.html in place and puts it back, as cosmic-ray does with the Python files."""
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
PAGE = os.path.join(ROOT, 'scripts', 'explore_page.html')
BREAKS = [ # (name, what the page has, what it gets instead)
    ('temperature inverted', 'const scaled = Array.from(logits, z => z / temperature);',
     'const scaled = Array.from(logits, z => z * temperature);'),
    ('top_k ignored in bars', "probabilities(state.logits, temperature, Number($('top_k').value))",
     'probabilities(state.logits, temperature, 0)'),
    ('bars ascending', 'sort((a, b) => b[0] - a[0]).slice(0, 10)',
     'sort((a, b) => a[0] - b[0]).slice(-10)'),
    ('unsorted bars', 'sort((a, b) => b[0] - a[0]).slice(0, 10)',
     'slice(0, 10)'),
    ('percent x10', '${(100 * q).toFixed(1)}%',
     '${(1000 * q).toFixed(1)}%'),
    ('bar width fixed', 'width: ${Math.round(300 * q)}px',
     'width: ${Math.round(300 * Math.sqrt(q))}px'),
    ('9 bars', '.slice(0, 10);',
     '.slice(0, 9);'),
    ('wrong char label', 'JSON.stringify(chars[c])',
     'JSON.stringify(chars[(c + 1) % vocab_size])'),
    ('map transposed', 'const v = w[i * T + j], at',
     'const v = w[j * T + i], at'),
    ('map colour off', '[40 + 215 * v, 20 + 200 * v, 90 - 60 * v, 255]',
     '[40 + 215 * v * v, 20 + 200 * v, 90 - 60 * v, 255]'),
    ('future not grey', 'j > i ? [244, 244, 244, 255]',
     'j > i + 1 ? [244, 244, 244, 255]'),
    ('unread not grey', "    else span.className = 'unread';\n",
     ''),
    ('odds width free', '  #odds { width: 440px; }',
     '  #odds { }'),
    ('no scroll', "  $('prompt').scrollTop = $('prompt').scrollHeight; // the new text in view\n",
     ''),
    ('slider unwired', "$('temperature').oninput = $('top_k').oninput = drawProbabilities;",
     "$('top_k').oninput = drawProbabilities;"),
    ('top_k unwired', "$('temperature').oninput = $('top_k').oninput = drawProbabilities;",
     "$('temperature').oninput = drawProbabilities;"),
    ('sample no crop', 'forward(idx.slice(-block_size))',
     'forward(idx.slice(-block_size - 1))'),
    ('read one too many', 'const cut = Math.max(0, known.length - block_size);',
     'const cut = Math.max(0, known.length - block_size + 1);'),
    ('label not updated', "$('temperature_value').textContent = temperature.toFixed(2);",
     ''),
    ('top_k off by one', '[Math.min(top_k, scaled.length) - 1]',
     '[Math.min(top_k, scaled.length)]'),
    ('sample appends to start', "$('prompt').value += sample(",
     "$('prompt').value = sample("),
    ('sample temperature ignored', 'probabilities(forward(idx.slice(-block_size)).logits, temperature, top_k)',
     'probabilities(forward(idx.slice(-block_size)).logits, 1, top_k)'),
    ('sampler shifted', '(u -= p[c]) >= 0) c++;',
     '(u -= p[Math.min(c + 1, vocab_size - 1)]) >= 0) c++;'),
    ('sample top_k ignored', 'probabilities(forward(idx.slice(-block_size)).logits, temperature, top_k)',
     'probabilities(forward(idx.slice(-block_size)).logits, temperature, 0)'),
]


def main(names):
    with open(PAGE, encoding='utf-8') as f:
        page = f.read()
    missed = []
    try:
        for name, old, new in BREAKS:
            if names and name not in names:
                continue
            assert page.count(old) == 1, name
            with open(PAGE, 'w', encoding='utf-8') as f:
                f.write(page.replace(old, new))
            r = subprocess.run([sys.executable, '-m', 'pytest', '-x', '-q', '-p', 'no:cacheprovider',
                                'tests/test_explore.py'], capture_output=True, text=True, cwd=ROOT)
            print(f"{'caught' if r.returncode else 'MISSED'}: {name}", flush=True)
            missed += [name] * (r.returncode == 0)
    finally:
        with open(PAGE, 'w', encoding='utf-8') as f:
            f.write(page)
    return 1 if missed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
