"""A stack of L attention layers with a hand-written backward pass and a pluggable kernel.

Each layer is a BERT encoder block (post-LN, as in all-MiniLM-L6-v2)::

    u   = x + MHA(x)                 MHA: H heads, Q/K/V/O projections with biases
    h   = LN(u)                      LayerNorm with gain and bias
    out = LN(h + FFN(h))             FFN(h) = GELU(h W₁ + b₁) W₂ + b₂   (optional: ffn=False
                                     makes the block h = LN(x + MHA(x)) alone)

The softmax attention inside MHA is delegated to an :class:`AttentionKernel`, a pair of
functions ``forward(Q, K, V, scale) -> O`` and ``backward(Q, K, V, dO, scale) -> (dQ, dK, dV)``:

* :data:`EXACT` uses the core, :func:`attnlib.attention_forward` and
  :func:`attnlib.attention_backward`;
* :func:`kernel_from_functions` wraps any pair with that signature, e.g. the polynomial
  method's ``pm.approx_attention`` / ``pm.approx_attention_backward`` (AS24 §D in QKV form);
* :func:`dense_polynomial_kernel` evaluates the *same* polynomial-method quantities densely
  (P̃ = p(S)/rowsum p(S), then the FlashAttention backward equations with P̃ for P). The
  feature map is an exact identity (U Vᵀ = p(S)), so this equals the factored method up to
  rounding while costing n²·deg instead of n·C(g+d, d): it is how errors are measured where
  the rank is too large to build;
* :func:`with_fallback` tries a kernel and falls back to another where the first refuses
  (logit range out of reach, rank over budget), counting how often.

The approximate kernels replace the attention in *both* passes of every layer, as an
almost-linear training step would (LSS+24). Everything outside attention is exact.

Loss convention: ``loss = ⟨stack(X), G⟩`` for a fixed (n, D) array G, so the upstream
gradient is G itself and every difference between two gradients comes from the kernels.
The module imports only the core: the approximate kernels are passed in by the caller.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .._checks import (
    AttnInputError,
    as_float_array,
    as_real_array,
    check_bool,
    check_int,
    check_memory,
    check_positive_real,
    check_shape,
)
from ..exact import attention_backward, attention_forward
from .minilm import MiniLM, gelu, gelu_derivative

__all__ = [
    "AttentionKernel",
    "EXACT",
    "exact_kernel",
    "kernel_from_functions",
    "dense_polynomial_kernel",
    "observed_range_kernel",
    "with_fallback",
    "AttentionStack",
    "GradientError",
    "random_stack",
    "stack_from_minilm",
    "exact_reference",
    "gradient_errors",
    "Growth",
    "classify_growth",
]

_LAYER_KEYS = ("Wq", "bq", "Wk", "bk", "Wv", "bv", "Wo", "bo", "ln1_g", "ln1_b")
_FFN_KEYS = ("W1", "b1", "W2", "b2", "ln2_g", "ln2_b")


# -- kernels -------------------------------------------------------------------------------


@dataclass
class AttentionKernel:
    """Softmax attention for one head, forward and backward, with call statistics.

    ``forward(Q, K, V, scale) -> O`` and ``backward(Q, K, V, dO, scale) -> (dQ, dK, dV)``,
    Q (n, d), K (m, d), V (m, d_v), dO (n, d_v). ``stats`` counts calls (and fallbacks for
    :func:`with_fallback`); :meth:`reset` clears it.
    """

    name: str
    forward: Callable
    backward: Callable
    stats: dict = field(default_factory=dict)

    def reset(self) -> None:
        """Clear the call statistics."""
        self.stats.clear()

    def _count(self, key: str) -> None:
        self.stats[key] = self.stats.get(key, 0) + 1


def _exact_forward(Q, K, V, scale):
    return attention_forward(Q, K, V, scale=scale)[0]


def _exact_backward(Q, K, V, dO, scale):
    O, lse = attention_forward(Q, K, V, scale=scale)
    return attention_backward(Q, K, V, O, dO, lse, scale=scale)


def exact_kernel() -> AttentionKernel:
    """A fresh exact kernel (the core's forward and FlashAttention-equation backward)."""
    return AttentionKernel("exact", _exact_forward, _exact_backward)


#: The exact kernel (shared instance; use :func:`exact_kernel` for private statistics).
EXACT = exact_kernel()


def kernel_from_functions(name: str, forward_fn, backward_fn, **kwargs) -> AttentionKernel:
    """Wrap ``forward_fn(Q, K, V, *, scale, **kwargs) -> O`` and
    ``backward_fn(Q, K, V, dO, *, scale, **kwargs) -> (dQ, dK, dV)`` as a kernel.

    Example: ``kernel_from_functions("AS24", pm.approx_attention,
    pm.approx_attention_backward, eps=1e-3)``.
    """
    if not isinstance(name, str) or not name:
        raise AttnInputError(f"name must be a non-empty string, got {name!r}")
    if not callable(forward_fn) or not callable(backward_fn):
        raise AttnInputError("forward_fn and backward_fn must be callable")

    def fwd(Q, K, V, scale):
        return forward_fn(Q, K, V, scale=scale, **kwargs)

    def bwd(Q, K, V, dO, scale):
        out = backward_fn(Q, K, V, dO, scale=scale, **kwargs)
        return tuple(out[:3])

    return AttentionKernel(name, fwd, bwd)


def _grid_range(R: float, per_octave: int) -> float:
    """R rounded *up* to the grid 2^(k/per_octave): a valid (larger) logit range whose
    polynomial can be cached and reused across calls."""
    if per_octave == 0:
        return R
    return 2.0 ** (math.ceil(per_octave * math.log2(R)) / per_octave)


def _kernel_from_probabilities(name: str, probabilities) -> AttentionKernel:
    """An attention kernel whose softmax is ``probabilities(Q, K, scale)`` (n×m, rows summing
    to 1): forward O = P̃V, backward by the FlashAttention equations with P̃ for P::

        dV = P̃ᵀdO,  D̃ = rowsum(dO ∘ P̃V),  dS̃ = P̃ ∘ (dO Vᵀ − D̃),  dQ = τ dS̃ K,  dK = τ dS̃ᵀQ.
    """

    def fwd(Q, K, V, scale):
        return probabilities(Q, K, scale) @ np.asarray(V, dtype=np.float64)

    def bwd(Q, K, V, dO, scale):
        Q, K, V, dO = (np.asarray(a, dtype=np.float64) for a in (Q, K, V, dO))
        P = probabilities(Q, K, scale)
        D = np.einsum("ij,ij->i", dO, P @ V)
        dS = P * (dO @ V.T - D[:, None])
        return scale * (dS @ K), scale * (dS.T @ Q), P.T @ dO

    return AttentionKernel(name, fwd, bwd)


def dense_polynomial_kernel(
    poly_for_range, *, name: str = "polynomial (dense)", per_octave: int = 16
) -> AttentionKernel:
    """The polynomial method's attention and gradient, evaluated densely on n×m scores.

    ``poly_for_range(R)`` must return a polynomial p with relative error ≤ ε for exp on
    [−R, R] (e.g. ``functools.partial(pm.exp_poly, eps=1e-3)``); it may raise
    :class:`attnlib.AttnInputError` where no such polynomial exists. Each call:

    1. R = τ · maxᵢ‖Qᵢ‖₂ · maxⱼ‖Kⱼ‖₂ (Cauchy–Schwarz, the rule of ``pm.logit_range``),
       rounded up to the grid 2^(k/per_octave) (``per_octave=0``: no rounding) so that few
       distinct polynomials are built. The default 16 is the grid ``pm.approx_plan`` uses;
    2. forward: Ã = p(τQKᵀ), P̃ = Ã / rowsum(Ã), O = P̃V  (AS23's approximate attention);
    3. backward: the FlashAttention equations with P̃ for P (AS24 §D in QKV form)::

           dV = P̃ᵀdO,  D̃ = rowsum(dO ∘ P̃V),  dS̃ = P̃ ∘ (dO Vᵀ − D̃),  dQ = τ dS̃ K,  dK = τ dS̃ᵀQ.

    With the default grid this equals ``pm.approx_attention`` and
    ``pm.approx_attention_backward`` to rounding (tested), since their feature map satisfies
    U Vᵀ = p(τQKᵀ) exactly; it costs O(n m (d + deg)) whatever the rank C(g+d, d).
    """
    if not callable(poly_for_range):
        raise AttnInputError("poly_for_range must be a callable R -> polynomial")
    per_octave = check_int("per_octave", per_octave, minimum=0)
    cache: dict[float, object] = {}

    def probabilities(Q, K, scale):
        Q = np.asarray(Q, dtype=np.float64)
        K = np.asarray(K, dtype=np.float64)
        qn = math.sqrt(float(np.einsum("ij,ij->i", Q, Q).max()))
        kn = math.sqrt(float(np.einsum("ij,ij->i", K, K).max()))
        R = _grid_range(max(scale * qn * kn, 1e-12), per_octave)
        if R not in cache:
            cache[R] = poly_for_range(R)
        A = cache[R](scale * (Q @ K.T))
        return A / A.sum(axis=1, keepdims=True)

    return _kernel_from_probabilities(name, probabilities)


def observed_range_kernel(
    poly_for_range, *, name: str = "polynomial (observed range)", per_octave: int = 16
) -> AttentionKernel:
    """Like :func:`dense_polynomial_kernel`, but the polynomial covers only the logits present.

    R = max|τQKᵀ| (the largest logit of the call, rounded up to 2^(k/per_octave)) instead of
    the Cauchy–Schwarz bound, so the interval [−R, R] just covers the logits and the
    polynomial's error at its ends is spent on real scores. Used to make each layer's error
    as large as the polynomial allows (Chapter 9, Q1). Costs O(n m d) per call for the range.
    Forward and backward are the equations of :func:`dense_polynomial_kernel`. The returned
    kernel's ``ranges`` maps each R used to its polynomial.

    Raises
    ------
    AttnInputError
        if ``poly_for_range`` is not callable or ``per_octave`` is not an integer >= 0.
    """
    if not callable(poly_for_range):
        raise AttnInputError("poly_for_range must be a callable R -> polynomial")
    per_octave = check_int("per_octave", per_octave, minimum=0)
    cache: dict[float, object] = {}

    def probabilities(Q, K, scale):
        S = scale * (np.asarray(Q, dtype=np.float64) @ np.asarray(K, dtype=np.float64).T)
        R = _grid_range(max(float(np.abs(S).max()), 1e-12), per_octave)
        if R not in cache:
            cache[R] = poly_for_range(R)
        A = cache[R](S)
        return A / A.sum(axis=1, keepdims=True)

    kernel = _kernel_from_probabilities(name, probabilities)
    kernel.ranges = cache
    return kernel


def with_fallback(primary: AttentionKernel, fallback: AttentionKernel | None = None):
    """``primary`` where it accepts the call, ``fallback`` (default exact) where it raises
    :class:`attnlib.AttnInputError`. ``stats`` counts ``"calls"`` and ``"fallbacks"`` per pass
    (``"forward calls"``, ``"forward fallbacks"``, ...)."""
    if not isinstance(primary, AttentionKernel):
        raise AttnInputError(f"primary must be an AttentionKernel, got {type(primary).__name__}")
    fallback = exact_kernel() if fallback is None else fallback
    if not isinstance(fallback, AttentionKernel):
        raise AttnInputError(
            f"fallback must be an AttentionKernel or None, got {type(fallback).__name__}"
        )
    kernel = AttentionKernel(f"{primary.name}, else {fallback.name}", None, None)

    def run(which, *args):
        kernel._count(f"{which} calls")
        try:
            return getattr(primary, which)(*args)
        except AttnInputError:
            kernel._count(f"{which} fallbacks")
            return getattr(fallback, which)(*args)

    kernel.forward = lambda Q, K, V, scale: run("forward", Q, K, V, scale)
    kernel.backward = lambda Q, K, V, dO, scale: run("backward", Q, K, V, dO, scale)
    return kernel


# -- layer pieces ----------------------------------------------------------------------------


def _ln_forward(u, g, b, eps):
    mu = u.mean(axis=-1, keepdims=True)
    xc = u - mu
    inv = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)
    xhat = xc * inv
    return xhat * g + b, (xhat, inv)


