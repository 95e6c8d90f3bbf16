"""Random inputs of AS24's loss in the bounded-entry regime, for experiments and examples.

AS24's loss L(X) = ½‖D(X)⁻¹ exp(A₁XA₂ᵀ/d) A₃Y − E‖²_F takes A₁, A₂, A₃, E (n, d) and X, Y
(d, d); its almost-linear algorithm needs the entries of Q = A₁X and K = A₂ bounded by B, so
that every logit lies in [−B², B²]. Two generators, both returning ``(X, A1, A2, A3, Y, E)``
in float64 in the argument order of :func:`attnlib.attention_loss_grad`:

* :func:`bounded_loss_inputs`: entries of A₁, A₂, A₃, E uniform in [−B, B], X near the
  identity: typical inputs, whose logit range is usually well below B²;
* :func:`sign_loss_inputs`: entries of A₁ and A₂ equal to ±B and X = I, so that every row of
  Q and K has norm B√d and the Cauchy–Schwarz logit range is exactly B² whatever n is (the
  degree and rank of the polynomial method do not drift with n).
"""

from __future__ import annotations

import sys

import numpy as np

from .._checks import AttnInputError, check_int, check_memory, check_real

__all__ = ["bounded_loss_inputs", "sign_loss_inputs"]


def _arguments(n, d, B, rng, m=None):
    n, d = check_int("n", n), check_int("d", d)
    m = n if m is None else check_int("m", m)
    # U(−B, B) needs the width 2B as a finite float
    B = check_real(
        "B",
        B,
        minimum=0.0,
        maximum=sys.float_info.max / 2,
        open_minimum=True,
        expected=f"a positive real number at most {sys.float_info.max / 2:.3g}",
    )
    if not isinstance(rng, np.random.Generator):
        try:
            seed = check_int("rng", rng, minimum=0)
        except AttnInputError:
            raise AttnInputError(
                f"rng must be a numpy Generator or an int seed >= 0, got {rng!r:.60}"
            ) from None
        rng = np.random.default_rng(seed)
    check_memory("the loss inputs", 8 * (2 * n + 2 * m + 2 * d) * d, culprits="n, m or d")
    return n, d, m, B, rng


def bounded_loss_inputs(n, d, B, rng, *, m=None):
    """AS24's loss inputs with every entry of A₁, A₂, A₃ and E uniform in [−B, B].

    A₁ and E are (n, d), A₂ and A₃ are (m, d) (``m`` defaults to n), X = I + 0.1·U(−1, 1)
    and Y = U(−1, 1) are (d, d). ``rng`` is a numpy Generator (drawn from, in the order A₁,
    A₂, A₃, E, X, Y) or an int seed. Returns ``(X, A1, A2, A3, Y, E)``.

    Raises :class:`attnlib.AttnInputError` if n, d or m is not a positive integer, B is not a
    positive number at most half the largest float, rng is neither a Generator nor an int
    seed ≥ 0, or the arrays are too large for memory.

    Examples
    --------
    >>> X, A1, A2, A3, Y, E = bounded_loss_inputs(5, 3, 0.5, 0, m=4)
    >>> A1.shape, A2.shape, X.shape, bool(np.abs(A2).max() <= 0.5)
    ((5, 3), (4, 3), (3, 3), True)
    """
    n, d, m, B, rng = _arguments(n, d, B, rng, m)
    A1 = rng.uniform(-B, B, (n, d))
    A2, A3 = (rng.uniform(-B, B, (m, d)) for _ in range(2))
    E = rng.uniform(-B, B, (n, d))
    X = np.eye(d) + 0.1 * rng.uniform(-1, 1, (d, d))
    Y = rng.uniform(-1, 1, (d, d))
    return X, A1, A2, A3, Y, E


def sign_loss_inputs(n, d, B, rng):
    """AS24's loss inputs whose logit range is exactly B²: A₁, A₂ with entries ±B (random
    signs), X = I, and A₃, E, Y uniform in [−1, 1].

    All of A₁, A₂, A₃, E are (n, d); X, Y are (d, d). Every row of Q = A₁X and K = A₂ has
    norm B√d, so τ·max‖Qᵢ‖·max‖Kⱼ‖ = B² at τ = 1/d for every n. ``rng`` is a numpy Generator
    (drawn from, in the order A₁, A₂, A₃, E, Y) or an int seed. Returns
    ``(X, A1, A2, A3, Y, E)``.

    Raises :class:`attnlib.AttnInputError` as :func:`bounded_loss_inputs` does.

    Examples
    --------
    >>> from attnlib.polymethod import loss_plan
    >>> args = sign_loss_inputs(100, 4, 0.75, 0)
    >>> float(np.abs(args[1]).min()), round(loss_plan(*args[:3], eps=1e-3).R, 4)
    (0.75, 0.5694)
    """
    n, d, _, B, rng = _arguments(n, d, B, rng)
    A1, A2 = (B * rng.choice([-1.0, 1.0], (n, d)) for _ in range(2))
    A3, E = (rng.uniform(-1, 1, (n, d)) for _ in range(2))
    return np.eye(d), A1, A2, A3, rng.uniform(-1, 1, (d, d)), E
