"""attnlib._heads.normalise: one problem description for both cores. The arrays heads first
and in one dtype, views where that needs no copy, every copy counted by the memory guard
before it is made, the keep-mask of each head and the runs of heads that share one, and
outputs given back in the caller's layout. What the cores accept and refuse through it is
test_contract.py's."""

from __future__ import annotations

import dataclasses
import tracemalloc

import numpy as np
import pytest

from attnlib import AttnInputError, _heads
from attnlib._heads import normalise


def problem(Q, K, V, outputs=None, *, working=None, contiguous=False, **kw):
    options = dict(scale=None, mask=None, is_causal=False, enable_gqa=False) | kw
    return normalise(
        Q,
        K,
        V,
        **options,
        outputs=outputs,
        what="the pass",
        working=working or (lambda p: []),
        contiguous=contiguous,
    )


@pytest.fixture
def batched(rng):
    """Q (2, 4, 6, 3), K (2, 2, 5, 3), V (2, 2, 5, 2): batch 2, H = 4 over H_kv = 2."""
    return tuple(rng.standard_normal(s) for s in [(2, 4, 6, 3), (2, 2, 5, 3), (2, 2, 5, 2)])


def test_2d_input_is_one_head_without_a_copy(rng):
    Q, K, V = rng.standard_normal((6, 3)), rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    p = problem(Q, K, V, is_causal=True)
    assert (p.Q.shape, p.K.shape, p.V.shape) == ((1, 6, 3), (1, 5, 3), (1, 5, 2))
    assert (p.heads, p.n, p.m, p.d, p.d_v, p.g, p.lead) == (1, 6, 5, 3, 2, 1, ())
    assert p.is_causal and p.mask is None and p.keep(0) is None
    assert p.scale == 1 / np.sqrt(3) and p.dtype == np.float64
    assert all(np.shares_memory(a, b) for a, b in [(p.Q, Q), (p.K, K), (p.V, V)])
    assert p.unflatten(p.Q) is not p.Q and np.array_equal(p.unflatten(p.Q), Q)
    assert p.runs() == [(slice(0, 1), slice(0, 1), 1)]


