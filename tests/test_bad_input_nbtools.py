"""Bad-input rows of what the chapters share: attnlib.nbtools, attnlib.measure and attnlib.results.

The rows' machinery, their ids and the inputs the parts share: bad_input_cases.py.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from bad_input_cases import Table, before_allocating, word

from attnlib import measure
from attnlib import nbtools as nbt
from attnlib import results as res

table = Table()


# ---- reals and ints out of range ----

table.raises("nbtools.below", "bound=10**400", lambda: nbt.below(1e-16, 10**400), word("bound"))
table.raises("nbtools.below", "bound=0", lambda: nbt.below(1e-16, 0), word("bound"))
table.raises("nbtools.below", "value=str", lambda: nbt.below("x", 1e-3), word("value"))
table.valid(
    "nbtools.below", "round-off", lambda: nbt.below(2.2e-16, 1e-13), lambda t: t == "< 1e-13"
)
table.raises("nbtools.error_text", "floor=-1", lambda: nbt.error_text(1e-3, -1), word("floor"))
table.raises("nbtools.error_text", "value=None", lambda: nbt.error_text(None), word("value"))
table.valid("nbtools.error_text", "small", lambda: nbt.error_text(4e-16), lambda t: t == "< 1e-12")
table.raises("nbtools.significant", "value=inf", lambda: nbt.significant(math.inf), word("value"))
table.raises("nbtools.significant", "digits=0", lambda: nbt.significant(1.0, 0), word("digits"))
table.raises(
    "nbtools.significant", "value=10**400", lambda: nbt.significant(10**400), word("value")
)
table.valid(
    "nbtools.significant",
    "3 digits",
    lambda: nbt.significant(7.962867387297144),
    lambda x: x == 7.96,
)

table.raises("nbtools.glue_number", "name=''", lambda: nbt.glue_number("", 1.0), word("name"))
table.raises(
    "nbtools.glue_number", "value=nan", lambda: nbt.glue_number("x", math.nan), word("value")
)
table.raises("nbtools.source", "fn=int 3", lambda: nbt.source(3), word("fn"))
table.raises("nbtools.source", "fn=builtin", lambda: nbt.source(len), word("fn"))
table.valid(
    "nbtools.source",
    "no docstring",
    lambda: nbt.source(nbt.below, docstring=False),
    lambda t: t.startswith("def below") and '"""' not in t,
)
table.raises("nbtools.listing", "fn=3", lambda: nbt.listing(3), word("fn"))
table.raises(
    "nbtools.listing", "summary=1", lambda: nbt.listing(nbt.below, summary=1), word("summary")
)
table.valid(
    "nbtools.Listing", "plain text", lambda: nbt.Listing("x = 1", "s"), lambda L: repr(L) == "x = 1"
)
table.raises("nbtools.show", "fn=str", lambda: nbt.show("below"), word("fn"))
table.raises(
    "nbtools.markdown_table",
    "short row",
    lambda: nbt.markdown_table(["a", "b"], [(1,)]),
    word("rows[0]"),
)
table.raises(
    "nbtools.markdown_table", "no header", lambda: nbt.markdown_table([], []), word("header")
)
table.raises(
    "nbtools.show_table", "short row", lambda: nbt.show_table(["a"], [(1, 2)]), word("rows[0]")
)
table.raises("nbtools.rel_err", "shapes", lambda: nbt.rel_err(np.ones(3), np.ones(4)), word("a"))
table.raises("nbtools.rel_err", "b=0", lambda: nbt.rel_err(np.ones(3), np.zeros(3)), word("b"))
table.raises("nbtools.rel_err", "a=nan", lambda: nbt.rel_err([math.nan], [1.0]), word("a"))
table.valid(
    "nbtools.rel_err", "quarter", lambda: nbt.rel_err([1.0, 2.5], [1.0, 2.0]), lambda e: e == 0.25
)
table.raises(
    "nbtools.central_difference",
    "h=0",
    lambda: nbt.central_difference(np.sum, np.ones(2), 0),
    word("h"),
)
table.raises(
    "nbtools.central_difference",
    "x=inf",
    lambda: nbt.central_difference(np.sum, [math.inf]),
    word("x"),
)
table.raises(
    "measure.median_time", "clock", lambda: measure.median_time(abs, 1, clock="gpu"), word("clock")
)
table.raises("measure.median_time", "fn=1", lambda: measure.median_time(1), word("fn"))
table.raises(
    "measure.median_time",
    "min_repeats=0",
    lambda: measure.median_time(abs, 1, min_repeats=0),
    word("min_repeats"),
)
table.raises(
    "measure.round_robin_times", "calls={}", lambda: measure.round_robin_times({}), word("calls")
)
table.raises(
    "measure.round_robin_samples",
    "clock",
    lambda: measure.round_robin_samples({"a": (abs, (-1,))}, clock="gpu"),
    word("clock"),
)
table.valid(
    "measure.round_robin_samples",
    "rounds=2",
    lambda: measure.round_robin_samples({"a": (abs, (-1,))}, rounds=2),
    lambda r: len(r[0]["a"]) == 2 and r[1]["a"] >= 1,
)
for what, call, arg in [
    ("call-not-a-pair", lambda: measure.round_robin_times({"a": abs}), "calls"),
    ("args-not-a-tuple", lambda: measure.round_robin_times({"a": (abs, -1)}), "args"),
    ("rounds=0", lambda: measure.round_robin_times({"a": (abs, (-1,))}, rounds=0), "rounds"),
    ("clock", lambda: measure.round_robin_times({"a": (abs, (-1,))}, clock="gpu"), "clock"),
    (
        "min_seconds=0",
        lambda: measure.round_robin_times({"a": (abs, (-1,))}, min_seconds=0),
        "min_seconds",
    ),
]:
    table.raises("measure.round_robin_times", what, call, word(arg))
