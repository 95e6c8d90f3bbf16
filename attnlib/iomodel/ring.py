"""Ring attention on P devices: each device keeps its query rows and passes the key/value
blocks around a ring (Liu, Zaharia and Abbeel 2023, Alg. 1).

Device p starts with its shard of Q, K and V (rows :func:`~.shards.shard_rows`, every head).
In step s = 0 .. P-1 it holds the key/value block of shard (p − s) mod P, evaluates its query
rows against it with :func:`attnlib.blockwise.block_forward` and merges the partial result
into its running (O, lse) with the online softmax; then every device sends the block to
device p + 1 mod P, all in one round. Per device, with b = n / P and one row of K and V in
every key/value head being H_kv (d + d_v) words::

    forward:  sent = received = (P − 1) b H_kv (d + d_v),   messages = P − 1
    backward: sent = received = (2P − 1) b H_kv (d + d_v),  messages = P     (P > 1)

The backward pass computes D = rowsum(dO ∘ O) locally (FA2 Alg. 2), passes each key/value
block around the ring with its gradient accumulators dK, dV (one message per step), and after
the last step sends the accumulators one hop further, to the block's owner. Work is the kept
score entries, summed over query heads: H b n per device, or causally
:func:`~.shards.causal_work` (which depends on the layout; zig-zag balances it exactly).
"""

from __future__ import annotations

import numpy as np

from ..blockwise import block_backward, block_forward, causal_keep, merge, row_deltas
from .devices import DeviceCount, DeviceMachine
from .shards import causal_work, check_pass, check_sizes

__all__ = ["ring_forward", "ring_backward", "ring_forward_count", "ring_backward_count"]


def _steps(s) -> int:
    """Block steps on the machine (blocks evaluated, over all devices)."""
    return s.P * s.P


def _scores(s) -> int:
    """Score entries of the largest block one device evaluates at once (all its heads)."""
    return s.H * s.b * s.b


def _full(P: int, value: int) -> np.ndarray:
    return np.full(P, value, dtype=np.int64)


def _ring_work(s) -> np.ndarray:
    """Each device's kept score entries against all n keys, summed over the H query heads."""
    if s.is_causal:
        return causal_work(s.n, s.P, s.layout, H=s.H)
    return _full(s.P, s.H * s.b * s.n)


def ring_forward_count(
    n: int, d: int, *, P: int, H: int = 1, H_kv=None, d_v=None, is_causal=False,
    layout="contiguous",
) -> DeviceCount:  # fmt: skip
    """The closed form of :func:`ring_forward`'s count (module docstring): every device
    receives the P − 1 other key/value blocks, (P − 1) b H_kv d words of K and
    (P − 1) b H_kv d_v of V, in P − 1 messages.

    Parameters
    ----------
    n, d : rows and query/key width; P : devices (P | n; 2P | n for zigzag)
    H, H_kv : query and key/value heads (H_kv | H; default H_kv = H); d_v : value width
        (default d); is_causal, layout : as in :func:`ring_forward`

    Raises AttnInputError for invalid arguments.

    Examples
    --------
    >>> c = ring_forward_count(8, 2, P=4)
    >>> c.sent.tolist(), c.messages.tolist(), c.work.tolist()
    ([24, 24, 24, 24], [3, 3, 3, 3], [16, 16, 16, 16])
    """
    s = check_sizes(n, d, P=P, H=H, H_kv=H_kv, d_v=d_v, is_causal=is_causal, layout=layout)
    k = (s.P - 1) * s.b * s.H_kv
    words = k * (s.d + s.d_v)
    kinds = {"K": _full(s.P, k * s.d), "V": _full(s.P, k * s.d_v)}
    return DeviceCount(
        _full(s.P, words), _full(s.P, words), _full(s.P, s.P - 1), _ring_work(s), kinds
    )