def test_batched_input_is_flattened_heads_first(batched):
    Q, K, V = batched
    p = problem(Q, K, V, enable_gqa=True)
    assert (p.Q.shape, p.K.shape, p.V.shape) == ((8, 6, 3), (4, 5, 3), (4, 5, 2))
    assert (p.heads, p.g, p.lead) == (8, 2, (2, 4))
    for b in range(2):
        for h in range(4):  # query head (b, h) is flat head 4b + h, its K/V head 2b + h // 2
            assert np.array_equal(p.Q[4 * b + h], Q[b, h])
            assert np.array_equal(p.K[(4 * b + h) // p.g], K[b, h // 2])
    assert np.array_equal(p.unflatten(p.Q), Q)
    assert np.array_equal(p.unflatten(p.K, kv=True), K)
    assert p.runs() == [(slice(0, 8), slice(0, 4), 2)]


def test_outputs_of_a_backward_pass(batched):
    Q, K, V = batched
    O, dO, lse = np.ones((2, 4, 6, 2)), np.ones((2, 4, 6, 2)), np.zeros((2, 4, 6))
    p = problem(Q, K, V, (O, dO, lse), enable_gqa=True)
    assert (p.O.shape, p.dO.shape, p.lse.shape) == ((8, 6, 2), (8, 6, 2), (8, 6))
    assert problem(Q, K, V, enable_gqa=True).O is None
    with pytest.raises(AttnInputError, match=r"^lse must have shape \(\.\.\., H, n\)"):
        problem(Q, K, V, (O, dO, lse[..., :2]), enable_gqa=True)


def test_dtypes_are_made_common_and_contiguity_on_request(rng):
    Q = np.asfortranarray(rng.standard_normal((6, 3)))
    K, V = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((5, 2))
    p = problem(Q, K, V)
    assert {x.dtype for x in (p.Q, p.K, p.V)} == {np.dtype(np.float64)}
    assert np.shares_memory(p.Q, Q) and not p.Q.flags.c_contiguous  # the core reads it as is
    c = problem(Q, K, V, contiguous=True)
    assert all(x.flags.c_contiguous for x in (c.Q, c.K, c.V))
    assert np.array_equal(c.Q[0], Q) and np.array_equal(c.K[0], K.astype(np.float64))


def test_keep_masks_and_the_runs_of_heads_that_share_one(batched, rng):
    """Each run's heads have one keep-mask (the same memory), the runs cover the heads in
    order, and a run is a multiple of H heads or a single one, which reads its key/value
    head with g = 1."""
    Q, K, V = batched
    masks = {
        "one for all": (rng.random((6, 5)) < 0.5, 1),
        "key padding (B, 1, 1, m)": (rng.random((2, 1, 1, 5)) < 0.5, 2),
        "per batch (B, 1, n, m)": (rng.random((2, 1, 6, 5)) < 0.5, 2),
        "per head (H, n, m)": (rng.random((4, 6, 5)) < 0.5, 8),
        "per query head (B, H, n, m)": (rng.random((2, 4, 6, 5)) < 0.5, 8),
    }
    for name, (mask, count) in masks.items():
        p = problem(Q, K, V, mask=mask, enable_gqa=True)
        full = np.broadcast_to(mask, (2, 4, 6, 5))
        for h in range(8):
            assert np.array_equal(p.keep(h), full[h // 4, h % 4]), name
        runs = p.runs()
        assert len(runs) == count, name
        assert [r[0].start for r in runs] == list(range(0, 8, 8 // count))
        for q, kv, g in runs:
            first = p.keep(q.start)
            assert all(p.keep(h).ctypes.data == first.ctypes.data for h in range(q.start, q.stop))
            assert g == (2 if q.stop - q.start > 1 else 1)
            assert kv == slice(q.start // 2, q.start // 2 + (q.stop - q.start) // g)


def test_leading_axes_are_merged_by_a_view_or_a_counted_copy(batched, monkeypatch):
    """Leading axes that merge into one (contiguous ones, or broadcast ones, stride 0) give
    a view; others (a broadcast batch over distinct heads, axes in another order) are
    copied, and the guard counts that copy, as large as the array looks, before it is
    made."""
    Q, K, V = batched
    seen = []

    def recording(what, parts, **kw):
        seen.append(parts)
        return sum(p[0] for p in parts)

    monkeypatch.setattr(_heads, "check_memory_parts", recording)
    one = [np.broadcast_to(x[:1, :1], x.shape) for x in (Q, K, V)]  # one head everywhere
    view = problem(*one, enable_gqa=True)
    assert np.shares_memory(view.Q, Q) and seen[-1] == []
    for layout in (
        [np.broadcast_to(x[:1], x.shape) for x in (Q, K, V)],  # strides (0, ·): no view
        [np.swapaxes(np.swapaxes(x, 0, 1).copy(), 0, 1) for x in (Q, K, V)],  # heads outer
    ):
        p = problem(*layout, enable_gqa=True)
        assert not np.shares_memory(p.Q, Q)
        assert seen[-1] == [
            (x.size * 8, f"{name} with its heads in one axis", name)
            for name, x in zip("QKV", layout, strict=True)
        ]
        assert np.array_equal(p.unflatten(p.Q), layout[0])


def test_the_guard_refuses_before_any_conversion_and_sees_the_problem(rng):
    Q32 = np.broadcast_to(np.ones(4, np.float32), (10**6, 4))  # 32 MB once converted
    K, V = rng.standard_normal((5, 4)), rng.standard_normal((5, 2))
    seen = []

    def working(p):
        seen.append((p.heads, p.n, p.m, p.d_v, p.dtype, p.Q.dtype))
        return [(2**40, "the core's arrays", "Q or K")]

    tracemalloc.start()
    try:
        with pytest.raises(AttnInputError, match=r"^the pass would need .*; Q or K is too large"):
            problem(Q32, K, V, working=working)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    # the working memory sees the final sizes and dtype, the arrays as they were passed
    assert seen == [(1, 10**6, 5, 2, np.float64, np.float32)]


def test_mask_with_is_causal_is_refused_naming_mask(rng, batched):
    Q, K, V = rng.standard_normal((6, 3)), rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    for args, mask in [((Q, K, V), np.ones((6, 5), bool)), (batched, np.ones((6, 5), bool))]:
        with pytest.raises(AttnInputError, match=r"^mask and is_causal=True .*np\.tri"):
            problem(*args, mask=mask, is_causal=True, enable_gqa=True)


def test_the_problem_is_frozen(rng):
    p = problem(*(rng.standard_normal((4, 2)) for _ in range(3)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.scale = 2.0
