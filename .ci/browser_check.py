"""Open every page of the built book in headless Chromium and check what a reader would see.

Usage: ``python .ci/browser_check.py _build/html [--bib references.bib] [--screenshots DIR]
[--chromium PATH]``

For each HTML page (the redirect ``index.html`` is only link-checked), it asserts:

- math: every ``.math`` element holds a MathJax ``mjx-container``, MathJax reported no TeX
  error (``mjx-merror``), and no raw ``\\(``, ``\\[``, ``$$`` or ``\\begin{`` is left in the
  page text outside code;
- images: every ``<img>`` finished loading with ``naturalWidth > 0``;
- widgets: every embedded widget view (``application/vnd.jupyter.widget-view+json``) was
  replaced by a visible rendered element, and no output shows a widget as plain text (a sign
  that the notebook was executed without ``store_widget_state``). The chapters embed no
  widget view any more (their figures are live figures, below); the check stays for any that
  comes back;
- live figures (``attnlib.widgets.live_figure``), at 390 and 1400 px: the page stores one
  frame per point of the controls' grid; each control has a label, a readout and (a slider)
  an ``aria-valuetext`` with the value as a reader writes it; moving each control (arrow key
  on a slider, another option of a drop-down list) changes the image, its readout and its
  alt text, which names the control values; and the frame shown after each move has exactly
  the pixels that ``attnlib.widgets.render_frame`` gives for the ``data-draw`` function at
  the frame's point, recomputed in this process (no tolerance: same code, same matplotlib
  and Pillow). A screenshot of each figure after the moves goes next to the page's;
- local files: no request for a ``file://`` URL failed (a 404 in a served book);
- console: no JavaScript error or uncaught exception, apart from the errors that the blocked
  requests below cause;
- links: every internal ``href``/``src`` resolves to a file in the build, and every
  ``#fragment`` to an element id in its target page;
- downloads: a page built from a notebook links to its ``.ipynb``;
- budget: every page loads at most ``BUDGET_BYTES`` (every file, uncompressed) and is ready
  (math typeset, widgets drawn, first-screen images loaded) within ``BUDGET_SECONDS`` of
  navigation, the fastest of up to ``READY_TRIES`` cold loads;
- alt text: every image of the article has a real alt text (not empty, a file name or a hash),
  on every page; images drawn by a live ipywidgets widget are left to the widget check;
- figures: every image a code cell draws on a chapter page sits in a ``<figure>`` whose caption
  is numbered "Figure N.k", N the chapter's number (the unnumbered preface: "Figure k"), and k
  runs 1, 2, ... on each page; a live figure, which redraws a numbered figure at other points,
  is not numbered;
- glossary: every page built from a notebook links at least one glossary term, every term link
  points at a term of the glossary page, and no term is left unlinked (an unknown term);
- collapsed outputs: each output hidden behind a toggle (``hide-output``) opens when its
  toggle is clicked;
- bibliography (with ``--bib references.bib``): every entry of the .bib file is listed on the
  bibliography page, i.e. it is cited somewhere in the book.

The browser reaches nothing but ``file://``: every request to a remote host is aborted and
listed. A remote *script, style sheet, font or image* is a failure (the book must be a
self-contained folder) unless its host is in ``ALLOWED_REMOTE_HOSTS`` with a reason.

A full-page screenshot of every page goes to ``_build/screenshots/`` (next to ``html/``).
Exit status 1 on any failure, with one line per failed check, naming the page.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urlsplit

from bs4 import BeautifulSoup

# Hosts a page may try to reach without failing the check, with the reason. The request is
# still blocked and listed in the summary. Keep this empty unless a reader loses nothing.
ALLOWED_REMOTE_HOSTS: dict[str, str] = {}

# Resource types whose remote loading would make the offline book incomplete.
ESSENTIAL_TYPES = {"script", "stylesheet", "font", "image", "media"}

# The text/plain fallback ipywidgets prints when no widget state was stored.
WIDGET_AS_TEXT = re.compile(
    r"^\s*(interactive|[A-Z]\w*(Slider|Box|Button|Dropdown|Output|Checkbox|Text|Tab|Accordion"
    r"|Select|Play|Label|HTML))\((children|value|description|layout|options)=",
    re.MULTILINE,
)
# MathJax's ui/lazy typesets equations as they scroll into view; this typesets all of them (the
# function exists only when the extension is loaded, e.g. not in the CDN build).
LAZY_TYPESET_ALL_JS = """async () => {
  const doc = window.MathJax && MathJax.startup && MathJax.startup.document;
  if (doc && doc.lazyTypesetAll) await doc.lazyTypesetAll();
  return true;
}"""

# What a reader's page may cost (issue: "a budget for page weight and load"): every file the page
# loads, uncompressed, shared JavaScript included; and the time from navigation until math is
# typeset, widgets drawn and images loaded.
BUDGET_BYTES = 3_000_000
BUDGET_SECONDS = 3.0
READY_TRIES = 3
# Widths checked for layout and navigation: phone, tablet, desktop. The main load is at the last.
WIDTHS = (390, 768, 1400)
HEIGHTS = {390: 844, 768: 1024, 1400: 900}
# An alt text that is empty, a file name or a hash says nothing about the figure.
TRIVIAL_ALT = re.compile(
    r"^\s*$|\.(png|jpe?g|svg|gif|webp)\s*$|^[0-9a-f]{16,}$|^(image|figure|img)$", re.I
)
# Raw TeX a reader must never see in the PDF.
RAW_TEX = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{|\\frac\{|\\mathcal\{|\\left[(\[]")
PDF_NAME = "downloads/fine-grained-complexity-of-training-attention.pdf"
SKIP_SCHEMES = ("http:", "https:", "mailto:", "javascript:", "data:", "tel:", "ftp:")
SKIP_DIRS = {"_static", "_sources", "_images", "_sphinx_design_static"}

PAGE_JS = r"""
() => {
  const skip = 'pre, code, script, style, textarea, mjx-container, .highlight, .MathJax';
  const out = {math: 0, typeset: 0, untypeset: [], merror: [], raw: [], images: [],
               views: 0, widgets: [], widgetText: []};
  for (const el of document.querySelectorAll('.math')) {
    out.math += 1;
    if (el.querySelector('mjx-container')) out.typeset += 1;
    else out.untypeset.push(el.textContent.trim().slice(0, 60));
  }
  for (const el of document.querySelectorAll('mjx-merror')) {
    out.merror.push((el.getAttribute('data-mjx-error') || el.textContent).slice(0, 80));
  }
  // MathJax 3 draws an undefined macro as its name in red (the noundefined extension); the
  // assistive MathML copy holds it as text.
  for (const el of document.querySelectorAll('mjx-container mtext[mathcolor="red"]')) {
    if (el.textContent.startsWith('\\')) {
      out.merror.push('undefined macro ' + el.textContent.slice(0, 60));
    }
  }
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const rawRe = /\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{/;
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement && n.parentElement.closest(skip)) continue;
    const m = n.textContent.match(rawRe);
    if (m) {
      const i = n.textContent.indexOf(m[0]);
      out.raw.push(n.textContent.slice(Math.max(0, i - 30), i + 40).replace(/\s+/g, ' '));
    }
  }
  for (const img of document.querySelectorAll('img')) {
    out.images.push({src: img.currentSrc || img.src, ok: img.complete && img.naturalWidth > 0,
                     w: img.naturalWidth});
  }
  for (const s of document.querySelectorAll(
      'script[type="application/vnd.jupyter.widget-view+json"]')) {
    out.views += 1;
    let id = '?';
    try { id = JSON.parse(s.textContent).model_id; } catch (e) {}
    const area = s.previousElementSibling;
    let visible = false, what = 'no rendered element';
    if (area && area.classList.contains('widget-subarea')) {
      const kids = area.querySelectorAll('*');
      what = 'empty widget area';
      for (const k of kids) {
        const r = k.getBoundingClientRect();
        const st = getComputedStyle(k);
        if (r.width > 0 && r.height > 0 && st.visibility !== 'hidden' && st.display !== 'none') {
          visible = true; what = k.className; break;
        }
      }
    }
    out.widgets.push({id, visible, what});
  }
  for (const pre of document.querySelectorAll('.cell_output pre, .output pre')) {
    out.widgetText.push(pre.textContent.slice(0, 200));
  }
  return out;
}
"""

LAYOUT_JS = r"""
() => {
  const out = {pageWidth: document.documentElement.scrollWidth, viewport: window.innerWidth,
               clipped: [], wide: []};
  for (const d of document.querySelectorAll('div.math')) {
    const c = d.querySelector('mjx-container');
    if (!c) continue;
    const cs = getComputedStyle(c), dr = d.getBoundingClientRect(), cr = c.getBoundingClientRect();
    if (dr.width === 0) continue;  // inside a collapsed solution
    const scrolls = ['auto', 'scroll'].includes(cs.overflowX);
    const overflowing = c.scrollWidth > c.clientWidth + 1;
    const outside = cr.right > dr.right + 1 || cr.left < dr.left - 1;
    if ((overflowing && !scrolls) || outside) {
      out.clipped.push((d.id || '') + ' ' + d.textContent.trim().slice(0, 50));
    }
  }
  if (out.pageWidth > out.viewport) {
    // Name the widest elements that stick out, to say what makes the page pan sideways.
    for (const el of document.querySelectorAll('.bd-article *')) {
      const r = el.getBoundingClientRect();
      if (r.right > out.viewport + 1 && getComputedStyle(el).position !== 'fixed') {
        const inScroller = el.parentElement && el.parentElement.closest(
          'pre, .highlight, .cell_output .output, div.math, .table-wrapper, table, mjx-container');
        if (!inScroller) out.wide.push(el.tagName.toLowerCase() + '.' +
          (el.className && el.className.baseVal === undefined ? el.className : '') +
          ' ' + Math.round(r.right) + 'px');
      }
      if (out.wide.length >= 3) break;
    }
  }
  return out;
}
"""

# Images of the article with their alt text. An image drawn by a live widget (inside a widget
# area, or in a cell tagged nbval-ignore-output that embeds a widget view) is marked: the widget
# check owns those.
ALT_JS = r"""
() => Array.from(document.querySelectorAll('.bd-article img')).map(i => {
  const cell = i.closest('.cell.tag_nbval-ignore-output');
  const widget = !!i.closest('.jupyter-widgets, .widget-subarea') || !!(cell && cell.querySelector(
      'script[type="application/vnd.jupyter.widget-view+json"]'));
  return {src: (i.getAttribute('src') || '').slice(-60), alt: i.getAttribute('alt'), widget};
})
"""

# The drawer: at desktop width the primary sidebar is shown and its toggle hides it; below,
# the toggle opens it as a dialog. Either way its links are counted where they are visible.
NAV_LINKS_JS = r"""
() => {
  const dialog = document.querySelector('#pst-primary-sidebar-modal');
  const holder = dialog && dialog.open ? dialog : document.querySelector('#pst-primary-sidebar');
  const r = holder ? holder.getBoundingClientRect() : {width: 0, height: 0};
  const st = holder ? getComputedStyle(holder) : {visibility: 'hidden'};
  const shown = r.width > 0 && r.height > 0 && st.visibility !== 'hidden';
  return {dialog: !!(dialog && dialog.open), shown,
          hidden: document.querySelector('#pst-primary-sidebar').classList.contains(
            'pst-sidebar-hidden'),
          links: shown ? Array.from(holder.querySelectorAll('nav a[href]')).map(a => a.href) : []};
}
"""

WIDGETS_DONE_JS = r"""
() => Array.from(document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]')).every(s => {
  const a = s.previousElementSibling;
  return a && a.classList.contains('widget-subarea') && a.querySelector('*') !== null;
})
"""


def page_list(root: Path) -> list[Path]:
    """Every HTML page of the build, outside Sphinx's asset folders."""
    return sorted(
        p for p in root.rglob("*.html") if not (set(p.relative_to(root).parts[:-1]) & SKIP_DIRS)
    )


