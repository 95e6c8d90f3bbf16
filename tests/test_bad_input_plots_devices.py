"""Bad-input rows of the figures of Chapter 11 (attnlib.plots.devices): the schedules drawn,
the words per device against P, and the causal load balance.

The rows' machinery, their ids and the inputs the parts share: bad_input_cases.py.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
from bad_input_cases import Table, word

from attnlib.plots import devices as dv

table = Table()


def _closed(fig):
    """The figure, closed (no leak per row)."""
    plt.close(fig)
    return fig


# ---- the schedules drawn ----

table.bad_ints("plots.schedules_figure", "P", lambda v: _closed(dv.schedules_figure(v, H=4)))
table.raises("plots.schedules_figure", "P=17", lambda: dv.schedules_figure(17, H=17), word("P"))
table.raises(
    "plots.schedules_figure", "H-not-multiple", lambda: dv.schedules_figure(4, H=6), word("H")
)
table.raises(
    "plots.schedules_figure", "P-not-square", lambda: dv.schedules_figure(8, H=8), word("P")
)
table.raises(
    "plots.schedules_figure",
    "grid_shape-product",
    lambda: dv.schedules_figure(8, H=8, grid_shape=(2, 2)),
    word("grid_shape"),
)
table.raises(
    "plots.schedules_figure",
    "grid_shape=str",
    lambda: dv.schedules_figure(4, H=4, grid_shape="22"),
    word("grid_shape"),
)
table.raises(
    "plots.schedules_figure",
    "grid_shape-float",
    lambda: dv.schedules_figure(4, H=4, grid_shape=(2.0, 2)),
    r"grid_shape\[0\]",
)
table.valid(
    "plots.schedules_figure",
    "P=1",  # one device: every block on it, round 0
    lambda: _closed(dv.schedules_figure(1, H=1)),
    lambda fig: len(fig.axes) == 3,
)

# ---- words per device against P ----

for name, fn in (
    ("plots.words_per_device", dv.words_per_device),
    ("plots.words_per_device_figure", lambda *a, **k: _closed(dv.words_per_device_figure(*a, **k))),
):
    table.raises(name, "direction=sideways", lambda fn=fn: fn(64, 8, direction="x"), "direction")
    table.raises(name, "is_causal=str", lambda fn=fn: fn(64, 8, is_causal="yes"), "is_causal")
    table.raises(name, "Ps=[]", lambda fn=fn: fn(64, 8, Ps=[]), word("Ps"))
    table.raises(name, "Ps=str", lambda fn=fn: fn(64, 8, Ps="124"), word("Ps"))
    table.raises(name, "Ps-float", lambda fn=fn: fn(64, 8, Ps=[1, 2.0]), r"Ps\[1\]")
    table.raises(name, "Ps-zero", lambda fn=fn: fn(64, 8, Ps=[0]), r"Ps\[0\]")
    # a P that does not divide n is refused (by the ring's closed form), not left out
    table.raises(name, "P-not-dividing-n", lambda fn=fn: fn(64, 8, Ps=[3]), word("P"))
    table.raises(name, "n=0", lambda fn=fn: fn(0, 8, Ps=[1]), word("n"))
    table.raises(name, "d=True", lambda fn=fn: fn(64, True, Ps=[1]), word("d"))
    table.raises(name, "H-not-multiple", lambda fn=fn: fn(64, 8, H=3, H_kv=2, Ps=[1]), "H")
table.valid(
    "plots.words_per_device",
    "P=n",  # one row per device: still defined for the ring
    lambda: dv.words_per_device(16, 4, Ps=[16]),
    lambda out: out["ring"][0] > 0 and out["lower bound"][0] <= out["ring"][0],
)

# ---- causal load balance ----

table.bad_ints("plots.load_balance_figure", "P", lambda v: _closed(dv.load_balance_figure(64, v)))
table.raises("plots.load_balance_figure", "P=65", lambda: dv.load_balance_figure(130, 65), "P")
table.raises(
    "plots.load_balance_figure",
    "zigzag-2P-not-dividing-n",  # n = 12, P = 4: 2P = 8 does not divide n
    lambda: dv.load_balance_figure(12, 4),
    "2P must divide",
)
table.bad_ints("plots.load_balance_figure", "n", lambda v: _closed(dv.load_balance_figure(v, 2)))


@pytest.mark.parametrize("case", table.cases, ids=table.ids)
def test_row(case):
    case.run()
