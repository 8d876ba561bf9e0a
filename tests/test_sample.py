"""scripts/sample.py and scripts/plot_losses.py, on the checkpoints and the log of a real gpt.py run."""
import os
import subprocess
import sys

import pytest
import torch

import common
import gpt
from conftest import ROOT, TINY_GPT, Screen, needs_input, run_here
from test_model import lecture_layout

pytestmark = needs_input


@pytest.fixture(scope='module')
def out(tmp_path_factory):
    """The out_dir of a 300-step run of a tiny model."""
    folder = tmp_path_factory.mktemp('run')
    r = run_here('gpt.py', *TINY_GPT, '--max_iters=300', '--eval_interval=50', cwd=folder)
    assert r.returncode == 0, r.stderr
    return folder / 'out'


def sample(*args):
    return run_here(os.path.join('scripts', 'sample.py'), *args)


def one_line_error(r, *words):
    assert r.returncode != 0 and r.stderr.startswith('error: ') and r.stderr.count('\n') == 1, r.stderr
    for word in words:
        assert word in r.stderr, r.stderr


def test_sample_with_prompt_temperature_and_top_k(out):
    args = [f'--ckpt={out / "best.pt"}', '--prompt=ROMEO:', '--temperature=0.8', '--top_k=10',
            '--max_new_tokens=100', '--num_samples=2', '--device=cpu']
    a, b = sample(*args), sample(*args)
    assert a.returncode == 0, a.stderr
    ckpt = torch.load(out / 'best.pt', weights_only=False) # which checkpoint it read, said as it starts
    assert a.stderr == f"note: sampling from {out / 'best.pt'} (step {ckpt['step']}, best val loss " \
                       f"{ckpt['best_val_loss']:.4f})\n"
    samples = a.stdout.split('\n---------------\n')
    assert len(samples) == 2 and all(s.startswith('ROMEO:') for s in samples)
    assert len(samples[0]) == len('ROMEO:') + 100
    assert a.stdout == b.stdout  # same seed, same sample
    assert sample(*args, '--seed=7').stdout != a.stdout


def test_sampling_is_the_lectures_multinomial_with_temperature_and_top_k_on_top(out, monkeypatch):
    checkpoint = torch.load(out / 'ckpt.pt', weights_only=True)
    for key in ('n_embd', 'n_head', 'n_layer', 'block_size'):
        monkeypatch.setattr(gpt, key, checkpoint['config'][key])
    model = gpt.GPTLanguageModel(65).eval()
    model.load_state_dict(checkpoint['model'])
    _, decode = common.codec(checkpoint['chars'])
    # one sample, printed as it comes; two, printed at the end; two, sharpened and cut to 10 characters
    for n, options in [(1, []), (2, []), (2, ['--temperature=0.8', '--top_k=10'])]:
        r = sample(f'--ckpt={out / "ckpt.pt"}', '--max_new_tokens=30', '--seed=5', '--device=cpu',
                   f'--num_samples={n}', *options)
        torch.manual_seed(5)
        idx = torch.zeros((n, 1), dtype=torch.long)
        with torch.no_grad():  # the lecture's loop, written out
            for _ in range(30):
                logits, _ = model(idx[:, -16:])
                logits = logits[:, -1, :]
                if options: # the next character from the 10 likeliest, at temperature 0.8
                    logits = logits / 0.8
                    logits[logits < logits.topk(10).values[:, [-1]]] = float('-inf')
                probs = torch.softmax(logits, dim=-1)
                idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
        assert r.stdout == '\n---------------\n'.join(decode(row.tolist()) for row in idx) + '\n'


def test_sample_to_a_file_from_a_prompt_file_is_the_sample_streamed(out, tmp_path):
    (tmp_path / 'prompt.txt').write_bytes(b'\xef\xbb\xbfKING RICHARD:\n') # with the byte-order mark of an editor
    args = [f'--prompt=@{tmp_path / "prompt.txt"}', '--max_new_tokens=200', '--device=cpu']
    r = sample(f'--ckpt={out}', *args, f'--out={tmp_path / "more.txt"}') # a run's folder: its best.pt
    assert r.returncode == 0 and r.stdout == f'wrote 1 sample(s), 215 characters, to {tmp_path / "more.txt"}\n'
    text = (tmp_path / 'more.txt').read_text()
    assert text.startswith('KING RICHARD:\n') and len(text) == len('KING RICHARD:\n') + 200 + 1
    assert sample(f'--ckpt={out / "best.pt"}', *args).stdout == text # streamed to the screen


