"""Static figures and live-figure frames a reader can read: the text of every figure image of a
chapter, as shown at phone width, is at least ``TEXT_FLOOR_PX``; at desktop width the desktop
form is shown, and a figure opens enlarged in a dialog that closes again.

Each figure ``<img>`` (and each ``<source>`` of its ``<picture>``) carries ``data-text-px``, its
smallest text in pixels of its own image (book/_ext/book_figures.py, attnlib.plots.forms). The
text a reader sees is that times the image's displayed width over its natural width.
"""

from __future__ import annotations

from pathlib import Path

from .browser import offline_page, wait_for_images
from .scripts import js
from .settings import WIDTHS

# The smallest text a figure may show, in CSS px. 7 pt, the smallest size print guides allow for
# a figure's labels, is 7 / 72 in at 96 CSS px per inch = 9.3 px; the book's own text is 16 px
# and its tick labels are drawn at 9 pt (12.5 px at 1x). Below 9 px a phone's reader must zoom
# to read a tick label.
TEXT_FLOOR_PX = 9.0
PHONE, DESKTOP = WIDTHS[0], WIDTHS[-1]


def shown_text_px(text_px: float, client: float, natural: float) -> float:
    """The smallest text of an image as shown, in CSS px."""
    return text_px * client / natural


def text_problems(where: str, rows: list[dict], floor: float = TEXT_FLOOR_PX) -> list[str]:
    """Figure images (``js/figure_text.js`` rows) whose text is shown below ``floor`` px, or
    that do not say how small their text is. An image not displayed (in a collapsed output) is
    judged at the column's width, ``rows``' widest displayed image."""
    fails = []
    column = max((r["client"] for r in rows), default=0)
    for r in rows:
        name = r["shown"] or r["src"]
        if r["text_px"] is None:
            fails.append(f"{where}: figure {name} has no data-text-px")
            continue
        if not r["natural"]:
            continue  # the image check reports an image that did not load
        client = r["client"] or min(column, r["natural"])
        shown = shown_text_px(r["text_px"], client, r["natural"])
        if shown < floor:
            fails.append(
                f"{where}: figure {name} shows its text at {shown:.1f} px (< {floor:g} px)"
            )
    return fails


def desktop_problems(where: str, rows: list[dict]) -> list[str]:
    """At desktop width every figure shows its desktop form (its ``<img>``'s own source)."""
    return [
        f"{where}: figure {r['src']} shows its phone form {r['shown']}"
        for r in rows
        if r["phone"] or (r["shown"] and r["shown"] != r["src"])
    ]


def zoom_problems(where: str, steps: dict) -> list[str]:
    """What happened when a figure was enlarged: ``steps`` maps each step to whether it went
    right (opened, shows the desktop form at full size, each way of closing, focus back)."""
    wanted = {
        "opened": "a tap does not open the enlarged figure",
        "full_size": "the enlarged figure is not its desktop form at its full size",
        "escape": "Escape does not close the enlarged figure",
        "button": "the close button does not close the enlarged figure",
        "outside": "a tap outside the figure does not close it",
        "keyboard": "Enter on a focused figure does not enlarge it",
        "focus": "focus does not return to the figure",
    }
    return [f"{where}: {why}" for step, why in wanted.items() if not steps.get(step)]


def measure(pw_page) -> list[dict]:
    """The figure rows of a loaded page, every lazy image loaded first."""
    pw_page.evaluate(js("images_eager"))
    wait_for_images(pw_page)
    pw_page.wait_for_function(
        "() => Array.from(document.images).every(i => i.complete)", timeout=30_000
    )
    return pw_page.evaluate(js("figure_text"))


def _open_state(pw_page) -> dict | None:
    return pw_page.evaluate(
        """() => { const d = document.querySelector('dialog.book-zoom');
        if (!d || !d.open) return null; const i = d.querySelector('img');
        return {src: i.getAttribute('src').split('/').pop(), client: i.clientWidth,
                natural: i.naturalWidth}; }"""
    )


