"""Bad-input rows of the figure builders of attnlib.plots and the widgets of attnlib.widgets.

The rows' machinery, their ids and the inputs the parts share: bad_input_cases.py.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from bad_input_cases import Table, word

from attnlib import advice as adv
from attnlib import plots as pl
from attnlib import widgets as wd
from attnlib.plots import forms
from attnlib.plots import performance as perf

table = Table()


# ---- chapter 10's benchmark results and figures ----

BENCH_ROW = {"impl": "flash", "dtype": "float32", "n": 64, "d": 8, "threads": 1, "pass": "fwd+bwd"}
BENCH_ROWS = [
    {**BENCH_ROW, "status": "ok", "median_s": 2.0},
    {**BENCH_ROW, "impl": "torch-math", "status": "ok", "median_s": 1.0},
]
table.raises(
    "plots.read_benchmark_csv", "no-schema", lambda: perf.read_benchmark_csv(__file__), word("path")
)
table.raises(
    "plots.median_seconds", "impl=jax", lambda: perf.median_seconds([], "jax", "f", 8, 8, 1), "impl"
)
table.raises(
    "plots.median_seconds",
    "rows=dict",
    lambda: perf.median_seconds({}, "flash", "f", 8, 8, 1),
    "rows",
)
table.valid(
    "plots.median_seconds",
    "found",
    lambda: perf.median_seconds(BENCH_ROWS, "flash", "float32", 64, 8, 1),
    lambda t: t == 2.0,
)
table.raises(
    "plots.torch_seconds", "n=0", lambda: perf.torch_seconds([], "float32", 0, 8, 1), word("n")
)
table.valid(
    "plots.torch_seconds",
    "missing",
    lambda: perf.torch_seconds(BENCH_ROWS, "float64", 64, 8, 1),
    lambda t: t is None,
)
table.raises("plots.flash_vs_torch", "rows=str", lambda: perf.flash_vs_torch("rows"), word("rows"))
table.valid(
    "plots.flash_vs_torch",
    "one",
    lambda: perf.flash_vs_torch(BENCH_ROWS),
    lambda t: t[0][-1] == 2.0,
)
table.raises(
    "plots.performance._benchmark_times",
    "d=0",
    lambda: perf._benchmark_times(BENCH_ROWS, d=0),
    word("d"),
)
table.raises(
    "plots.benchmark_figure",
    "dtype",
    lambda: perf.benchmark_figure(BENCH_ROWS, [], dtype="float16"),
    word("dtype"),
)
table.raises(
    "plots.benchmark_figure",
    "memory_rows",
    lambda: perf.benchmark_figure(BENCH_ROWS, None),
    word("memory_rows"),
)
table.raises(
    "plots.benchmark_ratio_figure", "rows", lambda: perf.benchmark_ratio_figure(None), "rows"
)
HEAD_ROW = {"dtype": "float32", "batch": 2, "heads": 4, "kv_heads": 1, "n": 8, "d": 4}
HEAD_ROWS = [
    {**HEAD_ROW, "causal": True, "pass": "fwd+bwd", "threads": 1, "status": "ok", **impl}
    for impl in ({"impl": "flash", "median_s": 3.0}, {"impl": "torch-flash", "median_s": 2.0})
]
table.raises("plots.heads_vs_torch", "rows=str", lambda: perf.heads_vs_torch("rows"), word("rows"))
table.valid(
    "plots.heads_vs_torch", "one", lambda: perf.heads_vs_torch(HEAD_ROWS), lambda t: t[0][-1] == 1.5
)
table.raises(
    "plots.benchmark_heads_figure", "rows", lambda: perf.benchmark_heads_figure(None), "rows"
)
table.raises(
    "plots.exact_over_tiled_figure",
    "length",
    lambda: perf.exact_over_tiled_figure([1, 2], [1], [1, 1], [1, 1], d=4),
    word("io_ratio"),
)
table.raises(
    "plots.exact_over_tiled_figure",
    "d=0",
    lambda: perf.exact_over_tiled_figure([1], [1], [1], [1], d=0),
    word("d"),
)

# ---- memory guards, sizes, flags and the chapters' tools ----

table.raises(
    "widgets.grid_slider",
    "values=str",
    lambda: wd.grid_slider("x", "abc", "a"),
    word("values"),
)
table.raises(
    "widgets.grid_slider",
    "values-1-and-1.0",  # equal: the frame of one stood for the other
    lambda: wd.grid_slider("x", [1, 1.0], 1.0),
    word("values"),
)
table.raises(
    "widgets.grid_slider",
    "values=[array]",
    lambda: wd.grid_slider("x", [np.array([1, 2])], np.array([1, 2])),
    re.escape("values[0]"),
)
table.raises(
    "widgets.grid_slider",
    "values=[nan]",
    lambda: wd.grid_slider("x", [math.nan, 1.0], 1.0),
    re.escape("values[0]"),
)
table.raises(
    "widgets.grid_slider",
    "values=0-d",
    lambda: wd.grid_slider("x", np.array(1.0), 1.0),
    word("values"),
)
table.raises(
    "widgets.grid_slider",
    "labels=str",
    lambda: wd.grid_slider("x", [1, 2, 3], 1, labels="abc"),
    word("labels"),
)
table.raises(
    "widgets.grid_slider",
    "values=1000",
    lambda: wd.grid_slider("x", range(1000), 1),
    word("values"),
)
table.valid(
    "widgets.grid_slider",
    "numpy-values-become-python",
    lambda: wd.grid_slider("x", np.arange(3), np.int64(1)),
    lambda c: c.values == (0, 1, 2) and all(type(v) is int for v in c.values) and c.index == 1,
)
table.raises(
    "widgets.controls._GridControl",
    "value-not-in-values",
    lambda: wd.controls._GridControl("x", (1, 2), 5, ("1", "2"), "range"),
    word("value"),
)
table.raises(
    "widgets.controls._GridControl",
    "kind=slider",
    lambda: wd.controls._GridControl("x", (1, 2), 1, ("1", "2"), "slider"),
    word("kind"),
)
DRAW = "attnlib.plots.iomodel:matmul_io_at"
POINT = {"log2_M": 10, "tile": 12}
for what, kw, arg in [
    ("dpi=0", {"dpi": 0}, "dpi"),
    ("dpi=10**5", {"dpi": 10**5}, "dpi"),
    ("colors=1000", {"colors": 1000}, "colors"),
    ("colors=1", {"colors": 1}, "colors"),
]:
    table.raises(
        "widgets.render_frame",
        what,
        lambda kw=kw: wd.render_frame(wd.resolve_draw(DRAW), POINT, **kw),
        word(arg),
    )
table.raises(
    "widgets.render_frame",
    "point=list",
    lambda: wd.render_frame(wd.resolve_draw(DRAW), [1]),
    word("point"),
)
table.raises("widgets.render_frame", "draw=None", lambda: wd.render_frame(None, {}), word("draw"))
table.raises("widgets.phone_breakpoint", "frames=str", lambda: wd.phone_breakpoint("x"), "frames")
table.raises(
    "widgets.phone_breakpoint",
    "width=0",
    lambda: wd.phone_breakpoint([{"width": 0, "text_px": 1.0}]),
    "width",
)
table.raises(
    "widgets.phone_breakpoint",
    "width=True",
    lambda: wd.phone_breakpoint([{"width": True, "text_px": 1.0}]),
    "width",
)
table.raises(
    "widgets.phone_breakpoint",
    "text_px=-1",
    lambda: wd.phone_breakpoint([{"width": 600, "text_px": -1.0}]),
    "text_px",
)
table.valid(
    "widgets.phone_breakpoint",
    "no-text-needs-no-phone-form",
    lambda: wd.phone_breakpoint([{"width": 600, "text_px": None}]),
    lambda w: w == 32,
)
for name, call in [
    ("plots.forms.phone_form", lambda bad: forms.phone_form(bad)),
    ("plots.forms.needs_phone_form", lambda bad: forms.needs_phone_form(bad)),
    ("plots.forms.min_text_px", lambda bad: forms.min_text_px(bad, 100)),
    ("plots.forms.phone_layout", lambda bad: forms.phone_layout(bad).__enter__()),
]:
    table.raises(
        name, "fig=axes", lambda call=call: call(_figure_with(lambda f, a: None)[1]), "fig"
    )
for what, dpi in [("dpi=0", 0), ("dpi=nan", math.nan), ("dpi=str", "100")]:
    table.raises(
        "plots.forms.min_text_px",
        what,
        lambda dpi=dpi: forms.min_text_px(_figure_with(lambda f, a: None)[0], dpi),
        word("dpi"),
    )
table.raises(
    "widgets.live._log2_slider",
    "hi=10**400",
    lambda: wd.live._log2_slider("k", 0, 10**400, 3),
    word("hi"),
)
table.raises(
    "widgets.live_figure",
    "fixed=numpy-int",  # not JSON: the page's data broke when displayed
    lambda: wd.live_figure(
        wd.resolve_draw(DRAW),
        name="a",
        alt="b",
        fixed={"log2_M": np.int64(10)},
        tile=wd.grid_slider("t", [12], 12),
    ),
    word("fixed"),
)
table.raises(
    "widgets.live_figure",
    "fixed=str",
    lambda: wd.live_figure(wd.resolve_draw(DRAW), name="a", alt="b", fixed="ab"),
    word("fixed"),
)
table.raises(
    "widgets.live._LiveFigure.alt_text",
    "index=-1",
    lambda: wd.live._LiveFigure(
        wd.resolve_draw(DRAW),
        {"tile": wd.grid_slider("t", [12], 12)},
        name="a",
        alt="b",
        fixed={"log2_M": 10},
    ).alt_text(-1),
    word("index"),
)

# every refusal names the public argument at fault
table.raises("widgets.resolve_draw", "spec=relative", lambda: wd.resolve_draw(".x:y"), word("spec"))
table.raises("widgets.resolve_draw", "spec=None", lambda: wd.resolve_draw(None), word("spec"))
table.raises(
    "widgets.resolve_draw",
    "spec=unknown",
    lambda: wd.resolve_draw("no_such_module:f"),
    word("spec"),
)
table.raises("widgets.choice", "options=[]", lambda: wd.choice("x", [], 1), word("options"))
table.raises(
    "widgets.choice", "value-not-an-option", lambda: wd.choice("x", ["a"], "b"), word("options")
)

# ---- edge cases of Parts II-IV ----


# the figures of Parts II-IV: ints beyond the floats, non-Axes, one-cell maps
def _plot(name, *args, **kwargs):
    """A figure builder of attnlib.plots called, and its figure closed (no leak per row)."""
    import matplotlib.pyplot as plt

    from attnlib import plots

    fig = getattr(plots, name)(*args, **kwargs)
    plt.close(fig)
    return fig


table.raises(
    "plots.exp_poly_error_figure",
    "ax=3",
    lambda: _plot("exp_poly_error_figure", 1.0, 1e-3, ax=3),
    word("ax"),
)
table.raises(
    "plots.error_and_rank_figure",
    "ranks-10**400",
    lambda: _plot("error_and_rank_figure", [1.0], {1e-3: [1e-4]}, {1e-3: [10**400]}),
    r"ranks\[0\.001\]",
)
table.raises(
    "plots.quadrature_errors_figure",
    "gl_nodes-10**400",
    lambda: _plot("quadrature_errors_figure", [10**400], [4], {"a": ([1e-3], [1e-2])}),
    word("gl_nodes"),
)
table.raises(
    "plots.threshold_sweep_figure",
    "n-10**400",
    lambda: _plot(
        "threshold_sweep_figure",
        [1.0, 2.0],
        [1, 2],
        [1e-3, 1e-2],
        n=10**400,
        degree=4,
        eps=1e-3,
        B_range=(1, 2),
    ),
    word("n"),
)
# a 2x2 map keyed by d: an eps that is no number, and a key d=0
for what, d, eps, pattern in [
    ("eps='x'", 32, "x", word("eps")),
    ("d=0", 0, 1e-3, r"maps' key d"),
]:
    table.raises(
        "plots.decision_map_figure",
        what,
        lambda d=d, eps=eps: _plot(
            "decision_map_figure",
            [64, 128],
            [1.0, 2.0],
            {d: np.zeros((2, 2), int)},
            methods=adv.METHODS,
            eps=eps,
            M=1024,
        ),
        pattern,
    )
table.raises(
    "plots.method_costs_at",
    "machine='nope'",
    lambda: _plot("method_costs_at", 10, 64, 1.0, "nope", 3),
    word("machine"),
)
table.raises(
    "plots.method_costs_at",
    "log2_n=10**400",
    lambda: _plot("method_costs_at", 10**400, 64, 1.0, "CPU core, float64", 3),
    word("log2_n"),
)
table.valid(
    "plots.decision_map_figure",
    "decision_map-one-cell",
    lambda: _plot(
        "decision_map_figure",
        [64],
        [1.0],
        {32: np.zeros((1, 1), int)},
        methods=adv.METHODS,
        eps=1e-3,
        M=1024,
    ),
    lambda fig: fig is not None,
)


# ---- figure builders: one wrong argument each ----

NAN2 = [1.0, float("nan")]
TWO = [1.0, 2.0]
for name, what, args, kwargs, arg in [
    ("backward_bound_figure", "count-nan", (TWO, NAN2, TWO), dict(n=8, d=2), "count"),
    ("bound_ratio_figure", "ratios-short", (TWO, {"flash": [1.0]}), dict(n=8, d=2), "ratios"),
    ("degree_error_figure", "R_values-inf", ([1.0, np.inf], [2, 3], TWO, TWO), {}, "R_values"),
    ("depth_error_figure", "errors-empty", ({},), {}, "errors"),
    (
        "depth_error_figure",
        "extra-unknown-stack",
        ({("a", 1e-2): [1.0, 2.0, 3.0]},),
        dict(extra={("b", "bound"): [1.0, 2.0, 3.0]}),
        "extra",
    ),
    ("derivative_figure", "lams-nan", (NAN2, TWO), {}, "lams"),
    ("entry_bound_figure", "B_heads-empty", ({}, TWO), {}, "B_heads"),
    ("entry_sizes_figure", "log_n-nan", (NAN2, TWO, TWO, TWO, TWO), {}, "log_n"),
    (
        "exact_cost_figure",
        "seconds-negative",
        (TWO, [1.0, -1.0], TWO, TWO),
        dict(d=8, time_slope=2.0, mem_slope=2.0),
        "seconds",
    ),
    ("gpu_memory_figure", "ratios-empty", ({}, [1, 2]), {}, "ratios"),
    ("gradient_error_figure", "eps_ladder-nan", (NAN2, {}), dict(n=8, d=2), "eps_ladder"),
    ("growth_in_n_figure", "M=0", (TWO, TWO, TWO), dict(d=2, M=0), "M"),
    ("int8_rounding_figure", "B_ratio-empty", ({}, {}), {}, "B_ratio"),
    ("intensity_figure", "Ms-nan", (NAN2, {"a": TWO}, {"b": 1.0}), {}, "Ms"),
    ("l2_absorption_figure", "ns-nan", (NAN2, {"a": TWO}, {"b": TWO}), {}, "ns"),
    ("least_degree_figure", "Rs-inf", ([1.0, np.inf], [1e-3]), {}, "Rs"),
    ("least_degree_grid_figure", "grid_R-nan", (NAN2, TWO, np.ones((2, 2))), {}, "grid_R"),
    ("logit_distribution_figure", "quantiles-nan", (NAN2, TWO), dict(n=8), "quantiles"),
    ("loglog_figure", "series-empty", ({},), dict(xlabel="n", ylabel="s"), "series"),
    ("matmul_io_figure", "M=0", (4, 4, 4), dict(M=0), "M"),
    ("method_costs_figure", "advice=None", (None,), {}, "advice"),
    ("noisy_estimates_figure", "thresholds-empty", ({}, {}), {}, "thresholds"),
    ("ov_margins_figure", "ns-nan", (NAN2, TWO, TWO), {}, "ns"),
    ("partition_figure", "G=None", (None, [], 4), {}, "G"),
    ("polynomial_accuracy_figure", "ranges-empty", ({}, {}, {}), {}, "ranges"),
    ("threshold_collapse_figure", "sweep=None", (None, None), {}, "sweep"),
    (
        "recompute_crossover_figure",
        "Ms-nan",
        (NAN2, TWO, TWO, 4),
        dict(n=8, d=2),
        "Ms",
    ),
    ("roofline_figure", "roofs=str", ("x", []), {}, "roofs"),
    ("rounding_floor_figure", "degrees-nan", (NAN2, TWO), {}, "degrees"),
    ("satisfiable_fraction_figure", "n_vars-nan", (NAN2, TWO), {}, "n_vars"),
    ("schedule_figure", "M=0", ([], 0), {}, "M"),
    ("smallcache_advantage_figure", "n=0", ({},), dict(n=0), "n"),
    ("smallcache_crossover_figure", "n=0", (0, 8), {}, "n"),
    ("smallcache_crossover_grid", "cases=str", ("x",), {}, "cases"),
    ("sparse_sweep_figure", "d=0", ({},), dict(n=8, d=0), "d"),
    ("split_list_figure", "A=float", (np.full((2, 3), 0.5), np.ones((2, 3), bool)), {}, "A"),
    ("threshold_figure", "cs-nan", (NAN2, TWO, TWO), dict(n=8), "cs"),
    ("words_by_array_figure", "names=str", ({}, {}, "x"), dict(title="t"), "names"),
    ("map_of_results", "d=0", (), dict(d=0), "d"),
    ("reading_path_figure", "paths=list", (), dict(paths=[1]), "paths"),
    ("gradient_memory_figure", "ns-empty", ([], {}), dict(slopes={}, fit_from=1, eps=1e-3), "ns"),
    (
        "gradient_time_figure",
        "ns-empty",
        ([], {}),
        dict(ranks={}, slopes={}, crossovers={}, eps=1e-3, R=1.0),
        "ns",
    ),
    ("matmul_io_at", "tile=0", (10, 0), {}, "tile"),
]:
    table.raises(
        f"plots.{name}",
        what,
        lambda name=name, args=args, kwargs=kwargs: _plot(name, *args, **kwargs),
        word(arg),
    )


def _figure_with(call):
    """A new figure and its axes, ``call(fig, ax)`` applied, and the figure closed."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    try:
        call(fig, ax)
        return fig, ax
    finally:
        plt.close(fig)


