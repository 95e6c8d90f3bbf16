"""Keyboard and assistive-technology checks of every page, at 1400 and 390 px.

- axe-core (vendored by .ci/vendor.sh into ``node_modules/axe-core/`` next to this file, never
  into the site) finds no violation of ``AXE_RULES`` (contrast, duplicate ids, the viewport
  tag, focus) or of any rule tagged ``AXE_TAGS`` (WCAG 2 A and AA);
- from page load, a live figure's first slider or drop-down list is at most ``MAX_TABS``
  presses of Tab away;
- each control of the header and navigation that Tab reaches draws a focus ring (an outline
  or a box-shadow);
- the page head (on disk): one viewport tag, a plain-text description of at most
  ``MAX_DESCRIPTION`` characters, and the OpenGraph tags ``OG_TAGS``; every id is unique.

:func:`check_head`, :func:`check_ids`, :func:`check_axe`, :func:`check_tabs` and
:func:`check_rings` judge; the rest drives the page.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from .browser import offline_page
from .scripts import js
from .settings import HEIGHTS

AXE = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"
# The rules for contrast, ids, the viewport tag and focus (two of them deprecated in axe, so off
# unless named), then every rule of the WCAG 2 A and AA tags.
AXE_RULES = (
    "color-contrast",
    "duplicate-id",
    "duplicate-id-active",
    "duplicate-id-aria",
    "meta-viewport",
    "scrollable-region-focusable",
    "nested-interactive",
    "frame-focusable-content",
    "aria-hidden-focus",
)
AXE_TAGS = ("wcag2a", "wcag2aa")
A11Y_WIDTHS = (1400, 390)
MAX_TABS = 30
# Presses tried before a control counts as out of reach, and header controls looked at.
TAB_LIMIT = 300
MAX_DESCRIPTION = 160
OG_TAGS = ("og:title", "og:description", "og:type", "og:site_name")
# TeX a plain-text description must not carry.
TEX_WORD = re.compile(r"\\[A-Za-z]+|\$|\\[()[\]]")


def check_head(rel: str, soup) -> list[str]:
    """One viewport tag, a plain-text description, and the OpenGraph tags."""
    fails = []
    viewports = soup.find_all("meta", attrs={"name": "viewport"})
    if len(viewports) != 1:
        fails.append(f"{rel}: {len(viewports)} viewport meta tags (one wanted)")
    desc = soup.find_all("meta", attrs={"name": "description"})
    if len(desc) != 1:
        fails.append(f"{rel}: {len(desc)} description meta tags (one wanted)")
    else:
        text = desc[0].get("content", "").strip()
        if not text:
            fails.append(f"{rel}: empty description")
        elif len(text) > MAX_DESCRIPTION:
            fails.append(f"{rel}: description of {len(text)} characters (> {MAX_DESCRIPTION})")
        if TEX_WORD.search(text):
            fails.append(f"{rel}: TeX in the description: {text[:60]!r}")
    for prop in OG_TAGS:
        tags = soup.find_all("meta", attrs={"property": prop})
        if len(tags) != 1 or not tags[0].get("content", "").strip():
            fails.append(f"{rel}: {len(tags)} {prop} tags (one, not empty, wanted)")
    return fails


def duplicate_ids(soup) -> Counter:
    """Each id used more than once on the page, with its count."""
    counts = Counter(t["id"] for t in soup.find_all(id=True))
    return Counter({k: n for k, n in counts.items() if n > 1})


def check_ids(rel: str, soup) -> list[str]:
    """Every id of the page is unique (the first five duplicates are named)."""
    dup = duplicate_ids(soup)
    if not dup:
        return []
    named = ", ".join(f"{k} x{n}" for k, n in dup.most_common(5))
    return [f"{rel}: {len(dup)} duplicate ids ({named})"]


def check_axe(where: str, violations: list[dict]) -> list[str]:
    """One line per violated rule, with its first three elements."""
    fails = []
    for v in violations:
        nodes = v["nodes"]
        shown = "; ".join(n["target"] for n in nodes[:3])
        fails.append(f"{where}: axe {v['id']}: {len(nodes)} element(s): {shown}")
    return fails


def check_tabs(where: str, presses: int | None) -> list[str]:
    """The first live-figure control is reached within MAX_TABS presses (None: not at all)."""
    if presses is None:
        return [f"{where}: the first slider or drop-down list is not reached by Tab"]
    if presses > MAX_TABS:
        return [f"{where}: {presses} Tab presses to the first slider (> {MAX_TABS})"]
    return []


def check_rings(where: str, focused: list[dict]) -> list[str]:
    """Each visible header or navigation control focused by Tab draws an outline or shadow."""
    bare = [
        f["label"] or f["tag"]
        for f in focused
        if f.get("inHeader") and f.get("visible") and not f["outline"] and not f["shadow"]
    ]
    if not bare:
        return []
    return [f"{where}: no focus ring on {len(bare)} control(s): " + ", ".join(bare[:5])]


def _tab_through(pw_page, want_control: bool) -> tuple[int | None, list[dict]]:
    """Press Tab from page load: (presses to the first control or None, focused elements).
    A skip link to the controls is followed (Enter, counted as a press). Without a control
    on the page, Tab goes on until it leaves the header and navigation."""
    focused, n = [], 0
    while n < TAB_LIMIT:
        n += 1
        pw_page.keyboard.press("Tab")
        f = pw_page.evaluate(js("a11y_focused"))
        if f.get("none"):
            continue
        focused.append(f)
        if f.get("skipToControl") and want_control:
            n += 1
            pw_page.keyboard.press("Enter")
            f = pw_page.evaluate(js("a11y_focused"))
        if f.get("control"):
            return n, focused
        if not want_control and not f["inHeader"] and n > 5:
            break
    return None, focused


def _page_at(browser, page: Path, width: int, rel: str) -> tuple[list[str], dict]:
    where = f"{rel} @{width}px"
    with offline_page(browser, width) as pw_page:
        pw_page.set_viewport_size({"width": width, "height": HEIGHTS[width]})
        pw_page.goto(page.as_uri(), wait_until="load", timeout=30_000)
        pw_page.wait_for_timeout(500)
        want = pw_page.evaluate(js("a11y_has_control"))
        presses, focused = _tab_through(pw_page, want)
        pw_page.evaluate(js("lazy_typeset_all"))
        pw_page.wait_for_timeout(800)  # the page's scripts react to the equations typeset
        pw_page.add_script_tag(path=str(AXE))
        violations = pw_page.evaluate(js("a11y_axe"), [list(AXE_RULES), list(AXE_TAGS)])
    fails = check_axe(where, violations) + check_rings(where, focused)
    if want:
        fails += check_tabs(where, presses)
    return fails, {"violations": violations, "presses": presses if want else "-"}


def check_a11y(root: Path, pages: list[Path], browser, parse) -> tuple[list[str], int, list]:
    """Every page at each of A11Y_WIDTHS; (problems, checks, rows for the summary table)."""
    if not AXE.is_file():
        return [f"no axe-core at {AXE}: run .ci/vendor.sh (make vendor)"], 1, []
    fails, n, rows = [], 0, []
    for page in pages:
        rel = page.relative_to(root).as_posix()
        soup = parse(page)
        if soup.find("meta", attrs={"http-equiv": re.compile("^refresh$", re.I)}):
            continue
        fails += check_head(rel, soup) + check_ids(rel, soup)
        row = {
            "page": rel,
            "viewports": len(soup.find_all("meta", attrs={"name": "viewport"})),
            "dup_ids": len(duplicate_ids(soup)),
        }
        for width in A11Y_WIDTHS:
            try:
                page_fails, seen = _page_at(browser, page, width, rel)
            except Exception as e:  # noqa: BLE001 - a page that cannot be driven fails
                page_fails, seen = [f"{rel} @{width}px: a11y check failed: {e}"], {}
            fails += page_fails
            row[width] = seen
            n += 1
        rows.append(row)
    return fails, n, rows


def summary_lines(rows: list) -> list[str]:
    """Axe violations by rule (elements, both widths), Tab presses, viewport tags, duplicate ids."""
    by_rule: Counter = Counter()
    links = 0
    lines = []
    for row in rows:
        tabs = []
        for width in A11Y_WIDTHS:
            seen = row.get(width) or {}
            for v in seen.get("violations", []):
                by_rule[v["id"]] += len(v["nodes"])
                if v["id"] == "color-contrast":
                    links += sum(bool(x.get("link")) for x in v["nodes"])
            tabs.append(f"{width}px {seen.get('presses', '?')}")
        lines.append(
            f"  {row['page']}: viewport tags {row['viewports']}, duplicate ids "
            f"{row['dup_ids']}, Tab presses to the first slider: {', '.join(tabs)}"
        )
    rules = ", ".join(f"{k} {v}" for k, v in by_rule.most_common()) or "none"
    lines.append(f"  axe violations (elements, both widths): {rules}")
    lines.append(f"  low-contrast links: {links}")
    return lines
