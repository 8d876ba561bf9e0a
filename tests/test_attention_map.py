"""scripts/attention_map.py: the weights it shows are those each Head applies, and it says so."""
import os
import re
import struct
import sys

import pytest
import torch

import gpt
from conftest import ROOT, run_here

sys.path.insert(0, os.path.join(ROOT, 'scripts'))
import attention_map  # noqa: E402

SCRIPT = os.path.join('scripts', 'attention_map.py')
CHARS = sorted(set(attention_map.PROMPT + 'ROMEO'))


def test_the_weights_are_those_that_each_head_applies(tiny):
    """wei[layer, head] @ the head's values is exactly what the head outputs inside the model."""
    torch.manual_seed(0)
    model = gpt.GPTLanguageModel(65).eval()
    idx = torch.randint(65, (1, 12))
    wei = attention_map.attention_weights(model, idx)
    assert wei.shape == (2, 4, 12, 12)
    torch.testing.assert_close(wei.sum(-1), torch.ones(2, 4, 12)) # each row a weighted average
    assert (wei.triu(1) == 0).all() # of the characters up to i, never after
    inputs, outputs = [], []
    hooks = [block.ln1.register_forward_hook(lambda m, a, out: inputs.append(out)) for block in model.blocks]
    hooks += [head.register_forward_hook(lambda m, a, out: outputs.append(out))
              for block in model.blocks for head in block.sa.heads]
    model(idx)
    for hook in hooks:
        hook.remove()
    for layer, block in enumerate(model.blocks):
        for h, head in enumerate(block.sa.heads):
            torch.testing.assert_close(wei[layer, h] @ head.value(inputs[layer])[0], outputs[layer * 4 + h][0])


def test_the_table_and_the_map_of_heads_whose_weights_are_known():
    """Two heads over 4 characters: one on the character before (the first can only look at
    itself), one spread evenly over all up to its own. Row i of the even one gives 1/(i+1) to
    itself and to the one before, and looks i/2 back on average."""
    before = torch.zeros(4, 4)
    before[0, 0] = 1
    before[[1, 2, 3], [0, 1, 2]] = 1
    even = torch.ones(4, 4).tril()
    even /= even.sum(dim=-1, keepdim=True)
    table = attention_map.summary(torch.stack([before, even])[None]).splitlines() # (1 layer, 2 heads, T, T)
    assert table[2:] == ['| 0 | 0 | 0.00 | 1.00 | 0.00 | 1.0 |', # rows 1 to 3: (1/2 + 1/3 + 1/4) / 3 = 0.36,
                         '| 0 | 1 | 0.36 | 0.36 | 0.28 | 1.0 |'] # and (1/2 + 2/2 + 3/2) / 3 = 1.0 back
    shaded = torch.tensor([[1, 0, 0], [0.55, 0.45, 0], [0.05, 0.12, 0.83]])
    assert [row[4:7] for row in attention_map.heat_map(shaded, 'abc').splitlines()[1:]] == \
        ['@  ', '+= ', ' .%'] # a shade a tenth of the weight, up to the row's own character, none after
    rows = attention_map.heat_map(before, 'abcd').splitlines()[1:]
    assert [row.split('  most on ')[1] for row in rows] == ["'a' (0 back), 1.00", "'a' (1 back), 1.00",
                                                           "'b' (1 back), 1.00", "'c' (1 back), 1.00"]


@pytest.fixture
def ckpt(tiny, tmp_path):
    """A folder with a best.pt of an untrained model of TINY's shape (block_size 16)."""
    return untrained(tmp_path)


def untrained(folder):
    """folder, with a best.pt of an untrained model of gpt's settings now."""
    torch.manual_seed(0)
    model = gpt.GPTLanguageModel(len(CHARS))
    torch.save({'model': model.state_dict(), 'chars': CHARS, 'config': {k: getattr(gpt, k) for k in gpt.config_keys}},
               folder / 'best.pt')
    return folder


