"""The data: the facts of Tiny Shakespeare, and its download against a server on 127.0.0.1."""
import hashlib
import http.server
import os
import socket
import subprocess
import sys
import threading

import pytest
import torch

import bigram
import gpt
import conftest
from conftest import INPUT, NO_INPUT, needs_input, run_here


@needs_input
def test_tiny_shakespeare_facts():
    text = gpt.read_text(INPUT)
    assert len(text) == 1_115_394
    chars = sorted(set(text))
    assert len(chars) == 65 and chars[:2] == ['\n', ' ']
    assert chars == list(gpt.DATA_CHARS) # the vocabulary of a state_dict, which holds none
    encode, decode = gpt.make_codec(chars)
    data = torch.tensor(encode(text), dtype=torch.long)
    train, val = gpt.split_data(data)
    assert (len(train), len(val)) == (1_003_854, 111_540)
    assert decode(encode(text[:1000])) == text[:1000]


@pytest.fixture
def server():
    """An HTTP server on 127.0.0.1 that serves whatever bytes the test puts in `body`."""
    state = {'body': b'', 'status': 200}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(state['status'])
            self.send_header('Content-Length', str(len(state['body'])))
            self.end_headers()
            self.wfile.write(state['body'])

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    state['url'] = f'http://127.0.0.1:{httpd.server_address[1]}/input.txt'
    yield state
    httpd.shutdown()


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def fake_dataset(monkeypatch, module, body):
    """Make `body` the data set the module expects, so the tests need no 1 MB file."""
    monkeypatch.setattr(module, 'DATA_SHA256', hashlib.sha256(body).hexdigest())


@pytest.mark.parametrize('module', [gpt, bigram])
def test_download_writes_the_checked_file(module, server, tmp_path, monkeypatch, capsys):
    server['body'] = b'First Citizen:\nBefore we proceed any further, hear me speak.\n' * 50
    fake_dataset(monkeypatch, module, server['body'])
    path = tmp_path / 'input.txt'
    text = module.read_text(str(path), server['url'])
    assert path.read_bytes() == server['body'] and text == server['body'].decode()
    assert 'sha256 checked' in capsys.readouterr().out
    assert os.listdir(tmp_path) == ['input.txt']


@needs_input
def test_download_of_the_real_file(server, tmp_path):
    with open(INPUT, 'rb') as f:
        server['body'] = f.read()
    path = tmp_path / 'input.txt'
    assert len(gpt.read_text(str(path), server['url'])) == 1_115_394


def expect_failure(module, url, path, capsys, *words):
    with pytest.raises(SystemExit) as e:
        module.read_text(str(path), url)
    assert e.value.code != 0
    err = capsys.readouterr().err
    assert err.startswith('error: ') and err.count('\n') == 1, err  # one line, no traceback
    assert 'download it by hand from' in err
    for word in words:
        assert word in err
    assert os.listdir(path.parent) == []  # nothing partial left behind


@pytest.mark.parametrize('module', [gpt, bigram])
def test_checksum_mismatch_leaves_nothing(module, server, tmp_path, capsys):
    server['body'] = b'not shakespeare at all\n' * 100
    expect_failure(module, server['url'], tmp_path / 'input.txt', capsys, 'sha256')


@pytest.mark.parametrize('module', [gpt, bigram])
def test_an_input_txt_that_is_not_tiny_shakespeare_is_used_with_a_note(module, tmp_path, capsys):
    path = tmp_path / 'input.txt'
    path.write_text('my own text, or a damaged copy\n' * 40)
    url = f'http://127.0.0.1:{free_port()}/input.txt'  # nothing listens: a download would fail
    assert module.read_text(str(path), url) == path.read_text()
    out = capsys.readouterr().out
    assert 'is not Tiny Shakespeare' in out and 'delete it to download Tiny Shakespeare again' in out
    assert os.listdir(tmp_path) == ['input.txt']


@needs_input
@pytest.mark.parametrize('module', [gpt, bigram])
def test_windows_line_endings_are_read_as_the_lectures_open_reads_them(module, tmp_path, capsys):
    """open(path, 'r'), as the lecture reads input.txt, turns \\r\\n (and a lone \\r) into \\n: a copy
    saved with Windows line endings is still Tiny Shakespeare, 65 characters, without a note."""
    url = f'http://127.0.0.1:{free_port()}/input.txt'  # nothing listens: a download would fail
    path = tmp_path / 'input.txt'
    with open(INPUT, 'rb') as f:
        path.write_bytes(f.read().replace(b'\n', b'\r\n'))
    with open(path, encoding='utf-8') as f:
        lectures = f.read()
    assert module.read_text(str(path), url) == lectures == module.read_text(INPUT, url)
    assert len(set(lectures)) == 65
    assert capsys.readouterr().out == '' # no "is not Tiny Shakespeare"
    own = tmp_path / 'own.txt'
    own.write_bytes('one\r\ntwo\rthree\n\r\né\r'.encode())
    with open(own, encoding='utf-8') as f:
        assert module.read_text(str(own), None) == f.read() == 'one\ntwo\nthree\n\né\n'


