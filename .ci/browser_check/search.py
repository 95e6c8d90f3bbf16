"""The search page: a query finds snippets, and no snippet shows raw TeX. The book is served
over HTTP for this one check: from file:// the search page cannot fetch the pages it cuts its
snippets from."""

from __future__ import annotations

import contextlib
import functools
import http.server
import re
import threading
from pathlib import Path

from .scripts import js
from .settings import RAW_TEX

QUERY = "gradient"
# TeX whose backslash was stripped but whose command was left as a word ("mathcal A = {a_1,
# dots"): a snippet must read like the rendered text.
TEX_WORDS = re.compile(
    r"\b(?:mathcal|mathbb|mathbf|mathrm|operatorname|ldots|cdots|dots|frac|sqrt|lceil|rceil"
    r"|varepsilon|Theta|Omega|textstyle|displaystyle)\b|\bleft[(\[|]|\bright[)\]|]"
)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def serve(root: Path):
    """Serve ``root`` on a free port of 127.0.0.1 for as long as the block runs; yield the port."""
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_port
    finally:
        server.shutdown()


def check_snippets(snippets: list[str]) -> list[str]:
    """No snippet shows raw TeX or TeX command words (the first three of each are named)."""
    fails = []
    for pattern, what in ((RAW_TEX, "raw TeX"), (TEX_WORDS, "a TeX command word")):
        for t in [t for t in snippets if pattern.search(t)][:3]:
            m = pattern.search(t)
            cut = t[max(0, m.start() - 30) : m.end() + 30]
            fails.append(f"{what} in a search snippet: {cut!r}")
    return fails


def _snippets(browser, url: str) -> list[str]:
    page = browser.new_page()
    page.goto(url)
    page.wait_for_function(js("search_ready"), timeout=30_000)
    page.wait_for_timeout(1000)
    snippets = page.evaluate(js("search_snippets"))
    page.close()
    return snippets


def check_search(root: Path, browser) -> tuple[list[str], int]:
    """Search snippets show no raw TeX."""
    try:
        with serve(root) as port:
            snippets = _snippets(browser, f"http://127.0.0.1:{port}/search.html?q={QUERY}")
    except Exception as e:  # noqa: BLE001 - reported as a failure
        return [f"search gave no snippets: {str(e).splitlines()[0]}"], 1
    fails = check_snippets(snippets)
    raw = sum(bool(RAW_TEX.search(t)) for t in snippets)
    words = sum(bool(TEX_WORDS.search(t)) for t in snippets)
    print(
        f"browser-check: search: {len(snippets)} snippets for {QUERY!r}, {raw} with raw TeX, "
        f"{words} with TeX command words"
    )
    return fails, len(snippets)
