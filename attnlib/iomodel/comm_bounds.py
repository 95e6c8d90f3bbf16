"""How many words of Q and K a device must receive: a certified lower bound for attention on P
devices, and the closed forms of its regimes.

**The game.** P devices; n tokens, head dimension d, H query heads in H_kv key/value groups
of g = H / H_kv (query head h uses key head h // g), P | n and b = n / P. Initially each
device holds, in every query head, some b rows of Q, and in every key head some b rows of K
(which rows does not matter). A kept score entry s_hij = q_hi · k_(h//g)j (all n² per head,
or the n (n + 1) / 2 with j <= i under ``is_causal``) is evaluated whole on one device, which
holds the rows q_hi and k_(h//g)j then (d words each); a device holds a row it did not start
with only after receiving its d words. Every kept entry is evaluated somewhere. The *work*
of a device is the number of distinct entries it evaluates. Splitting a dot product over d,
or sending anything but rows of Q and K in their place, is outside the game; every schedule
of :mod:`.ring`, :mod:`.ulysses` and :mod:`.grid` plays it, and their ``received_by_kind``
counts the words of Q and K each device receives.

**The bound** (thm-11-comm, proved in Chapter 11). In one group, a device evaluating S
entries from x rows of Q (of the group's g heads) and y rows of K has S <= x·y (Loomis and
Whitney in two dimensions), and it holds g·b and b of them: it receives at least

    f(S) = min { (x − g b)⁺ + (y − b)⁺ : x·y >= S, x <= g n, y <= n }

rows. With x = max(g b, √S) for S <= n² and x = max(g b, S / n) above, y = S / x:

    f(S) = 0                          for S <= g b²
         = S / (g b) − b               up to min((g b)², g b n)
         = 2 √S − (g + 1) b            up to n²                  (only when g < P)
         = S / n + n − (g + 1) b        up to the group's g n².

A device with work S receives at least d·⌈L(S)⌉ words, with L(S) the least of Σ f(S_γ) over
the splits S = Σ S_γ of its work among the H_kv groups, each S_γ at most the group's entries
(``cap``: g n², or g n (n + 1) / 2 causal). For g >= P, f is convex on [0, cap] (slopes 0,
1 / (g b), 1 / n, increasing) and the equal split is optimal: L(S) = H_kv f(S / H_kv). For
g < P, f is 0 up to t = g b² and concave above it: two groups strictly between t and cap can
trade work until one reaches t or cap without raising the sum, so some optimal split has k
full groups, at most one between, and the rest at most t (free). :func:`device_comm_lower_bound`
enumerates k exactly, with rational arithmetic and square roots rounded down. The busiest
device has work at least ⌈W / P⌉, W the kept entries of all heads, and L does not decrease.

**What it leaves out.** The bound counts Q and K only: not V (which travels with K in every
schedule here), nor the outputs, nor the partial (m, ℓ, O) that a split of the keys must
merge. It bounds each device alone: it ignores that the devices' rows partition the sequence
and that the devices together must evaluate every entry. Causal masks enter only through
S <= x·y: a device that evaluates a head's whole triangle needs all n rows of Q and of K, and
the bound charges it 2√(n (n + 1) / 2) − 2b.

:func:`busiest_comm_lower_bound` is the real-valued d·L(H n² / P) of a dense pass by the
closed forms of its three regimes (:func:`comm_regime`), before the rows are rounded up.
"""

from __future__ import annotations

import math
from fractions import Fraction

from .._checks import AttnInputError, check_bool, check_head_counts, check_int

__all__ = ["device_comm_lower_bound", "busiest_comm_lower_bound", "comm_regime"]

#: Bits of precision of the square roots, rounded down (so every value stays a lower bound).
_SQRT_BITS = 64


def _sqrt_down(x: Fraction) -> Fraction:
    """A rational at most √x, exact when x is the square of a rational with a small enough
    denominator (x = p / q: √(p q) / q with √ rounded down on 2^-64 steps)."""
    p, q = x.numerator, x.denominator
    return Fraction(math.isqrt((p * q) << (2 * _SQRT_BITS)), q << _SQRT_BITS)


