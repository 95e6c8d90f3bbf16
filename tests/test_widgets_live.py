"""Figures the reader can move (attnlib.widgets.live): every frame of a live figure precomputed
into a self-contained HTML view (one distinct frame per grid point, the default frame first,
the controls and their readouts, each on one line), drawn at twice its CSS size with its
smallest text noted and a phone form when the figure needs one, with a note for an untrusted
notebook that the page's script hides; deterministic text for nbval, its bad grids and values
refused; the book's extension that moves the frames into files; and the kernel twins: the
exponent slider and the sweep widget."""

import base64
import io
import itertools
import json
import re
from html import escape

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
    start = re.search(r'<img src="data:image/png;base64,([^"]+)" [^>]*alt="([^"]+)"', html)
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


def draw_wide(k):
    """Two panels side by side, too wide for a phone: a live figure of it has a phone form."""
    fig, axes = plt.subplots(1, 2, figsize=(8, 2.5))
    for i, ax in enumerate(axes):
        ax.plot([0, 1], [0, k + i])
        ax.set_title(f"panel {i}, k = {k}")
    return fig


def _attributes(tag: str) -> dict:
    return dict(re.findall(r'([\w-]+)="([^"]*)"', tag))


def test_frames_are_2x_rasters_sized_at_1x_with_their_smallest_text(live):
    html = live._repr_html_()
    img = _attributes(re.search(r"<img [^>]*>", html)[0])
    png = live.frames[live.default_index]
    width, height = Image.open(io.BytesIO(png)).size
    assert (int(img["width"]), int(img["height"])) == (round(width / 2), round(height / 2))
    assert float(img["data-text-px"]) == round(live.text_px[live.default_index], 2)
    # the helper's 10 pt title at 200 dpi: 10 / 72 * 200 image pixels
    assert min(live.text_px) == pytest.approx(10 / 72 * 200, rel=0.2)
    assert live.phone_frames is None and "<source" not in html  # a small figure needs none
    for f in _frames(html)["frames"]:
        assert {"width", "height", "text_px"} <= set(f) and "phone" not in f


def test_a_wide_figure_gets_a_phone_form_for_every_frame():
    fig = widgets.live_figure(
        draw_wide, name="test-wide", alt="Two panels", k=widgets.grid_slider("k", [1, 2], 1)
    )
    html = fig._repr_html_()
    assert fig.phone_frames is not None and len(fig.phone_frames) == 2
    source = _attributes(re.search(r"<source [^>]*>", html)[0])
    start = _frames(html)["frames"][0]
    assert source["srcset"] == start["phone"]["src"]
    assert (
        source["media"] == f"(max-width: {live_module.phone_breakpoint(_frames(html)['frames'])}px)"
    )
    assert float(source["data-text-px"]) == start["phone"]["text_px"]
    phone = Image.open(io.BytesIO(fig.phone_frames[0])).size
    wide = Image.open(io.BytesIO(fig.frames[0])).size
    assert phone[0] < wide[0] and phone[1] > wide[1]  # one column, taller
    assert html.index("<source") < html.index("<img")  # the <picture> picks the first match
    png = widgets.render_frame(draw_wide, {"k": 1}, form="phone")
    assert np.array_equal(_pixels(png), _pixels(fig.phone_frames[0]))


def test_phone_breakpoint_is_where_the_wide_frame_text_gets_too_small():
    # 12 CSS px text in a 600 px frame reaches 9 px in a 450 px column (+ 32 px padding)
    assert live_module.phone_breakpoint([{"width": 600, "text_px": 24.0}]) == 482
    # the widest such column over the frames: 4 px text in a 300 px frame needs 675 px
    two = [{"width": 600, "text_px": 24.0}, {"width": 300, "text_px": 8.0}]
    assert live_module.phone_breakpoint(two) == 707
    # text under 9 px even at 1x: the phone form up to the desktop layout, never beyond
    assert live_module.phone_breakpoint([{"width": 900, "text_px": 16.0}]) == 991
    assert live_module.phone_breakpoint([{"width": 600, "text_px": None}]) == 32


