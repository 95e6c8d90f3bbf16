"""Hong and Kung's partition (attnlib.iomodel.partition): an optimal schedule cut into segments
of M I/Os, each with a dominator and a minimum set of at most 2M vertices, and the dominator
test itself on a graph small enough to check by hand."""

from __future__ import annotations

import pytest

from attnlib import AttnInputError
from attnlib.iomodel.graphs import inner_product_graph
from attnlib.iomodel.optimal import optimal_io
from attnlib.iomodel.partition import is_dominator, schedule_segments


def test_segments_of_an_optimal_schedule():
    G, M = inner_product_graph(4), 3
    res = optimal_io(G, M)
    segs = schedule_segments(G, res.moves, M)
    assert sum(s["io"] for s in segs) == res.io
    assert all(s["io"] == M for s in segs[:-1]) and 1 <= segs[-1]["io"] <= M
    assert len(segs) == -(-res.io // M)
    computed = [v for s in segs for v in s["computed"]]
    assert sorted(computed) == [v for v in range(G.n) if G.ops[v] != "input"]
    for s in segs:
        assert len(s["dominator"]) <= 2 * M and len(s["kept"]) <= 2 * M
        assert is_dominator(G, s["dominator"], s["computed"])
        assert set(s["minimum"]) <= set(s["computed"])
    assert not is_dominator(G, (), segs[0]["computed"] or (G.outputs[0],))


def test_a_dominator_cuts_every_path_from_an_input():
    G = inner_product_graph(2)  # inputs a0, a1, b0, b1; products p0, p1; their sum s
    p0, p1, s = (G.index(name) for name in ("p0", "p1", "s"))
    inputs = [v for v in range(G.n) if G.ops[v] == "input"]
    assert is_dominator(G, (p0, p1), (s,))
    assert not is_dominator(G, (p0,), (s,))  # a1·b1 reaches s through p1
    assert is_dominator(G, inputs, (p0, p1, s))
    assert is_dominator(G, (s,), (s,))  # a vertex of D is cut off by itself
    assert not is_dominator(G, (), (p0,))
    with pytest.raises(AttnInputError, match=r"^D"):
        is_dominator(G, (G.n,), (s,))
