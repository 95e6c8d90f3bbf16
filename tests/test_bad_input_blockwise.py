"""Bad-input rows of the block arithmetic that the sharded schedules share (attnlib.blockwise).

The rows' machinery, their ids and the inputs the parts share: bad_input_cases.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from bad_input_cases import Table, word

from attnlib import blockwise as bw

table = Table()

# one block: two heads over one key/value head, 3 query rows, 4 keys, d = 2, d_v = 1
Qb = np.ones((2, 3, 2))
Kb = np.ones((1, 4, 2))
Vb = np.ones((1, 4, 1))
Ob, lseb = bw.block_forward(Qb, Kb, Vb, scale=1.0)
dOb = np.ones((2, 3, 1))
Db = bw.row_deltas(Ob, dOb)


def _arrays(name, arg, call):
    """The standard wrong 3-D arrays (or 2-D for lse, D) for ``arg``."""
    base = {"Q": Qb, "K": Kb, "V": Vb, "dO": dOb, "O": Ob, "O_a": Ob, "O_b": Ob}.get(arg)
    base = np.zeros((2, 3)) if base is None else base
    for what, value in [
        ("None", None),
        ("int-dtype", base.astype(np.int64)),
        ("complex", base.astype(np.complex128)),
        ("too-few-dims", base[0]),
        ("empty", base[:0]),
        ("nan", np.where(np.arange(base.size).reshape(base.shape) == 0, np.nan, base)),
        ("ragged", [[1.0, 2.0], [3.0]]),
    ]:
        table.raises(name, f"{arg}={what}", lambda v=value: call(v), word(arg))


def fwd(**kw):
    args = dict(Q=Qb, K=Kb, V=Vb, scale=1.0, keep=None) | kw
    return bw.block_forward(args.pop("Q"), args.pop("K"), args.pop("V"), **args)


def bwd(**kw):
    args = dict(Q=Qb, K=Kb, V=Vb, dO=dOb, lse=lseb, D=Db, scale=1.0, keep=None) | kw
    arrays = [args.pop(k) for k in ("Q", "K", "V", "dO", "lse", "D")]
    return bw.block_backward(*arrays, **args)


for name, call in (("blockwise.block_forward", fwd), ("blockwise.block_backward", bwd)):
    for arg in ("Q", "K", "V"):
        _arrays(name, arg, lambda v, arg=arg, call=call: call(**{arg: v}))
    table.bad_reals(name, "scale", lambda v, call=call: call(scale=v), extra=[("None", None)])
    three = dict(Q=np.ones((3, 3, 2)), K=np.ones((2, 4, 2)), V=np.ones((2, 4, 1)))
    table.raises(name, "H-not-multiple", lambda call=call, kw=three: call(**kw), "multiple")
    table.raises(name, "K-d", lambda call=call: call(K=np.ones((1, 4, 3))), word("K"))
    table.raises(name, "V-rows", lambda call=call: call(V=np.ones((1, 5, 1))), word("V"))
    table.raises(name, "keep-shape", lambda call=call: call(keep=np.ones((4, 3), bool)), "keep")
    table.raises(name, "keep-dtype", lambda call=call: call(keep=np.ones((3, 4))), "keep")
    table.raises(
        name, "mixed-dtype", lambda call=call: call(K=Kb.astype(np.float32)), "^K has dtype"
    )
for arg in ("dO", "lse", "D"):
    _arrays("blockwise.block_backward", arg, lambda v, arg=arg: bwd(**{arg: v}))
table.raises("blockwise.block_backward", "dO-shape", lambda: bwd(dO=np.ones((2, 3, 2))), "dO")
BWD = "blockwise.block_backward"
table.raises(BWD, "lse-+inf", lambda: bwd(lse=np.full((2, 3), np.inf)), "lse")
table.raises("blockwise.block_backward", "D-shape", lambda: bwd(D=np.ones((2, 4))), word("D"))
table.valid(
    "blockwise.block_forward",
    "row-keeps-nothing",
    lambda: fwd(keep=np.zeros((3, 4), bool)),
    lambda r: np.all(r[0] == 0) and np.all(np.isneginf(r[1])),
)

for arg in ("O_a", "lse_a", "O_b", "lse_b"):
    args = {"O_a": Ob, "lse_a": lseb, "O_b": Ob, "lse_b": lseb}
    _arrays("blockwise.merge", arg, lambda v, arg=arg, args=args: bw.merge(**(args | {arg: v})))
table.raises("blockwise.merge", "O_b-shape", lambda: bw.merge(Ob, lseb, Ob[:, :2], lseb), "O_b")
MERGE = "blockwise.merge"
table.raises(MERGE, "lse_b-shape", lambda: bw.merge(Ob, lseb, Ob, lseb[:, :2]), "lse_b")
table.raises(MERGE, "mixed-dtype", lambda: bw.merge(Ob, lseb, Ob.astype(np.float32), lseb), "dtype")

for arg in ("O", "dO"):
    pair = {"O": Ob, "dO": dOb}
    _arrays("blockwise.row_deltas", arg, lambda v, a=arg, p=pair: bw.row_deltas(**(p | {a: v})))
table.raises(
    "blockwise.row_deltas", "dO-shape", lambda: bw.row_deltas(Ob, np.ones((2, 3, 2))), "dO"
)

for arg in ("rows", "cols"):
    for what, value in [("float", np.array([0.5])), ("2-D", np.zeros((1, 1), int)), ("None", None)]:
        args = {"rows": np.arange(2), "cols": np.arange(2)}
        run = lambda v=value, a=arg, args=args: bw.causal_keep(**(args | {a: v}))  # noqa: E731
        table.raises("blockwise.causal_keep", f"{arg}={what}", run, word(arg))


@pytest.mark.parametrize("case", table.cases, ids=table.ids)
def test_row(case):
    case.run()