def _ln_backward(dy, g, cache):
    """LayerNorm backward: du = inv·(dx̂ − mean(dx̂) − x̂·mean(dx̂ ∘ x̂)), dx̂ = dy ∘ g."""
    xhat, inv = cache
    dxhat = dy * g
    du = inv * (
        dxhat
        - dxhat.mean(axis=-1, keepdims=True)
        - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True)
    )
    return du, (dy * xhat).sum(axis=0), dy.sum(axis=0)


def _gelu_and_grad(z):
    """GELU(z) = zΦ(z) and its derivative Φ(z) + zφ(z) (exact erf form)."""
    return gelu(z), gelu_derivative(z)


# -- the stack ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class GradientError:
    """Relative errors ‖g̃ − g‖₂ / ‖g‖₂ of one approximate backward pass against the exact one.

    ``input``: the gradient w.r.t. the stack's input X (back-propagated through every layer);
    ``params``: all parameter gradients as one vector; ``per_layer``: the parameter
    gradients of each layer (index 0 = the bottom layer, the last one reached by backprop);
    ``through``: ``through[k - 1]`` is the error of ∂loss/∂x_{L−k}, the gradient after it has
    been back-propagated through k layers (k = 1..L; ``through[-1] == input``).
    """

    input: float
    params: float
    per_layer: tuple
    through: tuple


