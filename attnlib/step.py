"""One training step of attention: the forward pass, then the backward pass, by one algorithm.

:func:`forward_backward` returns O and the gradients dQ, dK, dV for an upstream gradient dO,
by one of three algorithms, named as everywhere in attnlib (the ``kernels=`` argument):

- ``"standard"``: :func:`attnlib.attention_forward` then :func:`attnlib.attention_backward`,
  which materialise the n×m scores: time Θ(nmd), memory Θ(nm);
- ``"flash"``: :func:`attnlib.flash_forward` then :func:`attnlib.flash_backward`, the compiled
  tiled kernels: the same Θ(nmd) time, O((n + m)·d) extra memory;
- ``"polynomial"``: AS23's approximate attention and AS24's almost-linear backward pass
  (:func:`attnlib.polymethod.approx_attention` and
  :func:`attnlib.polymethod.approx_attention_backward`) at accuracy ``eps``: time and memory
  O((n + m)·r·d) for the rank r of the polynomial's features, one head (2-D input), no mask.
"""

from __future__ import annotations

from ._checks import AttnInputError, check_bool, check_choice, check_open_unit
from .exact import attention_backward, attention_forward
from .fast import flash_backward, flash_forward

__all__ = ["KERNELS", "forward_backward"]

#: The algorithms of :func:`forward_backward`, by the names of its ``kernels`` argument.
KERNELS = ("standard", "flash", "polynomial")

_PASSES = {
    "standard": (attention_forward, attention_backward),
    "flash": (flash_forward, flash_backward),
}


def forward_backward(
    Q,
    K,
    V,
    dO,
    *,
    kernels="flash",
    scale=None,
    mask=None,
    is_causal=False,
    enable_gqa=False,
    eps=None,
):
    """One training step of attention: O = softmax(τ·QKᵀ)V, then dQ, dK, dV for the upstream
    gradient dO = ∂loss/∂O (FA2 Alg. 1 and 2 for ``"flash"``; AS24 §D for ``"polynomial"``).

    Parameters
    ----------
    Q, K, V : (n, d), (m, d), (m, d_v) float arrays, or batched multi-head (..., H, n, d),
        (..., H_kv, m, d), (..., H_kv, m, d_v) as in :func:`attnlib.attention_forward`
        ("standard" and "flash" only)
    dO : shaped like O: (n, d_v), or (..., H, n, d_v)
    kernels : "standard", "flash" (default) or "polynomial" (:data:`KERNELS`)
    scale : τ, default 1/√d
    mask, is_causal, enable_gqa : as in :func:`attnlib.attention_forward` ("standard" and
        "flash" only)
    eps : the polynomial method's accuracy, in (0, 1): required by "polynomial", refused by
        the others

    Returns
    -------
    (O, dQ, dK, dV), shaped like (dO, Q, K, V), in the inputs' common float dtype. For
    "polynomial", O and the gradients of its approximation f̃ of softmax (forward error at
    most 2ε/(1−ε)·‖V‖_max, :func:`attnlib.polymethod.forward_error_bound`).

    Raises
    ------
    AttnInputError
        if ``kernels`` is unknown; if ``eps`` is given to "standard" or "flash", or is not in
        (0, 1) for "polynomial"; if "polynomial" is asked for what it does not support (a
        ``mask``, ``is_causal=True``, ``enable_gqa=True``, batched input); and for the
        arguments' errors as the passes raise them.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V, dO = (rng.uniform(-0.5, 0.5, (64, 4)) for _ in range(4))
    >>> standard = forward_backward(Q, K, V, dO, kernels="standard")
    >>> flash = forward_backward(Q, K, V, dO)
    >>> all(np.allclose(a, b, rtol=1e-12, atol=1e-15) for a, b in zip(standard, flash))
    True
    >>> O, dQ, dK, dV = forward_backward(Q, K, V, dO, kernels="polynomial", eps=1e-3)
    >>> bool(np.abs(O - standard[0]).max() < 2e-3 * np.abs(V).max()), dK.shape
    (True, (64, 4))
    """
    check_choice("kernels", kernels, KERNELS)
    if kernels == "polynomial":
        return _polynomial(Q, K, V, dO, scale, mask, is_causal, enable_gqa, eps)
    if eps is not None:
        raise AttnInputError(
            f"eps must be None with kernels={kernels!r} (eps is the accuracy of "
            f"kernels='polynomial'), got {eps!r:.60}"
        )
    forward, backward = _PASSES[kernels]
    kw = dict(scale=scale, mask=mask, is_causal=is_causal, enable_gqa=enable_gqa)
    O, lse = forward(Q, K, V, **kw)
    return (O, *backward(Q, K, V, O, dO, lse, **kw))


def _polynomial(Q, K, V, dO, scale, mask, is_causal, enable_gqa, eps):
    """The step by the polynomial method, after refusing what it has no form for."""
    eps = check_open_unit("eps", eps)
    if check_bool("is_causal", is_causal):
        raise AttnInputError(
            "is_causal must be False with kernels='polynomial': the polynomial method's "
            "low-rank factors cover every key of every query"
        )
    if check_bool("enable_gqa", enable_gqa):
        raise AttnInputError(
            "enable_gqa must be False with kernels='polynomial': the polynomial method runs "
            "one head, Q (n, d), K (m, d), V (m, d_v)"
        )
    if mask is not None:
        raise AttnInputError(
            "mask must be None with kernels='polynomial': the polynomial method's low-rank "
            "factors cover every key of every query"
        )
    # the part imports the core, never the reverse at import time
    from .polymethod import approx_attention, approx_attention_backward

    # the backward pass first: it checks dO too, and its peak memory bounds the forward's
    grads = approx_attention_backward(Q, K, V, dO, eps=eps, scale=scale)
    return (approx_attention(Q, K, V, eps=eps, scale=scale), *grads)
