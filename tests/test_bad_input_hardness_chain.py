"""Bad-input rows of Part III, hardness: the whole chain Gap-ANN -> attention -> gradient.

The rows' machinery, their ids and the inputs the parts share: bad_input_cases.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from bad_input_cases import Table, word

import attnlib as al
from attnlib import hardness as hd

table = Table()

GAP_A = np.zeros((2, 3), dtype=bool)
GAP_B = np.array([[1, 0, 0], [1, 1, 0]], dtype=bool)
GRAD = al.attention_loss_grad

table.raises(
    "hardness.gap_ann_by_gradient",
    "nodes=1",
    lambda: hd.gap_ann_by_gradient(GAP_A, GAP_B, 1, 1.0, GRAD, nodes=1),
    word("nodes"),
)
table.raises(
    "hardness.gap_ann_by_gradient",
    "eps-breaks-(1+eps)t<=m",
    lambda: hd.gap_ann_by_gradient(GAP_A, GAP_B, 1, 5.0, GRAD),
    word("eps"),
)
table.raises(
    "hardness.gap_ann_by_gradient",
    "grad_fn=None",
    lambda: hd.gap_ann_by_gradient(GAP_A, GAP_B, 1, 1.0, None),
    word("grad_fn"),
)
table.valid(
    "hardness.gap_ann_by_gradient",
    "yes-instance",
    lambda: hd.gap_ann_by_gradient(GAP_A, GAP_B, 1, 1.0, GRAD, nodes=16),
    lambda r: r[0] is True or r[0] == np.True_,
)
table.raises(
    "hardness.gradient_noise_tolerance",
    "nodes=1",
    lambda: hd.gradient_noise_tolerance(GAP_A, GAP_B, 1, 1.0, nodes=1),
    word("nodes"),
)
table.raises(
    "hardness.gradient_noise_tolerance",
    "t=0",
    lambda: hd.gradient_noise_tolerance(GAP_A, GAP_B, 0, 1.0),
    word("t"),
)
table.valid(
    "hardness.gradient_noise_tolerance",
    "positive-at-certified-nodes",
    lambda: hd.gradient_noise_tolerance(GAP_A, GAP_B, 1, 1.0, nodes=16),
    lambda tol: 0 < tol < 1 / 12,
)
table.raises(
    "hardness.shifted_gradient",
    "shift=nan",
    lambda: hd.shifted_gradient(GRAD, float("nan")),
    word("shift"),
)
table.raises(
    "hardness.shifted_gradient",
    "grad_fn=None",
    lambda: hd.shifted_gradient(None, 0.1),
    word("grad_fn"),
)
table.raises(
    "hardness.shifted_gradient",
    "returns-not-square",
    lambda: hd.shifted_gradient(lambda *a: np.ones((2, 3)), 0.1)(),
    "square",
)
table.valid(
    "hardness.shifted_gradient",
    "diagonal-moved",
    lambda: hd.shifted_gradient(lambda *a: np.zeros((2, 2)), 0.5)(),
    lambda G: G.tolist() == [[0.5, 0.0], [0.0, 0.5]],
)


@pytest.mark.parametrize("case", table.cases, ids=table.ids)
def test_row(case):
    case.run()
