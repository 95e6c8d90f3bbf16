"""Hong and Kung's partition of a schedule, the tool behind the I/O lower bounds.

:func:`prune_schedule` deletes the computations whose value is never used;
:func:`schedule_segments` cuts the pruned schedule into consecutive segments of M I/Os and
names, for each, the sets of the segment lemma (what enters it, what it leaves behind, which
computed values are left unfinished) and of the usual sketch of HK81's partition lemma (each
vertex in the part of its first computation, and that part's minimum set), with the facts each
states checked on the sets found; :func:`is_dominator` checks the defining property of a
dominator set on the graph.
"""

from __future__ import annotations

from .._checks import AttnInputError, check_bool, check_int
from .graphs import ComputationGraph, check_graph, check_schedule

__all__ = ["LEMMA_FACTS", "prune_schedule", "schedule_segments", "is_dominator"]

#: The facts :func:`schedule_segments` checks on every segment p: the segment lemma's four
#: (D_p, E_p and the computations of p), then the sketch's minimum-set fact.
LEMMA_FACTS = (
    "|D_p| <= 2M",
    "|D_p ∪ E_p| <= 3M",
    "D_p dominates every vertex computed in p",
    "every value computed in p and not used in p is in E_p",
    "the first-computation minimum set is red at the end or written",
)


def prune_schedule(G: ComputationGraph, moves) -> list[tuple[str, int]]:
    """The schedule without its useless computations.

    A computation of v places a red pebble on v that stays in place until v's next deletion
    (or the end of the schedule). It is **useless** if, while that pebble is in place, no
    successor of v is computed and v is not written. Pruning deletes every useless
    computation together with the deletion that ends its pebble, repeatedly (deleting a
    computation of u can make a computation of u's predecessor useless), until none is left:
    one backward pass, since a pebble's uses all come after it is placed.

    Pruning removes only computations and deletions, so it never adds I/O: the reads and
    writes are kept, in order, and the count is unchanged. The result is a legal schedule
    with the same red-pebble limit: while a removed pebble would have been in place nothing
    reads, writes or computes from v, and every other pebble is as before. Every vertex an
    output depends on keeps a computation.

    ``moves`` is a legal schedule of G (:func:`~attnlib.iomodel.graphs.check_schedule`);
    returns the pruned list of ``(op, vertex index)`` pairs. Raises AttnInputError for a
    malformed or illegal schedule.

    Examples
    --------
    >>> from attnlib.iomodel import inner_product_graph
    >>> G = inner_product_graph(1)  # s = a0·b0; its first computation is deleted unused
    >>> moves = [("read", "a0"), ("read", "b0"), ("compute", "s"), ("delete", "s"),
    ...          ("compute", "s"), ("write", "s")]
    >>> [(op, G.names[v]) for op, v in prune_schedule(G, moves)]
    [('read', 'a0'), ('read', 'b0'), ('compute', 's'), ('write', 's')]
    """
    G = check_graph(G)
    moves = check_schedule(G, moves)
    used: dict[int, bool] = {}  # v -> whether v's pebble in place (seen from later) is used
    end: dict[int, int | None] = {}  # v -> index of the deletion that ends that pebble
    drop = set()
    for i in range(len(moves) - 1, -1, -1):
        op, v = moves[i]
        if op == "delete":
            used[v], end[v] = False, i
        elif op == "write":
            used[v] = True
        elif op == "read":
            _forget(v, used, end)
        elif used.get(v, False):  # a computation whose pebble is used: it uses its inputs
            for u in G.preds[v]:
                used[u] = True
            _forget(v, used, end)
        else:  # a computation whose pebble is never used (or stays, unused, to the end)
            drop.add(i)
            if end.get(v) is not None:
                drop.add(end[v])
            _forget(v, used, end)
    return [mv for i, mv in enumerate(moves) if i not in drop]


def _forget(v: int, *pebble_records: dict) -> None:
    # Seen backwards, v's pebble begins here: earlier moves belong to an earlier pebble.
    for record in pebble_records:
        record.pop(v, None)