table.valid(
    "measure.round_robin_times",
    "two-keys",
    lambda: measure.round_robin_times({"a": (abs, (-1,)), "b": (abs, (2,))}, rounds=2),
    lambda t: set(t) == {"a", "b"} and all(v >= 0 for v in t.values()),
)
table.raises(
    "measure.traced_peak_bytes", "fn=None", lambda: measure.traced_peak_bytes(None), word("fn")
)
table.raises(
    "measure.machine_rates",
    "dtype=int8",
    lambda: measure.machine_rates(dtype="int8"),
    word("dtype"),
)
table.raises("measure.machine_rates", "n=0", lambda: measure.machine_rates(n=0), word("n"))
table.raises("measure.loglog_slope", "one point", lambda: measure.loglog_slope([1], [1]), word("x"))
table.raises("measure.loglog_slope", "y=0", lambda: measure.loglog_slope([1, 2], [0, 1]), word("y"))
table.valid(
    "measure.loglog_slope",
    "square",
    lambda: measure.loglog_slope([1, 2, 4], [3, 12, 48]),
    lambda s: abs(s - 2) < 1e-12,
)
table.raises(
    "measure.loglog_crossover",
    "y2 short",
    lambda: measure.loglog_crossover([1, 2], [1, 2], [1]),
    word("y2"),
)
table.valid(
    "measure.loglog_crossover",
    "none",
    lambda: measure.loglog_crossover([1, 2], [1, 2], [3, 4]),
    lambda x: x is None,
)

# ---- memory guards, sizes, flags and the chapters' tools ----

