"""The L-layer attention stack: hand-written backward vs finite differences, kernels, bad input."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import attnlib as al
import attnlib.polymethod as pm
from attnlib import AttnInputError
from attnlib.models import depth as dp
from attnlib.models import minilm as mm
from attnlib.nbtools import central_difference


def _fd_directional(f, arrays, rng, h=1e-5):
    """For each array a (changed in place, then restored): ((f(a + hv) − f(a − hv)) / 2h, v)
    with a random direction v."""
    out = []
    for a in arrays:
        v = rng.normal(size=a.shape)
        old = a.copy()
        a += h * v
        fp = f()
        a[...] = old - h * v
        fm = f()
        a[...] = old
        out.append(((fp - fm) / (2 * h), v))
    return out


@pytest.mark.parametrize("ffn", [False, True])
def test_backward_matches_finite_differences(rng, ffn):
    stack = dp.random_stack(3, 8, 2, seed=7, ffn=ffn, weight_scale=1.5)
    X = rng.normal(size=(6, 8))
    G = rng.normal(size=(6, 8))
    _, dX, grads = stack.loss_and_grads(X, G)

    def loss():
        return stack.loss_and_grads(X, G)[0]

    # every entry of dX
    num = central_difference(lambda x: stack.loss_and_grads(x, G)[0], X, 1e-6)
    assert np.max(np.abs(num - dX)) < 1e-7 * max(1.0, np.max(np.abs(dX)))
    # every parameter array, along a random direction
    for i, layer in enumerate(stack.layers):
        keys = sorted(layer)
        checks = _fd_directional(loss, [layer[k] for k in keys], rng)
        for k, (fd, v) in zip(keys, checks, strict=True):
            an = float(np.sum(grads[i][k] * v))
            assert abs(fd - an) < 1e-6 * max(1.0, abs(an)), (i, k, fd, an)


@pytest.mark.parametrize("ffn", [False, True])
def test_key_mask_is_masked_attention_and_its_backward_matches_finite_differences(rng, ffn):
    stack = dp.random_stack(2, 8, 2, seed=5, ffn=ffn, weight_scale=1.5)
    X, G = rng.normal(size=(6, 8)), rng.normal(size=(6, 8))
    keep = np.array([True, True, False, True, False, True])
    Y, caches = stack.forward(X, key_mask=keep)
    # every head attends to the kept keys only, as BERT's padding mask does
    for c in caches:
        heads = [
            al.attention_forward(c["Q"][h], c["K"][h], c["V"][h], mask=np.tile(keep, (6, 1)))[0]
            for h in range(2)
        ]
        assert np.allclose(c["ctx"], np.concatenate(heads, axis=1), atol=1e-13)
    # so an excluded token changes no other token's output
    X2 = X.copy()
    X2[2] += 1.0
    Y2 = stack.forward(X2, key_mask=keep)[0]
    assert np.allclose(np.delete(Y2, 2, axis=0), np.delete(Y, 2, axis=0), atol=1e-12)
    # the hand-written backward with the mask, against finite differences along a direction
    dX, grads = stack.backward(caches, G)
    v = rng.normal(size=X.shape)
    h = 1e-6
    loss_p = float(np.sum(stack.forward(X + h * v, key_mask=keep)[0] * G))
    loss_m = float(np.sum(stack.forward(X - h * v, key_mask=keep)[0] * G))
    fd = (loss_p - loss_m) / (2 * h)
    assert abs(fd - float(np.sum(dX * v))) < 1e-7 * max(1.0, abs(fd))
    # keeping every key is no mask at all
    assert np.array_equal(stack.forward(X, key_mask=np.ones(6, bool))[0], stack.forward(X)[0])


def test_hidden_gradients_and_truncation(rng):
    stack = dp.random_stack(4, 8, 2, seed=1)
    X, G = rng.normal(size=(5, 8)), rng.normal(size=(5, 8))
    Y, caches = stack.forward(X)
    dX, grads, hidden = stack.backward(caches, G, return_hidden=True)
    assert len(hidden) == 5 and np.array_equal(hidden[0], dX) and np.array_equal(hidden[4], G)
    # hidden[2] is the input gradient of the top two layers run on x_2
    top = dp.AttentionStack(stack.layers[2:], 2)
    x2 = stack.truncated(2).forward(X)[0]
    assert np.allclose(top.loss_and_grads(x2, G)[1], hidden[2], atol=1e-12)
    assert stack.truncated(2).n_layers == 2 and stack.n_layers == 4


def test_minilm_stack_is_the_encoder():
    model = mm.load_minilm()
    ids, mask = model.tokenize("Layer norms keep the hidden states at a fixed size.")
    run = model.run(ids, mask)
    stack = dp.stack_from_minilm(model)
    Y, _ = stack.forward(model.embed(ids)[0])
    assert np.max(np.abs(Y - run.hidden[-1][0])) < 1e-10
    Y3, _ = dp.stack_from_minilm(model, 3).forward(model.embed(ids)[0])
    assert np.max(np.abs(Y3 - run.hidden[3][0])) < 1e-10


@pytest.mark.parametrize("eps", [1e-2, 1e-6])
def test_dense_polynomial_kernel_equals_the_factored_method(rng, eps):
    Q, K = rng.normal(size=(30, 4)) * 0.7, rng.normal(size=(40, 4)) * 0.7
    V, dO = rng.normal(size=(40, 3)), rng.normal(size=(30, 3))
    dense = dp.dense_polynomial_kernel(functools.partial(pm.exp_poly, eps=eps))
    factored = dp.kernel_from_functions(
        "AS24", pm.approx_attention, pm.approx_attention_backward, eps=eps
    )
    tau = 0.5
    assert np.max(np.abs(dense.forward(Q, K, V, tau) - factored.forward(Q, K, V, tau))) < 1e-12
    pairs = zip(dense.backward(Q, K, V, dO, tau), factored.backward(Q, K, V, dO, tau), strict=True)
    for a, b in pairs:
        assert np.max(np.abs(a - b)) < 1e-12
    # and it is an approximation of exact attention within the forward bound 2ε/(1−ε)·‖V‖max
    exact = dp.EXACT.forward(Q, K, V, tau)
    err = np.max(np.abs(dense.forward(Q, K, V, tau) - exact))
    assert 0 < err <= pm.forward_error_bound(eps, np.abs(V).max())


def test_gradient_errors_exact_is_zero_and_polynomial_small(rng):
    stack = dp.random_stack(3, 16, 2, seed=2, weight_scale=0.7)
    X, G = rng.normal(size=(12, 16)), rng.normal(size=(12, 16))
    ge = dp.gradient_errors(stack, X, G, dp.exact_kernel())
    assert ge.input == 0 and ge.params == 0 and ge.through == (0.0, 0.0, 0.0)
    errs = []
    reference = dp.exact_reference(stack, X, G)
    for eps in (1e-2, 1e-5):
        kern = dp.dense_polynomial_kernel(functools.partial(pm.exp_poly, eps=eps))
        ge = dp.gradient_errors(stack, X, G, kern)
        assert len(ge.per_layer) == 3 and len(ge.through) == 3 and ge.through[-1] == ge.input
        assert dp.gradient_errors(stack, X, G, kern, reference=reference) == ge
        errs.append(ge.params)
    assert 0 < errs[1] < errs[0] < 1e-2


def test_gradient_errors_refuses_a_reference_of_another_stack_x_or_g(rng):
    """A reference is the exact pass of one (stack, X, G): any other is refused, naming it,
    before the approximate pass runs (an X of another n used to escape as numpy's
    broadcast error, and one of the same shape gave wrong errors)."""
    stack = dp.random_stack(2, 8, 2, seed=0)
    X, G = rng.normal(size=(5, 8)), rng.normal(size=(5, 8))
    ref = dp.exact_reference(stack, X, G)
    assert isinstance(ref, tuple) and len(ref) == 3  # still the (dX, grads, hidden) tuple
    calls = {
        "an input of another shape": lambda: dp.gradient_errors(
            stack, X[:3], G[:3], dp.EXACT, reference=ref
        ),
        "a different X": lambda: dp.gradient_errors(stack, X * 2, G, dp.EXACT, reference=ref),
        "a different G": lambda: dp.gradient_errors(stack, X, G * 2, dp.EXACT, reference=ref),
        "another stack": lambda: dp.gradient_errors(
            dp.random_stack(2, 8, 2, seed=1), X, G, dp.EXACT, reference=ref
        ),
    }
    for what, call in calls.items():
        with pytest.raises(AttnInputError, match=f"reference was computed for {what}"):
            call()
    # the same weights reached through another stack object (truncated shares the layers)
    same = dp.random_stack(3, 8, 2, seed=0).truncated(2)
    assert dp.gradient_errors(stack, X, G, dp.exact_kernel(), reference=ref).input == 0.0
    ref2 = dp.exact_reference(same, X, G)
    assert dp.gradient_errors(same, X, G, dp.exact_kernel(), reference=ref2).params == 0.0


def test_backward_is_exactly_scale_equivariant(rng):
    """The backward pass runs on dY scaled to entries below 1 and scales back by a power of
    2: the same bits as before for ordinary dY, and finite answers near the float range."""
    stack = dp.random_stack(2, 8, 2, seed=4, ffn=True)
    X, G = rng.normal(size=(5, 8)), rng.normal(size=(5, 8))
    caches = stack.forward(X)[1]
    dX, grads = stack.backward(caches, G)
    for k in (300, -300):
        dXk, gradsk = stack.backward(caches, np.ldexp(G, k))
        assert np.array_equal(dXk, np.ldexp(dX, k))
        assert all(
            np.array_equal(gk[name], np.ldexp(g[name], k))
            for g, gk in zip(grads, gradsk, strict=True)
            for name in g
        )
    with pytest.raises(AttnInputError, match="overflow float64: dY is too large"):
        stack.backward(caches, np.full_like(G, 1e308))
    with pytest.raises(AttnInputError, match="G is too large"):
        stack.loss_and_grads(X, np.full_like(G, 1e308))


def test_layer_norm_of_rows_beyond_the_squares_range(rng):
    """x̂ = (u − mean)/√(var + ε) does not depend on u's scale; rows whose squares overflow are
    normalised after an exact scaling (they used to come out as 0, the bias alone)."""
    from attnlib.models.stack import layer_norm

    u = rng.normal(size=(3, 16))
    g, b = rng.normal(size=16), rng.normal(size=16)
    y, (xhat, inv) = layer_norm(u, g, b, 1e-300)
    big = np.vstack([u[:1], np.ldexp(u[1:], 800)])  # rows 1, 2 beyond 2^500
    y_big, (xhat_big, inv_big) = layer_norm(big, g, b, 1e-300)
    assert np.array_equal(xhat_big[0], xhat[0]) and np.allclose(xhat_big, xhat, rtol=1e-14)
    assert np.allclose(y_big, y, rtol=1e-13) and np.allclose(np.ldexp(inv_big[1:], 800), inv[1:])


def test_caches_must_come_from_this_stack(rng):
    X, G = rng.normal(size=(5, 8)), rng.normal(size=(5, 8))
    stack = dp.random_stack(2, 8, 2, seed=0)
    with pytest.raises(AttnInputError, match=r"caches\[0\] does not fit this stack"):
        stack.backward(dp.random_stack(2, 8, 4, seed=0).forward(X)[1], G)
    with pytest.raises(AttnInputError, match=r"caches\[0\] comes from a stack with an FFN"):
        stack.backward(dp.random_stack(2, 8, 2, seed=0, ffn=True).forward(X)[1], G)
    with pytest.raises(AttnInputError, match=r"layer 0 of the stack \(kernel 'exact'\)"):
        stack.forward(X * 1e160)


def test_kernels_check_their_inputs_and_their_functions_outputs(rng):
    Q, K, V, dO = (rng.normal(size=s) for s in ((4, 3), (5, 3), (5, 2), (4, 2)))
    poly = functools.partial(pm.exp_poly, eps=1e-3)
    for kern in (dp.dense_polynomial_kernel(poly), dp.observed_range_kernel(poly)):
        with pytest.raises(AttnInputError, match="V must have m=5 rows like K"):
            kern.forward(Q, K, V[:3], 0.5)
        with pytest.raises(AttnInputError, match="dO must have shape"):
            kern.backward(Q, K, V, dO[:2], 0.5)
        with pytest.raises(AttnInputError, match="Q, K or scale is too large"):
            kern.forward(Q * 1e200, K * 1e200, V, 0.5)
    with pytest.raises(AttnInputError, match="poly_for_range must return a callable"):
        dp.dense_polynomial_kernel(lambda R: 3).forward(Q, K, V, 0.5)
    with pytest.raises(AttnInputError, match="forward must be callable"):
        dp.AttentionKernel("k", 1, len)
    with pytest.raises(AttnInputError, match="name must be a non-empty string"):
        dp.dense_polynomial_kernel(poly, name="")
    bad = dp.kernel_from_functions("k", lambda Q, K, V, scale: Q, lambda *a, scale: (1, 2))
    with pytest.raises(AttnInputError, match="forward_fn must return shape"):
        bad.forward(Q, K, V, 0.5)
    with pytest.raises(AttnInputError, match="backward_fn must return a tuple"):
        bad.backward(Q, K, V, dO, 0.5)


def test_classify_growth_of_float32_errors():
    errors = np.array([1e-30, 1.0, 1e30], np.float32)  # ratios beyond float32, not float64
    growth = dp.classify_growth(errors)
    assert growth.kind == "geometric" and abs(growth.factor / 1e30 - 1) < 1e-6


def test_with_fallback_counts_refusals(rng):
    def refuse(Q, K, V, *, scale):
        raise AttnInputError("logit range out of reach")

    def refuse_b(Q, K, V, dO, *, scale):
        raise AttnInputError("logit range out of reach")

    kern = dp.with_fallback(dp.kernel_from_functions("never", refuse, refuse_b))
    stack = dp.random_stack(2, 8, 2, seed=0)
    X, G = rng.normal(size=(4, 8)), rng.normal(size=(4, 8))
    ge = dp.gradient_errors(stack, X, G, kern)
    assert ge.params == 0.0
    assert kern.stats == {
        "forward calls": 4,
        "forward fallbacks": 4,
        "backward calls": 4,
        "backward fallbacks": 4,
    }
    kern.reset()
    assert kern.stats == {}


def test_classify_growth():
    k = np.arange(1, 13, dtype=float)
    assert dp.classify_growth(np.full(12, 3e-7)).kind == "flat"
    assert dp.classify_growth(1e-6 * k).kind == "linear"
    assert dp.classify_growth(1e-6 * 1.5**k).kind == "geometric"
    assert dp.classify_growth(1e-6 * k**2).kind == "super-linear"
    assert dp.classify_growth(1e-6 * k**0.3 * 3).kind == "sub-linear"
    assert abs(dp.classify_growth(1e-6 * k).power - 1.0) < 1e-12


BAD_INPUT = [
    (lambda stack, good, rng: dp.AttentionStack([], 2), "layers must be a non-empty list"),
    (
        lambda stack, good, rng: dp.AttentionStack([good], 3),
        "n_heads must divide the model width D=8",
    ),
    (
        lambda stack, good, rng: dp.AttentionStack([dict(good, Wq=np.zeros((8, 7)))], 2),
        r"layers\[0\]\['Wq'\] must have shape",
    ),
    (
        lambda stack, good, rng: dp.AttentionStack([good, {"Wq": good["Wq"]}], 2),
        r"layers\[1\] must be a dict with keys",
    ),
    (lambda stack, good, rng: stack.forward(rng.normal(size=(4, 6))), "X must have D=8 columns"),
    (
        lambda stack, good, rng: stack.loss_and_grads(
            rng.normal(size=(4, 8)), rng.normal(size=(5, 8))
        ),
        "G must have shape",
    ),
    (
        lambda stack, good, rng: stack.forward(rng.normal(size=(4, 8)), kernel="exact"),
        "kernel must be an AttentionKernel",
    ),
    (lambda stack, good, rng: stack.truncated(3), "L must be an integer <= 2"),
    (
        lambda stack, good, rng: dp.random_stack(2, 8, 2, seed=0, weight_scale=0),
        "weight_scale must be a positive",
    ),
    (lambda stack, good, rng: dp.stack_from_minilm("MiniLM"), "model must be a MiniLM"),
    (
        lambda stack, good, rng: dp.stack_from_minilm(mm.load_minilm(), 7),
        "L must be an integer <= 6",
    ),
    (
        lambda stack, good, rng: dp.kernel_from_functions("x", None, None),
        "forward_fn and backward_fn must be callable",
    ),
    (lambda stack, good, rng: dp.dense_polynomial_kernel(3.0), "poly_for_range must be a callable"),
    (lambda stack, good, rng: dp.with_fallback(len), "primary must be an AttentionKernel"),
    (
        lambda stack, good, rng: dp.gradient_errors(None, None, None, dp.EXACT),
        "stack must be an AttentionStack",
    ),
    (
        lambda stack, good, rng: dp.exact_reference(
            stack, rng.normal(size=(4, 8)), rng.normal(size=(4, 7))
        ),
        "G must have shape",
    ),
    (
        lambda stack, good, rng: dp.classify_growth([1e-3, 0.0, 1e-2]),
        "errors must hold at least 3 positive",
    ),
    (
        lambda stack, good, rng: stack.forward(rng.normal(size=(4, 8)), key_mask=np.ones(4)),
        r"key_mask must be a boolean array of shape \(n,\)",
    ),
    (
        lambda stack, good, rng: stack.forward(rng.normal(size=(4, 8)), key_mask=np.zeros(4, bool)),
        "key_mask must keep at least one key",
    ),
]


@pytest.mark.parametrize("call,message", BAD_INPUT)
def test_bad_input(rng, call, message):
    stack = dp.random_stack(2, 8, 2, seed=0)
    good = stack.layers[0]
    with pytest.raises(AttnInputError, match=message):
        call(stack, good, rng)


def test_observed_range_kernel_uses_the_largest_logit(rng):
    # rows of Q and K all parallel: Cauchy–Schwarz is attained, so both rules give the same R
    q = rng.normal(size=4)
    Q, K = np.outer(np.arange(1.0, 6.0), q) * 0.3, np.outer(np.arange(1.0, 8.0), q) * 0.2
    V, dO = rng.normal(size=(7, 3)), rng.normal(size=(5, 3))
    poly = functools.partial(pm.exp_poly, eps=1e-3)
    tight = dp.observed_range_kernel(poly, per_octave=0)
    wide = dp.dense_polynomial_kernel(poly, per_octave=0)
    assert np.allclose(tight.forward(Q, K, V, 0.5), wide.forward(Q, K, V, 0.5), atol=1e-13)
    for a, b in zip(tight.backward(Q, K, V, dO, 0.5), wide.backward(Q, K, V, dO, 0.5), strict=True):
        assert np.allclose(a, b, atol=1e-13)
    # random rows: the observed range is smaller than the Cauchy–Schwarz one
    Q, K = rng.normal(size=(6, 4)), rng.normal(size=(7, 4))
    tight.forward(Q, K, V, 0.5)
    R = max(tight.ranges)
    assert R == pytest.approx(0.5 * np.abs(Q @ K.T).max())
    cs = 0.5 * np.linalg.norm(Q, axis=1).max() * np.linalg.norm(K, axis=1).max()
    assert R < cs


def test_observed_range_kernel_rejects_bad_input():
    with pytest.raises(AttnInputError, match="poly_for_range"):
        dp.observed_range_kernel(3.0)
    with pytest.raises(AttnInputError, match="per_octave"):
        dp.observed_range_kernel(pm.exp_poly, per_octave=-1)
