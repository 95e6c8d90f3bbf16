"""Bad input to the exact core: every case raises AttnInputError with a message that names
the argument and what was expected. The bad Q, K and V, shared with every other
implementation, are in test_qkv_inputs.py."""

from __future__ import annotations

import numpy as np
import pytest

import attnlib as al
from attnlib import AttnInputError


def test_error_is_a_value_error():
    assert issubclass(AttnInputError, ValueError)


def call_forward(a):
    return al.attention_forward(a["Q"], a["K"], a["V"], **a.get("kw", {}))


def call_attention(a):
    return al.attention(a["Q"], a["K"], a["V"], **a.get("kw", {}))


def call_backward(a):
    return al.attention_backward(
        a["Q"], a["K"], a["V"], a["O"], a["dO"], a["lse"], **a.get("kw", {})
    )


QKV_FUNCTIONS = [call_forward, call_attention, call_backward]

KEYWORD_CASES = [
    (dict(scale=0.0), r"scale must be a positive finite real number, got 0.0"),
    (dict(scale=-1), r"scale must be a positive finite real number, got -1"),
    (dict(scale=float("nan")), r"scale must be a positive finite real number, got nan"),
    (dict(scale=float("inf")), r"scale must be a positive finite real number, got inf"),
    (dict(scale="0.5"), r"scale must be a positive finite real number, got '0.5'"),
    (
        dict(mask=np.ones((4, 4), dtype=bool)),
        r"mask must have shape \(n, m\) = \(4, 5\), got \(4, 4\)",
    ),
    (
        dict(mask=np.ones((4, 5))),
        r"mask must have a boolean dtype \(True = keep\), got dtype float64",
    ),
    (dict(mask=np.ones((4, 5), dtype=int)), r"mask must have a boolean dtype"),
]


@pytest.mark.parametrize("func", QKV_FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("kw,message", KEYWORD_CASES)
def test_bad_scale_and_mask(qkv, func, kw, message):
    qkv["kw"] = kw
    with pytest.raises(AttnInputError, match=message):
        func(qkv)


BACKWARD_CASES = [
    ("O", lambda a: a["O"][:3], r"O must have shape \(n, d_v\) = \(4, 2\), got \(3, 2\)"),
    ("dO", lambda a: a["dO"][:, :1], r"dO must have shape \(n, d_v\) like O = \(4, 2\)"),
    ("dO", lambda a: np.full_like(a["dO"], np.nan), r"dO must be finite"),
    ("O", lambda a: a["O"].astype(np.int32), r"O must have a float32 or float64 dtype"),
    ("lse", lambda a: a["lse"][:, None], r"lse must be 1-dimensional"),
    ("lse", lambda a: a["lse"][:2], r"lse must have shape \(n,\) = \(4,\), got \(2,\)"),
    ("lse", lambda a: np.full_like(a["lse"], np.inf), r"lse must be finite \(-inf, no NaN"),
    ("lse", lambda a: np.full_like(a["lse"], np.nan), r"lse must be finite"),
]


@pytest.mark.parametrize("arg,make,message", BACKWARD_CASES)
def test_bad_backward_inputs(qkv, arg, make, message):
    qkv[arg] = make(qkv)
    with pytest.raises(AttnInputError, match=message):
        call_backward(qkv)


def test_backward_accepts_minus_inf_lse_of_masked_rows(qkv):
    mask = np.ones((4, 5), dtype=bool)
    mask[1] = False
    O, lse = al.attention_forward(qkv["Q"], qkv["K"], qkv["V"], mask=mask)
    dQ, _, _ = al.attention_backward(qkv["Q"], qkv["K"], qkv["V"], O, qkv["dO"], lse, mask=mask)
    assert np.all(dQ[1] == 0)


@pytest.fixture
def loss_args():
    rng = np.random.default_rng(1)
    n, d = 6, 3
    return dict(
        X=rng.standard_normal((d, d)),
        A1=rng.standard_normal((n, d)),
        A2=rng.standard_normal((n, d)),
        A3=rng.standard_normal((n, d)),
        Y=rng.standard_normal((d, d)),
        E=rng.standard_normal((n, d)),
    )


LOSS_CASES = [
    ("X", lambda a: a["X"][:2], r"X must have shape \(d, d\) = \(3, 3\), got \(2, 3\)"),
    ("Y", lambda a: a["Y"].ravel(), r"Y must be 2-dimensional"),
    ("A2", lambda a: a["A2"][:, :2], r"A2 must have d=3 columns like A1, got 2"),
    ("A3", lambda a: a["A3"][:5], r"A3 must have m=6 rows like A2, got 5"),
    ("E", lambda a: a["E"][:5], r"E must have shape \(n, d\) like A1 = \(6, 3\), got \(5, 3\)"),
    ("A1", lambda a: a["A1"].astype(np.int8), r"A1 must have a float32 or float64 dtype"),
    ("X", lambda a: np.full((3, 3), np.nan), r"X must be finite"),
    ("A1", lambda a: np.zeros((0, 3)), r"A1 must be non-empty"),
]


@pytest.mark.parametrize("func", [al.attention_loss, al.attention_loss_grad])
@pytest.mark.parametrize("arg,make,message", LOSS_CASES)
def test_bad_loss_inputs(loss_args, func, arg, make, message):
    loss_args[arg] = make(loss_args)
    with pytest.raises(AttnInputError, match=message):
        func(**loss_args)
