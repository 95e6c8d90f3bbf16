import os

import numpy as np
import pytest
from hypothesis import settings

import attnlib as al

# Property tests: enough examples to find edge cases, few enough for a 3-minute suite on 2 cores.
settings.register_profile("book", max_examples=60, deadline=None, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "book"))


@pytest.fixture
def rng():
    """A fresh, seeded generator per test: tests are reproducible and independent."""
    return np.random.default_rng(20241129)


@pytest.fixture
def qkv():
    """Small valid arguments of a forward and a backward pass, as a dict a test may change:
    Q (4, 3), K (5, 3), V (5, 2), and the exact core's O, lse with dO = 1."""
    rng = np.random.default_rng(0)
    Q, K, V = rng.standard_normal((4, 3)), rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    O, lse = al.attention_forward(Q, K, V)
    return dict(Q=Q, K=K, V=V, O=O, dO=np.ones_like(O), lse=lse)
