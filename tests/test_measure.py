"""Measuring: timers, traced memory, machine rates and the power-law fits."""

import math
import time

import numpy as np
import pytest

from attnlib import AttnInputError, measure


def test_median_time_is_the_median_and_counts_repeats():
    calls = []

    def sleep():
        calls.append(1)
        time.sleep(0.001 * len(calls))

    t = measure.median_time(sleep, clock="wall", min_repeats=5, min_total=0, max_repeats=5)
    assert len(calls) == 5
    assert 0.0025 < t < 0.05  # the third of 1..5 ms sleeps


def test_traced_peak_bytes_sees_a_numpy_array():
    peak = measure.traced_peak_bytes(lambda: np.ones(10**6).sum())
    assert 8 * 10**6 <= peak < 9 * 10**6


def test_fits_recover_a_power_law_and_a_crossing():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    assert measure.loglog_slope(x, 5 * x**1.5) == pytest.approx(1.5, abs=1e-12)
    assert measure.loglog_crossover(x, x**2, 16 * np.ones(4)) == pytest.approx(4.0)
    assert measure.loglog_crossover(x, x, 100 * x) is None
    with pytest.raises(AttnInputError, match="positive"):
        measure.loglog_slope(x, -x)


def test_machine_rates_are_plausible():
    flops, words = measure.machine_rates(n=128, length=2**16, repeats=2)
    assert 1e7 < flops < 1e13 and 1e6 < words < 1e12
    assert math.isfinite(flops / words)


def test_fits_need_distinct_and_increasing_x():
    with pytest.raises(AttnInputError, match=r"^x must hold at least two distinct values"):
        measure.loglog_slope([2.0, 2.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(AttnInputError, match=r"^x must be strictly increasing"):
        measure.loglog_crossover([4.0, 1.0], [16.0, 1.0], [4.0, 4.0])
    with pytest.raises(AttnInputError, match=r"^y must be positive"):
        measure.loglog_slope([1.0, 2.0], [1.0, 0.0])
    assert measure.loglog_slope([2.0, 2.0, 4.0], [1.0, 1.0, 8.0]) == pytest.approx(3.0)


def test_timing_counts_have_limits_and_name_the_argument():
    with pytest.raises(AttnInputError, match=r"^min_repeats=100 must be at most max_repeats=50"):
        measure.median_time(abs, 1, min_repeats=100)
    with pytest.raises(AttnInputError, match=r"^min_total must be"):
        measure.median_time(abs, 1, min_total="")
    assert measure.median_time(abs, 1, min_total=0) >= 0
    with pytest.raises(AttnInputError, match=r"^min_seconds must be .* <= 3600"):
        measure.round_robin_times({"a": (abs, (1,))}, min_seconds=1e300)
    with pytest.raises(AttnInputError, match=r"^rounds must be an integer <= 1000000000"):
        measure.round_robin_times({"a": (abs, (1,))}, rounds=10**400)
    with pytest.raises(AttnInputError, match=r"^machine_rates would need .*; n is too large"):
        measure.machine_rates(n=10**6)
    assert measure.machine_rates(8, 64, 1, dtype=np.float32)[0] > 0


def test_round_robin_samples_time_every_call_once_per_round_and_the_times_are_their_median():
    order = []

    def call(key):
        order.append(key)

    calls = {"a": (call, ("a",)), "b": (call, ("b",))}
    samples, repeats = measure.round_robin_samples(calls, rounds=3, min_seconds=1e-9)
    assert repeats == {"a": 1, "b": 1}  # any run lasts longer than a nanosecond
    assert order == ["a", "b"] * 4  # the untimed first runs, then three rounds in turn
    assert {k: len(v) for k, v in samples.items()} == {"a": 3, "b": 3}
    with pytest.raises(AttnInputError, match=r"^calls\['a'\]: args must be a tuple"):
        measure.round_robin_samples({"a": (abs, -1)})
