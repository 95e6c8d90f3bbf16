"""What several test files share, written once: random inputs (2-D and batched), comparisons
(relative error, closeness, FlashAttention's accuracy rule, the rounding bounds of the float64
reference), the instances of Parts I and III the tests of two modules use, and the checks of a
figure. Fixtures and pytest hooks live in conftest.py; the numerical tools the chapters use
too come from the library: central_difference and rel_err from attnlib.nbtools, loglog_slope
from attnlib.measure."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

import attnlib as al
from attnlib import hardness as hd
from attnlib import nbtools
from attnlib.iomodel import flash_backward_blocks


def rel_err(a, b) -> float:
    """:func:`attnlib.nbtools.rel_err`, max|a − b| / max|b|, extended to a reference ``b``
    that is zero everywhere (a gradient that vanishes exactly, as with one key): then 0.0 if
    ``a`` is zero too, inf otherwise."""
    if not np.any(b):
        return 0.0 if not np.any(a) else math.inf
    return nbtools.rel_err(a, b)


def random_qkv(rng, n, m, d, dv=None, dtype=np.float64):
    """Standard normal Q (n, d), K (m, d), V (m, dv) in ``dtype``; dv defaults to d."""
    dv = d if dv is None else dv
    Q = rng.standard_normal((n, d)).astype(dtype)
    K = rng.standard_normal((m, d)).astype(dtype)
    V = rng.standard_normal((m, dv)).astype(dtype)
    return Q, K, V


def assert_close(got, want, tol=1e-12):
    """Entrywise within tol·max(1, max|want|) on the finite entries of ``want``, with -inf in
    the same places: ~1e-12 in float64 at every magnitude."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    assert np.array_equal(np.isneginf(got), np.isneginf(want))
    fin = np.isfinite(want)
    scale = max(1.0, float(np.abs(want[fin]).max())) if fin.any() else 1.0
    err = float(np.abs(got[fin] - want[fin]).max()) if fin.any() else 0.0
    assert err <= tol * scale, (err, scale)


def random_qkv_dO(rng, n, m, d, dv=None, *, q_scale=1.0, k_scale=1.0):
    """:func:`random_qkv`'s Q (times ``q_scale``), K (times ``k_scale``) and V, then a standard
    normal upstream gradient dO (n, dv), drawn in that order."""
    Q, K, V = random_qkv(rng, n, m, d, dv)
    return Q * q_scale, K * k_scale, V, rng.standard_normal((n, V.shape[1]))


#: The outputs that :func:`reference_tolerances` and :func:`reference_mismatches` cover, in order.
OUTPUTS = ("O", "lse", "dQ", "dK", "dV")


def reference_outputs(parts):
    """(O, lse, dQ, dK, dV) of :func:`naive.reference_parts` (with dO), shaped as attnlib
    returns them: dK and dV summed over each key/value head's group of query heads."""
    p = parts
    return tuple(p.out(x) for x in (p.O, p.lse, p.dQ, p.fold(p.dK_heads), p.fold(p.dV_heads)))


