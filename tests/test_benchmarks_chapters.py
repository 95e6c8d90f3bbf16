"""benchmarks.chapters: the committed attention-step rows time all three methods a CPU runs at
every validation point of Chapter 9's CPU map, and the rates run stores the whole CPU machine."""

from __future__ import annotations

from attnlib.machines import book_cpu_core
from attnlib.results import read_committed
from benchmarks import chapters


def test_attention_step_times_all_three_methods_at_every_point():
    rows = [r for r in read_committed("chapters_time.csv") if r["experiment"] == "attention-step"]
    for n, B in chapters.STEP_POINTS:
        here = [r for r in rows if (r["n"], r["B"]) == (n, B)]
        assert sorted(r["method"] for r in here) == ["exact", "flash", "polynomial"]
        assert all(r["status"] == "ok" and r["d"] == chapters.STEP_D for r in here)
        assert all(r["threads"] == 1 and r["dtype"] == "float64" for r in here)
        poly = next(r for r in here if r["method"] == "polynomial")
        assert poly["eps"] == chapters.STEP_EPS and poly["rank"] >= 1
    assert len(rows) == 3 * len(chapters.STEP_POINTS)


def test_the_rates_run_stores_the_cpu_maps_three_numbers():
    info = {r["key"]: r["value"] for r in read_committed("chapters_machine.csv")}
    core = book_cpu_core()
    assert core.cache_bytes == int(info["rates_l2_bytes"]) > 0
    assert core.memory_bytes == int(info["rates_memory_bytes"]) > core.cache_bytes
    balance = float(info["rates_flops_per_s"]) / float(info["rates_words_per_s"])
    assert core.flops_per_word == balance
    assert abs(balance - float(info["rates_flops_per_word"])) <= 0.05 * balance  # 3 digits kept


def test_quick_plan_keeps_a_prefix_of_the_points():
    args = chapters.parse_args(["--quick", "--only", "attention-step"])
    assert chapters.plan(args, "attention-step")["points"] == [
        list(p) for p in chapters.STEP_POINTS[:2]
    ]
    full = chapters.parse_args(["--only", "attention-step"])
    assert len(chapters.plan(full, "attention-step")["points"]) == len(chapters.STEP_POINTS)
