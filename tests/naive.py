"""Slow, obviously correct oracles: explicit Python loops over i and j, in float64.

They follow the definitions line by line (FA2 Alg. 2; AS24 Def. 1.2 and Lemma C.7) and share
no code with attnlib. Use them only on small inputs.

The suite's chain of trust:

1. these loop oracles are checked against scipy (softmax, logsumexp) and finite differences
   (test_naive.py);
2. the exact core (attnlib.exact) is checked against them (test_exact.py);
3. everything else (the compiled kernels, the machine schedules, the polynomial method, the
   models) is checked against the exact core.

The pebble-game oracle, a breadth-first search over every configuration, is checked on
hand-counted graphs (test_naive.py) and is in turn the reference for attnlib.iomodel.optimal.
"""

from __future__ import annotations

import math

import numpy as np


def naive_forward(Q, K, V, scale, mask=None):
    """O[i] = Σ_j softmax_j(scale·⟨Q_i, K_j⟩) V[j]; lse[i] = log Σ_j exp(S_ij). Float64."""
    Q, K, V = (np.asarray(x, dtype=np.float64) for x in (Q, K, V))
    n, m = Q.shape[0], K.shape[0]
    O = np.zeros((n, V.shape[1]))
    lse = np.empty(n)
    for i in range(n):
        scores = []
        for j in range(m):
            if mask is None or mask[i, j]:
                scores.append((j, scale * float(np.dot(Q[i], K[j]))))
        if not scores:
            lse[i] = -math.inf
            continue
        top = max(s for _, s in scores)
        weights = [(j, math.exp(s - top)) for j, s in scores]
        total = sum(w for _, w in weights)
        lse[i] = top + math.log(total)
        for j, w in weights:
            O[i] += (w / total) * V[j]
    return O, lse


def naive_backward(Q, K, V, dO, scale, mask=None):
    """(dQ, dK, dV) of the scalar ⟨O, dO⟩, by the chain rule written out entry by entry."""
    Q, K, V, dO = (np.asarray(x, dtype=np.float64) for x in (Q, K, V, dO))
    n, m = Q.shape[0], K.shape[0]
    O, lse = naive_forward(Q, K, V, scale, mask)
    dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    for i in range(n):
        if math.isinf(lse[i]):
            continue
        # P_ij and dP_ij = ⟨dO_i, V_j⟩ for the kept entries of row i
        P = {}
        for j in range(m):
            if mask is None or mask[i, j]:
                P[j] = math.exp(scale * float(Q[i] @ K[j]) - lse[i])
        D = float(dO[i] @ O[i])
        for j, p in P.items():
            dV[j] += p * dO[i]
            dS = p * (float(dO[i] @ V[j]) - D)
            dQ[i] += scale * dS * K[j]
            dK[j] += scale * dS * Q[i]
    return dQ, dK, dV


def naive_loss(X, A1, A2, A3, Y, E):
    """AS24 Def 1.2 with loops: L(X) = ½ Σ_i ‖Σ_j softmax_j(⟨(A₁X)_i, (A₂)_j⟩/d) (A₃Y)_j − E_i‖²."""
    X, A1, A2, A3, Y, E = (np.asarray(a, dtype=np.float64) for a in (X, A1, A2, A3, Y, E))
    d = A1.shape[1]
    O, _ = naive_forward(A1 @ X, A2, A3 @ Y, 1.0 / d)
    total = 0.0
    for i in range(O.shape[0]):
        for t in range(d):
            total += 0.5 * (O[i, t] - E[i, t]) ** 2
    return total


def naive_loss_grad(X, A1, A2, A3, Y, E):
    """dL/dX with loops: dL/dX = (1/d) Σ_ij dS_ij (A₁)_iᵀ (A₂)_j, dS from :func:`naive_backward`."""
    X, A1, A2, A3, Y, E = (np.asarray(a, dtype=np.float64) for a in (X, A1, A2, A3, Y, E))
    d = A1.shape[1]
    Q, K, V = A1 @ X, A2, A3 @ Y
    O, lse = naive_forward(Q, K, V, 1.0 / d)
    c = O - E  # ∂L/∂O
    G = np.zeros((d, d))
    for i in range(Q.shape[0]):
        D = float(c[i] @ O[i])
        for j in range(K.shape[0]):
            p = math.exp(float(Q[i] @ K[j]) / d - lse[i])
            dS = p * (float(c[i] @ V[j]) - D)
            G += dS * np.outer(A1[i], A2[j]) / d
    return G


def naive_pebble_optimum(preds, inputs, outputs, M, *, recompute=True):
    """Q(G, M) by plain 0-1 breadth-first search over every pebble configuration, with the
    game's four moves exactly as defined (read, write, compute, delete; reads and writes
    cost 1) and no pruning at all. ``preds[v]`` lists v's predecessors; inputs start blue;
    the game ends when every output is blue. With ``recompute=False`` the state also holds
    the set of vertices computed so far, and none is computed twice. Returns None if no
    schedule exists. Exponential: graphs of about 8 vertices only."""
    from collections import deque

    n = len(preds)
    start = (frozenset(), frozenset(inputs), frozenset())
    dist = {start: 0}
    queue = deque([start])
    outputs = frozenset(outputs)
    while queue:
        state = queue.popleft()
        red, blue, done = state
        g = dist[state]
        if outputs <= blue:
            return g
        nxt = []
        for v in range(n):
            if v in red:
                nxt.append((1, (red, blue | {v}, done)))  # write
                nxt.append((0, (red - {v}, blue, done)))  # delete red
            elif len(red) < M:
                if v in blue:
                    nxt.append((1, (red | {v}, blue, done)))  # read
                if v not in inputs and all(u in red for u in preds[v]):
                    if recompute or v not in done:
                        nxt.append((0, (red | {v}, blue, done | {v})))  # compute
            if v in blue and v not in inputs:
                nxt.append((0, (red, blue - {v}, done)))  # delete blue
        for cost, s in nxt:
            if recompute:  # the computed set matters only when recomputing is forbidden
                s = (s[0], s[1], frozenset())
            if g + cost < dist.get(s, math.inf):
                dist[s] = g + cost
                if cost:
                    queue.append(s)
                else:
                    queue.appendleft(s)
    return None
