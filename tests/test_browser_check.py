"""The browser check's judging (.ci/browser_check): each check on a fixture it must pass and on
one it must fail, with the exact problems it reports.

The fixtures (tests/fixtures/browser_check/) are a tiny built book (site/: one page passing
every check of the HTML on disk, one failing each of them), a build without glossary or
bibliography (bare/), records of what the browser saw on a page (seen_*.json), states of a
live figure, of the navigation and of a search, and PDF text. The last tests run the check's
JavaScript on two fixture pages in Chromium, where it is installed.
"""

import importlib
import importlib.util
import json
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "browser_check"
SITE = FIXTURES / "site"
BARE = FIXTURES / "bare"
PACKAGE = ROOT / ".ci" / "browser_check"


def _load_package():
    """Import .ci/browser_check as the package ``browser_check`` (it is not installed)."""
    if "browser_check" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "browser_check", PACKAGE / "__init__.py", submodule_search_locations=[str(PACKAGE)]
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules["browser_check"] = module
        spec.loader.exec_module(module)
    return {
        name: importlib.import_module(f"browser_check.{name}")
        for name in ("static", "observed", "nav", "live", "pdf", "search", "toggles", "report")
    }


M = _load_package()
static, observed, nav, live = M["static"], M["observed"], M["nav"], M["live"]
pdf, search, toggles, report = M["pdf"], M["search"], M["toggles"], M["report"]


def _page(rel: str):
    path = SITE / rel
    return path, static.parse(path)


def _json(name: str):
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


# The HTML on disk -------------------------------------------------------------------------


def test_page_list_skips_the_asset_folders():
    rels = [p.relative_to(SITE).as_posix() for p in static.page_list(SITE)]
    assert rels == [
        "book/01_good.html",
        "book/02_bad.html",
        "book/bibliography.html",
        "book/glossary.html",
        "book/intro.html",
        "index.html",
    ]


def test_links_pass_on_a_page_whose_links_all_resolve():
    path, soup = _page("book/01_good.html")
    fails, n = static.check_links(path, SITE, soup, static.Ids())
    assert fails == []
    assert n == 8  # the remote link is not counted


def test_links_fail_for_a_missing_file_a_missing_id_and_a_link_outside_the_build():
    path, soup = _page("book/02_bad.html")
    fails, _ = static.check_links(path, SITE, soup, static.Ids())
    assert fails == [
        "a 'missing.html': no file book/missing.html",
        "a '01_good.html#no-such-id': no element with id 'no-such-id' in 01_good.html",
        "a '../../outside.html' points outside the build",
        "a '01_good.html#term-tile': no element with id 'term-tile' in 01_good.html",
        "a 'glossary.html#term-nothing': no element with id 'term-nothing' in glossary.html",
    ]


def test_a_redirect_page_is_only_link_checked():
    path, soup = _page("index.html")
    assert static.redirect_target(soup) == "book/intro.html"
    fails, checks = static.check_static(path, SITE, soup, static.Ids())
    assert (fails, checks) == ([], Counter(links=1))
    assert static.redirect_target(_page("book/intro.html")[1]) is None


def test_figures_pass_when_numbered_per_chapter_and_on_the_preface():
    for rel, n in (("book/01_good.html", 3), ("book/intro.html", 1)):
        assert static.check_figures(rel, SITE, _page(rel)[1]) == ([], n)
    # A page not built from a notebook has no figures to number.
    assert static.check_figures("book/glossary.html", SITE, _page("book/glossary.html")[1]) == (
        [],
        0,
    )


def test_figures_fail_unnumbered_misnumbered_uncaptioned_and_out_of_order():
    fails, n = static.check_figures("book/02_bad.html", SITE, _page("book/02_bad.html")[1])
    assert n == 4
    assert fails == [
        "figure image plot.svg… is not in a <figure> with a numbered caption",
        "figure 'Figure 3.1' is not numbered 'Figure 2.k'",
        "Figure 2.1 has a number but no caption text",
        "figure numbers on this page run [1, 3], not 1, 2, ... (per chapter)",
    ]


def test_glossary_links_pass_when_every_term_points_at_the_glossary():
    for rel in ("book/01_good.html", "book/intro.html"):
        path, soup = _page(rel)
        assert static.check_glossary_links(path, rel, SITE, soup) == ([], 2)


def test_glossary_links_fail_for_unlinked_and_misdirected_terms():
    path, soup = _page("book/02_bad.html")
    fails, n = static.check_glossary_links(path, "book/02_bad.html", SITE, soup)
    assert n == 4
    assert fails == [
        "glossary term 'unknown' is not linked (unknown term?)",
        "term link '01_good.html#term-tile' does not point at a term of the glossary",
        "term link 'glossary.html#term-nothing' does not point at a term of the glossary",
        "the chapter links no glossary term",
    ]


def test_glossary_check_fails_without_a_glossary_page():
    soup = static.parse(BARE / "index.html")
    fails = static.check_glossary_links(BARE / "index.html", "index.html", BARE, soup)
    assert fails == (["no glossary page book/glossary.html"], 1)


