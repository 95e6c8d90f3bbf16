"""A stack of L BERT encoder layers with a hand-written backward pass and a pluggable kernel.

Each layer is a post-LN encoder block, as in all-MiniLM-L6-v2::

    u   = x + MHA(x)                 MHA: H heads, Q/K/V/O projections with biases
    h   = LN(u)                      LayerNorm with gain and bias
    out = LN(h + FFN(h))             FFN(h) = GELU(h W₁ + b₁) W₂ + b₂   (a stack built without
                                     FFN weights has the block h = LN(x + MHA(x)) alone)

The softmax attention of every head is delegated to an
:class:`~attnlib.models.kernels.AttentionKernel`, in both passes; everything else is exact.
This is the one implementation of the BERT layer in attnlib: :class:`attnlib.models.MiniLM`
runs its encoder through it.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .._checks import (
    AttnInputError,
    as_float_array,
    as_real_array,
    check_bool,
    check_int,
    check_memory,
    check_positive_real,
    check_real,
    check_shape,
    describe_int,
    max_abs,
)
from .kernels import STANDARD, AttentionKernel, check_kernel

__all__ = ["AttentionStack", "random_stack", "gelu", "gelu_derivative", "layer_norm"]

#: random_stack's largest weight_scale: weights of this size keep every logit finite.
_MAX_WEIGHT_SCALE = 1e100

_LAYER_KEYS = ("Wq", "bq", "Wk", "bk", "Wv", "bv", "Wo", "bo", "ln1_g", "ln1_b")
_FFN_KEYS = ("W1", "b1", "W2", "b2", "ln2_g", "ln2_b")


# -- layer pieces ----------------------------------------------------------------------------


@numba.vectorize(["float64(float64)"], nopython=True, cache=False)
def _std_normal_cdf(x):
    return 0.5 * (1.0 + math.erf(x * 0.7071067811865476))


def gelu(x) -> np.ndarray:
    """GELU in its exact erf form, x·Φ(x) = ½x(1 + erf(x/√2)) (BERT's ``hidden_act="gelu"``).

    Raises :class:`attnlib.AttnInputError` if ``x`` is not a finite real array.

    Examples
    --------
    >>> gelu([0.0, 1.0]).round(4).tolist()
    [0.0, 0.8413]
    """
    x = as_real_array("x", x, ndim=None).astype(np.float64, copy=False)
    return x * _std_normal_cdf(x)


def gelu_derivative(x) -> np.ndarray:
    """d GELU/dx = Φ(x) + x·φ(x), with φ the standard normal density (float64).

    Raises :class:`attnlib.AttnInputError` if ``x`` is not a finite real array.
    """
    x = as_real_array("x", x, ndim=None).astype(np.float64, copy=False)
    return _std_normal_cdf(x) + x * np.exp(-0.5 * x * x) * 0.3989422804014327


def layer_norm(u, g, b, eps):
    """LayerNorm over the last axis: (x̂ ∘ g + b, cache) with x̂ = (u − mean) / √(var + ε).

    A row with entries of 2^500 or more is scaled by an exact power of 2, 2^-e, first (with ε
    scaled by 4^-e), since x̂ does not change and the squares of the row would overflow;
    ``inv`` = 1/√(var + ε) is then scaled back. Other rows are computed as written.
    """
    eps = check_positive_real("eps", eps)  # ε = 0 would divide a constant row by 0
    top = np.abs(u).max(axis=-1, keepdims=True)
    if not np.isfinite(top).all():
        raise AttnInputError("u must be finite: LayerNorm of inf or NaN is NaN")
    if not (top >= _LN_SCALE_FROM).any():
        mu = u.mean(axis=-1, keepdims=True)
        xc = u - mu
        inv = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)
        xhat = xc * inv
        return xhat * g + b, (xhat, inv)
    e = np.where(top >= _LN_SCALE_FROM, np.frexp(top)[1], 0)
    us = np.ldexp(u, -e)
    xc = us - us.mean(axis=-1, keepdims=True)
    inv = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + np.ldexp(eps, -2 * e))
    xhat = xc * inv
    return xhat * g + b, (xhat, np.ldexp(inv, -e))


#: Rows of layer_norm with entries from this size up are scaled first (their D squares could
#: overflow: 2^1000·D stays below 2^1024 for D < 2^24).
_LN_SCALE_FROM = 2.0**500


def _layer_norm_backward(dy, g, cache):
    """LayerNorm backward: du = inv·(dx̂ − mean(dx̂) − x̂·mean(dx̂ ∘ x̂)), dx̂ = dy ∘ g."""
    xhat, inv = cache
    dxhat = dy * g
    du = inv * (
        dxhat
        - dxhat.mean(axis=-1, keepdims=True)
        - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True)
    )
    return du, (dy * xhat).sum(axis=0), dy.sum(axis=0)


# -- the stack ---------------------------------------------------------------------------------


class AttentionStack:
    """L post-LN encoder blocks with H heads each; forward, hand-written backward.

    Parameters
    ----------
    layers : list of dicts of float arrays, one per layer, with keys ``Wq, bq, Wk, bk, Wv, bv,
        Wo, bo, ln1_g, ln1_b`` (shapes (D, D) and (D,)) and, for an FFN block, also
        ``W1 (D, F), b1 (F,), W2 (F, D), b2 (D,), ln2_g, ln2_b (D,)``. All layers must agree.
    n_heads : H, dividing D; head size d = D/H, softmax scale 1/√d
    ln_eps : LayerNorm's ε (1e-12 in BERT)

    Raises :class:`attnlib.AttnInputError` if ``layers`` is empty, a layer lacks a key or has
    an array of the wrong shape, or ``n_heads`` does not divide D.

    Examples
    --------
    >>> stack = random_stack(2, 8, 2, seed=0)
    >>> Y, caches = stack.forward(np.ones((3, 8)))
    >>> Y.shape, len(caches), stack.d_head
    ((3, 8), 2, 4)
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
            raise AttnInputError(
                f"n_heads must divide the model width D={D}, got {describe_int(self.n_heads)}"
            )
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
        """The bottom L layers as a new stack (weights shared, never copied or modified).

        Raises :class:`attnlib.AttnInputError` unless 1 ≤ L ≤ :attr:`n_layers`.
        """
        L = check_int("L", L, maximum=self.n_layers)
        out = object.__new__(AttentionStack)
        out.__dict__.update(self.__dict__)
        out.layers = self.layers[:L]
        return out

    def check_input(self, X) -> np.ndarray:
        """X as a float64 (n, D) array; raises :class:`attnlib.AttnInputError` otherwise."""
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

    def _check_key_mask(self, key_mask, n: int):
        if key_mask is None:
            return None
        try:
            keep = np.asarray(key_mask)
        except Exception:  # ragged lists and the like
            keep = np.asarray(None)
        if keep.dtype != np.bool_ or keep.shape != (n,):
            raise AttnInputError(
                f"key_mask must be a boolean array of shape (n,) = ({n},), got dtype "
                f"{keep.dtype} and shape {keep.shape}"
            )
        if not keep.any():
            raise AttnInputError("key_mask must keep at least one key")
        return None if keep.all() else keep

    def _layer_forward(self, x, w, kernel, keep):
        c = {"x": x, "keep": keep}
        Q, K, V = (self._heads(x @ w[f"W{t}"] + w[f"b{t}"]) for t in "qkv")
        Kk, Vk = (K, V) if keep is None else (K[:, keep], V[:, keep])
        O = np.stack([kernel.forward(Q[h], Kk[h], Vk[h], self.scale) for h in range(len(Q))])
        c.update(Q=Q, K=K, V=V, ctx=self._merge(O))
        u = x + c["ctx"] @ w["Wo"] + w["bo"]
        h1, c["ln1"] = layer_norm(u, w["ln1_g"], w["ln1_b"], self.ln_eps)
        if not self.ffn:
            return h1, c
        z = h1 @ w["W1"] + w["b1"]
        gz, c["dgelu"] = gelu(z), gelu_derivative(z)
        v = h1 + gz @ w["W2"] + w["b2"]
        out, c["ln2"] = layer_norm(v, w["ln2_g"], w["ln2_b"], self.ln_eps)
        c.update(h1=h1, gz=gz)
        return out, c

    def forward(self, X, kernel: AttentionKernel = STANDARD, *, key_mask=None):
        """Run the stack on X (n, D). Returns (Y (n, D), cache for :meth:`backward`).

        ``key_mask`` (bool (n,), default all True) excludes keys from every head's attention,
        as BERT's padding mask does: queries attend only to the kept keys. ``cache[l]`` holds
        layer l's input ``"x"`` and its heads' ``"Q"``, ``"K"``, ``"V"``, each (H, n, d).

        Raises :class:`attnlib.AttnInputError` if X is not a finite (n, D) float array,
        ``kernel`` is not an AttentionKernel, ``key_mask`` is not a boolean (n,) array
        keeping at least one key, or a layer's kernel refuses its heads (for an X so large
        that the logits overflow, say), naming the layer.
        """
        X = self.check_input(X)
        check_kernel(kernel)
        keep = self._check_key_mask(key_mask, X.shape[0])
        caches = []
        x = X
        for i, w in enumerate(self.layers):
            try:
                x, c = self._layer_forward(x, w, kernel, keep)
            except AttnInputError as exc:  # the kernel's (or a layer's) refusal, in context
                raise AttnInputError(
                    f"layer {i} of the stack (kernel {kernel.name!r}) cannot run on this X: {exc}"
                ) from None
            caches.append(c)
        return x, caches

    def _layer_backward(self, g, w, c, kernel):
        gw = {}
        if self.ffn:
            dv, gw["ln2_g"], gw["ln2_b"] = _layer_norm_backward(g, w["ln2_g"], c["ln2"])
            gw["W2"] = c["gz"].T @ dv
            gw["b2"] = dv.sum(axis=0)
            dz = (dv @ w["W2"].T) * c["dgelu"]
            gw["W1"] = c["h1"].T @ dz
            gw["b1"] = dz.sum(axis=0)
            dh1 = dv + dz @ w["W1"].T
        else:
            dh1 = g
        du, gw["ln1_g"], gw["ln1_b"] = _layer_norm_backward(dh1, w["ln1_g"], c["ln1"])
        gw["Wo"] = c["ctx"].T @ du
        gw["bo"] = du.sum(axis=0)
        dO = self._heads(du @ w["Wo"].T)
        keep = c["keep"]
        dQ, dK, dV = np.empty_like(c["Q"]), np.zeros_like(c["K"]), np.zeros_like(c["V"])
        for h in range(self.n_heads):
            Kh, Vh = (c["K"][h], c["V"][h]) if keep is None else (c["K"][h][keep], c["V"][h][keep])
            dq, dk, dv_ = kernel.backward(c["Q"][h], Kh, Vh, dO[h], self.scale)
            dQ[h] = dq
            if keep is None:
                dK[h], dV[h] = dk, dv_
            else:
                dK[h][keep], dV[h][keep] = dk, dv_
        dx = du.copy()
        for t, dT in zip("qkv", (dQ, dK, dV), strict=True):
            dT = self._merge(dT)
            gw[f"W{t}"] = c["x"].T @ dT
            gw[f"b{t}"] = dT.sum(axis=0)
            dx += dT @ w[f"W{t}"].T
        return dx, gw

    def backward(self, caches, dY, kernel: AttentionKernel = STANDARD, *, return_hidden=False):
        """Back-propagate dY = ∂loss/∂Y through the stack, by hand.

        Returns (dX (n, D), grads): grads is a list (bottom layer first) of dicts with the
        same keys as the layer weights. With ``return_hidden=True`` also a list ``hidden`` of
        L + 1 arrays, ``hidden[l]`` = ∂loss/∂x_l for the input x_l of layer l
        (``hidden[0]`` = dX, ``hidden[L]`` = dY).

        Raises :class:`attnlib.AttnInputError` if ``caches`` is not what :meth:`forward`
        returned, dY is not a finite (n, D) array, ``kernel`` is not an AttentionKernel, a
        layer's kernel refuses its heads, or the gradients overflow.
        """
        check_kernel(kernel)
        n = self._check_caches(caches)
        dY = as_float_array("dY", dY)
        check_shape("dY", dY, (n, self.D), "(n, D) like the stack's output")
        check_bool("return_hidden", return_hidden)
        return self._backward(caches, dY, kernel, return_hidden, "dY")

    def _backward(self, caches, dY, kernel, return_hidden, name):
        """:meth:`backward` on validated arguments; ``name`` is the caller's name for dY.

        The pass is linear in dY, so it runs on dY·2^-e, with entries below 1, and every
        result is scaled back by 2^e: scaling by a power of 2 is exact, so the results are
        the same bits, but no intermediate overflows for a dY near the float range. A result
        beyond the float range is refused."""
        e = math.frexp(max_abs(dY))[1]
        grads = [None] * len(self.layers)
        g = np.ldexp(dY.astype(np.float64), -e)
        hidden = [dY.astype(np.float64, copy=True)]
        for i in reversed(range(len(self.layers))):
            try:
                g, gw = self._layer_backward(g, self.layers[i], caches[i], kernel)
            except AttnInputError as exc:  # the kernel's refusal, in context
                raise AttnInputError(
                    f"layer {i} of the stack (kernel {kernel.name!r}) cannot back-propagate "
                    f"this {name}: {exc}"
                ) from None
            with np.errstate(over="ignore"):
                grads[i] = {k: np.ldexp(v, e) for k, v in gw.items()}
                hidden.append(np.ldexp(g, e))
            if not all(np.isfinite(v).all() for v in (hidden[-1], *grads[i].values())):
                raise AttnInputError(
                    f"the gradients of layer {i} overflow float64: {name} is too large"
                )
        if return_hidden:
            return hidden[-1], grads, hidden[::-1]
        return hidden[-1], grads

    def _check_caches(self, caches) -> int:
        """``caches`` must be what :meth:`forward` returned: one dict per layer. Returns n."""
        keys = ("x", "keep", "Q", "K", "V", "ctx", "ln1") + (
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
        n = x.shape[0]
        heads = (self.n_heads, n, self.d_head)
        for i, c in enumerate(caches):
            if ("ln2" in c) != self.ffn:
                block = "an FFN block" if "ln2" in c else "no FFN block"
                raise AttnInputError(
                    f"caches[{i}] comes from a stack with {block}, unlike this one: pass the "
                    "caches of this stack's forward"
                )
            shapes = [np.shape(c[k]) for k in ("Q", "K", "V")]
            if np.shape(c["x"]) != (n, self.D) or any(sh != heads for sh in shapes):
                raise AttnInputError(
                    f"caches[{i}] does not fit this stack: its x must be (n, D) = "
                    f"{(n, self.D)} and its Q, K, V (H, n, d) = {heads}, got "
                    f"{np.shape(c['x'])} and {shapes}"
                )
        return n

    def loss_and_grads(self, X, G, kernel: AttentionKernel = STANDARD):
        """loss = ⟨stack(X), G⟩ and its gradients (dX, grads), both passes with ``kernel``.

        Raises :class:`attnlib.AttnInputError` if X or G is not a finite (n, D) array,
        ``kernel`` is not an AttentionKernel, or as :meth:`forward` and :meth:`backward` do
        (the loss overflowing included).
        """
        X = self.check_input(X)
        G = as_float_array("G", G)
        check_shape("G", G, X.shape, "(n, D) like X")
        Y, caches = self.forward(X, kernel)
        dX, grads = self._backward(caches, G, kernel, False, "G")
        with np.errstate(over="ignore", invalid="ignore"):
            loss = float(np.sum(Y * G))
        if not math.isfinite(loss):
            raise AttnInputError("the loss ⟨stack(X), G⟩ overflows float64: G is too large")
        return loss, dX, grads


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

    Raises :class:`attnlib.AttnInputError` on a size, seed or flag of the wrong type or range
    (L at most 64, weight_scale at most 1e100), or weights that would take more than the
    allocation limit.

    Examples
    --------
    >>> s = random_stack(3, 16, 4, seed=1, ffn=True)
    >>> s.n_layers, s.D, s.d_head, s.ffn
    (3, 16, 4, True)
    """
    L = check_int("L", L, maximum=64)
    D = check_int("D", D)
    n_heads = check_int("n_heads", n_heads)
    seed = check_int("seed", seed, minimum=0)
    ffn = check_bool("ffn", ffn)
    # Weights of 1e100 give logits of about 1e200·D from LayerNorm'd inputs: still finite.
    s = check_real(
        "weight_scale",
        weight_scale,
        minimum=0.0,
        maximum=_MAX_WEIGHT_SCALE,
        open_minimum=True,
        expected=f"a positive real number at most {_MAX_WEIGHT_SCALE:g}",
    )
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
