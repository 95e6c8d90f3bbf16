"""Hong and Kung's partition with recomputation (attnlib.iomodel.partition): the pruning of
useless computations, the segments of M I/Os with the sets of the segment lemma (D_p, E_p, the
values left unfinished) and of the usual sketch of HK81's partition lemma (first-computation
parts and their minimum sets), checked on every schedule the exact solver returns for small
graphs and on the loop-order schedules against sets rebuilt here from the moves; the 7-vertex
graph on which the unpruned sketch fails; the dominator test on a graph checked by hand."""

from __future__ import annotations

import pytest
from test_iomodel_optimal import random_dag

from attnlib import AttnInputError
from attnlib.iomodel.graphs import (
    ComputationGraph,
    attention_dv_graph,
    attention_forward_graph,
    check_schedule,
    inner_product_graph,
    least_feasible_M,
    matmul_graph,
    trivial_io_bound,
)
from attnlib.iomodel.optimal import optimal_io, replay_schedule
from attnlib.iomodel.partition import (
    LEMMA_FACTS,
    is_dominator,
    prune_schedule,
    schedule_segments,
)
from attnlib.iomodel.pebbling import loop_order_moves

# ---- the sets of the lemma, rebuilt from the moves by the definitions ------------------------


def _pebbles(moves):
    """Each computation's red pebble as (index of the computation, index of the deletion that
    ends it or None, the vertex)."""
    out = []
    for i, (op, v) in enumerate(moves):
        if op == "compute":
            end = next((j for j in range(i + 1, len(moves)) if moves[j] == ("delete", v)), None)
            out.append((i, end, v))
    return out


def _prune_by_definition(G, moves):
    """Delete one useless computation (and its deletion) at a time until none is left."""
    moves = list(moves)
    while True:
        for i, end, v in _pebbles(moves):
            life = moves[i + 1 : len(moves) if end is None else end]
            if not any(
                (op == "compute" and v in G.preds[u]) or (op == "write" and u == v)
                for op, u in life
            ):
                moves = [mv for j, mv in enumerate(moves) if j not in (i, end)]
                break
        else:
            return moves