def test_a_notebook_page_links_its_notebook_and_every_page_a_favicon():
    good = _page("book/01_good.html")[1]
    bad = _page("book/02_bad.html")[1]
    assert static.check_download("book/01_good.html", SITE, good) == ([], 1)
    assert static.check_download("book/02_bad.html", SITE, bad) == (
        ["no download link to 02_bad.ipynb"],
        1,
    )
    assert static.check_download("book/glossary.html", SITE, good) == ([], 0)
    assert static.check_favicon(good) == ([], 1)
    assert static.check_favicon(bad) == (["no favicon link"], 1)


def test_check_static_counts_each_kind_on_a_chapter():
    path, soup = _page("book/01_good.html")
    fails, checks = static.check_static(path, SITE, soup, static.Ids())
    assert fails == []
    assert checks == Counter(links=8, figures=3, glossary=2, download=1, favicon=1)


def test_bibliography_passes_when_every_entry_is_listed():
    assert static.check_bibliography(SITE, FIXTURES / "refs.bib") == ([], 2)


def test_bibliography_fails_for_an_uncited_entry_and_for_a_book_without_one():
    fails, n = static.check_bibliography(SITE, FIXTURES / "refs_uncited.bib")
    assert (fails, n) == (
        ["NEVER (refs_uncited.bib) is not in the bibliography: cite it somewhere in the book"],
        2,
    )
    assert static.check_bibliography(BARE, FIXTURES / "refs.bib") == (
        ["no page lists a bibliography, but refs.bib has 2 entries"],
        1,
    )


# What the browser saw ---------------------------------------------------------------------


def test_a_clean_record_passes_every_check_and_counts_them():
    seen = observed.Seen.from_json(_json("seen_good.json"))
    fails, checks = observed.check_seen(seen)
    assert fails == []
    assert checks == Counter(
        {
            "page-width": 2,
            "math-clipping": 2,
            "navigation": 2,
            "alt-text": 1,
            "budget": 1,
            "ready-time": 1,
            "raw-math": 1,
            "widget-text": 1,
            "local-requests": 1,
            "console": 1,
            "math": 2,
            "images": 1,
            "widgets": 1,
        }
    )


def test_a_broken_record_fails_every_check_in_order():
    seen = observed.Seen.from_json(_json("seen_bad.json"))
    fails, _ = observed.check_seen(seen)
    mathjax = "file:///site/_static/mathjax/tex-chtml.js (net::ERR_FILE_NOT_FOUND)"
    assert fails == [
        "remote script requested (book must be offline): "
        "https://cdn.example.org/mathjax/tex-chtml.js",
        "MathJax did not start: Timeout 20000ms exceeded.",
        "390px: page is 612px wide, wider than the viewport (table.wide 612px)",
        "390px: display equation clipped: 'eq-1 S = QK^T'",
        "1 images without a real alt text, e.g. _images/0123456789abcdef0123.png",
        "ready after 4.20 s (fastest of 3 cold loads), over the 3 s budget",
        "page loads 4.50 MB, over the 4 MB budget",
        "3 math elements but no MathJax script on the page",
        "math not typeset by MathJax: '\\\\frac{a}{b}'",
        "MathJax TeX error: 'Undefined control sequence \\\\foo'",
        "raw TeX left in the page text: 'the cost is \\\\(n^2\\\\) in'",
        "image did not load (naturalWidth 0): file:///book/_images/gone.png",
        "widget m9 not rendered: no rendered element (no widget state on the page: "
        "execute with store_widget_state=True)",
        "a widget is shown as text (run with store_widget_state=True): "
        "\"IntSlider(value=3, description='n')\"",
        f"local file failed to load: {mathjax} (a vendored file: run `bash .ci/vendor.sh`, "
        "then rebuild)",
        "local file failed to load: file:///site/book/missing.png (net::ERR_FILE_NOT_FOUND)",
        "console error: Uncaught TypeError: x is undefined (at file:///site/_static/book.js)",
        "uncaught exception: ReferenceError: MathJax is not defined",
    ]


def test_remote_requests_fail_only_for_what_the_offline_book_needs(monkeypatch):
    font = ("https://fonts.example.org/a.woff2", "font")
    assert observed.check_remote([("https://example.org/ping", "ping")]) == []
    assert observed.check_remote([font]) == [
        "remote font requested (book must be offline): https://fonts.example.org/a.woff2"
    ]
    monkeypatch.setitem(observed.ALLOWED_REMOTE_HOSTS, "fonts.example.org", "a reason")
    assert observed.check_remote([font]) == []


def test_alt_text_leaves_widget_images_to_the_widget_check():
    alts = _json("seen_good.json")["alts"]
    assert observed.check_alt(alts) == ([], 1, (1, 0, 1))
    trivial = [{"src": "x.png", "alt": alt, "widget": False} for alt in ("", "plot.png", "image")]
    fails, n, tally = observed.check_alt(trivial)
    assert (fails, n, tally) == (["3 images without a real alt text, e.g. x.png"], 3, (3, 3, 0))


def test_budget_passes_at_the_limits_and_fails_just_over():
    assert observed.check_budget(observed.BUDGET_BYTES, observed.BUDGET_SECONDS, 1) == []
    assert len(observed.check_budget(observed.BUDGET_BYTES + 1, 3.01, 2)) == 2


