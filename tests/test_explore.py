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
LONG = 'First Citizen:\nBefore we proceed any further, hear me speak.' # 61 characters: 37 the model can't read
SHOWN = [[LONG, 0.5, 0], [LONG, 1.5, 0], ['ROMEO:', 0.7, 3], ['ROMEO:', 0.7, 1]] # [text, temperature, top-k],
# set in that order, each as a user would, if it changed: the second moves the slider alone, the last top-k alone


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
               shown=SHOWN, append=[LONG * 6, 20], first=['ROMEO:', 0.8, 5, 4000], typed=TYPED) # append: after the last of SHOWN (top-k 1)
    answer = explore.in_browser(page, ask, f'--log-net-log={folder}/net.json', '--window-size=1280,1000')
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


def odds(logits, temperature, top_k):
    """PyTorch's probabilities of the next character, as sample.py draws them: softmax(logits / T), top-k only."""
    logits = logits / temperature
    if top_k:
        logits[logits < torch.topk(logits, top_k).values[-1]] = -float('inf')
    return torch.softmax(logits, dim=-1)


@needs_chromium
@pytest.mark.parametrize('case', range(len(SHOWN)))
def test_the_bars_show_the_ten_likeliest_characters_with_pytorchs_odds_in_order(browser, checkpoint, case):
    """What the page displays, read off it: the ten bars' characters, percentages and lengths, for temperatures
    below and above 1 and with top-k, are PyTorch's, likeliest first; the slider's value is shown beside it."""
    answer, *_ = browser
    text, temperature, top_k = SHOWN[case]
    shown = answer['shown'][case]
    assert shown['read'] == text[-24:] and shown['temperature'] == f'{temperature:.2f}'
    p = odds(pytorch(checkpoint, shown['read'])[0], temperature, top_k)
    chars = sample.DATA_CHARS
    assert len(shown['bars']) == 10
    seen = [p[chars.index(c)].item() for c, _, _ in shown['bars']]
    for (c, percent, width), q in zip(shown['bars'], seen):
        assert percent == f'{100 * q:.1f}%' or abs(float(percent[:-1]) - 100 * q) < 0.051, (c, percent, q)
        assert abs(width - 300 * q) <= 1.01, (c, width, q) # the bar: 300 px is certain
    assert all(a >= b - 1e-6 for a, b in zip(seen, seen[1:])), seen # likeliest first
    assert sorted(seen, reverse=True)[:10] == pytest.approx(p.sort(descending=True).values[:10].tolist(), abs=1e-6)
    if top_k:
        assert sum(q > 0 for q in seen) == top_k and all(b[1] == '0.0%' for b in shown['bars'][top_k:])


@needs_chromium
def test_the_maps_cells_are_attention_maps_weights(browser, checkpoint):
    """Each of the 12 maps, read back pixel by pixel: cell (i, j) coloured by attention_map.py's wei[i, j] (dark 0
    to yellow 1, to the colour's 1/215 rounding), the future (j > i) a flat grey."""
    answer, *_ = browser
    for shown in answer['shown'][:1] + answer['shown'][2:3]:
        T = len(shown['read'])
        wei = pytorch(checkpoint, shown['read'])[1].flatten(0, 1)
        assert len(shown['maps']) == 12 and wei.shape == (12, T, T)
        for cells, w in zip(shown['maps'], wei):
            rgb = torch.tensor(cells, dtype=torch.float32).reshape(T, T, 3)
            future = torch.ones(T, T).triu(1).bool()
            assert (rgb[future] == 244).all()
            v = w[~future]
            torch.testing.assert_close(rgb[~future], torch.stack([40 + 215 * v, 20 + 200 * v, 90 - 60 * v], 1),
                                       atol=1.01, rtol=0)


@needs_chromium
def test_the_page_greys_what_the_model_cannot_read_and_keeps_its_controls_still(browser):
    """Past block_size (24) the characters the model does not read are grey and a note says why; none are grey
    when the text fits. The Sample button, beside the bars on a laptop's screen, does not move as they change."""
    answer, *_ = browser
    long, _, short, _ = answer['shown']
    assert long['unread'] == LONG[:-24].replace(' ', '·').replace('\n', '↵') and 'grey: before the last 24' in long['note']
    assert short['unread'] == '' and 'grey' not in short['note']
    assert len({tuple(shown['button']) for shown in answer['shown']}) == 1 and answer['shown'][0]['button'][0] > 400


@needs_chromium
def test_sample_and_append_adds_the_models_text_and_shows_its_end(browser, checkpoint):
    """Sample and append, at top-k 1, adds PyTorch's greedy continuation of the last block_size characters (the
    vocabulary's characters only), shows it, and scrolls the text box to it."""
    answer, *_ = browser
    appended = answer['appended']
    prompt = LONG * 6 # more than the box's height
    model, ckpt = sample.load_model(str(checkpoint), 'cpu')
    idx = torch.tensor([[ckpt['chars'].index(c) for c in prompt]])
    greedy = ''.join(ckpt['chars'][i] for i in model.generate(idx, 20, top_k=1)[0, len(prompt):].tolist())
    assert appended['text'] == prompt + greedy and set(greedy) <= set(sample.DATA_CHARS)
    assert appended['shown'].endswith(greedy.replace(' ', '·').replace('\n', '↵'))
    assert appended['bottom']


@needs_chromium
def test_the_pages_sampler_draws_each_character_as_often_as_pytorchs_odds_say(browser, checkpoint):
    """The first character sampled after 'ROMEO:' at temperature 0.8, top-k 5, over 4,000 seeds: each of the five
    as often as PyTorch's softmax gives it (within 5 standard errors), no other."""
    answer, *_ = browser
    p = odds(pytorch(checkpoint, 'ROMEO:')[0], 0.8, 5)
    drawn = answer['first']
    assert len(drawn) == 4000 and set(drawn) <= {sample.DATA_CHARS[i] for i in p.nonzero().flatten().tolist()}
    for i in p.nonzero().flatten().tolist():
        q, share = p[i].item(), drawn.count(sample.DATA_CHARS[i]) / len(drawn)
        assert abs(share - q) < 5 * (q * (1 - q) / len(drawn)) ** 0.5 + 1e-3, (sample.DATA_CHARS[i], share, q)


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
    assert f'({len(text) / 1e6:.1f} MB): open it in a browser' in r.stdout and len(text) > 100_000 # its size
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


def test_time_reports_the_median_the_most_and_the_last_keystroke(checkpoint, tmp_path, monkeypatch, capsys):
    """--time's figures, from the ms the page measured for each character (here given): median, max, last."""
    monkeypatch.setattr(explore, 'in_browser', lambda path, ask: {'ms': [3.0, 40.0, 5.0, 7.0, 6.0]})
    explore.main([f'--ckpt={checkpoint}', f'--out={tmp_path / "e.html"}', '--prompt=ROMEO', '--time'])
    assert capsys.readouterr().out.endswith('a keystroke in headless chromium, over the 5 of the prompt: median 6 ms, '
                                            'at most 40 ms (the last, at 5 characters: 6 ms)\n')


def test_a_browser_that_hangs_is_one_line(tmp_path, monkeypatch):
    """chromium that never answers: after its 10 minutes, one line naming the page, not a traceback."""
    def hangs(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs.get('timeout'))
    monkeypatch.setattr(shutil, 'which', lambda name: '/usr/bin/chromium')
    monkeypatch.setattr(subprocess, 'run', hangs)
    with pytest.raises(SystemExit) as e:
        explore.in_browser(tmp_path / 'e.html', {'typed': 'a'})
    assert e.value.code == 1
