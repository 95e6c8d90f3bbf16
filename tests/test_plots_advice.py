"""Chapter 9's figures of the decision (attnlib.plots.advice): the decision map and the costs
of every method, labelled with a takeaway, the live figure's bars inside its axes over the
chapter's range, and bad input refused by name."""

import matplotlib.pyplot as plt
import pytest
from helpers import assert_axes_labelled_with_italic_takeaway

from attnlib import AttnInputError, plots
from attnlib.advice import METHODS, advise
from attnlib.advice_maps import decision_map

NS, BS = [64, 2**20], [0.05, 2.0]


def _map():
    return {32: decision_map(NS, BS, d=32, eps=1e-3, M=2**16)}


VALID = {
    "decision_map": lambda: plots.decision_map_figure(
        NS, BS, _map(), methods=METHODS, eps=1e-3, M=2**16, title="t", band=(1.0, 3.0)
    ),
    "method_costs": lambda: plots.method_costs_figure(advise(2**14, 64, 0.3, 1e-3, 2**16)),
    "method_costs_at": lambda: plots.method_costs_at(14, 64, 0.3, "H100 SM, float32", 3),
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_every_builder_draws_labelled_axes_and_a_takeaway(name):
    assert_axes_labelled_with_italic_takeaway(VALID[name]())


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: plots.decision_map_figure(NS, BS[:1], _map(), methods=METHODS, eps=1e-3, M=8),
            r"maps\[32\]",
        ),
        (
            lambda: plots.decision_map_figure(NS, [-1.0, 2.0], _map(), methods=METHODS, eps=1, M=8),
            "Bs",
        ),
        (lambda: plots.method_costs_figure("flash"), "advice"),
        (
            lambda: plots.method_costs_figure(advise(64, 8, 1.0, 1e-3, 1024), machine=3),
            "machine",
        ),
    ],
)
def test_builders_refuse_bad_input(call, match):
    with pytest.raises(AttnInputError, match=match):
        call()


def test_method_costs_at_keeps_each_method_inside_the_axes_over_chapter_9s_range():
    """Chapter 9's live figure, on a grid wider than its own (n = 2^8 ... 2^22, B = 0.05 ...
    3, both machines): each method keeps its tick, a feasible method has its bar (the
    polynomial one included), and an infeasible one is labelled inside the axes."""
    from attnlib.machines import book_machines

    machines = book_machines()
    seen_infeasible = set()
    for machine in machines:
        for log2_n in range(8, 23, 2):
            for B in (0.05, 0.1, 0.3, 1.0, 3.0):
                fig = plots.method_costs_at(log2_n, 64, B, machine, 3)
                ax = fig.axes[0]
                a = advise(2**log2_n, 64, B, 1e-3, **machines[machine])
                assert [t.get_text() for t in ax.get_xticklabels()] == list(METHODS)
                bars = {round(p.get_x() + p.get_width() / 2) for p in ax.patches}
                feasible = {i for i, c in enumerate(a.costs) if c.feasible}
                assert bars == feasible, (machine, log2_n, B)
                fig.canvas.draw()
                box = ax.get_window_extent()
                labels = [t for t in ax.texts if t.get_text() == "infeasible"]
                assert len(labels) == len(METHODS) - len(feasible)
                for t in labels:
                    r = t.get_window_extent()
                    assert box.x0 <= r.x0 and r.x1 <= box.x1 and box.y0 <= r.y0 and r.y1 <= box.y1
                seen_infeasible |= set(range(len(METHODS))) - feasible
                plt.close(fig)
    assert seen_infeasible  # the grid reaches lengths where some method does not fit
