"""Print the single-page HTML build of the book to one PDF with headless Chromium.

Usage: ``python .ci/print_pdf.py _build/singlehtml book/intro OUT.pdf [--chromium PATH]``
(the single-page build's folder, the root document's name, the PDF to write).

``make pdf`` builds the book with Sphinx's ``singlehtml`` builder, then runs this. The page is
loaded from ``file://`` (the same offline MathJax as the site), printed only after MathJax has
typeset every formula and every image has loaded. Before printing, a table of contents is
written from the chapter titles (each links to its chapter, and the PDF's outline holds them
too), collapsed solutions and hidden cells are opened, and each chapter starts a new page.
Figures print in their desktop form, and a display equation wider than the page is scaled
down to fit it (nothing scrolls on paper).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

PREPARE_JS = r"""
(ROOT_DOC) => {
  const main = document.querySelector('article.bd-article') || document.querySelector('main');
  // Open everything a reader would have to click: solutions, hidden cells, dropdowns.
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  document.querySelectorAll('button.toggle-button').forEach(b => b.remove());
  // A figure with a phone form is a <picture> whose <source> serves that form below some
  // viewport width, which the A4 column can be under: print the desktop form (the <img>).
  document.querySelectorAll('picture > source').forEach(s => s.remove());
  // The table of contents: the title of every document after the preface, in book order.
  // Sphinx's single-page build marks where each document starts with <span id="document-...">.
  const entries = [];
  document.querySelectorAll('span[id^="document-"]').forEach((mark, i) => {
    let sec = mark.nextElementSibling;
    while (sec && sec.tagName !== 'SECTION') sec = sec.nextElementSibling;
    const head = sec && sec.querySelector('h1, h2, h3');
    if (!head || mark.id === 'document-' + ROOT_DOC) return;
    if (!sec.id) sec.id = 'book-pdf-document-' + i;
    sec.classList.add('book-pdf-document');
    entries.push({id: sec.id, text: head.textContent.replace(/[#¶]\s*$/, '').trim()});
  });
  const toc = document.createElement('nav');
  toc.className = 'book-pdf-toc';
  const title = document.createElement('h2');
  title.textContent = 'Contents';
  toc.appendChild(title);
  const list = document.createElement('ol');
  for (const e of entries) {
    const li = document.createElement('li');
    const a = document.createElement('a');
    a.href = '#' + e.id;
    a.textContent = e.text;
    li.appendChild(a);
    list.appendChild(li);
  }
  toc.appendChild(list);
  const first = main.querySelector('h1');
  if (first) first.after(toc);
  const style = document.createElement('style');
  style.textContent = `
    @page { size: A4; margin: 16mm 14mm 18mm 14mm; }
    html { font-size: 13px; }
    .bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .header-article, .bd-footer,
    .bd-footer-article, .prev-next-area, .headerlink, .copybtn, #pst-back-to-top,
    .bd-search, .search-button-field { display: none !important; }
    .bd-main .bd-content .bd-article-container { max-width: 100% !important; }
    .bd-page-width { max-width: 100% !important; }
    .book-pdf-document { break-before: page; }
    .book-pdf-toc { break-after: page; }
    .book-pdf-toc ol { list-style: none; padding-left: 0; }
    .book-pdf-toc li { margin: 0.35em 0; font-size: 1.15em; }
    pre, .highlight pre { white-space: pre-wrap; overflow-wrap: anywhere; }
    div.math, div.math mjx-container[display="true"] { overflow: visible !important; }
    img { max-width: 100% !important; break-inside: avoid; }
    figure, .cell_output { break-inside: avoid-page; }
  `;
  document.head.appendChild(style);
  return entries.length;
}
"""

# The printed column: A4 less the side margins of page.pdf below, in CSS px (96 per inch).
PRINT_WIDTH_PX = round((210 - 14 - 14) / 25.4 * 96)

# In print nothing scrolls, and MathJax 3 does not break lines: a display equation wider than
# the printed column (beside its number) is scaled down to fit it. Returns how many were, and
# the start of each one that still sticks out of its column after that (none, or no PDF).
FIT_EQUATIONS_JS = r"""
() => {
  const shown = [];
  for (const c of document.querySelectorAll('mjx-container[display="true"]')) {
    const d = c.closest('div.math') || c.parentElement;
    const content = c.querySelector('mjx-math');
    if (content && d.getBoundingClientRect().width > 0) shown.push([c, d, content]);
  }
  let scaled = 0;
  for (const [c, d, content] of shown) {
    const number = d.querySelector(':scope > span.eqno');
    const room = d.clientWidth - (number ? number.getBoundingClientRect().width + 8 : 0);
    const wide = content.getBoundingClientRect().width;
    if (room > 0 && wide > room) {
      c.style.zoom = String(Math.floor((room / wide) * 1000) / 1000);
      scaled += 1;
    }
  }
  const outside = shown.filter(([c, d, content]) => {
    const r = content.getBoundingClientRect(), box = d.getBoundingClientRect();
    return r.right > box.right + 1 || r.left < box.left - 1;
  });
  return [scaled, outside.map(([c]) => (c.textContent || '').trim().slice(0, 60))];
}
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", type=Path, help="the singlehtml build, e.g. _build/singlehtml")
    ap.add_argument("root_doc", help="the book's root document, e.g. book/intro")
    ap.add_argument("out", type=Path)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    t0 = time.perf_counter()
    # Sphinx writes the root document at its own path (book/intro.html) but with links relative
    # to the build's root, where a copy of it finds its images and scripts.
    html = args.build / "whole-book.html"
    shutil.copyfile(args.build / f"{args.root_doc}.html", html)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=args.chromium, args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1100, "height": 1400})
        page.route(
            lambda url: not url.startswith(("file:", "data:", "blob:", "about:")),
            lambda r: r.abort("blockedbyclient"),
        )
        page.goto(html.resolve().as_uri(), wait_until="load", timeout=120_000)
        page.wait_for_function(
            "() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=60_000
        )
        page.evaluate("() => MathJax.startup.promise.then(() => true)")
        page.evaluate(
            "() => document.querySelectorAll('img[loading=lazy]').forEach(i => i.loading = 'eager')"
        )
        page.wait_for_function(
            "() => Array.from(document.images).every(i => i.complete)", timeout=60_000
        )
        chapters = page.evaluate(PREPARE_JS, args.root_doc)
        # Typeset again: opened solutions may hold math MathJax skipped while hidden.
        page.evaluate("() => MathJax.typesetPromise().then(() => true)")
        # The site typesets lazily (ui/lazy): equations not yet scrolled into view wait.
        page.evaluate(
            "async () => { const d = MathJax.startup.document;"
            " if (d.lazyTypesetAll) await d.lazyTypesetAll(); return true; }"
        )
        page.emulate_media(media="print")
        page.set_viewport_size({"width": PRINT_WIDTH_PX, "height": 1400})
        scaled, outside = page.evaluate(FIT_EQUATIONS_JS)
        if outside:
            browser.close()
            print(f"pdf: FAILED: {len(outside)} display equations wider than the page: {outside}")
            return 1
        args.out.parent.mkdir(parents=True, exist_ok=True)
        page.pdf(
            path=str(args.out),
            format="A4",
            print_background=True,
            outline=True,
            tagged=True,
            display_header_footer=True,
            header_template="<span></span>",
            footer_template=(
                '<div style="font-size:8px;width:100%;text-align:center;color:#666">'
                '<span class="pageNumber"></span> / <span class="totalPages"></span></div>'
            ),
            margin={"top": "16mm", "bottom": "18mm", "left": "14mm", "right": "14mm"},
        )
        browser.close()
    size = args.out.stat().st_size / 1e6
    print(
        f"pdf: {args.out} ({size:.1f} MB, {chapters} documents in the contents, "
        f"{scaled} display equations scaled to the page, {time.perf_counter() - t0:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
