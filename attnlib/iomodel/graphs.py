"""Computation graphs (DAGs) of small computations, for the red-blue pebble game.

A :class:`ComputationGraph` is the object Hong and Kung's game is played on (HK81; SY24 §2):
vertices are values, an edge u → v says that v is computed from u; the inputs start in slow
memory and the outputs must end there. Every vertex carries an operation, so that a schedule
can be run, not only counted. The builders give the graphs of the book's bounds: an inner
product, a matrix product, attention's forward pass and a piece of its backward pass."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from .._checks import (
    AttnInputError,
    as_real_array,
    check_choice,
    check_int,
    check_real,
    describe_int,
)

__all__ = [
    "MAX_GRAPH_VERTICES",
    "MOVES",
    "ComputationGraph",
    "inner_product_graph",
    "matmul_graph",
    "attention_forward_graph",
    "attention_dv_graph",
    "evaluate_graph",
    "least_feasible_M",
    "trivial_io_bound",
    "check_graph",
    "apply_op",
    "input_values",
    "check_schedule",
]

_OPS = {"input": 0, "add": None, "mul": None, "exp": 1, "div": 2, "expsub": 2}
_TREES = ("chain", "balanced")
MOVES = ("read", "write", "compute", "delete")  # the moves of a pebble-game schedule


@dataclass(frozen=True)
class ComputationGraph:
    """A DAG of scalar values in topological order.

    Attributes
    ----------
    names : tuple of str, one per vertex, e.g. ``"a0"``, ``"p(0,1,2)"``, ``"C(0,1)"``
    ops : tuple of str, one per vertex: ``"input"``, ``"add"`` (sum of its predecessors),
        ``"mul"`` (product), ``"exp"``, ``"div"`` (first / second), ``"expsub"``
        (exp(first − second))
    preds : tuple of tuples of vertex indices, each smaller than the vertex's own index
    outputs : tuple of vertex indices that must end in slow memory

    ``inputs`` (the vertices with op ``"input"``) and ``succs`` are derived. Construct
    through the builders or directly; the constructor validates everything.

    Raises
    ------
    AttnInputError if an argument is not a sequence (a string is not), the lists differ in
    length, a name is not a non-empty string or repeats, an op is unknown or has the wrong
    number of predecessors, a vertex index is not an integer (floats are not truncated), a
    predecessor is not earlier, or an output is an input.
    """

    names: tuple
    ops: tuple
    preds: tuple
    outputs: tuple

    def __post_init__(self):
        names, ops = _sequence("names", self.names), _sequence("ops", self.ops)
        preds = tuple(
            tuple(_index(f"preds[{v}][{k}]", u) for k, u in enumerate(_sequence(f"preds[{v}]", p)))
            for v, p in enumerate(_sequence("preds", self.preds))
        )
        outputs = tuple(
            _index(f"outputs[{k}]", o) for k, o in enumerate(_sequence("outputs", self.outputs))
        )
        n = len(names)
        if n == 0 or len(ops) != n or len(preds) != n:
            raise AttnInputError(
                f"names, ops and preds must be non-empty and of equal length, got "
                f"{len(names)}, {len(ops)}, {len(preds)}"
            )
        for v, name in enumerate(names):
            if not isinstance(name, str) or not name:
                raise AttnInputError(f"names[{v}] must be a non-empty string, got {name!r:.60}")
        if len(set(names)) != n:
            raise AttnInputError("names must be distinct")
        for v, (op, p) in enumerate(zip(ops, preds, strict=True)):
            if not isinstance(op, str) or op not in _OPS:
                raise AttnInputError(f"ops[{v}] must be one of {sorted(_OPS)}, got {op!r:.60}")
            arity = _OPS[op]
            if (arity is None and len(p) < 2) or (arity is not None and len(p) != arity):
                want = ">= 2" if arity is None else str(arity)
                raise AttnInputError(
                    f"vertex {names[v]!r} ({op}) needs {want} preds, got {_fmt_indices(p)}"
                )
            if any(not 0 <= u < v for u in p) or len(set(p)) != len(p):
                raise AttnInputError(
                    f"preds of vertex {names[v]!r} must be distinct earlier vertices "
                    f"(topological order), got {_fmt_indices(p)}"
                )
        if not outputs or len(set(outputs)) != len(outputs):
            got = _fmt_indices(outputs)
            raise AttnInputError(
                f"outputs must be a non-empty list of distinct vertices, got {got}"
            )
        for o in outputs:
            if not 0 <= o < n or ops[o] == "input":
                raise AttnInputError(
                    f"outputs must be non-input vertices in range({n}), got {describe_int(o)}"
                )
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "ops", ops)
        object.__setattr__(self, "preds", preds)
        object.__setattr__(self, "outputs", outputs)

    @property
    def n(self) -> int:
        """The number of vertices."""
        return len(self.names)

    @property
    def inputs(self) -> tuple[int, ...]:
        return tuple(v for v, op in enumerate(self.ops) if op == "input")

    @property
    def succs(self) -> tuple[tuple[int, ...], ...]:
        out: list[list[int]] = [[] for _ in range(self.n)]
        for v, p in enumerate(self.preds):
            for u in p:
                out[u].append(v)
        return tuple(tuple(s) for s in out)

    def index(self, name: str) -> int:
        """The vertex called ``name``."""
        try:
            return self.names.index(name)
        except ValueError:
            raise AttnInputError(f"no vertex named {name!r}") from None

    def __repr__(self) -> str:
        return (
            f"ComputationGraph({self.n} vertices: {len(self.inputs)} inputs, "
            f"{self.n - len(self.inputs)} computed, {len(self.outputs)} outputs)"
        )


def _sequence(name: str, value) -> tuple:
    """``value`` as a tuple: a list, tuple, 1-D array or other iterable, but not a string (a
    string of names would be split into letters) and not a scalar."""
    try:
        if not isinstance(value, str | bytes | np.ndarray) or np.ndim(value) == 1:
            return tuple(value)
    except TypeError:
        pass
    raise AttnInputError(f"{name} must be a sequence, got {value!r:.60}")


def _index(name: str, value) -> int:
    """A vertex index: a Python or numpy integer (a bool or a float, even 2.0, is refused
    rather than truncated). Its range is checked against the graph by the caller."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise AttnInputError(f"{name} must be an integer vertex index, got {value!r:.60}")
    return int(value)