class AttentionStack:
    """L post-LN encoder blocks with H heads each; forward, hand-written backward.

    Parameters
    ----------
    layers : list of dicts of float arrays, one per layer, with keys ``Wq, bq, Wk, bk, Wv, bv,
        Wo, bo, ln1_g, ln1_b`` (shapes (D, D) and (D,)) and, for an FFN block, also
        ``W1 (D, F), b1 (F,), W2 (F, D), b2 (D,), ln2_g, ln2_b (D,)``. All layers must agree.
    n_heads : H, dividing D; head size d = D/H, softmax scale 1/√d
    ln_eps : LayerNorm's ε (1e-12 in BERT)
    """

    def __init__(self, layers, n_heads: int, *, ln_eps: float = 1e-12):
        if not isinstance(layers, (list, tuple)) or len(layers) == 0:
            raise AttnInputError("layers must be a non-empty list of weight dicts")
        self.n_heads = check_int("n_heads", n_heads)
        self.ln_eps = check_positive_real("ln_eps", ln_eps)
        first = layers[0]
        if not isinstance(first, dict) or "Wq" not in first:
            raise AttnInputError("layers[0] must be a dict with keys Wq, bq, Wk, ...")
        D = as_float_array("layers[0]['Wq']", first["Wq"]).shape[0]
        if D % self.n_heads:
            raise AttnInputError(f"n_heads must divide the model width D={D}, got {n_heads}")
        self.ffn = "W1" in first
        keys = _LAYER_KEYS + (_FFN_KEYS if self.ffn else ())
        F = as_float_array("layers[0]['W1']", first["W1"]).shape[1] if self.ffn else 0
        shapes = {k: (D, D) for k in ("Wq", "Wk", "Wv", "Wo")}
        shapes.update({k: (D,) for k in ("bq", "bk", "bv", "bo", "ln1_g", "ln1_b")})
        if self.ffn:
            shapes.update({"W1": (D, F), "b1": (F,), "W2": (F, D)})
            shapes.update({k: (D,) for k in ("b2", "ln2_g", "ln2_b")})
        self.layers = []
        for i, lw in enumerate(layers):
            if not isinstance(lw, dict) or set(keys) - set(lw):
                raise AttnInputError(f"layers[{i}] must be a dict with keys {keys}")
            clean = {}
            for k in keys:
                a = as_float_array(f"layers[{i}][{k!r}]", lw[k], ndim=len(shapes[k]))
                check_shape(f"layers[{i}][{k!r}]", a, shapes[k], "as in layers[0]")
                clean[k] = a.astype(np.float64, copy=False)
            self.layers.append(clean)
        self.D = D
        self.d_head = D // self.n_heads
        self.scale = 1.0 / math.sqrt(self.d_head)

    @property
    def n_layers(self) -> int:
        """L, the number of layers."""
        return len(self.layers)

    def truncated(self, L: int) -> AttentionStack:
        """The bottom L layers as a new stack (weights shared, never copied or modified)."""
        L = check_int("L", L, maximum=self.n_layers)
        out = object.__new__(AttentionStack)
        out.__dict__.update(self.__dict__)
        out.layers = self.layers[:L]
        return out

    def _check_x(self, X):
        X = as_float_array("X", X)
        if X.shape[1] != self.D:
            raise AttnInputError(
                f"X must have D={self.D} columns (the model width), got {X.shape[1]}"
            )
        return X.astype(np.float64, copy=False)

    def _heads(self, A):
        n = A.shape[0]
        return A.reshape(n, self.n_heads, self.d_head).transpose(1, 0, 2)

    def _merge(self, A):
        return A.transpose(1, 0, 2).reshape(A.shape[1], self.D)

    def forward(self, X, kernel: AttentionKernel = EXACT):
        """Run the stack on X (n, D). Returns (Y (n, D), cache for :meth:`backward`)."""
        X = self._check_x(X)
        _check_kernel(kernel)
        caches = []
        x = X
        for w in self.layers:
            c = {"x": x}
            Q, K, V = (self._heads(x @ w[f"W{t}"] + w[f"b{t}"]) for t in "qkv")
            O = np.stack(
                [kernel.forward(Q[h], K[h], V[h], self.scale) for h in range(self.n_heads)]
            )
            c.update(Q=Q, K=K, V=V, ctx=self._merge(O))
            u = x + c["ctx"] @ w["Wo"] + w["bo"]
            h1, c["ln1"] = _ln_forward(u, w["ln1_g"], w["ln1_b"], self.ln_eps)
            if self.ffn:
                z = h1 @ w["W1"] + w["b1"]
                gz, c["dgelu"] = _gelu_and_grad(z)
                v = h1 + gz @ w["W2"] + w["b2"]
                x, c["ln2"] = _ln_forward(v, w["ln2_g"], w["ln2_b"], self.ln_eps)
                c.update(h1=h1, gz=gz)
            else:
                x = h1
            caches.append(c)
        return x, caches

    def backward(self, caches, dY, kernel: AttentionKernel = EXACT, *, return_hidden=False):
        """Back-propagate dY = ∂loss/∂Y through the stack, by hand.

        Returns (dX (n, D), grads): grads is a list (bottom layer first) of dicts with the
        same keys as the layer weights. With ``return_hidden=True`` also a list ``hidden`` of
        L + 1 arrays, ``hidden[l]`` = ∂loss/∂x_l for the input x_l of layer l
        (``hidden[0]`` = dX, ``hidden[L]`` = dY).
        """
        _check_kernel(kernel)
        n = self._check_caches(caches)
        dY = as_float_array("dY", dY)
        check_shape("dY", dY, (n, self.D), "(n, D) like the stack's output")
        grads = [None] * len(self.layers)
        g = dY.astype(np.float64, copy=True)
        hidden = [g]
        for i in reversed(range(len(self.layers))):
            w, c = self.layers[i], caches[i]
            gw = {}
            if self.ffn:
                dv, gw["ln2_g"], gw["ln2_b"] = _ln_backward(g, w["ln2_g"], c["ln2"])
                gw["W2"] = c["gz"].T @ dv
                gw["b2"] = dv.sum(axis=0)
                dz = (dv @ w["W2"].T) * c["dgelu"]
                gw["W1"] = c["h1"].T @ dz
                gw["b1"] = dz.sum(axis=0)
                dh1 = dv + dz @ w["W1"].T
            else:
                dh1 = g
            du, gw["ln1_g"], gw["ln1_b"] = _ln_backward(dh1, w["ln1_g"], c["ln1"])
            gw["Wo"] = c["ctx"].T @ du
            gw["bo"] = du.sum(axis=0)
            dO = self._heads(du @ w["Wo"].T)
            dQ, dK, dV = (np.empty_like(c["Q"]) for _ in range(3))
            for h in range(self.n_heads):
                dQ[h], dK[h], dV[h] = kernel.backward(
                    c["Q"][h], c["K"][h], c["V"][h], dO[h], self.scale
                )
            dx = du.copy()
            for t, dT in zip("qkv", (dQ, dK, dV), strict=True):
                dT = self._merge(dT)
                gw[f"W{t}"] = c["x"].T @ dT
                gw[f"b{t}"] = dT.sum(axis=0)
                dx += dT @ w[f"W{t}"].T
            grads[i] = gw
            g = dx
            hidden.append(g)
        if return_hidden:
            return g, grads, hidden[::-1]
        return g, grads

    def _check_caches(self, caches) -> int:
        """``caches`` must be what :meth:`forward` returned: one dict per layer. Returns n."""
        keys = ("x", "Q", "K", "V", "ctx", "ln1") + (
            ("ln2", "h1", "gz", "dgelu") if self.ffn else ()
        )
        if not isinstance(caches, list) or len(caches) != self.n_layers:
            raise AttnInputError(
                f"caches must be the list of {self.n_layers} layer caches returned by forward, "
                f"got {type(caches).__name__}"
                + (f" of length {len(caches)}" if isinstance(caches, list) else "")
            )
        for i, c in enumerate(caches):
            if not isinstance(c, dict) or set(keys) - set(c):
                raise AttnInputError(f"caches[{i}] must be a layer cache returned by forward")
        x = caches[0]["x"]
        if not isinstance(x, np.ndarray) or x.ndim != 2 or x.shape[1] != self.D:
            raise AttnInputError("caches[0] must be a layer cache returned by forward")
        return x.shape[0]

    def loss_and_grads(self, X, G, kernel: AttentionKernel = EXACT):
        """loss = ⟨stack(X), G⟩ and its gradients (dX, grads), both passes with ``kernel``."""
        X = self._check_x(X)
        G = as_float_array("G", G)
        check_shape("G", G, X.shape, "(n, D) like X")
        Y, caches = self.forward(X, kernel)
        dX, grads = self.backward(caches, G, kernel)
        return float(np.sum(Y * G)), dX, grads


