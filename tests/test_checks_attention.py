"""The argument bundles of the attention passes (attnlib._checks.attention): Q, K, V and a
backward pass's O, dO, lse in the 2-D layout, in PyTorch's batched layout (grouped-query
heads included) and as one sequence's heads; the causal flag with a mask; AS24's loss
arguments. Each refusal names the argument and what was expected."""

import numpy as np
import pytest

from attnlib._checks import (
    AttnInputError,
    check_backward_inputs,
    check_batched_mask,
    check_batched_outputs,
    check_batched_qkv,
    check_causal,
    check_head_backward,
    check_head_counts,
    check_head_qkv,
    check_loss_inputs,
    check_qkv,
    is_batched,
)


def arrays(*shapes, dtype=np.float64):
    return tuple(np.ones(s, dtype) for s in shapes)


def test_qkv_returns_the_arrays_and_names_the_mismatch():
    Q, K, V = check_qkv([[1.0, 2.0]], [[1.0, 0.0], [0.0, 1.0]], [[3.0], [4.0]])
    assert Q.shape == (1, 2) and K.shape == (2, 2) and V.shape == (2, 1)
    with pytest.raises(AttnInputError, match=r"^K must have d=2 columns like Q, got 3"):
        check_qkv(*arrays((1, 2), (2, 3), (2, 1)))
    with pytest.raises(AttnInputError, match=r"^V must have m=2 rows like K, got 3"):
        check_qkv(*arrays((1, 2), (2, 2), (3, 1)))


def test_backward_inputs_shapes_and_masked_rows():
    Q, K, V = arrays((3, 2), (4, 2), (4, 5))
    O, dO = arrays((3, 5), (3, 5))
    lse = np.array([0.0, -np.inf, 1.0])
    out = check_backward_inputs(Q, K, V, O, dO, lse)
    assert [a.shape for a in out] == [(3, 2), (4, 2), (4, 5), (3, 5), (3, 5), (3,)]
    with pytest.raises(AttnInputError, match=r"^lse"):
        check_backward_inputs(Q, K, V, O, dO, lse, allow_masked_rows=False)
    with pytest.raises(AttnInputError, match=r"^O must have shape \(n, d_v\)"):
        check_backward_inputs(Q, K, V, O[:, :4], dO, lse)
    with pytest.raises(AttnInputError, match=r"^dO must have shape \(n, d_v\) like O"):
        check_backward_inputs(Q, K, V, O, dO[:2], lse)
    with pytest.raises(AttnInputError, match=r"^lse must have shape \(n,\)"):
        check_backward_inputs(Q, K, V, O, dO, lse[:2])
    with pytest.raises(AttnInputError, match=r"^lse"):
        check_backward_inputs(Q, K, V, O, dO, np.array([0.0, np.nan, 1.0]))


def test_loss_inputs_promote_to_the_common_dtype_and_ask_the_callers_working_memory():
    n, m, d = 3, 4, 2
    X, Y = arrays((d, d), (d, d))
    A1, E = arrays((n, d), (n, d), dtype=np.float32)
    A2, A3 = arrays((m, d), (m, d), dtype=np.float32)
    seen = []

    def working(n_, m_, d_, dtype):
        seen.append((n_, m_, d_, np.dtype(dtype)))
        return []

    out = check_loss_inputs(X, A1, A2, A3, Y, E, working=working)
    assert [a.dtype for a in out] == [np.float64] * 6
    assert seen == [(n, m, d, np.float64)]
    with pytest.raises(AttnInputError, match=r"^A3 must have m=4 rows like A2"):
        check_loss_inputs(X, A1, A2, A3[:3], Y, E)
    with pytest.raises(AttnInputError, match=r"^Y must have shape \(d, d\)"):
        check_loss_inputs(X, A1, A2, A3, Y[:1], E)
    with pytest.raises(AttnInputError, match=r"^the loss gradient"):
        check_loss_inputs(
            X,
            A1,
            A2,
            A3,
            Y,
            E,
            what="the loss gradient",
            working=lambda *a: [(2**62, "a huge buffer", "n")],
        )


@pytest.mark.parametrize(
    "Q, batched",
    [(np.ones((2, 3, 4)), True), (np.ones((3, 4)), False), ([[1.0], [2.0, 3.0]], False)],
)
def test_is_batched_means_three_or_more_dimensions(Q, batched):
    assert is_batched(Q) is batched


def test_batched_qkv_returns_the_group_size():
    Q, K, V = arrays((2, 6, 5, 3), (2, 3, 7, 3), (2, 3, 7, 4))
    *out, g = check_batched_qkv(Q, K, V, True)
    assert g == 2 and [a.shape for a in out] == [Q.shape, K.shape, V.shape]


