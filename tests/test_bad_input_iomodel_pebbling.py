"""Bad-input rows of Part I's computation graphs and the exact optimum of the red-blue pebble game.

The rows' machinery, their ids and the inputs the parts share: bad_input_cases.py.
"""

from __future__ import annotations

import math

import pytest
from bad_input_cases import Table, word

from attnlib import iomodel as io
from attnlib.iomodel import graphs as gr

table = Table()


# ---- reals and ints out of range ----

# the exact pebble-game optimum and its computation graphs
_G2 = io.inner_product_graph(2)

table.raises("iomodel.inner_product_graph", "k=0", lambda: io.inner_product_graph(0), word("k"))
table.raises(
    "iomodel.inner_product_graph", "tree=x", lambda: io.inner_product_graph(3, tree="x"), "tree"
)
table.raises(
    "iomodel.inner_product_graph", "k=10**9", lambda: io.inner_product_graph(10**9), r"\(k\)"
)
table.raises("iomodel.matmul_graph", "p=1.5", lambda: io.matmul_graph(2, 2, 1.5), word("p"))
table.raises(
    "iomodel.matmul_graph",
    "10**6-cubed",
    lambda: io.matmul_graph(10**6, 10**6, 10**6),
    "m, k and p",
)
table.raises(
    "iomodel.attention_forward_graph", "d=0", lambda: io.attention_forward_graph(2, 2, 0), word("d")
)
table.raises(
    "iomodel.attention_forward_graph",
    "10**4-cubed",
    lambda: io.attention_forward_graph(10**4, 10**4, 10**4),
    "n, m and d",
)
table.raises(
    "iomodel.attention_dv_graph", "n=True", lambda: io.attention_dv_graph(True, 2, 1), word("n")
)
table.raises(
    "iomodel.graphs.evaluate_graph", "G=None", lambda: gr.evaluate_graph(None, {}), word("G")
)
table.raises(
    "iomodel.graphs.evaluate_graph", "inputs-missing", lambda: gr.evaluate_graph(_G2, {}), "inputs"
)
table.raises("iomodel.graphs.least_feasible_M", "G=1", lambda: gr.least_feasible_M(1), word("G"))
table.raises("iomodel.trivial_io_bound", "G=str", lambda: io.trivial_io_bound("g"), word("G"))
table.raises(
    "iomodel.ComputationGraph",
    "ops=x",
    lambda: io.ComputationGraph(("a",), ("x",), ((),), (0,)),
    r"ops\[0\]",
)
table.raises("iomodel.optimal_io", "M=2", lambda: io.optimal_io(_G2, 2), word("M"))
table.raises(
    "iomodel.optimal_io",
    "recompute=yes",
    lambda: io.optimal_io(_G2, 4, recompute="yes"),
    "recompute",
)
table.raises(
    "iomodel.optimal_io", "max_states=0", lambda: io.optimal_io(_G2, 4, max_states=0), "max_states"
)
table.valid(
    "iomodel.optimal_io", "M=10**400", lambda: io.optimal_io(_G2, 10**400), lambda r: r.io == 5
)
table.raises(
    "iomodel.replay_schedule", "moves=None", lambda: io.replay_schedule(_G2, None, 4), "moves"
)
table.raises(
    "iomodel.replay_schedule",
    "move=fly",
    lambda: io.replay_schedule(_G2, [("fly", 0)], 4),
    r"moves\[0\]",
)
table.raises(
    "iomodel.schedule_segments", "M=0", lambda: io.schedule_segments(_G2, [], 0), word("M")
)
table.raises("iomodel.is_dominator", "G=None", lambda: io.is_dominator(None, [], []), word("G"))
table.raises("iomodel.is_dominator", "V=999", lambda: io.is_dominator(_G2, [0], [999]), word("V"))
table.raises("iomodel.is_dominator", "D=None", lambda: io.is_dominator(_G2, None, [1]), word("D"))
table.raises(
    "iomodel.tiled_matmul_moves", "tile=0", lambda: io.tiled_matmul_moves(2, 2, 2, 0), "tile"
)
table.raises(
    "iomodel.tiled_matmul_moves",
    "10**5-cubed",
    lambda: io.tiled_matmul_moves(10**5, 10**5, 10**5, 3),
    "m, k and p",
)
table.raises("iomodel.loop_order_moves", "M=1", lambda: io.loop_order_moves(_G2, 1), word("M"))
table.valid(
    "iomodel.optimal.OptimalSchedule", "fields", lambda: io.optimal_io(_G2, 3), lambda r: r.io == 7
)

