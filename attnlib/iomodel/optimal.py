"""The exact optimum of the red-blue pebble game on small graphs.

:func:`optimal_io` computes Q(G, M), the fewest reads plus writes over **all** schedules of a
:class:`~attnlib.iomodel.graphs.ComputationGraph` with M red pebbles (HK81; the game of
SY24 §2 and Chapter 2), and returns one optimal schedule as a move list
(``("read", v)``, ``("write", v)``, ``("compute", v)``, ``("delete", v)``). The search behind
it is :class:`PebbleSearch`, whose docstring proves it exact. A schedule replays on the
machine with :func:`replay_schedule`, one word per vertex, so its count is the machine's.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from .._checks import AttnInputError, check_bool, check_int, check_positive_real
from .graphs import (
    ComputationGraph,
    apply_op,
    check_graph,
    check_schedule,
    input_values,
    least_feasible_M,
)
from .machine import MachineError
from .tiling import start_run

__all__ = [
    "MAX_VERTICES",
    "OptimalSchedule",
    "optimal_io",
    "PebbleSearch",
    "replay_schedule",
]

MAX_VERTICES = 80  # beyond this, even the reduced configuration space is out of reach


@dataclass(frozen=True)
class OptimalSchedule:
    """The result of :func:`optimal_io`.

    ``io`` = Q(G, M) = ``reads + writes``; ``moves`` one optimal schedule, a tuple of
    ``(op, vertex)`` pairs; ``states`` the configurations expanded (the same on every
    machine); ``seconds`` the search time (this machine's, under its load: for information
    only); ``M`` and ``recompute`` as asked.
    """

    io: int
    reads: int
    writes: int
    moves: tuple
    states: int
    seconds: float
    M: int
    recompute: bool


def _popcount(x: int) -> int:
    return bin(x).count("1")


def _bits(x: int):
    while x:
        low = x & -x
        yield low.bit_length() - 1
        x ^= low


def optimal_io(
    G: ComputationGraph,
    M: int,
    *,
    recompute: bool = True,
    grouped_reads: bool = True,
    max_states: int = 200_000,
    max_seconds: float | None = None,
) -> OptimalSchedule:
    """Q(G, M): the least I/O of any red-blue pebble game schedule of ``G`` with ``M`` red
    pebbles, and one schedule that attains it (HK81; Chapter 2's game, inputs start blue,
    outputs must end blue, loads copy). Runs :class:`PebbleSearch`.

    Parameters
    ----------
    G : a :class:`~attnlib.iomodel.graphs.ComputationGraph` of at most ``MAX_VERTICES``
    M : red pebbles, at least :func:`~attnlib.iomodel.graphs.least_feasible_M` (G)
    recompute : allow a vertex to be computed more than once (the standard game); with
        False every vertex is computed at most once
    grouped_reads : explore reads together with the computation that uses them (reduction 4
        of :class:`PebbleSearch`; the same optimum, fewer configurations); False explores
        each read as a move of its own
    max_states : the search budget, in configurations expanded. A count, not a clock: the
        same graph gets the same answer, or the same refusal, on every machine and under
        any load
    max_seconds : an optional deadline in seconds (default None: none). With one, whether
        the search finishes depends on the machine's speed and load, so a result that must
        reproduce elsewhere never sets it

    Returns
    -------
    :class:`OptimalSchedule`; the schedule replays on the machine with exactly ``io`` I/Os
    (:func:`replay_schedule`).

    Raises
    ------
    AttnInputError if G is not a graph, has more than MAX_VERTICES vertices, M is below the
    least feasible value, or the search exceeds ``max_states`` (or ``max_seconds``, if set).

    Examples
    --------
    >>> from attnlib.iomodel import inner_product_graph
    >>> optimal_io(inner_product_graph(2), 3).io, optimal_io(inner_product_graph(2), 4).io
    (7, 5)
    """
    search = PebbleSearch(
        G,
        M,
        recompute=recompute,
        grouped_reads=grouped_reads,
        max_states=max_states,
        max_seconds=max_seconds,
    )
    return search.run()


class PebbleSearch:
    """The A* search of :func:`optimal_io`, with the proof that its answer is exact.

    Method: A* search over pebble configurations (red set R, blue set B, and with
    ``recompute=False`` the set of vertices computed so far), where a read or a write costs 1
    and a computation or a deletion costs 0. The search explores a *reduced* set of moves; each
    reduction keeps at least one optimal schedule, which is why the result is exact:

    1. **Deletions only when needed.** Postponing a deletion never invalidates a schedule (an
       extra red pebble never blocks a move except by taking room, and a later read or
       computation of a vertex that is still red can simply be dropped). So a red pebble is
       removed only to make room, immediately before placing one when all M are in use.
    2. **Dead vertices are dropped.** A vertex from which every reachable output already has a
       blue pebble is never needed again: its red pebble is deleted at once, and it is never
       read, computed or written. (The vertices still needed are closed under predecessors, so
       no needed computation depends on a dead one.)
    3. **Writes right after the computation.** A write of v at time t can be moved to the
       moment v last received its red pebble, since v holds the same value all along; blue
       pebbles are unlimited, so an earlier write blocks nothing. So v is written, if at all,
       right after it is computed (and an output always is: it must be written once anyway).
       Writing a vertex just read is pointless: it is already blue.
    4. **Reads grouped with their use** (``grouped_reads=True``, the default). A read of v is
       useful only if a computation of a successor follows while v is still red (writing it
       is pointless, and an output read was already blue). Postponing the read to just before
       the first such computation keeps the schedule valid (v stays blue, and a red pebble
       placed later only frees room in between) and changes no count. So one move reads the
       missing predecessors of a vertex, after deleting just enough red pebbles other than
       its predecessors to make room for them and for it, and computes it; every set of such
       deletions is tried. With ``grouped_reads=False`` reads are single moves, as in the
       search before this reduction; the tests hold the two against each other. A grouped
       move is a sequence of single moves, so the heuristic below drops by at most its cost.

    The heuristic is admissible and consistent: every output without a blue pebble still needs
    one write, and every input u without a red pebble that reaches such an output along a path
    of vertices holding no pebble still needs one read (each vertex on that path must be
    computed, so u must be red again). A computation never shortens such a path (its
    predecessors were already red), so the heuristic never drops by more than the cost of a
    move, and A* with it returns a least-cost schedule. Without recomputation, a vertex that
    this argument says must be red again but that was computed before and holds no pebble
    makes the configuration a dead end, which is pruned.

    Parameters are those of :func:`optimal_io`; :meth:`run` returns the
    :class:`OptimalSchedule` and :meth:`h` is the heuristic.

    Raises
    ------
    AttnInputError as :func:`optimal_io` (the budget is checked by :meth:`run`).
    """

    def __init__(
        self,
        G: ComputationGraph,
        M: int,
        *,
        recompute: bool = True,
        grouped_reads: bool = True,
        max_states: int = 200_000,
        max_seconds: float | None = None,
    ):
        G = check_graph(G)
        if G.n > MAX_VERTICES:
            raise AttnInputError(
                f"G has {G.n} vertices; optimal_io solves graphs of at most MAX_VERTICES = "
                f"{MAX_VERTICES} vertices"
            )
        self.M_asked = check_int("M", M, minimum=least_feasible_M(G))
        self.recompute = check_bool("recompute", recompute)
        self.grouped_reads = check_bool("grouped_reads", grouped_reads)
        self.max_states = check_int("max_states", max_states)
        self.max_seconds = (
            None if max_seconds is None else check_positive_real("max_seconds", max_seconds)
        )
        self.G, self.M, n = G, min(self.M_asked, G.n), G.n
        self.n = n
        self.inputs = sum(1 << v for v in G.inputs)
        self.outputs = sum(1 << o for o in G.outputs)
        self.pred_mask = [sum(1 << u for u in p) for p in G.preds]
        self.is_input = [op == "input" for op in G.ops]
        # anc[o]: o and all its ancestors, for the set of vertices still needed
        anc = [0] * n
        for v in range(n):
            anc[v] = (1 << v) | (0 if not G.preds[v] else _or(anc[u] for u in G.preds[v]))
        self.anc_out = [(o, anc[o]) for o in G.outputs]
        self._alive: dict[int, int] = {}
        self.is_output = [False] * n
        for o in G.outputs:
            self.is_output[o] = True

    def alive(self, B: int) -> int:
        done = B & self.outputs  # only the outputs' blue pebbles decide what is still needed
        live = self._alive.get(done)
        if live is None:
            live = self._alive[done] = _or(a for o, a in self.anc_out if not (B >> o) & 1)
        return live

    def h(self, R: int, B: int, C: int) -> float:
        """Admissible, consistent lower bound on the remaining I/O (see the class docstring)."""
        writes = _popcount(self.outputs & ~B)
        # must: vertices that must be red again, found from the outputs without a pebble
        # along predecessors that hold none; needs: the predecessors of those vertices
        blocked = R | B | self.inputs
        must = frontier = self.outputs & ~(R | B)
        needs = 0
        while frontier:
            preds = _or(self.pred_mask[x] for x in _bits(frontier))
            needs |= preds
            frontier = preds & ~blocked & ~must
            must |= frontier
        if not self.recompute and must & C:
            return math.inf  # must be red again, cannot be recomputed, is not blue
        return writes + _popcount(needs & self.inputs & ~R)

    def canon(self, R: int, B: int, C: int):
        """Drop dead vertices (reduction 2); returns the state and the red pebbles dropped."""
        live = self.alive(B)
        return R & live, B & (live | self.outputs), C & live, R & ~live

    def run(self) -> OptimalSchedule:
        """Search until every output is blue; the least-I/O schedule found, as moves."""
        M_asked = self.M_asked
        t0 = time.perf_counter()
        start = (0, 0, 0)
        key0 = start
        g_best = {key0: 0}
        parent: dict = {key0: None}
        h0 = self.h(*start)
        heap = [(h0, 0, 0, key0)]
        tick = 0
        expanded = 0
        goal = None
        while heap:
            f, neg_g, _, key = heapq.heappop(heap)
            g = -neg_g
            if g > g_best.get(key, math.inf):
                continue
            R, B, C = key
            if (B & self.outputs) == self.outputs:
                goal = key
                break
            expanded += 1
            if expanded > self.max_states:
                raise AttnInputError(
                    f"optimal_io: the search expanded max_states = {self.max_states} "
                    f"configurations without finishing (G has {self.n} vertices, M = "
                    f"{M_asked}); raise max_states or use a smaller graph"
                )
            if (
                self.max_seconds is not None
                and expanded % 512 == 0
                and time.perf_counter() - t0 > self.max_seconds
            ):
                raise AttnInputError(
                    f"optimal_io: the search exceeded max_seconds = {self.max_seconds:g} "
                    f"(G has {self.n} vertices, M = {M_asked}, {expanded} configurations "
                    f"expanded); raise max_seconds or use a smaller graph"
                )
            expand = self._grouped if self.grouped_reads else self._single
            for R1, B1, C1, cost, step in expand(R, B, C):
                if B1 == B:  # nothing became dead: the state is already canonical
                    R2, B2, C2, dropped = R1, B1, C1, 0
                else:
                    R2, B2, C2, dropped = self.canon(R1, B1, C1)
                nk = (R2, B2, C2)
                g1 = g + cost
                if g1 >= g_best.get(nk, math.inf):
                    continue
                hh = self.h(R2, B2, C2)
                if hh == math.inf:
                    continue
                g_best[nk] = g1
                parent[nk] = (key, step, dropped)
                tick += 1
                heapq.heappush(heap, (g1 + hh, -g1, -tick, nk))
        seconds = time.perf_counter() - t0
        if goal is None:  # cannot happen for M >= least_feasible_M, kept as a guard
            raise AttnInputError(f"no schedule of G exists with M = {M_asked}")
        moves = self._moves(parent, goal)
        reads = sum(1 for op, _ in moves if op == "read")
        writes = sum(1 for op, _ in moves if op == "write")
        assert reads + writes == g_best[goal]
        return OptimalSchedule(
            reads + writes,
            reads,
            writes,
            tuple(moves),
            expanded,
            seconds,
            M_asked,
            self.recompute,
        )

    def _single(self, R: int, B: int, C: int):
        """Every move of the reduced game, one read or computation at a time."""
        full = _popcount(R) >= self.M
        for v in _bits(self.alive(B) & ~R):
            options = []
            if self.is_input[v] or (B >> v) & 1:
                options.append(("read", 1))
            if self._computable(v, R, C):
                options += self._compute_options(v, B)
            for op, cost in options:
                if not full:
                    victims = (None,)
                elif op == "read":
                    victims = tuple(_bits(R))
                else:  # a predecessor cannot make room for its own successor
                    victims = tuple(_bits(R & ~self.pred_mask[v]))
                for x in victims:
                    out = () if x is None else (x,)
                    R1 = (R if x is None else R & ~(1 << x)) | (1 << v)
                    if op == "read":
                        yield R1, B, C, 1, (out, (v,), None, v)
                    else:
                        yield (*self._place(v, op, R1, B, C), cost, (out, (), op, v))

    def _grouped(self, R: int, B: int, C: int):
        """Reduction 4: a computation of v together with the reads of its missing
        predecessors, after deleting just enough red pebbles to make room for them all."""
        for v in _bits(self.alive(B) & ~R):
            if self.is_input[v] or not (self.recompute or not (C >> v) & 1):
                continue
            missing = self.pred_mask[v] & ~R
            if missing & ~(self.inputs | B):
                continue  # a predecessor is neither red nor in slow memory
            reads = tuple(_bits(missing))
            spare = R & ~self.pred_mask[v]
            room = _popcount(R) + len(reads) + 1 - self.M
            if room > _popcount(spare):
                continue
            for op, cost in self._compute_options(v, B):
                victim_sets = [()] if room <= 0 else combinations(tuple(_bits(spare)), room)
                for out in victim_sets:
                    R1 = (R & ~_or(1 << x for x in out)) | missing | (1 << v)
                    R1, B1, C1 = self._place(v, op, R1, B, C)
                    yield R1, B1, C1, cost + len(reads), (out, reads, op, v)

    def _computable(self, v: int, R: int, C: int) -> bool:
        return (
            not self.is_input[v]
            and (self.pred_mask[v] & R) == self.pred_mask[v]
            and (self.recompute or not (C >> v) & 1)
        )

    def _compute_options(self, v: int, B: int) -> list:
        if (B >> v) & 1:
            return [("compute", 0)]  # recompute instead of reading back
        if self.is_output[v]:
            return [("compute+write", 1)]
        return [("compute", 0), ("compute+write", 1)]

    def _place(self, v: int, op: str, R1: int, B: int, C: int):
        B1 = B | (1 << v) if op == "compute+write" else B
        C1 = C | (1 << v) if not self.recompute else C
        return R1, B1, C1

    def _moves(self, parent, goal):
        steps = []
        key = goal
        while parent[key] is not None:
            prev, (out, reads, op, v), dropped = parent[key]
            chunk = [("delete", x) for x in out] + [("read", u) for u in reads]
            if op is not None:
                chunk.append(("compute", v))
                if op == "compute+write":
                    chunk.append(("write", v))
            chunk.extend(("delete", u) for u in _bits(dropped))
            steps.append(chunk)
            key = prev
        return [m for chunk in reversed(steps) for m in chunk]


def _or(masks) -> int:
    out = 0
    for m in masks:
        out |= m
    return out


def replay_schedule(G: ComputationGraph, moves, M: int, inputs=None, *, record: bool = False):
    """Run a pebble-game schedule on :class:`TwoLevelMemory`, one word per vertex.

    Every input vertex is a 1-word slow array (``put``) and every other vertex a 1-word
    slow array it may be written to (``zeros``). ``("read", v)`` is ``load``,
    ``("write", v)`` is ``store``, ``("compute", v)`` is ``alloc`` of one word filled with
    v's operation applied to its predecessors' fast words, ``("delete", v)`` is ``free``.
    Red pebbles left at the end are freed (deleting is free in the game).

    Parameters
    ----------
    G : the graph; moves : (op, vertex) pairs, vertex by index or name; M : fast words
    inputs : the inputs' values (see :func:`~attnlib.iomodel.graphs.evaluate_graph`);
        default: seeded standard normal values
    record : also return the machine (with its operation log)

    Returns
    -------
    (IOCount, values of G.outputs as an ndarray), plus the machine with ``record=True``.

    Raises
    ------
    AttnInputError for a malformed move, a move the game forbids (reading a vertex without
    a blue pebble, computing without every predecessor red, writing or deleting a vertex
    without a red pebble, placing a red pebble on a red vertex), or a schedule that leaves
    an output without a blue pebble (the rules of
    :func:`~attnlib.iomodel.graphs.check_schedule`), or inputs whose values leave the float
    range at some vertex. The machine raises CapacityError if more than M words would be
    live.

    Examples
    --------
    >>> from attnlib.iomodel import inner_product_graph
    >>> G = inner_product_graph(2)
    >>> replay_schedule(G, optimal_io(G, 4).moves, 4)[0]
    IOCount(reads=4, writes=1, total=5, peak_fast=4)
    """
    G = check_graph(G)
    M = check_int("M", M)
    record = check_bool("record", record)  # before the moves are played, not after
    moves = check_schedule(G, moves)  # the game's rules; the machine enforces M
    if inputs is None:
        inputs = np.random.default_rng(0).standard_normal(len(G.inputs))
    values = input_values(G, inputs)
    inputs = {G.names[v]: np.array([values[v]]) for v in G.inputs}
    computed = {G.names[v]: (1,) for v in range(G.n) if G.ops[v] != "input"}
    mem = start_run(M, record, np.float64, inputs, computed)
    red: dict[int, np.ndarray] = {}  # the moves are legal: check_schedule played them
    for op, v in moves:
        name = G.names[v]
        if op == "read":
            red[v] = mem.load(name, (0, 1))
        elif op == "compute":
            value = apply_op(G.ops[v], [float(red[u][0]) for u in G.preds[v]], vertex=repr(name))
            word = mem.alloc(1)
            word[0] = value
            red[v] = word
        elif op == "write":
            mem.store(name, (0, 1), None, red[v])
        else:
            mem.free(red.pop(v))
    for word in red.values():
        mem.free(word)
    try:
        count = mem.finish()
    except MachineError as err:  # pragma: no cover - every word is freed above
        raise AttnInputError(str(err)) from err
    out = np.array([mem.get(G.names[o])[0] for o in G.outputs])
    return (count, out, mem) if record else (count, out)
