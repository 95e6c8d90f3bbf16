"""Bad-input rows of Part IV, models: the numpy MiniLM, deep attention stacks and their kernels.

The rows' machinery, their ids and the inputs the parts share: bad_input_cases.py.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
from bad_input_cases import (
    SG,
    SX,
    K,
    Q,
    Table,
    V,
    broadcast_view,
    dO,
    finite,
    loaded_minilm,
    word,
)

import attnlib as al
from attnlib import models as mm
from attnlib import polymethod as pm
from attnlib.models import gguf, smollm
from attnlib.models import kernels as kn
from attnlib.models import minilm as mlm
from attnlib.models import stack as st

table = Table()


# ---- reals and ints out of range ----

table.raises(
    "models.random_stack",
    "weight_scale=10**400",
    lambda: mm.random_stack(1, 4, 2, seed=0, weight_scale=10**400),
    "weight_scale",
)

table.valid(
    "models.classify_growth",
    "int-list",
    lambda: mm.classify_growth([1, 2, 4]),
    lambda g: g.ratio == 4.0 and g.kind in ("linear", "super-linear", "geometric"),
)
table.valid(
    "models.classify_growth",
    "numpy-int-array",
    lambda: mm.classify_growth(np.array([3, 3, 3], dtype=np.int32)),
    lambda g: g.kind == "flat",
)

# ---- models ----


@cache
def _stack():
    return mm.random_stack(2, 8, 2, seed=0)


def _weights_copy():
    """A float64 copy of the model's weights, as a reader would pass them, all writeable."""
    from safetensors.numpy import load_file

    raw = load_file(str(mlm._model_dir() / "model.safetensors"))
    return {k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in raw.items()}


def _minilm_keeps_flags():
    weights = _weights_copy()
    before = {k: (v.flags.writeable, v.ctypes.data) for k, v in weights.items()}
    model = mm.MiniLM(weights, loaded_minilm()._tok, loaded_minilm().config)
    after = {k: (v.flags.writeable, v.ctypes.data) for k, v in weights.items()}
    ids, mask = model.tokenize("bad input never changes the caller's arrays")
    return before == after and all(w for w, _ in after.values()), model.run(ids, mask).pooled()