# ---- causal, grouped-query and decode schedules on the machine ----

table.raises("iomodel.PebbleSearch", "G=None", lambda: io.PebbleSearch(None, 4), word("G"))
table.raises("iomodel.PebbleSearch", "M=2", lambda: io.PebbleSearch(_G2, 2), word("M"))
table.raises(
    "iomodel.PebbleSearch", "recompute=1", lambda: io.PebbleSearch(_G2, 4, recompute=1), "recompute"
)
table.valid(
    "iomodel.PebbleSearch", "run", lambda: io.PebbleSearch(_G2, 4).run(), lambda r: r.io == 5
)
table.raises(
    "iomodel.explicit_schedule", "G=None", lambda: io.explicit_schedule(None, 4), word("G")
)
table.raises(
    "iomodel.explicit_schedule",
    "shape-mismatch",
    lambda: io.explicit_schedule(_G2, 4, matmul_shape=(2, 2, 2)),
    "matmul_shape",
)
table.raises(
    "iomodel.explicit_schedule",
    "shape=5",
    lambda: io.explicit_schedule(_G2, 4, matmul_shape=5),
    "matmul_shape",
)
table.valid(
    "iomodel.pebbling.ExplicitSchedule",
    "inner-product-tiled",
    lambda: io.explicit_schedule(io.matmul_graph(1, 2, 1), 5, matmul_shape=(1, 2, 1)),
    lambda s: s.tile == 1 and s.name == "tiled b=1",
)

# ---- memory guards, sizes, flags and the chapters' tools ----

for fname, call in [
    ("iomodel.replay_schedule", lambda: io.replay_schedule(_G2, [], 4, record=1)),
]:
    table.raises(fname, "record=non-bool", call, r"^record must be a bool")

# ---- edge cases of the machine, graphs, counts and the hardware model ----

# the pebble-game search's budget is a count of configurations, not a clock
table.valid(
    "iomodel.optimal_io",
    "max_seconds=None",
    lambda: io.optimal_io(_G2, 4, max_seconds=None),
    lambda r: r.io == 5,
)
table.raises(
    "iomodel.optimal_io",
    "max_seconds=0",
    lambda: io.optimal_io(_G2, 4, max_seconds=0),
    word("max_seconds"),
)

# vertex indices were coerced with int() (2.9 became 2), evaluation returned inf
# or raised OverflowError and ZeroDivisionError, schedule_segments accepted illegal
# schedules, and huge Python ints reached numpy or float()
_ABC = (("a", "b", "c"), ("input", "input", "add"))
table.raises(
    "iomodel.ComputationGraph",
    "float pred",
    lambda: io.ComputationGraph(*_ABC, ((), (), (0.7, 1.2)), (2,)),
    r"preds\[2\]\[0\]",
)
table.raises(
    "iomodel.ComputationGraph",
    "float output",
    lambda: io.ComputationGraph(*_ABC, ((), (), (0, 1)), (2.9,)),
    r"outputs\[0\]",
)
table.raises(
    "iomodel.ComputationGraph",
    "pred 10**400",
    lambda: io.ComputationGraph(*_ABC, ((), (), (0, 10**400)), (2,)),
    r"preds of vertex 'c'.*~10\^400",
)
table.raises(
    "iomodel.graphs.evaluate_graph",
    "product overflows",
    lambda: gr.evaluate_graph(_G2, [1e200] * 4),
    word("inputs"),
)
table.raises(
    "iomodel.graphs.evaluate_graph",
    "input 10**400",
    lambda: gr.evaluate_graph(_G2, [10**400, 1, 1, 1]),
    word("inputs"),
)
table.raises(
    "iomodel.graphs.evaluate_graph",
    "exp overflows",
    lambda: gr.evaluate_graph(io.attention_forward_graph(1, 2, 1), [1e3, 1, 1, 1, 1]),
    word("inputs"),
)
table.raises(
    "iomodel.graphs.evaluate_graph",
    "row sum underflows to 0",
    lambda: gr.evaluate_graph(io.attention_forward_graph(1, 2, 1), [-1e3, 1, 1, 1, 1]),
    r"inputs.*divide by zero",
)
_MOVES2 = list(io.optimal_io(_G2, 4).moves)
for _what, _moves, _pattern in [
    ("compute without reads", [("compute", _G2.index("s"))] + _MOVES2, r"moves\[0\]"),
    ("read of a non-blue vertex", [("read", _G2.index("p0"))] + _MOVES2, r"moves\[0\]"),
    ("outputs never written", _MOVES2[:3], word("moves")),
]:
    table.raises(
        "iomodel.schedule_segments",
        _what,
        lambda m=_moves: io.schedule_segments(_G2, m, 4),
        _pattern,
    )
    table.raises(
        "iomodel.graphs.check_schedule", _what, lambda m=_moves: gr.check_schedule(_G2, m), _pattern
    )
