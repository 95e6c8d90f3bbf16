"""Slow, obviously correct oracles: explicit Python loops over i and j, in float64; and one
vectorised float64 reference for batched, grouped-query and causal attention.

They follow the definitions line by line (FA2 Alg. 2; AS24 Def. 1.2 and Lemma C.7) and share
no code with attnlib. Use the loop oracles only on small inputs.

The suite's chain of trust:

1. these loop oracles are checked against scipy (softmax, logsumexp) and finite differences
   (test_naive.py);
2. the exact core (attnlib.exact) is checked against them (test_exact.py);
3. the batched reference (:func:`reference_forward`, :func:`reference_backward`) is checked
   against the loop oracles run head by head (:func:`naive_batched_forward`,
   :func:`naive_batched_backward`) and against finite differences; the batched, grouped and
   causal paths of the exact core and of the compiled kernels are each checked against it
   (test_batched_reference.py);
4. everything else (the machine schedules, the polynomial method, the models) is checked
   against the exact core.

The pebble-game oracle, a breadth-first search over every configuration, is checked on
hand-counted graphs (test_naive.py) and is in turn the reference for attnlib.iomodel.optimal.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

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


# ---------------------------------------------------------------------------------------
# Batched multi-head input, PyTorch's scaled_dot_product_attention layout: Q (..., H, n, d),
# K (..., H_kv, m, d), V (..., H_kv, m, d_v); query head h reads key/value head h // (H / H_kv)
# ---------------------------------------------------------------------------------------


def naive_batched_forward(Q, K, V, scale, mask=None, is_causal=False):
    """:func:`naive_forward` run head by head, for 2-D or batched multi-head input. Query head
    (b, h) reads key/value head (b, h // g), g = H / H_kv, and keeps key j for query i iff
    ``mask`` broadcast to (..., H, n, m) keeps it and, when ``is_causal``, j <= i."""
    Q, K, V = (np.asarray(x, dtype=np.float64) for x in (Q, K, V))
    O = np.zeros((*Q.shape[:-1], V.shape[-1]))
    lse = np.empty(Q.shape[:-1])
    for q, kv, keep in _naive_heads(Q, K, mask, is_causal):
        O[q], lse[q] = naive_forward(Q[q], K[kv], V[kv], scale, keep)
    return O, lse


def naive_batched_backward(Q, K, V, dO, scale, mask=None, is_causal=False):
    """:func:`naive_backward` run head by head (heads and masks as in
    :func:`naive_batched_forward`): the gradient of a key/value head is the sum of those of the
    query heads that read it."""
    Q, K, V, dO = (np.asarray(x, dtype=np.float64) for x in (Q, K, V, dO))
    dQ, dK, dV = np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)
    for q, kv, keep in _naive_heads(Q, K, mask, is_causal):
        dq, dk, dv = naive_backward(Q[q], K[kv], V[kv], dO[q], scale, keep)
        dQ[q] = dq
        dK[kv] += dk
        dV[kv] += dv
    return dQ, dK, dV


def _naive_heads(Q, K, mask, is_causal):
    """(index of a query head, index of the key/value head it reads, its (n, m) keep-mask)
    for every query head; one head, with empty indices, for 2-D input."""
    n, m = Q.shape[-2], K.shape[-2]
    heads = Q.shape[:-2]
    full = None if mask is None else np.broadcast_to(mask, (*heads, n, m))
    g = Q.shape[-3] // K.shape[-3] if heads else 1
    for q in np.ndindex(*heads):
        kv = (*q[:-1], q[-1] // g) if heads else ()
        keep = np.ones((n, m), dtype=bool)
        for i in range(n):
            for j in range(m):
                if full is not None and not full[q][i, j]:
                    keep[i, j] = False
                if is_causal and j > i:
                    keep[i, j] = False
        yield q, kv, keep


def reference_parts(Q, K, V, dO=None, *, scale=None, mask=None, is_causal=False, enable_gqa=False):
    """Every quantity of the definitions of attention and of its gradient, in float64, with
    arrays (not loops) but no shortcut: what :func:`reference_forward` and
    :func:`reference_backward` return, and what a rounding-error bound needs.

    Q (n, d), K (m, d), V (m, d_v), or batched (..., H, n, d), (..., H_kv, m, d),
    (..., H_kv, m, d_v) with H_kv < H only when ``enable_gqa``; dO (optional) shaped like O.
    Returns a namespace with, one axis per query head (2-D input gets a head axis of length 1):

    - ``Q`` (..., H, n, d); ``K`` (..., H, m, d), ``V`` (..., H, m, d_v): the key/value head
      each query head reads, h // g with g = H / H_kv; ``dO`` (..., H, n, d_v) or None;
    - ``tau`` (default 1/√d), ``g``, ``keep`` (..., H, n, m): ``mask`` (True = keep, broadcast)
      and, when ``is_causal``, the top-left aligned causal mask j <= i (``np.tri(n, m)``);
    - ``S`` = τ Q Kᵀ; ``P``, the softmax of each row over its kept entries (0 elsewhere, and
      on a fully masked row); ``lse`` = log Σ_kept exp(S) (-inf on a fully masked row);
      ``O`` = P V;
    - with dO: ``dP`` = dO Vᵀ, ``dS`` = P ∘ (dP − rowsum(dP ∘ P)), ``dQ`` = τ dS K, and
      ``dK_heads`` = τ dSᵀ Q, ``dV_heads`` = Pᵀ dO for each query head;
    - ``fold(x)``: x (..., H, rows, cols) summed over the g query heads of each key/value head,
      (..., H_kv, rows, cols); ``out(x)``: x without the head axis added for 2-D input.
    """
    Q, K, V = (np.asarray(x, dtype=np.float64) for x in (Q, K, V))
    two_d = Q.ndim == 2
    if two_d:
        Q, K, V = Q[None], K[None], V[None]
    H, n, d = Q.shape[-3:]
    H_kv, m = K.shape[-3:-1]
    assert Q.shape[:-3] == K.shape[:-3] == V.shape[:-3] and K.shape[-1] == d
    assert V.shape[-3:-1] == (H_kv, m) and H % H_kv == 0 and (enable_gqa or H == H_kv)
    g = H // H_kv
    tau = 1.0 / math.sqrt(d) if scale is None else float(scale)

    # key/value head j serves query heads j·g, ..., j·g + g − 1: repeat it g times in place
    Kh, Vh = np.repeat(K, g, axis=-3), np.repeat(V, g, axis=-3)
    keep = np.ones((*Q.shape[:-1], m), dtype=bool)
    if mask is not None:
        keep = keep & np.asarray(mask, dtype=bool)
        assert keep.shape == (*Q.shape[:-1], m), "the mask must broadcast to (..., H, n, m)"
    if is_causal:
        keep = keep & np.tri(n, m, dtype=bool)

    S = tau * (Q @ np.swapaxes(Kh, -1, -2))
    top = np.where(keep, S, -np.inf).max(axis=-1, keepdims=True)  # -inf: fully masked row
    live = np.isfinite(top)
    top = np.where(live, top, 0.0)
    E = np.where(keep, np.exp(np.where(keep, S - top, 0.0)), 0.0)  # every exponent <= 0
    Z = np.where(live, E.sum(axis=-1, keepdims=True), 1.0)
    P = E / Z
    lse = np.where(live, top + np.log(Z), -np.inf)[..., 0]
    O = P @ Vh

    def fold(x):
        return x.reshape(*x.shape[:-3], H_kv, g, *x.shape[-2:]).sum(axis=-3)

    def out(x):
        return x[0] if two_d else x

    parts = SimpleNamespace(
        Q=Q, K=Kh, V=Vh, dO=None, tau=tau, g=g, keep=keep, S=S, P=P, lse=lse, O=O,
        fold=fold, out=out,
    )  # fmt: skip
    if dO is not None:
        dO = np.asarray(dO, dtype=np.float64)
        dO = dO[None] if two_d else dO
        assert dO.shape == O.shape
        dP = dO @ np.swapaxes(Vh, -1, -2)
        dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
        parts.dO, parts.dP, parts.dS = dO, dP, dS
        parts.dQ = tau * (dS @ Kh)
        parts.dK_heads = tau * (np.swapaxes(dS, -1, -2) @ Q)
        parts.dV_heads = np.swapaxes(P, -1, -2) @ dO
    return parts


def reference_forward(Q, K, V, *, scale=None, mask=None, is_causal=False, enable_gqa=False):
    """(O, lse) of softmax attention from the definitions, in float64 (see
    :func:`reference_parts`); shapes as attnlib.attention_forward's. A fully masked row gives
    O = 0 and lse = -inf."""
    p = reference_parts(Q, K, V, scale=scale, mask=mask, is_causal=is_causal, enable_gqa=enable_gqa)
    return p.out(p.O), p.out(p.lse)


def reference_backward(Q, K, V, dO, *, scale=None, mask=None, is_causal=False, enable_gqa=False):
    """(dQ, dK, dV) of the scalar ⟨O, dO⟩ from the definitions, in float64 (see
    :func:`reference_parts`): dV = Pᵀ dO, dP = dO Vᵀ, dS = P ∘ (dP − rowsum(dP ∘ P)),
    dQ = τ dS K, dK = τ dSᵀ Q, with dK and dV of a key/value head summed over the query heads
    that read it. Fully masked rows contribute nothing."""
    p = reference_parts(
        Q, K, V, dO, scale=scale, mask=mask, is_causal=is_causal, enable_gqa=enable_gqa
    )
    return p.out(p.dQ), p.out(p.fold(p.dK_heads)), p.out(p.fold(p.dV_heads))


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