class Ids:
    """Element ids of a page, parsed once."""

    def __init__(self):
        self._cache: dict[Path, set[str]] = {}

    def __call__(self, path: Path) -> set[str]:
        if path not in self._cache:
            soup = BeautifulSoup(path.read_text(encoding="utf-8", errors="replace"), "html.parser")
            ids = {t["id"] for t in soup.find_all(id=True)}
            ids |= {t["name"] for t in soup.find_all("a", attrs={"name": True})}
            self._cache[path] = ids
        return self._cache[path]


def redirect_target(soup: BeautifulSoup) -> str | None:
    meta = soup.find("meta", attrs={"http-equiv": re.compile("^refresh$", re.I)})
    if meta is None:
        return None
    m = re.search(r"url=(.+)$", meta.get("content", ""), re.I)
    return m.group(1).strip().strip("'\"") if m else None


def check_links(page: Path, root: Path, soup: BeautifulSoup, ids: Ids) -> tuple[list[str], int]:
    """Every internal href/src resolves to a file, and every fragment to an id."""
    fails, n = [], 0
    refs = [("a", "href"), ("link", "href"), ("script", "src"), ("img", "src"), ("source", "src")]
    targets = [
        (tag.name, tag[attr]) for name, attr in refs for tag in soup.find_all(name) if tag.get(attr)
    ]
    redirect = redirect_target(soup)
    if redirect:
        targets.append(("meta refresh", redirect))
    for kind, url in targets:
        url = url.strip()
        if not url or url.lower().startswith(SKIP_SCHEMES) or url.startswith("//"):
            continue
        parts = urlsplit(url)
        n += 1
        if parts.path:
            target = (page.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
        else:
            target = page
        try:
            target.relative_to(root.resolve())
        except ValueError:
            fails.append(f"{kind} {url!r} points outside the build")
            continue
        if not target.is_file():
            fails.append(f"{kind} {url!r}: no file {target.relative_to(root.resolve())}")
            continue
        frag = unquote(parts.fragment)
        if frag and target.suffix == ".html" and frag not in ids(target):
            fails.append(f"{kind} {url!r}: no element with id {frag!r} in {target.name}")
    return fails, n


def _words(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower())


def check_bibliography(root: Path, bib: Path) -> tuple[list[str], int]:
    """Every .bib entry's title appears on the page that holds the bibliography."""
    from pybtex.database import parse_file

    entries = parse_file(str(bib)).entries
    pages = [(p.read_text(encoding="utf-8", errors="replace"), p) for p in page_list(root)]
    pages = [(html.count('role="doc-biblioentry"'), html, p) for html, p in pages]
    count, html, page = max(pages, key=lambda t: t[0], default=(0, "", None))
    if not count:
        return [f"no page lists a bibliography, but {bib.name} has {len(entries)} entries"], 1
    text = _words(BeautifulSoup(html, "html.parser").get_text())
    fails = [
        f"{key} ({bib.name}) is not in the bibliography: cite it somewhere in the book"
        for key, entry in entries.items()
        if _words(re.sub(r"[{}\\]", "", entry.fields.get("title", key))) not in text
    ]
    return fails, len(entries)


def is_chapter(rel: str, root: Path) -> bool:
    """A page built from a notebook: the preface and the chapters."""
    return (root / "_sources" / Path(rel).with_suffix(".ipynb")).is_file()


def _click_error(e: Exception) -> str:
    """Playwright's first line, and the line of its call log that says what got in the way
    (another element over the button, an element that never stops moving, ...)."""
    lines = [ln.strip(" -") for ln in str(e).splitlines() if ln.strip()]
    why = [ln for ln in lines if "intercepts" in ln or "not " in ln or "waiting for" in ln]
    return "; ".join(lines[:1] + why[-1:])


def _nav_state(pw_page, want: str, timeout_ms: int = 5_000) -> dict:
    """The sidebar's state once ``want`` (a JavaScript condition on NAV_LINKS_JS's result
    ``s``) holds, or when ``timeout_ms`` have passed: a fixed pause would be too short on a
    loaded machine and the sidebar's 0.25 s transition too slow for one."""
    try:
        pw_page.wait_for_function(
            f"() => {{ const s = ({NAV_LINKS_JS.strip()})(); return {want}; }}",
            timeout=timeout_ms,
            polling=50,
        )
    except Exception:  # noqa: BLE001 - the caller reports the state it finds
        pass
    pw_page.wait_for_timeout(300)  # the transition's end: links are read from the final layout
    return pw_page.evaluate(NAV_LINKS_JS)


def close_drawer(pw_page) -> str | None:
    """Close the navigation drawer if it is open (Escape, as a reader would); a failure if it
    stays open, since it would cover the page for every later check."""
    if not pw_page.evaluate(NAV_LINKS_JS)["dialog"]:
        return None
    pw_page.keyboard.press("Escape")
    if _nav_state(pw_page, "!s.dialog")["dialog"]:
        return "Escape does not close the navigation drawer"
    return None


def check_nav(pw_page, width: int, expected: set[str]) -> tuple[list[str], dict]:
    """Open the navigation drawer (or, on a desktop, hide and show the sidebar)."""
    fails = []
    toggles = [b for b in pw_page.query_selector_all(".primary-toggle") if b.is_visible()]
    if not toggles:
        return [f"{width}px: no visible navigation button"], {}
    before = pw_page.evaluate(NAV_LINKS_JS)

    def click() -> bool:
        try:
            toggles[0].click(timeout=10_000)
            return True
        except Exception as e:  # noqa: BLE001 - reported with what blocked the click
            fails.append(f"{width}px: the navigation button cannot be clicked: {_click_error(e)}")
            return False

    if not click():
        return fails, {}
    if width >= 992:
        # Desktop: the sidebar is there from the start; the button hides it, and shows it again.
        nav = before
        after = _nav_state(pw_page, "s.hidden && !s.shown")
        if not after["hidden"] or after["shown"]:
            fails.append(f"{width}px: the navigation button does not hide the sidebar")
        if not click():
            return fails, {}
        if not _nav_state(pw_page, "s.shown")["shown"]:
            fails.append(f"{width}px: the navigation button does not show the sidebar again")
    else:
        nav = after = _nav_state(pw_page, "s.dialog && s.links.length > 0")
        if not after["dialog"]:
            fails.append(f"{width}px: the navigation button does not open the drawer")
    listed = {unquote(urlsplit(u).path) for u in nav.get("links", [])}
    missing = sorted(e for e in expected if e not in listed)
    if missing:
        names = ", ".join(Path(m).stem for m in missing[:4])
        fails.append(f"{width}px: the navigation lists {len(missing)} chapters too few ({names})")
    return fails, nav


def _wait_until_ready(pw_page, soup: BeautifulSoup) -> list[str]:
    """Wait until math is typeset, widgets drawn and images loaded; return what never was."""
    fails = []
    if soup.find("script", src=re.compile(r"mathjax|MathJax")):
        try:
            pw_page.wait_for_function(
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                timeout=20_000,
            )
            pw_page.evaluate("() => MathJax.startup.promise.then(() => true)")
        except Exception as e:  # noqa: BLE001 - reported as a page failure
            fails.append(f"MathJax did not start: {str(e).splitlines()[0]}")
    if soup.find("script", type="application/vnd.jupyter.widget-view+json"):
        try:
            pw_page.wait_for_function(WIDGETS_DONE_JS, timeout=20_000)
        except Exception:  # noqa: BLE001 - the per-widget check says which one
            pass
    # Images the browser loads up front; lazy ones (below the fold, in collapsed solutions)
    # load as the reader scrolls, like lazily typeset equations, and are not waited for here.
    _wait_for_images(pw_page)
    return fails


def _wait_for_images(pw_page) -> None:
    try:
        pw_page.wait_for_function(
            "() => Array.from(document.images).every(i => i.loading === 'lazy' || i.complete)",
            timeout=15_000,
        )
    except Exception:  # noqa: BLE001 - the image check names the image
        pass


def cold_ready_seconds(page: Path, browser, soup: BeautifulSoup) -> float:
    """Seconds from navigation until the page is ready, in a fresh context (nothing cached)."""
    context = browser.new_context(viewport={"width": WIDTHS[-1], "height": HEIGHTS[WIDTHS[-1]]})
    pw_page = context.new_page()
    pw_page.route(
        lambda url: not url.startswith(("file:", "data:", "blob:", "about:")),
        lambda r: r.abort("blockedbyclient"),
    )
    try:
        t_load = time.perf_counter()
        pw_page.goto(page.as_uri(), wait_until="load", timeout=30_000)
        _wait_until_ready(pw_page, soup)
        return time.perf_counter() - t_load
    finally:
        context.close()


def check_page(
    page: Path,
    root: Path,
    browser,
    shots: Path,
    ids: Ids,
    remote: Counter,
    chapters: set[str],
    stats: dict,
):
    """Run every check on one page; return (failures, number of checks, seconds)."""
    t0 = time.perf_counter()
    rel = page.relative_to(root).as_posix()
    html = page.read_text(encoding="utf-8", errors="replace")
    soup = BeautifulSoup(html, "html.parser")
    fails, n_links = check_links(page, root, soup, ids)
    checks = Counter(links=n_links)
    if redirect_target(soup):
        return fails, checks, time.perf_counter() - t0
    for kind, (kind_fails, n) in {
        "figures": check_figures(rel, root, soup),
        "glossary": check_glossary_links(page, rel, root, soup),
    }.items():
        checks[kind] += n
        fails.extend(kind_fails)

    # A page built from a notebook offers its .ipynb for download.
    src_nb = root / "_sources" / Path(rel).with_suffix(".ipynb")
    if src_nb.is_file():
        checks["download"] += 1
        if not soup.find("a", href=re.compile(r"\.ipynb$")):
            fails.append(f"no download link to {src_nb.name}")

    console_errors, page_errors, local_failed, blocked = [], [], [], []
    wide = WIDTHS[-1]
    context = browser.new_context(viewport={"width": wide, "height": HEIGHTS[wide]})
    pw_page = context.new_page()
    loaded: set[str] = set()
    pw_page.on("request", lambda r: loaded.add(r.url) if r.url.startswith("file:") else None)

    def route(r):
        req = r.request
        host = urlsplit(req.url).hostname or req.url[:40]
        blocked.append(req.url)
        remote[host] += 1
        if req.resource_type in ESSENTIAL_TYPES and host not in ALLOWED_REMOTE_HOSTS:
            fails.append(f"remote {req.resource_type} requested (book must be offline): {req.url}")
        r.abort("blockedbyclient")

    pw_page.route(lambda url: not url.startswith(("file:", "data:", "blob:", "about:")), route)
    pw_page.on(
        "console",
        lambda m: (
            console_errors.append((m.text, (m.location or {}).get("url", "")))
            if m.type == "error"
            else None
        ),
    )
    pw_page.on("pageerror", lambda e: page_errors.append(str(e)))

    def request_failed(r):
        if r.url.startswith("file:"):
            local_failed.append(f"{r.url} ({r.failure})")

    pw_page.on("requestfailed", request_failed)
    try:
        t_load = time.perf_counter()
        pw_page.goto(page.as_uri(), wait_until="load", timeout=30_000)
        has_mathjax = bool(soup.find("script", src=re.compile(r"mathjax|MathJax")))
        fails.extend(_wait_until_ready(pw_page, soup))
        ready = time.perf_counter() - t_load
        # Now load the lazy images too, for the image and alt-text checks below.
        pw_page.evaluate(
            "() => document.querySelectorAll('img[loading=lazy]').forEach(i => i.loading = 'eager')"
        )
        _wait_for_images(pw_page)
        if has_mathjax:
            # Lazy typesetting leaves equations outside the viewport for later; the checks
            # below look at every equation, so typeset the rest now (after the clock stopped).
            pw_page.evaluate(LAZY_TYPESET_ALL_JS)
        pw_page.wait_for_timeout(300)  # let font and chunk requests settle
        info = pw_page.evaluate(PAGE_JS)
        alts = pw_page.evaluate(ALT_JS)
        stem = rel.replace("/", "__").removesuffix(".html")
        shot = shots / (stem + ".png")
        pw_page.screenshot(path=str(shot), full_page=True)
        # Layout and navigation at each width, widest last, so the page is left as loaded.
        layout = {}
        for width in WIDTHS:
            pw_page.set_viewport_size({"width": width, "height": HEIGHTS[width]})
            pw_page.wait_for_timeout(250)
            layout[width] = pw_page.evaluate(LAYOUT_JS)
            nav_fails, _ = check_nav(pw_page, width, chapters)
            fails.extend(nav_fails)
            pw_page.screenshot(path=str(shots / f"{stem}@{width}-nav.png"))
            closed = close_drawer(pw_page)
            if closed:
                fails.append(f"{width}px: {closed}")
    except Exception as e:  # noqa: BLE001 - a page that cannot be loaded fails, others go on
        fails.append(f"browser error: {str(e).splitlines()[0]}")
        context.close()
        return fails, checks, time.perf_counter() - t0
    context.close()

    # Layout: nothing wider than the viewport, no display equation cut off.
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
    # Alt text, on every page.
    alt_fails, n_alts = check_alt(alts, rel, stats)
    checks["alt-text"] += n_alts
    fails.extend(alt_fails)
    # Weight and readiness: every local file the page loaded, uncompressed.
    files = {Path(unquote(urlsplit(u).path)) for u in loaded}
    weight = sum(f.stat().st_size for f in files if f.is_file())
    # Time to ready depends on what else the machine is doing: a page over budget gets up to
    # READY_TRIES cold loads in all, and the fastest counts.
    tries = 1
    while ready > BUDGET_SECONDS and tries < READY_TRIES:
        ready = min(ready, cold_ready_seconds(page, browser, soup))
        tries += 1
    stats["budget"].append((rel, weight, ready, html.count("data-live-figure=")))
    checks["budget"] += 1
    checks["ready-time"] += 1
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
    # A favicon, so browsers do not request a missing /favicon.ico.
    checks["favicon"] += 1
    if not soup.find("link", rel=lambda v: v and "icon" in v):
        fails.append("no favicon link")

    # Math.
    checks["math"] += info["math"]
    if info["math"] and not has_mathjax:
        fails.append(f"{info['math']} math elements but no MathJax script on the page")
    for tex in info["untypeset"][:5]:
        fails.append(f"math not typeset by MathJax: {tex!r}")
    for err in info["merror"][:5]:
        fails.append(f"MathJax TeX error: {err!r}")
    checks["raw-math"] += 1
    for snippet in info["raw"][:5]:
        fails.append(f"raw TeX left in the page text: {snippet!r}")
    # Images.
    checks["images"] += len(info["images"])
    for img in info["images"]:
        if not img["ok"]:
            fails.append(f"image did not load (naturalWidth {img['w']}): {img['src']}")
    # Widgets.
    checks["widgets"] += info["views"]
    has_state = soup.find("script", type="application/vnd.jupyter.widget-state+json") is not None
    hint = (
        "" if has_state else " (no widget state on the page: execute with store_widget_state=True)"
    )
    for w in info["widgets"]:
        if not w["visible"]:
            fails.append(f"widget {w['id']} not rendered: {w['what']}{hint}")
    checks["widget-text"] += 1
    for text in info["widgetText"]:
        if WIDGET_AS_TEXT.search(text):
            fails.append(
                f"a widget is shown as text (run with store_widget_state=True): {text[:60]!r}"
            )
    # Local requests and the console.
    checks["local-requests"] += 1
    for u in local_failed:
        vendored = any(f"/_static/{d}/" in u for d in ("mathjax", "widgets")) or "/require.js" in u
        hint = " (a vendored file: run `bash .ci/vendor.sh`, then rebuild)" if vendored else ""
        fails.append(f"local file failed to load: {u}{hint}")
    checks["console"] += 1
    blocked_set = set(blocked)
    for text, url in console_errors:
        if url in blocked_set or "ERR_BLOCKED_BY_CLIENT" in text:
            continue
        fails.append(f"console error: {text[:200]}" + (f" (at {url})" if url else ""))
    fails += [f"uncaught exception: {e[:200]}" for e in page_errors]
    return fails, checks, time.perf_counter() - t0


def report_budget(rows) -> None:
    print(
        f"browser-check: page weight (all files loaded, uncompressed; budget "
        f"{BUDGET_BYTES / 1e6:.0f} MB) and time until ready (budget {BUDGET_SECONDS:.0f} s):"
    )
    for rel, weight, ready, widgets in rows:
        over = []
        if weight > BUDGET_BYTES:
            over.append("weight")
        if ready > BUDGET_SECONDS:
            over.append("time")
        note = ("over budget: " + ", ".join(over)) if over else "within budget"
        if widgets:
            note += f" ({widgets} live figures)"
        print(f"  {rel:<48} {weight / 1e6:6.2f} MB {ready:5.2f} s  {note}")


def report_alt(rows) -> None:
    n = sum(r[1] for r in rows)
    bad = [(rel, t) for rel, _, t, _ in rows if t]
    widget = sum(r[3] for r in rows)
    print(
        f"browser-check: alt text: {n - sum(t for _, t in bad)} of {n} images have a real one"
        f" ({widget} more drawn by live widgets, left to the widget check)"
    )
    for rel, t in bad:
        print(f"  {rel}: {t} images without")


def check_alt(alts: list[dict], rel: str, stats: dict) -> tuple[list[str], int]:
    """Every image of the article, apart from those a live widget draws, has a real alt text."""
    own = [a for a in alts if not a.get("widget")]
    trivial = [a for a in own if TRIVIAL_ALT.search(a["alt"] or "")]
    stats["alt"].append((rel, len(own), len(trivial), len(alts) - len(own)))
    fails = (
        [f"{len(trivial)} images without a real alt text, e.g. {trivial[0]['src']}"]
        if trivial
        else []
    )
    return fails, len(own)


FIGURE_NUMBER = re.compile(r"^Figure (?:(\d+)\.)?(\d+)$")


def _widget_cell(tag) -> bool:
    """A code cell whose output is a live widget (tagged nbval-ignore-output, with a view)."""
    cell = tag.find_parent(class_="cell")
    return bool(
        cell
        and "tag_nbval-ignore-output" in cell.get("class", [])
        and cell.find("script", type="application/vnd.jupyter.widget-view+json")
    )


def chapter_number(rel: str) -> int | None:
    """The number of a chapter page (book/03_x.html -> 3); None for other pages."""
    m = re.match(r"book/(\d+)_", rel)
    return int(m.group(1)) if m else None


def check_figures(rel: str, root: Path, soup: BeautifulSoup) -> tuple[list[str], int]:
    """On a page built from a notebook, every image a code cell draws (live widgets apart) is
    in a <figure> captioned "Figure N.k" (N the chapter, none on the preface), k = 1, 2, ..."""
    if not is_chapter(rel, root):
        return [], 0
    article = soup.select_one(".bd-article") or soup
    images = [
        img
        for img in article.select(".cell_output img")
        if not _widget_cell(img) and not img.find_parent(attrs={"data-live-figure": True})
    ]
    fails, numbers = [], []
    chapter = chapter_number(rel)
    for img in images:
        name = Path(img.get("src", "?")).name[:16]
        figure = img.find_parent("figure")
        span = figure.select_one("figcaption .caption-number") if figure else None
        if span is None:
            fails.append(f"figure image {name}… is not in a <figure> with a numbered caption")
            continue
        label = span.get_text(" ", strip=True)
        m = FIGURE_NUMBER.match(label)
        want = f"Figure {chapter}.k" if chapter is not None else "Figure k"
        if not m or (int(m.group(1)) if m.group(1) else None) != chapter:
            fails.append(f"figure {label!r} is not numbered {want!r}")
            continue
        if not figure.select_one("figcaption .caption-text"):
            fails.append(f"{label} has a number but no caption text")
        numbers.append(int(m.group(2)))
    if numbers and numbers != list(range(1, len(numbers) + 1)):
        fails.append(f"figure numbers on this page run {numbers}, not 1, 2, ... (per chapter)")
    return fails, len(images)


def check_glossary_links(
    page: Path, rel: str, root: Path, soup: BeautifulSoup
) -> tuple[list[str], int]:
    """Term links point at terms of the glossary; each page built from a notebook has one."""
    glossary = root / "book" / "glossary.html"
    fails, n = [], 0
    if not glossary.is_file():
        return ["no glossary page book/glossary.html"], 1
    terms = _glossary_terms(glossary)
    article = soup.select_one(".bd-article") or soup
    linked = 0
    for span in article.select("span.std-term"):
        n += 1
        a = span.find_parent("a")
        if a is None or not a.get("href"):
            fails.append(f"glossary term {span.get_text()!r} is not linked (unknown term?)")
            continue
        parts = urlsplit(a["href"])
        target = (page.parent / unquote(parts.path)).resolve() if parts.path else page.resolve()
        if target != glossary.resolve() or unquote(parts.fragment) not in terms:
            fails.append(f"term link {a['href']!r} does not point at a term of the glossary")
            continue
        linked += 1
    if is_chapter(rel, root):
        n += 1
        if not linked:
            fails.append("the chapter links no glossary term")
    return fails, n


_TERMS: dict[Path, set[str]] = {}


def _glossary_terms(glossary: Path) -> set[str]:
    """The ids of the terms (<dt>) of the glossary page."""
    if glossary not in _TERMS:
        soup = BeautifulSoup(glossary.read_text(encoding="utf-8"), "html.parser")
        _TERMS[glossary] = {dt["id"] for dt in soup.select("dl.glossary dt[id]")}
    return _TERMS[glossary]


def check_toggles(root: Path, pages: list[Path], browser) -> tuple[list[str], int]:
    """Each output collapsed behind a toggle (tag hide-output) is hidden, and shown once the
    toggle is clicked."""
    fails, n = [], 0
    for page in pages:
        if "tag_hide-output" not in page.read_text(encoding="utf-8", errors="replace"):
            continue
        rel = page.relative_to(root).as_posix()
        context = browser.new_context(viewport={"width": WIDTHS[0], "height": HEIGHTS[WIDTHS[0]]})
        pw_page = context.new_page()
        pw_page.route(
            lambda url: not url.startswith(("file:", "data:", "blob:", "about:")),
            lambda r: r.abort("blockedbyclient"),
        )
        try:
            pw_page.goto(page.as_uri(), wait_until="load", timeout=30_000)
            for i, cell in enumerate(pw_page.query_selector_all(".cell.tag_hide-output")):
                n += 1
                toggle = cell.query_selector("details > summary")
                output = cell.query_selector("details .cell_output")
                if toggle is None or output is None:
                    fails.append(f"{rel}: collapsed output {i + 1} has no toggle")
                    continue
                if output.is_visible():
                    fails.append(f"{rel}: collapsed output {i + 1} is shown before its toggle")
                toggle.scroll_into_view_if_needed()
                toggle.click()
                pw_page.wait_for_timeout(200)
                if not output.is_visible():
                    fails.append(f"{rel}: collapsed output {i + 1} stays hidden when toggled")
        except Exception as e:  # noqa: BLE001 - reported as a failure
            fails.append(f"{rel}: toggle check failed: {str(e).splitlines()[0]}")
        context.close()
    print(f"browser-check: collapsed outputs: {n} toggles tried")
    return fails, n


# Live figures (attnlib.widgets.live_figure): their controls, as the page shows them.
LIVE_STATE_JS = r"""
(fig) => {
  const img = fig.querySelector('img');
  const controls = Array.from(fig.querySelectorAll('[data-control]')).map(el => {
    const label = fig.querySelector('label[for="' + el.id + '"]');
    const out = fig.querySelector('output[for="' + el.id + '"]');
    const r = el.getBoundingClientRect();
    return {id: el.id, tag: el.tagName.toLowerCase(), type: el.type || '', value: el.value,
            max: el.max === undefined ? null : el.max, options: el.options ? el.options.length : 0,
            label: label ? label.textContent.trim() : null, aria: el.getAttribute('aria-label'),
            valuetext: el.getAttribute('aria-valuetext'), readout: out ? out.textContent : null,
            visible: r.width > 0 && r.height > 0};
  });
  const data = JSON.parse(fig.querySelector('script.live-figure-data').textContent);
  const r = img.getBoundingClientRect();
  return {src: img.getAttribute('src'), alt: img.getAttribute('alt'), point: img.dataset.point,
          ok: img.complete && img.naturalWidth > 0, right: r.right, viewport: window.innerWidth,
          name: fig.dataset.liveFigure, draw: fig.dataset.draw, controls,
          frames: data.frames.length, points: data.frames.map(f => JSON.stringify(f.point)),
          grid: data.controls.map(c => c.labels.length), labels: data.controls.map(c => c.labels)};
}
"""
# A value as a reader would not write it: a float's rounding residue.
UGLY_NUMBER = re.compile(r"\d\.\d*(0000|9999)\d")
LIVE_WIDTHS = (390, 1400)


class Frames:
    """Frames recomputed in this process by attnlib.widgets.render_frame, once per point."""

    def __init__(self):
        self._cache: dict[tuple[str, str], object] = {}

    def __call__(self, spec: str, point: str):
        import io

        import matplotlib
        import numpy as np
        from PIL import Image

        matplotlib.use("Agg")
        from attnlib import widgets

        key = (spec, point)
        if key not in self._cache:
            png = widgets.render_frame(widgets.resolve_draw(spec), json.loads(point))
            self._cache[key] = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
        return self._cache[key]


def _shown_pixels(src: str):
    import base64
    import io

    import numpy as np
    from PIL import Image

    head, _, payload = src.partition(",")
    if head != "data:image/png;base64":
        raise ValueError(f"the frame is not an inline PNG: {head[:40]}")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(payload))).convert("RGB"))


