"""Prose first, on every page built from a notebook: the code the reader meets unfolded, the
summary on each fold, and text outputs at phone width.

- code share: at desktop width (1400 px) the visible (unfolded) cell inputs take at most
  ``MAX_INPUT_SHARE`` of the article's height;
- summaries: every folded cell input (cell tag ``hide-input``) names what it computes on its
  toggle (book/_ext/book_prose.py puts the cell's first-line comment there), never the generic
  "Show code cell source";
- outputs at 390 px, every fold opened: every text output (``.cell_output pre``) fits its box
  (``scrollWidth <= clientWidth + 1``) or shows that it scrolls. The sign is the scroll shadow
  of book-prose.css: a ``background-image`` of gradients, one of them attached ``local`` (it
  moves with the text and uncovers the shadow at a cut edge).

Also reported, not judged: outputs' share, the page's length in screens (900 px high at
1400 px wide, 844 px high at 390 px), and the text outputs shown unfolded that are longer than
``LONG_LINES`` lines (a listing of the library's code, an HTML output, is not counted).

Run on its own (PYTHONPATH=.ci): ``python -m browser_check.prose _build/html``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .settings import HEIGHTS

MAX_INPUT_SHARE = 0.10
PHONE, DESKTOP = 390, 1400
# An output longer than this shows a summary first, with the rest folded.
LONG_LINES = 15
GENERIC_PROMPTS = {"", "show code cell source", "show code cell content"}

# Heights at the current width, with every fold as the page loads it.
MEASURE_JS = """(LONG_LINES) => {
  // Chromium keeps the boxes of a closed <details> (content-visibility: hidden): not shown.
  const shown = (el) => el.getClientRects().length > 0 && !el.closest("details:not([open])");
  const sum = (sel) => [...document.querySelectorAll(sel)]
    .filter(shown).reduce((s, el) => s + el.getBoundingClientRect().height, 0);
  const article = document.querySelector("article.bd-article") || document.body;
  const prompts = [...document.querySelectorAll(".cell details.above-input > summary")]
    .map((s) => (s.querySelector("p.collapsed") || s).textContent.trim());
  return {
    article: article.getBoundingClientRect().height,
    page: document.documentElement.scrollHeight,
    input: sum(".cell .cell_input"),
    long: [...document.querySelectorAll(".cell_output .output:not(.text_html) pre")]
      .filter((p) => shown(p) && p.textContent.trim().split("\\n").length > LONG_LINES).length,
    output: sum(".cell .cell_output"),
    prompts,
  };
}"""

# Every fold opened; each text output that is wider than its box, and whether it shows the sign.
CUT_JS = """() => {
  for (const d of document.querySelectorAll(".cell details")) d.open = true;
  const cut = [];
  for (const pre of document.querySelectorAll(".cell_output pre")) {
    if (pre.getClientRects().length === 0 || pre.scrollWidth <= pre.clientWidth + 1) continue;
    const cs = getComputedStyle(pre);
    cut.push({
      text: pre.textContent.trim().split("\\n")[0].slice(0, 60),
      image: cs.backgroundImage,
      attachment: cs.backgroundAttachment,
    });
  }
  return cut;
}"""


def notebook_pages(root: Path, pages: list[Path]) -> list[Path]:
    """The pages built from a notebook (their source is an .ipynb under _sources/)."""
    return [
        p
        for p in pages
        if (root / "_sources" / p.relative_to(root).with_suffix(".ipynb")).is_file()
    ]


def has_scroll_sign(image: str, attachment: str) -> bool:
    """Whether computed ``background-image``/``background-attachment`` draw a scroll shadow: a
    gradient, and at least one layer attached ``local`` (the cover that moves with the text)."""
    return "gradient(" in image and "local" in (a.strip() for a in attachment.split(","))


def share_problems(rel: str, desktop: dict) -> list[str]:
    """The visible code input's share of the article at desktop width."""
    share = desktop["input"] / desktop["article"] if desktop["article"] else 0.0
    if share > MAX_INPUT_SHARE:
        return [
            f"{rel}: unfolded code input is {share:.0%} of the page at {DESKTOP}px "
            f"(at most {MAX_INPUT_SHARE:.0%})"
        ]
    return []