def rounding_bounds(parts, dtype):
    """First-order bounds, entry by entry, on |computed − exact| for O, lse, dQ, dK, dV when
    attention and its gradient are computed in ``dtype`` (unit roundoff u) by any of the usual
    algorithms: naive or tiled with an online softmax, sums in any order, P recomputed from
    lse or kept. ``parts`` is :func:`naive.reference_parts` on the same inputs, with dO; the
    bounds are shaped like the outputs.

    Worst-case error analysis (Higham, ch. 3: a sum of k terms or a dot product of length k
    is off by at most k·u times the sum of the absolute values), term by term:

    - a logit S_ij = τ q_i·k_j is off by (d + 2)·u·σ_i, with σ_i = τ max_j |q_i|·|k_j| over
      the kept keys (the logits' magnitude: 1e4 for logits of 1e4);
    - a probability P_ij = exp(S_ij − lse_i) is then off by ρ_i·P_ij + η, where
      ρ_i = u·(2(d + 4)·σ_i + 2m + 16): the logit's error twice (its own and the shift's,
      the log-sum-exp being 1-Lipschitz), u·|lse_i| ≤ u·(σ_i + ln m) for rounding the shift,
      u·|S_ij − lse_i| ≤ u·(2σ_i + ln m) for the subtraction, m·u for the row sum (2·ln m ≤ m),
      and 16·u for exp (Cephes' expf and libm are within 2 ulp), log and the divisions;
      η = 16·tiny covers probabilities flushed to zero below the smallest normal number
      (e^-87 in float32);
    - lse_i is off by u·((d + 2)·σ_i + 2m + 8 + |lse_i|);
    - O_i = Σ_j P_ij V_j is off by (ρ_i + m·u)·(P|V|)_i + η·Σ_kept |V_j|;
    - D_i = dO_i·O_i = rowsum(dP ∘ P)_i is off by |dO_i|·err(O_i) + (d_v + 1)·u·|dO_i|·(P|V|)_i,
      dP_ij = dO_i·V_j by (d_v + 1)·u·|dO_i|·|V_j|, and t = dP − D by both plus u·|t|;
    - dS = P ∘ t is off by (ρP + η)|t| + P·err(t) + u|dS|;
    - dQ = τ dS K, dK = τ Σ_group dSᵀ Q and dV = Σ_group Pᵀ dO add the errors of their factors
      times the absolute values of the others, plus (k + 2)·u times the sum of absolute values
      for a sum of k terms and the factor τ (k + 1 for dV, which has none): k = m for dQ,
      k = n·g for dK and dV (g query heads share one key/value head).

    Underflow is ignored except in P; so are second-order terms, which the callers cover by a
    factor 2 (:func:`reference_tolerances`).
    """
    assert parts.dO is not None, "the bounds need the reference's backward pass"
    u = float(np.finfo(dtype).eps) / 2
    eta = 16 * float(np.finfo(dtype).tiny)
    p = parts
    n, m = p.P.shape[-2:]
    d, dv, g = p.Q.shape[-1], p.V.shape[-1], p.g
    keep = p.keep.astype(np.float64)
    aQ, aK, aV, adO = (np.abs(x) for x in (p.Q, p.K, p.V, p.dO))
    live = np.isfinite(p.lse)

    def t(x):
        return np.swapaxes(x, -1, -2)

    sigma = p.tau * np.where(p.keep, aQ @ t(aK), 0.0).max(axis=-1)
    rho = u * (2 * (d + 4) * sigma + 2 * m + 16)
    err_P = rho[..., None] * p.P + eta * keep
    PV = p.P @ aV
    err_O = (rho + m * u)[..., None] * PV + eta * (keep @ aV)
    err_lse = np.where(
        live, u * ((d + 2) * sigma + 2 * m + 8 + np.abs(np.where(live, p.lse, 0))), 0
    )

    tt = p.dP - np.sum(p.dP * p.P, axis=-1, keepdims=True)
    err_D = np.sum(adO * err_O, axis=-1) + (dv + 1) * u * np.sum(adO * PV, axis=-1)
    err_t = (dv + 1) * u * (adO @ t(aV)) + err_D[..., None] + u * np.abs(tt)
    adS = np.abs(p.dS)
    err_dS = err_P * np.abs(tt) + p.P * err_t + u * adS
    err_dQ = p.tau * ((err_dS + (m + 2) * u * adS) @ aK)
    err_dK = p.fold(p.tau * (t(err_dS + (n * g + 2) * u * adS) @ aQ))
    err_dV = p.fold(t(err_P + (n * g + 1) * u * p.P) @ adO)
    return tuple(p.out(x) for x in (err_O, err_lse, err_dQ, err_dK, err_dV))


def reference_tolerances(parts, dtype):
    """What a result computed in ``dtype`` may differ from the float64 reference by, entry
    by entry (O, lse, dQ, dK, dV): twice (for second-order terms) the sum of the two
    computations' first-order rounding bounds, :func:`rounding_bounds` in ``dtype`` and in
    float64. Zero where both are exact (a fully masked row or column)."""
    ours, ref = rounding_bounds(parts, dtype), rounding_bounds(parts, np.float64)
    return tuple(2 * (a + b) for a, b in zip(ours, ref, strict=True))