table.valid(
    "models.MiniLM", "weights-flags-unchanged", _minilm_keeps_flags, lambda r: r[0] and finite(r[1])
)
table.raises(
    "models.MiniLM",
    "weights=None",
    lambda: mm.MiniLM(None, loaded_minilm()._tok, loaded_minilm().config),
    word("weights"),
)
table.raises(
    "models.MiniLM",
    "missing-key",
    lambda: mm.MiniLM(
        {k: v for k, v in _weights_copy().items() if k != "encoder.layer.3.output.dense.bias"},
        loaded_minilm()._tok,
        loaded_minilm().config,
    ),
    r"weights is missing the tensor 'encoder\.layer\.3\.output\.dense\.bias'",
)
table.raises(
    "models.MiniLM",
    "tokenizer=None",
    lambda: mm.MiniLM(_weights_copy(), None, loaded_minilm().config),
    word("tokenizer"),
)
table.raises(
    "models.MiniLM", "config=dict", lambda: mm.MiniLM({}, loaded_minilm()._tok, {}), word("config")
)
table.raises(
    "models.MiniLM.tokenize", "texts=[]", lambda: loaded_minilm().tokenize([]), word("texts")
)
table.raises(
    "models.MiniLM.tokenize",
    "max_length=1",
    lambda: loaded_minilm().tokenize("hi", max_length=1),
    "max_length",
)
table.raises(
    "models.MiniLM.token_ids", "text=''", lambda: loaded_minilm().token_ids(" "), word("text")
)
table.raises(
    "models.MiniLM.layer_weights",
    "layer=6",
    lambda: loaded_minilm().layer_weights(6),
    word("layer"),
)
table.raises(
    "models.MiniLM.embed", "ids=float", lambda: loaded_minilm().embed(np.ones((1, 3))), "input_ids"
)
table.raises(
    "models.MiniLM.run",
    "ids=vocab",
    lambda: loaded_minilm().run(np.array([[1, 10**6]])),
    "input_ids",
)
table.raises(
    "models.MiniLM.run",
    "mask=int",
    lambda: loaded_minilm().run(np.array([[101, 102]]), np.ones((1, 2))),
    "attention_mask",
)
table.raises("models.MiniLM.encode", "texts=3", lambda: loaded_minilm().encode(3), word("texts"))
table.raises(
    "models.corpus_chunks", "model=None", lambda: mm.corpus_chunks(None, 16), word("model")
)
table.raises("models.corpus_chunks", "n=2", lambda: mm.corpus_chunks(loaded_minilm(), 2), word("n"))
table.valid(
    "models.corpus_chunks",
    "n=16-count=2",
    lambda: mm.corpus_chunks(loaded_minilm(), 16, count=2),
    lambda c: c.shape == (2, 16),
)
table.raises(
    "models.stack_from_minilm", "model=str", lambda: mm.stack_from_minilm("minilm"), word("model")
)
table.raises(
    "models.stack_from_minilm", "L=7", lambda: mm.stack_from_minilm(loaded_minilm(), 7), word("L")
)
table.raises(
    "models.AttentionStack",
    "Wq-scalar",
    lambda: mm.AttentionStack([{"Wq": 3.0}], 2),
    r"layers\[0\]\['Wq'\]",
)
table.raises(
    "models.AttentionStack",
    "Wq-1-D",
    lambda: mm.AttentionStack([{"Wq": np.ones(4)}], 2),
    r"layers\[0\]\['Wq'\]",
)
table.raises("models.AttentionStack", "layers=[]", lambda: mm.AttentionStack([], 2), word("layers"))
table.raises(
    "models.AttentionStack.forward",
    "key_mask=int",
    lambda: _stack().forward(SX, key_mask=np.ones(5)),
    "key_mask",
)
table.raises(
    "models.MiniLM.token_id", "unknown", lambda: loaded_minilm().token_id("[NOPE]"), word("token")
)
table.raises(
    "models.observed_range_kernel",
    "not-callable",
    lambda: mm.observed_range_kernel(3),
    "poly_for_range",
)
table.valid(
    "models.observed_range_kernel",
    "covers-the-logits",
    lambda: (lambda k: (k.forward(Q, K, V, 0.5), k.ranges))(
        mm.observed_range_kernel(lambda R: pm.exp_poly(R, 1e-3), per_octave=0)
    ),
    lambda r: finite(r[0]) and math.isclose(max(r[1]), 0.5 * np.abs(Q @ K.T).max()),
)
table.raises("models.int8_round", "clip_quantile=0", lambda: mm.int8_round(Q, 0.0), "clip_quantile")
table.raises("models.int8_round", "X=int", lambda: mm.int8_round(Q.astype(int)), word("X"))
table.valid(
    "models.int8_round",
    "keeps-max",
    lambda: mm.int8_round(Q),
    lambda Qh: math.isclose(np.abs(Qh).max(), np.abs(Q).max(), rel_tol=1e-15),
)
table.raises(
    "models.AttentionStack", "n_heads=3", lambda: mm.AttentionStack(_stack().layers, 3), "n_heads"
)
table.raises(
    "models.AttentionStack.backward",
    "caches=None",
    lambda: _stack().backward(None, SG),
    word("caches"),
)
table.raises(
    "models.AttentionStack.backward",
    "caches=[{}]",
    lambda: _stack().backward([{}, {}], SG),
    r"caches\[0\]",
)
table.raises(
    "models.AttentionStack.backward",
    "dY-shape",
    lambda: _stack().backward(_stack().forward(SX)[1], SG[:3]),
    word("dY"),
)
table.raises(
    "models.AttentionStack.forward", "X-columns", lambda: _stack().forward(SX[:, :4]), word("X")
)
table.raises(
    "models.AttentionStack.forward",
    "kernel=str",
    lambda: _stack().forward(SX, "exact"),
    word("kernel"),
)
table.raises(
    "models.AttentionStack.loss_and_grads",
    "G-shape",
    lambda: _stack().loss_and_grads(SX, SG[:2]),
    word("G"),
)
table.raises("models.AttentionStack.truncated", "L=3", lambda: _stack().truncated(3), word("L"))
table.valid(
    "models.AttentionStack.loss_and_grads",
    "finite",
    lambda: _stack().loss_and_grads(SX, SG),
    lambda r: finite(r[0]) and finite(r[1]),
)
table.raises(
    "models.gradient_errors",
    "reference=42",
    lambda: mm.gradient_errors(_stack(), SX, SG, mm.STANDARD, reference=42),
    word("reference"),
)
table.raises(
    "models.gradient_errors",
    "kernel=None",
    lambda: mm.gradient_errors(_stack(), SX, SG, None),
    word("kernel"),
)
table.valid(
    "models.gradient_errors",
    "exact-vs-exact",
    lambda: mm.gradient_errors(_stack(), SX, SG, kn._standard_kernel()),
    lambda g: g.input == 0.0 and g.params == 0.0,
)
table.raises(
    "models.exact_reference", "stack=None", lambda: mm.exact_reference(None, SX, SG), word("stack")
)
# ---- the decoder, on a one-layer random Llama (the shipped weights take seconds to load) ----


