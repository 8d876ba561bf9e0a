"""scripts/explore.py: the page it writes, opened from disk in a real browser (Debian's chromium, headless),
computes as PyTorch does, and asks nothing of the network."""
import json
import os
import shutil
import struct
import subprocess

import pytest
import torch

import gpt
from conftest import run_here

import attention_map
import explore
import sample

EXPLORE = os.path.join('scripts', 'explore.py')
CHROMIUM = shutil.which('chromium') or shutil.which('chromium-browser')
needs_chromium = pytest.mark.skipif(not CHROMIUM, reason="no chromium here: apt-get install chromium (.ci/run does)")
PROMPTS = ['First Citizen:\nBefore', 'ROMEO:', 'a', 'We are accounted poor']
TYPED = 'Hi, Romé!\nAll: we are accounted poor citizens' # longer than block_size (24), once é is left out


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    """gpt.py's checkpoint of a model of 3 layers of 4 heads, block_size 24, its weights far from init:
    every head looks somewhere else."""
    folder = tmp_path_factory.mktemp('run')
    config = dict(n_embd=32, n_head=4, n_layer=3, block_size=24)
    settings = dict(vars(gpt))
    try:
        vars(gpt).update(config, dropout=0.0, fast_attention=False)
        torch.manual_seed(0)
        model = gpt.GPTLanguageModel(len(sample.DATA_CHARS))
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.3)
    finally:
        vars(gpt).update(settings)
    torch.save({'model': model.state_dict(), 'config': config, 'chars': list(sample.DATA_CHARS)},
               folder / 'best.pt')
    return folder / 'best.pt'


def pytorch(ckpt, prompt):
    """PyTorch's logits of the next character after prompt, and every head's wei (attention_map.py's)."""
    model, ckpt = sample.load_model(str(ckpt), 'cpu')
    idx = torch.tensor([[ckpt['chars'].index(c) for c in prompt]])
    with torch.no_grad():
        return model(idx)[0][0, -1], attention_map.attention_weights(model, idx)


@pytest.fixture(scope='module')
def browser(checkpoint, tmp_path_factory):
    """The page of checkpoint, written by explore.py, opened once in chromium with what the tests ask
    (#test=...), its network log kept, and once more for a screenshot: (answer, page, netlog, screenshot)."""
    if not CHROMIUM:
        pytest.skip("no chromium here: apt-get install chromium (.ci/run does)")
    folder = tmp_path_factory.mktemp('page')
    page = folder / 'explore.html'
    r = run_here(EXPLORE, f'--ckpt={checkpoint}', f'--out={page}')
    assert r.returncode == 0, r.stderr
    ask = dict(prompts=PROMPTS, samples=[['ROMEO:', 40, 0.8, 5, 7], ['ROMEO:', 40, 0.8, 5, 7], ['ROMEO:', 30, 1, 1, 0]],
               typed=TYPED)
    answer = explore.in_browser(page, ask, f'--log-net-log={folder}/net.json')
    subprocess.run([CHROMIUM, *explore.CHROMIUM, '--hide-scrollbars', f'--user-data-dir={folder}/u',
                    f'--screenshot={folder}/shot.png', '--window-size=1280,1000', page.as_uri()],
                   capture_output=True, timeout=60, cwd=folder)
    return answer, page, (folder / 'net.json').read_text(), folder / 'shot.png'


@needs_chromium
def test_the_page_computes_the_logits_and_every_heads_weights_as_pytorch(browser, checkpoint):
    """For several prompts, the page's next-character logits and each of the 3 x 4 heads' wei are PyTorch's
    (and attention_map.py's), to float32 rounding."""
    answer, *_ = browser
    assert len(answer['runs']) == len(PROMPTS)
    for prompt, run in zip(PROMPTS, answer['runs']):
        logits, wei = pytorch(checkpoint, prompt)
        torch.testing.assert_close(torch.tensor(run['logits']), logits, rtol=1e-4, atol=1e-4)
        T = len(prompt)
        page = torch.tensor(run['wei'], dtype=torch.float32).reshape(3, 4, T, T)
        torch.testing.assert_close(page, wei, rtol=1e-4, atol=1e-5)
        assert len({round(w[-1, 0].item(), 3) for w in wei.flatten(0, 1)}) > 6 or T == 1 # heads that differ


@needs_chromium
def test_typing_marks_unknown_characters_and_draws_the_odds_and_every_map(browser, checkpoint):
    """Typed a character at a time: é is marked and left out, not an error; the model reads the last 24
    characters it knows, and its odds are PyTorch's for them."""
    answer, *_ = browser
    assert answer['unknown'] == ['é']
    assert answer['bars'] == 10 and answer['maps'] == 3 * 4
    assert len(answer['ms']) == len(TYPED) and all(ms >= 0 for ms in answer['ms'])
    assert answer['read'] == TYPED.replace('é', '')[-24:]
    torch.testing.assert_close(torch.tensor(answer['logits']), pytorch(checkpoint, answer['read'])[0], rtol=1e-4,
                               atol=1e-4)