def reference_mismatches(got, want, tolerances) -> list[str]:
    """The outputs (O, lse, dQ, dK, dV) of ``got`` that are not within ``tolerances`` of the
    reference ``want`` at every entry, each with its worst entry; -inf must be matched
    exactly (a fully masked row's lse). Empty when all are within."""
    bad = []
    for name, a, w, tol in zip(OUTPUTS, got, want, tolerances, strict=True):
        a = np.asarray(a)
        if a.shape != w.shape:
            bad.append(f"{name}: shape {a.shape}, want {w.shape}")
            continue
        if not np.array_equal(np.isneginf(a), np.isneginf(w)):
            bad.append(f"{name}: -inf in other places")
            continue
        fin = np.isfinite(w)
        with np.errstate(invalid="ignore"):
            err = np.where(fin, np.abs(a.astype(np.float64) - np.where(fin, w, 0)), 0.0)
        err[~np.isfinite(err)] = np.inf
        over = err > tol
        if over.any():
            k = tuple(
                int(i)
                for i in np.unravel_index(np.argmax(np.where(over, err - tol, -1)), err.shape)
            )
            bad.append(
                f"{name}{list(k)}: got {float(a[k])!r}, want {float(w[k])!r}, "
                f"tolerance {float(tol[k]):.3g} ({int(over.sum())} entries over)"
            )
    return bad


def flash_rule_rounding(ref, dtype) -> float:
    """The rounding term of :func:`assert_within_flash_rule`: 4 units of ``dtype``'s epsilon
    times max|ref|, a few roundings of the largest entry; it matters only where the naive
    computation happens to be exact (a naive error of 0 would otherwise demand an exact
    result)."""
    return 4 * float(np.finfo(dtype).eps) * float(np.abs(ref).max())


def assert_within_flash_rule(got, naive, ref, rounding=None):
    """FlashAttention's accuracy rule, as its own tests state it (Dao-AILab/flash-attention,
    tests/test_flash_attn.py: "Check that FlashAttention's numerical error is at most twice
    the numerical error of a Pytorch implementation"; its Hopper tests add an absolute term):
    the max error of ``got`` against the float64 reference ``ref`` is at most twice the max
    error of ``naive``, the same quantity computed plainly in ``got``'s dtype, plus
    ``rounding`` (default :func:`flash_rule_rounding` in ``got``'s dtype). The reference is
    computed on the same low-precision inputs, promoted, so only the arithmetic differs."""
    got, naive, ref = (np.asarray(x) for x in (got, naive, ref))
    assert got.shape == ref.shape == naive.shape, (got.shape, naive.shape, ref.shape)
    if rounding is None:
        rounding = flash_rule_rounding(ref, got.dtype)
    err = float(np.abs(got - ref).max())
    naive_err = float(np.abs(naive - ref).max())
    assert err <= 2 * naive_err + rounding, (err, naive_err, rounding)


#: Batched cases (batch, H, H_kv, n, m, d, d_v, is_causal): no batch axis, one and two batch
#: axes, grouped (H_kv < H, down to one K/V head) and not, n < m and n > m, one query row.
BATCHED_CASES = [
    ((), 1, 1, 4, 4, 3, 3, False),
    ((2,), 4, 2, 5, 7, 3, 2, False),
    ((2, 3), 4, 1, 6, 6, 4, 4, True),
    ((1,), 6, 3, 7, 5, 2, 3, True),
    ((3,), 2, 2, 1, 9, 8, 8, False),
]