def ring_backward_count(
    n: int, d: int, *, P: int, H: int = 1, H_kv=None, d_v=None, is_causal=False,
    layout="contiguous",
) -> DeviceCount:  # fmt: skip
    """The closed form of :func:`ring_backward`'s count (module docstring): K and V travel
    P − 1 hops as in the forward pass, and their accumulators dK, dV one hop further, P; so
    (2P − 1) b H_kv (d + d_v) words in P messages per device (nothing when P = 1).

    Arguments as :func:`ring_forward_count`. Raises AttnInputError for invalid arguments.

    Examples
    --------
    >>> ring_backward_count(8, 2, P=4).sent.tolist()
    [56, 56, 56, 56]
    """
    s = check_sizes(n, d, P=P, H=H, H_kv=H_kv, d_v=d_v, is_causal=is_causal, layout=layout)
    hops_kv, hops_grad = s.P - 1, (s.P if s.P > 1 else 0)
    row = s.b * s.H_kv
    kinds = {
        "K": _full(s.P, hops_kv * row * s.d),
        "V": _full(s.P, hops_kv * row * s.d_v),
        "dK": _full(s.P, hops_grad * row * s.d),
        "dV": _full(s.P, hops_grad * row * s.d_v),
    }
    words = (hops_kv + hops_grad) * row * (s.d + s.d_v)
    messages = hops_kv + (1 if s.P > 1 else 0)
    return DeviceCount(
        _full(s.P, words), _full(s.P, words), _full(s.P, messages), _ring_work(s), kinds
    )


def _keep(ps, p: int, j: int):
    """Device p's keep-mask against shard j: causal in global indices, else None (all)."""
    return causal_keep(ps.rows[p], ps.rows[j]) if ps.sizes.is_causal else None


def _entries(ps, keep) -> int:
    """Kept score entries of one block, summed over the H query heads."""
    s = ps.sizes
    return s.H * (s.b * s.b if keep is None else int(keep.sum()))


def _rotate(m: DeviceMachine, names_of) -> None:
    """One ring round: device p sends the blocks ``names_of(p)`` to p + 1 and then drops them
    (it keeps nothing it no longer needs)."""
    P = m.P
    m.exchange([(p, (p + 1) % P, names_of(p), names_of(p)) for p in range(P)])
    for p in range(P):
        for name in names_of(p):
            m.drop(p, name)


def ring_forward(
    Q, K, V, *, P: int, layout="contiguous", scale=None, is_causal=False, enable_gqa=False
):
    """Ring attention's forward pass, run on a :class:`~.devices.DeviceMachine` of P devices.

    Parameters
    ----------
    Q : (n, d) or (H, n, d); K : (n, d) or (H_kv, n, d); V : (n, d_v) or (H_kv, n, d_v)
        (PyTorch's layout for one sequence; batched 4-D input is refused)
    P : devices, P | n (2P | n for ``layout="zigzag"``)
    layout : how the rows are split, one of :data:`~.shards.LAYOUTS`
    scale, is_causal, enable_gqa : as in :func:`attnlib.attention_forward`

    Returns
    -------
    O : (H, n, d_v) (2-D input: (n, d_v)); lse : (H, n) (2-D input: (n,)), equal to
    :func:`attnlib.attention_forward`'s up to rounding; count : the machine's
    :class:`~.devices.DeviceCount`, equal to :func:`ring_forward_count`'s.

    Raises AttnInputError for invalid arguments (naming the argument).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = (rng.standard_normal((2, 8, 4)) for _ in range(3))
    >>> O, lse, count = ring_forward(Q, K, V, P=4, is_causal=True, layout="zigzag")
    >>> count == ring_forward_count(8, 4, P=4, H=2, is_causal=True, layout="zigzag")
    True
    """
    ps = check_pass(
        Q, K, V, P=P, layout=layout, scale=scale, is_causal=is_causal, enable_gqa=enable_gqa,
        who="ring_forward", steps=_steps, scores=_scores,
    )  # fmt: skip
    s = ps.sizes
    m = DeviceMachine(s.P)
    ps.place(m, {"Q": (ps.Q, "Q"), "K{p}": (ps.K, "K"), "V{p}": (ps.V, "V")})
    for step in range(s.P):
        for p in range(s.P):
            j = (p - step) % s.P
            keep = _keep(ps, p, j)
            part = block_forward(m.get(p, "Q"), m.get(p, f"K{j}"), m.get(p, f"V{j}"),
                                 scale=ps.scale, keep=keep)  # fmt: skip
            m.compute(p, _entries(ps, keep))
            if step:  # the online softmax: fold this block into the running result
                part = merge(m.get(p, "O"), m.get(p, "lse"), *part)
            m.put(p, "O", part[0], "O")
            m.put(p, "lse", part[1], "lse")
        if step < s.P - 1:
            _rotate(m, lambda p, step=step: [f"K{(p - step) % s.P}", f"V{(p - step) % s.P}"])
    O = ps.gather(m, "O", (s.H, s.n, s.d_v))
    lse = ps.gather(m, "lse", (s.H, s.n))
    return ps.back(O), ps.back(lse), m.count()


