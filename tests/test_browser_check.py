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
    for rel, n in (("book/01_good.html", 2), ("book/intro.html", 1)):
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
    assert checks == Counter(links=8, figures=2, glossary=2, download=1, favicon=1)


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
        "page loads 3.50 MB, over the 3 MB budget",
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
    return states, lambda draw, point: frames[point]


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
        "io: control n has no label",
        "io: control n is not visible",
        "io: slider n has no aria-valuetext",
        "io: control n reads '0.30000000000000004'",
        "io: the alt text does not name n = '0.30000000000000004'",
        "io: the alt text does not name kernel = 'flash'",
        'io: the frame shown at {"n": 0, "kernel": 0} differs from '
        "attnlib.plots.iomodel:io_frame's",
    ]
    assert live.check_live_state(s["not_inline"], "io", frames) == [
        'io: frame at {"n": 0, "kernel": 0} not recomputed: the frame is not an inline PNG: '
        "../_images/io.png"
    ]


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

    def frames(draw, point):
        assert draw == "fixture:frame"
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