def _check_kernel(kernel):
    if not isinstance(kernel, AttentionKernel):
        raise AttnInputError(f"kernel must be an AttentionKernel, got {type(kernel).__name__}")


def _flat(grads) -> np.ndarray:
    return np.concatenate([v.ravel() for gw in grads for _, v in sorted(gw.items())])


def _rel(a, b) -> float:
    nb = float(np.linalg.norm(b))
    return float(np.linalg.norm(a - b)) / nb if nb > 0 else float(np.linalg.norm(a))


def _check_reference(reference, stack) -> None:
    """``reference`` must be an :func:`exact_reference` result: (dX, grads, hidden)."""
    ok = (
        isinstance(reference, tuple)
        and len(reference) == 3
        and isinstance(reference[0], np.ndarray)
        and isinstance(reference[1], list)
        and len(reference[1]) == stack.n_layers
        and isinstance(reference[2], list)
        and len(reference[2]) == stack.n_layers + 1
    )
    if not ok:
        raise AttnInputError(
            "reference must be the (dX, grads, hidden) tuple returned by exact_reference, got "
            f"{type(reference).__name__}"
        )


def exact_reference(stack: AttentionStack, X, G):
    """The exact pass that :func:`gradient_errors` compares against: (dX, grads, hidden).

    Compute it once and pass it as ``reference=`` to compare several kernels on the same
    (stack, X, G) without recomputing it.
    """
    if not isinstance(stack, AttentionStack):
        raise AttnInputError(f"stack must be an AttentionStack, got {type(stack).__name__}")
    X = stack._check_x(X)
    G = as_float_array("G", G)
    check_shape("G", G, X.shape, "(n, D) like X")
    return stack.backward(stack.forward(X, EXACT)[1], G, EXACT, return_hidden=True)


