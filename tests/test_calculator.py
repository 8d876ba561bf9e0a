"""The calculator after EX2: its problems, their worked answers, the held-out split, a tiny run."""
import io
import math
import os
import random
import re
import sys
import time

import pytest
import torch

import gpt
from conftest import ROOT, run_here

sys.path.insert(0, os.path.join(ROOT, 'scripts'))
import addition  # noqa: E402
import calculator  # noqa: E402


def written(problems, op, a, b):
    return calculator.decode(problems.encode(op, torch.tensor([a]), torch.tensor([b]))[0].tolist())


def test_problems_are_written_as_the_docstring_says():
    p = calculator.Problems(2)
    assert [written(p, op, a, b) for op, a, b in [('+', 42, 57), ('-', 42, 57), ('*', 42, 57), ('/', 57, 42)]] \
        == ['42+57=990$', '42-57=-51$', '42*57=4932$', '57/42=01r15$']
    cot = calculator.Problems(2, cot=True)
    assert written(cot, '*', 42, 57) == '42*57=492+0012=4932$' # 42*7 = 294, 42*5*10 = 2100
    assert written(cot, '/', 27, 14) == '27/14=2000000200+020,7202820999-131=01r13$' # 27 - 2*14 < 0: 1 r 13
    assert written(cot, '/', 57, 42) == '57/42=5000000500+050,7501240510+151=01r15$' # 57 - 1*42 = 15
    assert written(cot, '+', 42, 57) == '42+57=990$' # no work to show


def number(digits, reverse):
    return int(digits[::-1] if reverse else digits)


