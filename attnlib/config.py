"""Tunables that the library and the tests share, each defined once.

Changing one changes behaviour everywhere it is used (and the tests follow), so each carries
the reason for its value.
"""

from __future__ import annotations

__all__ = [
    "DQ_GROUPS",
    "RANGE_STEPS_PER_OCTAVE",
    "MEMORY_BUDGET_BYTES",
    "MAX_ALLOCATION_BYTES",
    "MAX_REPEATS",
    "CHECK_POINTS",
    "SEARCH_POINTS",
    "DEGREE_MARGIN",
]

#: Key-block groups of the compiled backward pass (:func:`attnlib.flash_backward`). Every
#: group but the first keeps its own copy of dQ in the inputs' dtype ((DQ_GROUPS - 1)·n·d
#: numbers), and the copies are added in a fixed order, so the result does not depend on the
#: number of threads. It also caps the backward's parallelism at DQ_GROUPS.
DQ_GROUPS = 4

#: A logit range R is rounded up to the grid 2^(k/RANGE_STEPS_PER_OCTAVE) before a polynomial
#: is chosen: the interval only grows (by at most 4.4% at 16), so the guarantee still holds,
#: and nearby inputs share one cached degree search.
RANGE_STEPS_PER_OCTAVE = 16

#: Default memory budget for the factors of one polynomial-method call: 1 GiB.
MEMORY_BUDGET_BYTES = 2**30

#: The most working memory one call allocates unless told otherwise (4 GiB): larger requests
#: are refused before anything is allocated. Functions with a ``memory_budget`` use that.
MAX_ALLOCATION_BYTES = 2**32

#: The most repeats (or rounds) a timing helper runs: 10⁹ calls of even a microsecond take a
#: quarter of an hour, so a larger count (10**400, say) is a mistake that would never return.
MAX_REPEATS = 10**9

#: Grid size of the polynomial guarantee check on [−R, R] (odd, so 0 is a grid point).
CHECK_POINTS = 100_001

#: Coarser grid used while searching the least degree; the winner is re-checked on the dense
#: grid of CHECK_POINTS.
SEARCH_POINTS = 4_097

#: A degree is accepted only if its measured relative error is at most eps·(1 − DEGREE_MARGIN),
#: so that a different dense grid (e.g. a reader's np.linspace(-R, R, 10**5)) cannot find a
#: point just above eps between the points of ours.
DEGREE_MARGIN = 1e-3