def test_page_weight_counts_each_local_file_once():
    svg = (SITE / "_static" / "plot.svg").resolve()
    url = svg.as_uri()
    assert observed.page_weight([url, url + "?v=2"]) == svg.stat().st_size
    assert observed.page_weight([(SITE / "no-such-file.js").resolve().as_uri()]) == 0


# Navigation, toggles, live figures, search, PDF -------------------------------------------


def test_navigation_states():
    s = _json("nav_states.json")
    expected = set(s["expected"])
    assert nav.hide_problems(1400, s["hidden"]) == []
    assert nav.hide_problems(1400, s["still_shown"]) == [
        "1400px: the navigation button does not hide the sidebar"
    ]
    assert nav.show_problems(1400, s["still_shown"]) == []
    assert nav.show_problems(1400, s["hidden"]) == [
        "1400px: the navigation button does not show the sidebar again"
    ]
    assert nav.open_problems(390, s["drawer_open"]) == []
    assert nav.open_problems(390, s["drawer_closed"]) == [
        "390px: the navigation button does not open the drawer"
    ]
    assert nav.missing_pages(390, s["drawer_open"], expected) == []
    assert nav.missing_pages(1400, s["still_shown"], expected) == [
        "1400px: the navigation lists 2 chapters too few (01_good, 02_bad)"
    ]
    assert nav.click_error(s["click_error"]) == (
        'Locator.click: Timeout 10000ms exceeded.; <div class="bd-header"></div> intercepts '
        "pointer events"
    )


def test_collapsed_outputs():
    where = "book/03.html: collapsed output 2"
    assert toggles.toggle_problems(where, True, False, True) == []
    assert toggles.toggle_problems(where, False, False, False) == [f"{where} has no toggle"]
    assert toggles.toggle_problems(where, True, True, False) == [
        f"{where} is shown before its toggle",
        f"{where} stays hidden when toggled",
    ]


@pytest.fixture
def live_states():
    states = _json("live_states.json")
    frames = {p: live.shown_pixels(uri) for p, uri in states["frames"].items()}
    return states, lambda draw, point, form="wide": frames[point]


def test_a_live_figure_that_is_right_passes(live_states):
    s, frames = live_states
    assert live.check_grid(s["good"], "io") == []
    assert live.check_live_state(s["good"], "io", frames) == []
    assert live.check_live_state(s["moved"], "io after n", frames) == []
    assert live.check_move(s["good"]["controls"][0], s["good"], s["moved"], "io") == []


def test_a_live_figure_that_is_wrong_fails_each_check(live_states):
    s, frames = live_states
    assert live.check_grid(s["bad"], "io") == ["io: 5 frames for a grid of 6 points"]
    assert live.check_live_state(s["bad"], "io", frames) == [
        "io: the image did not load",
        "io: the image is wider than the viewport (612px)",
        "io: the image has no real alt text",
        "io: the note for an untrusted notebook shows",
        "io: control n has no label",
        "io: control n is not visible",
        "io: slider n has no aria-valuetext",
        "io: control n reads '0.30000000000000004'",
        "io: the alt text does not name n = '0.30000000000000004'",
        "io: the readout of n is not on its control's line",
        "io: the alt text does not name kernel = 'flash'",
        'io: the wide frame shown at {"n": 0, "kernel": 0} differs from '
        "attnlib.plots.iomodel:io_frame's",
    ]
    assert live.check_live_state(s["not_inline"], "io", frames) == [
        'io: frame at {"n": 0, "kernel": 0} (wide) not recomputed: the frame is neither an '
        "inline PNG nor a file: ../_images/io.png"
    ]


def test_a_live_figure_is_numbered_sharp_and_hides_its_untrusted_note(live_states):
    s, _ = live_states
    assert live.check_caption(s["good"], "io", None) == []
    assert live.check_sharp(s["good"], "io") == []
    assert live.check_caption(s["good"], "io", 4) == [
        "io: the live figure is not numbered 'Figure 4.k' (got 'Figure 1')"
    ]
    assert live.check_caption(s["bad"], "io", 1) == [
        "io: Figure 1.1 has a number but no caption text"
    ]
    assert live.check_caption({**s["good"], "number": None}, "io", None) == [
        "io: the live figure is not numbered 'Figure k' (got None)"
    ]
    assert live.check_sharp({**s["bad"], "ok": True}, "io") == [
        "io: the frame is 1.00x its shown width (< 1.9x)"
    ]


def test_a_readout_must_stay_on_its_controls_line():
    c = {"id": "n", "box": {"top": 0, "bottom": 20, "left": 10, "right": 200}}
    beside = {"top": 2, "bottom": 18, "left": 208, "right": 250}
    assert live.readout_problems({**c, "readout_box": beside}, "io") == []
    below = {"top": 24, "bottom": 40, "left": 10, "right": 50}
    over = {**beside, "left": 150}
    for box in (below, over):
        assert live.readout_problems({**c, "readout_box": box}, "io") == [
            "io: the readout of n is not on its control's line"
        ]
    assert live.readout_problems({**c, "readout_box": None}, "io") == [
        "io: control n has no readout beside it"
    ]