# The committed benchmark results, which the chapters assert their statements about speed
# against (no compared output and no assert may rest on a live timing).
table.raises("results._results_folder", "start=int", lambda: res._results_folder(3), word("start"))
table.raises(
    "results._results_folder", "none-above", lambda: res._results_folder("/"), word("start")
)
table.valid(
    "results._results_folder",
    "from-tests",
    lambda: res._results_folder(__file__),
    lambda path: (path / "chapters_time.csv").is_file(),
)
table.raises(
    "results.read_committed",
    "name=path",
    lambda: res.read_committed("../results/machine.csv", start=__file__),
    word("name"),
)
table.raises("results.read_committed", "name=None", lambda: res.read_committed(None), word("name"))
table.raises(
    "results.read_committed",
    "name=not-a-result",
    lambda: res.read_committed("README.md", start=__file__),
    word("path"),
)
table.valid(
    "results.read_committed",
    "machine",
    lambda: res.read_committed("chapters_machine.csv", start=__file__),
    lambda rows: any(r["key"] == "cpu" for r in rows),
)
TIMING_ROWS = [
    {"experiment": "ov", "method": "brute-force", "n": n, "d": 8, "status": "ok", "min_s": t}
    for n, t in ((64, 4.0), (32, 1.0))
]
table.raises(
    "results.timing_series",
    "statistic=mean",
    lambda: res.timing_series(TIMING_ROWS, "ov", "brute-force", statistic="mean"),
    word("statistic"),
)
table.raises(
    "results.timing_series",
    "rows=str",
    lambda: res.timing_series("rows", "ov", "brute-force"),
    word("rows"),
)
table.raises(
    "results.timing_series",
    "method=None",
    lambda: res.timing_series(TIMING_ROWS, "ov", None),
    word("method"),
)
table.raises(
    "results.timing_series",
    "where=unknown-column",
    lambda: res.timing_series(TIMING_ROWS, "ov", "brute-force", m=8),
    word("where"),
)
table.raises(
    "results.timing_series",
    "nothing-matches",
    lambda: res.timing_series(TIMING_ROWS, "ov", "brute-force", d=9),
    word("rows"),
)
table.raises(
    "results.timing_series",
    "two-rows-one-n",
    lambda: res.timing_series(TIMING_ROWS + TIMING_ROWS, "ov", "brute-force"),
    word("where"),
)
table.valid(
    "results.timing_series",
    "sorted-by-n",
    lambda: res.timing_series(TIMING_ROWS, "ov", "brute-force", d=8),
    lambda r: r[0].tolist() == [32, 64] and r[1].tolist() == [1.0, 4.0],
)
table.raises(
    "results.machine_summary",
    "rows=no-key",
    lambda: res.machine_summary([{"cpu": "x"}], "ov"),
    word("rows"),
)
table.raises(
    "results.machine_summary",
    "experiment=unknown",
    lambda: res.machine_summary([{"key": "cpu", "value": "x"}], "ov"),
    word("experiment"),
)
table.valid(
    "results.machine_summary",
    "one-line",
    lambda: res.machine_summary([{"key": "ov_command", "value": "make bench"}], "ov"),
    lambda text: "`make bench`" in text and "\n" not in text,
)

table.raises(
    "nbtools.rel_err",
    "a-b=broadcast-10**9",
    before_allocating(
        lambda: nbt.rel_err(np.broadcast_to(1.0, (10**9,)), np.broadcast_to(2.0, (10**9,)))
    ),
    r"; a or b is too large",
)
table.raises(
    "nbtools.central_difference",
    "x=broadcast-10**9",
    before_allocating(lambda: nbt.central_difference(np.sum, np.broadcast_to(1.0, (10**9,)))),
    r"; x is too large",
)
table.raises(
    "measure.loglog_slope",
    "x=broadcast-10**9",
    before_allocating(
        lambda: measure.loglog_slope(np.broadcast_to(2.0, (10**9,)), np.broadcast_to(3.0, (10**9,)))
    ),
    r"; x or y is too large",
)
table.raises(
    "nbtools.markdown_table",
    "header=broadcast-10**9",
    before_allocating(lambda: nbt.markdown_table(np.broadcast_to("a", (10**9,)), [])),
    r"; header is too large",
)

for fname, call, arg in [
    ("measure.machine_rates", lambda: measure.machine_rates(n=10**6), "n"),
    ("measure.machine_rates", lambda: measure.machine_rates(8, length=10**10), "length"),
]:
    table.raises(fname, f"{arg}=huge", before_allocating(call), rf"; {arg} is too large")
for fname, call, arg in [
    ("measure.machine_rates", lambda: measure.machine_rates(8, 64, repeats=10**400), "repeats"),
    (
        "measure.round_robin_times",
        lambda: measure.round_robin_times({"a": (abs, (1,))}, rounds=10**400),
        "rounds",
    ),
]:
    table.raises(fname, f"{arg}=10**400", call, word(arg))
table.raises(
    "measure.machine_rates",
    "dtype=None",
    lambda: measure.machine_rates(8, 64, 1, dtype=None),
    word("dtype"),
)

