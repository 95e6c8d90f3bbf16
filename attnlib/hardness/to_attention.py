"""Attention instances that decide OV (entries Θ(log n)) and Gap-ANN (Θ(√log n)).

Both constructions are ours. Scale convention: attnlib.attention uses τ = 1/√d by default,
AS23/AS24 (and attnlib.attention_loss) τ = 1/d, where "entries bounded by B" puts every logit
in [-B², B²]. The reductions take ``scale`` (default 1/√d, so that
``attnlib.attention(Q, K, V)`` decides the instance); ``scale=1/d`` builds the same instance,
with Q and K rescaled by √(τd), in the AS convention where the entry-size statements hold.
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import (
    AttnInputError,
    as_float_array,
    check_bool,
    check_cols,
    check_int,
    check_memory,
    check_positive_real,
    check_real,
    check_rows,
    check_scale,
)
from ..exact import attention
from .gap_ann import _check_gap
from .ov import _as_bool_pair

__all__ = ["ov_to_attention", "gap_ann_to_attention", "needed_entry_factor"]


def _entry_size(beta: float, tau: float) -> float:
    """s = √(β/τ), the entry size for logits β at scale τ; refused if it overflows."""
    s = math.sqrt(beta / tau)
    if not math.isfinite(s):
        raise AttnInputError(
            f"scale={tau!r} is too small: the instance's entries √(β/scale) overflow "
            f"(β = {beta:.3g})"
        )
    return s


def _instance_size(na: int, nb: int) -> int:
    """The n of the logit scales: the larger side, at least 3 (so that ln n > 1)."""
    return max(na, nb, 3)


def _check_instance_fits(na: int, nb: int, width: int) -> None:
    """Refuse, before allocating, an instance whose float64 Q (n_a, width), K and V
    (n_b + n rows), and a float64 temporary as large as Q or K, exceed the allocation limit."""
    rows = nb + _instance_size(na, nb)
    need = 8 * (2 * na * width + 2 * rows * width + rows)
    check_memory("the attention instance", need, culprits="A or B")


def ov_to_attention(A, B, *, scale=None):
    """Attention instance deciding OV: YES iff ``max(attention(Q, K, V)[:, 0]) >= threshold``.

    Our construction. With n = max(n_a, n_b, 3) and
    β = 3 ln n:

    - query i is s·A_i; real key j is -s·B_j; then n zero "dummy" keys;
    - s = √(β/τ), so the logit τ⟨q_i, k_j⟩ of a real pair is -β⟨A_i, B_j⟩ and every dummy
      logit is 0;
    - V (one column) is 1 on the real keys and 0 on the dummies, so Att[i, 0] is the
      attention mass row i puts on real keys.

    If A_i is orthogonal to some B_j, that key alone has weight 1 against n dummies:
    Att[i, 0] ≥ 1/(n+1). If no pair is orthogonal, every real weight is ≤ e^{-β} = n^{-3}:
    Att[i, 0] < n·n^{-3}/n = n^{-3}. The threshold 1/(4n) lies strictly between for n ≥ 3.

    Entries: max|Q|, max|K| = s. In AS24's convention τ = 1/d (pass ``scale=1/m``) this is
    √(3 m ln n): Θ(log n) when the dimension m is Θ(log n), as in OV from k-SAT.

    Parameters
    ----------
    A : bool or 0/1 (n_a, m)
    B : bool or 0/1 (n_b, m)
    scale : the softmax scale τ the instance is built for; default 1/√m, that of
        attnlib.attention

    Returns
    -------
    Q : (n_a, m) float64
    K : (n_b + n, m) float64
    V : (n_b + n, 1) float64
    threshold : float, 1/(4n)

    Raises
    ------
    AttnInputError
        if A or B is not a non-empty 2-D boolean (or 0/1) array, their column counts differ,
        ``scale`` is not positive or so small that the entries overflow, or the instance would
        not fit in memory.

    Examples
    --------
    >>> import attnlib
    >>> A, B = [[1, 0], [0, 1]], [[1, 1], [1, 0]]
    >>> Q, K, V, threshold = ov_to_attention(A, B)
    >>> bool(attnlib.attention(Q, K, V)[:, 0].max() >= threshold)  # (A_1, B_1) is orthogonal
    True
    """
    A, B = _as_bool_pair(A, B)
    (na, m), nb = A.shape, B.shape[0]
    tau = check_scale(scale, m)
    _check_instance_fits(na, nb, m)
    n = _instance_size(na, nb)
    beta = 3.0 * math.log(n)
    s = _entry_size(beta, tau)
    Q = s * A.astype(np.float64)
    K = np.zeros((nb + n, m))
    K[:nb] = -s * B
    V = np.zeros((nb + n, 1))
    V[:nb] = 1.0
    return Q, K, V, 1.0 / (4 * n)


def gap_ann_to_attention(A, B, t, eps, *, scale=None):
    """Attention instance deciding Gap Hamming NN with entries Θ(√log n).

    **Our variant** of the instance shape of AS23 Lemma 4.7 (restated as AS24 Lemma E.2):
    bounded entries, V ∈ {0, 1}, and logits on a few levels. The promise: YES if some pair
    (A_i, B_j) has Hamming distance ≤ t, NO if every pair has distance ≥ (1+ε)t.

    Our construction, with n = max(n_a, n_b, 3):

    - encode a' = (a, 1-a) and b' = (b, 1-b) in {0,1}^{2m}, so ⟨a', b'⟩ = m - Ham(a, b);
    - a mid level t' = t + εt/2 and β = (2 ln n + 2)/(t' - t);
    - query i is s·a'_i, real key j is s·b'_j, and n dummy keys equal s·α·(1, …, 1) with
      α = (m - t')/m, so that ⟨a', α·1⟩ = m - t' for every a';
    - s = √(β/τ): a real logit is β(m - Ham), a dummy logit β(m - t');
    - V (one column) is 1 on real keys, 0 on dummies; Att[i, 0] is row i's mass on real keys.

    A close pair outweighs the n dummies by e^{β(t'-t)}/n = n·e²: Att[i, 0] ≥ n e²/(1 + n e²)
    > 0.93. In a NO instance all n real keys together weigh at most
    n·e^{-β((1+ε)t - t')}/n = e^{-2}/n² of the dummies: Att[i, 0] < 0.02. The threshold is 1/2.
    Both margins use only the promise, so every instance that satisfies it is decided,
    however it was made (tests/test_hardness_chain.py tries all small instances).

    Entries: max|Q|, max|K| = s. In AS24's convention τ = 1/d = 1/(2m) this is
    s = √(8 (m/t)(ln n + 1)/ε): Θ(√log n) for a fixed ratio t/m and gap ε, whatever m is.

    Parameters
    ----------
    A, B : bool or 0/1, (n_a, m) and (n_b, m)
    t : the "close" distance, > 0
    eps : the gap ε > 0, with (1+ε)t ≤ m
    scale : the softmax scale τ the instance is built for; default 1/√(2m), that of
        attnlib.attention on these 2m-dimensional vectors

    Returns
    -------
    Q : (n_a, 2m), K : (n_b + n, 2m), V : (n_b + n, 1), threshold = 0.5

    Raises
    ------
    AttnInputError
        if A or B is not a non-empty 2-D boolean (or 0/1) array, their column counts differ,
        t and eps are not positive with (1+eps)·t ≤ m, ``scale`` is not positive or so
        small that the entries overflow, or the instance would not fit in memory.

    Examples
    --------
    >>> import attnlib
    >>> from attnlib.hardness import planted_gap_ann
    >>> A, B, pair = planted_gap_ann(8, 36, 6, 1.0, planted=True, seed=0)
    >>> Q, K, V, threshold = gap_ann_to_attention(A, B, 6, 1.0)
    >>> mass = attnlib.attention(Q, K, V)[:, 0]
    >>> bool(mass[pair[0]] > 0.93) and int((mass >= threshold).sum())
    1
    """
    A, B = _as_bool_pair(A, B)
    (na, m), nb = A.shape, B.shape[0]
    t, eps = _check_gap(t, eps, m)
    d = 2 * m
    tau = check_scale(scale, d)
    _check_instance_fits(na, nb, d)
    n = _instance_size(na, nb)
    t_mid = t + eps * t / 2
    beta = (2 * math.log(n) + 2) / (t_mid - t)
    s = _entry_size(beta, tau)
    alpha = (m - t_mid) / m
    Q = s * np.hstack([A, ~A]).astype(np.float64)
    K = np.empty((nb + n, d))
    K[:nb] = s * np.hstack([B, ~B])
    K[nb:] = s * alpha
    V = np.zeros((nb + n, 1))
    V[:nb] = 1.0
    return Q, K, V, 0.5


def _check_instances(instances) -> list[tuple]:
    """A non-empty sequence of (Q, K, V, threshold, yes) as the reductions return them, with
    the known answer ``yes`` last."""
    if isinstance(instances, (str, bytes)) or not hasattr(instances, "__len__"):
        raise AttnInputError(
            f"instances must be a sequence of (Q, K, V, threshold, yes), got {instances!r:.60}"
        )
    checked = []
    for k, item in enumerate(instances):
        if not isinstance(item, tuple) or len(item) != 5:
            raise AttnInputError(
                f"instances[{k}] must be a tuple (Q, K, V, threshold, yes), got {item!r:.60}"
            )
        Q, K, V, threshold, yes = item
        Q = as_float_array(f"instances[{k}]'s Q", Q)
        K = as_float_array(f"instances[{k}]'s K", K)
        V = as_float_array(f"instances[{k}]'s V", V)
        check_cols(f"instances[{k}]'s K", K, Q.shape[1], "its Q")
        check_rows(f"instances[{k}]'s V", V, K.shape[0], "its K")
        threshold = check_real(f"instances[{k}]'s threshold", threshold)
        checked.append((Q, K, V, threshold, check_bool(f"instances[{k}]'s yes", yes)))
    if not checked:
        raise AttnInputError("instances must hold at least one instance, got none")
    return checked


def _decides(instances, c: float, scale: float) -> bool:
    """Every instance decided correctly with Q and K shrunk by c, i.e. at scale c²·scale
    (refused, naming the instance, where the core refuses its logits or size)."""
    for k, (Q, K, V, threshold, yes) in enumerate(instances):
        try:
            # c²·scale below the smallest float: the logits are 0 at any positive scale
            tau = max(c * c * scale, math.ulp(0.0))
            top = attention(Q, K, V, scale=tau)[:, 0].max()
        except AttnInputError as exc:
            raise AttnInputError(f"instances[{k}] at scale={scale!r}: {exc}") from None
        if (top >= threshold) != yes:
            return False
    return True


def needed_entry_factor(instances, scale, *, steps: int = 20) -> float:
    """The smallest factor c ∈ (0, 1], to within 2^-steps, by which Q and K of every instance
    can be shrunk with every instance still decided correctly: the entries the reduction
    *needs* are c times those it builds.

    Each instance is ``(Q, K, V, threshold, yes)``: a reduction's output and the known answer.
    It is decided by ``max(attention(Q, K, V, scale=c²·scale)[:, 0]) >= threshold`` (shrinking
    Q and K by c is shrinking the scale by c²). The factor is found by bisection, assuming
    that an instance decided at some c is decided at every larger c.

    Raises
    ------
    AttnInputError
        if ``instances`` is not a non-empty sequence of such 5-tuples, ``scale`` is not
        positive, ``steps`` is not an integer from 1 to 60, or some instance is decided
        wrongly already at c = 1.

    Examples
    --------
    >>> from attnlib.hardness import planted_ov
    >>> cases = []
    >>> for seed in range(2):
    ...     for yes in (True, False):
    ...         A, B, _ = planted_ov(8, 9, orthogonal=yes, seed=seed)
    ...         cases.append((*ov_to_attention(A, B, scale=1 / 9), yes))
    >>> 0 < needed_entry_factor(cases, 1 / 9) <= 1
    True
    """
    instances = _check_instances(instances)
    scale = check_positive_real("scale", scale)
    steps = check_int("steps", steps, maximum=60)
    if not _decides(instances, 1.0, scale):
        raise AttnInputError(
            "instances must all be decided correctly at factor 1 (the entries as built)"
        )
    lo, hi = 0.0, 1.0
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _decides(instances, mid, scale) else (mid, hi)
    return hi