def summary_problems(rel: str, prompts: list[str]) -> list[str]:
    """Each fold of a cell input without a summary of its own."""
    return [
        f"{rel}: folded cell {i + 1} has no summary on its toggle ({p!r})"
        for i, p in enumerate(prompts)
        if p.strip().lower() in GENERIC_PROMPTS
    ]


def cut_problems(rel: str, cut: list[dict]) -> list[str]:
    """Each text output cut at the right edge at phone width with no sign that it scrolls."""
    return [
        f"{rel}: output cut at {PHONE}px with no scroll sign: {c['text']!r}"
        for c in cut
        if not has_scroll_sign(c["image"], c["attachment"])
    ]


def page_row(rel: str, desktop: dict, phone: dict, cut: list[dict]) -> dict:
    """What the report prints for a page."""
    article = desktop["article"] or 1.0
    return {
        "page": rel,
        "input": desktop["input"] / article,
        "output": desktop["output"] / article,
        "desktop_screens": desktop["page"] / HEIGHTS[DESKTOP],
        "phone_screens": phone["page"] / HEIGHTS[PHONE],
        "cut": sum(not has_scroll_sign(c["image"], c["attachment"]) for c in cut),
        "folded": len(desktop["prompts"]),
        "long": desktop["long"],
    }


def _measure(browser, page: Path) -> tuple[dict, dict, list[dict]]:
    from .browser import offline_page

    seen = {}
    for width in (DESKTOP, PHONE):
        with offline_page(browser, width) as pw_page:
            pw_page.goto(page.as_uri(), wait_until="load", timeout=30_000)
            pw_page.wait_for_timeout(300)
            seen[width] = pw_page.evaluate(MEASURE_JS, LONG_LINES)
            if width == PHONE:
                cut = pw_page.evaluate(CUT_JS)
    return seen[DESKTOP], seen[PHONE], cut


def check_prose(root: Path, pages: list[Path], browser) -> tuple[list[str], int, list[dict]]:
    """Every page built from a notebook: (problems, pages checked, a row per page)."""
    fails, rows = [], []
    chosen = notebook_pages(root, pages)
    for page in chosen:
        rel = page.relative_to(root).as_posix()
        try:
            desktop, phone, cut = _measure(browser, page)
        except Exception as e:  # noqa: BLE001 - reported as a failure
            fails.append(f"{rel}: prose check failed: {str(e).splitlines()[0]}")
            continue
        fails += share_problems(rel, desktop)
        fails += summary_problems(rel, desktop["prompts"])
        fails += cut_problems(rel, cut)
        rows.append(page_row(rel, desktop, phone, cut))
    report_rows(rows)
    return fails, len(chosen), rows


def report_rows(rows: list[dict]) -> None:
    print("browser-check: prose (code share at 1400px; length in screens; cut outputs at 390px)")
    head = ("input", 6), ("output", 7), ("desktop", 8), ("phone", 6), ("cut", 4)
    head += ("folded", 6), ("long", 4)
    print(f"  {'page':38} " + " ".join(f"{h:>{w}}" for h, w in head))
    for r in rows:
        print(
            f"  {r['page']:38} {r['input']:6.1%} {r['output']:7.1%} "
            f"{r['desktop_screens']:8.1f} {r['phone_screens']:6.1f} {r['cut']:4d} "
            f"{r['folded']:6d} {r['long']:4d}"
        )


def main(argv: list[str] | None = None) -> int:
    from playwright.sync_api import sync_playwright

    from . import static

    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]).resolve()
    chromium = args[1] if len(args) > 1 else "/usr/bin/chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        fails, n, _ = check_prose(root, static.page_list(root), browser)
        browser.close()
    for f in fails:
        print("  FAIL", f)
    print(f"browser-check: prose: {n} pages, {len(fails)} problems")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