def ring_backward(
    Q, K, V, O, dO, lse, *, P: int, layout="contiguous", scale=None, is_causal=False,
    enable_gqa=False,
):  # fmt: skip
    """Ring attention's backward pass, run on a :class:`~.devices.DeviceMachine` of P devices.

    Parameters
    ----------
    Q, K, V : as in :func:`ring_forward`; O, lse : the forward pass's outputs; dO : like O
    P, layout, scale, is_causal, enable_gqa : as in :func:`ring_forward`

    Returns
    -------
    dQ, dK, dV : shaped like Q, K, V, equal to :func:`attnlib.attention_backward`'s up to
    rounding (dK, dV of a key/value head sum its query heads' contributions); count : the
    machine's :class:`~.devices.DeviceCount`, equal to :func:`ring_backward_count`'s.

    Raises AttnInputError for invalid arguments (naming the argument).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V, dO = (rng.standard_normal((8, 4)) for _ in range(4))
    >>> O, lse, _ = ring_forward(Q, K, V, P=2)
    >>> dQ, dK, dV, count = ring_backward(Q, K, V, O, dO, lse, P=2)
    >>> count == ring_backward_count(8, 4, P=2), dK.shape
    (True, (8, 4))
    """
    ps = check_pass(
        Q, K, V, P=P, layout=layout, scale=scale, is_causal=is_causal, enable_gqa=enable_gqa,
        outputs=(O, dO, lse), who="ring_backward", steps=_steps, scores=_scores,
    )  # fmt: skip
    s = ps.sizes
    O, dO, lse = ps.outputs
    m = DeviceMachine(s.P)
    ps.place(m, {
        "Q": (ps.Q, "Q"), "K{p}": (ps.K, "K"), "V{p}": (ps.V, "V"),
        "O": (O, "O"), "dO": (dO, "dO"), "lse": (lse, "lse"),
    })  # fmt: skip
    for p in range(s.P):  # D = rowsum(dO ∘ O): local, so O never travels
        m.put(p, "D", row_deltas(m.get(p, "O"), m.get(p, "dO")), "D")
    for step in range(s.P):
        for p in range(s.P):
            j = (p - step) % s.P
            keep = _keep(ps, p, j)
            dQ_j, dK_j, dV_j = block_backward(
                m.get(p, "Q"), m.get(p, f"K{j}"), m.get(p, f"V{j}"), m.get(p, "dO"),
                m.get(p, "lse"), m.get(p, "D"), scale=ps.scale, keep=keep,
            )  # fmt: skip
            m.compute(p, _entries(ps, keep))
            if step:  # the accumulators arrived with the block; dQ stays here
                dQ_j = m.get(p, "dQ") + dQ_j
                dK_j = m.get(p, f"dK{j}") + dK_j
                dV_j = m.get(p, f"dV{j}") + dV_j
            m.put(p, "dQ", dQ_j, "dQ")
            m.put(p, f"dK{j}", dK_j, "dK")
            m.put(p, f"dV{j}", dV_j, "dV")
        if step < s.P - 1:
            _rotate(m, lambda p, step=step: [
                f"{x}{(p - step) % s.P}" for x in ("K", "V", "dK", "dV")
            ])  # fmt: skip
    if s.P > 1:  # device p holds shard p + 1's finished gradients: one hop to their owner
        _rotate(m, lambda p: [f"dK{(p + 1) % s.P}", f"dV{(p + 1) % s.P}"])
    dQ = ps.gather(m, "dQ", (s.H, s.n, s.d))
    dK = ps.gather(m, "dK{p}", (s.H_kv, s.n, s.d))
    dV = ps.gather(m, "dV{p}", (s.H_kv, s.n, s.d_v))
    return ps.back(dQ), ps.back(dK), ps.back(dV), m.count()