def gradient_errors(
    stack: AttentionStack, X, G, kernel: AttentionKernel, *, reference=None
) -> GradientError:
    """Relative error of ``kernel``'s gradients against the exact kernel's, for
    loss = ⟨stack(X), G⟩ (both passes of every layer use the kernel under test).

    ``reference`` may be a precomputed :func:`exact_reference` for the same (stack, X, G).
    """
    if reference is None:
        reference = exact_reference(stack, X, G)
    _check_reference(reference, stack)
    _check_kernel(kernel)
    X = stack._check_x(X)
    G = as_float_array("G", G)
    approx = stack.backward(stack.forward(X, kernel)[1], G, kernel, return_hidden=True)
    (dX, grads, hid), (dXa, gradsa, hida) = reference, approx
    per_layer = tuple(_rel(_flat([a]), _flat([e])) for a, e in zip(gradsa, grads, strict=True))
    L = stack.n_layers
    through = tuple(_rel(hida[L - k], hid[L - k]) for k in range(1, L + 1))
    return GradientError(_rel(dXa, dX), _rel(_flat(gradsa), _flat(grads)), per_layer, through)


# -- constructors ------------------------------------------------------------------------------


def random_stack(
    L: int,
    D: int,
    n_heads: int,
    *,
    seed: int,
    ffn: bool = False,
    weight_scale: float = 1.0,
    ln_eps: float = 1e-12,
) -> AttentionStack:
    """A stack of L layers with Gaussian weights N(0, weight_scale²/fan_in) (seeded).

    LayerNorm gains are 1 + N(0, 0.1²) and all biases N(0, 0.1²), so that every parameter
    has a non-trivial gradient (the finite-difference tests rely on it). The FFN (if any)
    has width 4D. With weight_scale = 1, LN'd inputs give logits of order 1.
    """
    L = check_int("L", L, maximum=64)
    D = check_int("D", D)
    n_heads = check_int("n_heads", n_heads)
    seed = check_int("seed", seed, minimum=0)
    ffn = check_bool("ffn", ffn)
    s = check_positive_real("weight_scale", weight_scale)
    # float64 weights: 4D² + 6D per layer, + 8D² + 9D with the FFN, twice while the stack
    # converts them
    per_layer = 4 * D * D + 6 * D + (8 * D * D + 9 * D if ffn else 0)
    check_memory("random_stack's weights", 2 * 8 * L * per_layer, culprits="D or L")
    rng = np.random.default_rng(seed)
    layers = []
    for _ in range(L):
        w = {k: rng.normal(0.0, s / math.sqrt(D), (D, D)) for k in ("Wq", "Wk", "Wv", "Wo")}
        w.update({k: rng.normal(0.0, 0.1, D) for k in ("bq", "bk", "bv", "bo", "ln1_b")})
        w["ln1_g"] = 1.0 + rng.normal(0.0, 0.1, D)
        if ffn:
            w["W1"] = rng.normal(0.0, s / math.sqrt(D), (D, 4 * D))
            w["b1"] = rng.normal(0.0, 0.1, 4 * D)
            w["W2"] = rng.normal(0.0, s / math.sqrt(4 * D), (4 * D, D))
            w["b2"] = rng.normal(0.0, 0.1, D)
            w["ln2_g"] = 1.0 + rng.normal(0.0, 0.1, D)
            w["ln2_b"] = rng.normal(0.0, 0.1, D)
        layers.append(w)
    return AttentionStack(layers, n_heads, ln_eps=ln_eps)


