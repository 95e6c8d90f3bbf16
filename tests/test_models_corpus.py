"""The text the evidence chapter measures (attnlib.models.corpus): packaged with the library,
long enough, and cut into chunks of n tokens that each start with [CLS] and end with [SEP];
bad chunk sizes and counts are refused by name."""

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib.models import corpus as cp

BAD_CHUNKS = [
    (lambda model: cp.corpus_chunks(model, 2), "n must be an integer >= 3"),
    (
        lambda model: cp.corpus_chunks(model, 512, count=100),
        "count must be an integer <=",
    ),
]


@pytest.mark.parametrize("call,message", BAD_CHUNKS)
def test_corpus_chunks_bad_input(model, call, message):
    with pytest.raises(AttnInputError, match=message):
        call(model)


def test_corpus_is_packaged_and_long_enough(model):
    text = cp.load_corpus()
    assert "Four score and seven years ago" in text
    assert not any(line.startswith("#") for line in text.splitlines())
    assert len(model.token_ids(text)) >= 2500
    chunks = cp.corpus_chunks(model, 128, count=3)
    assert chunks.shape == (3, 128)
    assert (chunks[:, 0] == 101).all() and (chunks[:, -1] == 102).all()
    body = model.token_ids(text)
    assert np.array_equal(chunks[1, 1:-1], body[126:252])