def test_a_bare_state_dict_of_the_lectures_model_samples_as_its_checkpoint_does(out, tmp_path):
    """torch.save(model.state_dict(), 'model.pt') at the end of the lecture's own gpt.py: a model
    without its shape and vocabulary, which sample.py reads off the weights and Tiny Shakespeare."""
    weights = torch.load(out / 'best.pt', weights_only=True)['model']
    theirs = lecture_layout(65, n_embd=16, n_head=2, n_layer=1, block_size=16) # TINY_GPT's shape
    theirs.load_state_dict(weights, strict=True)
    torch.save(theirs.state_dict(), tmp_path / 'model.pt')
    compiled = {'_orig_mod.' + k: v for k, v in weights.items()} # the state_dict of torch.compile(model)
    torch.save(compiled, tmp_path / 'compiled.pt')
    args = ['--prompt=ROMEO:', '--max_new_tokens=60', '--num_samples=2', '--device=cpu']
    ours = sample(f'--ckpt={out / "best.pt"}', *args)
    for name in ('model.pt', 'compiled.pt'):
        r = sample(f'--ckpt={tmp_path / name}', *args)
        assert r.returncode == 0 and r.stdout == ours.stdout, r.stderr
        assert r.stderr == (f"note: {tmp_path / name} is a bare state_dict: read with n_embd=16 n_head=2 "
                            "n_layer=1 block_size=16 and Tiny Shakespeare's characters\n"
                            f"note: sampling from {tmp_path / name}\n")
    # another shape, read off the weights too; attention_map.py loads it the same way
    torch.save(lecture_layout(65, n_embd=24, n_head=3, n_layer=2, block_size=8).state_dict(), tmp_path / 'm.pt')
    r = run_here(os.path.join('scripts', 'attention_map.py'), f'--ckpt={tmp_path / "m.pt"}', '--prompt=ROMEO:')
    assert r.returncode == 0 and 'n_embd=24 n_head=3 n_layer=2 block_size=8' in r.stderr, r.stderr
    assert 'where each of its 2 x 3 heads looks, over 6 characters' in r.stdout
    # what a state_dict cannot tell: another text's characters
    torch.save(lecture_layout(30, 16, 2, 1, 16).state_dict(), tmp_path / 'other_text.pt')
    one_line_error(sample(f'--ckpt={tmp_path / "other_text.pt"}'), "not one of the lecture's GPT of Tiny Shakespeare")
    torch.save(lecture_layout(80, 16, 2, 1, 16).state_dict(), tmp_path / 'more_chars.pt') # more characters too
    one_line_error(sample(f'--ckpt={tmp_path / "more_chars.pt"}'), "not one of the lecture's GPT of Tiny Shakespeare")
    renamed = {k.replace('.sa.', '.attn.'): v for k, v in weights.items()} # a name not the lecture's
    torch.save(renamed, tmp_path / 'renamed.pt')
    r = sample(f'--ckpt={tmp_path / "renamed.pt"}')
    note, error = r.stderr.splitlines()
    assert r.returncode == 1 and 'n_layer=1 ' in note, r.stderr # its blocks still counted (nothing sampled)
    assert error.startswith(f'error: {tmp_path / "renamed.pt"} does not fit GPTLanguageModel: Missing key(s) '
                            'in state_dict: "blocks.0.sa.'), error
    assert len(error.split('GPTLanguageModel: ', 1)[1]) == 200 # PyTorch's long list, cut to one line's worth


