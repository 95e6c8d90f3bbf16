"""DeepSpeed-Ulysses on P devices: trade the split of the sequence for a split of the heads
with an all-to-all, attend locally, and trade back (Jacobs et al. 2023, §3).

Device p starts with its shard of the rows (:func:`~.shards.shard_rows`) in every head. An
all-to-all gives device p all n rows of its hq = H / P query heads, [p hq, (p+1) hq), and of
the key/value heads they read: hk = H_kv / P heads [p hk, (p+1) hk) when P | H_kv, else (when
H_kv | P) hk = 1 head, (p hq) // g, held by the P / H_kv devices that share it. Each device then
runs exact attention on whole sequences and a second all-to-all returns every row to its
shard. P must divide H. Per device, with b = n / P and one message to each other device per
all-to-all::

    forward:  sent = received = (P − 1) b [hq d + hk (d + d_v) + hq (d_v + 1)]
    backward: sent = received = (P − 1) b [hq (2d + d_v + 2) + 2 hk (d + d_v)]
    messages = 2 (P − 1)

The forward pass sends Q, K, V in and O, lse out; the backward pass computes
D = rowsum(dO ∘ O) before its all-to-all (so O never travels) and sends Q, dO, lse, D, K, V
in, and dQ and the dK, dV partials out (the owner of a row sums the partials of the devices
that share a key/value head, in device order). Work is hq n² per device, or hq n (n + 1) / 2
causally, whatever the layout: every device attends whole sequences.
"""

from __future__ import annotations

import numpy as np

from .._checks import AttnInputError, check_int
from ..blockwise import block_backward, block_forward, causal_keep, row_deltas
from .devices import DeviceCount, DeviceMachine
from .shards import check_pass, check_sizes

__all__ = [
    "ulysses_heads",
    "ulysses_forward",
    "ulysses_backward",
    "ulysses_forward_count",
    "ulysses_backward_count",
]


def ulysses_heads(H: int, H_kv: int, P: int) -> tuple[int, int]:
    """Ulysses' split of the heads among P devices: (hq, hk), the query heads and key/value
    heads per device. Device p holds query heads [p hq, (p+1) hq) and, if P | H_kv, key/value
    heads [p hk, (p+1) hk); if instead H_kv | P, the one key/value head (p hq) // g that its
    query heads use (replicated on P / H_kv devices). Refuses (naming ``P``) any other P, and
    H, H_kv, P that are not ints >= 1 with H_kv | H.

    Examples
    --------
    >>> ulysses_heads(8, 2, 4)  # two query heads per device, sharing one key/value head
    (2, 1)
    """
    H, H_kv, P = check_int("H", H), check_int("H_kv", H_kv), check_int("P", P)
    if H % H_kv:
        raise AttnInputError(f"H = {H} query heads must be a multiple of H_kv = {H_kv}")
    if H % P:
        raise AttnInputError(
            f"Ulysses splits the H = {H} query heads among P = {P} devices; P must divide H; "
            "use ring or the 2-D grid"
        )
    if H_kv % P == 0:
        return H // P, H_kv // P
    if P % H_kv == 0:  # fewer key/value heads than devices: each is replicated
        return H // P, 1
    raise AttnInputError(
        f"Ulysses gives each of the P = {P} devices the key/value heads of its query heads; "
        f"with H_kv = {H_kv} key/value heads P must divide H_kv or H_kv must divide P; use "
        "ring or the 2-D grid"
    )


