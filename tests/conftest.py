import os
import sys

import matplotlib
import numpy as np
import pytest
from hypothesis import settings

import attnlib as al

# Figures are drawn off screen, whatever the machine's display: chosen here, before any test
# module imports pyplot.
matplotlib.use("Agg")

# Property tests: enough examples to find edge cases, few enough for a 3-minute suite on 2 cores.
settings.register_profile("book", max_examples=60, deadline=None, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "book"))


@pytest.fixture(autouse=True)
def _close_figures():
    """Every figure a test opened is closed after it, passed or failed, so that figures do not
    pile up across the suite; tests that draw none (pyplot never imported) pay nothing."""
    yield
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close("all")


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


@pytest.fixture(scope="module")
def model():
    """all-MiniLM-L6-v2 in numpy (attnlib.models.minilm), loaded once per process."""
    from attnlib.models import minilm

    return minilm.load_minilm()


@pytest.fixture
def small_stack():
    """A fresh two-layer attention stack of width 8 with two heads, seeded."""
    from attnlib.models import stack

    return stack.random_stack(2, 8, 2, seed=0)


@pytest.fixture(scope="module")
def benchmark_rows():
    """The committed attention benchmark (time, memory, machine), read by their schema."""
    from pathlib import Path

    from attnlib.results import read_benchmark_csv

    results = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
    names = ("attention_time.csv", "attention_memory.csv", "machine.csv")
    return tuple(read_benchmark_csv(results / name) for name in names)