def stack_from_minilm(model, L: int | None = None) -> AttentionStack:
    """The bottom L (default all 6) encoder layers of a :class:`~attnlib.models.MiniLM`.

    With the exact kernel, ``stack_from_minilm(m).forward(m.embed(ids)[0])`` reproduces
    ``m.run(ids).hidden[-1][0]`` (tested).
    """
    if not isinstance(model, MiniLM):
        raise AttnInputError(
            f"model must be a MiniLM (from load_minilm()), got {type(model).__name__}"
        )
    n_layers = model.config.n_layers
    L = n_layers if L is None else check_int("L", L, maximum=n_layers)
    layers = [model.layer_weights(i) for i in range(L)]
    return AttentionStack(layers, model.config.n_heads, ln_eps=model.config.ln_eps)


# -- reading an error-against-depth curve -------------------------------------------------------


@dataclass(frozen=True)
class Growth:
    """How an error curve e_1, …, e_L grows with depth k (see :func:`classify_growth`).

    ``kind`` is ``"flat"``, ``"sub-linear"``, ``"linear"``, ``"super-linear"`` or
    ``"geometric"``; ``ratio`` = e_L / e_1; ``power`` p of the fit e ≈ a·k^p;
    ``factor`` c of the fit e ≈ a·c^k (per layer); ``margin``, the smallest relative distance
    between a statistic the decision consulted and its threshold (a classification with a
    margin far above the rounding noise of the errors is the same on every machine).
    """

    kind: str
    ratio: float
    power: float
    factor: float
    margin: float = math.inf

    def __str__(self) -> str:
        return (
            f"{self.kind} (e_L/e_1 = {self.ratio:.3g}, power-law fit k^{self.power:.2f}, "
            f"geometric fit {self.factor:.3g}^k)"
        )


