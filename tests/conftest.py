import os

import numpy as np
import pytest
from hypothesis import settings

# Property tests: enough examples to find edge cases, few enough for a 3-minute suite on 2 cores.
settings.register_profile("book", max_examples=60, deadline=None, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "book"))


@pytest.fixture
def rng():
    """A fresh, seeded generator per test: tests are reproducible and independent."""
    return np.random.default_rng(20241129)


def rel_err(a, b) -> float:
    """max|a - b| / max(max|b|, tiny): the relative error used across the suite."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    scale = max(float(np.max(np.abs(b))), 1e-300)
    return float(np.max(np.abs(a - b))) / scale