@cache
def _tiny_decoder():
    rng = np.random.default_rng(0)
    meta = {
        "general.architecture": "llama",
        "llama.block_count": 1,
        "llama.attention.head_count": 2,
        "llama.attention.head_count_kv": 1,
        "llama.embedding_length": 4,
        "llama.rope.freq_base": 100.0,
        "llama.attention.layer_norm_rms_epsilon": 1e-5,
    }
    shapes = {
        "token_embd": (10, 4),
        "output_norm": (4,),
        "blk.0.attn_norm": (4,),
        "blk.0.attn_q": (4, 4),
        "blk.0.attn_k": (2, 4),
        "blk.0.attn_v": (2, 4),
        "blk.0.attn_output": (4, 4),
        "blk.0.ffn_norm": (4,),
        "blk.0.ffn_gate": (6, 4),
        "blk.0.ffn_up": (6, 4),
        "blk.0.ffn_down": (4, 6),
    }
    tensors = {f"{k}.weight": rng.normal(size=s).astype(np.float32) for k, s in shapes.items()}
    return smollm.SmolLM(meta, tensors, tokenizer=None)


table.raises("models.gguf.read_gguf", "path=None", lambda: gguf.read_gguf(None), word("path"))
table.raises(
    "models.gguf.read_gguf",
    "path=a-python-file",
    lambda: gguf.read_gguf(gguf.__file__),
    word("path"),
)
table.raises("models.smollm.SmolLM", "meta={}", lambda: smollm.SmolLM({}, {}, None), word("meta"))
table.raises(
    "models.smollm.SmolLM.token_ids",
    "text=''",
    lambda: _tiny_decoder().token_ids(""),
    word("text"),
)
table.raises(
    "models.smollm.SmolLM.run",
    "input_ids=float",
    lambda: _tiny_decoder().run(np.ones((1, 3))),
    word("input_ids"),
)
table.raises(
    "models.smollm.SmolLM.run",
    "input_ids=out-of-vocabulary",
    lambda: _tiny_decoder().run([3, 10]),
    word("input_ids"),
)
table.valid(
    "models.smollm.SmolLM.run",
    "one-window",
    lambda: _tiny_decoder().run([1, 2, 3]),
    lambda r: r.Q.shape == (1, 1, 2, 3, 2) and finite(r.hidden),
)
table.raises(
    "models.smollm.SmolLM.next_token_logits",
    "input_ids=[]",
    lambda: _tiny_decoder().next_token_logits([]),
    word("input_ids"),
)
table.raises(
    "models.smollm.SmolLM.decode",
    "ids=-1",
    lambda: _tiny_decoder().decode(-1),
    word("ids"),
)
table.raises(
    "models.smollm.entry_bounds", "run=None", lambda: smollm.entry_bounds(None), word("run")
)
table.raises("models.smollm.qk_norm", "X=nan", lambda: smollm.qk_norm([[1.0, np.nan]]), word("X"))
table.raises("models.smollm.qk_norm", "X=1-d", lambda: smollm.qk_norm([1.0, 2.0]), word("X"))
table.raises(
    "models.layer_lipschitz", "stack=None", lambda: mm.layer_lipschitz(None, SX), word("stack")
)
table.raises(
    "models.layer_lipschitz",
    "iterations=0",
    lambda: mm.layer_lipschitz(_stack(), SX, iterations=0),
    word("iterations"),
)
table.raises(
    "models.depth_error_bound",
    "kernel=None",
    lambda: mm.depth_error_bound(_stack(), SX, SG, None),
    word("kernel"),
)
table.raises(
    "models.depth_error_bound",
    "G=wrong-shape",
    lambda: mm.depth_error_bound(_stack(), SX, SG[:3], mm.STANDARD),
    word("G"),
)
table.raises(
    "models.depth_error_bound",
    "lipschitz=one-too-few",
    lambda: mm.depth_error_bound(_stack(), SX, SG, mm.STANDARD, lipschitz=[1.0]),
    word("lipschitz"),
)
table.raises(
    "models.depth_error_bound",
    "lipschitz=negative",
    lambda: mm.depth_error_bound(
        _stack(), SX, SG, mm.STANDARD, lipschitz=[-1.0] * _stack().n_layers
    ),
    word("lipschitz"),
)
table.valid(
    "models.depth_error_bound",
    "exact-vs-exact",
    lambda: mm.depth_error_bound(_stack(), SX, SG, kn._standard_kernel()),
    lambda b: b.bound == b.measured == (0.0,) * len(b.bound),
)
table.raises(
    "models.with_fallback",
    "fallback=42",
    lambda: mm.with_fallback(mm.STANDARD, fallback=42),
    word("fallback"),
)
table.raises("models.with_fallback", "primary=42", lambda: mm.with_fallback(42), word("primary"))
table.raises(
    "models.kernels._kernel_from_functions",
    "name=''",
    lambda: kn._kernel_from_functions("", al.attention, al.attention),
    word("name"),
)
table.raises(
    "models.kernels._kernel_from_functions",
    "not-callable",
    lambda: kn._kernel_from_functions("k", 1, 2),
    "forward_fn",
)
table.raises(
    "models.dense_polynomial_kernel",
    "not-callable",
    lambda: mm.dense_polynomial_kernel(3),
    "poly_for_range",
)
table.raises(
    "models.dense_polynomial_kernel",
    "per_octave=-1",
    lambda: mm.dense_polynomial_kernel(pm.exp_poly, per_octave=-1),
    "per_octave",
)
table.valid(
    "models.kernels._standard_kernel",
    "fresh",
    lambda: kn._standard_kernel().forward(Q, K, V, 0.5),
    lambda O: np.allclose(O, al.attention(Q, K, V, scale=0.5)),
)
table.valid(
    "models.AttentionKernel.reset",
    "clears",
    lambda: (lambda k: (k._count("x"), k.reset(), k.stats)[2])(kn._standard_kernel()),
    lambda s: s == {},
)
table.raises(
    "models.random_stack",
    "ffn='yes'",
    lambda: mm.random_stack(2, 8, 2, seed=0, ffn="yes"),
    word("ffn"),
)
table.raises(
    "models.random_stack",
    "D=10**6",
    lambda: mm.random_stack(2, 10**6, 2, seed=0),
    r"D or L is too large",
)
table.raises("models.random_stack", "L=65", lambda: mm.random_stack(65, 8, 2, seed=0), word("L"))
table.raises(
    "models.random_stack", "seed=1.5", lambda: mm.random_stack(1, 8, 2, seed=1.5), word("seed")
)
table.raises(
    "models.classify_growth",
    "1e-320..1e300",
    lambda: mm.classify_growth([1e-320, 1, 1e300]),
    word("errors"),
)
table.raises(
    "models.classify_growth", "two-points", lambda: mm.classify_growth([1.0, 2.0]), word("errors")
)
table.raises(
    "models.classify_growth",
    "bools",
    lambda: mm.classify_growth([True, True, True]),
    word("errors"),
)
table.raises(
    "models.classify_growth",
    "flat_within=0",
    lambda: mm.classify_growth([1.0, 2.0, 3.0], flat_within=0),
    "flat_within",
)
table.valid(
    "models.classify_growth",
    "geometric",
    lambda: mm.classify_growth([1.0, 10.0, 100.0, 1000.0]),
    lambda g: g.kind == "geometric" and math.isclose(g.factor, 10.0),
)
table.valid(
    "models.load_corpus", "text", mm.load_corpus, lambda t: isinstance(t, str) and len(t) > 1000
)
table.valid(
    "models.minilm._model_dir", "files", mlm._model_dir, lambda p: (p / "config.json").is_file()
)
table.valid("models.load_minilm", "cached", lambda: mm.load_minilm() is mm.load_minilm(), bool)
table.raises(
    "models.MiniLM",
    "word-table-shape",
    lambda: mm.MiniLM(
        {"embeddings.word_embeddings.weight": np.ones((2, 2))},
        loaded_minilm()._tok,
        loaded_minilm().config,
    ),
    r"weights\['embeddings\.word_embeddings\.weight'\] must be a float array of shape",
)
table.valid(
    "models.BertRun.pooled",
    "unit-norm",
    lambda: loaded_minilm().run(*loaded_minilm().tokenize(["a b", "c"])).pooled(),
    lambda e: np.allclose(np.linalg.norm(e, axis=1), 1.0),
)

