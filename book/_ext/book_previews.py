"""Previews of cross-referenced figures, equations and theorem-like boxes, and a proof index
that names them.

Loaded through ``sphinx.local_extensions`` in _config.yml, after ``book_a11y``.

- Previews: after the build, every figure, numbered equation and sphinx-proof box (theorem,
  lemma, definition, ...) of the book's pages is a preview target: a figure's image and
  caption, an equation as written, a box's title and first paragraph. Each page gets, in a
  ``<script type="application/json" id="book-previews">``, the previews of only the targets it
  links to, keyed by the link's ``href``; ``static/book-previews.js`` shows one while the
  pointer rests on the link or the link has keyboard focus (Escape hides it), and MathJax
  typesets its formulas. The preview holds no link or control: it adds no Tab stop. A
  figure's image is the page's own file, loaded only when its preview is shown.
- Proof index: sphinx-proof's index page (``prf-prf.html``) listed label slugs
  ("thm-05-large"); its list is rewritten with each box's number and title ("Theorem 5.3
  (Saha–Ye, large cache)"), grouped by page in the book's order. The preface links it as
  ``{ref}`prf-prf```.
"""

from __future__ import annotations

import html
import json
import posixpath
import re
from pathlib import Path

from book_a11y import doc_order, page_title, tex_to_text

HREF = re.compile(r'<a class="reference internal" href="([^"#]*#[^"]+)"')
INDEX_LIST = re.compile(r"<h1>Proof Index</h1>.*?(?=</article>)", re.S)
INDEX_TITLE = "Index of theorems, lemmas and definitions"
INLINE_MATH = re.compile(r'<span class="math notranslate nohighlight">\\\((.*?)\\\)</span>', re.S)
# A preview's image is left out when it is inline (a live figure's frame) and this large.
MAX_INLINE_IMAGE = 20_000


def _inner(tag) -> str:
    """A tag's content as HTML for a preview: its links as plain text (the preview adds no Tab
    stop) and without ids (the page has them already)."""
    text = "".join(str(c) for c in tag.contents)
    text = re.sub(r"<a\b[^>]*>", '<span class="book-preview-link">', text).replace(
        "</a>", "</span>"
    )
    return re.sub(r'\sid="[^"]*"', "", text)


def _figure(tag) -> str | None:
    img, caption = tag.find("img"), tag.find("figcaption")
    if caption is None:
        return None
    parts = []
    src = img.get("src", "") if img is not None else ""
    if src and not (src.startswith("data:") and len(src) > MAX_INLINE_IMAGE):
        alt = html.escape(img.get("alt", ""), quote=True)
        parts.append(f'<img src="{html.escape(src, quote=True)}" alt="{alt}" loading="lazy">')
    parts.append(f"<div>{_inner(caption.find('p') or caption)}</div>")
    return "".join(parts)


def _box(tag) -> tuple[str, str] | None:
    """A sphinx-proof box: (preview HTML, title as plain text)."""
    title = tag.find("p", class_="admonition-title")
    if title is None:
        return None
    body = [
        p
        for p in tag.find_all("p")
        if p is not title and "claim-status" not in (p.get("class") or [])
    ]
    preview = f'<p class="book-preview-title">{_inner(title)}</p>'
    if body:
        preview += f"<p>{_inner(body[0])}</p>"
    text = INLINE_MATH.sub(lambda m: tex_to_text(m.group(1)), _inner(title))
    text = html.unescape(re.sub(r"<[^>]+>", "", text))
    return preview, re.sub(r"\s+", " ", text).strip()


def _equation(tag) -> str:
    for link in tag.find_all("a", class_="headerlink"):
        link.decompose()
    return f'<div class="math notranslate nohighlight">{_inner(tag)}</div>'