def batched_qkv_dO(batch, H, H_kv, n, m, d, d_v, seed=0):
    """Standard normal Q (*batch, H, n, d), K (*batch, H_kv, m, d), V (*batch, H_kv, m, d_v)
    and upstream gradient dO (*batch, H, n, d_v), float64, drawn in that order from
    ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((*batch, H, n, d))
    K = rng.standard_normal((*batch, H_kv, m, d))
    V = rng.standard_normal((*batch, H_kv, m, d_v))
    dO = rng.standard_normal((*batch, H, n, d_v))
    return Q, K, V, dO


def one_row_layouts(row):
    """The same single row (d,) as a (1, d) array made every way numpy allows: a new axis
    and a broadcast (row stride 0), a strided slice, a reshape, a transposed column, an
    arbitrary row stride (not even a multiple of the item size), and a column-strided view
    (not C-contiguous, so copied)."""
    d = row.shape[0]
    wide = np.zeros((3, 2 * d), row.dtype)
    wide[1, ::2] = row
    size = row.itemsize
    odd = np.lib.stride_tricks.as_strided(row, shape=(1, d), strides=(size + 3, size))
    return {
        "x[None]": row[None],
        "broadcast_to": np.broadcast_to(row, (1, d)),
        "step slice": np.stack([row, row])[::2],
        "reshape": row.copy().reshape(1, d),
        "column.T": row[:, None].T,
        "odd row stride": odd,
        "column-strided": wide[1:2, ::2],
    }


# ---- Part I: block-sparse grids ---------------------------------------------------------------

#: (d, M) of the block-sparse counts: blocks from a few rows to hundreds, d from 32 to 128.
SPARSE_BLOCK_CASES = [(64, 2000), (64, 30000), (64, 200000), (128, 100000), (32, 10**6)]


def sparse_block_grid(d, M):
    """(n, B_r, B_c, T_r, T_c): flash_backward's blocks at (d, M) and an n divisible by both
    block sizes, so that every block is full, with the dense block grid T_r × T_c."""
    B_r, B_c = flash_backward_blocks(d, M)
    n = B_r * B_c * max(1, 4096 // (B_r * B_c))
    return n, B_r, B_c, n // B_r, n // B_c


def thin_block_cover(T_r, T_c):
    """A thin (T_r, T_c) block pattern with every block row and column non-empty (a
    'diagonal')."""
    base = np.zeros((T_r, T_c), dtype=bool)
    base[np.arange(T_r), np.arange(T_r) * T_c // T_r] = True
    base[np.arange(T_c) * T_r // T_c, np.arange(T_c)] = True
    return base


# ---- Part III: instances of the reductions ----------------------------------------------------


def gap_params(n):
    """(m, t, eps) of hardness.gap_ann_parameters(n), checked against the book's choice:
    m = 12·log₂ n, t = m/6, eps = 1."""
    m, t, eps = hd.gap_ann_parameters(n)
    assert (m, t, eps) == (12 * int(math.log2(n)), m // 6, 1.0)
    return m, t, eps


#: The gradient oracle of the attention-from-gradient tests: AS24's dL/dX.
GRAD = al.attention_loss_grad


def f_direct(Q, K, V, lam, tau):
    """f(λ) = ‖softmax(λτQKᵀ)V‖²_F straight from the forward pass."""
    return float(np.sum(al.attention(Q, K, V, scale=lam * tau) ** 2))


def gap_instance(n, planted, seed):
    """(Q, K, V, τ): a planted Gap-ANN instance of size n reduced to attention, τ = 1/(2m)."""
    m, t, eps = hd.gap_ann_parameters(n)
    A, B, _ = hd.planted_gap_ann(n, m, t, eps, planted=planted, seed=seed)
    Q, K, V, _ = hd.gap_ann_to_attention(A, B, t, eps, scale=1 / (2 * m))
    return Q, K, V, 1 / (2 * m)


def ov_instance(n, orthogonal, seed):
    """(Q, K, V, τ): a planted OV instance of n vectors of m = 3·log₂ n bits reduced to
    attention, τ = 1/m."""
    m = 3 * int(math.log2(n))
    A, B, _ = hd.planted_ov(n, m, orthogonal=orthogonal, seed=seed)
    Q, K, V, _ = hd.ov_to_attention(A, B, scale=1 / m)
    return Q, K, V, 1 / m


def random_instance(seed, n=7, m=9, d=4, dv=3, size=1.5):
    """(Q, K, V, τ): normal entries of standard deviation ``size``, τ = 1/√d."""
    rng = np.random.default_rng(seed)
    Q, K, V = (size * rng.standard_normal(s) for s in ((n, d), (m, d), (m, dv)))
    return Q, K, V, 1 / math.sqrt(d)


# ---- figures ------------------------------------------------------------------------------------


def assert_labelled_with_takeaway(fig, *, legend: bool = True) -> None:
    """A figure of Chapters 1 and 8: a matplotlib Figure whose every axis but a colour bar has
    an x label, with a legend (``legend=False`` for a heat map with its colour bar, or panels
    titled instead) and a one-line takeaway under the axes."""
    assert isinstance(fig, plt.Figure)
    for ax in fig.axes:
        if ax.get_label() != "<colorbar>":
            assert ax.get_xlabel(), ax
    assert any(ax.get_legend() for ax in fig.axes) or not legend
    assert fig.texts, "every figure has a one-line takeaway"


def assert_axes_labelled_with_italic_takeaway(fig) -> None:
    """A figure of Part IV: a matplotlib Figure whose first axis has a y label, every axis an
    x label or tick labels (a bar chart names its bars), and an italic one-line takeaway."""
    assert isinstance(fig, plt.Figure)
    for ax in fig.axes:
        assert ax.get_ylabel() or ax is not fig.axes[0]
        assert ax.get_xlabel() or ax.get_xticklabels()
    assert any(t.get_text() and t.get_style() == "italic" for t in fig.texts)


def draw_line(k, scale=1.0):
    """A figure that differs at every k, for the live figures' tests: a module-level function,
    so that it can be imported by its "module:qualname"."""
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1], [0, scale * k])
    ax.set_ylim(0, 4)
    ax.set_title(f"k = {k}")
    return fig


# ---- the sharded schedules on the P-device machine (test_iomodel_ring, _ulysses, _grid) -------
# A case is (n, d, d_v, P, H, H_kv, is_causal, layout, dtype), and the grid's has its (R, C) last.


def device_inputs(case, seed, size=1.0):
    """Q (H, n, d), K (H_kv, n, d), V (H_kv, n, d_v) and dO (H, n, d_v) of a case, seeded;
    logits scale with ``size``. One head comes as 2-D input, PyTorch's (n, d), for odd seeds."""
    n, d, d_v, P, H, H_kv, causal, layout, dtype = case[:9]
    rng = np.random.default_rng(seed)
    Q = (size * rng.standard_normal((H, n, d))).astype(dtype)
    K = (size * rng.standard_normal((H_kv, n, d))).astype(dtype)
    V = rng.standard_normal((H_kv, n, d_v)).astype(dtype)
    dO = rng.standard_normal((H, n, d_v)).astype(dtype)
    if H == H_kv == 1 and seed % 2:
        Q, K, V, dO = Q[0], K[0], V[0], dO[0]
    return Q, K, V, dO


