"""The command line: ``python .ci/browser_check _build/html [--bib references.bib]
[--screenshots DIR] [--chromium PATH] [--lab-chapter NOTEBOOK]``; exit status 0 when every
check passed, 1 on any failure, 2 when the check cannot run."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from . import a11y, figures, jupyterlab, live, pdf, prose, report, search, static, toggles
from . import browser as page_checks
from . import math as math_fit

BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="browser_check",
        description="Open every page of the built book in headless Chromium and check what a "
        "reader would see.",
    )
    ap.add_argument("html", type=Path, help="the built book, e.g. _build/html")
    ap.add_argument("--bib", type=Path, help="check every entry of this .bib file is cited")
    ap.add_argument("--screenshots", type=Path, help="default: <html>/../screenshots")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument(
        "--lab-chapter",
        default=jupyterlab.CHAPTER,
        help="the notebook of downloads/notebooks.zip opened in JupyterLab (default: %(default)s)",
    )
    return ap.parse_args(argv)


def cannot_run(root: Path, chromium: str) -> str | None:
    """Why the check cannot run here, or None."""
    if not (root / "_static").is_dir():
        return f"{root} is not a built Sphinx HTML book"
    if not Path(chromium).is_file():
        return f"no Chromium at {chromium}"
    try:
        import playwright.sync_api  # noqa: F401 - only whether it is there
    except ImportError:
        return "playwright is missing (pinned in requirements.txt)"
    return None


def fresh_screenshots(folder: Path) -> Path:
    """The screenshot folder, emptied of an earlier run's screenshots."""
    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    return folder


class Run:
    """The state of one run: the failures by page (or group), the checks by kind, the hosts
    the pages tried to reach, and the rows of the budget and alt-text tables."""

    def __init__(self, root: Path, shots: Path):
        self.root, self.shots = root, shots
        self.pages = static.page_list(root)
        self.failures: dict[str, list[str]] = {}
        self.totals: Counter = Counter()
        self.remote: Counter = Counter()
        self.stats: dict = {"alt": [], "budget": []}

    def record(self, where: str, kind: str, fails: list[str], n: int) -> None:
        self.totals[kind] += n
        if fails:
            self.failures.setdefault(where, []).extend(fails)

    def check_pages(self, browser) -> None:
        """Every page, one after the other, with a line each."""
        ids = static.Ids()
        # Every page of the book proper (the navigation must list each one).
        chapters = {str(p) for p in sorted((self.root / "book").glob("*.html"))}
        for page in self.pages:
            rel = page.relative_to(self.root).as_posix()
            fails, checks, secs = page_checks.check_page(
                page, self.root, browser, self.shots, ids, self.remote, chapters, self.stats
            )
            self.totals.update(checks)
            print(report.page_line(rel, fails, checks, secs), flush=True)
            if fails:
                self.failures[rel] = fails

    def check_in_browser(self, chromium: str) -> None:
        """The pages, search, collapsed outputs and live figures, in one Chromium."""
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=BROWSER_ARGS)
            print(f"browser-check: {len(self.pages)} pages with Chromium {browser.version}")
            self.check_pages(browser)
            self.record("search.html", "search", *search.check_search(self.root, browser))
            fails, n, rows = math_fit.check_math_fit(self.root, self.pages, browser)
            math_fit.report_math_fit(rows)
            self.record("(display equations)", "math-fit", fails, n)
            fails, n = toggles.check_toggles(self.root, self.pages, browser)
            self.record("(collapsed outputs)", "toggles", fails, n)
            fails, n, rows = a11y.check_a11y(self.root, self.pages, browser, static.parse)
            print("browser-check: accessibility:", *a11y.summary_lines(rows), sep="\n")
            self.record("(accessibility)", "a11y", fails, n)
            fails, n = figures.check_figures(self.root, self.pages, browser)
            self.record("(figures)", "figures", fails, n)
            fails, n, _ = prose.check_prose(self.root, self.pages, browser)
            self.record("(prose first)", "prose", fails, n)
            fails, n, rows, recomputed = live.check_live_figures(
                self.root, self.pages, browser, self.shots
            )
            report.report_live(rows, n, recomputed)
            self.record("(live figures)", "live-figures", fails, n)
            browser.close()

    def check_lab(self, chromium: str, chapter: str) -> None:
        """A chapter from the site's notebooks.zip, opened in JupyterLab, in its own Chromium."""
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=BROWSER_ARGS)
            fails, n = jupyterlab.check_jupyterlab(self.root, browser, self.shots, chapter)
            browser.close()
        self.record("(jupyterlab)", "jupyterlab", fails, n)

    def check_files(self, bib: Path | None) -> None:
        """The PDF, and (with a .bib file) the bibliography."""
        self.record("(pdf)", "pdf", *pdf.check_pdf(self.root, self.pages))
        if bib:
            self.record(
                "(bibliography)", "bibliography", *static.check_bibliography(self.root, bib)
            )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = args.html.resolve()
    why = cannot_run(root, args.chromium)
    if why:
        print(f"browser-check: FAILED: {why}")
        return 2
    run = Run(root, fresh_screenshots(args.screenshots or root.parent / "screenshots"))
    t0 = time.perf_counter()
    run.check_in_browser(args.chromium)
    run.check_lab(args.chromium, args.lab_chapter)
    report.report_budget(run.stats["budget"])
    report.report_alt(run.stats["alt"])
    run.check_files(args.bib)
    return report.summary(
        run.failures, run.totals, run.remote, len(run.pages), time.perf_counter() - t0, run.shots
    )