def _fmt_indices(indices) -> str:
    """A tuple of vertex indices for a message, huge ones by their order of magnitude."""
    inner = ", ".join(describe_int(u) for u in indices)
    return f"({inner}{',' if len(indices) == 1 else ''})"


def check_graph(G) -> ComputationGraph:
    """Require a :class:`ComputationGraph`."""
    if not isinstance(G, ComputationGraph):
        raise AttnInputError(f"G must be a ComputationGraph, got {type(G).__name__}")
    return G


def least_feasible_M(G: ComputationGraph) -> int:
    """The fewest red pebbles with which G can be played: 1 + the largest in-degree of a
    vertex some output depends on (no other vertex need be computed). Computing v needs its
    predecessors and v red at once, so no smaller M works; this many suffice (compute the
    needed vertices in order, writing each value and reading the predecessors back). Raises
    AttnInputError if G is not a graph."""
    return 1 + max(len(G.preds[v]) for v in _needed(check_graph(G)))


def trivial_io_bound(G: ComputationGraph) -> int:
    """The I/O every schedule pays: one read of each input that some output depends on and
    one write of each output (inputs start only in slow memory, outputs must end there).
    A lower bound with constant 1 for every M; equal to Q(G, M) once M holds the whole
    graph. Raises AttnInputError if G is not a graph."""
    G = check_graph(G)
    return sum(1 for v in _needed(G) if G.ops[v] == "input") + len(G.outputs)


def _needed(G: ComputationGraph) -> set:
    needed = set(G.outputs)  # and, below, every vertex the outputs depend on
    for v in reversed(range(G.n)):
        needed.update(G.preds[v] if v in needed else ())
    return needed


#: The most vertices a builder makes. The exact solver handles a few dozen; evaluating and
#: drawing stay quick below this, and a request past it is refused before memory runs out.
MAX_GRAPH_VERTICES = 100_000