table.valid(
    "plots.add_takeaway",
    "text-on-the-figure",
    lambda: _figure_with(lambda fig, ax: pl.add_takeaway(fig, "takeaway")),
    lambda r: any(t.get_text() == "takeaway" for t in r[0].texts),
)
table.valid(
    "plots.label_ticks",
    "ticks-at-the-values",
    lambda: _figure_with(lambda fig, ax: pl.label_ticks(ax, [64, 128])),
    lambda r: list(r[1].get_xticks()) == [64, 128],
)
table.valid(
    "plots.smallcache_crossover_at",
    "log2_d=1-the-least-d",
    lambda: _plot("smallcache_crossover_at", 1, 10),
    lambda fig: fig is not None and len(fig.axes) >= 1,
)

# the live figures' callbacks name their own arguments, not the sizes they compute
for name, what, args, arg in [
    ("smallcache_crossover_at", "log2_n=-1", (4, -1), "log2_n"),
    ("smallcache_crossover_at", "log2_d=True", (True, 4), "log2_d"),
    ("matmul_io_at", "log2_M=-1", (-1, 4), "log2_M"),
    ("matmul_io_at", "log2_M=True", (True, 4), "log2_M"),
]:
    table.raises(
        f"plots.{name}",
        what,
        lambda name=name, args=args: _plot(name, *args),
        word(arg),
    )


# ---- the tests ----


@pytest.mark.parametrize("case", table.cases, ids=table.ids)
def test_row(case):
    case.run()
