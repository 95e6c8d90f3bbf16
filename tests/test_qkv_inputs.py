"""One table of bad (Q, K, V) for every implementation of attention that validates them.

Each implementation (the exact core, the compiled kernels, the machine schedules, the
small-cache algorithm, the polynomial method, the gradient-to-attention reductions) refuses
each bad input with an AttnInputError that names the argument and what was expected, in the
same words as the exact core.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import attnlib as al
from attnlib import AttnInputError
from attnlib import hardness as hd
from attnlib import iomodel as io
from attnlib import polymethod as pm
from attnlib.iomodel import hierarchy as hy

ROOT = Path(al.__file__).resolve().parent


def _forward(a):
    return ()


def _backward(a):
    return a["O"], a["dO"], a["lse"]


def _dO(a):
    return (a["dO"],)


def _grad(a):
    return (al.attention_loss_grad,)


def _lam_grad(a):
    return 0.5, al.attention_loss_grad


def _nodes(a):
    return (4,)


def _tol(a):
    return (0.1,)


# (function, its arguments after Q, K, V built from the qkv fixture, its keyword arguments)
IMPLEMENTATIONS = [
    (al.attention_forward, _forward, {}),
    (al.attention, _forward, {}),
    (al.attention_backward, _backward, {}),
    (al.flash_forward, _forward, {}),
    (al.flash_backward, _backward, {}),
    (io.flash_forward, _forward, {"M": 100}),
    (io.flash_backward, _backward, {"M": 100}),
    (io.standard_forward, _forward, {"M": 100}),
    (io.standard_backward, _backward, {"M": 100}),
    (io.flash_forward, _forward, {"M": 100, "is_causal": True}),
    (io.flash_backward, _backward, {"M": 100, "is_causal": True}),
    (hy.flash_forward_three_level, _forward, {"M": 100, "M_l2": 1000}),
    (hy.flash_backward_three_level, _backward, {"M": 100, "M_l2": 1000}),
    (io.smallcache_forward, _forward, {"M": 50}),
    (io.smallcache_backward, _backward, {"M": 50}),
    (pm.approx_attention, _forward, {"eps": 0.1}),
    (pm.approx_attention_backward, _dO, {"eps": 0.1}),
    (hd.attention_from_gradient, _grad, {"nodes": 2}),
    (hd.riemann_from_gradient, _grad, {"nodes": 2}),
    (hd.norm_derivative_from_gradient, _lam_grad, {}),
    (hd.gauss_legendre_error_bound, _nodes, {}),
    (hd.gauss_legendre_nodes_needed, _tol, {}),
    (hd.attention_norm_squared, lambda a: (), {}),
]


def _name(fn) -> str:
    return f"{fn.__module__.removeprefix('attnlib.')}.{fn.__name__}"


def _first(value):
    def make(a, arg):
        x = a[arg].copy()
        x.flat[0] = value
        return x

    return make


# (what, replacement for the argument, message pattern); {arg} is the argument's name
_EVERY_ARGUMENT = [
    ("None", lambda a, arg: None, r"^{arg} must be an array, got None$"),
    ("ragged", lambda a, arg: [[1.0, 2.0], [3.0]], r"^{arg} must be convertible to a numeric"),
    ("str", lambda a, arg: "abc", r"^{arg} must have a float32 or float64 dtype, got <U3"),
    ("1-D", lambda a, arg: a[arg][0], r"^{arg} must be 2-dimensional, got shape \(\d+,\)$"),
    ("no-rows", lambda a, arg: a[arg][:0], r"^{arg} must be non-empty, got shape \(0, \d+\)$"),
    ("int", lambda a, arg: a[arg].astype(np.int64), r"^{arg} must have a float32 .* integer"),
    ("bool", lambda a, arg: a[arg] > 0, r"^{arg} must have a float32 or float64 dtype, got bool"),
    ("complex", lambda a, arg: a[arg].astype(complex), r"^{arg} must have a float32 .* complex"),
    ("object", lambda a, arg: a[arg].astype(object), r"^{arg} must have a float32 .* object"),
    ("float16", lambda a, arg: a[arg].astype(np.float16), r"^{arg} must have a float32 .* float16"),
    ("nan", _first(np.nan), r"^{arg} must be finite \(no NaN or inf\), found nan at index"),
    ("inf", _first(np.inf), r"^{arg} must be finite \(no NaN or inf\), found inf at index"),
    ("-inf", _first(-np.inf), r"^{arg} must be finite \(no NaN or inf\), found -inf at index"),
]
# A 3-D Q is not in the table: the exact core reads it as a batch of heads.
_THREE_D = ("3-D", lambda a, arg: a[arg][None], r"^{arg} must be 2-dimensional, got shape \(1,")

BAD_QKV = [
    pytest.param(
        arg, lambda a, m=make, arg=arg: m(a, arg), pattern.format(arg=arg), id=f"{arg}={what}"
    )
    for arg in ("Q", "K", "V")
    for what, make, pattern in _EVERY_ARGUMENT + ([_THREE_D] if arg != "Q" else [])
] + [
    pytest.param(
        "K", lambda a: a["K"][:, :2], r"^K must have d=3 columns like Q, got 2$", id="K=other-d"
    ),
    pytest.param(
        "V", lambda a: a["V"][:4], r"^V must have m=5 rows like K, got 4$", id="V=other-m"
    ),
    pytest.param(
        "V",
        lambda a: a["V"][:, :0],
        r"^V must be non-empty, got shape \(5, 0\)$",
        id="V=no-columns",
    ),
]


@pytest.mark.parametrize(
    "fn,extra,kwargs", IMPLEMENTATIONS, ids=[_name(fn) for fn, _, _ in IMPLEMENTATIONS]
)
@pytest.mark.parametrize("arg,make,message", BAD_QKV)
def test_bad_qkv_is_refused_by_every_implementation(qkv, fn, extra, kwargs, arg, make, message):
    qkv[arg] = make(qkv)
    with pytest.raises(AttnInputError, match=message) as refused:
        fn(qkv["Q"], qkv["K"], qkv["V"], *extra(qkv), **kwargs)
    with pytest.raises(AttnInputError) as exact:
        al.attention_forward(qkv["Q"], qkv["K"], qkv["V"])
    assert str(refused.value) == str(exact.value)


def test_every_implementation_calling_check_qkv_is_in_the_table():
    """Each public function of attnlib that validates with check_qkv or check_backward_inputs
    (or with the cores' normalise, which calls them) runs against the table above: those
    that call them, and those taking Q, K, V first that reach them through private
    functions of their module. Functions of private modules (attnlib._checks, _heads) are
    not public."""
    checks = {"check_qkv", "check_backward_inputs", "normalise"}
    callers = set()
    for path in ROOT.rglob("*.py"):
        module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        if any(part.startswith("_") and part != "__init__" for part in module.split(".")):
            continue
        functions = {
            node.name: node
            for node in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(node, ast.FunctionDef)
        }
        calls = {
            name: {
                c.func.id
                for c in ast.walk(node)
                if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
            }
            for name, node in functions.items()
        }
        for name, node in functions.items():
            if name.startswith("_"):
                continue
            reached, todo = set(), [name]
            while todo:  # the module's private helpers it calls, transitively
                for callee in calls.get(todo.pop(), ()):
                    if callee not in reached:
                        reached.add(callee)
                        if callee.startswith("_") and callee in calls:
                            todo.append(callee)
            takes_qkv = [a.arg for a in node.args.args[:3]] == ["Q", "K", "V"]
            if calls[name] & checks or (takes_qkv and reached & checks):
                callers.add(f"{module.removeprefix('attnlib.')}.{name}")
    assert {"exact.attention_forward", "exact.attention_backward"} <= callers
    assert "fast.flash_forward" in callers
    missing = callers - {_name(fn) for fn, _, _ in IMPLEMENTATIONS}
    assert not missing, f"implementations missing from IMPLEMENTATIONS: {sorted(missing)}"
