"""scripts/adopt.py, the scripts' --code: the GPT a learner wrote along with the video, under names of its own,
trained and saved as a state_dict, runs in our tools and gives its own logits; one that isn't the lecture's
is named in one line."""
import importlib.util
import os

import pytest
import torch

from conftest import ROOT, run_here

import sample

SAMPLE, EXPLORE = os.path.join('scripts', 'sample.py'), os.path.join('scripts', 'explore.py')
LEARNER = os.path.join(ROOT, 'tests', 'fixtures', 'learners', 'my_gpt.py')


def learners_module(path=LEARNER):
    spec = importlib.util.spec_from_file_location('learners_gpt', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def trained(module, path, steps=5):
    """The learner's model, trained a few steps on Tiny Shakespeare's characters (random ones: no data
    needed), its state_dict saved as their script saves it."""
    torch.manual_seed(1)
    model = module.ShakespeareGPT(len(sample.DATA_CHARS))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-2)
    for _ in range(steps):
        x = torch.randint(65, (4, module.config['context_length'] + 1))
        _, loss = model(x[:, :-1], x[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.save(model.state_dict(), path)
    return model.eval()


FUSED = [ # one Linear for a head's query, key and value, then the video's scale, C**-0.5 with C = n_embd
    ("        self.v = nn.Linear(config['emb_size'], head_dim, bias=False) # made in another order than the lecture's\n"
     "        self.k = nn.Linear(config['emb_size'], head_dim, bias=False)\n"
     "        self.q = nn.Linear(config['emb_size'], head_dim, bias=False)\n",
     "        self.qkv = nn.Linear(config['emb_size'], 3 * head_dim, bias=False)\n"),
    ("        att = (self.q(x) @ self.k(x).transpose(-2, -1)) / (self.k.out_features ** 0.5)\n",
     "        q, k, v = self.qkv(x).chunk(3, dim=-1)\n        att = (q @ k.transpose(-2, -1)) * x.shape[-1] ** -0.5\n"),
    ("        return self.drop(att) @ self.v(x)", "        return self.drop(att) @ v")]
BATCHED = [ # EX1: every head's query, key and value in one Linear, the heads a batch dimension, the video's scale
    ("        self.attn_heads = nn.ModuleList(SelfAttention(size) for _ in range(config['num_heads']))\n",
     "        self.c_attn = nn.Linear(config['emb_size'], 3 * config['emb_size'], bias=False)\n"
     "        self.register_buffer('tril', torch.tril(torch.ones(config['context_length'], config['context_length'])))\n"),
    ("        return self.drop(self.out(torch.cat([head(x) for head in self.attn_heads], dim=-1)))",
     "        B, T, C = x.shape\n"
     "        q, k, v = (t.view(B, T, config['num_heads'], -1).transpose(1, 2) for t in self.c_attn(x).split(C, dim=2))\n"
     "        att = (q @ k.transpose(-2, -1)) * C ** -0.5\n"
     "        att = att.masked_fill(self.tril[:T, :T] == 0, float('-inf')).softmax(dim=-1)\n"
     "        return self.drop(self.out((att @ v).transpose(1, 2).reshape(B, T, C)))")]
EDITS = {'the video scale': ('/ (self.k.out_features ** 0.5)', '* x.shape[-1] ** -0.5'),
         'one fused q, k, v and the video scale': FUSED, 'every head in one Linear and the video scale': BATCHED,
         'k @ q^T (key and query trade names)': ('(self.q(x) @ self.k(x).transpose(-2, -1))',
                                                 '(self.k(x) @ self.q(x).transpose(-2, -1))'),
         'a generate that never crops': ("self(tokens[:, -config['context_length']:])", 'self(tokens)'),
         'a position table that is a Parameter of (1, T, C)': [
             ("nn.Embedding(config['context_length'], config['emb_size'])",
              "nn.Parameter(0.02 * torch.randn(1, config['context_length'], config['emb_size']))"),
             ("self.positions(torch.arange(tokens.shape[1]))", "self.positions[:, :tokens.shape[1]]")]}


@pytest.mark.parametrize('edit', [None, *EDITS])
def test_a_learners_own_gpt_gives_its_own_logits_in_our_tools(edit, tmp_path):
    """my_gpt.py: other names (SelfAttention, MultiHead, Thinking, ...), its settings in a dict, its key,
    query and value made in another order, ln2 made before ln1; with the video's C**-0.5 scale; and with
    a generate that fails past block_size (ours samples); its position table a Parameter, not an Embedding."""
    code = LEARNER
    if edit:
        code = tmp_path / 'my_gpt.py'
        text = open(LEARNER).read()
        for old, new in [EDITS[edit]] if isinstance(EDITS[edit], tuple) else EDITS[edit]:
            assert old in text
            text = text.replace(old, new)
        code.write_text(text)
        assert code.read_text() != open(LEARNER).read()
    theirs = trained(learners_module(code), tmp_path / 'mine.pt')
    model, ckpt = sample.load_model(str(tmp_path / 'mine.pt'), 'cpu', code=str(code))
    assert ckpt['config'] == dict(n_embd=48, n_head=3, n_layer=2, block_size=24)
    idx = torch.randint(65, (3, 24), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(model(idx)[0], theirs(idx)[0], rtol=1e-5, atol=1e-5)
        assert not torch.allclose(model(idx)[0], model(idx.flip(1))[0]) # (not a model that ignores its input)


def test_a_notebooks_model_gives_its_own_logits_in_our_tools(tmp_path):
    """colab_notebook.ipynb: the model its cells build (as check.py builds it), its weights moved off their
    init and saved; read through the notebook, our model gives that model's logits."""
    import check
    from checker.run import logits_of
    notebook = os.path.join(ROOT, 'tests', 'fixtures', 'learners', 'colab_notebook.ipynb')
    theirs = check.checked(notebook).builder.models[-1][0].eval()
    torch.manual_seed(3)
    with torch.no_grad():
        for p in theirs.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    torch.save(theirs.state_dict(), tmp_path / 'nb.pt')
    model, ckpt = sample.load_model(str(tmp_path / 'nb.pt'), 'cpu', code=notebook)
    idx = torch.randint(65, (2, ckpt['config']['block_size']), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        torch.testing.assert_close(model(idx)[0], logits_of(theirs, idx), rtol=1e-5, atol=1e-5)


def test_the_scripts_take_a_learners_checkpoint_with_their_code(tmp_path):
    """Without --code: one line that names it; with it, sample.py, attention_map.py and explore.py run."""
    trained(learners_module(), tmp_path / 'mine.pt')
    ckpt = f'--ckpt={tmp_path / "mine.pt"}'
    r = run_here(SAMPLE, ckpt, '--max_new_tokens=5')
    assert r.returncode == 1 and r.stderr == (
        f"error: {tmp_path / 'mine.pt'} holds a state_dict, but not one of the lecture's GPT of Tiny Shakespeare; "
        "if it is of the GPT you wrote, name your code: --code=my_gpt.py (or .ipynb)\n")
    r = run_here(SAMPLE, ckpt, f'--code={LEARNER}', '--max_new_tokens=30', '--prompt=ROMEO:')
    assert r.returncode == 0 and len(r.stdout) == len('ROMEO:') + 30 + 1, r.stderr
    assert 'read through your ShakespeareGPT in' in r.stderr
    r = run_here(os.path.join('scripts', 'attention_map.py'), ckpt, f'--code={LEARNER}', '--prompt=ROMEO:')
    assert r.returncode == 0 and 'where each of its 2 x 3 heads looks' in r.stdout, r.stderr
    r = run_here(EXPLORE, ckpt, f'--code={LEARNER}', f'--out={tmp_path / "e.html"}')
    assert r.returncode == 0 and (tmp_path / 'e.html').exists(), r.stderr
    (tmp_path / 'text.txt').write_text(sample.DATA_CHARS * 40)
    r = run_here(os.path.join('scripts', 'evaluate.py'), ckpt, f'--code={LEARNER}', f'--input_file={tmp_path / "text.txt"}')
    assert r.returncode == 0 and 'nats per character' in r.stdout, r.stderr


@pytest.mark.parametrize('edit, said', [
    (('nn.ReLU()', 'nn.GELU()'), "your Thinking can't be mapped onto gpt.py's: it computes something else than "
                                 "the lecture's FeedForward: GELU for ReLU (the lecture's is ReLU)\n"),
    ((('nn.ReLU()', 'nn.GELU()'), ('nn.Linear(e, 4 * e)', 'nn.Linear(e, 4 * e, bias=False)')), # the other variant too
     "your Thinking can't be mapped onto gpt.py's: it computes something else than the lecture's FeedForward: GELU for "
     "ReLU (the lecture's is ReLU) (no bias in the feed-forward's Linear layers (the lecture's have one))\n"),
    (("self.v = nn.Linear(config['emb_size'], head_dim, bias=False)", "self.v = nn.Linear(config['emb_size'], head_dim)"),
     "your MultiHead can't be mapped onto gpt.py's: its key, query and value have a bias, and gpt.py's have none "
     "(scripts/check.py says which part, and why)\n"),
    (("att = att.masked_fill(self.mask[:T, :T] == 0, float('-inf')).softmax(dim=-1)", "att = att.softmax(dim=-1)"),
     "your model is not the lecture's, so our tools can't run it: SelfAttention differs: line 30: no causal mask"),
    (('self.norm = nn.LayerNorm', 'self.norm = nn.Identity'), "your model is not the lecture's, so our tools can't "
     "run it: ShakespeareGPT differs: line 80: no final LayerNorm (ln_f) before lm_head\n"),
    (('nn.ReLU(), nn.Linear(4 * e, e),', 'nn.ReLU(), nn.Linear(4 * e, 4 * e), nn.ReLU(), nn.Linear(4 * e, e),'),
     "your Thinking can't be mapped onto gpt.py's: it is not Linear, ReLU, Linear (scripts/check.py says which "
     "part, and why)\n"),
])
def test_a_model_that_is_not_the_lectures_gets_one_line_that_names_the_part(edit, said, tmp_path):
    code = tmp_path / 'my_gpt.py'
    text = open(LEARNER).read()
    for old, new in edit if isinstance(edit[0], tuple) else [edit]:
        text = text.replace(old, new)
    code.write_text(text)
    trained(learners_module(code), tmp_path / 'mine.pt', steps=1)
    r = run_here(SAMPLE, f'--ckpt={tmp_path / "mine.pt"}', f'--code={code}', '--max_new_tokens=5')
    assert r.returncode == 1 and r.stderr.startswith(f'error: {code}: ') and r.stderr.count('\n') == 1, r.stderr
    assert said in r.stderr, r.stderr


def test_a_model_of_an_earlier_stage_says_which(tmp_path):
    """stage4_feed_forward.py, its model saved as built: a stage of the lecture, but not gpt.py's model."""
    import check
    code = os.path.join(ROOT, 'tests', 'fixtures', 'learners', 'stage4_feed_forward.py')
    torch.save(check.checked(code).builder.models[-1][0].state_dict(), tmp_path / 'stage4.pt')
    r = run_here(SAMPLE, f'--ckpt={tmp_path / "stage4.pt"}', f'--code={code}', '--max_new_tokens=5')
    assert r.returncode == 1 and r.stderr == (
        f"error: {code}: your model is that of the lecture at stage 4 (feed-forward, 1:24:25); our tools run the model "
        "of its last stage, gpt.py's (dropout and the scaled-up settings change no weight)\n"), r.stderr


@pytest.mark.parametrize('name', ['dataclass_call.py', 'batched_4d.py'])
def test_a_last_stage_model_of_another_shape_runs_in_our_tools(name, tmp_path):
    """Parts written as dataclasses, the attention's proj a Linear and a Dropout in a module of its own (no
    Linear to copy: its weights are read from what it computes); a model of stage 6, with no dropout (none
    has a weight): each samples through its code."""
    import check
    code = os.path.join(ROOT, 'tests', 'fixtures', 'learners', name)
    model = check.checked(code).builder.models[-1][0]
    torch.save(model.state_dict(), tmp_path / 'theirs.pt')
    r = run_here(SAMPLE, f'--ckpt={tmp_path / "theirs.pt"}', f'--code={code}', '--max_new_tokens=20', '--prompt=ROMEO:')
    assert r.returncode == 0 and len(r.stdout) == len('ROMEO:') + 20 + 1, r.stderr
    assert f"read through your {type(model).__name__} in {code}" in r.stderr


def test_a_model_with_its_positions_in_the_attention_says_it_has_no_position_table(tmp_path):
    """rotary_positions.py, RoPE in each head: check.py finds no mistake, but gpt.py's position table has
    nothing to be filled from: one line that says so, with the variant that stands in for it."""
    import check
    code = os.path.join(ROOT, 'tests', 'fixtures', 'learners', 'rotary_positions.py')
    model = next(p.m for p in check.checked(code).parts if p.label.startswith('RoPEGPT'))
    torch.save(model.state_dict(), tmp_path / 'rope.pt')
    r = run_here(SAMPLE, f'--ckpt={tmp_path / "rope.pt"}', f'--code={code}', '--max_new_tokens=5')
    assert r.returncode == 1 and r.stderr == (
        f"error: {code}: your RoPEGPT can't be mapped onto gpt.py's: it has no position table (positions from the "
        "attention (rotary embeddings, ALiBi), not a position table)\n"), r.stderr


def test_a_mapping_that_does_not_give_the_learners_logits_is_refused(tmp_path, monkeypatch):
    """The last guard: whatever the mapping, the mapped model must compute the learner's logits."""
    import adopt
    trained(learners_module(), tmp_path / 'mine.pt', steps=1)
    linear = adopt.Mapping.linear
    monkeypatch.setattr(adopt.Mapping, 'linear', lambda self, name, layer, C=None: linear(self, name, layer, C) or
                        self.weights[name + '.weight'].mul_(1.01)) # every Linear 1% off
    r = run_here(SAMPLE, f'--ckpt={tmp_path / "mine.pt"}', f'--code={LEARNER}', '--max_new_tokens=5')
    assert r.returncode == 1 and r.stderr == (f"error: {LEARNER}: with your weights mapped onto gpt.py's, its logits "
                                              "differ from your model's: it computes something gpt.py's model does "
                                              "not\n"), r.stderr


def test_a_checkpoint_that_does_not_fit_the_learners_code_says_so(tmp_path):
    trained(learners_module(), tmp_path / 'mine.pt', steps=1)
    code = tmp_path / 'my_gpt.py'
    code.write_text(open(LEARNER).read().replace('emb_size=48', 'emb_size=60'))
    r = run_here(SAMPLE, f'--ckpt={tmp_path / "mine.pt"}', f'--code={code}', '--max_new_tokens=5')
    assert r.returncode == 1 and r.stderr.startswith(f"error: {tmp_path / 'mine.pt'} does not fit the model that "
                                                     f"{code} builds: "), r.stderr
    assert r.stderr.endswith(": size mismatch for embed.weight: copying a param with shape torch.Size([65, 48]) from "
                             "checkpoint, the shape in current model is torch.Size([65, 60]). size mismatch for "
                             "positions.weight: copying a param; were its settings others when you saved it?\n"), r.stderr


@pytest.mark.parametrize('case', ['no such file', 'not code', 'no state_dict'])
def test_bad_code_or_checkpoint_gets_one_line(case, tmp_path):
    trained(learners_module(), tmp_path / 'mine.pt', steps=1)
    code, ckpt = tmp_path / 'my_gpt.py', tmp_path / 'mine.pt'
    code.write_text('this is not Python (\n' if case == 'not code' else open(LEARNER).read())
    if case == 'no state_dict':
        torch.save({'step': 3}, ckpt)
    r = run_here(SAMPLE, f'--ckpt={ckpt}', f'--code={tmp_path / "none.py" if case == "no such file" else code}')
    assert r.returncode in (1, 2) and r.stderr.startswith('error: ') and r.stderr.count('\n') == 1, r.stderr
    assert {'no such file': 'no such file', 'not code': "can't be read as your GPT's code",
            'no state_dict': 'holds no state_dict'}[case] in r.stderr


def test_a_torch_compiled_models_state_dict_reads_as_well(tmp_path):
    """torch.compile(model).state_dict() prefixes every key with _orig_mod.: read as the model's own."""
    theirs = trained(learners_module(), tmp_path / 'mine.pt', steps=1)
    torch.save({'_orig_mod.' + k: v for k, v in theirs.state_dict().items()}, tmp_path / 'compiled.pt')
    model, _ = sample.load_model(str(tmp_path / 'compiled.pt'), 'cpu', code=LEARNER)
    idx = torch.randint(65, (2, 24), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        torch.testing.assert_close(model(idx)[0], theirs(idx)[0], rtol=1e-5, atol=1e-5)
