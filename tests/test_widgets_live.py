"""Figures the reader can move (attnlib.widgets.live): every frame of a live figure precomputed
into a self-contained HTML view (one distinct frame per grid point, the default frame first,
the controls and their readouts), deterministic text for nbval, its bad grids and values
refused; and the kernel twins: the exponent slider and the sweep widget."""

import base64
import io
import itertools
import json
import re

import ipywidgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
from helpers import draw_line
from PIL import Image

from attnlib import AttnInputError, widgets
from attnlib.widgets import controls
from attnlib.widgets import live as live_module


def test_log2_slider_holds_the_exponent():
    s = live_module._log2_slider("log₂ M", 4, 17, 10)
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
        live_module._log2_slider(*args)


def test_sweep_widget_redraws_with_the_control_value():
    seen = []

    def draw(k):
        seen.append(k)
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 2**k])
        return fig

    w = live_module._sweep_widget(draw, k=live_module._log2_slider("log₂ n", 1, 3, 2))
    w.children[0].value = 3
    assert seen[-1] == 3
    with pytest.raises(AttnInputError, match="draw"):
        live_module._sweep_widget(None)


def _frames(html: str) -> dict:
    data = re.search(
        r'<script type="application/json" class="live-figure-data">(.*?)</script>', html
    )
    return json.loads(data.group(1))


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


@pytest.fixture(scope="module")
def live():
    return widgets.live_figure(
        draw_line,
        name="test-line",
        alt="A line of slope k",
        fixed={"scale": 0.5},
        k=widgets.grid_slider("k", [1, 2, 4], 2, labels=["one", "two", "four"]),
    )


def test_live_figure_html_holds_one_distinct_frame_per_grid_point(live):
    html = live._repr_html_()
    data = _frames(html)
    assert [f["point"] for f in data["frames"]] == [{"scale": 0.5, "k": k} for k in (1, 2, 4)]
    pngs = [
        base64.b64decode(f["src"].removeprefix("data:image/png;base64,")) for f in data["frames"]
    ]
    assert len({p for p in pngs}) == 3
    assert all(
        not np.array_equal(_pixels(a), _pixels(b)) for a, b in itertools.combinations(pngs, 2)
    )
    assert (
        f'data-draw="{draw_line.__module__}:draw_line"' in html
        and 'data-live-figure="test-line"' in html
    )
    # No ipywidgets in the view: a range input with its label, readout and human value.
    assert 'type="range"' in html and 'aria-valuetext="k = two"' in html
    assert "<output" in html and 'aria-label="k"' in html and "widget-view" not in html
    assert data["frames"][2]["alt"] == "A line of slope k, for k = four"


def test_live_figure_starts_at_the_default_frame_drawn_by_draw(live):
    html = live._repr_html_()
    start = re.search(r'<img src="data:image/png;base64,([^"]+)" alt="([^"]+)"', html)
    shown = _pixels(base64.b64decode(start.group(1)))
    assert np.array_equal(shown, _pixels(widgets.render_frame(draw_line, {"k": 2, "scale": 0.5})))
    assert not np.array_equal(
        shown, _pixels(widgets.render_frame(draw_line, {"k": 1, "scale": 0.5}))
    )
    assert start.group(2) == "A line of slope k, for k = two"
    assert live.default == {"scale": 0.5, "k": 2} and live.default_index == 1


def test_live_figure_output_is_html_and_deterministic_text(live):
    bundle = live._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/plain"] == (
        f"live figure 'test-line': 3 frames of {draw_line.__module__}:draw_line"
        " over k ∈ {one, two, four}; shown at k = two"
    )


