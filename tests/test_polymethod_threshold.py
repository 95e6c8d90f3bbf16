"""aa22_rank and rank_exponent: AA22's order formula as a model rank near the threshold."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib import polymethod as pm


def test_aa22_rank_is_the_binomial_of_the_rounded_up_degree():
    for d, R, eps in [(4, 1.0, 1e-3), (8, 0.25, 1e-6), (64, 2.0, 1e-2)]:
        g = math.ceil(pm.aa22_degree(R, eps))
        assert pm.aa22_rank(d, R, eps) == math.comb(g + d, d)
    # beyond the float range: an exact integer, no overflow
    assert pm.aa22_rank(1000, 700.0, 2.0**-1000) > 10**400


def test_rank_exponent_regimes():
    ks = [100, 200, 400, 800]
    ln_n = np.array(ks) * math.log(2)
    constant = [pm.rank_exponent(k, 1.0) for k in ks]
    log_n = [pm.rank_exponent(k, float(R)) for k, R in zip(ks, ln_n, strict=True)]
    assert np.all(np.diff(constant) < 0) and constant[-1] < 1  # decays below r = n
    assert min(log_n) > 2  # R = ln n: the rank stays a large power of n
    n = 2.0**10
    assert pm.rank_exponent(10, 1.0) == math.log(pm.aa22_rank(10, 1.0, 1 / n)) / math.log(n)


def test_bad_arguments():
    with pytest.raises(AttnInputError, match="log2_n must be an integer <= 1023"):
        pm.rank_exponent(1024, 1.0)
    with pytest.raises(AttnInputError, match="log2_n"):
        pm.rank_exponent(0, 1.0)
    with pytest.raises(AttnInputError, match="R=1e\\+06 is too large"):
        pm.aa22_rank(4, 1e6, 0.1)
    with pytest.raises(AttnInputError, match="d must be an integer <= 100000"):
        pm.aa22_rank(10**6, 1.0, 0.1)
    with pytest.raises(AttnInputError, match="eps"):
        pm.aa22_rank(4, 1.0, 1.0)


def test_threshold_sweep_exact_values_at_small_sizes():
    s = pm.threshold_sweep([8, 10], [0.25, 1.0])
    assert s.d.tolist() == [4, 5]  # ⌈log₂ n / 2⌉
    for i, k in enumerate((8, 10)):
        n, ln_n = 2**k, k * math.log(2)
        for j, c in enumerate((0.25, 1.0)):
            R = c * c * ln_n
            assert s.R[i, j] == pytest.approx(R, rel=1e-15)
            g = pm.least_degree(R, 1 / n)
            assert s.degree[i, j] == g and s.rank[i, j] == math.comb(g + s.d[i], s.d[i])
            # the exponent is log r / log n: time n^(1+κ)·d; log base 2 or e must not matter
            assert s.kappa[i, j] == pytest.approx(math.log2(s.rank[i, j]) / k, rel=1e-12)
            g_model = math.ceil(pm.aa22_degree(R, 1 / n))
            assert s.aa22_degree_[i, j] == g_model
            assert s.aa22_kappa[i, j] == pytest.approx(
                math.log(math.comb(g_model + s.d[i], s.d[i])) / ln_n, rel=1e-12
            )
    # by hand: n = 2^8, c = 1/4: R = ln(256)/16, least degree 2 for eps = 1/256, C(6, 4) = 15
    assert s.degree[0, 0] == 2 and s.rank[0, 0] == 15
    assert s.kappa[0, 0] == pytest.approx(math.log(15) / math.log(256), rel=1e-14)
    assert pm.threshold_sweep([8], [0.25], d_per_log2_n=1.0).d.tolist() == [8]
    assert pm.threshold_sweep([8, 12], [0.25], d=3).d.tolist() == [3, 3]


def test_threshold_sweep_refuses_where_least_degree_refuses():
    s = pm.threshold_sweep([8, 12, 20], [0.5, 1.0, 1.5])
    for i, k in enumerate((8, 12, 20)):
        for j, c in enumerate((0.5, 1.0, 1.5)):
            R = c * c * k * math.log(2)
            try:
                pm.least_degree(R, 2.0**-k)
                refused = False
            except AttnInputError:
                refused = True
            assert s.refused[i, j] == refused
            assert np.isnan(s.kappa[i, j]) == refused and (s.rank[i, j] is None) == refused
            assert np.isfinite(s.aa22_kappa[i, j])  # the model is never refused
    assert s.refused[2, 2] and not s.refused[0, 0]  # n = 2^20 at c = 1.5: R ≈ 31 is refused


def test_the_exponent_collapses_only_when_d_grows_with_log_n():
    ks, cs = np.arange(8, 21, 2), np.geomspace(0.15, 0.8, 15)
    prop = pm.threshold_sweep(ks, cs, d_per_log2_n=1.0)  # d = log2 n
    fixed = pm.threshold_sweep(ks, cs, d=8)  # the same d at n = 2^8, then frozen
    assert np.array_equal(prop.kappa[0], fixed.kappa[0])
    # d fixed: every curve slides down from n = 2^8 to 2^20; d = log2 n: none does
    assert np.all(fixed.kappa[-1] < fixed.kappa[0] - 0.05)
    assert np.all(prop.kappa[-1] > prop.kappa[0])
    # the crossing of kappa = 1: settles near one c for d = log2 n, drifts for d fixed
    c_prop, c_fixed = prop.crossing(), fixed.crossing()
    upper = ks >= 14
    assert np.all(np.diff(c_fixed) > 0) and c_fixed[-1] - c_fixed[0] > 0.15
    assert np.ptp(c_prop[upper]) < 0.07 < np.ptp(c_fixed[upper])
    assert 0.2 < np.median(c_prop[upper]) < 0.35


def test_crossing_interpolates_between_grid_points():
    s = pm.threshold_sweep([10], [0.1, 0.2, 0.4, 0.8])
    row, c = s.kappa[0], s.c
    j = int(np.nonzero(row >= 1)[0][0])
    expected = c[j - 1] + (1 - row[j - 1]) * (c[j] - c[j - 1]) / (row[j] - row[j - 1])
    assert s.crossing()[0] == pytest.approx(expected, rel=1e-14)
    assert np.isnan(s.crossing(level=50.0)[0])  # never reached on the grid


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(log2_ns=[8.5], cs=[0.5]), "log2_ns"),
        (dict(log2_ns=[48], cs=[0.5]), "log2_ns"),
        (dict(log2_ns=[0], cs=[0.5]), "log2_ns"),
        (dict(log2_ns=[8, 8], cs=[0.5]), "log2_ns"),
        (dict(log2_ns=[8], cs=[0.5, 0.4]), "cs"),
        (dict(log2_ns=[8], cs=[0.0, 0.4]), "cs"),
        (dict(log2_ns=[8], cs=[np.nan]), "cs"),
        (dict(log2_ns=[8], cs=[0.5], d_per_log2_n=0.0), "d_per_log2_n"),
        (dict(log2_ns=[8], cs=[0.5], d=0), "d"),
        (dict(log2_ns=[8], cs=[0.5], d=2.5), "d"),
    ],
)
def test_threshold_sweep_refuses_bad_arguments(kwargs, name):
    with pytest.raises(AttnInputError, match=name):
        pm.threshold_sweep(**kwargs)
    with pytest.raises(AttnInputError, match="level"):
        pm.threshold_sweep([8], [0.5]).crossing(level=-1.0)


def test_drift_is_the_least_squares_slope_over_accepted_plans():
    s = pm.threshold_sweep(np.arange(8, 16), [0.3, 0.6, 1.4])
    slopes = s.drift()
    for j in range(3):
        col = s.kappa[:, j]
        ok = ~np.isnan(col)
        if ok.sum() >= 4:
            assert slopes[j] == pytest.approx(np.polyfit(s.log2_n[ok], col[ok], 1)[0], rel=1e-12)
        else:
            assert np.isnan(slopes[j])
    # over 10 <= k <= 13 only: a different fit, by hand on two points per unit
    rows = (s.log2_n >= 10) & (s.log2_n <= 13)
    expected = np.polyfit(s.log2_n[rows], s.kappa[rows, 0], 1)[0]
    assert s.drift(10, 13)[0] == pytest.approx(expected, rel=1e-12)
    assert np.isnan(s.drift(10, 12)[0])  # three sizes: too few for a slope
    with pytest.raises(AttnInputError, match="no size"):
        s.drift(30, 40)
    with pytest.raises(AttnInputError, match="smallest"):
        s.drift(0, 12)