class _Builder:
    def __init__(self, sizes: str):
        # ``sizes`` names the builder's arguments, for the refusal message.
        self.sizes = sizes
        self.names: list[str] = []
        self.ops: list[str] = []
        self.preds: list[tuple[int, ...]] = []

    def add(self, name: str, op: str, preds=()) -> int:
        if len(self.names) >= MAX_GRAPH_VERTICES:
            raise AttnInputError(
                f"these sizes ({self.sizes}) give a graph of more than {MAX_GRAPH_VERTICES:,} "
                "vertices; choose smaller sizes"
            )
        self.names.append(name)
        self.ops.append(op)
        self.preds.append(tuple(preds))
        return len(self.names) - 1

    def sum_tree(self, name: str, leaves: list[int], tree: str) -> int:
        """Sum ``leaves`` with binary additions: a left-to-right chain or a balanced tree.
        Inner vertices are named ``name[i:j]`` after the leaves they cover; the root ``name``."""
        if len(leaves) == 1:
            return leaves[0]
        if tree == "chain":  # ((l0 + l1) + l2) + …, built without recursion
            acc = leaves[0]
            for hi in range(2, len(leaves) + 1):
                whole = hi == len(leaves)
                acc = self.add(name if whole else f"{name}[0:{hi}]", "add", (acc, leaves[hi - 1]))
            return acc

        def build(lo: int, hi: int) -> int:
            if hi - lo == 1:
                return leaves[lo]
            mid = hi - 1 if tree == "chain" else (lo + hi) // 2
            left, right = build(lo, mid), build(mid, hi)
            whole = hi - lo == len(leaves)
            return self.add(name if whole else f"{name}[{lo}:{hi}]", "add", (left, right))

        return build(0, len(leaves))

    def graph(self, outputs) -> ComputationGraph:
        return ComputationGraph(tuple(self.names), tuple(self.ops), tuple(self.preds), outputs)


def inner_product_graph(k: int, *, tree: str = "chain") -> ComputationGraph:
    """⟨a, b⟩ = Σ_l a_l b_l: 2k inputs, k products, k − 1 additions (a chain or a balanced
    tree), one output ``"s"``. Raises AttnInputError for k < 1 or an unknown tree."""
    k = check_int("k", k)
    tree = check_choice("tree", tree, _TREES)
    g = _Builder("k")
    a = [g.add(f"a{l}", "input") for l in range(k)]
    b = [g.add(f"b{l}", "input") for l in range(k)]
    if k == 1:
        s = g.add("s", "mul", (a[0], b[0]))
    else:
        prods = [g.add(f"p{l}", "mul", (a[l], b[l])) for l in range(k)]
        s = g.sum_tree("s", prods, tree)
    return g.graph((s,))


def _matmul(g: _Builder, A, B, out: str, tree: str, prod: str = "p"):
    """Standard product of index grids A (m×k) and B (k×p) of vertices; returns an m×p grid."""
    m, k, p = len(A), len(B), len(B[0])
    C = [[0] * p for _ in range(m)]
    for i in range(m):
        for j in range(p):
            name = f"{out}({i},{j})"
            if k == 1:
                C[i][j] = g.add(name, "mul", (A[i][0], B[0][j]))
                continue
            prods = [g.add(f"{prod}({i},{l},{j})", "mul", (A[i][l], B[l][j])) for l in range(k)]
            C[i][j] = g.sum_tree(name, prods, tree)
    return C


def matmul_graph(m: int, k: int, p: int, *, tree: str = "chain") -> ComputationGraph:
    """Standard C = AB for A (m, k), B (k, p): mk + kp inputs ``A(i,l)``, ``B(l,j)``, mkp
    products ``p(i,l,j)``, and for each C(i,j) a sum tree over its k products (``"chain"``:
    ((p0 + p1) + p2) + …; ``"balanced"``: halves). Outputs: the mp roots ``C(i,j)``.
    The graph of HK81 Cor. 6.2 (= SY24 Lemma 3.6). Raises AttnInputError on bad sizes."""
    m, k, p = check_int("m", m), check_int("k", k), check_int("p", p)
    tree = check_choice("tree", tree, _TREES)
    g = _Builder("m, k and p")
    A = [[g.add(f"A({i},{l})", "input") for l in range(k)] for i in range(m)]
    B = [[g.add(f"B({l},{j})", "input") for j in range(p)] for l in range(k)]
    C = _matmul(g, A, B, "C", tree)
    return g.graph(tuple(c for row in C for c in row))


def attention_forward_graph(n: int, m: int, d: int, *, tree: str = "chain") -> ComputationGraph:
    """O = softmax(QKᵀ)V for Q (n, d), K (m >= 2, d), V (m, d), without max subtraction:
    S = QKᵀ by standard matmul (sum trees of shape ``tree``), E = exp(S), row sums
    l_i = Σ_j E_ij, P = E / l (by row), O = PV by standard matmul. Inputs ``Q(i,t)``,
    ``K(j,t)``, ``V(j,t)``; outputs ``O(i,t)``. Raises AttnInputError on bad sizes.
    """
    n, d = check_int("n", n), check_int("d", d)
    m = check_int("m", m, minimum=2)  # with one key the softmax is the constant 1
    tree = check_choice("tree", tree, _TREES)
    g = _Builder("n, m and d")
    Q = [[g.add(f"Q({i},{t})", "input") for t in range(d)] for i in range(n)]
    K = [[g.add(f"K({j},{t})", "input") for t in range(d)] for j in range(m)]
    V = [[g.add(f"V({j},{t})", "input") for t in range(d)] for j in range(m)]
    S = _matmul(g, Q, [list(col) for col in zip(*K, strict=True)], "S", tree, prod="qk")
    E = [[g.add(f"E({i},{j})", "exp", (S[i][j],)) for j in range(m)] for i in range(n)]
    ell = [g.sum_tree(f"l({i})", E[i], tree) for i in range(n)]
    P = [[g.add(f"P({i},{j})", "div", (E[i][j], ell[i])) for j in range(m)] for i in range(n)]
    O = _matmul(g, P, V, "O", tree, prod="pv")
    return g.graph(tuple(o for row in O for o in row))


