"""Checks of what the browser saw on a loaded page: math, images, widgets, layout, alt text,
weight and load time, local requests, remote requests and the console.

The browser (browser.py) runs the scripts in js/ and records what it saw in a :class:`Seen`;
every function here is a pure function of that record and returns the problems it finds.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .settings import (
    ALLOWED_REMOTE_HOSTS,
    BUDGET_BYTES,
    BUDGET_SECONDS,
    ESSENTIAL_TYPES,
    TRIVIAL_ALT,
    WIDGET_AS_TEXT,
)


@dataclass
class Seen:
    """What the browser saw on one page.

    ``info`` is js/page.js's result, ``alts`` js/alt.js's, ``layout`` js/layout.js's at each
    width; ``requests`` the remote requests the page made, as (URL, resource type); ``blocked``
    their URLs; ``console_errors`` (text, URL) pairs; ``driving`` the problems found while
    driving the page (MathJax that never started, the navigation: nav.py); ``weight`` the
    bytes of every local file loaded, and ``ready`` the seconds until the page was ready, the
    fastest of ``tries`` loads.
    """

    info: dict
    alts: list = field(default_factory=list)
    layout: dict = field(default_factory=dict)
    has_mathjax: bool = False
    has_state: bool = False
    ready: float = 0.0
    tries: int = 1
    weight: int = 0
    requests: list = field(default_factory=list)
    blocked: list = field(default_factory=list)
    local_failed: list = field(default_factory=list)
    console_errors: list = field(default_factory=list)
    page_errors: list = field(default_factory=list)
    driving: list = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict) -> Seen:
        """A record read back from JSON, where the layout's widths are strings."""
        data = dict(data)
        data["layout"] = {int(w): lay for w, lay in data.get("layout", {}).items()}
        data["console_errors"] = [tuple(e) for e in data.get("console_errors", [])]
        return cls(**data)


def remote_host(url: str) -> str:
    return urlsplit(url).hostname or url[:40]


def check_remote(requests: list) -> list[str]:
    """No remote script, style sheet, font, image or media: the book is a self-contained
    folder (hosts in ALLOWED_REMOTE_HOSTS apart)."""
    return [
        f"remote {kind} requested (book must be offline): {url}"
        for url, kind in requests
        if kind in ESSENTIAL_TYPES and remote_host(url) not in ALLOWED_REMOTE_HOSTS
    ]


def check_layout(layout: dict) -> tuple[list[str], Counter]:
    """At each width: nothing wider than the viewport, no display equation cut off."""
    fails, checks = [], Counter()
    for width, lay in layout.items():
        checks["page-width"] += 1
        if lay["pageWidth"] > lay["viewport"]:
            what = "; ".join(lay["wide"]) or "?"
            fails.append(
                f"{width}px: page is {lay['pageWidth']}px wide, wider than the viewport ({what})"
            )
        checks["math-clipping"] += 1
        for eq in lay["clipped"][:3]:
            fails.append(f"{width}px: display equation clipped: {eq!r}")
    checks["navigation"] += len(layout)
    return fails, checks


def check_alt(alts: list[dict]) -> tuple[list[str], int, tuple[int, int, int]]:
    """Every image of the article, apart from those a live widget draws, has a real alt text.
    Also returns (images checked, images without, images left to the widget check)."""
    own = [a for a in alts if not a.get("widget")]
    trivial = [a for a in own if TRIVIAL_ALT.search(a["alt"] or "")]
    fails = (
        [f"{len(trivial)} images without a real alt text, e.g. {trivial[0]['src']}"]
        if trivial
        else []
    )
    return fails, len(own), (len(own), len(trivial), len(alts) - len(own))


def check_budget(weight: int, ready: float, tries: int) -> list[str]:
    """The page is ready within BUDGET_SECONDS and loads at most BUDGET_BYTES."""
    fails = []
    if ready > BUDGET_SECONDS:
        fails.append(
            f"ready after {ready:.2f} s (fastest of {tries} cold loads), over the "
            f"{BUDGET_SECONDS:.0f} s budget"
        )
    # Weight is the site's doing: it fails on every page.
    if weight > BUDGET_BYTES:
        fails.append(
            f"page loads {weight / 1e6:.2f} MB, over the {BUDGET_BYTES / 1e6:.0f} MB budget"
        )
    return fails


