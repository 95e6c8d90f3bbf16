"""The chapters' shared tools: sources without docstrings, tables, errors and gradients."""

import math

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


def test_round_up_to_grid_never_rounds_below_R():
    """The rounded logarithm can land a step low (an ulp below R) or high; the result is the
    least grid value >= R, whatever the steps per octave."""
    from attnlib.logits import round_up_to_grid

    for steps in (1, 3, 7, 16, 1000, 12345, 2**20):
        for j in range(-900, 900, 37):
            grid_point = 2.0 ** (j / steps)
            for R in (grid_point, math.nextafter(grid_point, 0), math.nextafter(grid_point, 9)):
                up = round_up_to_grid(R, steps)
                assert up >= R
                # at most one step up, to the rounding of 2 ** (k / steps) itself
                assert up <= R * 2 ** (1 / steps) * (1 + 1e-13)
    assert round_up_to_grid(3.966866922953173, 1000) >= 3.966866922953173
    with pytest.raises(AttnInputError, match=r"^R=1\.79e\+308 rounded up .* beyond the float"):
        round_up_to_grid(1.79e308)
    assert round_up_to_grid(1.7e308) <= np.finfo(np.float64).max


def test_max_row_norm_of_a_broadcast_view_reads_one_row():
    from attnlib.logits import max_row_norm

    assert max_row_norm(np.broadcast_to(np.array([3.0, -4.0]), (10**9, 2))) == 5.0


def test_rel_err_does_not_overflow_in_the_difference():
    assert nbt.rel_err([1e308], [-1e308]) == 2.0
    assert nbt.rel_err(np.float32([3e38, 1.0]), np.float32([-3e38, 1.0])) == 2.0
    assert nbt.rel_err([1e308], [1e-300]) == math.inf  # the true ratio is beyond the floats
    assert nbt.rel_err(np.float32([1.1]), np.float32([1.0])) == float(
        np.float64(np.float32(1.1)) - 1.0
    )  # the difference is taken in float64


def test_markdown_table_escapes_pipes_and_refuses_what_would_break_it():
    text = nbt.markdown_table(["|x|", "y"], [("a|b", 1)])
    assert text.splitlines() == [r"| \|x\| | y |", "|---|---|", r"| a\|b | 1 |"]
    for header, rows, name in [
        ("ab", [(1, 2)], "header"),
        (["a"], "x", "rows"),
        (["a"], [np.array(1.0)], "rows[0]"),
        (["a"], [["x\ny"]], "rows[0][0]"),
        (["a\r"], [], "header[0]"),
        (["a"], 5, "rows"),
    ]:
        with pytest.raises(AttnInputError, match=rf"^{re_escape(name)} must be"):
            nbt.markdown_table(header, rows)
    # rows may be any iterable of sequences, a generator included
    assert nbt.markdown_table(["n"], ((k,) for k in range(2))).endswith("| 1 |")


def re_escape(name: str) -> str:
    import re

    return re.escape(name)


def test_central_difference_refuses_what_would_give_a_wrong_gradient():
    assert nbt.central_difference(lambda x: float(x @ x), [1.0, 2.0]) == pytest.approx([2, 4])
    assert nbt.central_difference(lambda x: np.array((x**2).sum()), 3.0) == pytest.approx(6)
    for f, x, h, name in [
        (None, [1.0], 1e-6, "f"),
        (lambda x: math.nan, [1.0], 1e-6, "f"),
        (lambda x: x, [1.0, 2.0], 1e-6, "f"),
        (np.sum, [1e20], 1e-6, "h"),  # x + h == x: the gradient came out 0
        (np.sum, [1e308], 1e308, "h"),  # x + h overflows
        (lambda x: 1.7e308 * float(np.sign(x[0])), [0.0], 1e-6, "f's values"),
    ]:
        with pytest.raises(AttnInputError, match=rf"{re_escape(name)}\b"):
            nbt.central_difference(f, x, h)


def test_claims_about_numbers_refuse_what_is_not_a_measurement():
    with pytest.raises(AssertionError, match="nan is not below"):
        nbt.below(math.nan, 1e-13)  # the claim is false, not the argument
    with pytest.raises(AttnInputError, match=r"^value must be a real number"):
        nbt.below(10**400, 1e-13)
    for bad in (math.nan, math.inf):
        with pytest.raises(AttnInputError, match=r"^value must be a finite real number"):
            nbt.error_text(bad)
    with pytest.raises(AttnInputError, match=r"^value rounded to 3 significant digits overflows"):
        nbt.significant(1.7976931348623157e308)
    assert nbt.significant(1.7e308, 3) == 1.7e308
    with pytest.raises(AttnInputError, match=r"^digits must be an integer <= 15"):
        nbt.significant(1.0, np.int64(16))


def test_source_flags_are_bools_and_one_line_docstrings_stay():
    with pytest.raises(AttnInputError, match=r"^docstring must be a bool"):
        nbt.source(_documented, docstring="no")
    assert nbt.source(_one_line, docstring=False) == nbt.source(_one_line)


# fmt: off
def _one_line(x):
    """Kept: it shares its line with code."""; return x  # noqa: E702
# fmt: on
