"""The materialising schedules on the machine (attnlib.iomodel.standard): they pay for the n x n
scores, at least 3nm + 2nm words forward and 5nm + 3nm backward, and FlashAttention beats them
by more each time M grows past 2d^2."""

from attnlib import iomodel as io


def test_standard_pays_n_squared_and_flash_beats_it_once_M_exceeds_2d2():
    n, d = 4096, 64
    prev = (1.0, 1.0)
    for k in (2, 4, 16, 64):
        M = k * d * d
        sf, sb = io.standard_forward_count(n, d, M), io.standard_backward_count(n, d, M)
        assert sf.total >= 5 * n * n and sb.total >= 8 * n * n  # 3nm + 2nm, 5nm + 3nm
        rf = io.flash_forward_count(n, d, M).total / sf.total
        rb = io.flash_backward_count(n, d, M).total / sb.total
        assert rf < 1 and rb < 1 and rf < prev[0] and rb < prev[1]
        prev = (rf, rb)
    assert prev[0] < 0.05 and prev[1] < 0.1