# ---- edge cases of Parts II-IV ----

# gradient_errors' reference must be the exact pass of this stack, X and G


@cache
def _reference():
    return mm.exact_reference(_stack(), SX, SG)


@cache
def _ffn_stack():
    return mm.random_stack(2, 8, 2, seed=0, ffn=True)


for what, call, pattern in [
    (
        "reference-of-another-n",
        lambda: mm.gradient_errors(_stack(), SX[:3], SG[:3], mm.STANDARD, reference=_reference()),
        r"reference was computed for an input of another shape",
    ),
    (
        "reference-of-another-X",
        lambda: mm.gradient_errors(_stack(), SX + 1, SG, mm.STANDARD, reference=_reference()),
        r"reference was computed for a different X",
    ),
    (
        "reference-of-another-G",
        lambda: mm.gradient_errors(_stack(), SX, SG + 1, mm.STANDARD, reference=_reference()),
        r"reference was computed for a different G",
    ),
    (
        "reference-of-another-stack",
        lambda: mm.gradient_errors(_ffn_stack(), SX, SG, mm.STANDARD, reference=_reference()),
        r"reference was computed for another stack",
    ),
    (
        "reference-of-the-same-shapes-another-stack",
        lambda: mm.gradient_errors(
            mm.random_stack(2, 8, 2, seed=1), SX, SG, mm.STANDARD, reference=_reference()
        ),
        r"reference was computed for another stack",
    ),
    (
        "reference-junk-tuple",
        lambda: mm.gradient_errors(
            _stack(), SX, SG, mm.STANDARD, reference=(np.ones(3), [1, 2], [1, 2, 3])
        ),
        word("reference"),
    ),
]:
    table.raises("models.gradient_errors", what, call, pattern)
