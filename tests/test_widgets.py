"""attnlib.widgets: live figures (frames, HTML view, validation), the exponent slider and
the sweep wrapper, and their bad input."""

import base64
import io
import itertools
import json
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

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


# live_figure: every frame precomputed into a self-contained HTML view.


def draw_line(k, scale=1.0):
    """A figure that differs at every k (a module-level function, so it can be imported)."""
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1], [0, scale * k])
    ax.set_ylim(0, 4)
    ax.set_title(f"k = {k}")
    return fig


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
    assert f'data-draw="{__name__}:draw_line"' in html and 'data-live-figure="test-line"' in html
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
        f"live figure 'test-line': 3 frames of {__name__}:draw_line over k ∈ {{one, two, four}};"
        " shown at k = two"
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
    assert isinstance(fig.interactive(), widgets.W.interactive)


def test_grid_labels_are_human():
    assert widgets.grid_slider("B", [0.1 + 0.2, 1e-6], 1e-6).labels == ("0.3", "1e-06")


def test_draw_spec_round_trips_and_refuses_what_cannot_be_imported():
    assert widgets.draw_spec(draw_line) == f"{__name__}:draw_line"
    assert widgets.resolve_draw(f"{__name__}:draw_line") is draw_line

    def nested(k):
        return draw_line(k)

    for bad in (None, lambda k: draw_line(k), nested):
        with pytest.raises(AttnInputError, match="draw"):
            widgets.live_figure(bad, name="x", alt="x", k=widgets.grid_slider("k", [1], 1))
    with pytest.raises(AttnInputError, match="cannot be imported"):
        widgets.resolve_draw("attnlib.plots:no_such_builder")


@pytest.mark.parametrize(
    "args, match",
    [
        (("k", [], 1), "empty"),
        (("k", [1, 2], 3), "not in its values"),
        (("k", [1, 1], 1), "distinct"),
        (("", [1], 1), "description"),
        (("k", [1, 2], 1, ["one"]), "labels"),
        (("k", 5, 5), "values"),
    ],
)
def test_grid_slider_rejects_bad_input(args, match):
    with pytest.raises(AttnInputError, match=match):
        widgets.grid_slider(*args[:3], labels=args[3] if len(args) > 3 else None)


def test_live_figure_rejects_bad_grids():
    k = widgets.grid_slider("k", [1, 2], 1)
    with pytest.raises(AttnInputError, match="MAX_FRAMES"):
        widgets.live_figure(
            draw_line,
            name="x",
            alt="x",
            k=widgets.grid_slider("k", range(widgets.MAX_FRAMES + 1), 0),
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
    with pytest.raises(AttnInputError, match=r"225 points, more than MAX_FRAMES = 200"):
        widgets.live_figure(draw_line, name="x", alt="x", k=k, j=j)


def test_control_values_are_the_scalars_the_page_stores():
    c = widgets.grid_slider("k", np.arange(3), np.int64(1))
    assert c.values == (0, 1, 2) and all(type(v) is int for v in c.values)
    assert c.value == 1 and type(c.value) is int and c.index == 1
    assert widgets.choice("m", ("a", "b"), np.str_("b")).index == 1
    for values, value, match in [
        ([1, 1.0], 1, r"^values of 'k' must be distinct \(1, 1\.0 and True are equal\)"),
        ([True, 1], 1, r"^values of 'k' must be distinct"),
        ([np.array([1, 2])], 1, r"^values\[0\] must be a string, a bool, an int or a finite"),
        ([float("nan"), 1.0], 1.0, r"^values\[0\] must be"),
        ([(1, 2)], (1, 2), r"^values\[0\] must be"),
        ("abc", "a", r"^values must be a list"),
        (np.array(1.0), 1.0, r"^values must be a list"),
        ([1, 2], np.array([1]), r"^value must be"),
    ]:
        with pytest.raises(AttnInputError, match=match):
            widgets.grid_slider("k", values, value)
    with pytest.raises(AttnInputError, match=r"^labels must be a list"):
        widgets.grid_slider("k", [1, 2, 3], 1, labels="abc")


def test_choice_names_its_options_and_grid_control_checks_itself():
    with pytest.raises(AttnInputError, match=r"^options of 'm' must not be empty"):
        widgets.choice("m", [], "a")
    with pytest.raises(AttnInputError, match=r"is not in its options$"):
        widgets.choice("m", ["a"], "b")
    with pytest.raises(AttnInputError, match=r"^value 5 of 'k' is not in its values$"):
        widgets.GridControl("k", (1, 2), 5, ("1", "2"), "range")
    with pytest.raises(AttnInputError, match=r"^kind must be 'range' or 'select'"):
        widgets.GridControl("k", (1, 2), 1, ("1", "2"), "slider")
    with pytest.raises(AttnInputError, match=r"^values\[0\] must be a Python scalar"):
        widgets.GridControl("k", (np.int64(1),), 1, ("1",), "range")


def test_render_frame_checks_its_arguments_before_drawing():
    point = {"k": 2}
    for kw, match in [
        ({"dpi": 0}, r"^dpi must be an integer >= 1"),
        ({"colors": 1}, r"^colors must be an integer >= 2"),
        ({"colors": 257}, r"^colors must be an integer <= 256"),
        ({"dpi": 10**5}, r"^render_frame would need .*; dpi is too large$"),
    ]:
        with pytest.raises(AttnInputError, match=match):
            widgets.render_frame(draw_line, point, **kw)
    with pytest.raises(AttnInputError, match=r"^point must be a dict of keyword arguments"):
        widgets.render_frame(draw_line, [2])
    with pytest.raises(AttnInputError, match=r"^draw must be callable"):
        widgets.render_frame(None, point)
    with pytest.raises(AttnInputError, match=r"^draw must return a matplotlib Figure, got int"):
        widgets.render_frame(lambda k: k, point)
    assert plt.get_fignums() == []  # a refused frame leaves no figure open
    png = widgets.render_frame(draw_line, point, dpi=20, colors=2)
    assert Image.open(io.BytesIO(png)).mode == "P"


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
    assert widgets.log2_slider("k", 0, widgets.MAX_EXPONENT, 3).max == 1023
    with pytest.raises(AttnInputError, match=r"^hi must be an integer <= 1023, got ~10\^400$"):
        widgets.log2_slider("k", 0, 10**400, 3)
    for spec in (None, ".x:y", "no_such_module:f", 3):
        with pytest.raises(AttnInputError, match=r"^spec "):
            widgets.resolve_draw(spec)
