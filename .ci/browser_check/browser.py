"""Playwright driving of one page: load it offline, wait until it is ready, record what it
shows (a :class:`~observed.Seen`), take the screenshots, and check it with static.py,
nav.py and observed.py."""

from __future__ import annotations

import contextlib
import re
import time
from collections import Counter
from pathlib import Path

from . import nav, observed, static
from .scripts import js
from .settings import (
    BUDGET_SECONDS,
    HEIGHTS,
    LOCAL_SCHEMES,
    READY_TRIES,
    WIDGET_STATE,
    WIDGET_VIEW,
    WIDTHS,
)


def _abort(route) -> None:
    route.abort("blockedbyclient")


@contextlib.contextmanager
def offline_page(browser, width: int, on_remote=_abort):
    """A page in a fresh context (nothing cached) ``width`` px wide, which reaches nothing but
    local URLs: every other request goes to ``on_remote``, which must abort it."""
    context = browser.new_context(viewport={"width": width, "height": HEIGHTS[width]})
    try:
        pw_page = context.new_page()
        pw_page.route(lambda url: not url.startswith(LOCAL_SCHEMES), on_remote)
        yield pw_page
    finally:
        context.close()


def has_mathjax(soup) -> bool:
    return bool(soup.find("script", src=re.compile(r"mathjax|MathJax")))


def wait_for_images(pw_page) -> None:
    """Wait for the images the browser loads up front; lazy ones (below the fold, in collapsed
    solutions) load as the reader scrolls, like lazily typeset equations."""
    try:
        pw_page.wait_for_function(js("images_loaded"), timeout=15_000)
    except Exception:  # noqa: BLE001 - the image check names the image
        pass


def wait_until_ready(pw_page, soup) -> list[str]:
    """Wait until math is typeset, widgets drawn and images loaded; return what never was."""
    fails = []
    if has_mathjax(soup):
        try:
            pw_page.wait_for_function(js("mathjax_started"), timeout=20_000)
            pw_page.evaluate(js("mathjax_ready"))
        except Exception as e:  # noqa: BLE001 - reported as a page failure
            fails.append(f"MathJax did not start: {str(e).splitlines()[0]}")
    if soup.find("script", type=WIDGET_VIEW):
        try:
            pw_page.wait_for_function(js("widgets_done"), timeout=20_000)
        except Exception:  # noqa: BLE001 - the per-widget check says which one
            pass
    wait_for_images(pw_page)
    return fails


def cold_ready_seconds(page: Path, browser, soup) -> float:
    """Seconds from navigation until the page is ready, in a fresh context (nothing cached)."""
    with offline_page(browser, WIDTHS[-1]) as pw_page:
        t_load = time.perf_counter()
        pw_page.goto(page.as_uri(), wait_until="load", timeout=30_000)
        wait_until_ready(pw_page, soup)
        return time.perf_counter() - t_load


class Recorder:
    """What happens on a page while it is driven: the local files it loads and fails to load,
    its remote requests (aborted, and counted by host in ``remote``), console errors, uncaught
    exceptions, and the problems the driving itself finds (``driving``). Kept outside the
    page, so that what was found before a browser error is still reported."""

    def __init__(self, remote: Counter):
        self.remote = remote
        self.loaded: set[str] = set()
        self.requests, self.blocked, self.local_failed = [], [], []
        self.console_errors, self.page_errors, self.driving = [], [], []

    def listen(self, pw_page) -> None:
        pw_page.on("request", self._request)
        pw_page.on("console", self._console)
        pw_page.on("pageerror", lambda e: self.page_errors.append(str(e)))
        pw_page.on("requestfailed", self._failed)

    def on_remote(self, route) -> None:
        req = route.request
        self.blocked.append(req.url)
        self.requests.append((req.url, req.resource_type))
        self.remote[observed.remote_host(req.url)] += 1
        route.abort("blockedbyclient")

    def _request(self, r) -> None:
        if r.url.startswith("file:"):
            self.loaded.add(r.url)

    def _console(self, m) -> None:
        if m.type == "error":
            self.console_errors.append((m.text, (m.location or {}).get("url", "")))

    def _failed(self, r) -> None:
        if r.url.startswith("file:"):
            self.local_failed.append(f"{r.url} ({r.failure})")


