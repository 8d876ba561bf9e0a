"""Exercise EX4: each feature from a paper changes the model as it says, and the script runs."""
import math
import os
import re
import sys

import torch
import torch.nn as nn

import gpt
from conftest import ROOT, needs_input, run_here

sys.path.insert(0, os.path.join(ROOT, 'scripts'))
import ex4  # noqa: E402


def trained(model, steps=3):
    """A few AdamW steps (with weight decay) on random tokens."""
    optimizer = gpt.make_optimizer(model)
    data = torch.randint(65, (500,))
    for _ in range(steps):
        gpt.train_step(model, optimizer, *gpt.get_batch(data))
    return model


def test_gelu_replaces_every_relu(tiny):
    model = gpt.GPTLanguageModel(65)
    ex4.gelu(model)
    assert not any(isinstance(m, nn.ReLU) for m in model.modules())
    assert sum(isinstance(m, nn.GELU) for m in model.modules()) == gpt.n_layer


def test_tied_shares_one_matrix_that_stays_shared(tiny):
    model = gpt.GPTLanguageModel(65)
    before = sum(p.numel() for p in model.parameters())
    ex4.tied(model)
    assert sum(p.numel() for p in model.parameters()) == before - 65 * gpt.n_embd
    trained(model)
    assert model.lm_head.weight is model.token_embedding_table.weight


def test_residual_init_scales_both_projections_of_every_block(tiny):
    torch.manual_seed(0)
    plain = gpt.GPTLanguageModel(65)
    torch.manual_seed(0)
    scaled = gpt.GPTLanguageModel(65)
    ex4.residual_init(scaled)
    factor = 1 / math.sqrt(2 * gpt.n_layer)
    for a, b in zip(plain.blocks, scaled.blocks):
        torch.testing.assert_close(b.sa.proj.weight, a.sa.proj.weight * factor)
        torch.testing.assert_close(b.ffwd.net[2].weight, a.ffwd.net[2].weight * factor)
        torch.testing.assert_close(b.sa.heads[0].key.weight, a.sa.heads[0].key.weight) # the rest as it was


def test_nope_has_no_position_information_even_after_training(tiny):
    model = gpt.GPTLanguageModel(65)
    ex4.nope(model)
    trained(model)
    assert not model.position_embedding_table.weight.any()


@needs_input
def test_the_script_compares_features_with_the_baseline():
    r = run_here(os.path.join('scripts', 'ex4.py'), '--features', 'baseline', 'nope', '--seeds', '1',
                 '--max_iters', '4')
    assert r.returncode == 0, r.stderr
    assert re.search(r'^nope seed 1 step 4: train loss [\d.]+, val loss [\d.]+ \| \d+s$', r.stdout, re.M)
    base = re.search(r'^\| baseline \| .* \| 353,537 \| ([\d.]+) \| \1 \|  \|$', r.stdout, re.M)
    nope = re.search(r'^\| nope \| .* \| 347,393 \| [\d.]+ \| [\d.]+ \| [+-][\d.]+ \|$', r.stdout, re.M)
    assert base and nope, r.stdout


def test_a_seed_torch_cannot_take_is_one_line():
    r = run_here(os.path.join('scripts', 'ex4.py'), '--seeds', '1', str(2**64))
    assert r.returncode == 2 and r.stderr == (f"error: --seeds must be from -2**63 to 2**64 - 1, got {2**64} "
                                              "(see --help)\n")


def test_the_script_rejects_an_unknown_feature_in_one_line():
    r = run_here(os.path.join('scripts', 'ex4.py'), '--features', 'relu')
    assert r.returncode == 2 and r.stderr.startswith("error: argument --features: invalid choice: 'relu'")
    assert r.stderr.count('\n') == 1