def test_sample_errors_are_one_line(out, tmp_path):
    ckpt = f'--ckpt={out / "best.pt"}'
    one_line_error(sample(ckpt, '--prompt=caf\u00e9 \u20ac'), 'the prompt has characters the model never saw',
                   "'\u00e9\u20ac'")
    one_line_error(sample(f'--ckpt={tmp_path / "missing.pt"}'), 'no checkpoint at', 'gpt.py writes')
    (tmp_path / 'bad.pt').write_bytes(b'\x80\x02 not a checkpoint')
    one_line_error(sample(f'--ckpt={tmp_path / "bad.pt"}'), 'not a readable checkpoint')
    (tmp_path / 'cut.pt').write_bytes((out / 'best.pt').read_bytes()[:5000]) # a copy cut short
    one_line_error(sample(f'--ckpt={tmp_path / "cut.pt"}'), 'not a readable checkpoint', 'cut short')
    torch.save({'step': 300}, tmp_path / 'other.pt')
    one_line_error(sample(f'--ckpt={tmp_path / "other.pt"}'), 'it has no model, config and characters')
    one_line_error(sample(ckpt, f'--prompt=@{tmp_path / "nope.txt"}'), 'cannot read the prompt file',
                   f"{str(tmp_path / 'nope.txt')!r}", 'No such file or directory')
    (tmp_path / 'latin1.txt').write_bytes('caf\u00e9'.encode('latin-1'))
    one_line_error(sample(ckpt, f'--prompt=@{tmp_path / "latin1.txt"}'), 'it is not UTF-8 text')
    one_line_error(sample(ckpt, '--temperature=0'), '--temperature: must be a number > 0, got 0')
    one_line_error(sample(ckpt, '--temperature=nan'), '--temperature: must be a number > 0, got nan')
    one_line_error(sample(ckpt, '--temperature=inf'), '--temperature: must be a number > 0, got inf')
    one_line_error(sample(ckpt, '--temperature=9e-7'), '--temperature must be at least 1e-6')
    one_line_error(sample(ckpt, '--max_new_tokens=-1'), '--max_new_tokens must be >= 0')
    torch.save(torch.nn.Linear(3, 4).state_dict(), tmp_path / 'linear.pt') # a state_dict, not of a GPT
    one_line_error(sample(f'--ckpt={tmp_path / "linear.pt"}'), "not one of the lecture's GPT of Tiny Shakespeare")
    weights = torch.load(out / 'best.pt', weights_only=True)['model'] # the lecture's, less its token table
    torch.save({k: v for k, v in weights.items() if not k.startswith('token_')}, tmp_path / 'no_tokens.pt')
    one_line_error(sample(f'--ckpt={tmp_path / "no_tokens.pt"}'), "not one of the lecture's GPT of Tiny Shakespeare")
    one_line_error(sample(ckpt, '--top_k=-3'), '--top_k')
    one_line_error(sample(ckpt, f'--seed={2**64}'), '--seed an int64')
    nowhere = tmp_path / 'no' / 's.txt' # said before sampling, not after
    one_line_error(sample(ckpt, f'--out={nowhere}'), f'--out {nowhere}: no such folder')
    one_line_error(sample(ckpt, f'--out={tmp_path}'), f"--out {tmp_path}: a folder: give a file's name")
    one_line_error(sample(ckpt, '--no_such_option=1'), 'unrecognized')
    one_line_error(sample('--ckpt='), "--ckpt is empty: give a checkpoint, or a run's folder")
    torch.save({'model': {'x': torch.zeros(1)}, 'config': dict(n_embd=8, n_head=2, n_layer=1, block_size=8),
                'chars': list('ab')}, tmp_path / 'other.pt')
    one_line_error(sample(f'--ckpt={tmp_path / "other.pt"}'), 'does not fit GPTLanguageModel')
    one_line_error(sample(ckpt, '--device=cuda' if not torch.cuda.is_available() else '--device=cuda:99'),
                   "cannot use device 'cuda")


def test_the_defaults_are_what_help_says_and_the_smallest_temperature_is_greedy(out):
    """No options: 500 characters after a newline, seed 1337 (as --seed=1337 gives); --temperature=1e-6, the
    smallest taken, picks as --top_k=1 does."""
    ckpt = f'--ckpt={out / "best.pt"}'
    plain = sample(ckpt, '--device=cpu')
    assert plain.returncode == 0 and len(plain.stdout) == 1 + 500 + 1 and plain.stdout[0] == '\n', plain.stderr
    assert sample(ckpt, '--device=cpu', '--seed=1337').stdout == plain.stdout
    assert 'default: 500' in sample('--help').stdout and 'default: 1337' in sample('--help').stdout
    assert sample(ckpt, '--device=cpu', '--max_new_tokens=0', '--prompt=ROMEO:').stdout == 'ROMEO:\n' # nothing new
    coldest = sample(ckpt, '--device=cpu', '--temperature=1e-6', '--max_new_tokens=50', '--prompt=ROMEO:')
    assert coldest.returncode == 0 and coldest.stdout == sample(ckpt, '--device=cpu', '--top_k=1',
                                                                '--max_new_tokens=50', '--prompt=ROMEO:').stdout


