"""Arithmetic intensity (attnlib.iomodel.intensity): the flops of attention (forward, backward,
causal, grouped heads) over the words the closed forms count, and the prefill and decode
intensities."""

import pytest

from attnlib import AttnInputError
from attnlib import iomodel as io
from attnlib.iomodel.causal import causal_score_count


def test_flops_and_intensity():
    assert io.attention_flops(4, 2) == 2 * 16 * 4
    assert io.attention_flops(4, 2, which="backward") == 2 * 16 * 10
    assert io.attention_flops(4, 2, kept=causal_score_count(4)) == 2 * 10 * 4
    c = io.flash_forward_count(128, 16, 5000)
    assert io.arithmetic_intensity(128, 16, 5000) == io.attention_flops(128, 16) / c.total
    # decode stays near 2 flops per word at every M; prefill grows with M
    prev = 0.0
    for M in (10**3, 10**4, 10**5, 10**6):
        it = io.prefill_decode_intensity(4096, 64, M)
        assert 1.9 < it.decode < 2.0
        assert it.prefill > prev and it.prefill > it.decode
        prev = it.prefill
    # causal prefill: half the useful flops over about half the words
    full = io.arithmetic_intensity(1024, 64, 10**5)
    causal = io.arithmetic_intensity(1024, 64, 10**5, is_causal=True)
    kept = causal_score_count(1024)
    want = (
        io.attention_flops(1024, 64, kept=kept)
        / io.flash_forward_count(1024, 64, 10**5, is_causal=True).total
    )
    assert causal == want and 0.5 * full < causal < full


def test_intensity_with_a_real_kernels_blocks():
    """Given tiles replace the block rule's: FlashAttention-2's 128 × 64 forward and 64 × 128
    backward at d = 128 on one H100 SM's on-chip words."""
    n, d, M = 16384, 128, 247808
    for which, blocks, count in (
        ("forward", (128, 64), io.flash_forward_count),
        ("backward", (64, 128), io.flash_backward_count),
    ):
        got = io.arithmetic_intensity(n, d, M, which=which, blocks=blocks)
        want = io.attention_flops(n, d, which=which) / count(n, d, M, blocks=blocks).total
        assert got == want
        assert got < io.arithmetic_intensity(n, d, M, which=which)  # smaller than the rule's
    # forward: about 2·B_r whatever B_c is
    for B_c in (32, 64, 176):
        assert 0.95 * 256 < io.arithmetic_intensity(n, d, M, blocks=(128, B_c)) < 256
    # the block rule's own tiles give the default
    rule = io.flash_forward_blocks(d, M)
    assert io.arithmetic_intensity(n, d, M, blocks=rule) == io.arithmetic_intensity(n, d, M)


def test_blocks_that_do_not_fit_are_refused():
    need = io.flash_forward_working_set(128, 64, 128)
    assert io.arithmetic_intensity(4096, 128, need, blocks=(128, 64)) > 0
    with pytest.raises(AttnInputError, match=r"blocks=\(128, 64\).*more than M=57599"):
        io.arithmetic_intensity(4096, 128, need - 1, blocks=(128, 64))
    with pytest.raises(AttnInputError, match="blocks"):
        io.arithmetic_intensity(4096, 128, need, blocks=(128,))
    with pytest.raises(AttnInputError, match="B_c"):
        io.arithmetic_intensity(4096, 128, need, blocks=(128, 0))
