"""The loop oracles of naive.py against scipy and finite differences: the first link of the
suite's chain of trust (see naive.py)."""

from __future__ import annotations

import numpy as np
import scipy.special
from helpers import random_qkv, rel_err
from naive import naive_backward, naive_forward, naive_loss, naive_loss_grad, naive_pebble_optimum

from attnlib.nbtools import central_difference


def test_forward_matches_scipy_softmax_and_logsumexp(rng):
    Q, K, V = random_qkv(rng, 7, 9, 4, dv=3)
    mask = rng.random((7, 9)) < 0.6
    mask[2] = False  # a fully masked row: O = 0, lse = -inf
    S = np.where(mask, 0.7 * Q @ K.T, -np.inf)
    O, lse = naive_forward(Q, K, V, 0.7, mask)
    live = mask.any(axis=1)
    with np.errstate(invalid="ignore"):  # scipy's softmax of a row of -inf is NaN
        P = scipy.special.softmax(S, axis=1)
    assert rel_err(O[live], P[live] @ V) < 1e-14
    assert rel_err(lse[live], scipy.special.logsumexp(S[live], axis=1)) < 1e-14
    assert np.all(O[~live] == 0) and np.all(np.isneginf(lse[~live]))


def test_backward_matches_finite_differences(rng):
    Q, K, V = random_qkv(rng, 5, 6, 3, dv=2)
    mask = rng.random((5, 6)) < 0.7
    mask[1] = False
    dO = rng.standard_normal((5, 2))

    def objective(Q, K, V):
        return float(np.sum(naive_forward(Q, K, V, 0.6, mask)[0] * dO))

    dQ, dK, dV = naive_backward(Q, K, V, dO, 0.6, mask)
    assert rel_err(dQ, central_difference(lambda x: objective(x, K, V), Q, 1e-6)) < 1e-7
    assert rel_err(dK, central_difference(lambda x: objective(Q, x, V), K, 1e-6)) < 1e-7
    assert rel_err(dV, central_difference(lambda x: objective(Q, K, x), V, 1e-6)) < 1e-7


def test_loss_matches_scipy_and_its_gradient_finite_differences(rng):
    n, m, d = 6, 5, 3
    X, Y = 0.5 * rng.standard_normal((d, d)), rng.standard_normal((d, d))
    A1, E = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    A2, A3 = rng.standard_normal((m, d)), rng.standard_normal((m, d))
    P = scipy.special.softmax(A1 @ X @ A2.T / d, axis=1)
    loss = naive_loss(X, A1, A2, A3, Y, E)
    assert abs(loss - 0.5 * np.sum((P @ A3 @ Y - E) ** 2)) <= 1e-13 * loss
    G = naive_loss_grad(X, A1, A2, A3, Y, E)
    G_fd = central_difference(lambda x: naive_loss(x, A1, A2, A3, Y, E), X, 1e-6)
    assert rel_err(G, G_fd) < 1e-7


def test_pebble_optimum_on_hand_counted_graphs():
    # s = a + b: read a, read b, compute s, write s; three red pebbles are needed
    preds = [(), (), (0, 1)]
    assert naive_pebble_optimum(preds, {0, 1}, [2], 3) == 3
    assert naive_pebble_optimum(preds, {0, 1}, [2], 2) is None
    # t = s + a with s = a + b: a stays red, so t costs no extra read
    preds = [(), (), (0, 1), (2, 0)]
    assert naive_pebble_optimum(preds, {0, 1}, [3], 3) == 3
