"""The memory guards (attnlib._checks.memory): a call's parts are summed and the largest is
blamed by name; a conversion counts a broadcast view at its full size."""

from __future__ import annotations

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib._checks import (
    check_memory_parts,
    conversion_parts,
)


def test_memory_parts_sum_and_blame_the_largest():
    parts = [(2**31, "the scores", "Q or K"), (2**31 + 8, "the outputs", "Q or V")]
    with pytest.raises(AttnInputError) as refused:
        check_memory_parts("f", parts)
    assert str(refused.value) == (
        "f would need 4 GiB of working memory, over the limit of 4 GiB, most of it for the "
        "outputs (2 GiB); Q or V is too large"
    )
    assert check_memory_parts("f", parts[:1]) == 2**31
    assert check_memory_parts("f", [(10**400, "x", "n")], budget=10**401) == 10**400
    with pytest.raises(AttnInputError, match=r"~2\^1329 bytes"):
        check_memory_parts("f", [(10**400, "x", "n")])


def test_conversion_parts_count_a_broadcast_view_at_full_size():
    view = np.broadcast_to(np.float32(1), (1000, 10))
    parts = conversion_parts(np.float64, {"Q": view, "K": np.ones(3)})
    assert parts == [(80_000, "Q converted to float64", "Q")]
