"""The graph FlashAttention computes, and its forward schedule as pebble-game moves.

:func:`attention_deferred_graph` is attention's forward pass with the normalisation deferred,
O = (exp(S)V) / l, the order of FlashAttention-2's Algorithm 1 without its running maximum
(the maximum only keeps exp in the float range; in exact arithmetic its factors cancel). Its
row sums and value sums are chains in key order, so a pass over key blocks can accumulate
them. :func:`flash_forward_moves` is FlashAttention's forward schedule on that graph, with
the blocks of :func:`~attnlib.iomodel.flash_forward` at the machine's M, in the move language
of :func:`~attnlib.iomodel.optimal_io`, so that it replays on the machine
(:func:`~attnlib.iomodel.replay_schedule`) and compares with the exact optimum.
"""

from __future__ import annotations

from .._checks import check_choice, check_int
from .blocks import flash_forward_blocks
from .graphs import ComputationGraph, _Builder, _matmul
from .tiling import block_ranges

__all__ = ["attention_deferred_graph", "flash_forward_moves"]


def attention_deferred_graph(n: int, m: int, d: int, *, tree: str = "chain") -> ComputationGraph:
    """O = (exp(QKᵀ)V) / l for Q (n, d), K (m >= 2, d), V (m, d): S = QKᵀ by standard
    matmul (products ``qk(i,t,j)``, sum trees of shape ``tree`` named ``S(i,j)``), E = exp(S),
    row sums ``l(i)`` = Σ_j E_ij and unnormalised outputs ``U(i,t)`` = Σ_j E_ij V_jt
    (products ``ev(i,j,t)``), both chains in key order, and ``O(i,t)`` = U_it / l_i, the
    outputs. It holds the QKᵀ sum trees of every standard-matmul attention graph;
    4nmd + 2md + nd + n(m − 1) vertices.

    Raises AttnInputError on sizes below 1 (m below 2) or an unknown tree.

    Examples
    --------
    >>> attention_deferred_graph(1, 2, 2).n
    27
    """
    n, d = check_int("n", n), check_int("d", d)
    m = check_int("m", m, minimum=2)  # with one key the softmax is the constant 1
    tree = check_choice("tree", tree, ("chain", "balanced"))
    g = _Builder("n, m and d")
    Q, K, V = (  # inputs first, row by row: Q(i,t), then K(j,t), then V(j,t)
        [[g.add(f"{x}({r},{t})", "input") for t in range(d)] for r in range(rows)]
        for x, rows in (("Q", n), ("K", m), ("V", m))
    )
    K_T = [list(col) for col in zip(*K, strict=True)]
    S = _matmul(g, Q, K_T, "S", tree, prod="qk")
    E = [[g.add(f"E({i},{j})", "exp", (S[i][j],)) for j in range(m)] for i in range(n)]
    ell = [g.sum_tree(f"l({i})", E[i], "chain") for i in range(n)]
    U = _matmul(g, E, V, "U", "chain", prod="ev")
    O = [[g.add(f"O({i},{t})", "div", (U[i][t], ell[i])) for t in range(d)] for i in range(n)]
    return g.graph(tuple(o for row in O for o in row))


def flash_forward_moves(n: int, m: int, d: int, M: int, *, tree: str = "chain"):
    """FlashAttention's forward schedule on ``attention_deferred_graph(n, m, d, tree=tree)``
    with M red pebbles, as moves.

    The blocks (B_r, B_c) are :func:`~attnlib.iomodel.flash_forward_blocks` (d, M), those of
    :func:`~attnlib.iomodel.flash_forward`. For each query block I: read Q[I]; for each key
    block J: read K[J] and V[J], and for each (i, j) in I × J compute S_ij (its sum tree in
    post-order), E_ij, the next link of the chains l_i and U_i·, deleting each value once it
    is used (and K_jt, V_jt after their last use in the block); after the last key block
    compute O_i· = U_i· / l_i and write it. Reads n·d + T_r·2m·d (T_r = ⌈n/B_r⌉) and
    writes n·d: the reads of ``flash_forward_count(n, d, M)``, and its writes without the n
    of the log-sum-exp, which this graph does not output. Every value the schedule keeps
    between steps is a word of one of the blocks of W_f(B_r, B_c), plus at most three values
    in flight, so the peak stays within M (checked on replay by the tests).

    Returns
    -------
    (G, moves, (B_r, B_c)).

    Raises AttnInputError on sizes below 1 (m below 2), an unknown tree, or M below
    :func:`~attnlib.iomodel.flash_forward_min_M` (d).
    """
    G = attention_deferred_graph(n, m, d, tree=tree)
    B_r, B_c = flash_forward_blocks(d, check_int("M", M))
    idx = G.index
    moves: list[tuple[str, int]] = []

    def link(chain: str, leaf: str, j: int) -> int:
        # the chain's partial sum over keys 0..j: the leaf itself for j = 0
        if j == 0:
            return idx(leaf)
        return idx(chain if j == m - 1 else f"{chain}[0:{j + 1}]")

    def score(root: int, last_row: bool) -> None:
        # post-order over the sum tree of S_ij; a key word dies after its last row's product
        for u in G.preds[root]:
            if G.ops[u] != "input":
                score(u, last_row)
        moves.append(("compute", root))
        for u in G.preds[root]:
            if G.ops[u] != "input":
                moves.append(("delete", u))
            elif last_row and G.names[u].startswith("K("):
                moves.append(("delete", u))

    for I in block_ranges(n, B_r):
        moves += [("read", idx(f"Q({i},{t})")) for i in range(*I) for t in range(d)]
        for J in block_ranges(m, B_c):
            moves += [
                ("read", idx(f"{X}({j},{t})")) for X in "KV" for j in range(*J) for t in range(d)
            ]
            for i in range(*I):
                last_row = i == I[1] - 1
                for j in range(*J):
                    S, E = idx(f"S({i},{j})"), idx(f"E({i},{j})")
                    score(S, last_row)
                    moves += [("compute", E), ("delete", S)]
                    if j > 0:
                        moves += [("compute", link(f"l({i})", f"E({i},0)", j))]
                        moves += [("delete", link(f"l({i})", f"E({i},0)", j - 1))]
                    for t in range(d):
                        moves.append(("compute", idx(f"ev({i},{j},{t})")))
                        if last_row:
                            moves.append(("delete", idx(f"V({j},{t})")))
                        if j > 0:
                            old = link(f"U({i},{t})", f"ev({i},0,{t})", j - 1)
                            moves += [("compute", link(f"U({i},{t})", "", j)), ("delete", old)]
                            moves.append(("delete", idx(f"ev({i},{j},{t})")))
                    if j > 0:
                        moves.append(("delete", E))
        for i in range(*I):
            moves += [("delete", idx(f"Q({i},{t})")) for t in range(d)]
            for t in range(d):
                O = idx(f"O({i},{t})")
                moves += [
                    ("compute", O),
                    ("write", O),
                    ("delete", O),
                    ("delete", idx(f"U({i},{t})")),
                ]
            moves.append(("delete", idx(f"l({i})")))
    return G, moves, (B_r, B_c)