def test_every_head_in_a_table(ckpt):
    r = run_here(SCRIPT, f'--ckpt={ckpt}')
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith('note: the prompt has 61 characters and the model reads 16 at a time: '
                               'its last 16\n')
    rows = re.findall(r'^\| (\d) \| (\d) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$', r.stdout, re.M)
    assert [(int(layer), int(head)) for layer, head, *_ in rows] == [(l, h) for l in range(2) for h in range(4)]
    for *_, itself, before, further, distance in rows:
        assert abs(float(itself) + float(before) + float(further) - 1) < 0.015
        assert 0 < float(distance) < 15


def test_one_heads_map(ckpt):
    r = run_here(SCRIPT, f'--ckpt={ckpt}', '--layer=1', '--head=3', '--prompt=ROMEO:')
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f'{ckpt / "best.pt"}, layer 1, head 3: each row, what the characters')
    assert lines[1] == f"({attention_map.SHADES[1]} 0.1 of its weight ... {attention_map.SHADES[-1]} 0.9 or more; " \
                       "· is a space, ↵ a newline)" # the legend
    assert lines[2] == '    ROMEO:' and len(lines) == 3 + 6
    first = run_here(SCRIPT, f'--ckpt={ckpt}', '--layer=0', '--head=0', '--prompt=ROMEO:') # the first of each
    assert first.returncode == 0 and first.stdout.startswith(f'{ckpt / "best.pt"}, layer 0, head 0: '), first.stderr
    assert lines[3] == "  R @       most on 'R' (0 back), 1.00" # the first character can only look at itself
    for i, line in enumerate(lines[3:]): # row i: shades for the i + 1 characters up to it, none after
        assert line[4 + i + 1:10].strip() == '' and 0 <= int(re.search(r'\((\d+) back\)', line)[1]) <= i


@pytest.mark.parametrize('args, words, code', [
    (['--layer=1'], '--layer and --head go together', 2),
    (['--head=1'], '--layer and --head go together', 2),
    (['--layer=2', '--head=0'], 'this model has layers 0 to 1 and heads 0 to 3, got --layer=2 --head=0', 1),
    (['--layer=5', '--head=0'], 'this model has layers 0 to 1 and heads 0 to 3, got --layer=5 --head=0', 1),
    (['--layer=0', '--head=4'], 'this model has layers 0 to 1 and heads 0 to 3, got --layer=0 --head=4', 1),
    (['--layer=0', '--head=7'], 'this model has layers 0 to 1 and heads 0 to 3, got --layer=0 --head=7', 1),
    (['--layer=-1', '--head=0'], 'this model has layers 0 to 1 and heads 0 to 3, got --layer=-1 --head=0', 1),
    (['--layer=0', '--head=-1'], 'this model has layers 0 to 1 and heads 0 to 3, got --layer=0 --head=-1', 1),
    (['--prompt=Juliet'], "the prompt has characters the model never saw: 'Jl'; its vocabulary is ", 1),
    (['--prompt='], 'the prompt needs at least 2 characters, so that one can look at another (got 0)', 1),
    (['--prompt=R'], 'the prompt needs at least 2 characters, so that one can look at another (got 1)', 1),
    (['--ckpt='], '--ckpt is empty', 2),
])
def test_bad_input_is_a_one_line_error(ckpt, args, words, code):
    r = run_here(SCRIPT, f'--ckpt={ckpt}', *args)
    assert r.returncode == code and r.stderr.startswith('error: ') and words in r.stderr, r.stderr
    assert r.stderr.count('\n') == 1


