"""Helpers shared by the test files: random inputs and comparisons. Fixtures and pytest hooks
live in conftest.py; the numerical tools the chapters use too (central_difference,
loglog_slope, rel_err) come from attnlib.nbtools."""

from __future__ import annotations

import math

import numpy as np

from attnlib import nbtools


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