def _segments_by_definition(G, moves, M):
    """The pruned schedule cut every M I/Os: per segment the red pebbles at its start and end,
    the reads, writes and computations, the values computed and not used there, and the part
    (vertices whose first computation it holds)."""
    moves = _prune_by_definition(G, moves)
    which, io = [], 0  # the segment of each move
    for op, _ in moves:
        is_io = op in ("read", "write")
        which.append(io // M if is_io else (max(io - 1, 0)) // M)
        io += is_io
    h = max(which, default=-1) + 1
    segs = [
        {key: set() for key in ("red_start", "read", "written", "computed", "unfinished", "part")}
        for _ in range(h)
    ]
    red = set()
    for (op, v), p in zip(moves, which, strict=True):
        if p > 0 and "red_end" not in segs[p - 1]:
            segs[p - 1]["red_end"] = set(red)
            segs[p]["red_start"] = set(red)
        key = {"read": "read", "write": "written", "compute": "computed"}.get(op)
        if key:
            segs[p][key].add(v)
        if op == "compute" and all(v not in seg["part"] for seg in segs):
            segs[p]["part"].add(v)
        if op in ("read", "compute"):
            red.add(v)
        elif op == "delete":
            red.discard(v)
    if segs:
        segs[-1]["red_end"] = set(red)
    for i, end, v in _pebbles(moves):
        life = range(i + 1, len(moves) if end is None else end)
        if not any(
            moves[j][0] == "compute" and v in G.preds[moves[j][1]] and which[j] == which[i]
            for j in life
        ):
            segs[which[i]]["unfinished"].add(v)
    return moves, segs


def _assert_lemma(G, moves, M):
    """schedule_segments agrees with the definitions, and every fact of the segment lemma and
    of the pruned sketch holds."""
    moves = check_schedule(G, moves, M)  # (op, vertex index) pairs
    pruned, expect = _segments_by_definition(G, moves, M)
    segs = schedule_segments(G, moves, M)
    assert prune_schedule(G, moves) == pruned
    q = sum(op in ("read", "write") for op, _ in moves)
    assert [s["io"] for s in segs] == [M] * (len(segs) - 1) + [q - M * (len(segs) - 1)]
    assert len(segs) == -(-q // M)  # h = ceil(Q / M): pruning never changes the I/O
    parts = [set(s["part"]) for s in segs]
    assert sum(map(len, parts)) == len(set().union(*parts))  # the parts are disjoint
    assert set().union(*parts) == {v for op, v in pruned if op == "compute"}
    for s, e in zip(segs, expect, strict=True):
        for key in ("part", "computed", "red_start", "red_end", "read", "written", "unfinished"):
            assert set(s[key]) == e[key], key
        D, E = e["red_start"] | e["read"], e["red_end"] | e["written"]
        Min = {v for v in e["part"] if not any(w in e["part"] for w in G.succs[v])}
        assert (set(s["dominator"]), set(s["kept"]), set(s["minimum"])) == (D, E, Min)
        assert len(D) <= 2 * M and is_dominator(G, D, e["computed"])
        assert len(D | E) <= 3 * M and e["unfinished"] <= E
        assert Min <= E  # the sketch's minimum set, once the schedule is pruned
        assert set(s["facts"]) == set(LEMMA_FACTS) and all(s["facts"].values())


# ---- the counterexample to the first-computation sketch ---------------------------------------

# inputs a, b, c, e; s = a + b; outputs w = a + e and t = s + c
SEVEN = ComputationGraph(
    names=("a", "b", "c", "e", "s", "w", "t"),
    ops=("input",) * 4 + ("add",) * 3,
    preds=((), (), (), (), (0, 1), (0, 3), (4, 2)),
    outputs=(5, 6),
)
# computes s, deletes it unused, and recomputes it after the first M = 4 I/Os
RECOMPUTING = [
    ("read", "a"), ("read", "b"), ("compute", "s"), ("delete", "s"),
    ("read", "e"), ("compute", "w"), ("write", "w"), ("delete", "e"), ("delete", "w"),
    ("read", "c"), ("compute", "s"), ("delete", "a"), ("compute", "t"), ("write", "t"),
]  # fmt: skip


def test_the_recomputing_schedule_is_optimal():
    """The solver's own optimal schedule of SEVEN computes s once; this one, as cheap, twice."""
    count, _ = replay_schedule(SEVEN, RECOMPUTING, 4)
    assert count.total == optimal_io(SEVEN, 4).io == trivial_io_bound(SEVEN) == 6
    assert count.peak_fast == 4
    assert sum(mv == ("compute", "s") for mv in RECOMPUTING) == 2


def test_the_unpruned_sketch_breaks_and_the_pruned_segments_keep_every_fact():
    s, t, w = (SEVEN.index(x) for x in "stw")
    sketch = schedule_segments(SEVEN, RECOMPUTING, 4, prune=False)
    assert [seg["part"] for seg in sketch] == [(s, w), (t,)]
    assert s in sketch[0]["minimum"] and s not in sketch[0]["kept"]  # deleted, never written
    assert s in sketch[0]["unfinished"]
    broken = [fact for fact, holds in sketch[0]["facts"].items() if not holds]
    assert broken == list(LEMMA_FACTS[3:])
    pruned = schedule_segments(SEVEN, RECOMPUTING, 4)
    assert [seg["part"] for seg in pruned] == [(w,), (s, t)]
    assert all(all(seg["facts"].values()) for seg in pruned)
    _assert_lemma(SEVEN, RECOMPUTING, 4)


# ---- every optimal schedule the solver returns, and the loop-order schedules ----------------

GRAPHS = [
    ("inner product k=3", inner_product_graph(3), 3),
    ("inner product k=4, balanced", inner_product_graph(4, tree="balanced"), 3),
    ("matmul 1x2x2", matmul_graph(1, 2, 2), 3),
    ("matmul 2x2x2", matmul_graph(2, 2, 2), 2),
    ("attention forward n=1 m=2 d=1", attention_forward_graph(1, 2, 1), 2),
    ("dV n=m=2 d=1", attention_dv_graph(2, 2, 1), 2),
] + [
    (f"random DAG seed={seed} n={n}", random_dag(seed, n=n), 3)
    for seed in range(12)
    for n in (9, 12)
]


@pytest.mark.parametrize("label,G,extra", GRAPHS, ids=[g[0] for g in GRAPHS])
def test_the_lemma_holds_on_optimal_and_loop_order_schedules(label, G, extra):
    for M in range(least_feasible_M(G), least_feasible_M(G) + extra):
        best = optimal_io(G, M)
        for moves in (best.moves, loop_order_moves(G, M)):
            _assert_lemma(G, moves, M)


def test_the_property_test_sees_the_unpruned_sketch_fail():
    """Had schedule_segments not pruned, the test above would fail: on solver schedules of
    the random DAGs the unpruned parts differ from the pruned ones, and some break the
    sketch's minimum-set fact."""
    differ = broken = 0
    for _, G, extra in GRAPHS[6:]:
        for M in range(least_feasible_M(G), least_feasible_M(G) + extra):
            moves = optimal_io(G, M).moves
            sketch = schedule_segments(G, moves, M, prune=False)
            lemma = schedule_segments(G, moves, M)
            differ += [seg["part"] for seg in sketch] != [seg["part"] for seg in lemma]
            broken += not all(seg["facts"][LEMMA_FACTS[4]] for seg in sketch)
    assert differ >= 5 and broken >= 1


def test_last_computation_parts_fail_where_the_segment_lemma_holds():
    """A legal, pruned schedule: v is written, recomputed in a later segment and used there by
    u, and u's last computation, one segment later still, reads v's first copy back. Put in
    the part of its last computation, v would be in that part's minimum set while neither red
    at the segment's end nor written in it; the segment lemma and the pruned first-computation
    parts hold."""
    G = ComputationGraph(
        names=("a", "b", "c", "v", "u", "x", "y"),
        ops=("input",) * 3 + ("add",) * 4,
        preds=((), (), (), (0, 1), (3, 2), (4, 0), (4, 2)),
        outputs=(5, 6),
    )
    pad = [("delete", "c"), ("read", "c")]
    moves = (
        [("read", "a"), ("read", "b"), ("compute", "v"), ("write", "v"), ("delete", "v")]
        + [("read", "c")] + pad * 2
        + [("compute", "v"), ("compute", "u"), ("delete", "v"), ("compute", "x"), ("write", "x")]
        + [("delete", "x"), ("delete", "u"), ("delete", "a"), ("delete", "b")]
        + [("read", "a"), ("delete", "a")] * 4
        + [("read", "v"), ("compute", "u"), ("compute", "y"), ("write", "y")]
    )  # fmt: skip
    moves = check_schedule(G, moves, 5)
    assert prune_schedule(G, moves) == moves  # nothing is useless
    segs = schedule_segments(G, moves, 5)
    which, io = {}, 0  # each vertex's segment of last computation
    for op, x in moves:
        io += op in ("read", "write")
        which.update({x: (io - 1) // 5} if op == "compute" else {})
    last = {x for x, p in which.items() if p == 1}
    v = G.index("v")
    assert last == {v, G.index("x")} and not any(w in last for w in G.succs[v])
    assert v not in segs[1]["kept"]
    _assert_lemma(G, moves, 5)


# ---- pruning ----------------------------------------------------------------------------------


def test_pruning_deletes_unused_computations_in_cascade_and_keeps_the_io():
    G = inner_product_graph(2)  # s = a0·b0 + a1·b1
    reads = [("read", x) for x in ("a0", "b0", "a1", "b1")]
    useless = [("compute", "p0"), ("compute", "p1"), ("compute", "s"), ("delete", "s")]
    useless += [("delete", "p0"), ("delete", "p1")]
    used = [("compute", "p0"), ("compute", "p1"), ("compute", "s"), ("write", "s")]
    tail = [("delete", "p0"), ("compute", "p0")]  # p0 again, red to the end, never used
    moves = reads + useless + used + tail
    check_schedule(G, moves, 7)
    idx = check_schedule(G, reads + used + [("delete", "p0")])
    pruned = prune_schedule(G, moves)
    assert pruned == idx
    assert check_schedule(G, pruned, 7) == pruned  # legal with the same M
    assert prune_schedule(G, pruned) == pruned
    assert _prune_by_definition(G, check_schedule(G, moves)) == pruned
    io = [mv for mv in moves if mv[0] in ("read", "write")]
    assert [(op, G.names[v]) for op, v in pruned if op in ("read", "write")] == io


def test_a_computation_used_only_by_a_write_is_kept():
    G = inner_product_graph(1)  # s = a0·b0
    moves = [("read", "a0"), ("read", "b0"), ("compute", "s"), ("write", "s"), ("delete", "s")]
    moves += [("compute", "s")]  # a second s, never used
    assert prune_schedule(G, moves) == check_schedule(G, moves[:-1])


# ---- the dominator test and bad inputs --------------------------------------------------------


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


def test_bad_options_are_refused_by_name():
    G = inner_product_graph(2)
    moves = optimal_io(G, 4).moves
    with pytest.raises(AttnInputError, match=r"\bprune\b"):
        schedule_segments(G, moves, 4, prune="yes")
    with pytest.raises(AttnInputError, match=r"moves\[0\]"):
        prune_schedule(G, [("compute", "s")] + list(moves))
    with pytest.raises(AttnInputError, match=r"\bG\b"):
        prune_schedule(None, moves)
