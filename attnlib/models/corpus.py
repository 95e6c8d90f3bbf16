"""The fixed English text the evidence chapter runs all-MiniLM-L6-v2 on, cut into windows.

``data/corpus.txt`` (package data) holds the Gettysburg Address and the Preamble of the U.S.
Constitution (public domain), then passages of this book's own prose.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .._checks import AttnInputError, check_int
from .minilm import MiniLM

__all__ = ["load_corpus", "corpus_chunks"]

_CORPUS_FILE = Path(__file__).resolve().parent / "data" / "corpus.txt"


def load_corpus() -> str:
    """The evidence chapter's fixed English corpus (a few thousand WordPiece tokens).

    ``attnlib/models/data/corpus.txt``: the Gettysburg Address and the Preamble of the U.S.
    Constitution (public domain), then passages of this book's own prose. Lines starting with
    ``#`` are comments (the file's provenance) and are dropped.

    Raises :class:`FileNotFoundError` if the package data is missing (a broken install).
    """
    if not _CORPUS_FILE.is_file():
        raise FileNotFoundError(
            f"the corpus file {_CORPUS_FILE} is missing: reinstall attnlib (it is package data)"
        )
    lines = _CORPUS_FILE.read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.startswith("#")).strip()


def corpus_chunks(model, n: int, *, count: int | None = None) -> np.ndarray:
    """Consecutive windows of the corpus as model input: (count, n) token ids.

    Each row is [CLS] + n − 2 consecutive corpus tokens + [SEP], the windows disjoint and in
    order. ``count`` defaults to as many full windows as the corpus holds.

    Raises :class:`attnlib.AttnInputError` if ``model`` is not a MiniLM, n is not an integer
    from 3 to the position table's size, or ``count`` exceeds the windows the corpus holds.
    """
    if not isinstance(model, MiniLM):
        raise AttnInputError(
            f"model must be a MiniLM (from load_minilm()), got {type(model).__name__}"
        )
    n = check_int("n", n, minimum=3, maximum=model.config.max_positions)
    body = model.token_ids(load_corpus())
    per = n - 2
    available = len(body) // per
    if count is None:
        count = available
    count = check_int("count", count, minimum=1, maximum=available)
    cls_id, sep_id = model.token_id("[CLS]"), model.token_id("[SEP]")
    rows = body[: count * per].reshape(count, per)
    ends = np.full((count, 1), cls_id, dtype=np.int64), np.full((count, 1), sep_id, dtype=np.int64)
    return np.concatenate([ends[0], rows, ends[1]], axis=1)
