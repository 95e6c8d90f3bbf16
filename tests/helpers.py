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
