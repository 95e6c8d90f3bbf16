"""Bad-input rows of Part I's many devices: the device machine, the split of the rows, and the
ring, Ulysses and grid schedules with their counts (attnlib.iomodel.devices, shards, ring,
ulysses, grid).

The rows' machinery, their ids and the inputs the parts share: bad_input_cases.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from bad_input_cases import Table, word

from attnlib import iomodel as io
from attnlib.iomodel import shards as sh

table = Table()

# two query heads over one key/value head, n = 8 rows, d = 2, d_v = 3
Q3 = np.linspace(-1, 1, 32).reshape(2, 8, 2)
K3 = np.linspace(1, -1, 16).reshape(1, 8, 2)
V3 = np.linspace(0, 1, 24).reshape(1, 8, 3)
O3, LSE3 = io.ring_forward(Q3, K3, V3, P=2, enable_gqa=True)[:2]
DO3 = np.ones((2, 8, 3))
INPUTS = {"Q": Q3, "K": K3, "V": V3, "O": O3, "dO": DO3, "lse": LSE3}


def _arrays(name, arg, call):
    """The standard wrong arrays for ``arg`` of a schedule: ``call(value)`` runs it."""
    base = INPUTS[arg]
    for what, value in [
        ("None", None),
        ("int-dtype", base.astype(np.int64)),
        ("complex", base.astype(np.complex128)),
        ("empty", base[:0]),
        ("nan", np.where(np.arange(base.size).reshape(base.shape) == 0, np.nan, base)),
        ("ragged", [[1.0, 2.0], [3.0]]),
        *([] if arg == "V" else [("wrong-width", np.ones((*base.shape[:-1], base.shape[-1] + 2)))]),
    ]:
        table.raises(name, f"{arg}={what}", lambda v=value: call(v), word(arg))


def _bad_optional_ints(name, arg, call):
    """Wrong values for an int argument whose None means its default (H_kv, d_v)."""
    for what, value in [("bool", True), ("float", 2.0), ("str", "3"), ("below-minimum", 0)]:
        table.raises(name, f"{arg}={what}", lambda v=value: call(v), word(arg))


# ---- the schedules and their counts ----


def run_count(count, **change):
    """A count of n = 8 rows, d = 2, P = 2, H = 2 (on a 1 × 2 grid for the grid's counts)."""
    extra = {"grid": (1, 2)} if "grid" in count.__name__ else {}
    kw = {"n": 8, "d": 2, "P": 2, "H": 2, **extra, **change}
    return count(kw.pop("n"), kw.pop("d"), **kw)


SCHEDULES = {
    "ring": (io.ring_forward, io.ring_backward, io.ring_forward_count, io.ring_backward_count),
    "ulysses": (
        io.ulysses_forward, io.ulysses_backward, io.ulysses_forward_count,
        io.ulysses_backward_count,
    ),
    "grid": (io.grid_forward, io.grid_backward, io.grid_forward_count, io.grid_backward_count),
}  # fmt: skip

for s, (fwd, bwd, fwd_count, bwd_count) in SCHEDULES.items():
    extra = {"grid": (1, 2)} if s == "grid" else {}

    def run_fwd(fwd=fwd, extra=extra, **change):
        args = {"Q": Q3, "K": K3, "V": V3}
        kw = {"P": 2, "enable_gqa": True, **extra}
        for k, v in change.items():
            (args if k in args else kw)[k] = v
        return fwd(args["Q"], args["K"], args["V"], **kw)

    def run_bwd(bwd=bwd, extra=extra, **change):
        args = dict(INPUTS)
        kw = {"P": 2, "enable_gqa": True, **extra}
        for k, v in change.items():
            (args if k in args else kw)[k] = v
        return bwd(*(args[x] for x in ("Q", "K", "V", "O", "dO", "lse")), **kw)

    for name, run in ((f"iomodel.{s}_forward", run_fwd), (f"iomodel.{s}_backward", run_bwd)):
        for arg in ("Q", "K", "V") + (("O", "dO", "lse") if "backward" in name else ()):
            _arrays(name, arg, lambda v, run=run, arg=arg: run(**{arg: v}))
        table.bad_ints(name, "P", lambda v, run=run: run(P=v))
        table.raises(name, "P-not-dividing-n", lambda run=run: run(P=3), word("P"))
        table.raises(name, "layout=bad", lambda run=run: run(layout="ring"), "layout")
        table.raises(name, "zigzag-2P", lambda run=run: run(P=8, layout="zigzag"), "2P")
        table.bad_reals(name, "scale", lambda v, run=run: run(scale=v))
        table.raises(name, "is_causal=str", lambda run=run: run(is_causal="yes"), "is_causal")
        table.raises(name, "enable_gqa=False", lambda run=run: run(enable_gqa=False), "enable_gqa")
        table.raises(name, "Q-4-D", lambda run=run: run(Q=Q3[None], K=K3[None], V=V3[None]), "Q")
        table.raises(name, "K-rows", lambda run=run: run(K=K3[:, :4], V=V3[:, :4]), "K must")
        table.raises(name, "logits-overflow", lambda run=run: run(Q=Q3 * 1e200, K=K3 * 1e200), "Q")
        if "backward" in name:
            for arg in ("O", "dO", "lse"):
                bad = INPUTS[arg][:, :4]
                table.raises(name, f"{arg}-rows", lambda run=run, a=arg, v=bad: run(**{a: v}), arg)
        table.valid(
            name,
            "valid-run",
            lambda run=run, s=s: run(
                **{"ring": {"P": 8}, "ulysses": {"P": 2}}.get(s, {"P": 8, "grid": (2, 4)})
            ),
            lambda r: isinstance(r[-1], io.DeviceCount) and r[-1].max_sent > 0,
        )
    for name, count in ((f"iomodel.{s}_forward_count", fwd_count),
                        (f"iomodel.{s}_backward_count", bwd_count)):  # fmt: skip
        for arg in ("n", "d", "P", "H"):
            table.bad_ints(name, arg, lambda v, c=count, a=arg: run_count(c, **{a: v}))
        for arg in ("H_kv", "d_v"):
            _bad_optional_ints(name, arg, lambda v, c=count, a=arg: run_count(c, **{a: v}))
        table.raises(name, "P-not-dividing-n", lambda c=count: run_count(c, n=9), word("P"))
        table.raises(name, "H_kv-not-dividing-H", lambda c=count: run_count(c, H_kv=3), "H_kv")
        table.raises(name, "layout=bad", lambda c=count: run_count(c, layout=None), "layout")
        table.raises(name, "is_causal=int", lambda c=count: run_count(c, is_causal=1), "is_causal")
        one = {"grid": None} if s == "grid" else {}
        table.valid(
            name, "P=1", lambda c=count, o=one: run_count(c, P=1, **o), lambda r: r.max_sent == 0
        )

for name, call, args in (
    ("iomodel.ulysses_forward", io.ulysses_forward, (Q3, K3, V3)),
    ("iomodel.ulysses_backward", io.ulysses_backward, tuple(INPUTS.values())),
):
    run = lambda c=call, a=args: c(*a, P=4, enable_gqa=True)  # noqa: E731
    table.raises(name, "P-not-dividing-H", run, "P must divide H")
UC = "iomodel.ulysses_forward_count"
table.raises(UC, "P-not-dividing-H", lambda: io.ulysses_forward_count(8, 2, P=4, H=2), word("P"))
table.raises(
    UC, "H_kv-vs-P", lambda: io.ulysses_forward_count(12, 2, P=2, H=6, H_kv=3), "H_kv must divide P"
)
for name, count in (("iomodel.grid_forward_count", io.grid_forward_count),
                    ("iomodel.grid_backward_count", io.grid_backward_count)):  # fmt: skip
    table.raises(name, "P-not-square", lambda c=count: c(8, 2, P=2), "not a square")
    table.raises(name, "grid-R*C", lambda c=count: c(8, 2, P=2, grid=(2, 2)), word("grid"))
    for what, value in [
        ("str", "2x1"),
        ("triple", (1, 1, 2)),
        ("zero", (0, 2)),
        ("float", (1.0, 2)),
    ]:
        table.raises(name, f"grid={what}", lambda c=count, v=value: c(8, 2, P=2, grid=v), "grid")
GF = "iomodel.grid_forward"
table.raises(GF, "P-not-square", lambda: io.grid_forward(Q3, K3, V3, P=2, enable_gqa=True), "P =")
table.raises(
    GF, "grid-R*C", lambda: io.grid_forward(Q3, K3, V3, P=2, enable_gqa=True, grid=(2, 2)), "grid"
)
GB = "iomodel.grid_backward"
table.raises(
    GB, "grid-R*C", lambda: io.grid_backward(*INPUTS.values(), P=2, enable_gqa=True, grid=(3, 1)),
    "grid",
)  # fmt: skip

BIG = (np.ones((1, 2**16, 2)),) * 3  # 2^16 rows: the Ulysses scores alone need 32 GiB
table.raises(
    "iomodel.ulysses_forward", "memory", lambda: io.ulysses_forward(*BIG, P=1), "n .the rows"
)
table.raises("iomodel.ring_forward", "steps", lambda: io.ring_forward(*BIG, P=2**11), "block steps")

# ---- the split of the rows ----

for name, fn in (
    ("iomodel.shard_rows", io.shard_rows),
    ("iomodel.causal_work", io.causal_work),
    ("iomodel.shards.check_shards", sh.check_shards),
):
    table.bad_ints(name, "n", lambda v, fn=fn: fn(v, 2, "contiguous"))
    table.bad_ints(name, "P", lambda v, fn=fn: fn(8, v, "contiguous"))
    table.raises(name, "P-not-dividing-n", lambda fn=fn: fn(8, 3, "contiguous"), word("P"))
    table.raises(name, "zigzag-2P", lambda fn=fn: fn(12, 4, "zigzag"), "2P")
    table.raises(name, "layout=bad", lambda fn=fn: fn(8, 2, "Zigzag"), "layout")
    table.raises(name, "layout=None", lambda fn=fn: fn(8, 2, None), "layout")
table.bad_ints("iomodel.causal_work", "H", lambda v: io.causal_work(8, 2, H=v))
table.valid("iomodel.shard_rows", "P=n", lambda: io.shard_rows(4, 4), lambda r: len(r) == 4)
for arg in ("rows", "cols"):
    for what, value in [("float", np.array([0.5])), ("2-D", np.zeros((1, 1), int)), ("None", None)]:
        args = {"rows": np.arange(2), "cols": np.arange(2)}
        run = lambda v=value, a=arg, args=args: io.kept_pairs(**(args | {a: v}))  # noqa: E731
        table.raises("iomodel.kept_pairs", f"{arg}={what}", run, word(arg))
table.valid(
    "iomodel.kept_pairs",
    "empty-rows",
    lambda: io.kept_pairs(np.array([], int), [0]),
    lambda r: r == 0,
)
CS = "iomodel.shards.check_sizes"
table.bad_ints(CS, "d", lambda v: sh.check_sizes(8, v, P=2))
_bad_optional_ints(CS, "H_kv", lambda v: sh.check_sizes(8, 2, P=2, H_kv=v))
table.raises(CS, "H_kv-not-dividing-H", lambda: sh.check_sizes(8, 2, P=2, H=3, H_kv=2), "H_kv")
table.raises(CS, "is_causal=str", lambda: sh.check_sizes(8, 2, P=2, is_causal="no"), "is_causal")
CP = "iomodel.shards.check_pass"
PASS_KW = dict(
    P=2, layout="contiguous", scale=None, is_causal=False, enable_gqa=True, who="a run",
    steps=lambda s: 1, scores=lambda s: 1,
)  # fmt: skip
table.raises(CP, "Q=None", lambda: sh.check_pass(None, K3, V3, **PASS_KW), word("Q"))
table.raises(CP, "K-rows", lambda: sh.check_pass(Q3, K3[:, :4], V3[:, :4], **PASS_KW), "K must")
table.raises(
    CP, "lse-shape", lambda: sh.check_pass(Q3, K3, V3, **PASS_KW, outputs=(O3, DO3, LSE3[:1])),
    "lse",
)  # fmt: skip
table.raises(CP, "scale=0", lambda: sh.check_pass(Q3, K3, V3, **PASS_KW | {"scale": 0}), "scale")

# ---- the device machine ----

table.bad_ints("iomodel.DeviceMachine", "P", io.DeviceMachine)


def _machine():
    m = io.DeviceMachine(2)
    m.load(0, "x", np.ones(3), "K")
    return m


ONE = np.ones(2)
for method in ("load", "put"):
    name = f"iomodel.DeviceMachine.{method}"

    def call(method=method, p=0, name="y", array=ONE, kind="K"):
        return getattr(_machine(), method)(p, name, array, kind)

    for what, value in [("negative", -1), ("too-large", 2), ("float", 0.0), ("None", None)]:
        table.raises(name, f"p={what}", lambda v=value, c=call: c(p=v), word("p"))
    for what, value in [("empty", ""), ("int", 3), ("None", None)]:
        table.raises(name, f"name={what}", lambda v=value, c=call: c(name=v), word("name"))
        table.raises(name, f"kind={what}", lambda v=value, c=call: c(kind=v), word("kind"))
    for what, value in [("str", "abc"), ("None", None), ("int-dtype", np.arange(2)),
                        ("nan", np.array([np.nan])), ("empty", np.ones(0))]:  # fmt: skip
        table.raises(name, f"array={what}", lambda v=value, c=call: c(array=v), word("array"))
    table.valid(
        name, "lse-neg-inf", lambda c=call: c(array=np.array([-np.inf])), lambda r: r is None
    )
table.raises(
    "iomodel.DeviceMachine.load", "twice", lambda: _machine().load(0, "x", ONE, "K"),
    "device 0 already holds a block named 'x'", error=io.MachineError,
)  # fmt: skip
for method in ("get", "holds", "drop"):
    name = f"iomodel.DeviceMachine.{method}"
    table.raises(name, "p=2", lambda m=method: getattr(_machine(), m)(2, "x"), word("p"))
    table.raises(name, "p=bool", lambda m=method: getattr(_machine(), m)(True, "x"), word("p"))
    table.raises(name, "name=int", lambda m=method: getattr(_machine(), m)(0, 1), word("name"))
for method in ("get", "drop"):
    table.raises(
        f"iomodel.DeviceMachine.{method}", "not-held",
        lambda m=method: getattr(_machine(), m)(1, "x"),
        "device 1 does not hold a block named 'x'", error=io.MachineError,
    )  # fmt: skip
table.valid(
    "iomodel.DeviceMachine.holds", "absent", lambda: _machine().holds(1, "x"), lambda r: r is False
)
CM = "iomodel.DeviceMachine.compute"
table.raises(CM, "p=-1", lambda: _machine().compute(-1, 3), word("p"))
table.raises(CM, "entries=-1", lambda: _machine().compute(0, -1), word("entries"))
table.raises(CM, "entries=float", lambda: _machine().compute(0, 1.5), word("entries"))
EX = "iomodel.DeviceMachine.exchange"
for what, value, pattern in [
    ("str", "x", "messages"),
    ("None", None, "messages"),
    ("short-tuple", [(0, 1, ["x"])], r"messages\[0\]"),
    ("src-out-of-range", [(5, 1, ["x"], ["x"])], "src"),
    ("dst-bool", [(0, True, ["x"], ["x"])], "dst"),
    ("names-str", [(0, 1, "x", ["x"])], "names at src"),
    ("names-empty", [(0, 1, [], [])], "names at src"),
    ("names-lengths", [(0, 1, ["x"], ["x", "y"])], "at dst"),
    ("name-int", [(0, 1, ["x"], [3])], "names at dst"),
]:
    table.raises(EX, what, lambda v=value: _machine().exchange(v), pattern)
for what, value, pattern in [
    ("self-send", [(0, 0, ["x"], ["y"])], "device 0 sends 'x' to itself"),
    ("not-held", [(1, 0, ["x"], ["y"])], "device 1 does not hold a block named 'x'"),
    ("two-messages", [(0, 1, ["x"], ["a"]), (0, 1, ["x"], ["b"])], "second message"),
]:
    table.raises(EX, what, lambda v=value: _machine().exchange(v), pattern, error=io.MachineError)
table.valid(
    "iomodel.DeviceMachine.exchange",
    "empty-round",
    lambda: _machine().exchange([]),
    lambda r: r is None,
)

DC = "iomodel.DeviceCount"
GOOD = dict(sent=[1, 1], received=[1, 1], messages=[1, 1], work=[2, 2])
for field in GOOD:
    for what, value in [("float", [1.0, 1.0]), ("negative", [-1, 1]), ("2-D", [[1, 1]]),
                        ("None", None), ("empty", [])]:  # fmt: skip
        table.raises(
            DC,
            f"{field}={what}",
            lambda f=field, v=value: io.DeviceCount(**GOOD | {f: v}),
            word(field),
        )
table.raises(DC, "received-length", lambda: io.DeviceCount(**GOOD | {"received": [1]}), "received")
for what, value in [("list", [1]), ("kind-int", {3: [1, 1]}), ("words-length", {"K": [1]})]:
    run = lambda v=value: io.DeviceCount(**GOOD, received_by_kind=v)  # noqa: E731
    table.raises(DC, f"received_by_kind={what}", run, "received_by_kind")
table.valid(DC, "no-kinds", lambda: io.DeviceCount(**GOOD), lambda r: r.received_by_kind == {})


# ---- the rules of Ulysses' head split and of the 2-D grid ----

table.bad_ints("iomodel.ulysses_heads", "P", lambda v: io.ulysses_heads(4, 2, v))
table.bad_ints("iomodel.ulysses_heads", "H_kv", lambda v: io.ulysses_heads(4, v, 2))
table.raises("iomodel.ulysses_heads", "P-not-dividing-H", lambda: io.ulysses_heads(6, 6, 4), "P")
table.raises("iomodel.ulysses_heads", "H_kv-and-P-apart", lambda: io.ulysses_heads(12, 4, 6), "P")
table.raises(
    "iomodel.ulysses_heads", "H_kv-not-dividing-H", lambda: io.ulysses_heads(6, 4, 2), "H_kv"
)
table.bad_ints("iomodel.grid_shape", "P", lambda v: io.grid_shape(None, v))
table.raises("iomodel.grid_shape", "P-not-square", lambda: io.grid_shape(None, 6), word("P"))
table.raises("iomodel.grid_shape", "grid-not-P", lambda: io.grid_shape((2, 2), 6), "grid")
table.raises("iomodel.grid_shape", "grid-3-tuple", lambda: io.grid_shape((1, 2, 3), 6), "grid")
table.raises("iomodel.grid_shape", "grid-bool", lambda: io.grid_shape((True, 1), 1), "grid")
table.raises("iomodel.grid_shape", "grid-zero", lambda: io.grid_shape((0, 6), 6), "grid")


@pytest.mark.parametrize("case", table.cases, ids=table.ids)
def test_row(case):
    case.run()
