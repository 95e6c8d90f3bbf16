"""What the compiled kernels require of their inputs (attnlib._guards): canonical, read-only
strides without copies; logits that cannot overflow (Cauchy–Schwarz first, then the logits
themselves, counting only kept keys); a power-of-two shift of V when m·max|V| could overflow;
and the kernels' working memory counted per head."""

import numba as nb
import numpy as np
import pytest
from helpers import one_row_layouts

from attnlib import AttnInputError, _guards, costs
from attnlib._heads import normalise


def problem(Q, K, V, **kw):
    """The problem description the compiled kernels would get, with no working memory."""
    kw = dict(dict(scale=None, mask=None, is_causal=False, enable_gqa=False), **kw)
    return normalise(Q, K, V, what="the kernels", working=lambda p: [], **kw)


OVERFLOW = r"the logits scale \* Q @ K\.T overflow float64: Q, K or scale is too large"


@pytest.mark.parametrize("shape", [(3, 4), (5, 1, 7), (1, 1), (1,), (2, 3, 1, 2), ()])
def test_c_strides_are_numpys_for_every_shape(shape):
    for dtype in (np.float32, np.float64):
        want = np.empty(shape, dtype).strides
        assert _guards._c_strides(shape, np.dtype(dtype).itemsize) == want


def test_frozen_views_have_canonical_strides_without_a_copy(rng):
    """_frozen hands the kernels the canonical strides of the shape; a length-1 axis's
    arbitrary stride is replaced without copying, and nothing else changes."""
    row = rng.standard_normal(8)
    for x in one_row_layouts(row).values():
        f = _guards._frozen(x)
        assert f.strides == (8 * 8, 8) and not f.flags.writeable
        assert np.array_equal(f, x)
    big = rng.standard_normal((5, 1, 7))[:, :, :]
    big = np.lib.stride_tricks.as_strided(big, strides=(56, 0, 8))
    f = _guards._frozen(big)
    assert f.strides == (56, 56, 8) and np.shares_memory(f, big)


def test_frozen_leaves_the_callers_array_writeable_and_copies_only_what_is_not_c_order(rng):
    x = rng.standard_normal((4, 6))
    f = _guards._frozen(x)
    assert np.shares_memory(f, x) and x.flags.writeable and not f.flags.writeable
    fortran = np.asfortranarray(x)
    g = _guards._frozen(fortran)
    assert not np.shares_memory(g, fortran) and g.flags.c_contiguous
    assert np.array_equal(g, x)


def test_logits_bounded_uses_the_row_norms_when_the_entries_alone_do_not_clear():
    Q = np.array([[1e154, 0.0], [0.0, 1.0]])
    K = np.array([[1e154, 0.0], [0.0, 1.0]])
    # d·max|q|·max|k| = 2e308 overflows, but max‖q‖·max‖k‖ = 1e308 does not
    assert _guards._logits_bounded(Q, K, 1.0)
    assert not _guards._logits_bounded(Q, K, 2.0)  # τ·q·k = 2e308
    assert not _guards._logits_bounded(2 * Q, K, 1.0)
    assert _guards._logits_bounded(np.ones((3, 4)), np.ones((5, 4)), 0.5)


def test_an_overflowing_logit_is_refused_only_where_it_is_kept():
    Q = np.array([[1e200, 0.0], [1.0, 1.0]])
    K = np.array([[1.0, 1.0], [1e200, 0.0]])  # only q_0·k_1 = 1e400 overflows
    with pytest.raises(AttnInputError, match=OVERFLOW):
        _guards._refuse_overflow_2d(Q, K, 1.0)
    keep = np.array([[True, False], [True, True]])
    _guards._refuse_overflow_2d(Q, K, 1.0, keep)  # the mask drops it
    _guards._refuse_overflow_2d(Q, K, 1.0, None, is_causal=True)  # key 1 is after query 0
    with pytest.raises(AttnInputError, match=OVERFLOW):
        _guards._refuse_overflow_2d(Q[::-1], K, 1.0, None, is_causal=True)  # now it is kept


def test_refuse_overflow_checks_each_query_head_against_its_key_value_head():
    Q = np.zeros((4, 2, 2))
    Q[3, 0, 0] = 1e200
    K = np.ones((2, 3, 2))
    V = np.ones((2, 3, 2))
    K[1, 0, 0] = 1e200  # head 3 reads key/value head 3 // 2 = 1
    with pytest.raises(AttnInputError, match=OVERFLOW):
        _guards._refuse_overflow(problem(Q, K, V, enable_gqa=True))
    K[1, 0, 0], K[0, 0, 0] = 1.0, 1e200  # key/value head 0 serves query heads 0 and 1 only
    _guards._refuse_overflow(problem(Q, K, V, enable_gqa=True))


@pytest.mark.parametrize("m", [1, 7, 256, 1000])
def test_value_shift_keeps_the_accumulator_of_m_rows_in_range(m):
    big = np.finfo(np.float64).max
    assert _guards._value_shift(np.ones((m, 3))) == 0
    V = np.full((m, 3), big / (4.0 * m))
    assert _guards._value_shift(V) == 0  # m·max|V| = max/4 fits
    V = np.full((m, 3), big / 2)
    shift = _guards._value_shift(V)
    assert shift == int(np.ceil(np.log2(m))) + 2
    assert (big / 2) / 2.0**shift * m <= big / 4


def test_kernel_parts_count_every_head_and_a_copy_of_a_strided_mask(rng):
    Q, K, V = (rng.standard_normal((2, 3, n, 4)) for n in (5, 6, 6))
    p = problem(Q, K, V)
    (nbytes, _, blamed), *rest = _guards._kernel_parts(p)
    per_head = costs.extra_memory_bytes(5, 6, 4, 4, dtype="float64", threads=nb.get_num_threads())
    assert nbytes == 6 * per_head and blamed == "Q, K or V" and not rest
    mask = np.ones((6, 5), dtype=bool).T  # (5, 6) rows that are not contiguous
    parts = _guards._kernel_parts(problem(Q, K, V, mask=mask))
    assert parts[1] == (5 * 6, "a contiguous copy of mask", "mask")
