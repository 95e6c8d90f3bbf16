"""Display equations fit the column: none is cut at desktop width, and at phone width every one
still wider than the column scrolls and shows it (a shadow or fade at the cut edge).

MathJax 3 does not break lines, so an equation wider than the column either is written on
several lines in the source or scrolls sideways; a scroll container with nothing at its edge
reads as an equation that simply ends there.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from .browser import has_mathjax, offline_page
from .scripts import js
from .settings import WIDTHS

# Where every equation must fit, and where an overflowing one must show that it scrolls.
FIT_WIDTH, SIGN_WIDTH = WIDTHS[-1], WIDTHS[0]


def has_scroll_sign(eq: dict) -> bool:
    """The scroll container scrolls and shows something at its cut edge: a fade (a gradient
    mask on it), a scroll shadow (gradient background layers, the shadows attached
    ``scroll`` and their covers ``local``) or a gradient in the ::after of its div.math."""
    layers = {a.strip() for a in eq["attachment"].split(",")}
    shadow = "gradient(" in eq["background"] and {"scroll", "local"} <= layers
    fade = "gradient(" in eq["mask"]
    return eq["scrolls"] and (fade or shadow or "gradient(" in eq["after"])


def judge(rel: str, widths: dict[int, list[dict]]) -> tuple[list[str], Counter]:
    """The problems of one page from what js/math_fit.js saw at each width, and its counts:
    equations, cut at FIT_WIDTH, cut at SIGN_WIDTH, cut without a sign at SIGN_WIDTH."""
    fit, sign = widths.get(FIT_WIDTH, []), widths.get(SIGN_WIDTH, [])
    counts = Counter(equations=len(fit))
    fails = []
    for eq in fit:
        if eq["cut"]:
            counts["cut-desktop"] += 1
            fails.append(
                f"{rel}: {FIT_WIDTH}px: display equation cut ({eq['width']}px in "
                f"{eq['box']}px) {eq['id']} {eq['text']!r}"
            )
    for eq in sign:
        if eq["cut"]:
            counts["cut-phone"] += 1
            if not has_scroll_sign(eq):
                counts["no-sign-phone"] += 1
                fails.append(
                    f"{rel}: {SIGN_WIDTH}px: display equation cut with no sign that it scrolls "
                    f"{eq['id']} {eq['text']!r}"
                )
    return fails, counts


def see_page(pw_page, page: Path) -> dict[int, list[dict]]:
    """Load the page, open collapsed solutions, typeset every equation, and measure them at
    desktop width, then at phone width."""
    pw_page.goto(page.as_uri(), wait_until="load", timeout=30_000)
    pw_page.wait_for_function(js("mathjax_started"), timeout=20_000)
    pw_page.evaluate(js("mathjax_ready"))
    pw_page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
    pw_page.evaluate(js("lazy_typeset_all"))
    seen = {}
    for width in (FIT_WIDTH, SIGN_WIDTH):
        pw_page.set_viewport_size({"width": width, "height": 900})
        pw_page.wait_for_timeout(250)
        seen[width] = pw_page.evaluate(js("math_fit"))
    return seen


def check_math_fit(root: Path, pages: list[Path], browser) -> tuple[list[str], int, list]:
    """Every page with MathJax; returns (problems, equations checked, rows of per-page counts)."""
    from .static import parse

    fails, rows = [], []
    for page in pages:
        if not has_mathjax(parse(page)):
            continue
        rel = page.relative_to(root).as_posix()
        with offline_page(browser, FIT_WIDTH) as pw_page:
            try:
                seen = see_page(pw_page, page)
            except Exception as e:  # noqa: BLE001 - reported as a failure
                fails.append(f"{rel}: display equations not measured: {str(e).splitlines()[0]}")
                continue
        page_fails, counts = judge(rel, seen)
        fails += page_fails
        if counts["equations"]:
            rows.append((rel, counts))
    return fails, sum(c["equations"] for _, c in rows), rows


def report_math_fit(rows: list) -> None:
    """The per-page table: equations, cut at desktop width, cut and without a sign at phone."""
    head = ("equations", "cut-desktop", "cut-phone", "no-sign-phone")
    print(
        f"browser-check: display equations ({FIT_WIDTH}px must fit; {SIGN_WIDTH}px must "
        "show that they scroll)"
    )
    print(f"  {'page':<44}" + "".join(f"{h:>15}" for h in head))
    total = Counter()
    for rel, counts in rows:
        total.update(counts)
        print(f"  {rel:<44}" + "".join(f"{counts[h]:>15}" for h in head))
    print(f"  {'total':<44}" + "".join(f"{total[h]:>15}" for h in head))