def _device_grid(case) -> dict:
    return {"grid": case[9]} if len(case) == 10 else {}


def device_kw(case) -> dict:
    """The keywords of a case's schedule."""
    n, d, d_v, P, H, H_kv, causal, layout, dtype = case[:9]
    return dict(P=P, layout=layout, is_causal=causal, enable_gqa=H != H_kv, **_device_grid(case))


def device_count_kw(case) -> dict:
    """The keywords of a case's closed-form count."""
    n, d, d_v, P, H, H_kv, causal, layout, dtype = case[:9]
    return dict(P=P, H=H, H_kv=H_kv, d_v=d_v, is_causal=causal, layout=layout, **_device_grid(case))


def device_total_kept(case) -> int:
    """Every kept score of a case's pass, over all query heads: what all devices' work adds
    up to, whatever the schedule."""
    n, H, causal = case[0], case[4], case[6]
    return H * (n * (n + 1) // 2 if causal else n * n)


def assert_within_reference(got, parts, which, dtype):
    """Each output (named in ``which``, a subset of O, lse, dQ, dK, dV in that order) has
    ``dtype`` and is within the rounding bounds of the float64 reference at every entry."""
    want = dict(zip(OUTPUTS, reference_outputs(parts), strict=True))
    tol = dict(zip(OUTPUTS, reference_tolerances(parts, dtype), strict=True))
    for name, a in zip(which, got, strict=True):
        assert a.dtype == dtype and a.shape == want[name].shape, name
        assert np.all(np.isfinite(a)), name
        err = np.abs(a.astype(np.float64) - want[name])
        assert np.all(err <= tol[name]), (name, float(err.max()), float(tol[name].max()))