def _heads(H: int, H_kv: int, P: int) -> tuple[int, int, list[slice], list[slice]]:
    """(hq, hk, the query heads of each device, the key/value heads of each device)."""
    hq, hk = ulysses_heads(H, H_kv, P)
    g = H // H_kv
    if H_kv % P == 0:
        kv = [slice(p * hk, (p + 1) * hk) for p in range(P)]
    else:
        kv = [slice(p * hq // g, p * hq // g + 1) for p in range(P)]
    return hq, hk, [slice(p * hq, (p + 1) * hq) for p in range(P)], kv


def _steps(s) -> int:
    """Block steps on the machine (blocks evaluated, over all devices)."""
    return s.P


def _scores(s) -> int:
    """Score entries of the largest block one device evaluates at once (all its heads)."""
    return (s.H // s.P) * s.n * s.n


def _full(P: int, value: int) -> np.ndarray:
    return np.full(P, value, dtype=np.int64)


def _work(s, hq: int) -> np.ndarray:
    pairs = s.n * (s.n + 1) // 2 if s.is_causal else s.n * s.n
    return _full(s.P, hq * pairs)


def _count(s, hq: int, kinds: dict) -> DeviceCount:
    """Both all-to-alls: every device sends each kind's words per destination to P − 1."""
    kinds = {k: _full(s.P, (s.P - 1) * s.b * w) for k, w in kinds.items()}
    words = sum(int(v[0]) for v in kinds.values())
    return DeviceCount(
        _full(s.P, words), _full(s.P, words), _full(s.P, 2 * (s.P - 1)), _work(s, hq), kinds
    )


def ulysses_forward_count(
    n: int, d: int, *, P: int, H: int = 1, H_kv=None, d_v=None, is_causal=False,
    layout="contiguous",
) -> DeviceCount:  # fmt: skip
    """The closed form of :func:`ulysses_forward`'s count (module docstring).

    Parameters
    ----------
    n, d, P, H, H_kv, d_v, is_causal, layout : as in :func:`~.ring.ring_forward_count`;
        P must divide H, and P | H_kv or H_kv | P

    Raises AttnInputError for invalid arguments (naming ``P`` when Ulysses cannot split the
    heads).

    Examples
    --------
    >>> c = ulysses_forward_count(8, 2, P=2, H=2)
    >>> c.sent.tolist(), c.messages.tolist(), c.work.tolist()
    ([36, 36], [2, 2], [64, 64])
    """
    s = check_sizes(n, d, P=P, H=H, H_kv=H_kv, d_v=d_v, is_causal=is_causal, layout=layout)
    hq, hk, *_ = _heads(s.H, s.H_kv, s.P)
    kinds = {"Q": hq * s.d, "K": hk * s.d, "V": hk * s.d_v, "O": hq * s.d_v, "lse": hq}
    return _count(s, hq, kinds)


def ulysses_backward_count(
    n: int, d: int, *, P: int, H: int = 1, H_kv=None, d_v=None, is_causal=False,
    layout="contiguous",
) -> DeviceCount:  # fmt: skip
    """The closed form of :func:`ulysses_backward`'s count (module docstring).

    Arguments and errors as :func:`ulysses_forward_count`.

    Examples
    --------
    >>> ulysses_backward_count(8, 2, P=2, H=2).sent.tolist()
    [64, 64]
    """
    s = check_sizes(n, d, P=P, H=H, H_kv=H_kv, d_v=d_v, is_causal=is_causal, layout=layout)
    hq, hk, *_ = _heads(s.H, s.H_kv, s.P)
    kinds = {
        "Q": hq * s.d, "dO": hq * s.d_v, "lse": hq, "D": hq, "K": hk * s.d, "V": hk * s.d_v,
        "dQ": hq * s.d, "dK": hk * s.d, "dV": hk * s.d_v,
    }  # fmt: skip
    return _count(s, hq, kinds)


def _all_to_all(m: DeviceMachine, ps, pieces: dict, heads_of: dict) -> None:
    """The all-to-all in: device p cuts, for each device q, the rows it holds of q's heads
    (``heads_of[name][q]``) out of its blocks and sends them to q in one message; q keeps
    them as ``name<p``. ``pieces`` maps a block name to its kind."""
    P = m.P
    for p in range(P):
        for q in range(P):
            for name, kind in pieces.items():
                piece = m.get(p, name)[heads_of[name][q]]
                m.put(p, f"{name}>{q}" if q != p else f"{name}<{p}", piece, kind)
    _exchange_staged(m, list(pieces))


def _exchange_staged(m: DeviceMachine, names) -> None:
    """One round of an all-to-all: every device p sends each other device q the pieces it
    staged for q (``name>q``), which q keeps as ``name<p``; the staged copies are dropped."""
    P = m.P
    m.exchange([
        (p, q, [f"{x}>{q}" for x in names], [f"{x}<{p}" for x in names])
        for p in range(P) for q in range(P) if q != p
    ])  # fmt: skip
    for p in range(P):
        for q in range(P):
            if q != p:
                for name in names:
                    m.drop(p, f"{name}>{q}")


def _sequence(m: DeviceMachine, ps, q: int, name: str) -> np.ndarray:
    """Device q's pieces ``name<p`` from every device p, rows put in global order: all n rows
    of q's heads. The pieces are dropped."""
    first = m.get(q, f"{name}<0")
    out = np.empty((first.shape[0], ps.sizes.n, *first.shape[2:]), first.dtype)
    for p, r in enumerate(ps.rows):
        out[:, r] = m.get(q, f"{name}<{p}")
        m.drop(q, f"{name}<{p}")
    return out


def _all_to_all_out(m: DeviceMachine, ps, results: dict) -> None:
    """The all-to-all out: device q sends to each device p the rows ``rows[p]`` of its results
    (name -> kind), which p keeps as ``name<q``."""
    P = m.P
    for q in range(P):
        for p, r in enumerate(ps.rows):
            for name, kind in results.items():
                m.put(q, f"{name}>{p}" if p != q else f"{name}<{q}", m.get(q, name)[:, r], kind)
        for name in results:
            m.drop(q, name)
    _exchange_staged(m, list(results))


def ulysses_forward(
    Q, K, V, *, P: int, layout="contiguous", scale=None, is_causal=False, enable_gqa=False
):
    """DeepSpeed-Ulysses's forward pass, run on a :class:`~.devices.DeviceMachine`.

    Parameters
    ----------
    Q, K, V, P, layout, scale, is_causal, enable_gqa : as in :func:`~.ring.ring_forward`;
        ``layout`` is the split of the rows the pass starts from and returns to. P must
        divide H, and P | H_kv or H_kv | P.

    Returns
    -------
    O, lse, count : as in :func:`~.ring.ring_forward`; count equals
    :func:`ulysses_forward_count`'s.

    Raises AttnInputError for invalid arguments (naming ``P`` when Ulysses cannot split the
    heads).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = (rng.standard_normal((2, 8, 4)) for _ in range(3))
    >>> O, lse, count = ulysses_forward(Q, K, V, P=2)
    >>> count == ulysses_forward_count(8, 4, P=2, H=2)
    True
    """
    ps = check_pass(
        Q, K, V, P=P, layout=layout, scale=scale, is_causal=is_causal, enable_gqa=enable_gqa,
        who="ulysses_forward", steps=_steps, scores=_scores,
    )  # fmt: skip
    s = ps.sizes
    _, _, q_heads, kv_heads = _heads(s.H, s.H_kv, s.P)
    m = DeviceMachine(s.P)
    ps.place(m, {"Q": (ps.Q, "Q"), "K": (ps.K, "K"), "V": (ps.V, "V")})
    heads_of = {"Q": q_heads, "K": kv_heads, "V": kv_heads}
    _all_to_all(m, ps, {"Q": "Q", "K": "K", "V": "V"}, heads_of)
    full = np.arange(s.n)
    keep = causal_keep(full, full) if s.is_causal else None
    for q in range(s.P):
        Qh, Kh, Vh = (_sequence(m, ps, q, x) for x in ("Q", "K", "V"))
        O_h, lse_h = block_forward(Qh, Kh, Vh, scale=ps.scale, keep=keep)
        m.compute(q, Qh.shape[0] * (s.n * s.n if keep is None else int(keep.sum())))
        m.put(q, "O", O_h, "O")
        m.put(q, "lse", lse_h, "lse")
    _all_to_all_out(m, ps, {"O": "O", "lse": "lse"})
    O = np.empty((s.H, s.n, s.d_v), ps.Q.dtype)
    lse = np.empty((s.H, s.n), ps.Q.dtype)
    for p, r in enumerate(ps.rows):  # device p's rows, head block by head block
        for q in range(s.P):
            O[q_heads[q], r] = m.get(p, f"O<{q}")
            lse[q_heads[q], r] = m.get(p, f"lse<{q}")
    return ps.back(O), ps.back(lse), m.count()


def ulysses_backward(
    Q, K, V, O, dO, lse, *, P: int, layout="contiguous", scale=None, is_causal=False,
    enable_gqa=False,
):  # fmt: skip
    """DeepSpeed-Ulysses's backward pass, run on a :class:`~.devices.DeviceMachine`.

    Parameters
    ----------
    Q, K, V, O, dO, lse, P, layout, scale, is_causal, enable_gqa : as in
        :func:`~.ring.ring_backward` and :func:`ulysses_forward`

    Returns
    -------
    dQ, dK, dV, count : as in :func:`~.ring.ring_backward`; count equals
    :func:`ulysses_backward_count`'s.

    Raises AttnInputError for invalid arguments (naming ``P`` when Ulysses cannot split the
    heads).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V, dO = (rng.standard_normal((2, 8, 4)) for _ in range(4))
    >>> O, lse, _ = ulysses_forward(Q, K, V, P=2)
    >>> ulysses_backward(Q, K, V, O, dO, lse, P=2)[3] == ulysses_backward_count(8, 4, P=2, H=2)
    True
    """
    ps = check_pass(
        Q, K, V, P=P, layout=layout, scale=scale, is_causal=is_causal, enable_gqa=enable_gqa,
        outputs=(O, dO, lse), who="ulysses_backward", steps=_steps, scores=_scores,
    )  # fmt: skip
    s = ps.sizes
    _, _, q_heads, kv_heads = _heads(s.H, s.H_kv, s.P)
    O, dO, lse = ps.outputs
    m = DeviceMachine(s.P)
    ps.place(m, {
        "Q": (ps.Q, "Q"), "K": (ps.K, "K"), "V": (ps.V, "V"),
        "O": (O, "O"), "dO": (dO, "dO"), "lse": (lse, "lse"),
    })  # fmt: skip
    for p in range(s.P):  # D = rowsum(dO ∘ O) before the all-to-all: O never travels
        m.put(p, "D", row_deltas(m.get(p, "O"), m.get(p, "dO")), "D")
    pieces = {"Q": "Q", "dO": "dO", "lse": "lse", "D": "D", "K": "K", "V": "V"}
    heads_of = {x: q_heads for x in ("Q", "dO", "lse", "D")} | {"K": kv_heads, "V": kv_heads}
    _all_to_all(m, ps, pieces, heads_of)
    full = np.arange(s.n)
    keep = causal_keep(full, full) if s.is_causal else None
    for q in range(s.P):
        Qh, dOh, lse_h, Dh, Kh, Vh = (_sequence(m, ps, q, x) for x in pieces)
        dQ_h, dK_h, dV_h = block_backward(Qh, Kh, Vh, dOh, lse_h, Dh, scale=ps.scale, keep=keep)
        m.compute(q, Qh.shape[0] * (s.n * s.n if keep is None else int(keep.sum())))
        m.put(q, "dQ", dQ_h, "dQ")
        m.put(q, "dK", dK_h, "dK")
        m.put(q, "dV", dV_h, "dV")
    _all_to_all_out(m, ps, {"dQ": "dQ", "dK": "dK", "dV": "dV"})
    dtype = ps.Q.dtype
    dQ = np.empty((s.H, s.n, s.d), dtype)
    for p, r in enumerate(ps.rows):
        # device p sums, in device order, the partials of the devices that share a head
        dK_p = np.zeros((s.H_kv, s.b, s.d), dtype)
        dV_p = np.zeros((s.H_kv, s.b, s.d_v), dtype)
        for q in range(s.P):
            dQ[q_heads[q], r] = m.get(p, f"dQ<{q}")
            dK_p[kv_heads[q]] += m.get(p, f"dK<{q}")
            dV_p[kv_heads[q]] += m.get(p, f"dV<{q}")
        m.put(p, "dK", dK_p, "dK")
        m.put(p, "dV", dV_p, "dV")
    dK = ps.gather(m, "dK", (s.H_kv, s.n, s.d))
    dV = ps.gather(m, "dV", (s.H_kv, s.n, s.d_v))
    return ps.back(dQ), ps.back(dK), ps.back(dV), m.count()