def test_a_blank_panel_is_found_among_a_live_figures_frames(tmp_path):
    import numpy as np
    from PIL import Image

    drawn = np.full((60, 90, 3), 255, np.uint8)
    drawn[30:32, 10:80] = (31, 119, 180)  # a curve across the axes
    blank = np.full((60, 90, 3), 255, np.uint8)
    blank[5:8, 5:20] = (255, 127, 14)  # a short coloured word, no data
    blank[50, :] = 0  # the x axis, in black
    assert live.blank_frames({"a": drawn}, "io") == []
    assert live.blank_frames({"a": drawn, "b": blank}, "io") == [
        "io: frame b is a blank panel (data ink across 17%)"
    ]
    Image.fromarray(blank).save(tmp_path / "blank.png")  # a frame written out as a file
    assert np.array_equal(live.shown_pixels((tmp_path / "blank.png").as_uri()), blank)


def test_moving_a_live_figure_control_must_change_what_it_shows(live_states):
    s, _ = live_states
    slider = s["good"]["controls"][0]
    assert live.check_move(slider, s["good"], s["stuck"], "io") == ["io: n did not move"]
    assert live.check_move(slider, s["good"], s["unchanged"], "io") == [
        "io: moving n did not change the image",
        "io: moving n left its readout or alt",
        "io: moving n left its aria-valuetext",
    ]


def test_search_snippets():
    s = _json("search.json")
    assert search.check_snippets(s["good"]) == []
    assert search.check_snippets(s["bad"]) == [
        "raw TeX in a search snippet: '... the gradient costs \\\\(n^2\\\\) time ...'",
        'raw TeX in a search snippet: "... AS24\'s gradient \\\\begin{align} dL/dX ..."',
    ]


def test_pdf_text():
    titles = pdf.chapter_titles(SITE, static.page_list(SITE))
    assert "1. A chapter that passes" in titles and "Preface" in titles
    good = (FIXTURES / "pdf_good.txt").read_text(encoding="utf-8")
    bad = (FIXTURES / "pdf_bad.txt").read_text(encoding="utf-8")
    chapters = ["Preface", "1. Attention and its gradient"]
    assert pdf.check_pdf_text(good, chapters) == []
    assert pdf.check_pdf_text(bad, chapters) == [
        "chapter '1. Attention and its gradient' is not in the PDF",
        "raw TeX in the PDF: ' Preface \\x0cPreface The cost is \\\\frac{n}{2} words. \\x0c'",
    ]
    # Five raw TeX snippets at the most, however many there are.
    assert len(pdf.check_pdf_text("$$ x $$ " * 9, [])) == 5


def test_pdf_missing_from_the_site_or_no_pdftotext(tmp_path, monkeypatch):
    assert pdf.check_pdf(SITE, []) == (
        [f"{pdf.PDF_NAME} is missing from the site (`make pdf` builds it)"],
        1,
    )
    (tmp_path / pdf.PDF_NAME).parent.mkdir(parents=True)
    (tmp_path / pdf.PDF_NAME).write_bytes(b"%PDF-1.4\n")
    monkeypatch.setattr(pdf.shutil, "which", lambda name: None)
    assert pdf.check_pdf(tmp_path, []) == (["pdftotext missing (Debian package poppler-utils)"], 1)


def test_the_summary_exits_1_on_any_failure(capsys, tmp_path):
    assert report.summary({}, Counter(links=3), Counter(), 1, 0.1, tmp_path) == 0
    assert "all pages passed" in capsys.readouterr().out
    code = report.summary(
        {"book/a.html": ["no favicon link"]}, Counter(), Counter(), 1, 0.1, tmp_path
    )
    assert code == 1
    assert "  book/a.html: no favicon link" in capsys.readouterr().out


# The JavaScript, run in Chromium ----------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def chromium():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).is_file() and not shutil.which("chromium"):
        pytest.skip("no Chromium (make browser-deps installs it)")
    exe = CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        yield browser
        browser.close()


def _see(chromium, name: str) -> dict:
    """What js/page.js, js/alt.js and js/layout.js report on a fixture page at 390 px."""
    scripts = importlib.import_module("browser_check.scripts")
    page = chromium.new_page(viewport={"width": 390, "height": 844})
    page.goto((FIXTURES / "pages" / name).resolve().as_uri(), wait_until="load")
    seen = {k: page.evaluate(scripts.js(k)) for k in ("page", "alt", "layout")}
    page.close()
    return seen


def test_the_page_scripts_find_nothing_on_a_clean_page(chromium):
    seen = _see(chromium, "good.html")
    info = seen["page"]
    assert observed.check_math(info, True) == []
    assert observed.check_images(info) == [] and info["images"][0]["w"] == 4
    assert observed.check_widgets(info, True) == []
    assert observed.check_alt(seen["alt"])[0] == []
    assert observed.check_layout({390: seen["layout"]})[0] == []


