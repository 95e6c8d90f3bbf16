"""Hong and Kung's partition of a schedule, the tool behind the I/O lower bounds.

:func:`schedule_segments` cuts a pebble-game schedule into consecutive segments of M I/Os, as
in the proof of HK81's partition lemma, and names each segment's dominator and minimum sets;
:func:`is_dominator` checks the defining property of a dominator set on the graph.
"""

from __future__ import annotations

from .._checks import AttnInputError, check_int
from .graphs import ComputationGraph, check_graph, check_schedule

__all__ = ["schedule_segments", "is_dominator"]


def schedule_segments(G: ComputationGraph, moves, M: int) -> list[dict]:
    """Cut a schedule into consecutive segments of M I/Os (the last may have fewer), as in
    the proof of Hong and Kung's partition lemma (HK81).

    For segment i, with V_i the vertices first computed in it (each computed vertex belongs
    to the segment of its first computation):

    * ``dominator``: the red pebbles at the segment's start plus the vertices read during it
      (at most 2M): every path from an input to V_i passes through it;
    * ``minimum``: the vertices of V_i with no successor in V_i (HK81's minimum set);
    * ``kept``: the red pebbles at the segment's end plus the vertices written during it,
      which contain the minimum set's vertices that are still needed (at most 2M).

    Returns a list of dicts with keys ``computed``, ``dominator``, ``minimum``, ``kept``
    (sorted tuples of vertex indices) and ``io``. The bounds above hold for a legal schedule
    only, so the schedule is checked first against the game's rules with M red pebbles
    (:func:`~attnlib.iomodel.graphs.check_schedule`). Raises AttnInputError for a malformed
    or illegal schedule (naming the first move at fault), or one that leaves an output
    without a blue pebble.
    """
    G = check_graph(G)
    M = check_int("M", M)
    moves = check_schedule(G, moves, M)
    succs = G.succs
    segments: list[dict] = []
    red: set[int] = set()
    placed: set[int] = set()
    cur = None
    io = 0

    def open_segment():
        return {"computed": [], "dominator": set(red), "kept": set(), "io": 0}

    for op, v in moves:
        if cur is None or (op in ("read", "write") and cur["io"] == M):
            if cur is not None:
                cur["kept"] |= red
                segments.append(cur)
            cur = open_segment()
        if op == "read":
            cur["dominator"].add(v)
            cur["io"] += 1
            red.add(v)
        elif op == "write":
            cur["kept"].add(v)
            cur["io"] += 1
        elif op == "compute":
            if v not in placed:
                cur["computed"].append(v)
                placed.add(v)
            red.add(v)
        else:
            red.discard(v)
        io += op in ("read", "write")
    if cur is not None:
        cur["kept"] |= red
        segments.append(cur)
    out = []
    for seg in segments:
        comp = set(seg["computed"])
        minimum = {v for v in comp if not any(w in comp for w in succs[v])}
        out.append(
            {
                "computed": tuple(sorted(comp)),
                "dominator": tuple(sorted(seg["dominator"])),
                "minimum": tuple(sorted(minimum)),
                "kept": tuple(sorted(seg["kept"])),
                "io": seg["io"],
            }
        )
    return out


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