def test_a_model_of_another_text_asks_for_a_prompt_of_its_own(tiny, tmp_path):
    model = gpt.GPTLanguageModel(2) # trained on a text of a and b alone (gpt.py --input_file)
    torch.save({'model': model.state_dict(), 'chars': ['a', 'b'], 'config': {k: getattr(gpt, k) for k in gpt.config_keys}},
               tmp_path / 'best.pt')
    r = run_here(SCRIPT, f'--ckpt={tmp_path}')
    assert r.returncode == 1
    assert r.stderr.endswith("its vocabulary is 'ab'; give a prompt of its text with --prompt\n"), r.stderr
    r = run_here(SCRIPT, f'--ckpt={tmp_path}', '--prompt=Abz') # a prompt of theirs: no hint to give one
    assert r.returncode == 1 and r.stderr.endswith("its vocabulary is 'ab'\n"), r.stderr
    r = run_here(SCRIPT, f'--ckpt={tmp_path}', '--prompt=abba')
    assert r.returncode == 0 and 'over 4 characters' in r.stdout, r.stderr


def test_every_heads_weights_in_one_picture(ckpt, tmp_path, monkeypatch):
    """--png: a PNG of the figure's size (4 heads wide, 2 layers high), whose maps are the weights that
    the table sums up (the same run's), the future blank (NaN: no colour)."""
    pytest.importorskip('matplotlib')
    import matplotlib.axes
    maps, imshow = [], matplotlib.axes.Axes.imshow
    monkeypatch.setattr(matplotlib.axes.Axes, 'imshow', lambda ax, data, **kw: maps.append(data) or
                        imshow(ax, data, **kw))
    png = tmp_path / 'heads.png'
    r = run_here(SCRIPT, f'--ckpt={ckpt}', f'--png={png}', '--prompt=ROMEO:')
    assert r.returncode == 0 and f'wrote {png}\n' in r.stdout, r.stderr
    data = png.read_bytes()
    assert data[:8] == b'\x89PNG\r\n\x1a\n' and struct.unpack('>II', data[16:24]) == (1060, 480)
    assert sorted(os.listdir(tmp_path)) == ['best.pt', 'heads.png'] # written whole: no .tmp left
    rows = re.findall(r'^\| (\d) \| (\d) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$', r.stdout, re.M)
    assert len(maps) == len(rows) == 8
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)
    for w, (_, _, itself, before, *_) in zip(maps, rows):
        w = torch.tensor(w)
        assert w[future].isnan().all() and not w[~future].isnan().any()
        assert torch.allclose(w.nan_to_num().sum(-1), torch.ones(6)) # each row: all of a character's attention
        assert f'{w.diagonal()[1:].mean():.2f}' == itself and f'{w.diagonal(-1).mean():.2f}' == before


@pytest.mark.parametrize('T, inches, labelled', [(40, 2.4, True), (41, 3.8, True), (64, 3.8, True), (65, 3.8, False)])
def test_each_map_of_the_picture_is_titled_and_labelled_by_its_characters_where_they_fit(T, inches, labelled, tiny,
                                                                                           tmp_path, monkeypatch):
    """Map by map, in the table's order: 'layer l, head h' over it; along both sides the prompt's characters
    (newlines and spaces made visible), while 64 fit; each map 2.4 inches wide up to 40 characters, then 3.8;
    one colour scale, weights 0 to 1, its bar inside the picture."""
    pytest.importorskip('matplotlib')
    import matplotlib.axes
    import matplotlib.figure
    gpt.block_size = 80
    untrained(tmp_path)
    said, scales, bars = [], [], []
    imshow, colorbar = matplotlib.axes.Axes.imshow, matplotlib.figure.Figure.colorbar
    for name in ('set_title', 'set_xticks', 'set_yticks'):
        monkeypatch.setattr(matplotlib.axes.Axes, name, lambda ax, *a, name=name, **kw: said.append((name, a)))
    monkeypatch.setattr(matplotlib.axes.Axes, 'imshow', lambda ax, data, **kw: scales.append((kw['vmin'], kw['vmax']))
                        or imshow(ax, data, **kw))
    monkeypatch.setattr(matplotlib.figure.Figure, 'colorbar', lambda *a, **kw: bars.append(colorbar(*a, **kw))
                        or bars[-1])
    prompt = ''.join(CHARS[i % len(CHARS)] for i in range(T))
    r = run_here(SCRIPT, f'--ckpt={tmp_path}', f'--png={tmp_path / "heads.png"}', f'--prompt={prompt}')
    assert r.returncode == 0, r.stderr
    labels = [attention_map.shown(c) for c in prompt] if labelled else []
    assert ' ' in prompt and '\u00b7' in labels or not labelled
    assert said == [call for layer in range(2) for h in range(4) for call in [
        ('set_title', (f'layer {layer}, head {h}',)), ('set_xticks', (range(len(labels)), labels)),
        ('set_yticks', (range(len(labels)), labels))]]
    data = (tmp_path / 'heads.png').read_bytes()
    assert struct.unpack('>II', data[16:24]) == (round(100 * (inches * 4 + 1)), round(100 * inches * 2))
    assert scales == [(0, 1)] * 8 and len(bars) == 1 # one colour scale, 0 to 1, for every map, and its bar
    bar = bars[0].ax.get_position()
    assert 0 < bar.y0 < bar.y1 < 1 and bar.x1 < 1 # inside the picture