table.valid(
    "models.gradient_errors",
    "reference-reused",
    lambda: mm.gradient_errors(_stack(), SX, SG, kn._standard_kernel(), reference=_reference()),
    lambda g: g.input == 0.0 and g.params == 0.0,
)

table.raises(
    "models.int8_round",
    "10^9-entry-view",
    lambda: mm.int8_round(broadcast_view((10**6, 1000))),
    word("X"),
)
table.raises(
    "models.classify_growth",
    "10^9-point-view",
    lambda: mm.classify_growth(broadcast_view((10**9,), 1.0)),
    word("errors"),
)

table.raises(
    "models.MiniLM.embed",
    "10^5x512-id-view",
    lambda: loaded_minilm().embed(broadcast_view((10**5, 512), 101, np.int64)),
    word("input_ids"),
)
table.raises(
    "models.MiniLM.run",
    "10^5x512-id-view",
    lambda: loaded_minilm().run(broadcast_view((10**5, 512), 101, np.int64)),
    word("input_ids"),
)
table.raises(
    "models.dense_polynomial_kernel",
    "10^6-row-views",
    lambda: mm.dense_polynomial_kernel(lambda R: pm.exp_poly(R, 1e-2)).forward(
        broadcast_view((10**6, 4)), broadcast_view((10**6, 4)), broadcast_view((10**6, 2)), 0.5
    ),
    r"Q or K is too large",
)

