"""
Your model, live in a browser: one HTML file with the checkpoint's weights inside and gpt.py's model in
plain JavaScript (explore_page.html, beside this file), to open offline by double-clicking it. As you type:
the next character's odds, and every head's attention map; a button samples and appends.

    python scripts/explore.py                        # the latest run's best.pt -> explore.html
    python scripts/explore.py --ckpt=out/best.pt --out=mine.html --prompt="ROMEO:"
    python scripts/explore.py --ckpt=mine.pt --code=my_gpt.py   # the GPT you wrote along with the video
    python scripts/explore.py --time                 # and the ms a keystroke takes in headless chromium
"""
import base64
import html
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.parse

import common
from common import fail, gpt
import sample
from attention_map import PROMPT

PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'explore_page.html')
# headless, and none of its own requests to Google's servers (which a closed network refuses, slowly)
CHROMIUM = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-quic',
            '--disable-background-networking', '--disable-component-update', '--disable-sync']


def page(model, ckpt, prompt, source):
    """The page's text: the template, with the model's settings, characters and float32 weights in it."""
    tensors, blobs, offset = {}, [], 0
    for name, tensor in model.state_dict().items():
        if name.endswith('.tril'): # a buffer: the page makes its mask itself
            continue
        blob = tensor.detach().float().cpu().contiguous().numpy().astype('<f4').tobytes()
        tensors[name], offset = [offset, list(tensor.shape)], offset + len(blob)
        blobs.append(blob)
    config = {k: ckpt['config'][k] for k in ('n_embd', 'n_head', 'n_layer', 'block_size')}
    about = dict(config=config, chars=ckpt['chars'], tensors=tensors, prompt=prompt, source=source)
    with open(PAGE, encoding='utf-8') as f:
        template = f.read()
    model_json = json.dumps(about).replace('</', '<\\/') # nothing in it may close the <script>
    return template.replace('/*MODEL*/', model_json).replace('/*WEIGHTS*/', base64.b64encode(b''.join(blobs)).decode())


def in_browser(path, ask, *flags):
    """What the page at path answers to ask (explore_page.html's #test=...), run in headless chromium."""
    browser = shutil.which('chromium') or shutil.which('chromium-browser') or fail(
        "no chromium here to run the page in (Debian: apt-get install chromium)")
    url = 'file://' + urllib.parse.quote(os.path.abspath(path)) + '#test=' + urllib.parse.quote(json.dumps(ask))
    with tempfile.TemporaryDirectory() as profile:
        try:
            dom = subprocess.run([browser, *CHROMIUM, f'--user-data-dir={profile}', *flags, '--dump-dom', url],
                                 capture_output=True, text=True, timeout=600).stdout
        except subprocess.TimeoutExpired:
            fail(f"{browser} took over 10 minutes on {path}")
    answer = dom.partition('<pre id="test"')[2].partition('>')[2].partition('</pre>')[0]
    return json.loads(html.unescape(answer)) if answer else fail(f"{browser} ran no test in {path}")


def main(argv):
    p = common.argument_parser(__doc__)
    sample.add_model_options(p, PROMPT, "the text the page starts with (default: the first two lines of Tiny "
                             "Shakespeare)")
    p.add_argument('--out', type=os.path.expanduser, default='explore.html', help='default: %(default)s')
    p.add_argument('--time', action='store_true', help="then type the prompt into the page in headless chromium, "
                   "a character at a time, and print the ms each keystroke's update took")
    args = sample.checked_model_options(p, p.parse_args(argv))
    common.check_output(p, 'out', args.out)
    gpt.fast_attention = False # the lecture's Head modules, whose weights the page reads by name
    model, ckpt = sample.load_model(args.ckpt, 'cpu', args.code)
    text = page(model, ckpt, args.prompt, args.ckpt) # (characters the model never saw: the page marks them)
    common.save_atomically(args.out, text.encode('utf-8'))
    print(f"wrote {args.out} ({len(text) / 1e6:.1f} MB): open it in a browser (it needs no network)")
    if args.time:
        ms = in_browser(args.out, {'typed': args.prompt})['ms']
        print(f"a keystroke in headless chromium, over the {len(ms)} of the prompt: median {statistics.median(ms):.0f} "
              f"ms, at most {max(ms):.0f} ms (the last, at {len(ms)} characters: {ms[-1]:.0f} ms)")


if __name__ == '__main__':
    common.run(main, sys.argv[1:])