def attention_dv_graph(n: int, m: int, d: int, *, tree: str = "chain") -> ComputationGraph:
    """A piece of the backward pass: dV = Pᵀ dO, with P_ij = exp(S_ij − lse_i) recomputed
    from S = QKᵀ (standard matmul) and the row log-sum-exp, as in FlashAttention's backward
    pass. Inputs ``Q(i,t)``, ``K(j,t)`` (d columns), ``lse(i)``, ``dO(i,t)`` (d columns);
    outputs ``dV(j,t)``. Raises AttnInputError on bad sizes."""
    n, m, d = check_int("n", n), check_int("m", m), check_int("d", d)
    tree = check_choice("tree", tree, _TREES)
    g = _Builder("n, m and d")
    Q = [[g.add(f"Q({i},{t})", "input") for t in range(d)] for i in range(n)]
    K = [[g.add(f"K({j},{t})", "input") for t in range(d)] for j in range(m)]
    lse = [g.add(f"lse({i})", "input") for i in range(n)]
    dO = [[g.add(f"dO({i},{t})", "input") for t in range(d)] for i in range(n)]
    S = _matmul(g, Q, [list(col) for col in zip(*K, strict=True)], "S", tree, prod="qk")
    P = [[g.add(f"P({i},{j})", "expsub", (S[i][j], lse[i])) for j in range(m)] for i in range(n)]
    PT = [list(col) for col in zip(*P, strict=True)]
    dV = _matmul(g, PT, dO, "dV", tree, prod="pdo")
    return g.graph(tuple(v for row in dV for v in row))


def apply_op(op: str, args: list[float], *, vertex: str = "a vertex") -> float:
    """The value of a vertex with operation ``op`` (see :class:`ComputationGraph`) computed
    from its predecessors' values ``args``.

    Raises AttnInputError, naming ``vertex`` and the inputs, if the value is not a finite
    float: a sum, product or exponential beyond the float range, a division by zero (the
    graphs subtract no maximum, so exp of very negative logits underflows to 0 and a row
    sum can be 0), or NaN.
    """
    check_choice("op", op, [name for name in _OPS if name != "input"])
    if not args or len(args) != (_OPS[op] or len(args)):
        raise AttnInputError(f"args of {vertex} have the wrong length for op {op!r}: {args!r:.60}")
    try:
        if op == "add":
            value = math.fsum(args)  # exact, but raises OverflowError past the float range
        elif op == "mul":
            value = math.prod(args)
        elif op == "exp":
            value = math.exp(args[0])
        elif op == "div":
            value = args[0] / args[1]
        else:  # expsub
            value = math.exp(args[0] - args[1])
    except OverflowError:
        value = math.inf
    except ZeroDivisionError:
        raise AttnInputError(
            f"inputs make {vertex} ({op}) divide by zero (exp underflows to 0 without a "
            "maximum subtracted): choose smaller inputs"
        ) from None
    if not math.isfinite(value):
        raise AttnInputError(
            f"inputs make {vertex} ({op}) {value} (beyond the float range): choose smaller inputs"
        )
    return value


def evaluate_graph(G: ComputationGraph, inputs) -> np.ndarray:
    """The value of every vertex, given the inputs' values.

    Parameters
    ----------
    G : the graph
    inputs : dict mapping each input's name to a finite float, or a 1-D array with one value
        per input vertex in the order of ``G.inputs``

    Returns an ndarray (G.n,) of float64, indexed by vertex. Raises AttnInputError if an
    input is missing or not a finite real number, or if the inputs make a vertex's value
    leave the float range (overflow, or a division by zero after exp underflows; see
    :func:`apply_op`).
    """
    G = check_graph(G)
    values = input_values(G, inputs)
    out = np.zeros(G.n)
    for v, (op, p) in enumerate(zip(G.ops, G.preds, strict=True)):
        if op == "input":
            out[v] = values[v]
        else:
            out[v] = apply_op(op, [float(out[u]) for u in p], vertex=f"vertex {G.names[v]!r}")
    return out