def schedule_segments(G: ComputationGraph, moves, M: int, *, prune: bool = True) -> list[dict]:
    """Cut a schedule into segments of M I/Os and read off the sets of the lower-bound proofs.

    The schedule is pruned first (:func:`prune_schedule`; pruning never adds I/O), then cut
    into h = ceil(Q/M) consecutive segments of M I/Os (the last may have fewer; the moves
    after a segment's M-th I/O and before the next I/O stay in it). For segment p:

    * D_p (``dominator``): the red pebbles at its start and the vertices read in it;
    * E_p (``kept``): the red pebbles at its end and the vertices written in it;
    * ``unfinished``: the vertices computed in p whose pebble from a computation in p is not
      used by a computation in p (no successor computed from it while it is in place);
    * ``part``: the vertices whose **first** computation is in p, and ``minimum``: those of
      the part with no successor in the part: the sets of the usual sketch of HK81's
      partition lemma.

    The segment lemma states |D_p| <= 2M, |D_p ∪ E_p| <= 3M (M red at the start, M at the
    end, M reads and writes), that D_p dominates every vertex computed in p (by induction on
    time in the segment), and that the unfinished vertices lie in E_p (after pruning, a
    pebble not used in p is still in place at p's end or written in p). The sketch states
    that the minimum set lies in E_p; after pruning that holds too (the pebble of a vertex's
    first computation is used, and a successor computed from it inside p is first computed
    in p, so is in the part). Without pruning (``prune=False``) the last two can fail once a
    vertex is computed more than once: a vertex computed, deleted unused and recomputed
    later lands in a minimum set while neither red at the end nor written. The function
    checks each fact on the sets it finds rather than assuming it.

    Returns one dict per segment with keys ``io`` (its I/Os, an int); as sorted tuples of
    vertex indices ``computed`` (computed at least once in p), ``red_start``, ``read``,
    ``written``, ``red_end``, ``dominator``, ``kept``, ``unfinished``, ``part`` and
    ``minimum``; and ``facts``, a dict from each statement of :data:`LEMMA_FACTS` to whether
    it holds for this segment.

    Raises AttnInputError for a malformed or illegal schedule (checked against the game's
    rules with M red pebbles, :func:`~attnlib.iomodel.graphs.check_schedule`, naming the
    first move at fault), one that leaves an output without a blue pebble, M < 1, or a
    non-boolean ``prune``.
    """
    G = check_graph(G)
    M = check_int("M", M)
    prune = check_bool("prune", prune)
    moves = check_schedule(G, moves, M)
    if prune:
        moves = prune_schedule(G, moves)
    segments: list[dict] = []
    first: dict[int, int] = {}  # vertex -> segment of its first computation
    pebble: dict[int, list] = {}  # red vertex -> [segment of the computation placing it, used]
    red: set[int] = set()
    for op, v in moves:
        if not segments or (op in ("read", "write") and segments[-1]["io"] == M):
            if segments:
                segments[-1]["red_end"] = set(red)
            segments.append(
                {key: set() for key in ("computed", "read", "written", "unfinished")}
                | {"io": 0, "red_start": set(red)}
            )
        p, seg = len(segments) - 1, segments[-1]
        if op == "read":
            seg["read"].add(v)
            red.add(v)
        elif op == "write":
            seg["written"].add(v)
        elif op == "compute":
            seg["computed"].add(v)
            first.setdefault(v, p)
            for u in G.preds[v]:
                if u in pebble and pebble[u][0] == p:
                    pebble[u][1] = True
            pebble[v] = [p, False]
            red.add(v)
        else:
            red.discard(v)
            _retire(segments, pebble, v)
        seg["io"] += op in ("read", "write")
    if segments:
        segments[-1]["red_end"] = set(red)
    for v in list(pebble):
        _retire(segments, pebble, v)
    return [
        _lemma_sets(G, M, seg, {v for v, q in first.items() if q == p})
        for p, seg in enumerate(segments)
    ]


def _retire(segments: list[dict], pebble: dict[int, list], v: int) -> None:
    # A pebble that a computation placed and no computation of the same segment used
    # leaves its vertex unfinished there.
    placed = pebble.pop(v, None)
    if placed is not None and not placed[1]:
        segments[placed[0]]["unfinished"].add(v)


def _lemma_sets(G: ComputationGraph, M: int, seg: dict, part: set[int]) -> dict:
    """One segment's sets (see :func:`schedule_segments`) and the facts about them."""
    dominator = seg["red_start"] | seg["read"]
    kept = seg["red_end"] | seg["written"]
    minimum = {v for v in part if not any(w in part for w in G.succs[v])}
    facts = dict(
        zip(
            LEMMA_FACTS,
            (
                len(dominator) <= 2 * M,
                len(dominator | kept) <= 3 * M,
                is_dominator(G, dominator, seg["computed"]),
                seg["unfinished"] <= kept,
                minimum <= kept,
            ),
            strict=True,
        )
    )
    sets = dict(seg, dominator=dominator, kept=kept, part=part, minimum=minimum)
    return {
        key: tuple(sorted(val)) if isinstance(val, set) else val for key, val in sets.items()
    } | {"facts": facts}


def _vertex_set(G: ComputationGraph, name: str, vertices) -> set[int]:
    try:
        items = list(vertices)
    except TypeError:
        msg = f"{name} must be a collection of vertex indices, got {vertices!r}"
        raise AttnInputError(msg) from None
    return {check_int(f"{name}[{k}]", v, minimum=0, maximum=G.n - 1) for k, v in enumerate(items)}


def is_dominator(G: ComputationGraph, D, V) -> bool:
    """True if every path from an input of G to a vertex of V passes through D (HK81).

    ``D`` and ``V`` are collections of vertex indices of G. Raises AttnInputError for anything
    else.
    """
    G = check_graph(G)
    D, V = _vertex_set(G, "D", D), _vertex_set(G, "V", V)
    reach = set()  # vertices reachable from an input avoiding D
    for v in range(G.n):
        if v in D:
            continue
        if G.ops[v] == "input" or any(u in reach for u in G.preds[v]):
            reach.add(v)
    return not (reach & V)
