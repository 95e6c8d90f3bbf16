"""AS24's loss gradient in Kronecker form (attnlib.polymethod.kronecker): it agrees with the
memory-light form, the lemmas D.3 and D.5 as printed give wrong gradients, and factors over the
memory budget are refused before they are built."""

from __future__ import annotations

import pytest
from helpers import rel_err

import attnlib as al
from attnlib import AttnInputError
from attnlib import polymethod as pm


def _loss_inputs(rng, n, d, B, m=None):
    return pm.bounded_loss_inputs(n, d, B, rng, m=m)


def test_light_and_kronecker_forms_agree(rng):
    for n, m, d, B in [(30, 30, 3, 1.0), (25, 40, 4, 1.3), (50, 50, 6, 0.8)]:
        args = _loss_inputs(rng, n, d, B, m=m)
        light = pm.approx_attention_loss_grad(*args, eps=1e-5)
        kron = pm.kronecker_loss_grad(*args, eps=1e-5)
        assert rel_err(light, kron) < 1e-10


def test_as_printed_lemmas_d3_and_d5_give_wrong_gradients(rng):
    args = _loss_inputs(rng, 40, 4, 1.0)
    exact = al.attention_loss_grad(*args)
    fixed = pm.kronecker_loss_grad(*args, eps=1e-8)
    assert rel_err(fixed, exact) < 1e-6
    for variant in [dict(lemma_d3="as_printed"), dict(lemma_d5="as_printed")]:
        wrong = pm.kronecker_loss_grad(*args, eps=1e-8, **variant)
        assert rel_err(wrong, exact) > 1e-2, variant
    with pytest.raises(AttnInputError, match="only type-check when m = n"):
        pm.kronecker_loss_grad(*_loss_inputs(rng, 10, 3, 1.0, m=12), eps=0.1, lemma_d5="as_printed")
    with pytest.raises(AttnInputError, match="lemma_d3 must be one of"):
        pm.kronecker_loss_grad(*args, eps=0.1, lemma_d3="printed")


def test_kronecker_form_refuses_factors_over_the_budget(rng):
    args = _loss_inputs(rng, 200, 4, 1.0)
    plan = pm.loss_plan(*args[:3], eps=1e-3)
    # the memory-light form fits where the Kronecker factors (d times wider) do not
    budget = 8 * 400 * plan.rank * 3 + pm.approx.peak_bytes(plan, "loss_grad")
    pm.approx_attention_loss_grad(*args, eps=1e-3, memory_budget=budget)
    with pytest.raises(AttnInputError, match="Kronecker factors would need"):
        pm.kronecker_loss_grad(*args, eps=1e-3, memory_budget=budget)