def _check_live_state(st: dict, where: str, frames: Frames) -> list[str]:
    """One state of a live figure: controls labelled, values readable, the frame recomputed."""
    import numpy as np

    fails = []
    if not st["ok"]:
        fails.append(f"{where}: the image did not load")
    if st["right"] > st["viewport"] + 1:
        fails.append(f"{where}: the image is wider than the viewport ({st['right']:.0f}px)")
    if TRIVIAL_ALT.search(st["alt"] or ""):
        fails.append(f"{where}: the image has no real alt text")
    for c in st["controls"]:
        if not c["label"] or not c["aria"]:
            fails.append(f"{where}: control {c['id']} has no label")
        if not c["visible"]:
            fails.append(f"{where}: control {c['id']} is not visible")
        if c["type"] == "range" and not c["valuetext"]:
            fails.append(f"{where}: slider {c['id']} has no aria-valuetext")
        for text in (c["readout"], c["valuetext"]):
            if text and UGLY_NUMBER.search(text):
                fails.append(f"{where}: control {c['id']} reads {text!r}")
        if not c["readout"] or c["readout"] not in (st["alt"] or ""):
            fails.append(f"{where}: the alt text does not name {c['id']} = {c['readout']!r}")
    try:
        shown = _shown_pixels(st["src"])
        want = frames(st["draw"], st["point"])
    except Exception as e:  # noqa: BLE001 - reported as a failure
        return fails + [f"{where}: frame at {st['point']} not recomputed: {e}"]
    if shown.shape != want.shape or not np.array_equal(shown, want):
        fails.append(f"{where}: the frame shown at {st['point']} differs from {st['draw']}'s")
    return fails


