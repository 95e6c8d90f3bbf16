"""attnlib.widgets: the exponent slider and the sweep wrapper, and their bad input."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from attnlib import AttnInputError, widgets  # noqa: E402


def test_log2_slider_holds_the_exponent():
    s = widgets.log2_slider("log₂ M", 4, 17, 10)
    assert (s.min, s.max, s.value, s.step) == (4, 17, 10, 1)
    assert s.readout_format == "d" and s.description == "log₂ M"
    assert s.continuous_update is False


@pytest.mark.parametrize(
    "args, match",
    [
        ((3, 4, 17, 10), "description"),
        (("n", -1, 4, 2), "lo"),
        (("n", 5, 4, 4), "hi"),
        (("n", 4, 9, 10), "value"),
        (("n", 4, 9, 5.0), "value"),
    ],
)
def test_log2_slider_rejects_bad_input(args, match):
    with pytest.raises(AttnInputError, match=match):
        widgets.log2_slider(*args)


def test_sweep_widget_redraws_with_the_control_value():
    seen = []

    def draw(k):
        seen.append(k)
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 2**k])
        return fig

    w = widgets.sweep_widget(draw, k=widgets.log2_slider("log₂ n", 1, 3, 2))
    w.children[0].value = 3
    assert seen[-1] == 3
    with pytest.raises(AttnInputError, match="draw"):
        widgets.sweep_widget(None)