def collect_targets(pages: dict[str, str]):
    """Every preview target of the pages (file name relative to the site -> HTML): a dict
    ``(page, id) -> preview HTML`` (image paths relative to the page) and a list of
    ``(page, id, title)`` for the boxes, in page order."""
    from bs4 import BeautifulSoup

    previews, boxes = {}, []
    for rel, text in pages.items():
        soup = BeautifulSoup(text, "html.parser")
        article = soup.find("article") or soup
        for tag in article.find_all(id=True):
            ident, classes = tag["id"], tag.get("class") or []
            if tag.name == "figure":
                preview = _figure(tag)
            elif ident.startswith("equation-") and "math" in classes:
                preview = _equation(tag)
            elif "proof" in classes and "admonition" in classes and len(classes) > 2:
                found = _box(tag)
                preview = found and found[0]
                if found:
                    boxes.append((rel, ident, found[1]))
            else:
                continue
            if preview:
                previews[(rel, ident)] = preview
    return previews, boxes


def _rebase(preview: str, source: str, page: str) -> str:
    """Image paths of a preview written for ``source``, as seen from ``page``."""
    if posixpath.dirname(source) == posixpath.dirname(page):
        return preview

    def fix(m: re.Match) -> str:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(source), m.group(1)))
        return f'src="{posixpath.relpath(target, posixpath.dirname(page) or ".")}"'

    return re.sub(r'src="(?!data:)([^"]+)"', fix, preview)


def page_previews(rel: str, text: str, previews: dict) -> dict[str, str]:
    """The previews of the targets this page links to, keyed by the links' href."""
    found = {}
    for href in set(HREF.findall(text)):
        path, _, ident = href.partition("#")
        target = posixpath.normpath(posixpath.join(posixpath.dirname(rel), path)) if path else rel
        if (target, ident) in previews:
            found[href] = _rebase(previews[(target, ident)], target, rel)
    return found


def with_previews(text: str, found: dict[str, str]) -> str:
    """The page with its previews as JSON before ``</body>``."""
    if not found:
        return text
    data = json.dumps(found, ensure_ascii=False, sort_keys=True).replace("</", "<\\/")
    tag = f'<script type="application/json" id="book-previews">{data}</script>\n'
    return text.replace("</body>", tag + "</body>", 1)


def proof_index(boxes: list[tuple[str, str, str]], titles: dict[str, str]) -> str:
    """The index's list: one section per page, one line per box, in the book's order."""
    out = [f"<h1>{INDEX_TITLE}</h1>"]
    current = None
    for rel, ident, title in boxes:
        if rel != current:
            if current is not None:
                out.append("</ul>")
            current = rel
            out.append(f"<h2>{html.escape(titles.get(rel, rel))}</h2>\n<ul>")
        out.append(
            f'<li><a href="{html.escape(rel)}#{html.escape(ident)}">{html.escape(title)}</a></li>'
        )
    if current is not None:
        out.append("</ul>")
    return "\n".join(out) + "\n"


def _finish(app, exception) -> None:
    if exception is not None or app.builder.name != "html":
        return
    out = Path(app.outdir)
    order = doc_order(app.env, app.config.root_doc)
    rels = [f"{doc}.html" for doc in order if (out / f"{doc}.html").is_file()]
    pages = {rel: (out / rel).read_text(encoding="utf-8") for rel in rels}
    previews, boxes = collect_targets(pages)
    for rel, text in pages.items():
        new = with_previews(text, page_previews(rel, text, previews))
        if new != text:
            (out / rel).write_text(new, encoding="utf-8")
    index = out / "prf-prf.html"
    if index.is_file():
        titles = {rel: page_title(text) for rel, text in pages.items()}
        text = index.read_text(encoding="utf-8")
        new = INDEX_LIST.sub(lambda m: proof_index(boxes, titles), text, count=1)
        new = new.replace("<title>Proof Index", f"<title>{INDEX_TITLE}", 1)
        index.write_text(new, encoding="utf-8")


def setup(app):
    # Their files are in static/, which book_site.py adds to html_static_path.
    app.add_css_file("book-previews.css")
    app.add_js_file("book-previews.js", loading_method="defer")
    app.connect("build-finished", _finish)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
