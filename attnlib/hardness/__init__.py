"""Part hardness: SETH → k-SAT → Orthogonal Vectors → attention → attention gradient.

Every link of AS24's lower-bound chain is a function that builds one problem's instance
from the previous one; the book checks on many instances that the answer is
preserved. :mod:`.sat` holds CNF formulas, :mod:`.reductions` the reductions.
"""

from .reductions import (
    attention_from_gradient,
    brute_force_ov,
    gap_ann_to_attention,
    gauss_legendre_error_bound,
    norm_derivative_from_gradient,
    ov_pair_to_assignment,
    ov_to_attention,
    planted_gap_ann,
    planted_ov,
    riemann_from_gradient,
    sat_to_ov,
)
from .sat import (
    brute_force_sat,
    check_clauses,
    is_satisfied,
    random_ksat,
    read_dimacs,
    write_dimacs,
)

__all__ = [
    "attention_from_gradient",
    "brute_force_ov",
    "brute_force_sat",
    "check_clauses",
    "gap_ann_to_attention",
    "gauss_legendre_error_bound",
    "is_satisfied",
    "norm_derivative_from_gradient",
    "ov_pair_to_assignment",
    "ov_to_attention",
    "planted_gap_ann",
    "planted_ov",
    "random_ksat",
    "read_dimacs",
    "riemann_from_gradient",
    "sat_to_ov",
    "write_dimacs",
]