def test_live_figure_select_control_and_its_frame_order():
    fig = widgets.live_figure(
        draw_line,
        name="test-select",
        alt="A line",
        k=widgets.grid_slider("k", [1, 2], 1),
        scale=widgets.choice("scale", [0.5, 1.0], 1.0, labels=["half", "full"]),
    )
    html = fig._repr_html_()
    assert '<select id="live-figure-test-select-scale"' in html and "selected>full<" in html
    # Row-major over the controls, in the order given: the page script relies on it.
    assert fig.points == [
        {"k": 1, "scale": 0.5},
        {"k": 1, "scale": 1.0},
        {"k": 2, "scale": 0.5},
        {"k": 2, "scale": 1.0},
    ]
    assert fig.default_index == 1
    assert isinstance(fig.interactive(), ipywidgets.interactive)


def test_live_figure_rejects_bad_grids():
    k = widgets.grid_slider("k", [1, 2], 1)
    with pytest.raises(AttnInputError, match=r"^values must have at most 200 values, got 201$"):
        widgets.live_figure(
            draw_line,
            name="x",
            alt="x",
            k=widgets.grid_slider("k", range(controls._MAX_FRAMES + 1), 0),
        )
    with pytest.raises(AttnInputError, match="at least one control"):
        widgets.live_figure(draw_line, name="x", alt="x")
    with pytest.raises(AttnInputError, match="both fixed and controls"):
        widgets.live_figure(draw_line, name="x", alt="x", fixed={"k": 1}, k=k)
    with pytest.raises(AttnInputError, match="grid_slider or a choice"):
        widgets.live_figure(draw_line, name="x", alt="x", k=[1, 2])
    with pytest.raises(AttnInputError, match="name"):
        widgets.live_figure(draw_line, name="Bad Name", alt="x", k=k)
    with pytest.raises(AttnInputError, match="alt"):
        widgets.live_figure(draw_line, name="x", alt=" ", k=k)


def test_a_grid_too_large_together_is_refused_by_live_figure():
    k = widgets.grid_slider("k", range(15), 0)
    j = widgets.grid_slider("j", range(15), 0)
    with pytest.raises(AttnInputError, match=r"225 points, more than the 200 frames a page holds"):
        widgets.live_figure(draw_line, name="x", alt="x", k=k, j=j)


def test_live_figure_keeps_only_what_the_page_can_store():
    k = widgets.grid_slider("k", [1, 2], 1)
    with pytest.raises(AttnInputError, match=r"^fixed\['scale'\] must be a value JSON stores"):
        widgets.live_figure(draw_line, name="x", alt="x", fixed={"scale": np.int64(2)}, k=k)
    with pytest.raises(AttnInputError, match=r"^fixed\['scale'\] must be a value JSON stores"):
        widgets.live_figure(draw_line, name="x", alt="x", fixed={"scale": float("nan")}, k=k)
    with pytest.raises(AttnInputError, match=r"^fixed must be a dict of keywords"):
        widgets.live_figure(draw_line, name="x", alt="x", fixed=[("scale", 2)], k=k)
    with pytest.raises(AttnInputError, match=r"^fixed must have keyword names as keys"):
        widgets.live_figure(draw_line, name="x", alt="x", fixed={"not a name": 2}, k=k)


def test_alt_text_takes_a_frame_index():
    fig = widgets.live_figure(draw_line, name="x", alt="a line", k=widgets.grid_slider("k", [1], 1))
    assert fig.alt_text(0) == "a line, for k = 1"
    for bad in (-1, 1, 0.0, True):
        with pytest.raises(AttnInputError, match=r"^index must be an integer"):
            fig.alt_text(bad)


def test_exponent_sliders_stay_in_the_float_range_and_specs_are_named():
    assert live_module._log2_slider("k", 0, live_module._MAX_EXPONENT, 3).max == 1023
    with pytest.raises(AttnInputError, match=r"^hi must be an integer <= 1023, got ~10\^400$"):
        live_module._log2_slider("k", 0, 10**400, 3)
    for spec in (None, ".x:y", "no_such_module:f", 3):
        with pytest.raises(AttnInputError, match=r"^spec "):
            widgets.resolve_draw(spec)