# the stack names its own argument, the layer and the kernel
table.raises(
    "models.AttentionStack.forward",
    "X=1e160-logits-overflow",
    lambda: _stack().forward(SX * 1e160),
    r"layer 0 of the stack \(kernel 'standard'\) cannot run on this X",
)
table.raises(
    "models.AttentionStack.backward",
    "caches-of-4-heads",
    lambda: _stack().backward(mm.random_stack(2, 8, 4, seed=0).forward(SX)[1], SG),
    r"caches\[0\] does not fit this stack",
)
table.raises(
    "models.AttentionStack.backward",
    "caches-of-an-FFN-stack",
    lambda: _stack().backward(_ffn_stack().forward(SX)[1], SG),
    r"caches\[0\] comes from a stack with an FFN block",
)
table.raises(
    "models.random_stack",
    "weight_scale=1e308",
    lambda: mm.random_stack(1, 8, 2, seed=0, weight_scale=1e308),
    word("weight_scale"),
)
table.raises(
    "models.AttentionStack",
    "n_heads=10**400",
    lambda: mm.AttentionStack(_stack().layers, 10**400),
    r"n_heads must divide the model width D=8, got ~10\^400$",
)

# LayerNorm of rows whose squares overflow: x̂ does not depend on the row's scale
table.valid(
    "models.AttentionStack.forward",
    "X=1e160-weights-1e-100",
    lambda: (
        mm.random_stack(1, 8, 2, seed=0, weight_scale=1e-100).forward(SX * 1e160)[0],
        mm.random_stack(1, 8, 2, seed=0, weight_scale=1e-100).forward(SX * 1e100)[0],
    ),
    lambda Ys: np.allclose(Ys[0], Ys[1], rtol=0, atol=1e-12),
)

# the loss and the gradients of the stack overflow
table.raises(
    "models.AttentionStack.loss_and_grads",
    "G=1e308",
    lambda: _stack().loss_and_grads(SX, np.full_like(SG, 1e308)),
    word("G"),
)
table.raises(
    "models.AttentionStack.backward",
    "dY=1e308",
    lambda: _stack().backward(_stack().forward(SX)[1], np.full_like(SG, 1e308)),
    word("dY"),
)

# the kernels check what they are given and what their functions return
for fname, factory in [
    ("models.dense_polynomial_kernel", mm.dense_polynomial_kernel),
    ("models.observed_range_kernel", mm.observed_range_kernel),
]:
    kern = factory(lambda R: pm.exp_poly(R, 1e-3))
    table.raises(
        fname,
        "V-rows",
        lambda k=kern: k.forward(Q, K, V[:2], 0.5),
        word("V"),
    )
    table.raises(
        fname,
        "dO-shape",
        lambda k=kern: k.backward(Q, K, V, dO[:2], 0.5),
        word("dO"),
    )
    table.raises(
        fname,
        "logits-overflow",
        lambda k=kern: k.forward(Q * 1e200, K * 1e200, V, 0.5),
        r"Q, K or scale is too large",
    )
    table.raises(
        fname,
        "poly_for_range-returns-3",
        lambda f=factory: f(lambda R: 3).forward(Q, K, V, 0.5),
        word("poly_for_range"),
    )
    table.raises(
        fname,
        "per_octave=10**400",
        lambda f=factory: f(lambda R: pm.exp_poly(R, 1e-3), per_octave=10**400),
        word("per_octave"),
    )
