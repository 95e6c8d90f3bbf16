"""Part polynomial method: approximate exp by a polynomial, factor the attention matrix.

* :mod:`.polyexp` — polynomials with guaranteed relative error for exp on [−R, R]
  (:func:`exp_poly`, :func:`least_degree`, :func:`aa22_degree`), and the textbook bounds on
  their error (:func:`relative_error_bound`);
* :mod:`.features` — the exact feature map U Vᵀ = p(τ QKᵀ) (:func:`poly_features`), its rank
  C(g+d, d) (:func:`feature_rank`) against AS23's C(2(g+d), 2g) (:func:`as23_rank_bound`),
  and the row-wise Kronecker product ⊘ (:func:`rowwise_kron`);
* :mod:`.approx` — AS23's approximate attention (:func:`approx_attention`), its backward pass
  (:func:`approx_attention_backward`) and AS24's almost-linear gradient
  (:func:`approx_attention_loss_grad`), with their degree/rank in :class:`ApproxPlan`;
* :mod:`.kronecker` — the same gradient as AS24's Appendix D prints it, Kronecker factors
  built, with switches for the printed Lemmas D.3 and D.5 (:func:`kronecker_loss_grad`);
* :mod:`.grad_error` — bounds on the gradient's error (:func:`loss_grad_error_bound`,
  :func:`loss_grad_magnitude_bound`, :func:`entrywise_product_bound`);
* :mod:`.threshold` — the plan over n and B = c·√(ln n) with d ∝ log n
  (:func:`threshold_sweep`), and AA22's formula as a model rank (:func:`aa22_rank`,
  :func:`rank_exponent`);
* :mod:`.inputs` — random loss inputs with entries bounded by B (:func:`bounded_loss_inputs`,
  :func:`sign_loss_inputs`).
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
from .grad_error import entrywise_product_bound, loss_grad_error_bound, loss_grad_magnitude_bound
from .inputs import bounded_loss_inputs, sign_loss_inputs
from .kronecker import kronecker_loss_grad
from .polyexp import (
    FLOOR_FACTOR,
    KINDS,
    aa22_degree,
    exp_poly,
    exp_poly_of_degree,
    least_degree,
    max_logit_range,
    max_relative_error,
    relative_error_bound,
    rounding_floor,
)
from .threshold import ThresholdSweep, aa22_rank, rank_exponent, threshold_sweep

__all__ = [
    "FLOOR_FACTOR",
    "KINDS",
    "MEMORY_BUDGET_BYTES",
    "ApproxPlan",
    "ThresholdSweep",
    "aa22_degree",
    "aa22_rank",
    "approx_attention",
    "approx_attention_backward",
    "approx_attention_loss_grad",
    "approx_plan",
    "as23_rank_bound",
    "bounded_loss_inputs",
    "entrywise_product_bound",
    "exp_poly",
    "exp_poly_of_degree",
    "feature_rank",
    "forward_error_bound",
    "kronecker_loss_grad",
    "least_degree",
    "logit_range",
    "loss_grad_error_bound",
    "loss_grad_magnitude_bound",
    "loss_plan",
    "max_logit_range",
    "max_relative_error",
    "multi_indices",
    "poly_features",
    "rank_exponent",
    "relative_error_bound",
    "rounding_floor",
    "rowwise_kron",
    "sign_loss_inputs",
    "threshold_sweep",
]