def test_the_page_scripts_find_what_is_wrong_on_a_broken_page(chromium):
    seen = _see(chromium, "bad.html")
    info = seen["page"]
    assert observed.check_math(info, True) == [
        "math not typeset by MathJax: '\\\\(d\\\\)'",
        "raw TeX left in the page text: 'Left as TeX: \\\\(n^2\\\\) and '",
        "raw TeX left in the page text: '\\\\(d\\\\)'",
        "raw TeX left in the page text: 'link text: why \\\\sqrt{\\\\log n} is the threshold'",
        "1 formulas are in the Tab order (MathJax's menu)",
    ]
    assert [f.split(":")[0] for f in observed.check_images(info)] == [
        "image did not load (naturalWidth 0)"
    ]
    assert observed.check_widgets(info, True) == [
        "widget m7 not rendered: empty widget area",
        "a widget is shown as text (run with store_widget_state=True): "
        "\"IntSlider(value=3, description='n')\"",
    ]
    assert observed.check_alt(seen["alt"])[0] == [
        "1 images without a real alt text, e.g. no-such-image.png"
    ]
    layout = observed.check_layout({390: seen["layout"]})[0]
    assert len(layout) == 1 and layout[0].startswith("390px: page is ")
    assert "wider than the viewport (div. " in layout[0]


def test_driving_the_navigation_and_the_collapsed_outputs(chromium):
    browser = importlib.import_module("browser_check.browser")
    page = FIXTURES / "pages" / "controls.html"
    with browser.offline_page(chromium, 390) as pw_page:
        pw_page.goto(page.as_uri(), wait_until="load")
        assert nav.check_nav(pw_page, 390, set()) == ["390px: no visible navigation button"]
    fails, n = toggles._check_page(chromium, page, "controls.html")
    assert (fails, n) == (["controls.html: collapsed output 2 has no toggle"], 2)


def test_driving_a_live_figure_finds_a_control_that_changes_nothing(chromium):
    browser = importlib.import_module("browser_check.browser")
    pixels = {}

    def frames(draw, point, form="wide"):
        assert draw == "fixture:frame" and form == "wide"
        return pixels[json.loads(point)["n"]]

    with browser.offline_page(chromium, 390) as pw_page:
        pw_page.goto((FIXTURES / "pages" / "live.html").as_uri(), wait_until="load")
        data = json.loads(pw_page.text_content("script.live-figure-data"))
        pixels.update({f["point"]["n"]: live.shown_pixels(f["src"]) for f in data["frames"]})
        moves, stuck = pw_page.query_selector_all("[data-live-figure]")
        fails = []
        assert live._check_figure(pw_page, moves, "live.html 390px", frames, fails)[0] == 2
        assert fails == []
        states, first = live._check_figure(pw_page, stuck, "live.html 390px", frames, fails)
    assert (states, first["name"]) == (2, "stuck")
    assert fails == [
        "live.html 390px stuck: moving stuck-n did not change the image",
        "live.html 390px stuck: moving stuck-n left its readout or alt",
        "live.html 390px stuck: moving stuck-n left its aria-valuetext",
    ]


# Prose first: code share, fold summaries, cut outputs (.ci/browser_check/prose.py) ---------

prose = importlib.import_module("browser_check.prose")


def test_prose_code_share_passes_at_the_limit_and_fails_above_it():
    assert prose.share_problems("p.html", {"input": 100.0, "article": 1000.0}) == []
    assert prose.share_problems("p.html", {"input": 101.0, "article": 1000.0}) == [
        "p.html: unfolded code input is 10% of the page at 1400px (at most 10%)"
    ]


def test_prose_a_fold_needs_a_summary_of_its_own():
    prompts = ["Figure 7.2: time against n", "Show code cell source", ""]
    assert prose.summary_problems("p.html", prompts) == [
        "p.html: folded cell 2 has no summary on its toggle ('Show code cell source')",
        "p.html: folded cell 3 has no summary on its toggle ('')",
    ]


def test_prose_a_cut_output_needs_a_scroll_shadow():
    shadow = "linear-gradient(to right, red, blue), radial-gradient(red, blue)"
    cut = [
        {"text": "signed", "image": shadow, "attachment": "local, scroll"},
        {"text": "no image", "image": "none", "attachment": "scroll"},
        {"text": "not local", "image": shadow, "attachment": "scroll, scroll"},
    ]
    assert prose.cut_problems("p.html", cut) == [
        "p.html: output cut at 390px with no scroll sign: 'no image'",
        "p.html: output cut at 390px with no scroll sign: 'not local'",
    ]


def test_prose_page_script_measures_shares_prompts_and_cut_outputs(chromium):
    page = chromium.new_page(viewport={"width": 390, "height": 844})
    page.goto((FIXTURES / "pages" / "prose.html").resolve().as_uri(), wait_until="load")
    seen = page.evaluate(prose.MEASURE_JS, prose.LONG_LINES)
    cut = page.evaluate(prose.CUT_JS)
    page.close()
    assert seen["input"] == 300 and seen["long"] == 0
    assert seen["prompts"] == ["Show code cell source", "Figure 1.1: time against n"]
    assert len(prose.share_problems("prose.html", seen)) == 1
    assert len(prose.summary_problems("prose.html", seen["prompts"])) == 1
    assert [c["text"][:20] for c in cut] == ["a cut output with no", "a cut output with a "]
    assert prose.cut_problems("prose.html", cut) == [
        "prose.html: output cut at 390px with no scroll sign: "
        "'a cut output with no sign that it scrolls, much wider than a'"
    ]


