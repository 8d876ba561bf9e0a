import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
INPUT = os.path.join(ROOT, 'input.txt')

import gpt  # noqa: E402

# a model small enough to build and train in milliseconds
TINY = dict(n_embd=32, n_head=4, n_layer=2, block_size=16, batch_size=4, dropout=0.0,
            fast_attention=False, device='cpu')


@pytest.fixture
def tiny(monkeypatch):
    """gpt's classes read its top-level hyperparameters: shrink them for one test."""
    for key, value in TINY.items():
        monkeypatch.setattr(gpt, key, value)
    return gpt


needs_input = pytest.mark.skipif(not os.path.exists(INPUT),
                                 reason="input.txt is absent (.ci/run copies it in)")