def _at_each_width(pw_page, stem: str, shots: Path, chapters: set[str], rec: Recorder) -> dict:
    """Layout and navigation at each width, widest last, so the page is left as loaded."""
    layout = {}
    for width in WIDTHS:
        pw_page.set_viewport_size({"width": width, "height": HEIGHTS[width]})
        pw_page.wait_for_timeout(250)
        layout[width] = pw_page.evaluate(js("layout"))
        rec.driving += nav.check_nav(pw_page, width, chapters)
        pw_page.screenshot(path=str(shots / f"{stem}@{width}-nav.png"))
        closed = nav.close_drawer(pw_page)
        if closed:
            rec.driving.append(f"{width}px: {closed}")
    return layout


def _load(pw_page, page: Path, soup, stem: str, shots: Path, rec: Recorder) -> float:
    """Load the page; the seconds until it was ready. Then load everything the checks look
    at: lazy images, and lazily typeset equations."""
    t_load = time.perf_counter()
    pw_page.goto(page.as_uri(), wait_until="load", timeout=30_000)
    rec.driving += wait_until_ready(pw_page, soup)
    ready = time.perf_counter() - t_load
    pw_page.evaluate(js("images_eager"))
    wait_for_images(pw_page)
    if has_mathjax(soup):
        # Lazy typesetting leaves equations outside the viewport for later; the checks look
        # at every equation, so typeset the rest now (after the clock stopped).
        pw_page.evaluate(js("lazy_typeset_all"))
    pw_page.wait_for_timeout(300)  # let font and chunk requests settle
    pw_page.screenshot(path=str(shots / f"{stem}.png"), full_page=True)
    return ready


def observe(page: Path, rel: str, soup, browser, shots: Path, chapters: set[str], rec: Recorder):
    """Load the page at desktop width and record what the checks need (a Seen); its weight is
    that of the desktop load, before the other widths are visited."""
    stem = rel.replace("/", "__").removesuffix(".html")
    with offline_page(browser, WIDTHS[-1], on_remote=rec.on_remote) as pw_page:
        rec.listen(pw_page)
        ready = _load(pw_page, page, soup, stem, shots, rec)
        # What a desktop reader loads, every lazy image included; the widths below load the
        # phone forms of the figures too, which no single reader loads with the desktop ones.
        weight = observed.page_weight(set(rec.loaded))
        info, alts = pw_page.evaluate(js("page")), pw_page.evaluate(js("alt"))
        layout = _at_each_width(pw_page, stem, shots, chapters, rec)
    return observed.Seen(
        info=info,
        alts=alts,
        layout=layout,
        has_mathjax=has_mathjax(soup),
        has_state=soup.find("script", type=WIDGET_STATE) is not None,
        ready=ready,
        weight=weight,
        requests=rec.requests,
        blocked=rec.blocked,
        local_failed=rec.local_failed,
        console_errors=rec.console_errors,
        page_errors=rec.page_errors,
        driving=rec.driving,
    )


def retry_ready(seen, page: Path, browser, soup) -> None:
    """Time to ready depends on what else the machine is doing: a page over budget gets up to
    READY_TRIES cold loads in all, and the fastest counts."""
    while seen.ready > BUDGET_SECONDS and seen.tries < READY_TRIES:
        seen.ready = min(seen.ready, cold_ready_seconds(page, browser, soup))
        seen.tries += 1


def check_page(page: Path, root: Path, browser, shots: Path, ids, remote, chapters, stats):
    """Run every check on one page; return (failures, Counter of checks, seconds)."""
    t0 = time.perf_counter()
    rel = page.relative_to(root).as_posix()
    html = page.read_text(encoding="utf-8", errors="replace")
    soup = static.parse(page)
    fails, checks = static.check_static(page, root, soup, ids)
    if static.redirect_target(soup):
        return fails, checks, time.perf_counter() - t0
    rec = Recorder(remote)
    try:
        seen = observe(page, rel, soup, browser, shots, chapters, rec)
    except Exception as e:  # noqa: BLE001 - a page that cannot be loaded fails, others go on
        fails += observed.check_remote(rec.requests) + rec.driving
        fails.append(f"browser error: {str(e).splitlines()[0]}")
        return fails, checks, time.perf_counter() - t0
    retry_ready(seen, page, browser, soup)
    seen_fails, seen_checks = observed.check_seen(seen)
    stats["alt"].append((rel, *observed.check_alt(seen.alts)[2]))
    stats["budget"].append((rel, seen.weight, seen.ready, html.count("data-live-figure=")))
    checks.update(seen_checks)
    return fails + seen_fails, checks, time.perf_counter() - t0