def test_each_control_is_one_line_and_the_untrusted_note_is_hidden_by_the_script(live):
    html = live._repr_html_()
    row = re.search(r'<span class="live-figure-control">(.*?)</span>', html)[1]
    assert re.fullmatch(r"<label [^>]*>k</label><input [^>]*><output [^>]*>two</output>", row)
    assert ".live-figure-control{display:flex;flex-wrap:nowrap" in html
    note = f'<p class="live-figure-untrusted">{escape(widgets.UNTRUSTED_NOTE)}</p>'
    assert note in html and html.index(note) < html.index("<picture")
    assert "Trust Notebook in the command palette" in widgets.UNTRUSTED_NOTE
    assert ".live-figure-untrusted').forEach(el => { el.hidden = true; })" in html


def test_render_frame_draws_twice_the_static_dpi_and_refuses_an_unknown_form():
    one = Image.open(io.BytesIO(widgets.render_frame(draw_line, {"k": 1}, dpi=100))).size
    two = Image.open(io.BytesIO(widgets.render_frame(draw_line, {"k": 1}))).size
    assert two[0] == pytest.approx(2 * one[0], abs=2) and two[1] == pytest.approx(2 * one[1], abs=2)
    with pytest.raises(
        AttnInputError, match=r"^form must be one of \('wide', 'phone'\), got 'tall'"
    ):
        widgets.render_frame(draw_line, {"k": 1}, form="tall")
    assert plt.get_fignums() == []


def _book_live():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "book" / "_ext" / "book_live.py"
    spec = importlib.util.spec_from_file_location("book_live", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_book_serves_each_frame_as_a_file_loaded_when_shown(live, tmp_path):
    """book/_ext/book_live.py: every inline frame of a page's live figure becomes a file named
    by its sha256, and the page points at it (the starting frame's <img> and the frame list)."""
    import hashlib

    book_live = _book_live()
    html = live._repr_html_()
    page = f"<html><body><p>data:image/png;base64,AAAA stays</p>{html}</body></html>"
    out, figures, written = book_live.rewrite_page(page, tmp_path, "../_images/")
    assert (figures, written) == (1, 3)  # the starting frame, shown twice, is written once
    assert out.count("data:image/png;base64,") == 1  # only outside the live figure
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == sorted(f"{hashlib.sha256(png).hexdigest()}.png" for png in live.frames)
    start = f"../_images/{hashlib.sha256(live.frames[live.default_index]).hexdigest()}.png"
    assert f'<img src="{start}"' in out
    assert [f["src"] for f in _frames(out)["frames"]] == [
        f"../_images/{hashlib.sha256(png).hexdigest()}.png" for png in live.frames
    ]
    assert book_live.rewrite_page("<p>no figure</p>", tmp_path, "x/") == ("<p>no figure</p>", 0, 0)


def test_the_book_draws_each_draft_once_and_then_reads_it_from_its_cache(live, tmp_path):
    """book/_ext/book_live.py: a draft is drawn at the book's resolution (the bytes of
    render_frame, as the browser check recomputes them) and kept; the next build draws
    nothing, and a changed frame list is drawn again."""
    book_live = _book_live()
    html = live._repr_html_()
    assert sum(f.get("draft", False) for f in _frames(html)["frames"]) == 2
    cache = tmp_path / "cache"
    first = book_live.draw_drafts(html, cache)
    assert len(list(cache.glob("*.png"))) == 2
    assert not any("draft" in f for f in _frames(first)["frames"])

    def no_drawing(*args, **kwargs):
        raise AssertionError("a cached frame was drawn again")

    import attnlib.widgets.frames as frames_module

    original = frames_module._render_spec
    frames_module._render_spec = no_drawing
    try:
        assert book_live.draw_drafts(html, cache) == first
    finally:
        frames_module._render_spec = original
    assert book_live.draw_drafts(first, cache) == first  # nothing left to draw