# the chapters' tools refuse what they cannot handle (and validate in _checks)
table.raises(
    "nbtools.significant",
    "value-rounds-past-the-float-max",
    lambda: nbt.significant(1.7976931348623157e308, 3),
    word("value"),
)
table.raises("nbtools.error_text", "value=nan", lambda: nbt.error_text(math.nan), word("value"))
table.raises("nbtools.error_text", "value=inf", lambda: nbt.error_text(math.inf), word("value"))
table.raises(
    "nbtools.glue_number",
    "digits=0",
    lambda: nbt.glue_number("x", 5, digits=0),
    word("digits"),
)
table.raises(
    "nbtools.source",
    "docstring=str",
    lambda: nbt.source(nbt.below, docstring="no"),
    word("docstring"),
)
table.raises(
    "nbtools.listing",
    "docstring=1",
    lambda: nbt.listing(nbt.below, docstring=1),
    word("docstring"),
)
table.raises(
    "nbtools.show",
    "docstring=None",
    lambda: nbt.show(nbt.below, docstring=None),
    word("docstring"),
)
table.raises(
    "nbtools.markdown_table",
    "header=str",
    lambda: nbt.markdown_table("ab", [(1, 2)]),
    word("header"),
)
table.raises(
    "nbtools.markdown_table", "rows=str", lambda: nbt.markdown_table(["a"], "x"), word("rows")
)
table.raises(
    "nbtools.markdown_table",
    "row=0-d-array",
    lambda: nbt.markdown_table(["a"], [np.array(1.0)]),
    word("rows[0]"),
)
table.raises(
    "nbtools.markdown_table",
    "cell-with-newline",
    lambda: nbt.markdown_table(["a"], [["x\ny"]]),
    re.escape("rows[0][0]"),
)
table.valid(
    "nbtools.markdown_table",
    "cell-with-pipe-is-escaped",
    lambda: nbt.markdown_table(["|x|"], [["a|b"]]),
    lambda t: t.splitlines()[0] == r"| \|x\| |" and t.splitlines()[2] == r"| a\|b |",
)
table.valid(
    "nbtools.rel_err",
    "difference-overflows",
    lambda: nbt.rel_err([1e308], [-1e308]),
    lambda e: e == 2.0,
)
table.valid(
    "nbtools.rel_err",
    "float32-difference-overflows",
    lambda: nbt.rel_err(np.float32([3e38]), np.float32([-3e38])),
    lambda e: e == 2.0,
)
table.raises(
    "nbtools.central_difference",
    "f=None",
    lambda: nbt.central_difference(None, [1.0]),
    word("f"),
)
table.raises(
    "nbtools.central_difference",
    "f-returns-nan",
    lambda: nbt.central_difference(lambda x: math.nan, [1.0]),
    word("f"),
)
table.raises(
    "nbtools.central_difference",
    "f-returns-array",
    lambda: nbt.central_difference(lambda x: x, [1.0, 2.0]),
    word("f"),
)
table.raises(
    "nbtools.central_difference",
    "h-below-the-spacing-of-x",  # x + h == x: the gradient came out 0
    lambda: nbt.central_difference(np.sum, [1e20]),
    word("h"),
)
table.raises(
    "nbtools.central_difference",
    "h-overflows-x",
    lambda: nbt.central_difference(np.sum, [1e308], h=1e308),
    word("h"),
)
table.raises(
    "measure.median_time",
    "min_total=''",
    lambda: measure.median_time(abs, 1, min_total=""),
    word("min_total"),
)
table.raises(
    "measure.median_time",
    "min_total=nan",
    lambda: measure.median_time(abs, 1, min_total=math.nan),
    word("min_total"),
)
table.raises(
    "measure.round_robin_times",
    "min_seconds=1e300",  # its repeat count overflowed math.ceil
    lambda: measure.round_robin_times({"a": (abs, (1,))}, min_seconds=1e300),
    word("min_seconds"),
)
table.raises(
    "measure.loglog_slope",
    "one-distinct-x",
    lambda: measure.loglog_slope([2.0, 2.0, 2.0], [1.0, 2.0, 3.0]),
    word("x"),
)
table.raises(
    "measure.loglog_crossover",
    "x-not-increasing",
    lambda: measure.loglog_crossover([4.0, 1.0], [16.0, 1.0], [4.0, 4.0]),
    word("x"),
)

table.raises(
    "measure.median_time",
    "min_repeats-above-max_repeats",
    lambda: measure.median_time(abs, 1, min_repeats=100),
    word("min_repeats"),
)


# ---- the measurements' checks ----


# ---- the tests ----


@pytest.mark.parametrize("case", table.cases, ids=table.ids)
def test_row(case):
    case.run()