@pytest.mark.parametrize('module', [gpt, bigram])
def test_http_error_is_one_line(module, server, tmp_path, capsys):
    server['status'] = 404
    expect_failure(module, server['url'], tmp_path / 'input.txt', capsys, 'HTTP 404')


@pytest.mark.parametrize('module', [gpt, bigram])
def test_server_down_is_one_line(module, tmp_path, capsys):
    url = f'http://127.0.0.1:{free_port()}/input.txt'
    expect_failure(module, url, tmp_path / 'input.txt', capsys, 'ConnectionError')


@pytest.mark.parametrize('module', [gpt, bigram])
def test_a_folder_that_cannot_be_written_is_one_line(module, server, tmp_path, monkeypatch, capsys):
    server['body'] = b'First Citizen:\n' * 50
    fake_dataset(monkeypatch, module, server['body'])
    path = tmp_path / 'no such folder' / 'input.txt'
    with pytest.raises(SystemExit) as e:
        module.read_text(str(path), server['url'])
    err = capsys.readouterr().err
    assert e.value.code == 1 and err.count('\n') == 1, err
    assert err.startswith(f'error: cannot write {path}: No such file or directory')


@pytest.mark.parametrize('module', [gpt, bigram])
def test_unreadable_input_is_one_line_that_says_why(module, tmp_path, capsys):
    path = tmp_path / 'input.txt'
    path.write_bytes('Fran\u00e7ais, '.encode() + 'caf\u00e9'.encode('latin-1')) # Latin-1 after UTF-8
    for name, url, reason in [(path, module.DATA_URL, 'it is not UTF-8 text (byte 0xe9 at offset 14)'),
                              (tmp_path, None, 'Is a directory')]:
        with pytest.raises(SystemExit):
            module.read_text(str(name), url)
        err = capsys.readouterr().err
        assert err.startswith(f'error: cannot read {name}: {reason}.') and err.count('\n') == 1, err
        assert ('Delete it to download Tiny Shakespeare again' in err) == (url is not None)


@needs_input
def test_get_batch_draws_the_lectures_batches(tiny):
    """Our one-gather get_batch picks exactly what the lecture's loop of slices picks."""
    text = gpt.read_text(INPUT)
    encode, _ = gpt.make_codec(sorted(set(text)))
    data = torch.tensor(encode(text[:20000]), dtype=torch.long)
    torch.manual_seed(1337)
    x, y = gpt.get_batch(data)
    torch.manual_seed(1337)
    ix = torch.randint(len(data) - gpt.block_size, (gpt.batch_size,))
    assert torch.equal(x, torch.stack([data[i:i + gpt.block_size] for i in ix]))
    assert torch.equal(y, torch.stack([data[i + 1:i + gpt.block_size + 1] for i in ix]))


TINY_RUN = {'gpt.py': ['--n_layer=1', '--n_embd=16', '--n_head=2', '--out_dir=', '--max_new_tokens=60'],
            'bigram.py': []}


