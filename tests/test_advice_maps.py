"""The decision maps of chapter 9 (attnlib.advice_maps): the sizes where the recommended method
changes and the grid of recommendations, each equal to what advise says at every point; the
machine keywords and the n range of the sweeps."""

from __future__ import annotations

import pytest

from attnlib import AttnInputError
from attnlib.advice import METHODS, advise
from attnlib.advice_maps import decision_map, method_boundaries


def test_boundaries_agree_with_advise():
    changes = method_boundaries(32, 0.1, 1e-3, 4096, n_lo=64, n_hi=2**22)
    assert changes, "flash gives way to the polynomial method at tiny B"
    for n, before, after in changes:
        assert advise(n, 32, 0.1, 1e-3, 4096).method == after
        assert advise(n - 1, 32, 0.1, 1e-3, 4096).method == before
    assert changes[0][1:] == ("flash", "polynomial")


def test_decision_map_matches_advise():
    ns, Bs = [128, 4096, 2**18], [0.05, 2.0]
    grid = decision_map(ns, Bs, d=64, eps=1e-3, M=4096)
    assert grid.shape == (2, 3)
    for i, B in enumerate(Bs):
        for j, n in enumerate(ns):
            assert METHODS[grid[i, j]] == advise(n, 64, B, 1e-3, 4096).method


def test_machine_keywords_and_n_range_of_the_sweeps():
    with pytest.raises(AttnInputError, match="speed is not a machine keyword"):
        decision_map([64], [1.0], d=8, eps=1e-3, M=1024, speed=2)
    with pytest.raises(AttnInputError, match="speed is not a machine keyword"):
        method_boundaries(8, 1.0, 1e-3, 1024, speed=2)
    with pytest.raises(AttnInputError, match="n_hi must be an integer <= 4611686018427387904"):
        method_boundaries(8, 1.0, 1e-3, 1024, n_hi=10**400)
    with pytest.raises(AttnInputError, match="n_hi must exceed n_lo=64"):
        method_boundaries(32, 1.0, 1e-3, 4096, n_lo=64, n_hi=64)