@needs_chromium
def test_sampling_in_the_page_gives_the_models_characters(browser, checkpoint):
    """A seed gives the same text again, of the model's characters; with top-k 1 it is PyTorch's greedy text."""
    answer, *_ = browser
    seeded, again, greedy = answer['samples']
    assert len(seeded) == 40 and set(seeded) <= set(sample.DATA_CHARS) and again == seeded
    model, ckpt = sample.load_model(str(checkpoint), 'cpu')
    idx = torch.tensor([[ckpt['chars'].index(c) for c in 'ROMEO:']])
    assert greedy == ''.join(ckpt['chars'][i] for i in model.generate(idx, 30, top_k=1)[0, 6:].tolist())


@needs_chromium
def test_the_page_asks_nothing_of_the_network_and_can_be_seen(browser):
    """The browser's network log holds no request of the page's (the browser's own for its updates have no
    origin; the page's, that of its file); the screenshot is a picture of it."""
    answer, page, netlog, shot = browser
    log = json.loads(netlog)
    start = log['constants']['logEventTypes']['URL_REQUEST_START_JOB']
    asked = [e['params']['url'] for e in log['events'] if e['type'] == start and 'url' in e.get('params', {})
             and e['params'].get('initiator') != 'not an origin']
    assert log['events'] and asked == [], asked
    data = shot.read_bytes()
    assert data[:8] == b'\x89PNG\r\n\x1a\n' and struct.unpack('>II', data[16:24]) == (1280, 1000)
    assert len(data) > 20_000 # not a blank page


def test_the_page_holds_the_weights_as_float32_and_the_model_as_json(checkpoint, tmp_path):
    """Without a browser: the weights in the page are the checkpoint's, bit for bit, and the page starts
    with the prompt given, characters the model never saw included."""
    import base64
    page = tmp_path / 'e.html'
    r = run_here(EXPLORE, f'--ckpt={checkpoint}', f'--out={page}', '--prompt=Romé')
    assert r.returncode == 0 and r.stdout.startswith(f'wrote {page} (') and os.listdir(tmp_path) == ['e.html'], r
    text = page.read_text()
    about = json.loads(text.split('<script id="model" type="application/json">')[1].split('</script>')[0])
    blob = base64.b64decode(text.split('<script id="weights" type="text/plain">')[1].split('</script>')[0])
    state = torch.load(checkpoint)['model']
    assert about['prompt'] == 'Romé' and about['config'] == torch.load(checkpoint)['config']
    assert set(about['tensors']) == {k for k in state if not k.endswith('.tril')}
    for name, (offset, shape) in about['tensors'].items():
        stored = torch.frombuffer(bytearray(blob[offset:offset + 4 * state[name].numel()]), dtype=torch.float32)
        assert shape == list(state[name].shape) and torch.equal(stored, state[name].flatten())


@pytest.mark.parametrize('case', ['missing', 'damaged', 'not a GPT', 'no folder', 'a folder'])
def test_bad_input_gets_one_line(case, checkpoint, tmp_path):
    ckpt, out = str(checkpoint), str(tmp_path / 'e.html')
    if case == 'missing':
        ckpt = str(tmp_path / 'nothing.pt')
    elif case == 'damaged':
        ckpt = str(tmp_path / 'cut.pt')
        with open(ckpt, 'wb') as f:
            f.write(checkpoint.read_bytes()[:5000])
    elif case == 'not a GPT':
        ckpt = str(tmp_path / 'other.pt')
        torch.save(torch.nn.Linear(3, 4).state_dict(), ckpt)
    else:
        out = str(tmp_path / 'none' / 'e.html') if case == 'no folder' else str(tmp_path)
    r = run_here(EXPLORE, f'--ckpt={ckpt}', f'--out={out}')
    assert r.returncode != 0 and r.stderr.startswith('error: ') and r.stderr.count('\n') == 1, r.stderr
    assert 'Traceback' not in r.stderr and not [f for f in os.listdir(tmp_path) if f.endswith(('.html', '.tmp'))]
    assert not os.path.exists(f'{tmp_path}.tmp') # (nothing half-written beside a folder given as --out)
    if case == 'not a GPT':
        assert '--code=my_gpt.py' in r.stderr


@needs_chromium
def test_time_types_the_prompt_into_the_page_and_says_how_long_each_keystroke_took(checkpoint, tmp_path):
    r = run_here(EXPLORE, f'--ckpt={checkpoint}', f'--out={tmp_path / "e.html"}', '--prompt=ROMEO:', '--time')
    assert r.returncode == 0 and 'a keystroke in headless chromium, over the 6 of the prompt: median ' in r.stdout, r


def test_time_without_a_browser_says_how_to_get_one(checkpoint, tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, 'which', lambda name: None)
    r = run_here(EXPLORE, f'--ckpt={checkpoint}', f'--out={tmp_path / "e.html"}', '--time')
    assert r.returncode == 1 and r.stderr == ("error: no chromium here to run the page in (Debian: apt-get install "
                                              "chromium)\n") and (tmp_path / 'e.html').exists(), r