def page_weight(urls) -> int:
    """Bytes of every local file among the ``file:`` URLs a page loaded, uncompressed."""
    files = {Path(unquote(urlsplit(u).path)) for u in urls}
    return sum(f.stat().st_size for f in files if f.is_file())


def check_math(info: dict, has_mathjax: bool) -> list[str]:
    """Every math element typeset by MathJax, no TeX error, no raw TeX in the text, and no
    formula in the Tab order."""
    fails = []
    if info["math"] and not has_mathjax:
        fails.append(f"{info['math']} math elements but no MathJax script on the page")
    fails += [f"math not typeset by MathJax: {tex!r}" for tex in info["untypeset"][:5]]
    fails += [f"MathJax TeX error: {err!r}" for err in info["merror"][:5]]
    fails += [f"raw TeX left in the page text: {snippet!r}" for snippet in info["raw"][:5]]
    if info.get("mathTabStops"):
        fails.append(f"{info['mathTabStops']} formulas are in the Tab order (MathJax's menu)")
    return fails


def check_images(info: dict) -> list[str]:
    """Every image finished loading with a width."""
    return [
        f"image did not load (naturalWidth {img['w']}): {img['src']}"
        for img in info["images"]
        if not img["ok"]
    ]


def check_widgets(info: dict, has_state: bool) -> list[str]:
    """Every embedded widget view is drawn, and no output shows a widget as plain text."""
    hint = (
        "" if has_state else " (no widget state on the page: execute with store_widget_state=True)"
    )
    fails = [
        f"widget {w['id']} not rendered: {w['what']}{hint}"
        for w in info["widgets"]
        if not w["visible"]
    ]
    fails += [
        f"a widget is shown as text (run with store_widget_state=True): {text[:60]!r}"
        for text in info["widgetText"]
        if WIDGET_AS_TEXT.search(text)
    ]
    return fails


def _vendored(url: str) -> bool:
    """A file .ci/vendor.sh puts in the site (MathJax, the widget scripts, require.js)."""
    return any(f"/_static/{d}/" in url for d in ("mathjax", "widgets")) or "/require.js" in url


def check_local_requests(local_failed: list[str]) -> list[str]:
    """No request for a file of the book failed."""
    hint = " (a vendored file: run `bash .ci/vendor.sh`, then rebuild)"
    return [f"local file failed to load: {u}{hint if _vendored(u) else ''}" for u in local_failed]


def check_console(console_errors: list, blocked: list[str], page_errors: list[str]) -> list[str]:
    """No JavaScript error or uncaught exception, apart from those of the blocked requests."""
    blocked_set = set(blocked)
    fails = [
        f"console error: {text[:200]}" + (f" (at {url})" if url else "")
        for text, url in console_errors
        if url not in blocked_set and "ERR_BLOCKED_BY_CLIENT" not in text
    ]
    return fails + [f"uncaught exception: {e[:200]}" for e in page_errors]


def check_seen(seen: Seen) -> tuple[list[str], Counter]:
    """Every check of this module on one page: (problems, Counter of checks by kind). The
    alt-text check's tally is left to the caller (:func:`check_alt`)."""
    fails = check_remote(seen.requests) + seen.driving
    layout_fails, checks = check_layout(seen.layout)
    fails += layout_fails
    alt_fails, n_alts, _ = check_alt(seen.alts)
    checks["alt-text"] += n_alts
    fails += alt_fails
    fails += check_budget(seen.weight, seen.ready, seen.tries)
    checks.update({"budget": 1, "ready-time": 1, "raw-math": 1, "widget-text": 1})
    checks.update({"local-requests": 1, "console": 1})
    checks["math"] += seen.info["math"]
    fails += check_math(seen.info, seen.has_mathjax)
    checks["images"] += len(seen.info["images"])
    fails += check_images(seen.info)
    checks["widgets"] += seen.info["views"]
    fails += check_widgets(seen.info, seen.has_state)
    fails += check_local_requests(seen.local_failed)
    fails += check_console(seen.console_errors, seen.blocked, seen.page_errors)
    return fails, checks