def check_live_figures(
    root: Path, pages: list[Path], browser, shots: Path
) -> tuple[list[str], int, list]:
    """Each live figure, at each width of LIVE_WIDTHS: move every control, see the frame
    change, and compare the frame shown with the one recomputed from its point."""
    fails, n, rows = [], 0, []
    frames = Frames()
    for page in pages:
        if "data-live-figure=" not in page.read_text(encoding="utf-8", errors="replace"):
            continue
        rel = page.relative_to(root).as_posix()
        for width in LIVE_WIDTHS:
            context = browser.new_context(viewport={"width": width, "height": HEIGHTS[width]})
            pw_page = context.new_page()
            pw_page.route(
                lambda url: not url.startswith(("file:", "data:", "blob:", "about:")),
                lambda r: r.abort("blockedbyclient"),
            )
            try:
                pw_page.goto(page.as_uri(), wait_until="load", timeout=30_000)
                for fig in pw_page.query_selector_all("[data-live-figure]"):
                    st = pw_page.evaluate(LIVE_STATE_JS, fig)
                    where = f"{rel} {width}px {st['name']}"
                    n += 1
                    if width == LIVE_WIDTHS[-1]:
                        rows.append((rel, st["name"], st["frames"]))
                    grid = 1
                    for g in st["grid"]:
                        grid *= g
                    if st["frames"] != grid or len(set(st["points"])) != grid:
                        fails.append(f"{where}: {st['frames']} frames for a grid of {grid} points")
                    fails += _check_live_state(st, where, frames)
                    for c in st["controls"]:
                        n += 1
                        el = fig.query_selector(f"#{c['id']}")
                        el.scroll_into_view_if_needed()
                        if c["tag"] == "select":
                            j = (int(c["value"]) + 1) % c["options"]
                            el.select_option(str(j))
                        else:
                            el.focus()
                            at_end = int(c["value"]) >= int(c["max"])
                            pw_page.keyboard.press("ArrowLeft" if at_end else "ArrowRight")
                        pw_page.wait_for_timeout(50)
                        moved = pw_page.evaluate(LIVE_STATE_JS, fig)
                        now = next(x for x in moved["controls"] if x["id"] == c["id"])
                        if now["value"] == c["value"]:
                            fails.append(f"{where}: {c['id']} did not move")
                            continue
                        if moved["src"] == st["src"]:
                            fails.append(f"{where}: moving {c['id']} did not change the image")
                        if now["readout"] == c["readout"] or moved["alt"] == st["alt"]:
                            fails.append(f"{where}: moving {c['id']} left its readout or alt")
                        if c["type"] == "range" and now["valuetext"] == c["valuetext"]:
                            fails.append(f"{where}: moving {c['id']} left its aria-valuetext")
                        fails += _check_live_state(moved, f"{where} after {c['id']}", frames)
                        st = moved
                    stem = rel.replace("/", "__").removesuffix(".html")
                    fig.screenshot(path=str(shots / f"{stem}@{width}-live-{st['name']}.png"))
            except Exception as e:  # noqa: BLE001 - reported as a failure
                fails.append(f"{rel} {width}px: live figure check failed: {str(e).splitlines()[0]}")
            context.close()
    print(
        f"browser-check: live figures: {len(rows)} on {len({r[0] for r in rows})} pages, "
        f"{n} states checked at {' and '.join(map(str, LIVE_WIDTHS))} px, "
        f"{len(frames._cache)} frames recomputed"
    )
    for rel, name, count in rows:
        print(f"  {rel:<48} {name:<24} {count:4d} frames")
    return fails, n, rows