def test_a_model_of_one_layer_and_one_head_is_one_map(tiny, tmp_path):
    pytest.importorskip('matplotlib')
    gpt.n_layer, gpt.n_head = 1, 1
    untrained(tmp_path)
    r = run_here(SCRIPT, f'--ckpt={tmp_path}', f'--png={tmp_path / "heads.png"}', '--prompt=ROMEO:')
    assert r.returncode == 0 and struct.unpack('>II', (tmp_path / 'heads.png').read_bytes()[16:24]) == (340, 240), \
        r.stderr


def test_a_picture_without_matplotlib_says_how_to_get_it(ckpt, monkeypatch):
    monkeypatch.setitem(sys.modules, 'matplotlib', None) # as if it were not installed
    r = run_here(SCRIPT, f'--ckpt={ckpt}', f'--png={ckpt / "heads.png"}', '--prompt=ROMEO:')
    assert r.returncode == 1 and r.stderr == ('error: a picture needs matplotlib, an optional extra: '
                                              'pip install matplotlib\n'), r.stderr
    assert not os.path.exists(ckpt / 'heads.png')


def test_the_table_is_the_same_with_or_without_a_picture(ckpt, tmp_path):
    """--png reads the same default prompt as the table: the numbers don't change between the two commands."""
    pytest.importorskip('matplotlib')
    plain = run_here(SCRIPT, f'--ckpt={ckpt}')
    drawn = run_here(SCRIPT, f'--ckpt={ckpt}', f'--png={tmp_path / "heads.png"}')
    assert plain.returncode == drawn.returncode == 0, drawn.stderr
    wrote = f'wrote {tmp_path / "heads.png"}\n'
    assert wrote in drawn.stdout and drawn.stdout.replace(wrote, '') == plain.stdout and '| 1 | 3 |' in plain.stdout


def test_a_prompt_of_2_characters_and_one_of_block_size_are_read_whole(ckpt):
    """The shortest prompt one character can look back from, and one exactly block_size (16) long: no note."""
    for prompt in ['RO', 'ROMEO: my friend']:
        r = run_here(SCRIPT, f'--ckpt={ckpt}', f'--prompt={prompt}')
        assert r.returncode == 0 and f'over {len(prompt)} characters' in r.stdout and 'note:' not in r.stdout, r


def test_the_layers_a_model_has_are_said_whatever_their_count(tiny, tmp_path, monkeypatch):
    """A model of 3 layers: --layer=3 is past its last, layer 2."""
    monkeypatch.setattr(gpt, 'n_layer', 3)
    torch.save({'model': gpt.GPTLanguageModel(len(CHARS)).state_dict(), 'chars': CHARS,
                'config': {k: getattr(gpt, k) for k in gpt.config_keys}}, tmp_path / 'best.pt')
    r = run_here(SCRIPT, f'--ckpt={tmp_path}', '--layer=3', '--head=0')
    assert r.returncode == 1 and r.stderr == ('error: this model has layers 0 to 2 and heads 0 to 3, got --layer=3 '
                                              '--head=0\n'), r.stderr