class _Game:
    """The validated sizes of one game: b, g, the free work t = g b² of a group, its cap."""

    def __init__(self, n: int, P: int, H: int, H_kv: int, is_causal: bool):
        self.n, self.P, self.H, self.H_kv = n, P, H, H_kv
        self.b, self.g = n // P, H // H_kv
        self.t = self.g * self.b * self.b
        self.cap = self.g * (n * (n + 1) // 2 if is_causal else n * n)
        self.total = self.H_kv * self.cap

    def rows(self, S) -> Fraction:
        """f(S) of the module docstring, rounded down: the rows of one group's Q and K that a
        device evaluating S entries of the group receives at least."""
        n, b, g = self.n, self.b, self.g
        S = Fraction(S)
        if S <= self.t:
            return Fraction(0)
        if S <= n * n and S > (g * b) ** 2:  # x = y = √S
            return 2 * _sqrt_down(S) - (g + 1) * b
        x = max(Fraction(g * b), S / n)  # Q rows held, or K rows all there
        return x + S / x - (g + 1) * b

    def least_rows(self, S: int) -> Fraction:
        """L(S) of the module docstring (square roots rounded down)."""
        H_kv, t, cap = self.H_kv, self.t, self.cap
        if self.g >= self.P:  # f convex on [0, cap]: the equal split
            return H_kv * self.rows(Fraction(S, H_kv))
        full = self.rows(cap)
        best = None
        for k in range(min(H_kv, S // cap) + 1):  # k full groups
            rest = S - k * cap
            if k == H_kv:
                value = k * full  # rest == 0 here: k * cap <= S <= H_kv * cap
            else:  # the other H_kv - k - 1 groups take up to t each, free
                partial = max(0, rest - (H_kv - k - 1) * t)
                if partial > cap:
                    continue
                value = k * full + self.rows(partial)
            best = value if best is None or value < best else best
        return best


def _check(n, d, P, H, H_kv, is_causal) -> tuple[int, _Game]:
    n, d, P = check_int("n", n), check_int("d", d), check_int("P", P)
    H, H_kv, _ = check_head_counts(H, H if H_kv is None else H_kv, True)
    if n % P:
        raise AttnInputError(
            f"P = {P} devices must divide the n = {n} rows (each holds n / P of them)"
        )
    return d, _Game(n, P, H, H_kv, check_bool("is_causal", is_causal))


def _float_down(words: int) -> float:
    """The largest float at most ``words`` (exact below 2^53)."""
    value = float(words)
    return math.nextafter(value, 0.0) if value > words else value


def device_comm_lower_bound(
    n: int, d: int, *, P: int, H: int = 1, H_kv: int | None = None, is_causal: bool = False,
    work: int | None = None,
) -> float:  # fmt: skip
    """Certified lower bound on the words of Q and K rows that a device receives in the game
    of the module docstring (thm-11-comm, proved in Chapter 11): d·⌈L(S)⌉, where S = ``work``
    is the distinct score entries the device evaluates, summed over the H query heads, or,
    with ``work=None``, S = ⌈W / P⌉ with W = H n² (H n (n + 1) / 2 under ``is_causal``): the
    least work of the busiest device, so the bound holds for the busiest device.

    One group, g = 1 (b = n / P): 2d(√S − b) words for b² <= S <= n². Dense and balanced,
    H = H_kv = 1: 2d(√P − 1) n / P, which a √P × √P grid of devices receives exactly. The
    value is an int (as a float, the largest at most the int beyond 2^53).

    Raises AttnInputError for sizes below 1, P not dividing n, H not a multiple of H_kv,
    ``is_causal`` not a bool, or ``work`` not an int in [0, W].

    Examples
    --------
    >>> device_comm_lower_bound(64, 8, P=4)  # 2·8·(√4 − 1)·64/4: a 2 × 2 grid is optimal
    256.0
    >>> # 2 heads' work: one whole (96 rows), 2560 entries of another (2√2560 − 32 rows) and the
    >>> # 16 × 16 blocks it holds in the other 6, free: 8·⌈165.2⌉ (Ulysses receives 1536)
    >>> device_comm_lower_bound(64, 8, P=4, H=8, H_kv=8)
    1328.0
    >>> device_comm_lower_bound(64, 8, P=4, H=8, H_kv=1)  # g >= P: all K rows, d·(n − b)
    384.0
    >>> device_comm_lower_bound(64, 8, P=4, work=16 * 16)  # its own block: nothing
    0.0
    """
    d, game = _check(n, d, P, H, H_kv, is_causal)
    if work is None:
        S = -(-game.total // game.P)
    else:
        S = check_int("work", work, minimum=0, maximum=game.total)
    return _float_down(d * math.ceil(game.least_rows(S)))


def comm_regime(P: int, H: int = 1, H_kv: int | None = None) -> str:
    """Which closed form of :func:`busiest_comm_lower_bound` applies to a dense pass with
    balanced work (prop-11-regimes, proved in Chapter 11), with g = H / H_kv:

    * ``"grouped"`` (g >= P): the bound is every K row, d·H_kv·(n − b); ring attention
      receives exactly these words of Q and K;
    * ``"heads"`` (P < H_kv, g < P): a device's work exceeds one group's; for P | H_kv Ulysses
      is within (P + 1) / P of the bound;
    * ``"blocks"`` (P >= H_kv, g < P): the work fits within one group; d·b·(2√(g u) − g − 1)
      with u = H_kv (P − 1) + 1 (when g u <= P²); a √P × √P grid meets it for H = 1.

    Raises AttnInputError for sizes below 1 or H not a multiple of H_kv.

    Examples
    --------
    >>> comm_regime(4, 32, 32), comm_regime(64, 32, 32), comm_regime(4, 32, 4)
    ('heads', 'blocks', 'grouped')
    """
    P = check_int("P", P)
    H, H_kv, g = check_head_counts(H, H if H_kv is None else H_kv, True)
    if g >= P:
        return "grouped"
    return "heads" if P < H_kv else "blocks"


def busiest_comm_lower_bound(
    n: int, d: int, *, P: int, H: int = 1, H_kv: int | None = None
) -> float:
    """The real-valued bound d·L(H n² / P) of the busiest device of a dense pass, by the closed
    form of its regime (prop-11-regimes, proved in Chapter 11; :func:`comm_regime`), with
    b = n / P, g = H / H_kv:

    * ``"grouped"``: d·H_kv·(n − b);
    * ``"blocks"``, u = H_kv (P − 1) + 1: d·b·(2√(g u) − g − 1) if g u <= P², else
      d·b·(g u / P + P − g − 1);
    * ``"heads"``: the least of k·f(g n²) + f(A − k g (n² − b²)) over k in {k_lo, k_t}
      (A = H n² / P − (H_kv − 1) g b², k_lo the fewest full groups that leave at most one
      group's entries, k_t the most that leave at least g b²) and (k_t + 1)·f(g n²). With
      P | H_kv it lies between d (H + H_kv) n (P − 1) / (P (P + 1)) and Ulysses's
      d (H + H_kv) n (P − 1) / P².

    A lower bound (before rounding rows up: :func:`device_comm_lower_bound` with ``work=None``
    is d·⌈this / d⌉). A float. Raises AttnInputError for sizes below 1, P not dividing n, or
    H not a multiple of H_kv.

    Examples
    --------
    >>> busiest_comm_lower_bound(1024, 1, P=16)  # 2(√16 − 1)·1024/16
    384.0
    """
    d, game = _check(n, d, P, H, H_kv, False)
    b, g, H_kv = game.b, game.g, game.H_kv
    regime = comm_regime(P, H, H_kv)
    if regime == "grouped":
        return float(d * H_kv * (n - b))
    if regime == "blocks":
        u = H_kv * (P - 1) + 1
        if g * u <= P * P:
            return d * b * (2 * math.sqrt(g * u) - g - 1)
        return d * b * (g * u / P + P - g - 1)

    def f(S: float) -> float:
        if S <= game.t:
            return 0.0
        if (g * b) ** 2 < S <= n * n:
            return 2 * math.sqrt(S) - (g + 1) * b
        x = max(g * b, S / n)
        return x + S / x - (g + 1) * b

    A = H * n * n // P - (H_kv - 1) * game.t  # the partial group's work with no full group
    step = game.cap - game.t  # each full group takes cap, of which t was free anyway
    k_lo = max(0, -(-(A - game.cap) // step))
    k_t = (A - game.t) // step
    candidates = [k * f(game.cap) + f(A - k * step) for k in {k_lo, k_t} if k_lo <= k <= k_t]
    if k_t + 1 <= H_kv and (k_t + 1) * game.cap <= H * n * n // P:
        candidates.append((k_t + 1) * f(game.cap))
    return d * min(candidates)