def check_pdf(root: Path, pages: list[Path]) -> tuple[list[str], int]:
    """The whole-book PDF is in the site, with every chapter and no raw TeX."""
    import shutil
    import subprocess

    pdf = root / PDF_NAME
    if not pdf.is_file():
        return [f"{PDF_NAME} is missing from the site (`make pdf` builds it)"], 1
    if not shutil.which("pdftotext"):
        return ["pdftotext missing (Debian package poppler-utils)"], 1
    text = subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    flat = _words(text)
    fails = []
    titles = []
    for page in pages:
        if page.parent != root / "book":
            continue
        h1 = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser").find("h1")
        if h1:
            titles.append(h1.get_text(" ", strip=True).rstrip("#").strip())
    for title in titles:
        if _words(title) not in flat:
            fails.append(f"chapter {title!r} is not in the PDF")
    for m in list(RAW_TEX.finditer(text))[:5]:
        snippet = text[max(0, m.start() - 30) : m.end() + 30].replace("\n", " ")
        fails.append(f"raw TeX in the PDF: {snippet!r}")
    n_pages = text.count("\f")
    print(
        f"browser-check: pdf: {pdf.stat().st_size / 1e6:.1f} MB, {n_pages} pages, "
        f"{len(titles) - sum('is not in the PDF' in f for f in fails)} of {len(titles)} "
        "chapter titles found"
    )
    return fails, len(titles) + 1


