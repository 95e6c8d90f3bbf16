"""Attention kernels for the deep stacks: softmax attention of one head, forward and backward.

A kernel is a pair of functions ``forward(Q, K, V, scale) -> O`` and
``backward(Q, K, V, dO, scale) -> (dQ, dK, dV)``, so that a stack of layers can run with
exact attention or with an approximation in both passes:

* :data:`STANDARD` is the standard (materialising) algorithm of the core,
  :func:`attnlib.attention_forward` and :func:`attnlib.attention_backward`;
* :func:`dense_polynomial_kernel` evaluates the polynomial method's attention and gradient
  (AS24 §D in QKV form) densely on the n×m scores, and :func:`observed_range_kernel` does so
  on the range the logits span;
* :func:`with_fallback` tries a kernel and falls back to another where the first refuses.

The module imports only the core: approximate kernels are passed in by the caller.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .._checks import (
    AttnInputError,
    as_float_array,
    check_int,
    check_memory,
    check_positive_real,
    check_qkv,
    check_shape,
)
from ..config import RANGE_STEPS_PER_OCTAVE
from ..exact import attention_backward, attention_forward
from ..logits import logit_range, round_up_to_grid

__all__ = [
    "AttentionKernel",
    "check_kernel",
    "STANDARD",
    "dense_polynomial_kernel",
    "observed_range_kernel",
    "with_fallback",
]

#: The smallest logit range a polynomial is asked for (all-zero Q or K give R = 0).
_MIN_RANGE = 1e-12


@dataclass
class AttentionKernel:
    """Softmax attention for one head, forward and backward, with call statistics.

    ``forward(Q, K, V, scale) -> O`` and ``backward(Q, K, V, dO, scale) -> (dQ, dK, dV)``,
    Q (n, d), K (m, d), V (m, d_v), dO (n, d_v). ``stats`` counts calls (and fallbacks for
    :func:`with_fallback`); :meth:`reset` clears it.

    Raises :class:`attnlib.AttnInputError` if ``name`` is not a non-empty string, ``forward``
    or ``backward`` is not callable, or ``stats`` is not a dict.
    """

    name: str
    forward: Callable
    backward: Callable
    stats: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise AttnInputError(f"name must be a non-empty string, got {self.name!r:.60}")
        for which in ("forward", "backward"):
            if not callable(getattr(self, which)):
                raise AttnInputError(
                    f"{which} must be callable, got {type(getattr(self, which)).__name__}"
                )
        if not isinstance(self.stats, dict):
            raise AttnInputError(f"stats must be a dict, got {type(self.stats).__name__}")

    def reset(self) -> None:
        """Clear the call statistics."""
        self.stats.clear()

    def _count(self, key: str) -> None:
        self.stats[key] = self.stats.get(key, 0) + 1


def check_kernel(kernel) -> AttentionKernel:
    """Require an :class:`AttentionKernel` (raises :class:`attnlib.AttnInputError`)."""
    if not isinstance(kernel, AttentionKernel):
        raise AttnInputError(f"kernel must be an AttentionKernel, got {type(kernel).__name__}")
    return kernel


def _standard_forward(Q, K, V, scale):
    return attention_forward(Q, K, V, scale=scale)[0]


def _standard_backward(Q, K, V, dO, scale):
    O, lse = attention_forward(Q, K, V, scale=scale)
    return attention_backward(Q, K, V, O, dO, lse, scale=scale)


def _standard_kernel() -> AttentionKernel:
    """A fresh kernel of the standard algorithm (the core's forward and
    FlashAttention-equation backward), with statistics of its own.

    Raises nothing: it takes no arguments. The kernel's functions raise
    :class:`attnlib.AttnInputError` on bad Q, K, V, dO or scale, as the core does.

    Examples
    --------
    >>> k = _standard_kernel()
    >>> k.forward(np.ones((2, 4)), np.ones((3, 4)), np.eye(3, 2), 0.5).round(3).tolist()
    [[0.333, 0.333], [0.333, 0.333]]
    """
    return AttentionKernel("standard", _standard_forward, _standard_backward)


#: The standard algorithm's kernel: exact softmax attention by the core (shared instance).
STANDARD = _standard_kernel()


def _kernel_from_functions(name: str, forward_fn, backward_fn, **kwargs) -> AttentionKernel:
    """Wrap ``forward_fn(Q, K, V, *, scale, **kwargs) -> O`` and
    ``backward_fn(Q, K, V, dO, *, scale, **kwargs) -> (dQ, dK, dV, ...)`` as a kernel, e.g.
    ``_kernel_from_functions("AS24", pm.approx_attention, pm.approx_attention_backward,
    eps=1e-3)``: the factored polynomial method, which :func:`dense_polynomial_kernel` equals
    to rounding (tested).

    Raises :class:`attnlib.AttnInputError` if ``name`` is not a non-empty string or either
    function is not callable; the kernel's functions raise it if ``forward_fn`` does not
    return a finite (n, d_v) float array or ``backward_fn`` three of the shapes of Q, K, V.
    """
    if not isinstance(name, str) or not name:
        raise AttnInputError(f"name must be a non-empty string, got {name!r}")
    if not callable(forward_fn) or not callable(backward_fn):
        raise AttnInputError("forward_fn and backward_fn must be callable")

    def fwd(Q, K, V, scale):
        O = forward_fn(Q, K, V, scale=scale, **kwargs)
        return _checked_output("forward_fn", O, (np.shape(Q)[0], np.shape(V)[1]))

    def bwd(Q, K, V, dO, scale):
        out = backward_fn(Q, K, V, dO, scale=scale, **kwargs)
        if not isinstance(out, (tuple, list)) or len(out) < 3:
            raise AttnInputError(
                f"backward_fn must return a tuple (dQ, dK, dV, ...), got {out!r:.60}"
            )
        shapes = (np.shape(Q), np.shape(K), np.shape(V))
        return tuple(
            _checked_output(f"backward_fn's {w}", g, sh)
            for w, g, sh in zip(("dQ", "dK", "dV"), out[:3], shapes, strict=True)
        )

    return AttentionKernel(name, fwd, bwd)


def _checked_output(who: str, A, shape) -> np.ndarray:
    """A kernel function's result: a finite float array of the expected shape (``who`` names
    the function, or its output)."""
    arr = as_float_array(who, A, ndim=len(shape))
    if arr.shape != tuple(shape):
        raise AttnInputError(f"{who} must return shape {tuple(shape)}, got {arr.shape}")
    return arr


def _kernel_from_probabilities(name: str, probabilities) -> AttentionKernel:
    """An attention kernel whose softmax is ``probabilities(Q, K, scale)`` (n×m, rows summing
    to 1): forward O = P̃V, backward by the FlashAttention equations with P̃ for P::

        dV = P̃ᵀdO,  D̃ = rowsum(dO ∘ P̃V),  dS̃ = P̃ ∘ (dO Vᵀ − D̃),  dQ = τ dS̃ K,  dK = τ dS̃ᵀQ.
    """

    def fwd(Q, K, V, scale):
        Q, K, V, _, scale = _dense_inputs(Q, K, V, None, scale)
        return probabilities(Q, K, scale) @ V

    def bwd(Q, K, V, dO, scale):
        Q, K, V, dO, scale = _dense_inputs(Q, K, V, dO, scale)
        P = probabilities(Q, K, scale)
        D = np.einsum("ij,ij->i", dO, P @ V)
        dS = P * (dO @ V.T - D[:, None])
        return scale * (dS @ K), scale * (dS.T @ Q), P.T @ dO

    return AttentionKernel(name, fwd, bwd)


def _dense_inputs(Q, K, V, dO, scale):
    """Q (n, d), K (m, d), V (m, d_v), dO (n, d_v) (if given) as float64, and the scale;
    refused before the n×m arrays (the logits, their polynomial, P, and in the backward pass
    dO Vᵀ and dS) would exceed the allocation limit."""
    Q, K, V = check_qkv(Q, K, V)
    if dO is not None:
        dO = as_float_array("dO", dO)
        check_shape("dO", dO, (Q.shape[0], V.shape[1]), "(n, d_v)")
    scale = check_positive_real("scale", scale)
    check_memory(
        "the dense kernel's n×m arrays", 8 * 5 * Q.shape[0] * K.shape[0], culprits="Q or K"
    )
    as64 = (None if a is None else a.astype(np.float64, copy=False) for a in (Q, K, V, dO))
    return (*as64, scale)


def _polynomial_kernel(name, poly_for_range, per_octave, range_of):
    """The kernel of :func:`dense_polynomial_kernel` with the logit range ``range_of(Q, K,
    scale, S)`` (S = τQKᵀ), rounded up to the grid; the polynomials are cached by range."""
    if not callable(poly_for_range):
        raise AttnInputError("poly_for_range must be a callable R -> polynomial")
    # the grid index ⌈per_octave·log₂R⌉ (|log₂R| ≤ 1024) stays an exact float below 2^31
    per_octave = check_int("per_octave", per_octave, minimum=0, maximum=1 << 20)
    cache: dict[float, object] = {}

    def probabilities(Q, K, scale):
        with np.errstate(over="ignore", invalid="ignore"):
            S = scale * (Q @ K.T)
            R = range_of(Q, K, scale, S)
        if not (np.isfinite(S).all() and math.isfinite(R)):
            raise AttnInputError(
                "the logits scale * Q @ K.T overflow float64: Q, K or scale is too large"
            )
        R = round_up_to_grid(max(R, _MIN_RANGE), per_octave)
        if R not in cache:
            poly = poly_for_range(R)
            if not callable(poly):
                raise AttnInputError(
                    f"poly_for_range must return a callable polynomial, got {poly!r:.60} "
                    f"for R={R:g}"
                )
            cache[R] = poly
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            A = np.asarray(cache[R](S), dtype=np.float64)
            P = A / A.sum(axis=1, keepdims=True)
        if P.shape != S.shape or not np.isfinite(P).all():
            raise AttnInputError(
                f"poly_for_range(R={R:g})'s polynomial gives weights that are not finite on "
                "these logits (a row sum of 0 or an overflow): it must approximate exp on "
                "[-R, R]"
            )
        return P

    kernel = _kernel_from_probabilities(name, probabilities)
    kernel.ranges = cache
    return kernel


def dense_polynomial_kernel(
    poly_for_range,
    *,
    name: str = "polynomial (dense)",
    per_octave: int = RANGE_STEPS_PER_OCTAVE,
) -> AttentionKernel:
    """The polynomial method's attention and gradient, evaluated densely on n×m scores.

    ``poly_for_range(R)`` must return a polynomial p with relative error ≤ ε for exp on
    [−R, R] (e.g. ``functools.partial(pm.exp_poly, eps=1e-3)``); it may raise
    :class:`attnlib.AttnInputError` where no such polynomial exists. Each call:

    1. R = τ · maxᵢ‖Qᵢ‖₂ · maxⱼ‖Kⱼ‖₂ (Cauchy–Schwarz, :func:`attnlib.logits.logit_range`),
       rounded up to the grid 2^(k/per_octave) (:func:`attnlib.logits.round_up_to_grid`;
       ``per_octave=0``: no rounding) so that few distinct polynomials are built. The default
       is the grid of ``pm.approx_plan``;
    2. forward: Ã = p(τQKᵀ), P̃ = Ã / rowsum(Ã), O = P̃V  (AS23's approximate attention);
    3. backward: the FlashAttention equations with P̃ for P (AS24 §D in QKV form)::

           dV = P̃ᵀdO,  D̃ = rowsum(dO ∘ P̃V),  dS̃ = P̃ ∘ (dO Vᵀ − D̃),  dQ = τ dS̃ K,  dK = τ dS̃ᵀQ.

    With the default grid this equals ``pm.approx_attention`` and
    ``pm.approx_attention_backward`` to rounding (tested), since their feature map satisfies
    U Vᵀ = p(τQKᵀ) exactly; it costs O(n m (d + deg)) whatever the rank C(g+d, d). The
    returned kernel's ``ranges`` maps each R used to its polynomial.

    Raises :class:`attnlib.AttnInputError` if ``poly_for_range`` is not callable or
    ``per_octave`` is not an integer ≥ 0.

    Examples
    --------
    >>> import functools, attnlib.polymethod as pm
    >>> k = dense_polynomial_kernel(functools.partial(pm.exp_poly, eps=1e-3))
    >>> Q = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> O = k.forward(Q, Q, np.eye(2), 1.0)
    >>> bool(np.abs(O - STANDARD.forward(Q, Q, np.eye(2), 1.0)).max() < 1e-3), sorted(k.ranges)
    (True, [1.0])
    """

    def cauchy_schwarz(Q, K, scale, S):
        return logit_range(Q, K, scale=scale)

    return _polynomial_kernel(name, poly_for_range, per_octave, cauchy_schwarz)


def observed_range_kernel(
    poly_for_range,
    *,
    name: str = "polynomial (observed range)",
    per_octave: int = RANGE_STEPS_PER_OCTAVE,
) -> AttentionKernel:
    """Like :func:`dense_polynomial_kernel`, but the polynomial covers only the logits present.

    R = max|τQKᵀ| (the largest logit of the call, rounded up to 2^(k/per_octave)) instead of
    the Cauchy–Schwarz bound, so the interval [−R, R] just covers the logits and the
    polynomial's error at its ends is spent on real scores. It makes each layer's error as
    large as the polynomial allows (the evidence chapter's stress test, which uses a degree
    too low for any ε < 1, so that its weights can be negative). Costs O(n m d)
    per call for the range. Forward and backward are the equations of
    :func:`dense_polynomial_kernel`. The returned kernel's ``ranges`` maps each R used to its
    polynomial.

    Raises :class:`attnlib.AttnInputError` if ``poly_for_range`` is not callable or
    ``per_octave`` is not an integer ≥ 0.
    """

    def observed(Q, K, scale, S):
        return float(np.abs(S).max())

    return _polynomial_kernel(name, poly_for_range, per_octave, observed)


def with_fallback(primary: AttentionKernel, fallback: AttentionKernel | None = None):
    """``primary`` where it accepts the call, ``fallback`` where it raises
    :class:`attnlib.AttnInputError` (by default a fresh kernel of :data:`STANDARD`'s algorithm,
    with statistics of its own). ``stats`` counts ``"calls"`` and ``"fallbacks"`` per pass
    (``"forward calls"``, ``"forward fallbacks"``, ...).

    Raises :class:`attnlib.AttnInputError` if ``primary`` is not an :class:`AttentionKernel`
    or ``fallback`` is neither one nor None.
    """
    if not isinstance(primary, AttentionKernel):
        raise AttnInputError(f"primary must be an AttentionKernel, got {type(primary).__name__}")
    fallback = _standard_kernel() if fallback is None else fallback
    if not isinstance(fallback, AttentionKernel):
        raise AttnInputError(
            f"fallback must be an AttentionKernel or None, got {type(fallback).__name__}"
        )

    def run(which, *args):
        kernel._count(f"{which} calls")
        try:
            return getattr(primary, which)(*args)
        except AttnInputError:
            kernel._count(f"{which} fallbacks")
            return getattr(fallback, which)(*args)

    kernel = AttentionKernel(
        f"{primary.name}, else {fallback.name}",
        lambda Q, K, V, scale: run("forward", Q, K, V, scale),
        lambda Q, K, V, dO, scale: run("backward", Q, K, V, dO, scale),
    )
    return kernel
