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
