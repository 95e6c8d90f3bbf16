"""Collapsed outputs: each output hidden behind a toggle (cell tag ``hide-output``) is hidden
when the page loads, and shown once its toggle is clicked."""

from __future__ import annotations

from pathlib import Path

from .browser import offline_page
from .settings import WIDTHS


def toggle_problems(where: str, found: bool, shown_before: bool, shown_after: bool) -> list[str]:
    """One collapsed output: it has a toggle (``found``), is hidden before the click and shown
    after it. ``where`` names the page and the output."""
    if not found:
        return [f"{where} has no toggle"]
    fails = []
    if shown_before:
        fails.append(f"{where} is shown before its toggle")
    if not shown_after:
        fails.append(f"{where} stays hidden when toggled")
    return fails


def _try_toggle(pw_page, cell) -> tuple[bool, bool, bool]:
    """(has a toggle, output shown before the click, output shown after it)."""
    # The output's own toggle: a cell whose input is folded too has two.
    toggle = cell.query_selector("details:has(.cell_output) > summary")
    output = cell.query_selector("details .cell_output")
    if toggle is None or output is None:
        return False, False, False
    before = output.is_visible()
    toggle.scroll_into_view_if_needed()
    toggle.click()
    pw_page.wait_for_timeout(200)
    return True, before, output.is_visible()


def _check_page(browser, page: Path, rel: str) -> tuple[list[str], int]:
    fails, n = [], 0
    with offline_page(browser, WIDTHS[0]) as pw_page:
        try:
            pw_page.goto(page.as_uri(), wait_until="load", timeout=30_000)
            for i, cell in enumerate(pw_page.query_selector_all(".cell.tag_hide-output")):
                n += 1
                where = f"{rel}: collapsed output {i + 1}"
                fails += toggle_problems(where, *_try_toggle(pw_page, cell))
        except Exception as e:  # noqa: BLE001 - reported as a failure
            fails.append(f"{rel}: toggle check failed: {str(e).splitlines()[0]}")
    return fails, n


def check_toggles(root: Path, pages: list[Path], browser) -> tuple[list[str], int]:
    """Every collapsed output of every page, at phone width."""
    fails, n = [], 0
    for page in pages:
        if "tag_hide-output" not in page.read_text(encoding="utf-8", errors="replace"):
            continue
        page_fails, page_n = _check_page(browser, page, page.relative_to(root).as_posix())
        fails, n = fails + page_fails, n + page_n
    print(f"browser-check: collapsed outputs: {n} toggles tried")
    return fails, n
