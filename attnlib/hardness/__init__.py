"""Part hardness: SETH → k-SAT → Orthogonal Vectors → attention → attention gradient.

Every link of AS24's lower-bound chain is a function that builds one problem's instance
from the previous one; the book checks on many instances that the answer is preserved.
:mod:`.sat` holds CNF formulas, :mod:`.split_list` the reduction k-SAT → OV, :mod:`.ov` and
:mod:`.gap_ann` the two source problems, :mod:`.to_attention` their attention instances,
:mod:`.gradient` and :mod:`.quadrature` the step from attention to its gradient, and
:mod:`.chain` the whole chain Gap-ANN → attention → gradient as one decision procedure.
"""

from .chain import gap_ann_by_gradient, gradient_noise_tolerance, shifted_gradient
from .gap_ann import gap_ann_parameters, lsh_close_pair, planted_gap_ann
from .gradient import (
    attention_from_gradient,
    attention_norm_squared,
    noisy_gradient,
    norm_derivative_from_gradient,
    riemann_from_gradient,
)
from .ov import adversarial_no_ov, brute_force_ov, planted_ov
from .quadrature import gauss_legendre_error_bound, gauss_legendre_nodes_needed
from .sat import (
    all_models,
    assignment_bits,
    brute_force_sat,
    check_clauses,
    count_models,
    is_satisfied,
    random_ksat,
    read_dimacs,
    write_dimacs,
)
from .split_list import ov_pair_to_assignment, sat_to_ov
from .to_attention import gap_ann_to_attention, needed_entry_factor, ov_to_attention

__all__ = [
    "adversarial_no_ov",
    "all_models",
    "assignment_bits",
    "attention_from_gradient",
    "attention_norm_squared",
    "brute_force_ov",
    "brute_force_sat",
    "check_clauses",
    "count_models",
    "gap_ann_by_gradient",
    "gap_ann_parameters",
    "gap_ann_to_attention",
    "gauss_legendre_error_bound",
    "gauss_legendre_nodes_needed",
    "gradient_noise_tolerance",
    "is_satisfied",
    "lsh_close_pair",
    "needed_entry_factor",
    "noisy_gradient",
    "norm_derivative_from_gradient",
    "ov_pair_to_assignment",
    "ov_to_attention",
    "planted_gap_ann",
    "planted_ov",
    "random_ksat",
    "read_dimacs",
    "riemann_from_gradient",
    "sat_to_ov",
    "shifted_gradient",
    "write_dimacs",
]
