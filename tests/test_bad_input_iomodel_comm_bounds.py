"""Bad-input rows of the communication bound of Chapter 11 (attnlib.iomodel.comm_bounds): the
certified bound per device, its closed forms and their regimes.

The rows' machinery, their ids and the inputs the parts share: bad_input_cases.py.
"""

from __future__ import annotations

import pytest
from bad_input_cases import Table, word

from attnlib.iomodel import comm_bounds as cb

table = Table()

DEVICE = "iomodel.comm_bounds.device_comm_lower_bound"
BUSIEST = "iomodel.comm_bounds.busiest_comm_lower_bound"
REGIME = "iomodel.comm_bounds.comm_regime"

# ---- the sizes both bounds take ----

for _name, _fn in [(DEVICE, cb.device_comm_lower_bound), (BUSIEST, cb.busiest_comm_lower_bound)]:
    table.bad_ints(_name, "n", lambda v, f=_fn: f(v, 4, P=2))
    table.bad_ints(_name, "d", lambda v, f=_fn: f(8, v, P=2))
    table.bad_ints(_name, "P", lambda v, f=_fn: f(8, 4, P=v))
    table.bad_ints(_name, "H", lambda v, f=_fn: f(8, 4, P=2, H=v, H_kv=1))
    table.raises(_name, "P-not-dividing-n", lambda f=_fn: f(9, 4, P=2), word("P"))
    table.raises(_name, "P>n", lambda f=_fn: f(4, 4, P=8), word("P"))
    table.raises(_name, "H-not-multiple", lambda f=_fn: f(8, 4, P=2, H=3, H_kv=2), word("H"))
    table.raises(_name, "H_kv=0", lambda f=_fn: f(8, 4, P=2, H=2, H_kv=0), word("H_kv"))

# ---- the device bound's own keywords ----

table.raises(
    DEVICE, "is_causal=str", lambda: cb.device_comm_lower_bound(8, 4, P=2, is_causal="yes"),
    word("is_causal"),
)  # fmt: skip
for _what, _work in [("bool", True), ("float", 2.0), ("str", "3"), ("negative", -1)]:
    table.raises(
        DEVICE, f"work={_what}", lambda w=_work: cb.device_comm_lower_bound(8, 4, P=2, work=w),
        word("work"),
    )  # fmt: skip
# more entries than exist: 64 dense, 36 causal (n = 8, one head)
table.raises(
    DEVICE, "work>entries", lambda: cb.device_comm_lower_bound(8, 4, P=2, work=65), word("work")
)
table.raises(
    DEVICE, "work>causal-entries",
    lambda: cb.device_comm_lower_bound(8, 4, P=2, is_causal=True, work=37), word("work"),
)  # fmt: skip
table.valid(
    DEVICE, "work=all-entries", lambda: cb.device_comm_lower_bound(8, 4, P=2, work=64),
    lambda v: v == 4 * 2 * (8 - 4),
)  # fmt: skip
table.valid(DEVICE, "P=1", lambda: cb.device_comm_lower_bound(8, 4, P=1), lambda v: v == 0.0)

# ---- the regimes ----

table.bad_ints(REGIME, "P", lambda v: cb.comm_regime(v, 4))
table.bad_ints(REGIME, "H", lambda v: cb.comm_regime(2, v, 1))
table.raises(REGIME, "H-not-multiple", lambda: cb.comm_regime(2, 3, 2), word("H"))


# ---- the tests ----


@pytest.mark.parametrize("case", table.cases, ids=table.ids)
def test_row(case):
    case.run()