# Keyboard, contrast, the head and ids (.ci/browser_check/a11y.py) ----------------------------

a11y = importlib.import_module("browser_check.a11y")


def test_a11y_head_and_ids_pass_on_a_good_page_and_fail_on_a_bad_one():
    good = static.parse(FIXTURES / "pages" / "a11y_good.html")
    bad = static.parse(FIXTURES / "pages" / "a11y_bad.html")
    assert a11y.check_head("good.html", good) == a11y.check_ids("good.html", good) == []
    assert a11y.check_head("bad.html", bad) == [
        "bad.html: 2 viewport meta tags (one wanted)",
        "bad.html: 0 description meta tags (one wanted)",
        "bad.html: 0 og:title tags (one, not empty, wanted)",
        "bad.html: 0 og:description tags (one, not empty, wanted)",
        "bad.html: 0 og:type tags (one, not empty, wanted)",
        "bad.html: 0 og:site_name tags (one, not empty, wanted)",
    ]
    assert a11y.check_ids("bad.html", bad) == ["bad.html: 1 duplicate ids (box x2)"]


def test_a11y_a_description_must_be_short_plain_text():
    soup = static.parse(FIXTURES / "pages" / "a11y_good.html")
    meta = soup.find("meta", attrs={"name": "description"})
    meta["content"] = "The cost is \\(\\Theta(n^2)\\). " + "word " * 40
    assert a11y.check_head("p.html", soup) == [
        "p.html: description of 228 characters (> 160)",
        "p.html: TeX in the description: "
        "'The cost is \\\\(\\\\Theta(n^2)\\\\). word word word word word word w'",
    ]


def test_a11y_judges_axe_tabs_and_rings():
    violations = [{"id": "color-contrast", "nodes": [{"target": "a.x", "link": True}]}]
    assert a11y.check_axe("p @390px", violations) == [
        "p @390px: axe color-contrast: 1 element(s): a.x"
    ]
    assert a11y.check_axe("p", []) == []
    assert a11y.check_tabs("p", a11y.MAX_TABS) == []
    assert a11y.check_tabs("p", a11y.MAX_TABS + 1) == [
        f"p: {a11y.MAX_TABS + 1} Tab presses to the first slider (> {a11y.MAX_TABS})"
    ]
    assert a11y.check_tabs("p", None) == [
        "p: the first slider or drop-down list is not reached by Tab"
    ]
    ring = {"inHeader": True, "visible": True, "outline": 3.0, "shadow": "", "label": "a"}
    shadow = dict(ring, outline=0, shadow="0 0 0 3px blue", label="b")
    bare = dict(ring, outline=0, label="Toggle primary sidebar")
    hidden = dict(bare, visible=False)
    assert a11y.check_rings("p", [ring, shadow, hidden]) == []
    assert a11y.check_rings("p", [ring, bare]) == [
        "p: no focus ring on 1 control(s): Toggle primary sidebar"
    ]


def test_search_snippets_fail_on_tex_command_words():
    good = ["... the set A = {a_1, …} of gradients ...", "... left and right gradients ..."]
    bad = ["... the gradient of mathcal A = {a_1, dots} ...", "... frac12 left( x right) ..."]
    assert search.check_snippets(good) == []
    assert search.check_snippets(bad) == [
        "a TeX command word in a search snippet: '... the gradient of mathcal A = {a_1, dots} ...'",
        "a TeX command word in a search snippet: '... frac12 left( x right) ...'",
    ]


@pytest.fixture(scope="module")
def axe():
    if not a11y.AXE.is_file():
        pytest.skip("no axe-core (make vendor copies it next to the check)")


def test_a11y_driving_passes_a_good_page(chromium, axe):
    page = FIXTURES / "pages" / "a11y_good.html"
    for width in a11y.A11Y_WIDTHS:
        fails, seen = a11y._page_at(chromium, page, width, "good.html")
        assert fails == [] and seen["presses"] == 3


def test_a11y_driving_finds_contrast_ids_viewport_rings_and_tab_presses(chromium, axe):
    page = FIXTURES / "pages" / "a11y_bad.html"
    fails, seen = a11y._page_at(chromium, page, 390, "bad.html")
    rules = sorted(v["id"] for v in seen["violations"])
    assert rules == ["color-contrast", "duplicate-id", "meta-viewport"]
    assert seen["presses"] == 43
    assert fails[-2:] == [
        "bad.html @390px: no focus ring on 1 control(s): Toggle primary sidebar",
        f"bad.html @390px: 43 Tab presses to the first slider (> {a11y.MAX_TABS})",
    ]
    assert [f.split(":")[1] for f in fails[:-2]] == [
        " axe color-contrast",
        " axe duplicate-id",
        " axe meta-viewport",
    ]


# Figures: text size at phone width, desktop form, enlarged view ---------------------------