def test_one_sample_is_shown_a_character_at_a_time(out, monkeypatch, capsys):
    """To the screen, each character is written and flushed as it is drawn, the prompt first."""
    import sample as script
    written = []
    monkeypatch.setattr(sys, 'stdout', Screen('out', written))
    script.main([f'--ckpt={out / "best.pt"}', '--device=cpu', '--prompt=ROMEO:', '--max_new_tokens=20'])
    monkeypatch.undo()
    seen = [text for _, text in written] # None: a flush
    assert seen[:2] == ['ROMEO:', None] and seen[-1:] == ['\n']
    drawn = seen[2:-1]
    assert len(drawn) == 40 and all(len(c) == 1 for c in drawn[0::2]) and drawn[1::2] == [None] * 20, seen


def test_a_checkpoint_that_would_run_code_is_refused_without_running_it(tmp_path):
    """A .pt that pickles a call (as a file from the internet might): refused in one line, the call never made."""
    marker = tmp_path / 'ran'
    class Payload:
        def __reduce__(self):
            return (open, (str(marker), 'w'))
    torch.save({'model': Payload()}, tmp_path / 'evil.pt')
    one_line_error(sample(f'--ckpt={tmp_path / "evil.pt"}'), 'not a readable checkpoint')
    assert not marker.exists()


def plot(*args, cwd=None):
    return run_here(os.path.join('scripts', 'plot_losses.py'), *args, cwd=cwd)


def test_plot_losses_writes_a_png_and_the_best_and_last_val_loss(out, tmp_path):
    pytest.importorskip('matplotlib')
    r = plot(str(out), f'--out={tmp_path / "l.png"}') # a run's folder: its log.csv
    assert r.returncode == 0, r.stderr
    assert (tmp_path / 'l.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n' and os.listdir(tmp_path) == ['l.png']
    rows = [row.split(',') for row in (out / 'log.csv').read_text().splitlines()[1:]]
    best = min(rows, key=lambda row: float(row[2]))
    assert r.stdout.splitlines()[2:] == [f'| {out} | {float(best[2]):.4f} | {best[0]} | {float(rows[-1][2]):.4f} | 300 |',
                                         f'wrote {tmp_path / "l.png"}']


def test_plot_losses_best_is_the_lowest_val_loss_where_val_turns_up_and_train_goes_on_down(tmp_path):
    """Overfitting, as the README's GPU run: the train loss falls to the end, the val loss turns up after step
    3000. The best row is the val loss's lowest, at its step, not the step of the lowest train loss."""
    pytest.importorskip('matplotlib')
    losses = [(0, 4.17, 4.18), (1000, 2.0, 2.1), (2000, 1.5, 1.6), (3000, 1.2, 1.4869), (4000, 1.0, 1.52),
              (5000, 0.9, 1.5704)]
    (tmp_path / 'log.csv').write_text('step,train_loss,val_loss,elapsed_s\n' + ''.join(
        f'{step},{train},{val},{step / 100}\n' for step, train, val in losses))
    r = plot(str(tmp_path), f'--out={tmp_path / "l.png"}')
    assert r.returncode == 0 and r.stdout.splitlines()[2] == f'| {tmp_path} | 1.4869 | 3000 | 1.5704 | 5000 |', r.stdout


def test_plot_losses_without_a_log_says_where_logs_come_from(tmp_path):
    one_line_error(plot(cwd=tmp_path), 'no log at out/log.csv', 'gpt.py writes one')
    assert os.listdir(tmp_path) == []


def test_plot_losses_without_matplotlib_says_how_to_get_it(out):
    code = (f"import sys; sys.modules['matplotlib'] = None; sys.path.insert(0, {ROOT + '/scripts'!r}); "
            f"import plot_losses; plot_losses.main([{str(out / 'log.csv')!r}])")
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert r.returncode == 1 and 'pip install matplotlib' in r.stderr and 'Traceback' not in r.stderr