def classify_growth(errors, *, flat_within: float = 2.0) -> Growth:
    """Classify an error curve over depths k = 1..L as flat, polynomial or geometric.

    Rule (ours, stated so that it can be checked):

    * **flat** if max_k e_k / min_k e_k < ``flat_within`` (default 2);
    * otherwise fit log e against log k (power law a·k^p) and against k (geometric a·c^k)
      by least squares; the fit with the smaller residual wins. A geometric winner with
      c ≥ 1.1 is **geometric**; otherwise the power p decides: p < 0.5 **sub-linear**,
      0.5 ≤ p ≤ 1.5 **linear**, p > 1.5 **super-linear**.

    ``errors`` must hold at least 3 positive finite numbers. The result's ``margin`` is the
    smallest relative distance of a consulted statistic from its threshold: a caller that must
    get the same answer on every machine checks that it is far above the errors' rounding noise.
    """
    e = as_real_array("errors", errors, ndim=1)
    if e.size < 3 or (e <= 0).any():
        raise AttnInputError(f"errors must hold at least 3 positive numbers, got {e.tolist()}")
    flat_within = check_positive_real("flat_within", flat_within)
    k = np.arange(1, e.size + 1, dtype=np.float64)
    le = np.log(e)
    p, a1 = np.polyfit(np.log(k), le, 1)
    b, a2 = np.polyfit(k, le, 1)
    res_pow = float(np.sum((le - (a1 + p * np.log(k))) ** 2))
    res_geo = float(np.sum((le - (a2 + b * k)) ** 2))
    with np.errstate(over="ignore"):
        ratio, factor = float(e[-1] / e[0]), float(np.exp(b))
    if not (math.isfinite(ratio) and math.isfinite(factor)):
        raise AttnInputError(
            "errors span too many orders of magnitude: e_L/e_1 or the per-layer factor "
            f"overflows a float (errors from {e.min():.3g} to {e.max():.3g})"
        )
    spread = float(e.max() / e.min())

    def gap(x: float, threshold: float) -> float:
        return abs(x - threshold) / abs(threshold)

    margins = [gap(spread, flat_within)]
    if spread < flat_within:
        kind = "flat"
    else:
        margins.append(abs(res_geo - res_pow) / max(res_geo, res_pow, 1e-300))
        if res_geo < res_pow:
            margins.append(gap(factor, 1.1))
        if res_geo < res_pow and factor >= 1.1:
            kind = "geometric"
        else:
            margins += [gap(float(p), 0.5), gap(float(p), 1.5)]
            kind = "sub-linear" if p < 0.5 else "linear" if p <= 1.5 else "super-linear"
    return Growth(kind, ratio, float(p), factor, min(margins))