def _figure_row(text_px, natural, client, src="a.png", shown=None, phone=False):
    return {
        "src": src,
        "shown": shown or src,
        "phone": phone,
        "text_px": text_px,
        "natural": natural,
        "client": client,
    }


def test_figure_text_size_passes_at_the_floor_and_fails_below_it():
    figures = importlib.import_module("browser_check.figures")
    floor = figures.TEXT_FLOOR_PX
    at_floor = _figure_row(2 * floor, 1000, 500)
    assert figures.text_problems("p", [at_floor]) == []
    below = _figure_row(2 * floor, 1000, 499, src="b.png")
    missing = _figure_row(None, 1000, 500, src="c.png")
    hidden = _figure_row(25.0, 1000, 0, src="d.png")  # collapsed: judged at the column's width
    assert figures.text_problems("p", [at_floor, below, missing, hidden]) == [
        f"p: figure b.png shows its text at 9.0 px (< {floor:g} px)",
        "p: figure c.png has no data-text-px",
    ]
    tiny_hidden = _figure_row(10.0, 1000, 0, src="e.png")
    assert figures.text_problems("p", [at_floor, tiny_hidden]) == [
        "p: figure e.png shows its text at 5.0 px (< 9 px)"
    ]


def test_figure_desktop_form_and_enlarged_view_problems():
    figures = importlib.import_module("browser_check.figures")
    rows = [_figure_row(20, 1000, 784), _figure_row(20, 300, 150, src="w.png", shown="p.png")]
    assert figures.desktop_problems("p", rows) == ["p: figure w.png shows its phone form p.png"]
    everything = dict.fromkeys(
        ("opened", "full_size", "escape", "button", "outside", "keyboard", "focus"), True
    )
    assert figures.zoom_problems("p", everything) == []
    assert figures.zoom_problems("p", {**everything, "escape": False, "focus": False}) == [
        "p: Escape does not close the enlarged figure",
        "p: focus does not return to the figure",
    ]
    assert len(figures.zoom_problems("p", {})) == 7


def test_driving_the_figure_check_finds_small_text_and_enlarges_a_figure(chromium):
    figures = importlib.import_module("browser_check.figures")
    page = FIXTURES / "pages" / "figures.html"
    fails, n, stats = figures._check_page(chromium, page, "figures.html")
    phone = stats["phone"]
    assert [r["phone"] for r in phone] == [True, False, False]
    assert figures.shown_text_px(25, phone[0]["client"], phone[0]["natural"]) == 12.5
    assert fails == [
        "figures.html 390px: figure wide.png shows its text at 7.2 px (< 9 px)",
        "figures.html 390px: figure narrow.png has no data-text-px",
    ]
    assert n == 3 + 1  # three figures at phone width, one enlarged at desktop width


# A downloaded chapter in JupyterLab (.ci/browser_check/jupyterlab.py) -------------------------


def _lab_seen(**changes) -> dict:
    """What js/jupyterlab_seen.js reports on a notebook that passes, with ``changes``."""
    seen = {
        "cells": 3,
        "markdown": ["2. The machine\nDefinition 2.1 (The red-blue pebble game)"],
        "boxes": 1,
        "live": [{"frame": True, "width": 1268, "note": "trusted", "noteShown": True}],
        "first": {"prompt": "[1]:", "outputs": []},
    }
    return {**seen, **changes}


def test_lab_raw_myst_finds_roles_fences_and_options_but_not_tex():
    lab = importlib.import_module("browser_check.jupyterlab")
    assert lab.raw_myst(["Hong and Kung hk81 \\mathrm{poly}(n) 2^{k}x \\frac{a}{b}c"]) == []
    assert lab.raw_myst(
        ["ok", "Hong and Kung {cite}hk81", ":label: def-1", "```{prf:lemma} A"]
    ) == [
        "3 of 4 markdown cells show MyST as text (cell 2: '{cite}'; cell 3: ':label:'; "
        "cell 4: '```{prf:lemma}')"
    ]


def test_lab_check_seen_passes_a_rendered_notebook_and_names_each_problem():
    lab = importlib.import_module("browser_check.jupyterlab")
    assert lab.check_seen(_lab_seen()) == []
    assert lab.check_seen(_lab_seen(boxes=0, live=[])) == [
        "no MyST admonition or proof box rendered (is jupyterlab-myst installed?)",
        "no live figure (an output with an image and a control) found",
    ]
    hidden = {"frame": False, "width": 0, "note": "trusted", "noteShown": False}
    assert lab.check_seen(_lab_seen(live=[hidden])) == [
        "live figure 1: its default frame is not shown",
        "live figure 1: its note on trust is hidden: 'trusted'",
    ]