def check_search(root: Path, browser) -> tuple[list[str], int]:
    """Search snippets show no raw TeX. Served over HTTP: from file:// the search page cannot
    fetch the pages it cuts its snippets from."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    fails = []
    try:
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{server.server_port}/search.html?q=gradient")
        page.wait_for_function(
            "() => document.querySelectorAll('#search-results .context').length > 3",
            timeout=30_000,
        )
        page.wait_for_timeout(1000)
        snippets = page.evaluate(
            "() => Array.from(document.querySelectorAll('#search-results .context'))"
            ".map(p => p.textContent)"
        )
        page.close()
    except Exception as e:  # noqa: BLE001 - reported as a failure
        return [f"search gave no snippets: {str(e).splitlines()[0]}"], 1
    finally:
        server.shutdown()
    raw = [t for t in snippets if RAW_TEX.search(t)]
    for t in raw[:3]:
        m = RAW_TEX.search(t)
        fails.append(f"raw TeX in a search snippet: {t[max(0, m.start() - 30) : m.end() + 30]!r}")
    print(
        f"browser-check: search: {len(snippets)} snippets for 'gradient', {len(raw)} with raw TeX"
    )
    return fails, len(snippets)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html", type=Path, help="the built book, e.g. _build/html")
    ap.add_argument("--bib", type=Path, help="check every entry of this .bib file is cited")
    ap.add_argument("--screenshots", type=Path, help="default: <html>/../screenshots")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args(argv)

    root = args.html.resolve()
    if not (root / "_static").is_dir():
        print(f"browser-check: FAILED: {root} is not a built Sphinx HTML book")
        return 2
    if not Path(args.chromium).is_file():
        print(f"browser-check: FAILED: no Chromium at {args.chromium}")
        return 2
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("browser-check: FAILED: playwright is missing (pinned in requirements.txt)")
        return 2
    shots = (args.screenshots or root.parent / "screenshots").resolve()
    shots.mkdir(parents=True, exist_ok=True)
    for old in shots.glob("*.png"):
        old.unlink()

    pages = page_list(root)
    t0 = time.perf_counter()
    failures: dict[str, list[str]] = {}
    totals: Counter = Counter()
    remote: Counter = Counter()
    ids = Ids()
    # Every page of the book proper (the navigation must list each one).
    chapters = {str(p) for p in sorted((root / "book").glob("*.html"))}
    stats: dict = {"alt": [], "budget": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=args.chromium,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        print(f"browser-check: {len(pages)} pages with Chromium {browser.version}")
        for page in pages:
            rel = page.relative_to(root).as_posix()
            fails, checks, secs = check_page(
                page, root, browser, shots, ids, remote, chapters, stats
            )
            totals.update(checks)
            status = "ok  " if not fails else "FAIL"
            print(
                f"  {status} {rel:<48} {sum(checks.values()):5d} checks {secs:5.1f} s", flush=True
            )
            if fails:
                failures[rel] = fails
        fails, n = check_search(root, browser)
        totals["search"] += n
        if fails:
            failures["search.html"] = fails
        fails, n = check_toggles(root, pages, browser)
        totals["toggles"] += n
        if fails:
            failures["(collapsed outputs)"] = fails
        fails, n, _ = check_live_figures(root, pages, browser, shots)
        totals["live-figures"] += n
        if fails:
            failures["(live figures)"] = fails
        browser.close()
    report_budget(stats["budget"])
    report_alt(stats["alt"])
    fails, n = check_pdf(root, pages)
    totals["pdf"] += n
    if fails:
        failures["(pdf)"] = fails
    if args.bib:
        fails, n = check_bibliography(root, args.bib)
        totals["bibliography"] += n
        if fails:
            failures["(bibliography)"] = fails
    elapsed = time.perf_counter() - t0

    by_kind = ", ".join(f"{k} {v}" for k, v in sorted(totals.items()))
    print(
        f"browser-check: {len(pages)} pages, {sum(totals.values())} checks ({by_kind}), "
        f"{elapsed:.1f} s; screenshots in {shots}"
    )
    hosts = ", ".join(f"{h} ({c})" for h, c in remote.most_common()) or "none"
    print(f"browser-check: blocked remote requests: {hosts}")
    if failures:
        n = sum(len(v) for v in failures.values())
        print(f"browser-check: FAILED: {n} problems on {len(failures)} pages")
        for rel, fails in failures.items():
            for f in fails:
                print(f"  {rel}: {f}")
        return 1
    print("browser-check: all pages passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