@pytest.mark.parametrize(
    "shapes, gqa, message",
    [
        (((2, 4, 5, 3), (4, 7, 3), (4, 7, 2)), False, r"^K must have 4 dimensions"),
        (((2, 4, 5, 3), (3, 4, 7, 3), (3, 4, 7, 2)), False, r"^K must have Q's batch dimensions"),
        (((4, 5, 3), (4, 7, 2), (4, 7, 2)), False, r"^K must have d=3 columns like Q, got 2"),
        (((4, 5, 3), (4, 7, 3), (4, 6, 2)), False, r"^V must have \(H_kv, m\) = \(4, 7\)"),
        (((4, 5, 3), (2, 7, 3), (2, 7, 2)), False, r"pass enable_gqa=True"),
        (((4, 5, 3), (3, 7, 3), (3, 7, 2)), True, r"^Q's head count H=4 must be a multiple"),
    ],
)
def test_batched_qkv_refusals(shapes, gqa, message):
    with pytest.raises(AttnInputError, match=message):
        check_batched_qkv(*arrays(*shapes), gqa)


def test_batched_outputs_shapes():
    rows = (2, 4, 5)
    O, dO, lse = arrays((*rows, 3), (*rows, 3), rows)
    lse[0, 0, 0] = -np.inf
    assert [a.shape for a in check_batched_outputs(O, dO, lse, rows, 3)] == [O.shape] * 2 + [rows]
    with pytest.raises(AttnInputError, match=r"^O must have shape \(\.\.\., H, n, d_v\)"):
        check_batched_outputs(O[..., :2], dO, lse, rows, 3)
    with pytest.raises(AttnInputError, match=r"^dO must have shape"):
        check_batched_outputs(O, dO[:1], lse, rows, 3)
    with pytest.raises(AttnInputError, match=r"^lse must have shape \(\.\.\., H, n\)"):
        check_batched_outputs(O, dO, lse[..., :4], rows, 3)


def test_mask_and_is_causal_are_refused_together_by_name():
    assert check_causal(None, np.bool_(True)) is True
    assert check_causal(np.ones((2, 2), bool), False) is False
    with pytest.raises(AttnInputError, match=r"^mask and is_causal=True cannot be given"):
        check_causal(np.ones((2, 2), bool), True)
    with pytest.raises(AttnInputError, match=r"^is_causal"):
        check_causal(None, "yes")


def test_batched_mask_is_a_read_only_broadcast_view():
    keep = np.tri(5, 7, dtype=bool)
    mask, causal = check_batched_mask(keep, False, (2, 4, 5, 7))
    assert mask.shape == (2, 4, 5, 7) and not causal and not mask.flags.writeable
    assert np.shares_memory(mask, keep) and np.array_equal(mask[1, 3], keep)
    assert check_batched_mask(None, True, (2, 4, 5, 7)) == (None, True)
    with pytest.raises(AttnInputError, match=r"^mask must have a boolean dtype"):
        check_batched_mask(keep.astype(int), False, (2, 4, 5, 7))
    with pytest.raises(AttnInputError, match=r"^mask must be broadcastable to"):
        check_batched_mask(np.ones((3, 5, 7), bool), False, (2, 4, 5, 7))


def test_head_counts():
    assert check_head_counts(8, 2, True) == (8, 2, 4)
    assert check_head_counts(3, 3, False) == (3, 3, 1)
    with pytest.raises(AttnInputError, match=r"pass enable_gqa=True"):
        check_head_counts(8, 2, False)
    with pytest.raises(AttnInputError, match=r"^H=8 must be a multiple of H_kv=3"):
        check_head_counts(8, 3, True)
    with pytest.raises(AttnInputError, match=r"^H_kv"):
        check_head_counts(8, 0, True)


def test_one_sequences_heads_take_two_or_three_dimensions():
    Q, K, V, g = check_head_qkv(*arrays((5, 3), (7, 3), (7, 2)), False)
    assert (Q.shape, K.shape, V.shape, g) == ((1, 5, 3), (1, 7, 3), (1, 7, 2), 1)
    Q, K, V, g = check_head_qkv(*arrays((4, 5, 3), (2, 7, 3), (2, 7, 2)), True)
    assert g == 2 and Q.shape == (4, 5, 3)
    with pytest.raises(AttnInputError, match=r"^Q must be \(n, d\) or \(H, n, d\)"):
        check_head_qkv(*arrays((1, 4, 5, 3), (1, 2, 7, 3), (1, 2, 7, 2)), True)
    out = check_head_backward(*arrays((5, 3), (7, 3), (7, 2), (5, 2), (5, 2), (5,)), False)
    assert [a.shape for a in out[:-1]] == [
        (1, 5, 3),
        (1, 7, 3),
        (1, 7, 2),
        (1, 5, 2),
        (1, 5, 2),
        (1, 5),
    ]
    out = check_head_backward(
        *arrays((4, 5, 3), (2, 7, 3), (2, 7, 2), (4, 5, 2), (4, 5, 2), (4, 5)), True
    )
    assert out[-1] == 2 and out[5].shape == (4, 5)
