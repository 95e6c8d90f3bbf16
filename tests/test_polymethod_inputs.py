"""The generators of AS24 loss inputs (attnlib.polymethod.inputs): bounded entries and sign
patterns, with the entry bound B they promise, seeded."""

from __future__ import annotations

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib import polymethod as pm


def test_loss_input_generators(rng):
    X, A1, A2, A3, Y, E = pm.bounded_loss_inputs(30, 4, 0.5, rng, m=20)
    assert [a.shape for a in (X, A1, A2, A3, Y, E)] == [
        (4, 4),
        (30, 4),
        (20, 4),
        (20, 4),
        (4, 4),
        (30, 4),
    ]
    assert max(np.abs(a).max() for a in (A1, A2, A3, E)) <= 0.5
    same = pm.bounded_loss_inputs(30, 4, 0.5, 7, m=20)
    assert all(
        np.array_equal(a, b)
        for a, b in zip(same, pm.bounded_loss_inputs(30, 4, 0.5, 7, m=20), strict=True)
    )
    for n in (10, 1000):  # the logit range is B² whatever n is
        args = pm.sign_loss_inputs(n, 8, 1.5, rng)
        assert np.array_equal(args[0], np.eye(8)) and set(np.unique(args[1])) == {-1.5, 1.5}
        assert pm.logit_range(args[1] @ args[0], args[2], scale=1 / 8) == pytest.approx(
            2.25, rel=1e-15
        )
    for bad, word in [
        (dict(rng=-1), "rng"),
        (dict(rng="x"), "rng"),
        (dict(B=0.0), "B"),
        (dict(n=0), "n"),
    ]:
        kw = dict(n=5, d=2, B=1.0, rng=0) | bad
        with pytest.raises(AttnInputError, match=word):
            pm.sign_loss_inputs(**kw)
