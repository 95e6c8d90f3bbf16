"""Arithmetic intensity (attnlib.iomodel.intensity): the flops of attention (forward, backward,
causal, grouped heads) over the words the closed forms count, and the prefill and decode
intensities."""

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