table.raises(
    "models.dense_polynomial_kernel",
    "name=3",
    lambda: mm.dense_polynomial_kernel(lambda R: pm.exp_poly(R, 1e-3), name=3),
    word("name"),
)
table.raises(
    "models.dense_polynomial_kernel",
    "zero-row-sums",
    lambda: mm.dense_polynomial_kernel(lambda R: np.polynomial.Polynomial([0.0, 1.0])).forward(
        np.zeros((2, 4)), K, V, 0.5
    ),
    word("poly_for_range"),
)
table.raises(
    "models.AttentionKernel",
    "forward=1",
    lambda: mm.AttentionKernel("k", 1, lambda *a: a),
    word("forward"),
)
table.raises(
    "models.kernels._kernel_from_functions",
    "backward_fn-returns-3",
    lambda: kn._kernel_from_functions("k", lambda Q, K, V, scale: Q, lambda *a, scale: 3).backward(
        Q, K, V, dO, 0.5
    ),
    word("backward_fn"),
)
table.raises(
    "models.kernels._kernel_from_functions",
    "forward_fn-wrong-shape",
    lambda: _stack().forward(
        SX, kn._kernel_from_functions("k", lambda Q, K, V, scale: Q[:2], lambda *a, scale: a)
    ),
    word("forward_fn"),
)

# float32 errors: their ratios are taken in float64
table.valid(
    "models.classify_growth",
    "float32-1e-30..1e30",
    lambda: mm.classify_growth(np.array([1e-30, 1.0, 1e30], np.float32)),
    lambda g: g.kind == "geometric" and math.isclose(g.factor, 1e30, rel_tol=1e-6),
)

# a subnormal int8 step
table.valid(
    "models.int8_round",
    "X=5e-324",
    lambda: mm.int8_round(np.array([5e-324, -5e-324, 0.0])),
    lambda Xh: np.array_equal(Xh, [5e-324, -5e-324, 0.0]),
)


# ---- the stack's parts and checks ----

table.raises(
    "models.AttentionStack.check_input",
    "X=nan",
    lambda: mm.random_stack(2, 8, 2, seed=0).check_input(np.full((5, 8), np.nan)),
    word("X"),
)
table.raises(
    "models.AttentionStack.check_input",
    "X-columns",
    lambda: mm.random_stack(2, 8, 2, seed=0).check_input(np.ones((5, 7))),
    word("X"),
)
for fname, f in [
    ("models.stack.gelu", st.gelu),
    ("models.stack.gelu_derivative", st.gelu_derivative),
]:
    table.raises(fname, "x=nan", lambda f=f: f(np.array([1.0, np.nan])), word("x"))
    table.raises(fname, "x=str", lambda f=f: f("x"), word("x"))
table.raises(
    "models.kernels.check_kernel", "kernel=None", lambda: kn.check_kernel(None), word("kernel")
)
table.valid(
    "models.stack.layer_norm",
    "constant-rows-give-b",
    lambda: st.layer_norm(np.full((2, 3), 5.0), np.ones(3), np.arange(3.0), 1e-12),
    lambda r: np.array_equal(r[0], np.tile(np.arange(3.0), (2, 1))),
)
for what, u, eps, arg in [
    ("eps=0-constant-row", np.full((2, 3), 5.0), 0.0, "eps"),
    ("eps=-1", np.ones((2, 3)), -1.0, "eps"),
    ("u-nan", np.array([[1.0, np.nan, 2.0]]), 1e-12, "u"),
    ("u-inf", np.array([[1.0, np.inf, 2.0]]), 1e-12, "u"),
]:
    table.raises(
        "models.stack.layer_norm",
        what,
        lambda u=u, eps=eps: st.layer_norm(u, np.ones(3), np.zeros(3), eps),
        word(arg),
    )


# ---- the tests ----


@pytest.mark.parametrize("case", table.cases, ids=table.ids)
def test_row(case):
    case.run()