@pytest.mark.parametrize('script', ['gpt.py', 'bigram.py'])
def test_input_file_trains_on_a_text_of_your_own(script, tmp_path):
    """Lecture EX2: --input_file trains on any text; its vocabulary is that text's characters."""
    own = tmp_path / 'own.txt'
    own.write_text('abc cab bca\n' * 300)
    r = run_here(script, f'--input_file={own}', '--device=cpu', '--max_iters=5', '--eval_interval=5',
                 '--eval_iters=2', '--block_size=8', *TINY_RUN[script], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert 'downloading' not in r.stdout and 'note:' not in r.stdout
    sample = r.stdout.split('step 5: ')[1].split('\n', 1)[1]
    if script == 'gpt.py':
        assert '3,600 characters, vocab 5,' in r.stdout
        sample = sample.rsplit('\n', 2)[0] # without the last line, the time taken
    assert len(sample) > 50 and set(sample) <= set('abc \n'), sample
    assert os.listdir(tmp_path) == ['own.txt']


@pytest.mark.parametrize('script', ['gpt.py', 'bigram.py'])
def test_a_text_the_output_cannot_encode_prints_question_marks(script, tmp_path):
    """On Windows, output into a file or a pipe takes the system's code page, often cp1252, which
    has no Chinese: the sample's characters become '?' rather than a UnicodeEncodeError at the end."""
    own = tmp_path / 'own.txt'
    own.write_text('\u5e8a\u524d\u660e\u6708\u5149\n' * 300, encoding='utf-8')
    with open(tmp_path / 'out.txt', 'w', encoding='cp1252') as stdout:
        r = run_here(script, f'--input_file={own}', '--device=cpu', '--max_iters=1', '--eval_iters=1',
                     '--block_size=8', *TINY_RUN[script], cwd=tmp_path, stdout=stdout)
    assert r.returncode == 0, r.stderr
    sample = (tmp_path / 'out.txt').read_text(encoding='cp1252').split('step 1: ')[1].split('\n', 1)[1]
    if script == 'gpt.py':
        sample = sample.rsplit('\n', 2)[0] # without the last line, the time taken
    assert set(sample) <= set('?\n'), sample
    assert sample.count('?') > 20
    if script == 'gpt.py': # and scripts/sample.py, from the checkpoint of such a run
        r = run_here(script, f'--input_file={own}', '--device=cpu', '--max_iters=1', '--eval_iters=1',
                     '--block_size=8', *TINY_RUN[script], f'--out_dir={tmp_path / "out"}', cwd=tmp_path)
        with open(tmp_path / 'sample.txt', 'w', encoding='cp1252') as stdout:
            r = run_here('scripts/sample.py', f'--ckpt={tmp_path / "out"}', '--max_new_tokens=30',
                         '--device=cpu', stdout=stdout)
        assert r.returncode == 0, r.stderr
        sample = (tmp_path / 'sample.txt').read_text(encoding='cp1252')
        assert set(sample) <= set('?\n') and sample.count('?') > 10, sample


@pytest.mark.parametrize('script', ['gpt.py', 'bigram.py'])
def test_a_tilde_in_a_setting_is_the_home_folder(script, tmp_path, monkeypatch):
    """The shell leaves --input_file=~/x alone (the ~ is not at the start of a word)."""
    monkeypatch.setenv('HOME', str(tmp_path))
    (tmp_path / 'own.txt').write_text('abc cab bca\n' * 300)
    r = run_here(script, '--input_file=~/own.txt', '--device=cpu', '--max_iters=0', '--eval_iters=1',
                 '--block_size=8', *TINY_RUN[script], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"input_file={tmp_path / 'own.txt'}" in r.stdout


@pytest.mark.parametrize('script', ['gpt.py', 'bigram.py'])
def test_a_number_is_a_name_where_a_setting_is_text(script, tmp_path):
    """--input_file=2024 is the file 2024, though Python would read the value as an int."""
    (tmp_path / '2024').write_text('abc cab bca\n' * 300)
    r = run_here(script, '--input_file=2024', '--device=cpu', '--max_iters=0', '--eval_iters=1',
                 '--block_size=8', *TINY_RUN[script], *(['--out_dir=7'] if script == 'gpt.py' else []),
                 cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert 'input_file=2024' in r.stdout
    if script == 'gpt.py':
        assert sorted(os.listdir(tmp_path / '7')) == ['best.pt', 'ckpt.pt', 'log.csv']
    r = run_here(script, '--input_file=True', cwd=tmp_path) # not a name anyone means
    assert r.returncode == 2 and r.stderr.startswith("error: --input_file expects a string, got 'True'")


@pytest.mark.parametrize('script', ['gpt.py', 'bigram.py'])
def test_a_missing_input_file_is_one_line_and_downloads_nothing(script, tmp_path):
    r = run_here(script, '--input_file=missing.txt', '--device=cpu', '--max_iters=0', '--eval_iters=1',
                 '--block_size=8', *TINY_RUN[script], cwd=tmp_path) # if it ran anyway: fast
    assert r.returncode == 1 and r.stderr == 'error: missing.txt: no such file\n'
    assert 'downloading' not in r.stdout and os.listdir(tmp_path) == []


@pytest.mark.parametrize('script', ['gpt.py', 'bigram.py'])
def test_a_text_too_short_for_the_block_size_is_one_line(script, tmp_path):
    (tmp_path / 'own.txt').write_text('abcdefghij' * 8) # 80 characters: 8 in the val split
    args = [f'--input_file={tmp_path / "own.txt"}', '--device=cpu', '--max_iters=1', '--eval_iters=1',
            *TINY_RUN[script]]
    r = run_here(script, *args, '--block_size=8', cwd=tmp_path)
    assert r.returncode == 1 and r.stderr == (f"error: {tmp_path / 'own.txt'} is too short: its val split (the "
                                              "last 10%) has 8 characters, and block_size=8 needs 9: use a "
                                              "longer text or a smaller --block_size\n")
    r = run_here(script, *args, '--block_size=7', cwd=tmp_path) # as the message says
    assert r.returncode == 0, r.stderr


def test_a_test_run_without_the_data_ends_by_saying_how_to_get_it(tmp_path):
    """The tests never download; without input.txt the run's last lines say what was skipped and why."""
    hook = f"runpy.run_path({conftest.__file__!r})['pytest_terminal_summary']" # this project's
    (tmp_path / 'conftest.py').write_text(f"import runpy\npytest_terminal_summary = {hook}\n")
    (tmp_path / 'test_it.py').write_text(f"import pytest\n@pytest.mark.skipif(True, reason={NO_INPUT!r})\n"
                                         "def test_a(): pass\ndef test_b(): pass\n")
    r = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', str(tmp_path)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ('1 tests that read Tiny Shakespeare were skipped: input.txt is absent: python bigram.py '
            '(seconds) downloads it, then run the tests again') in r.stdout
