"""The chapters' shared tools: sources without docstrings, tables, timing, memory and fits."""

import math
import time

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib import nbtools as nbt


def _documented(x):
    """A docstring that a listing without docstrings leaves out."""
    return x + 1


def test_source_without_docstring_keeps_signature_and_body():
    text = nbt.source(_documented, docstring=False)
    assert text.splitlines() == ["def _documented(x):", "    return x + 1"]
    assert "A docstring" in nbt.source(_documented)


def test_source_of_a_compiled_kernel_is_its_python():
    import numba

    @numba.njit
    def twice(x):
        """Twice x."""
        return 2 * x

    assert twice(2) == 4
    assert nbt.source(twice, docstring=False).splitlines() == [
        "@numba.njit",
        "def twice(x):",
        "    return 2 * x",
    ]


def test_markdown_table_layout():
    assert nbt.markdown_table(["a", "b"], [(1, 2), ("x", None)]).splitlines() == [
        "| a | b |",
        "|---|---|",
        "| 1 | 2 |",
        "| x | None |",
    ]


def test_rel_err_and_central_difference():
    x = np.array([0.3, -1.2, 2.0])
    grad = nbt.central_difference(lambda v: float(np.sum(np.sin(v))), x)
    assert nbt.rel_err(grad, np.cos(x)) < 1e-8
    x0 = x.copy()
    nbt.central_difference(lambda v: float(v.sum()), x)
    assert np.array_equal(x, x0)  # the input is never perturbed in place


def test_median_time_is_the_median_and_counts_repeats():
    calls = []

    def sleep():
        calls.append(1)
        time.sleep(0.001 * len(calls))

    t = nbt.median_time(sleep, clock="wall", min_repeats=5, min_total=0, max_repeats=5)
    assert len(calls) == 5
    assert 0.0025 < t < 0.05  # the third of 1..5 ms sleeps


def test_traced_peak_bytes_sees_a_numpy_array():
    peak = nbt.traced_peak_bytes(lambda: np.ones(10**6).sum())
    assert 8 * 10**6 <= peak < 9 * 10**6


def test_fits_recover_a_power_law_and_a_crossing():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    assert nbt.loglog_slope(x, 5 * x**1.5) == pytest.approx(1.5, abs=1e-12)
    assert nbt.loglog_crossover(x, x**2, 16 * np.ones(4)) == pytest.approx(4.0)
    assert nbt.loglog_crossover(x, x, 100 * x) is None
    with pytest.raises(AttnInputError, match="positive"):
        nbt.loglog_slope(x, -x)


def test_machine_rates_are_plausible():
    flops, words = nbt.machine_rates(n=128, length=2**16, repeats=2)
    assert 1e7 < flops < 1e13 and 1e6 < words < 1e12
    assert math.isfinite(flops / words)


def test_logit_range_bounds_every_logit_without_overflow():
    from attnlib.logits import logit_range, max_row_norm, round_up_to_grid

    rng = np.random.default_rng(0)
    Q, K = rng.standard_normal((40, 8)), rng.standard_normal((30, 8))
    R = logit_range(Q, K, scale=0.3)
    assert np.abs(0.3 * Q @ K.T).max() <= R
    assert max_row_norm(np.array([[1e200, 1e200]])) == pytest.approx(math.sqrt(2) * 1e200)
    assert max_row_norm(np.array([[3e-310, 4e-310]])) == pytest.approx(5e-310)
    for r in (0.1, 1.0, 3.7, 1e5):
        up = round_up_to_grid(r)
        assert r <= up <= r * 2 ** (1 / 16) * (1 + 1e-15)


def test_listing_collapses_long_sources_and_keeps_the_plain_code():
    short = nbt.listing(_documented)
    assert repr(short) == nbt.source(_documented).rstrip("\n")
    assert short._repr_html_().startswith('<div class="book-listing">')
    long = nbt.listing(nbt.source)
    assert nbt.source(nbt.source).count("\n") > nbt.COLLAPSE_LINES
    html = long._repr_html_()
    assert html.startswith('<details class="book-listing"><summary>attnlib.nbtools.source:')
    assert "The source code of fn" in html and "(" in html
    assert nbt.listing(_documented, summary="the helper").summary == "the helper"