def try_zoom(pw_page, index: int = 0) -> dict:
    """Enlarge the ``index``-th figure of a loaded page every way and close it every way."""
    figures = pw_page.query_selector_all(".bd-article .cell_output img, .bd-article figure img")
    if len(figures) <= index:
        return {}
    img = figures[index]
    src = (img.get_attribute("src") or "").split("/")[-1]
    width = float(img.get_attribute("width") or 0)
    steps: dict = {}

    def closed() -> bool:
        pw_page.wait_for_timeout(150)
        return _open_state(pw_page) is None

    img.scroll_into_view_if_needed()
    img.click()
    try:
        pw_page.wait_for_function(
            "() => { const i = document.querySelector('dialog.book-zoom[open] img');"
            " return !!i && i.complete; }",
            timeout=5_000,
        )
    except Exception:  # noqa: BLE001 - the dialog never opened: judged below
        pass
    state = _open_state(pw_page)
    steps["opened"] = state is not None
    if state:
        full = width or state["natural"] / 2
        steps["full_size"] = state["src"] == src and abs(state["client"] - full) <= 1
    pw_page.keyboard.press("Escape")
    steps["escape"] = closed()
    steps["focus"] = pw_page.evaluate("(i) => document.activeElement === i", img)
    img.focus()
    pw_page.keyboard.press("Enter")
    pw_page.wait_for_timeout(150)
    steps["keyboard"] = _open_state(pw_page) is not None
    if steps["keyboard"]:
        pw_page.click("dialog.book-zoom .book-zoom-close")
        steps["button"] = closed()
    img.click()
    pw_page.wait_for_timeout(150)
    pw_page.mouse.click(5, pw_page.viewport_size["height"] - 5)
    steps["outside"] = closed() and bool(steps["opened"])
    return steps


def _check_page(browser, page: Path, rel: str) -> tuple[list[str], int, dict]:
    fails, n, stats = [], 0, {}
    with offline_page(browser, PHONE) as pw_page:
        pw_page.goto(page.as_uri(), wait_until="load", timeout=30_000)
        rows = measure(pw_page)
        n += len(rows)
        fails += text_problems(f"{rel} {PHONE}px", rows)
        stats["phone"] = rows
    with offline_page(browser, DESKTOP) as pw_page:
        pw_page.goto(page.as_uri(), wait_until="load", timeout=30_000)
        rows = measure(pw_page)
        fails += desktop_problems(f"{rel} {DESKTOP}px", rows)
        if rows:
            n += 1
            fails += zoom_problems(f"{rel} {DESKTOP}px", try_zoom(pw_page))
    return fails, n, stats


def summary(rows: list[dict], floor: float = TEXT_FLOOR_PX) -> str:
    """How many figures show text below ``floor`` at phone width, and the smallest text."""
    sizes = [
        shown_text_px(r["text_px"], r["client"], r["natural"])
        for r in rows
        if r["text_px"] is not None and r["natural"] and r["client"]
    ]
    low = sum(1 for s in sizes if s < floor)
    smallest = f"{min(sizes):.1f}" if sizes else "-"
    missing = sum(1 for r in rows if r["text_px"] is None)
    return (
        f"{len(rows)} figures at {PHONE}px: {low} with text below {floor:g} px, smallest "
        f"{smallest} px, {missing} without data-text-px"
    )


def check_figures(root: Path, pages: list[Path], browser) -> tuple[list[str], int]:
    """Every figure of every chapter page (book/*.html): text size at phone width, desktop form
    and the enlarged view at desktop width."""
    fails, n, rows = [], 0, []
    for page in pages:
        if page.parent.name != "book" or "cell_output" not in page.read_text(errors="replace"):
            continue
        rel = page.relative_to(root).as_posix()
        try:
            page_fails, page_n, stats = _check_page(browser, page, rel)
        except Exception as e:  # noqa: BLE001 - reported as a failure
            page_fails, page_n, stats = [f"{rel}: figure check failed: {e}".splitlines()[0]], 0, {}
        fails, n = fails + page_fails, n + page_n
        rows += stats.get("phone", [])
    print(f"browser-check: figures: {summary(rows)}")
    return fails, n