@pytest.mark.parametrize('digits', [1, 2, 3, 4])
def test_every_answer_and_every_step_of_the_work_is_right(digits):
    """Read each written problem back, as a person would, and check it with Python's integers."""
    rng = random.Random(digits)
    p = calculator.Problems(digits, cot=True, seed=digits)
    for _ in range(200):
        a, b = rng.randrange(10 ** digits), rng.randrange(1, 10 ** digits)
        for op in calculator.OPS:
            text = written(p, op, a, b)
            assert len(text) == p.length(op) and text.endswith('$') and text.count('$') == 1
            prompt, *work, answer = text[:-1].split('=')
            assert prompt == f'{a:0{digits}d}{op}{b:0{digits}d}'
            if op == '+':
                assert number(answer, True) == a + b and len(answer) == digits + 1
            elif op == '-':
                assert answer[0] == '+-'[a < b] and number(answer[1:], True) == abs(a - b)
            elif op == '*':
                partials = work[0].split('+')
                assert [number(x, True) for x in partials] == [a * (b // 10 ** j % 10) * 10 ** j
                                                               for j in range(digits)]
                assert number(answer, True) == a * b == sum(number(x, True) for x in partials)
            else:
                steps, remainder = work[0].split(','), 0
                assert len(steps) == digits
                for i, step in enumerate(steps): # long division, one digit of a at a time
                    m = re.fullmatch(rf'(\d{{{digits + 1}}})(\d)(\d{{{digits + 1}}})(\d{{{digits + 1}}})([-+])(\d)(\d{{{digits}}})', step)
                    current, estimate, product, difference, borrow, q, rest = m.groups()
                    current, estimate, q = number(current, True), int(estimate), int(q)
                    assert current == 10 * remainder + int(f'{a:0{digits}d}'[i]) # brought down
                    assert estimate == min(9, int(current / b + 0.5)) and number(product, True) == estimate * b
                    assert number(difference, True) == (current - estimate * b) % 10 ** (digits + 1)
                    assert borrow == '+-'[current < estimate * b] and q == estimate - (borrow == '-')
                    remainder = number(rest, True)
                    assert q * b <= current < (q + 1) * b and remainder == current - q * b
                assert answer == f'{a // b:0{digits}d}r{a % b:0{digits}d}'
                assert ''.join(str(int(step[3 * digits + 5])) for step in steps) == answer.split('r')[0]


@pytest.mark.parametrize('digits', [1, 2, 3])
def test_the_other_estimate_in_training_still_divides_right_and_is_not_learned(digits):
    """--other 1: every step writes the estimate that rounding did not choose (c // b, or one more),
    the work after it still ends at the right answer, and the estimate's own target is -1."""
    p = calculator.Problems(digits, cot=True, seed=digits, other=1.0, held_out=False)
    x, y = p.batch(400)[-1]
    start = p.prompt_length - 1 # y[t] is the token after x[t]
    assert ((y[:, start:] == -1).sum(1) == digits).all() # one masked target per step, no more
    for xs, ys in zip(x.tolist(), y.tolist()):
        text = calculator.decode(xs) + '$'
        prompt, work, answer = text[:-1].split('=')
        a, b = map(int, prompt.split('/'))
        assert answer == f'{a // b:0{digits}d}r{a % b:0{digits}d}'
        remainder, at = 0, start
        for i, step in enumerate(work.split(',')):
            current = 10 * remainder + int(f'{a:0{digits}d}'[i])
            estimate, q = int(step[digits + 1]), int(step[3 * digits + 5])
            rounded = min(9, int(current / b + 0.5))
            assert estimate in (current // b, current // b + 1) and (estimate != rounded or current // b == 9)
            assert q == current // b and step[3 * digits + 4] == '+-'[estimate > q]
            assert ys[at + digits + 1] == -1 and ys[at + digits] >= 0 and ys[at + digits + 2] >= 0
            remainder, at = current - q * b, at + len(step) + 1


class Copier:
    """A stand-in model that writes out a fixed set of sequences, whatever it is given."""

    def __init__(self, target):
        self.target = target

    def __call__(self, idx):
        B, T = idx.shape
        return torch.nn.functional.one_hot(self.target[:B, :T + 1][:, 1:], len(calculator.VOCAB)).float(), None

    def eval(self):
        pass

    def train(self):
        pass


def test_only_the_answer_is_scored_not_the_work():
    p = calculator.Problems(2, cot=True)
    seq = p.held_out_tensors('*')[:10]
    start = p.answer_start('*')
    assert calculator.decode(seq[0, start:].tolist()) == calculator.decode(seq[0].tolist()).split('=')[-1]
    score = lambda target, **kw: addition.exact_match(Copier(target), seq, p.prompt_length, 'cpu', **kw)
    assert score(seq) == score(seq, scored_from=start) == 1.0
    wrong_work = seq.clone()
    wrong_work[:, p.prompt_length] = (wrong_work[:, p.prompt_length] + 1) % 10 # a partial product's digit
    assert score(wrong_work) == 0.0 and score(wrong_work, scored_from=start) == 1.0
    wrong_answer = seq.clone()
    wrong_answer[:5, start] = (wrong_answer[:5, start] + 1) % 10
    assert score(wrong_answer, scored_from=start) == 0.5


def test_training_problems_are_masked_and_never_held_out():
    p = calculator.Problems(2, cot=True) # 10,000 problems per operation, 1,000 of each held out
    seen = {op: set() for op in calculator.OPS}
    for _ in range(50):
        for op, (x, y) in zip(calculator.OPS, p.batch(256)):
            assert x.shape == y.shape and x.shape[1] == p.length(op) - 1
            assert (y[:, :p.prompt_length - 1] == -1).all() and (y[:, p.prompt_length - 1:] >= 0).all()
            assert (x[:, 2] == calculator.TOKEN[op]).all()
            seen[op].update(zip((x[:, 0] * 10 + x[:, 1]).tolist(), (x[:, 3] * 10 + x[:, 4]).tolist()))
    for op in calculator.OPS:
        assert len(set(p.held_out[op])) == 1000 and not seen[op] & set(p.held_out[op])
        assert len(seen[op]) > 1000 # the generator does cover the rest
    assert min(b for _, b in p.held_out['/']) >= 1 and min(b for _, b in seen['/']) == 1 # never by 0


def test_the_held_out_problems_of_a_seed_are_those_the_readme_was_scored_on():
    """Same seed, same numbers: seed 1337's held-out problems, drawn from torch's generator (the same
    integers on any CPU), and none of the training's draws or settings changes them."""
    firsts = {'+': (80, 8), '-': (92, 24), '*': (68, 66), '/': (32, 22)}
    for p in (calculator.Problems(2), calculator.Problems(2, cot=True, tight=0.9, short=0.9, small=0.9)):
        assert {op: p.held_out[op][0] for op in calculator.OPS} == firsts
    assert calculator.Problems(2, seed=1).held_out['+'][0] != firsts['+']


@pytest.mark.trains
def test_a_tiny_run_learns_to_add_and_subtract(capsys, tmp_path):
    # --short 1: every operand 1 or 2 digits long at random; this tiny model learns short ones first
    scores = calculator.main(['--ops', '+-', '--max_steps', '350', '--eval_every', '350', '--lr', '3e-3', '--short', '1',
                              '--n_layer', '2', '--n_embd', '64', '--batch_size', '128', f'--out={tmp_path / "c.pt"}'])
    # a guess gets 0.1% of + and 0.5% of - right; over seeds 1337, 1 and 2 under ATEN_CPU_CAPABILITY avx512,
    # avx2 and default this run got + 62% to 92% and - 10% to 69%: at this size - is on its way, not there
    assert set(scores) == {'+', '-'} and min(scores.values()) >= 0.05, scores
    out = capsys.readouterr().out
    assert re.search(r'held-out exact match \+ \d+\.\d%, - \d+\.\d%', out)
    for op, count in re.findall(r'^  ([+-]) wrong on (\d+) of 1000, the first', out, re.M):
        assert abs(int(count) / 1000 - (1 - scores[op])) < 1e-9 # as many as the score says
    mistakes = re.findall(r'^    (\d\d)([+-])(\d\d)=(\S*), not (\S+)$', out, re.M)
    assert bool(mistakes) == (min(scores.values()) < 1), out # each shown is wrong, the right answer beside it
    for a, op, b, answer, right in mistakes:
        assert answer != right + '$'
        a, b = int(a), int(b)
        assert right == (f'{a + b:03d}'[::-1] if op == '+' else '+-'[a < b] + f'{abs(a - b):02d}'[::-1])


@pytest.mark.parametrize('ops', ['', 'x', '++', '+ -'])
def test_operations_other_than_the_four_are_one_line(ops, capsys):
    with pytest.raises(SystemExit) as e:
        calculator.parse_args(['--ops', ops])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith('error: --ops takes each of + - * / at most once') and err.count('\n') == 1


def test_a_batch_is_never_empty_even_when_a_draw_is_all_held_out():
    """With 1 digit, 20 problems of each operation are held out: a draw of one is held out about
    1 time in 5. Such a draw is drawn again, so that every operation has a problem in every batch."""
    p = calculator.Problems(1)
    assert {op: len(p.held_out[op]) for op in calculator.OPS} == dict.fromkeys(calculator.OPS, 20)
    for _ in range(200):
        batches = p.batch(4)
        assert [len(x) for x, _ in batches] == [1, 1, 1, 1]


def test_the_loss_printed_is_the_mean_over_the_operations_near_ln_18_at_init(capsys, tmp_path):
    """Each operation's batch has a loss of its own; the step's loss, printed, is their mean: after one
    step from init, about ln 18 (the vocabulary), not four times it. The hint at the end asks a problem
    the first line showed; the time in all is the run's; the model reads the longest problem less its last."""
    started = time.time()
    calculator.main(['--digits', '1', '--max_steps', '1', '--eval_every', '1', '--n_layer', '1', '--n_embd', '32',
                     '--batch_size', '16', f'--out={tmp_path / "c.pt"}'])
    seconds, out = time.time() - started, capsys.readouterr().out
    assert 0 <= float(re.search(r'^done after 1 steps, ([\d.]+) s in all: ', out, re.M)[1]) <= seconds + 0.05
    longest = max(map(calculator.Problems(1, cot=True, held_out=False).length, calculator.OPS)) # its last token: no input
    assert torch.load(tmp_path / 'c.pt', weights_only=True)['config']['block_size'] == longest - 1
    loss = float(re.search(r'^step 1: loss ([\d.]+), held-out exact match', out, re.M)[1])
    assert math.log(18) - 1 < loss < math.log(18) + 1, loss
    # the closing hint asks the problem the first line shows as the last operation's example
    example = re.search(r'; e\.g\. .*, (\d+)([-+*/])(\d+)=\S+$', out, re.M)
    hint = re.search(r' --ask "(\d+)([-+*/])(\d+)"$', out, re.M)
    assert example[2] == hint[2] == '/' and int(example[1]) == int(hint[1]) and int(example[3]) == int(hint[3]), out
    assert f'\n  {example[1]}/{example[3]}=' in out # and, before its mistakes, that problem as the model wrote it
    shown = re.findall(r'^  . wrong on (\d+) of 20, the first (\d+):\n((?:    .*\n)*)', out, re.M)
    assert len(shown) == 4 and all(len(lines.splitlines()) == int(k) == min(3, int(n)) for n, k, lines in shown), out


@pytest.fixture(scope='module')
def saved(tmp_path_factory):
    """A model of all four operations on 1-digit numbers, trained a few steps and saved: it is
    often wrong, which the answers must say."""
    path = tmp_path_factory.mktemp('calc') / 'calculator.pt'
    settings = {k: getattr(gpt, k) for k in gpt.config_keys}
    calculator.main(['--digits', '1', '--max_steps', '40', '--eval_every', '40', '--n_layer', '1',
                     '--n_embd', '32', '--batch_size', '64', f'--out={path}'])
    vars(gpt).update(settings)
    return path


def test_a_saved_model_answers_with_its_work_and_marks_what_is_wrong(saved, capsys, monkeypatch):
    capsys.readouterr()
    wrong = calculator.main(['--ask', '9/4', '3*7', '8 - 9', '4+5', f'--out={saved}'])
    out = capsys.readouterr().out
    answers = re.findall(r'^(\d)([-+*/])(\d) = (.*?)(?:   <- WRONG: (.*))?$', out, re.M)
    assert [(a, op, b) for a, op, b, _, _ in answers] == [('9', '/', '4'), ('3', '*', '7'), ('8', '-', '9'),
                                                         ('4', '+', '5')]
    right = {'/': '2 r 1', '*': '21', '-': '-1', '+': '9'}
    for a, op, b, given, correction in answers: # each answer is Python's, or marked with Python's
        assert (given == right[op] and not correction) or correction == right[op], out
    assert wrong == sum(bool(c) for *_, c in answers)
    monkeypatch.setattr(sys, 'stdin', io.StringIO('4+5\n\n8 - 9\n')) # one a line, blank lines skipped
    calculator.main(['--ask', f'--out={saved}'])
    assert re.findall(r'^(\d[-+]\d) = ', capsys.readouterr().out, re.M) == ['4+5', '8-9']


def test_a_problem_it_cannot_take_is_one_line_and_the_others_are_answered(saved, capsys, tmp_path):
    calculator.main(['--ask', 'x+1', '10+3', '5/0', '7', '4+5', f'--out={saved}'])
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == ['x+1: cannot answer: it is not a number, an operation (+ - * /) and a number',
                       '10+3: cannot answer: the model was trained on numbers of at most 1 digits',
                       '5/0: cannot answer: division by zero',
                       '7: cannot answer: it is not a number, an operation (+ - * /) and a number']
    assert out[-1].startswith('4+5 = ')
    ckpt = torch.load(saved, weights_only=True) # the same model, as one trained on + and - alone
    torch.save(dict(ckpt, ops='+-'), tmp_path / 'plus_minus.pt')
    calculator.main(['--ask', '3*4', '3-4', f'--out={tmp_path / "plus_minus.pt"}'])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == '3*4: cannot answer: the model does +, -, not *' and out[-1].startswith('3-4 = '), out


@pytest.mark.parametrize('make, words', [
    (lambda path: None, 'no model at'),
    (lambda path: path.write_bytes(b'not a model'), 'is not a readable model of calculator.py'),
    (lambda path: torch.save({'x': 1}, path), 'is not a model of calculator.py'),
])
def test_asking_without_a_model_is_one_line(tmp_path, make, words):
    make(tmp_path / 'c.pt')
    r = run_here('scripts/calculator.py', '--ask', '1+2', f'--out={tmp_path / "c.pt"}')
    assert r.returncode == 1 and r.stderr.startswith('error: ') and words in r.stderr and \
        r.stderr.count('\n') == 1, r.stderr


def test_a_model_file_that_holds_more_than_calculator_py_writes_is_still_read(saved, capsys, tmp_path):
    ckpt = torch.load(saved, weights_only=True)
    torch.save(dict(ckpt, note='trained on a Tuesday'), tmp_path / 'c.pt')
    capsys.readouterr()
    calculator.main(['--ask', '4+5', f'--out={tmp_path / "c.pt"}'])
    assert capsys.readouterr().out.startswith('4+5 = ')


class Calls:
    """Pickled as a call of os.mkdir: a file that holds it makes a folder when it is unpickled."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return os.mkdir, (self.path,)


def test_a_model_file_that_would_run_code_is_refused_and_runs_nothing(saved, tmp_path):
    """--ask reads only tensors and plain data (weights_only): a model file from elsewhere whose pickle
    calls a function gets one line, and the call is never made."""
    ckpt = torch.load(saved, weights_only=True)
    ckpt['note'] = Calls(tmp_path / 'ran')
    torch.save(ckpt, tmp_path / 'c.pt')
    r = run_here('scripts/calculator.py', '--ask', '1+2', f'--out={tmp_path / "c.pt"}')
    assert r.returncode == 1 and 'is not a readable model of calculator.py' in r.stderr, r.stderr
    assert r.stderr.count('\n') == 1 and not (tmp_path / 'ran').exists()


def test_out_that_is_a_folder_is_refused_before_training(tmp_path):
    r = run_here('scripts/calculator.py', f'--out={tmp_path}')
    assert r.returncode == 2 and f'--out {tmp_path} is a folder' in r.stderr


def test_a_model_that_writes_the_right_work_gets_every_answer_right(saved, capsys, monkeypatch):
    """A stand-in for the model's greedy decoding that writes each problem as it was trained:
    the work, then the answer, read back in reading order, with nothing marked wrong."""
    problems = calculator.Problems(1, cot=True, held_out=False)
    def perfect(model, idx, new_tokens):
        a, op, b = calculator.decode(idx[0, :3].tolist())
        return problems.encode(op, torch.tensor([int(a)]), torch.tensor([int(b)]))[:, :idx.shape[1] + new_tokens]
    monkeypatch.setattr(addition, 'greedy', perfect)
    assert calculator.main(['--ask', '9/4', '3*7', '8-9', '4+5', '0/7', f'--out={saved}']) == 0
    out = capsys.readouterr().out
    assert re.sub(r'(?m)^  work: .*\n', '', out) == '9/4 = 2 r 1\n3*7 = 21\n8-9 = -1\n4+5 = 9\n0/7 = 0 r 0\n'
    # the work as written (least significant digit first): 3*7's partial product, 9/4's long division
    assert '  work: 12\n3*7 = 21\n' in out and '  work: 9028010+21\n9/4 = 2 r 1\n' in out


def test_shares_split_each_batch_between_the_operations():
    """Problems splits each batch equally by default; --shares 1 1 1 2, the script's default for the four
    operations: two fifths division. (Without held-out problems to leave out, each gets exactly its share.)"""
    assert calculator.parse_args([]).shares == [1, 1, 1, 2] and calculator.parse_args(['--ops', '/+']).shares == [2, 1]
    for shares in (['1', '1', '1', '0'], ['1', '1', '1', '-1'], ['1', '1']):
        with pytest.raises(SystemExit) as e:
            calculator.parse_args(['--shares', *shares])
        assert e.value.code == 2
    for shares, sizes in [(None, [64, 64, 64, 64]), ([1, 1, 1, 2], [51, 51, 52, 102])]:
        problems = calculator.Problems(1, shares=shares, held_out=False)
        assert [len(x) for x, _ in problems.batch(256)] == sizes


def test_tight_draws_the_close_comparisons_of_minus_and_divide():
    """--tight 0.5: half of the training problems of - have b within 1 of a, half of those of / have a
    within 1 of its nearest multiple of b; + and * are drawn as before."""
    problems = calculator.Problems(2, tight=0.5, held_out=False)
    a, b = problems.operands('-', 4000, problems.gen)
    assert 0.45 < ((a - b).abs() <= 1).float().mean() < 0.6 # a few of the rest are close by chance
    plain = calculator.Problems(2, held_out=False)
    near = lambda a, b: ((a - torch.round(a / b) * b).abs() <= 1).float().mean() # small divisors: often
    a, b = problems.operands('/', 4000, problems.gen)
    assert near(a, b) > near(*plain.operands('/', 4000, plain.gen)) + 0.15 and (b >= 1).all() and (a <= 99).all()
    assert all(torch.equal(x, y) for x, y in zip(plain.operands('+', 50, torch.Generator().manual_seed(0)),
                                                 problems.operands('+', 50, torch.Generator().manual_seed(0))))
    close = calculator.Problems(2, tight=1.0, held_out=False) # every one drawn close, over the whole of 0 to 99
    a, b = close.operands('-', 4000, close.gen)
    assert ((a - b).abs() <= 1).all() and b.min() == 0 and b.max() == 99 and a.max() <= 99
    a, b = close.operands('/', 4000, close.gen)
    near = ((a - torch.round(a / b) * b).abs() <= 1) | (a == 99) # (past 99, clamped to it)
    assert near.all() and a.min() == 0 and a.max() == 99 and b.min() >= 1


def test_short_mixes_in_operands_of_fewer_digits_in_training_only():
    """--short 0.5: half of the training problems have operands of 1 to n digits at random (a 2-digit
    operand is then below 10 about 55% of the time, not 10%); the held-out ones stay uniform."""
    for short, low, high in [(0.0, 0.07, 0.13), (0.5, 0.28, 0.37)]:
        problems = calculator.Problems(2, short=short)
        a, b = problems.operands('+', 4000, problems.gen)
        assert low < (a < 10).float().mean() < high and low < (b < 10).float().mean() < high
        held = torch.tensor(problems.held_out['+'])
        assert 0.07 < (held < 10).float().mean() < 0.13


def test_small_draws_one_digit_divisors_for_training_divisions_only():
    """--small 0.5: half of the training divisions have a divisor of 1 to 9 (against 9% of uniform 2-digit
    ones), each about as often; the other operations and the held-out divisions are drawn as before."""
    problems, plain = calculator.Problems(2, small=0.5), calculator.Problems(2)
    a, b = problems.operands('/', 9000, problems.gen)
    assert 0.5 < (b < 10).float().mean() < 0.6 and (b >= 1).all()
    assert 0.045 < (b == 1).float().mean() < 0.075 and 0.045 < (b == 9).float().mean() < 0.075
    assert problems.held_out == plain.held_out
    every = calculator.Problems(2, small=1.0, held_out=False)
    assert every.operands('/', 2000, every.gen)[1].unique().tolist() == list(range(1, 10))
    assert all(torch.equal(x, y) for x, y in zip(plain.operands('*', 50, torch.Generator().manual_seed(0)),
                                                 problems.operands('*', 50, torch.Generator().manual_seed(0))))


def test_the_work_is_on_by_default_and_no_cot_turns_it_off():
    assert calculator.parse_args([]).cot and not calculator.parse_args(['--no-cot']).cot


def test_a_batch_must_hold_one_problem_of_each_operation(capsys):
    assert calculator.parse_args(['--batch_size', '4']).batch_size == 4 # one of each of + - * /
    with pytest.raises(SystemExit) as e:
        calculator.parse_args(['--batch_size', '3'])
    assert e.value.code == 2 and capsys.readouterr().err.startswith(
        'error: --batch_size must be at least one problem per operation, got 3')


def test_the_default_steps_are_those_help_gives():
    """--help: 'default: 1000 for 1 digit, 4000 for 2, 2200 x (digits - 1) beyond'; and the rate that
    scripts/README's runs were trained at, 1e-3."""
    assert calculator.parse_args([]).lr == 1e-3
    text = ' '.join(run_here('scripts/calculator.py', '--help').stdout.split())
    first, second, each = map(int, re.search(r'--max_steps MAX_STEPS default: (\d+) for 1 digit, (\d+) for 2, '
                                             r'(\d+) x \(digits - 1\) beyond', text).groups())
    assert [calculator.parse_args(['--digits', str(d)]).max_steps for d in (1, 2, 3, 4)] == \
        [first, second, 2 * each, 3 * each]


def test_two_digits_spend_a_570_s_budget_on_2_layers_by_default_and_max_steps_alone_gives_a_run_that_repeats():
    default = calculator.parse_args([])
    assert (default.max_seconds, default.decay_by_clock, default.n_layer) == (570, True, 2)
    assert calculator.parse_args(['--digits', '3']).n_layer == 3 == calculator.parse_args(['--n_layer', '3']).n_layer
    for argv in (['--max_steps', '1750'], ['--digits', '3'], ['--digits', '1']):
        args = calculator.parse_args(argv)
        assert args.max_seconds is None and not args.decay_by_clock, argv
    given = calculator.parse_args(['--max_seconds', '300'])
    assert (given.max_seconds, given.decay_by_clock, given.max_steps) == (300, False, 4000)