def test_lab_first_cell_must_run_cleanly_and_say_attnlib_is_installed():
    lab = importlib.import_module("browser_check.jupyterlab")
    said = {
        "prompt": "[1]:",
        "outputs": [{"mime": "text/plain", "text": "attnlib 0.1.0 is installed."}],
    }
    assert lab.check_first_cell("[ ]:", ["[*]:", "[1]:"], said) == []
    assert lab.check_first_cell("[ ]:", [], {**said, "prompt": "[ ]:"}) == [
        "first code cell did not run: prompt '[ ]:', then []"
    ]
    error = {"mime": "application/vnd.jupyter.stderr", "text": "ModuleNotFoundError: attnlib"}
    assert lab.check_first_cell("[ ]:", ["[*]:", "[1]:"], {**said, "outputs": [error]}) == [
        "first code cell failed: 'ModuleNotFoundError: attnlib'"
    ]
    quiet = {**said, "outputs": []}
    assert lab.check_first_cell("[ ]:", ["[*]:", "[1]:"], quiet) == [
        "first code cell does not say attnlib is installed: ''"
    ]
    assert lab.check_first_cell("[ ]:", [], None) == ["the notebook has no code cell"]


def test_lab_counts_glued_values_shown_as_their_name():
    lab = importlib.import_module("browser_check.jupyterlab")
    source = "a factor {glue:text}`ch02_lo:.2f` to {glue:text}`ch02_hi:.2f` and {glue}`n`"
    assert lab.glue_shown_as_names(source, ["a factor ch02_lo:.2f to 3.1 and 7"]) == 1


def test_lab_page_script_reads_a_notebook_with_each_problem(chromium):
    lab = importlib.import_module("browser_check.jupyterlab")
    scripts = importlib.import_module("browser_check.scripts")
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    page.goto((FIXTURES / "pages" / "jupyterlab.html").as_uri(), wait_until="load")
    seen = page.evaluate(scripts.js("jupyterlab_seen"))
    page.close()
    assert (seen["cells"], seen["boxes"], len(seen["markdown"])) == (4, 1, 2)
    assert lab.check_seen(seen) == [
        "1 of 2 markdown cells show MyST as text (cell 2: '{cite}')",
        "live figure 1: its note on trust is hidden: "
        "'The sliders work once this notebook is trusted.'",
        "live figure 2: its default frame is not shown",
        "live figure 2: no note says its sliders need a trusted notebook",
    ]
    assert lab.check_first_cell(seen["first"]["prompt"], [], seen["first"]) == [
        "first code cell did not run: prompt '[ ]:', then []",
        "first code cell failed: \"ModuleNotFoundError: No module named 'attnlib'\"",
    ]


def _equation(**seen):
    """What js/math_fit.js reports on one display equation: by default cut, scrolling, and
    with nothing drawn at its edge."""
    eq = {"id": "equation-x", "text": "a=b", "width": 900, "box": 700, "cut": True}
    eq |= {"scrolls": True, "background": "none", "attachment": "scroll", "mask": "none"}
    return eq | {"after": "none"} | seen


def test_math_fit_judges_cut_equations_and_their_scroll_signs():
    fit = importlib.import_module("browser_check.math")
    fits = _equation(cut=False, width=300)
    fade = _equation(mask="linear-gradient(to left, transparent, rgb(0, 0, 0) 40px)")
    shadow = _equation(
        background="linear-gradient(to right, white, transparent), radial-gradient(black, "
        "transparent)",
        attachment="local, scroll",
    )
    bare, cover_only = _equation(), _equation(background=shadow["background"])
    hidden = _equation(scrolls=False, mask=fade["mask"])
    seen = {1400: [fits, fits], 390: [fits, fade, shadow, bare, cover_only, hidden]}
    fails, counts = fit.judge("p.html", seen)
    no_sign = "p.html: 390px: display equation cut with no sign that it scrolls"
    assert fails == [f"{no_sign} equation-x 'a=b'"] * 3
    assert counts == Counter({"equations": 2, "cut-phone": 5, "no-sign-phone": 3})
    fails, counts = fit.judge("p.html", {1400: [fade], 390: []})
    assert fails == ["p.html: 1400px: display equation cut (900px in 700px) equation-x 'a=b'"]
    assert counts == Counter({"equations": 1, "cut-desktop": 1})


def test_math_fit_script_and_the_book_fade_on_a_page(chromium):
    fit = importlib.import_module("browser_check.math")
    scripts = importlib.import_module("browser_check.scripts")
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    page.goto((FIXTURES / "pages" / "math.html").as_uri(), wait_until="load")
    seen = {}
    for width in (1400, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(200)
        seen[width] = page.evaluate(scripts.js("math_fit"))
    # book-math.js marks the edges with more to see: scrolled to its end, only the left one.
    marks = page.evaluate(
        """async () => {
          const c = document.querySelector('#equation-fades mjx-container');
          const before = c.className;
          c.scrollLeft = c.scrollWidth;
          await new Promise(r => setTimeout(r, 100));
          return [before, c.className];
        }"""
    )
    page.close()
    assert marks == ["book-math-more-right", "book-math-more-left"]
    fails, counts = fit.judge("math.html", seen)
    assert [f.split(" (")[0].split(" equation-")[0] for f in fails] == [
        "math.html: 1400px: display equation cut",
    ] * 3 + ["math.html: 390px: display equation cut with no sign that it scrolls"] * 2
    assert "equation-no-sign" in fails[3] and "equation-clipped" in fails[4]
    assert counts == Counter({"equations": 4, "cut-desktop": 3, "cut-phone": 3, "no-sign-phone": 2})