table.raises(
    "iomodel.schedule_segments",
    "4 red pebbles with M=3",
    lambda: io.schedule_segments(_G2, _MOVES2, 3),
    r"moves\[\d+\].*M = 3",
)
table.valid(
    "iomodel.graphs.check_schedule",
    "a legal schedule",
    lambda: gr.check_schedule(_G2, _MOVES2, 4),
    lambda m: m == _MOVES2,
)
table.raises(
    "iomodel.replay_schedule",
    "values overflow",
    lambda: io.replay_schedule(_G2, _MOVES2, 4, [1e200] * 4),
    word("inputs"),
)


# ---- the graphs' own checks ----

table.raises(
    "iomodel.ComputationGraph.index",
    "name=unknown",
    lambda: io.inner_product_graph(2).index("nope"),
    r"no vertex named 'nope'",
)
table.raises("iomodel.graphs.check_graph", "G=None", lambda: gr.check_graph(None), word("G"))
table.raises(
    "iomodel.graphs.input_values",
    "inputs-missing",
    lambda: gr.input_values(io.inner_product_graph(2), {}),
    word("inputs"),
)
table.raises(
    "iomodel.graphs.input_values",
    "inputs-nan",
    lambda: gr.input_values(
        io.inner_product_graph(2), {"a0": math.nan, "a1": 1.0, "b0": 1.0, "b1": 1.0}
    ),
    r"inputs\['a0'\]",
)
table.raises(
    "iomodel.graphs.apply_op",
    "add-overflows",
    lambda: gr.apply_op("add", [1e308, 1e308]),
    r"beyond the float range",
)
table.raises("iomodel.graphs.apply_op", "op=nope", lambda: gr.apply_op("nope", [1.0]), word("op"))
table.raises(
    "iomodel.graphs.apply_op", "exp-two-args", lambda: gr.apply_op("exp", [1.0, 2.0]), word("args")
)
table.raises("iomodel.graphs.apply_op", "add-no-args", lambda: gr.apply_op("add", []), word("args"))

table.raises(
    "iomodel.three_pebble_chain_moves", "k=0", lambda: io.three_pebble_chain_moves(0), word("k")
)
table.raises(
    "iomodel.three_pebble_chain_moves",
    "k=10**9",
    lambda: io.three_pebble_chain_moves(10**9),
    r"\(k\)",
)
table.raises(
    "iomodel.attention_deferred_graph", "m=1", lambda: io.attention_deferred_graph(1, 1, 2), "m"
)
table.raises(
    "iomodel.attention_deferred_graph",
    "tree=x",
    lambda: io.attention_deferred_graph(1, 2, 2, tree="x"),
    "tree",
)
table.raises(
    "iomodel.attention_deferred_graph",
    "n=10**6",
    lambda: io.attention_deferred_graph(10**6, 2, 2),
    "choose smaller sizes",
)
table.raises(
    "iomodel.flash_forward_moves", "M=10", lambda: io.flash_forward_moves(1, 2, 2, 10), "M"
)
table.raises(
    "iomodel.flash_forward_moves", "d=0", lambda: io.flash_forward_moves(1, 2, 0, 11), word("d")
)
table.raises(
    "iomodel.optimal_io",
    "grouped_reads=1",
    lambda: io.optimal_io(_G2, 4, grouped_reads=1),
    "grouped_reads",
)


# ---- the tests ----


@pytest.mark.parametrize("case", table.cases, ids=table.ids)
def test_row(case):
    case.run()