def input_values(G: ComputationGraph, inputs) -> dict[int, float]:
    """Normalise ``inputs`` (see :func:`evaluate_graph`) to {input vertex: float}: a dict
    by name (each value a finite real number, Python ints of any size refused with this
    error past the float range) or a 1-D real array of finite values, one per input."""
    ins = G.inputs
    if isinstance(inputs, dict):
        missing = [G.names[v] for v in ins if G.names[v] not in inputs]
        if missing:
            raise AttnInputError(f"inputs is missing values for {missing[:5]}")
        return {v: check_real(f"inputs[{G.names[v]!r}]", inputs[G.names[v]]) for v in ins}
    arr = as_real_array("inputs", inputs, ndim=None)
    if arr.shape != (len(ins),):
        raise AttnInputError(
            f"inputs must be a dict by name or an array of shape ({len(ins)},), "
            f"got shape {arr.shape}"
        )
    return {v: float(x) for v, x in zip(ins, arr.astype(np.float64), strict=True)}


def _check_moves(G: ComputationGraph, moves) -> list[tuple[str, int]]:
    """Normalise a schedule of G to ``(op, vertex index)`` pairs: each move is an
    ``(op, vertex)`` pair with op in :data:`MOVES` and the vertex given by name or index.

    Raises AttnInputError for anything else, naming the move (``moves[i]``).
    """
    try:
        items = list(moves)
    except TypeError:
        raise AttnInputError(f"moves must be a list of (op, vertex) pairs, got {moves!r}") from None
    out = []
    for i, mv in enumerate(items):
        if not isinstance(mv, tuple | list) or len(mv) != 2 or mv[0] not in MOVES:
            raise AttnInputError(
                f"moves[{i}] must be an (op, vertex) pair with op in {MOVES}, got {mv!r}"
            )
        op, v = mv
        if isinstance(v, str):
            v = G.index(v)
        out.append((op, check_int(f"moves[{i}] vertex", v, minimum=0, maximum=G.n - 1)))
    return out


def check_schedule(G: ComputationGraph, moves, M: int | None = None) -> list[tuple[str, int]]:
    """A schedule of G checked against the rules of the red-blue pebble game (HK81; Chapter
    2's game) and normalised to ``(op, vertex index)`` pairs (:func:`_check_moves`).

    The rules, played from the start (inputs blue, nothing red):

    * ``("read", v)``: v has a blue pebble and no red one; it gets a red one;
    * ``("compute", v)``: v is not an input, has no red pebble, and every predecessor of v
      has one; v gets a red one (computing a blue vertex again is recomputation, allowed);
    * ``("write", v)``: v has a red pebble; it gets a blue one;
    * ``("delete", v)``: v has a red pebble; it loses it;
    * with ``M``, at most M red pebbles at once;
    * at the end every output has a blue pebble.

    Raises AttnInputError for a malformed move, or naming the first move (``moves[i]``)
    that breaks a rule, or the outputs the schedule leaves without a blue pebble.
    """
    G = check_graph(G)
    M = None if M is None else check_int("M", M)
    moves = _check_moves(G, moves)
    blue, red = set(G.inputs), set()
    for i, (op, v) in enumerate(moves):
        where = f"moves[{i}] = ({op!r}, {G.names[v]!r})"
        if op in ("read", "compute") and v in red:
            raise AttnInputError(f"{where}: the vertex already has a red pebble")
        if op == "read" and v not in blue:
            raise AttnInputError(f"{where}: reads a vertex without a blue pebble")
        if op == "compute":
            missing = [G.names[u] for u in G.preds[v] if u not in red]
            if G.ops[v] == "input" or missing:
                why = "an input cannot be computed" if not missing else f"{missing} not red"
                raise AttnInputError(f"{where}: cannot compute ({why})")
        if op in ("write", "delete") and v not in red:
            raise AttnInputError(f"{where}: the vertex has no red pebble")
        if op in ("read", "compute"):
            if M is not None and len(red) == M:
                raise AttnInputError(
                    f"{where}: places red pebble number {M + 1}, with M = {M} (delete one first)"
                )
            red.add(v)
        elif op == "write":
            blue.add(v)
        else:
            red.discard(v)
    missing = [G.names[o] for o in G.outputs if o not in blue]
    if missing:
        raise AttnInputError(f"moves leave outputs without a blue pebble at the end: {missing[:5]}")
    return moves
