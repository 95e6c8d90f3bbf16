"""The certified communication bound (attnlib.iomodel.comm_bounds) against its adversaries.

A lower bound fails by being too high somewhere, so every check here holds it against
something that must lie at or above it: the Loomis–Whitney inequality on every subset of a
grid; the exact optimum of the game on tiny instances, found by exhaustive search; brute force
over every split of the work among the key/value groups; and every schedule of
attnlib.iomodel (ring, Ulysses, the 2-D grid), simulated with real arrays and by its closed
form, on hypothesis' draws and on structured families. A bound that is too low is caught where
it is known to be tight: there the search and the schedules must meet it exactly.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib.iomodel import comm_bounds as cb
from attnlib.iomodel import grid as gr
from attnlib.iomodel import ring as rg
from attnlib.iomodel import ulysses as ul
from attnlib.iomodel.shards import LAYOUTS, shard_rows

bound = cb.device_comm_lower_bound


# ---- (a) Loomis–Whitney in two dimensions, on every subset ---------------------------------


@pytest.mark.parametrize("side", [3, 4])
def test_loomis_whitney_on_every_subset_of_a_grid(side):
    """|S| <= |I| |J| for every set S of pairs with projections I and J, hence
    |I| + |J| >= 2 √|S|; equality exactly for full squares (which exist)."""
    cells = side * side
    masks = np.arange(2**cells, dtype=np.int64)
    sets = (((masks[:, None] >> np.arange(cells)) & 1).astype(bool)).reshape(-1, side, side)
    S = sets.sum(axis=(1, 2))
    I = sets.any(axis=2).sum(axis=1)  # rows with an element
    J = sets.any(axis=1).sum(axis=1)  # columns with an element
    assert np.all(S <= I * J)
    assert np.all((I + J) ** 2 >= 4 * S)
    equal = (I + J) ** 2 == 4 * S
    assert np.array_equal(equal, (S == I * J) & (I == J))
    assert equal[S == side * side].all() and equal.sum() > side  # full squares of each side


# ---- (b) the game's exact optimum on tiny instances ----------------------------------------


def _kept(n, is_causal):
    keep = np.ones((n, n), dtype=bool)
    return np.tril(keep) if is_causal else keep


def _choices(n, H, H_kv, is_causal, held):
    """Every set of rows a device holding ``held`` (its shard in every head) could receive:
    returns (cost in rows, work it can evaluate, covered entries as a bool (choices, entries))
    over every extra set of Q rows (pairs (h, i)) and K rows (pairs (γ, j))."""
    g = H // H_kv
    keep = _kept(n, is_causal)
    q_free = [(h, i) for h in range(H) for i in range(n) if i not in held]
    k_free = [(c, j) for c in range(H_kv) for j in range(n) if j not in held]

    def holdings(free, heads, mask_bits):
        A = np.zeros((mask_bits.shape[0], heads, n), dtype=bool)
        A[:, :, held] = True
        for bit, (h, i) in enumerate(free):
            A[:, h, i] |= mask_bits[:, bit].astype(bool)
        return A

    qm = (np.arange(2 ** len(q_free))[:, None] >> np.arange(len(q_free))) & 1
    km = (np.arange(2 ** len(k_free))[:, None] >> np.arange(len(k_free))) & 1
    A, B = holdings(q_free, H, qm), holdings(k_free, H_kv, km)
    hs, iis, jjs = np.nonzero(np.broadcast_to(keep, (H, n, n)))
    cover = A[:, None, hs, iis] & B[None, :, hs // g, jjs]  # (NQ, NK, entries)
    cost = qm.sum(1)[:, None] + km.sum(1)[None, :]
    cover = cover.reshape(-1, hs.size)
    return cost.reshape(-1), cover.sum(1), cover


def _least_rows_for_work(cost, work):
    """least[S] = the fewest rows a device receives to evaluate at least S entries."""
    least = np.full(work.max() + 1, np.iinfo(np.int64).max)
    np.minimum.at(least, work, cost)
    return np.minimum.accumulate(least[::-1])[::-1]


def _game_optimum(tables, entries):
    """min over ways to cover every kept entry of max over devices of rows received: the
    least c such that choices of cost <= c on each device cover all entries together."""
    full = (1 << entries) - 1
    bitsets = [
        [int("".join("1" if x else "0" for x in row[::-1]) or "0", 2) for row in cover]
        for _, _, cover in tables
    ]
    for c in range(max(int(cost.max()) for cost, _, _ in tables) + 1):
        options = []
        for (cost, _, _), bits in zip(tables, bitsets, strict=True):
            sets = {b for b, k in zip(bits, cost, strict=True) if k <= c}
            options.append([s for s in sets if not any(s != t and s | t == t for t in sets)])

        def covers(p, acc, options=options):
            if p == len(options):
                return acc == full
            return any(covers(p + 1, acc | s) for s in options[p])

        if covers(0, 0):
            return c
    raise AssertionError("the devices together never cover the entries")


GAMES = [
    (n, P, H, H_kv, is_causal, layout)
    for n, P, heads in [
        (4, 2, [(1, 1), (2, 1), (2, 2)]),
        (6, 2, [(1, 1)]),
        (3, 3, [(1, 1)]),
        (4, 4, [(1, 1)]),
        (6, 3, [(1, 1)]),
    ]  # fmt: skip
    for H, H_kv in heads
    for is_causal in (False, True)
    for layout in LAYOUTS
    if layout != "zigzag" or n % (2 * P) == 0
]


@pytest.mark.parametrize(("n", "P", "H", "H_kv", "is_causal", "layout"), GAMES)
def test_game_optimum_is_at_least_the_bound(n, P, H, H_kv, is_causal, layout):
    """Exhaustive: the least, over all ways of covering the kept entries, of the most rows a
    device receives is at least the busiest-device bound; and for every device and every work
    S, the fewest rows that let it evaluate S entries are at least the bound at work S."""
    d = 3
    tables = [_choices(n, H, H_kv, is_causal, list(rows)) for rows in shard_rows(n, P, layout)]
    for cost, work, _ in tables:
        least = _least_rows_for_work(cost, work)
        for S, rows in enumerate(least):
            kwargs = dict(P=P, H=H, H_kv=H_kv, is_causal=is_causal, work=S)
            assert d * rows >= bound(n, d, **kwargs), (S, rows)
            if H == 1 and not is_causal and math.isqrt(S) ** 2 == S and S >= (n // P) ** 2:
                # a square block around the held rows: the bound is met exactly
                assert d * rows == bound(n, d, **kwargs), (S, rows)
    entries = tables[0][2].shape[1]
    optimum = _game_optimum(tables, entries)
    busiest = bound(n, d, P=P, H=H, H_kv=H_kv, is_causal=is_causal)
    assert d * optimum >= busiest
    if (n, P, H, is_causal) == (4, 4, 1, False):  # a 2 × 2 grid: 2 rows a device, the bound
        assert d * optimum == busiest == 2 * d


# ---- (c) the split of the work among the groups ---------------------------------------------


def _int_rows(n, m, g, S):
    """The fewest rows with integer counts: min (a − g m) + (b − m), a b >= S."""
    return min(
        (a - g * m) + (b - m)
        for a in range(g * m, g * n + 1)
        for b in range(m, n + 1)
        if a * b >= S
    )


ONE_GROUP = [(4, 2, 1), (4, 2, 2), (4, 2, 3), (6, 2, 1), (6, 3, 2), (6, 3, 4), (8, 4, 2), (8, 2, 5),
             (8, 8, 1)]  # fmt: skip


@pytest.mark.parametrize(("n", "P", "g"), ONE_GROUP)
def test_one_group_against_integer_rows(n, P, g):
    """One group (H_kv = 1, H = g): the real minimum f(S) is at most the integer minimum and
    within 2 of it (rounding a and b up costs less than a row each); so the bound d ⌈f(S)⌉
    lies between d (integer − 1) and d · integer."""
    m = n // P
    for S in range(g * n * n + 1):
        f = cb._Game(n, P, g, 1, False).rows(S)
        exact = _int_rows(n, m, g, S)
        assert f <= exact < f + 2, (S, f, exact)
        words = bound(n, 1, P=P, H=g, H_kv=1, work=S)
        assert exact - 1 <= words <= exact


def _splits(S, parts, cap):
    if parts == 1:
        if S <= cap:
            yield (S,)
        return
    for first in range(min(S, cap) + 1):
        for rest in _splits(S - first, parts - 1, cap):
            yield (first, *rest)


@pytest.mark.parametrize(
    ("n", "P", "H", "H_kv", "is_causal"),
    [(4, 2, 2, 2, False), (4, 2, 3, 3, False), (4, 4, 3, 3, False), (6, 3, 3, 3, True),
     (4, 2, 4, 2, False), (6, 3, 4, 2, True), (4, 4, 6, 3, False), (4, 2, 6, 2, False),
     (6, 2, 6, 3, True), (8, 4, 3, 3, True)],
)  # fmt: skip
def test_least_split_against_every_integer_split(n, P, H, H_kv, is_causal):
    """L(S) is the least of Σ f(S_γ) over every integer split of S among the groups when f is
    concave above g m² (g < P: the minimiser is an integer split) and at most it when f is
    convex (g >= P: the equal split, exact when H_kv divides S)."""
    game = cb._Game(n, P, H, H_kv, is_causal)
    for S in range(game.total + 1):
        brute = min(sum(game.rows(s) for s in split) for split in _splits(S, H_kv, game.cap))
        least = game.least_rows(S)
        assert least <= brute, (S, least, brute)
        if game.g < P or S % H_kv == 0:
            assert brute - least < Fraction(1, 2**50), (S, least, brute)


def test_convex_case_equal_split_beats_the_concave_enumeration():
    """g >= P: the enumeration of the concave case would be wrong (too high): the equal split
    costs less than k full groups. The module must use the equal split there."""
    game = cb._Game(8, 2, 4, 2, False)  # g = 2 = P
    S = game.total // 2
    assert game.least_rows(S) == 2 * game.rows(Fraction(S, 2))
    game = cb._Game(8, 2, 6, 2, False)  # g = 3 > P: f strictly convex at g m n
    S = game.cap  # one group's worth: as one full group it costs f(cap) > 2 f(cap / 2)
    assert game.least_rows(S) == 2 * game.rows(Fraction(S, 2)) < game.rows(S)


# ---- (d) every schedule, simulated and closed form ------------------------------------------


def _q_and_k(count):
    kinds = count.received_by_kind
    zero = np.zeros(count.P, dtype=np.int64)
    return kinds.get("Q", zero) + kinds.get("K", zero)


def _assert_above(count, n, d, P, H, H_kv, is_causal):
    received = _q_and_k(count)
    for p in range(P):
        kwargs = dict(P=P, H=H, H_kv=H_kv, is_causal=is_causal, work=int(count.work[p]))
        assert received[p] >= bound(n, d, **kwargs), (p, received[p], count.work[p])
    busiest = bound(n, d, P=P, H=H, H_kv=H_kv, is_causal=is_causal)
    assert received.max() >= busiest


def _schedules(P, H, H_kv):
    """(name, keywords) of every schedule that accepts these sizes."""
    out = [("ring", {})]
    if H % P == 0 and (H_kv % P == 0 or P % H_kv == 0):
        out.append(("ulysses", {}))
    for R in range(1, P + 1):
        if P % R == 0:
            out.append(("grid", {"grid": (R, P // R)}))
    return out


MODULES = {"ring": rg, "ulysses": ul, "grid": gr}


def _counts(name, n, d, *, P, H, H_kv, d_v, is_causal, layout, kw):
    module = MODULES[name]
    sizes = dict(P=P, H=H, H_kv=H_kv, d_v=d_v, is_causal=is_causal, layout=layout, **kw)
    return [getattr(module, f"{name}_{p}_count")(n, d, **sizes) for p in ("forward", "backward")]


def _simulate(name, n, d, *, P, H, H_kv, d_v, is_causal, layout, kw, seed):
    module = MODULES[name]
    rng = np.random.default_rng(seed)
    Q, K = rng.standard_normal((H, n, d)), rng.standard_normal((H_kv, n, d))
    V = rng.standard_normal((H_kv, n, d_v))
    common = dict(P=P, layout=layout, is_causal=is_causal, enable_gqa=H != H_kv, **kw)
    O, lse, fwd = getattr(module, f"{name}_forward")(Q, K, V, **common)
    dO = rng.standard_normal(O.shape)
    *_, bwd = getattr(module, f"{name}_backward")(Q, K, V, O, dO, lse, **common)
    return [fwd, bwd]


@st.composite
def _sizes(draw, max_b):
    P = draw(st.integers(1, 8))
    layout = draw(st.sampled_from(LAYOUTS))
    b = draw(st.integers(1, max_b)) * (2 if layout == "zigzag" else 1)
    H_kv = draw(st.integers(1, 4))
    H = H_kv * draw(st.integers(1, 4))
    return dict(
        n=P * b, d=draw(st.integers(1, 5)), P=P, H=H, H_kv=H_kv, d_v=draw(st.integers(1, 3)),
        is_causal=draw(st.booleans()), layout=layout,
    )  # fmt: skip


@settings(max_examples=80)
@given(s=_sizes(max_b=40))
def test_every_closed_form_count_is_above_the_bound(s):
    n, d = s.pop("n"), s.pop("d")
    for name, kw in _schedules(s["P"], s["H"], s["H_kv"]):
        for count in _counts(name, n, d, kw=kw, **s):
            _assert_above(count, n, d, s["P"], s["H"], s["H_kv"], s["is_causal"])


@settings(max_examples=25)
@given(s=_sizes(max_b=3), seed=st.integers(0, 2**16))
def test_every_simulated_schedule_is_above_the_bound(s, seed):
    n, d = s.pop("n"), s.pop("d")
    for name, kw in _schedules(s["P"], s["H"], s["H_kv"]):
        for count in _simulate(name, n, d, kw=kw, seed=seed, **s):
            _assert_above(count, n, d, s["P"], s["H"], s["H_kv"], s["is_causal"])


STRUCTURED = [
    # every P from 1 to 8 with one head, causal and not, every layout
    *[(4 * P, P, 1, 1, c, lay) for P in range(1, 9) for c in (False, True) for lay in LAYOUTS],
    # P = n (one row a device), H_kv = 1 (multi-query) and H_kv = H, P > H_kv
    (4, 4, 1, 1, True, "striped"), (6, 6, 2, 2, False, "contiguous"),
    (8, 4, 4, 1, True, "zigzag"), (8, 4, 4, 4, False, "striped"),
    (16, 8, 2, 1, True, "contiguous"), (12, 6, 6, 3, True, "zigzag"),
    (8, 8, 8, 8, False, "contiguous"), (16, 2, 8, 2, True, "zigzag"),
]  # fmt: skip


@pytest.mark.parametrize(("n", "P", "H", "H_kv", "is_causal", "layout"), STRUCTURED)
def test_structured_families_are_above_the_bound(n, P, H, H_kv, is_causal, layout):
    """Every schedule, every grid shape (non-square ones too), simulated and in closed form."""
    sizes = dict(P=P, H=H, H_kv=H_kv, d_v=2, is_causal=is_causal, layout=layout)
    for name, kw in _schedules(P, H, H_kv):
        counts = _counts(name, n, 3, kw=kw, **sizes)
        simulated = _simulate(name, n, 3, kw=kw, seed=n * P, **sizes)
        assert counts == simulated  # the twins agree, so the property covers both
        for count in counts:
            _assert_above(count, n, 3, P, H, H_kv, is_causal)


# ---- (e) the regimes: which schedule meets the bound -----------------------------------------


def _fwd_rows(name, n, P, H, H_kv, **kw):
    count = getattr(MODULES[name], f"{name}_forward_count")(n, 1, P=P, H=H, H_kv=H_kv, **kw)
    return int(_q_and_k(count).max())


def test_busiest_closed_forms_equal_the_enumeration():
    """busiest_comm_lower_bound's closed forms (three regimes) equal the exact enumeration of
    the split before rounding rows up: d ⌈closed / d⌉ is device_comm_lower_bound."""
    for n, P, H, H_kv in itertools.product((24, 120), (1, 2, 3, 4, 6, 8, 12), (1, 2, 4, 6, 12, 24),
                                           (1, 2, 3, 4, 6, 12, 24)):  # fmt: skip
        if H % H_kv or n % P:
            continue
        closed = cb.busiest_comm_lower_bound(n, 1, P=P, H=H, H_kv=H_kv)
        exact = cb._Game(n, P, H, H_kv, False).least_rows(H * n * n // P)
        assert math.isclose(closed, exact, rel_tol=1e-12, abs_tol=1e-9), (P, H, H_kv)
        assert bound(n, 1, P=P, H=H, H_kv=H_kv) == math.ceil(exact)


def test_one_head_grid_meets_the_bound_and_ring_is_sqrt_p_over_two_above():
    """H = 1, dense: a √P × √P grid receives exactly the bound, 2(√P − 1) n / P rows; ring
    receives (P − 1) n / P, exactly (√P + 1) / 2 times the real bound for every P > 1, so
    ring / bound grows like √P / 2 (the limit of the ratio over √P is 1/2)."""
    for s in range(1, 13):
        P, n = s * s, 2 * s * s * 7
        assert _fwd_rows("grid", n, P, 1, 1) == bound(n, 1, P=P) == 2 * (s - 1) * n // P
    for P in range(2, 65):
        n = 64 * P
        real = cb.busiest_comm_lower_bound(n, 1, P=P)
        assert math.isclose(_fwd_rows("ring", n, P, 1, 1) / real, (math.sqrt(P) + 1) / 2)
    assert math.isclose(_fwd_rows("ring", 10**6, 10**4, 1, 1) / bound(10**6, 1, P=10**4), 50.5)


def test_non_square_grids_stay_within_their_aspect():
    """An R × C grid receives (R + C − 2) n / P rows: (R + C − 2) / (2√(R C) − 2) times the
    bound (>= 1 by AM–GM, equal only for R = C): a constant for a bounded aspect ratio."""
    for R, C in [(1, 2), (2, 3), (2, 8), (3, 4), (4, 4), (4, 16)]:
        P, n = R * C, 48 * R * C
        rows = _fwd_rows("grid", n, P, 1, 1, grid=(R, C))
        assert rows == (R + C - 2) * n // P
        ratio = rows / cb.busiest_comm_lower_bound(n, 1, P=P)
        assert math.isclose(ratio, (R + C - 2) / (2 * math.sqrt(R * C) - 2))
        assert (ratio == pytest.approx(1.0)) == (R == C) and ratio >= 1 - 1e-12


def test_ulysses_within_one_plus_one_over_p_when_p_divides_the_kv_heads():
    """P | H_kv and g < P: Ulysses receives (H + H_kv) n (P − 1) / P² rows, at most (P + 1) / P
    times the bound (the chord of the concave group cost); the bound is at least the chord."""
    for H_kv, g, P in itertools.product((2, 4, 8, 16, 32), (1, 2, 4), (2, 4, 8, 16, 32)):
        if H_kv % P or g >= P:
            continue
        n, H = 64 * P, g * H_kv
        rows = _fwd_rows("ulysses", n, P, H, H_kv)
        assert rows == (H + H_kv) * n * (P - 1) // P**2
        real = cb.busiest_comm_lower_bound(n, 1, P=P, H=H, H_kv=H_kv)
        chord = (H + H_kv) * n * (P - 1) / (P * (P + 1))
        assert chord <= real * (1 + 1e-12) and rows <= real * (P + 1) / P * (1 + 1e-12)


def test_grouped_regime_ring_meets_the_bound_exactly():
    """g >= P: the bound is every K row, H_kv (n − m), and ring receives exactly that."""
    for H_kv, g, P in itertools.product((1, 2, 8), (2, 4, 8), (1, 2, 4, 8)):
        if g < P:
            continue
        n, H = 16 * P, g * H_kv
        assert cb.comm_regime(P, H, H_kv) == "grouped"
        expected = H_kv * (n - n // P)
        assert _fwd_rows("ring", n, P, H, H_kv) == bound(n, 1, P=P, H=H, H_kv=H_kv) == expected


def test_many_heads_blocks_regime_grid_loses_sqrt_h():
    """P >= H = H_kv (g = 1): the bound lets a device spend its work in one head, 2(√(H (P − 1)
    + 1) − 1) n / P rows, while the all-heads √P × √P grid receives 2H(√P − 1) n / P: their
    ratio tends to √H as P grows (checked against the exact limit along P = 4^k)."""
    H = 16
    ratios = []
    for k in range(2, 12):
        P, n = 4**k, 4**k * 8
        rows = _fwd_rows("grid", n, P, H, H)
        ratios.append(rows / cb.busiest_comm_lower_bound(n, 1, P=P, H=H, H_kv=H))
    assert all(a < b for a, b in zip(ratios, ratios[1:], strict=False))  # increasing to √H
    assert ratios[-1] < math.sqrt(H) and math.sqrt(H) - ratios[-1] < 0.02


def test_beyond_two_to_the_53_the_float_never_exceeds_the_int():
    """Above 2^53 a float cannot hold every int: the bound returns the largest float at most
    the exact int (a float rounded to nearest could land above it and stop being a bound)."""
    for n, d, P in [(2**50, 2**10 + 1, 2), (3 * 2**48, 999, 3), (2**40, 2**20 - 1, 4)]:
        game = cb._Game(n, P, 1, 1, False)
        exact = d * math.ceil(game.least_rows(-(-game.total // P)))
        value = bound(n, d, P=P)
        assert exact > 2**53 and value <= exact and exact - value <= 2 ** (exact.bit_length() - 52)
