"""The navigation at each width: the button opens the drawer (phone, tablet) or hides and shows
the sidebar (desktop), the drawer lists every page of the book, and Escape closes it.

The driving functions click and wait; the pure ones (``*_problems``, :func:`missing_pages`,
:func:`click_error`) judge the states js/nav.js reports.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from .scripts import js
from .settings import DESKTOP_WIDTH


def click_error(message: str) -> str:
    """Playwright's first line, and the line of its call log that says what got in the way
    (another element over the button, an element that never stops moving, ...)."""
    lines = [ln.strip(" -") for ln in message.splitlines() if ln.strip()]
    why = [ln for ln in lines if "intercepts" in ln or "not " in ln or "waiting for" in ln]
    return "; ".join(lines[:1] + why[-1:])


def hide_problems(width: int, state: dict) -> list[str]:
    """Desktop: the first click hid the sidebar."""
    if not state["hidden"] or state["shown"]:
        return [f"{width}px: the navigation button does not hide the sidebar"]
    return []


def show_problems(width: int, state: dict) -> list[str]:
    """Desktop: the second click showed the sidebar again."""
    if not state["shown"]:
        return [f"{width}px: the navigation button does not show the sidebar again"]
    return []


def open_problems(width: int, opened: dict) -> list[str]:
    """Phone and tablet: the click opened the drawer as a dialog."""
    if not opened["dialog"]:
        return [f"{width}px: the navigation button does not open the drawer"]
    return []


def missing_pages(width: int, nav: dict, expected: set[str]) -> list[str]:
    """The navigation lists every page of the book (``expected``: their file paths)."""
    listed = {unquote(urlsplit(u).path) for u in nav.get("links", [])}
    missing = sorted(e for e in expected if e not in listed)
    if not missing:
        return []
    names = ", ".join(Path(m).stem for m in missing[:4])
    return [f"{width}px: the navigation lists {len(missing)} chapters too few ({names})"]


def nav_state(pw_page, want: str, timeout_ms: int = 5_000) -> dict:
    """The sidebar's state once the state ``want`` names (js/nav.js) holds, or when
    ``timeout_ms`` have passed: a fixed pause would be too short on a loaded machine and the
    sidebar's 0.25 s transition too slow for one."""
    try:
        pw_page.wait_for_function(js("nav"), arg=want, timeout=timeout_ms, polling=50)
    except Exception:  # noqa: BLE001 - the caller reports the state it finds
        pass
    pw_page.wait_for_timeout(300)  # the transition's end: links are read from the final layout
    return pw_page.evaluate(js("nav"))


def close_drawer(pw_page) -> str | None:
    """Close the navigation drawer if it is open (Escape, as a reader would); a failure if it
    stays open, since it would cover the page for every later check."""
    if not pw_page.evaluate(js("nav"))["dialog"]:
        return None
    pw_page.keyboard.press("Escape")
    if nav_state(pw_page, "closed")["dialog"]:
        return "Escape does not close the navigation drawer"
    return None


def _click(toggle, width: int, fails: list[str]) -> bool:
    try:
        toggle.click(timeout=10_000)
        return True
    except Exception as e:  # noqa: BLE001 - reported with what blocked the click
        msg = click_error(str(e))
        fails.append(f"{width}px: the navigation button cannot be clicked: {msg}")
        return False


def _desktop(pw_page, toggle, width: int, fails: list[str]) -> bool:
    """Hide the sidebar and show it again; False when a click failed."""
    if not _click(toggle, width, fails):
        return False
    fails += hide_problems(width, nav_state(pw_page, "hidden"))
    if not _click(toggle, width, fails):
        return False
    fails += show_problems(width, nav_state(pw_page, "shown"))
    return True


def check_nav(pw_page, width: int, expected: set[str]) -> list[str]:
    """Open the navigation drawer (or, on a desktop, hide and show the sidebar), and check it
    lists every page of ``expected``."""
    toggles = [b for b in pw_page.query_selector_all(".primary-toggle") if b.is_visible()]
    if not toggles:
        return [f"{width}px: no visible navigation button"]
    fails: list[str] = []
    if width >= DESKTOP_WIDTH:
        # The sidebar is there from the start; the button hides it, and shows it again.
        nav = pw_page.evaluate(js("nav"))
        if not _desktop(pw_page, toggles[0], width, fails):
            return fails
    else:
        if not _click(toggles[0], width, fails):
            return fails
        nav = nav_state(pw_page, "open")
        fails += open_problems(width, nav)
    return fails + missing_pages(width, nav, expected)
