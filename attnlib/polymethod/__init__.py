"""Part polynomial method: approximate exp by a polynomial, factor the attention matrix.

* :mod:`.polyexp` — polynomials with guaranteed relative error for exp on [−R, R]
  (:func:`exp_poly`, :func:`least_degree`, :func:`aa22_degree`);
* :mod:`.features` — the exact feature map U Vᵀ = p(τ QKᵀ) (:func:`poly_features`), its rank
  C(g+d, d) (:func:`feature_rank`) against AS23's C(2(g+d), 2g) (:func:`as23_rank_bound`),
  and the row-wise Kronecker product ⊘ (:func:`rowwise_kron`);
* :mod:`.approx` — AS23's approximate attention (:func:`approx_attention`), its backward pass
  (:func:`approx_attention_backward`) and AS24's almost-linear gradient
  (:func:`approx_attention_loss_grad`), with their degree/rank in :class:`ApproxPlan`.
"""

from .approx import (
    MEMORY_BUDGET_BYTES,
    ApproxPlan,
    approx_attention,
    approx_attention_backward,
    approx_attention_loss_grad,
    approx_plan,
    forward_error_bound,
    logit_range,
    loss_plan,
)
from .features import as23_rank_bound, feature_rank, multi_indices, poly_features, rowwise_kron
from .polyexp import (
    FLOOR_FACTOR,
    KINDS,
    aa22_degree,
    exp_poly,
    exp_poly_of_degree,
    least_degree,
    max_logit_range,
    max_relative_error,
    rounding_floor,
)

__all__ = [
    "FLOOR_FACTOR",
    "KINDS",
    "MEMORY_BUDGET_BYTES",
    "ApproxPlan",
    "aa22_degree",
    "approx_attention",
    "approx_attention_backward",
    "approx_attention_loss_grad",
    "approx_plan",
    "as23_rank_bound",
    "exp_poly",
    "exp_poly_of_degree",
    "feature_rank",
    "forward_error_bound",
    "least_degree",
    "logit_range",
    "loss_plan",
    "max_logit_range",
    "max_relative_error",
    "multi_indices",
    "poly_features",
    "rounding_floor",
    "rowwise_kron",
]
