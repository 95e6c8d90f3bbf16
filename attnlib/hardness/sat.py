"""CNF formulas: random k-SAT, brute-force satisfiability, and DIMACS ``.cnf`` text.

A formula on ``n_vars`` variables is a list of clauses; a clause is a tuple of DIMACS-style
signed literals: ``3`` means x₃ and ``-3`` means ¬x₃ (variables are numbered 1..n_vars,
0 is not a literal). An assignment is a tuple of ``n_vars`` booleans, entry ``v - 1`` being
the value of x_v.

SETH (AS24 Hypothesis 3.1) is a statement about exactly this problem: for every
ε > 0 there is a k such that k-SAT on N variables cannot be solved in time 2^{(1-ε)N}.
:func:`brute_force_sat` is the 2^N baseline the hypothesis says cannot be beaten by much.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping, Set

import numpy as np
from numba import njit

from .._checks import AttnInputError, check_int, check_memory

__all__ = [
    "check_clauses",
    "random_ksat",
    "brute_force_sat",
    "is_satisfied",
    "all_models",
    "count_models",
    "assignment_bits",
    "read_dimacs",
    "write_dimacs",
]

# Brute force enumerates 2^n_vars assignments held in one machine word.
_MAX_BRUTE_FORCE_VARS = 30


def check_clauses(clauses, n_vars) -> list[tuple[int, ...]]:
    """Validate a CNF formula and return it as a list of tuples of Python ints.

    Raises :class:`AttnInputError` for an empty clause list, a clause that is not a sequence
    of integers, the literal 0, or a variable outside 1..n_vars. An empty clause ``()`` is a
    legal (unsatisfiable) clause and is kept.
    """
    n_vars = check_int("n_vars", n_vars)
    if not _is_sequence(clauses):
        raise AttnInputError(f"clauses must be a list of tuples of literals, got {clauses!r:.60}")
    out = []
    for c, clause in enumerate(clauses):
        if not _is_sequence(clause):
            raise AttnInputError(
                f"clauses[{c}] must be a tuple of nonzero integer literals, got {clause!r:.60}"
            )
        lits = []
        for lit in clause:
            if type(lit) is not int and (  # fast path: plain ints skip the ABC check
                isinstance(lit, (bool, np.bool_)) or not isinstance(lit, numbers.Integral)
            ):
                raise AttnInputError(
                    f"clauses[{c}] must contain integer literals (DIMACS style), got {lit!r}"
                )
            lit = int(lit)
            if lit == 0:
                raise AttnInputError(
                    f"clauses[{c}] contains the literal 0; literals are ±1..±n_vars "
                    "(0 only terminates a clause in DIMACS text)"
                )
            if abs(lit) > n_vars:
                raise AttnInputError(
                    f"clauses[{c}] uses variable {abs(lit)}, beyond n_vars={n_vars}"
                )
            lits.append(lit)
        out.append(tuple(lits))
    if not out:
        raise AttnInputError("clauses must contain at least one clause, got an empty list")
    return out


def _is_sequence(x) -> bool:
    """An ordered collection of items: not a string, mapping or set (whose iteration would
    silently yield characters, keys or an arbitrary order)."""
    if isinstance(x, (str, bytes, Mapping, Set)):
        return False
    if isinstance(x, np.ndarray):
        return x.ndim == 1
    return hasattr(x, "__iter__")


#: Formulas with n_clauses·n_vars up to this many entries are drawn, as in earlier versions,
#: from one (n_clauses, n_vars) uniform matrix (at most 512 KiB), so that every seed keeps the
#: formula it gave then (the book's formulas among them); larger ones never form the matrix.
_MATRIX_DRAW_MAX = 1 << 16


def random_ksat(n_vars, n_clauses, k, *, seed) -> list[tuple[int, ...]]:
    """A uniformly random k-CNF formula: each clause has k distinct variables and random signs.

    Each clause's variables are a uniform k-subset of 1..n_vars, independently of the other
    clauses, and each literal's sign is a fair coin. Small formulas (n_clauses·n_vars ≤ 2¹⁶)
    take the first k entries of a random permutation of the variables per clause, from one
    uniform (n_clauses, n_vars) draw; larger ones draw k variables per clause and redraw the
    repeated ones until the k are distinct, in O(n_clauses·k) memory and
    O(n_clauses·k·log k) expected time, whatever n_vars. Both are exact samplers of the same
    distribution, and a seed gives the same formula on every machine.

    Parameters
    ----------
    n_vars : number of variables N ≥ k (at most 2⁶³ − 1, so that literals fit in int64)
    n_clauses : number of clauses (the satisfiability threshold of random 3-SAT is near 4.26 N)
    k : clause width
    seed : seed of the numpy generator (required: every formula in the book is reproducible)

    Returns
    -------
    list of ``n_clauses`` tuples of signed literals, each sorted by variable.

    Raises
    ------
    AttnInputError
        if a count is not a positive integer, k > n_vars, the seed is not an integer ≥ 0, or
        the formula would not fit in memory.

    Examples
    --------
    >>> random_ksat(4, 2, 3, seed=0)
    [(2, 3, 4), (1, -3, 4)]
    >>> len(random_ksat(10**6, 3, 3, seed=0)[0])
    3
    """
    n_vars = check_int("n_vars", n_vars, maximum=_MAX_VARS)
    n_clauses = check_int("n_clauses", n_clauses)
    k = check_int("k", k, maximum=n_vars)
    seed = check_int("seed", seed, minimum=0)
    small = n_clauses * n_vars <= _MATRIX_DRAW_MAX
    # Per clause: five int64 arrays of k entries (the variables, a sorted copy, the signs,
    # two temporaries of the literals), then a Python list of k ints (32 bytes each) and the
    # tuple made from it. The matrix draw adds its float64 matrix and int64 argsort; the
    # complement draw of a clause wider than n_vars/2 a boolean (n_clauses, n_vars) table.
    if small:
        table = 16 * n_clauses * n_vars
    else:
        table = n_clauses * n_vars if 2 * k > n_vars else 0
    check_memory(
        "random_ksat's formula",
        (104 + 88 * k) * n_clauses + table,
        culprits="n_clauses or k" if small or not table else "n_clauses, k or n_vars",
    )
    rng = np.random.default_rng(seed)
    if small:
        # k distinct variables per clause: the first k of a uniform random permutation
        variables = np.sort(rng.random((n_clauses, n_vars)).argsort(axis=1)[:, :k], axis=1)
    else:
        variables = _distinct_sorted(rng, n_vars, n_clauses, k)
    signs = rng.integers(0, 2, size=(n_clauses, k)) * 2 - 1
    return [tuple(int(x) for x in row) for row in ((variables + 1) * signs).tolist()]


#: random_ksat's largest n_vars: the literals ±n_vars are held in int64.
_MAX_VARS = 2**63 - 1


def _distinct_sorted(rng, n: int, rows: int, k: int) -> np.ndarray:
    """``rows`` independent uniform k-subsets of {0, …, n − 1}, each sorted: an int64
    (rows, k) array.

    Draw k values per row, then redraw a row's repeated values (those equal to their left
    neighbour after sorting) until every row holds k distinct ones. Each step only depends on
    the set of distinct values so far, in a way that commutes with relabelling {0, …, n − 1},
    so the final set's law is invariant under every permutation: it is uniform over the
    k-subsets. For k ≤ n/2 a redrawn value repeats with probability below 1/2, so the redraws
    shrink geometrically; for k > n/2 the n − k left-out values are drawn instead.
    """
    if 2 * k > n:
        out = np.ones((rows, n), dtype=np.bool_)
        if k < n:
            out[np.arange(rows)[:, None], _distinct_sorted(rng, n, rows, n - k)] = False
        return np.nonzero(out)[1].reshape(rows, k).astype(np.int64, copy=False)
    values = rng.integers(0, n, size=(rows, k), dtype=np.int64)
    values.sort(axis=1)
    todo = np.arange(rows)
    while todo.size:
        block = values[todo]
        repeated = block[:, 1:] == block[:, :-1]
        has = repeated.any(axis=1)
        todo, block, repeated = todo[has], block[has], repeated[has]
        if not todo.size:
            break
        block[:, 1:][repeated] = rng.integers(0, n, size=int(repeated.sum()), dtype=np.int64)
        block.sort(axis=1)
        values[todo] = block
    return values


def _clause_masks(clauses):
    """Bit masks per clause: bit v-1 of pos (neg) is set if x_v (¬x_v) occurs in the clause."""
    pos = np.zeros(len(clauses), dtype=np.int64)
    neg = np.zeros(len(clauses), dtype=np.int64)
    for c, clause in enumerate(clauses):
        for lit in clause:
            if lit > 0:
                pos[c] |= 1 << (lit - 1)
            else:
                neg[c] |= 1 << (-lit - 1)
    return pos, neg


@njit(cache=True)
def _first_satisfying(pos, neg, n_vars):
    """Smallest assignment code a (bit v-1 = value of x_v) satisfying every clause, or -1.

    Clause c holds under a iff a has a 1 where c has a positive literal, or a 0 where c has a
    negative one: (a & pos_c) | (~a & neg_c) ≠ 0.
    """
    for a in range(1 << n_vars):
        ok = True
        for c in range(pos.shape[0]):
            if (a & pos[c]) == 0 and (~a & neg[c]) == 0:
                ok = False
                break
        if ok:
            return a
    return -1


def brute_force_sat(clauses, n_vars) -> tuple[bool, ...] | None:
    """A satisfying assignment found by trying all 2^n_vars assignments, or None.

    The assignments are tried in the order of their integer code (bit v-1 = x_v), so the
    answer is the satisfying assignment with the smallest code. Time O(2^N · #clauses), a
    compiled kernel; n_vars ≤ 30.

    Raises :class:`AttnInputError` if n_vars is not an integer from 1 to 30 or the clauses
    are not a valid formula on n_vars variables (see :func:`check_clauses`).

    Examples
    --------
    >>> brute_force_sat([(1, 2), (-1,)], 2)
    (False, True)
    """
    n_vars = check_int("n_vars", n_vars, maximum=_MAX_BRUTE_FORCE_VARS)
    clauses = check_clauses(clauses, n_vars)
    pos, neg = _clause_masks(clauses)
    a = int(_first_satisfying(pos, neg, n_vars))
    if a < 0:
        return None
    return tuple(bool((a >> v) & 1) for v in range(n_vars))


def _check_assignment(assignment) -> list[bool]:
    """A non-empty sequence of booleans (Python or numpy), as a list."""
    if isinstance(assignment, (str, bytes)) or not hasattr(assignment, "__len__"):
        raise AttnInputError(f"assignment must be a sequence of booleans, got {assignment!r}")
    values = list(assignment)
    if not values:
        raise AttnInputError("assignment must assign at least one variable, got length 0")
    for i, v in enumerate(values):
        if not isinstance(v, (bool, np.bool_)):
            raise AttnInputError(f"assignment[{i}] must be a bool, got {v!r}")
    return values


def is_satisfied(clauses, assignment) -> bool:
    """True iff the assignment (a sequence of n_vars booleans) satisfies every clause.

    Raises :class:`AttnInputError` if the assignment is not a non-empty sequence of booleans
    or the clauses use a variable it does not assign.
    """
    values = _check_assignment(assignment)
    clauses = check_clauses(clauses, len(values))
    return all(any(values[abs(lit) - 1] == (lit > 0) for lit in clause) for clause in clauses)


def _satisfying_codes(clauses, n_vars) -> np.ndarray:
    """The codes a (bit v-1 = value of x_v) of every satisfying assignment, ascending."""
    n_vars = check_int("n_vars", n_vars, maximum=_MAX_BRUTE_FORCE_VARS)
    clauses = check_clauses(clauses, n_vars)
    # the codes (int64), one boolean per code, and two int64 temporaries of a clause's test
    check_memory("the 2^n_vars assignments", 26 << n_vars, culprits="n_vars")
    pos, neg = _clause_masks(clauses)
    a = np.arange(1 << n_vars, dtype=np.int64)
    ok = np.ones(1 << n_vars, dtype=np.bool_)
    for p, q in zip(pos.tolist(), neg.tolist(), strict=True):
        ok &= ((a & p) != 0) | ((~a & q) != 0)
    return np.flatnonzero(ok)


def all_models(clauses, n_vars) -> list[tuple[bool, ...]]:
    """Every satisfying assignment, by enumerating all 2^n_vars of them at once, in the order
    of their integer code (bit v-1 = x_v), so the first is :func:`brute_force_sat`'s.

    Raises :class:`AttnInputError` as :func:`brute_force_sat` does, and when the 2^n_vars
    assignments would not fit in memory.

    Examples
    --------
    >>> all_models([(1, 2), (-1, -2)], 2)
    [(True, False), (False, True)]
    """
    codes = _satisfying_codes(clauses, n_vars)
    return [tuple(bool((int(a) >> v) & 1) for v in range(n_vars)) for a in codes]


def count_models(clauses, n_vars) -> int:
    """The number of satisfying assignments of the formula, by enumeration (see
    :func:`all_models`).

    Raises :class:`AttnInputError` as :func:`all_models` does.

    Examples
    --------
    >>> count_models([(1, 2, 3)], 3)
    7
    """
    return int(_satisfying_codes(clauses, n_vars).size)


def assignment_bits(assignment) -> str:
    """An assignment written as a string of bits, x_1 first: ``"010"`` is x_2 true only.

    Raises :class:`AttnInputError` if the assignment is not a non-empty sequence of booleans.

    Examples
    --------
    >>> assignment_bits((False, True, False))
    '010'
    """
    return "".join("1" if v else "0" for v in _check_assignment(assignment))


def write_dimacs(clauses, n_vars, *, comment: str | None = None) -> str:
    """The formula as DIMACS CNF text: an optional ``c`` comment, ``p cnf N C``, one clause a line.

    Each clause line lists its literals and ends with ``0``. Raises :class:`AttnInputError`
    for an invalid formula or a comment that is not a string.

    Examples
    --------
    >>> print(write_dimacs([(1, -2)], 2), end="")
    p cnf 2 1
    1 -2 0
    """
    n_vars = check_int("n_vars", n_vars)
    clauses = check_clauses(clauses, n_vars)
    lines = []
    if comment is not None:
        if not isinstance(comment, str):
            raise AttnInputError(f"comment must be a string or None, got {comment!r}")
        lines += [f"c {line}".rstrip() for line in comment.splitlines()]
    lines.append(f"p cnf {n_vars} {len(clauses)}")
    lines += [" ".join([*(str(lit) for lit in clause), "0"]) for clause in clauses]
    return "\n".join(lines) + "\n"


#: DIMACS integers: ASCII digits with an optional sign (int() would also accept "1_0" and
#: non-ASCII digits such as Arabic-Indic or full-width ones).
_DECIMAL = re.compile(r"[+-]?[0-9]+", re.ASCII)


def _dimacs_int(tok: str, lineno: int, what: str) -> int:
    """A DIMACS integer token as an int (``tok`` matches :data:`_DECIMAL`)."""
    try:
        return int(tok)
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits())
        raise AttnInputError(
            f"text line {lineno}: {what} has {len(tok.lstrip('+-'))} digits, too many to read"
        ) from None


def read_dimacs(text) -> tuple[list[tuple[int, ...]], int]:
    """Parse DIMACS CNF text; return ``(clauses, n_vars)``.

    Accepts ``c`` comment lines, one ``p cnf N C`` header before any clause, clauses that span
    lines (each ends with ``0``), and SATLIB's trailing ``%`` marker. Raises
    :class:`AttnInputError` for a missing or malformed header, a non-integer token, a variable
    beyond N, an unterminated last clause, or a clause count different from C.

    Examples
    --------
    >>> read_dimacs("p cnf 2 1\\n1 -2 0\\n")
    ([(1, -2)], 2)
    """
    if not isinstance(text, str):
        raise AttnInputError(f"text must be a str holding DIMACS CNF, got {type(text).__name__}")
    n_vars = n_declared = None
    clauses: list[tuple[int, ...]] = []
    current: list[int] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("c"):
            continue
        if line.startswith("%"):  # SATLIB files end with '%' and a stray '0'
            break
        if line.startswith("p"):
            parts = line.split()
            if n_vars is not None:
                raise AttnInputError(f"text line {lineno}: a second 'p cnf' header")
            if len(parts) != 4 or parts[1] != "cnf":
                raise AttnInputError(
                    f"text line {lineno}: header must be 'p cnf <n_vars> <n_clauses>', got {line!r}"
                )
            if not (_DECIMAL.fullmatch(parts[2]) and _DECIMAL.fullmatch(parts[3])):
                raise AttnInputError(
                    f"text line {lineno}: header counts must be integers, got {line!r}"
                )
            n_vars = _dimacs_int(parts[2], lineno, "the header's n_vars")
            n_declared = _dimacs_int(parts[3], lineno, "the header's n_clauses")
            if n_vars < 1 or n_declared < 1:
                raise AttnInputError(
                    f"text line {lineno}: header needs n_vars >= 1 and n_clauses >= 1, got {line!r}"
                )
            continue
        if n_vars is None:
            raise AttnInputError(f"text line {lineno}: clause before the 'p cnf' header")
        for tok in line.split():
            if not _DECIMAL.fullmatch(tok):
                raise AttnInputError(f"text line {lineno}: literal must be an integer, got {tok!r}")
            lit = _dimacs_int(tok, lineno, "a literal")
            if lit == 0:
                clauses.append(tuple(current))
                current = []
            elif abs(lit) > n_vars:
                raise AttnInputError(
                    f"text line {lineno}: variable {abs(lit)} is beyond n_vars={n_vars}"
                )
            else:
                current.append(lit)
    if n_vars is None:
        raise AttnInputError("text has no 'p cnf <n_vars> <n_clauses>' header")
    if current:
        raise AttnInputError(f"text: the last clause {tuple(current)} is not terminated by 0")
    if len(clauses) != n_declared:
        raise AttnInputError(f"text: header declares {n_declared} clauses, found {len(clauses)}")
    return check_clauses(clauses, n_vars), n_vars
