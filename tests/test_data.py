"""The data: the facts of Tiny Shakespeare, its download from a server on 127.0.0.1, texts of your own."""
import hashlib
import http.server
import os
import socket
import threading

import pytest
import torch

import bigram
import common
import gpt
from conftest import needs_input, run_here

BODY = b'First Citizen:\nBefore we proceed any further, hear me speak.\n' * 50


@needs_input
def test_tiny_shakespeare_facts():
    """shared/data/tinyshakespeare/README.md: 1,115,394 characters, 65 of them, split 1,003,854 / 111,540."""
    text = gpt.read_text()
    assert len(text) == 1_115_394 and hashlib.sha256(text.encode()).hexdigest() == gpt.DATA_SHA256
    chars = sorted(set(text))
    assert len(chars) == 65 and chars[:2] == ['\n', ' ']
    encode, decode = common.codec(chars)
    train, val = common.split(torch.tensor(encode(text), dtype=torch.long))
    assert (len(train), len(val)) == (1_003_854, 111_540)
    assert decode(encode(text[:1000])) == text[:1000]
    assert bigram.read_text() == text


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
    threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True).start()
    state['url'] = f'http://127.0.0.1:{httpd.server_address[1]}/input.txt'
    yield state
    httpd.shutdown()


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.fixture(params=[gpt, bigram], ids=['gpt', 'bigram'])
def module(request, monkeypatch, tmp_path):
    """gpt or bigram, reading its input.txt from tmp_path, and knowing BODY as Tiny Shakespeare."""
    monkeypatch.setattr(request.param, 'INPUT_PATH', str(tmp_path / 'input.txt'))
    monkeypatch.setattr(request.param, 'DATA_SHA256', hashlib.sha256(BODY).hexdigest())
    return request.param


def test_download_writes_the_checked_file_once(module, server, tmp_path, capsys):
    server['body'] = BODY
    module.DATA_URL = server['url']
    assert module.read_text() == BODY.decode()
    assert (tmp_path / 'input.txt').read_bytes() == BODY and os.listdir(tmp_path) == ['input.txt']
    assert capsys.readouterr().out == f'downloading Tiny Shakespeare from {server["url"]}\n'
    server['status'] = 500 # the second time reads the file: no download
    assert module.read_text() == BODY.decode() and capsys.readouterr().out == ''


def failure(module, capsys):
    """The one-line error of read_text."""
    with pytest.raises(SystemExit) as e:
        module.read_text()
    err = capsys.readouterr().err
    assert e.value.code == 1 and err.startswith('error: ') and err.count('\n') == 1, err
    return err


@pytest.mark.parametrize('status, body', [(200, b'<html>a proxy, not the file</html>'), (404, b'not found')])
def test_a_wrong_download_is_one_line_and_leaves_nothing(module, server, tmp_path, capsys, status, body):
    server['status'], server['body'] = status, body
    module.DATA_URL = server['url']
    assert failure(module, capsys) == (f'error: not Tiny Shakespeare (its sha256 differs): delete '
                                       f'{tmp_path / "input.txt"}, or fetch {server["url"]} by hand\n')
    assert os.listdir(tmp_path) == []


def test_no_network_is_one_line_with_the_address(module, tmp_path, capsys):
    module.DATA_URL = f'http://127.0.0.1:{free_port()}/input.txt' # nothing listens there
    err = failure(module, capsys)
    assert err == (f'error: could not download it (ConnectionError): fetch {module.DATA_URL} by hand to '
                   f'{tmp_path / "input.txt"}\n')
    assert os.listdir(tmp_path) == []


def test_an_input_txt_that_is_not_tiny_shakespeare_is_one_line(module, tmp_path, capsys):
    (tmp_path / 'input.txt').write_bytes(BODY[:-1]) # one character short: a damaged copy
    err = failure(module, capsys)
    assert err == (f'error: not Tiny Shakespeare (its sha256 differs): delete {tmp_path / "input.txt"}, or fetch '
                   f'{module.DATA_URL} by hand\n')


@needs_input
def test_get_batch_draws_the_lectures_batches(tiny):
    """Our one-gather get_batch picks exactly what the lecture's loop of slices picks."""
    data = torch.randint(65, (20000,))
    for module in (gpt, bigram):
        torch.manual_seed(1337)
        x, y = module.get_batch(data)
        torch.manual_seed(1337)
        ix = torch.randint(len(data) - module.block_size, (module.batch_size,))
        assert torch.equal(x, torch.stack([data[i:i + module.block_size] for i in ix]))
        assert torch.equal(y, torch.stack([data[i + 1:i + module.block_size + 1] for i in ix]))


TINY_RUN = ['--n_layer=1', '--n_embd=16', '--n_head=2', '--out_dir=', '--device=cpu',
            '--eval_iters=2', '--block_size=8']


def test_input_file_trains_on_a_text_of_your_own(tmp_path):
    """Lecture EX2: --input_file trains on any UTF-8 text, Windows line endings read as open(path, 'r')
    reads them; its vocabulary is that text's characters."""
    own = tmp_path / 'own.txt'
    own.write_bytes('abc cab bcé\r\n'.encode() * 300)
    r = run_here('gpt.py', f'--input_file={own}', '--max_iters=5', '--eval_interval=5', *TINY_RUN, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert 'downloading' not in r.stdout and '0.0' in r.stdout # the parameter count
    sample = r.stdout.split('step 5: ')[1].split('\n', 1)[1]
    assert len(sample) > 50 and set(sample) <= set('abcé \n'), sample
    assert os.listdir(tmp_path) == ['own.txt']


@pytest.mark.parametrize('make, words', [
    (lambda path: None, 'No such file or directory: '),
    (lambda path: path.write_bytes('caf\u00e9'.encode('latin-1') * 300), 'not UTF-8 text: '),
])
def test_an_input_file_that_cannot_be_read_is_one_line(tmp_path, make, words):
    make(tmp_path / 'own.txt')
    r = run_here('gpt.py', '--input_file=own.txt', '--max_iters=0', *TINY_RUN, cwd=tmp_path)
    assert r.returncode == 1 and r.stderr == f'error: {words}own.txt\n', r.stderr


def test_a_text_too_short_for_the_block_size_is_one_line(tmp_path):
    (tmp_path / 'own.txt').write_text('abcdefghij' * 8) # 80 characters: 8 in the val split
    args = [f'--input_file={tmp_path / "own.txt"}', '--max_iters=1', *TINY_RUN[:-1]]
    r = run_here('gpt.py', *args, '--block_size=8', cwd=tmp_path)
    assert r.returncode == 1 and r.stderr == ("error: the text is too short for --block_size=8: its val split "
                                              "has 8 characters\n")
    r = run_here('gpt.py', *args, '--block_size=7', cwd=tmp_path) # a block and its next character: 8
    assert r.returncode == 0, r.stderr
