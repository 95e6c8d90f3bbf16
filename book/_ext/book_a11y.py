"""The page head, unique ids, bibliography back-links, and keyboard and contrast styles.

Loaded through ``sphinx.local_extensions`` in _config.yml; checked by
.ci/browser_check/a11y.py (axe-core, Tab presses, focus rings, the head, ids).

- Head: each page gets a ``<meta name="description">`` (the page's ``description`` metadata
  field, or its first paragraph as plain text, TeX turned into the symbols it stands for, at
  most 160 characters) and the OpenGraph tags ``og:title``, ``og:description``, ``og:type`` and
  ``og:site_name``. The three viewport tags that Sphinx's and the two themes' layouts write
  become one.
- Ids: sphinx-proof and sphinx-exercise give every box's body the same id (``proof-content``,
  ``exercise-content``, ``solution-content``, ``proof``); nothing links to them, so each later
  copy of an id on a page is renamed ``<id>-2``, ``<id>-3``... after the build (sphinx-proof's
  style sheet selects ``div#proof``: book-a11y.css gives the renamed proofs the same rule).
- Bibliography back-links: sphinxcontrib-bibtex links an entry back only to citations on the
  bibliography page itself. Each entry gets a line "Cited in" with one link per page that cites
  it, to that page's first citation of it, pages in the book's order. The entries' role
  ``doc-biblioentry`` (deprecated in ARIA 1.2) becomes ``listitem`` of their list.
- ``static/book-a11y.css``: a focus ring on every control, links in tinted boxes dark enough
  for 4.5:1, one search box (the desktop header held only a second one), and a search field
  whose icon no longer covers the query. ``static/book-a11y.js``: on a page with a live
  figure, a skip link to its controls beside "Skip to main content"; a region that scrolls
  sideways (a long equation on a phone) is a Tab stop while it overflows, so that a keyboard
  can scroll it.
"""

from __future__ import annotations

import html
import re
from collections import Counter, defaultdict
from pathlib import Path

from docutils import nodes

MAX_DESCRIPTION = 160
VIEWPORT = re.compile(r'[ \t]*<meta name="viewport"[^>]*>\n?')
# An id attribute inside a start tag (not text inside a script: its quotes are escaped).
ID_ATTR = re.compile(r'(<[A-Za-z][^<>]*?\sid=")([^"]+)(")')
# A citation in a chapter: its span's id and the bibliography entry it links to.
CITATION = re.compile(r'<span class="bibtex-citation" id="([^"]+)">(.*?)</span>', re.S)
CITED_ENTRY = re.compile(r'href="bibliography\.html#([^"]+)"')
ENTRY = re.compile(r'(<div class="citation" id="([^"]+)" role="doc-biblioentry">.*?)(</div>)', re.S)
TITLE = re.compile(r"<title>(.*?)</title>", re.S)

# TeX in a description, as the symbols a reader sees. Commands not listed lose their backslash
# only when they are a function name (log, exp, ...); others are dropped with their braces kept.
TEX_SYMBOLS = {
    "dots": "…",
    "ldots": "…",
    "cdots": "⋯",
    "cdot": "·",
    "times": "×",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "ne": "≠",
    "neq": "≠",
    "approx": "≈",
    "sim": "∼",
    "in": "∈",
    "to": "→",
    "infty": "∞",
    "sqrt": "√",
    "top": "ᵀ",
    "pm": "±",
    "mid": "|",
    "lceil": "⌈",
    "rceil": "⌉",
    "lfloor": "⌊",
    "rfloor": "⌋",
    "sum": "∑",
    "prod": "∏",
    "partial": "∂",
    "nabla": "∇",
    "ell": "ℓ",
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "epsilon": "ε",
    "varepsilon": "ε",
    "eta": "η",
    "theta": "θ",
    "lambda": "λ",
    "mu": "μ",
    "pi": "π",
    "rho": "ρ",
    "sigma": "σ",
    "tau": "τ",
    "phi": "φ",
    "varphi": "φ",
    "omega": "ω",
    "Theta": "Θ",
    "Omega": "Ω",
    "Delta": "Δ",
    "Sigma": "Σ",
    "Phi": "Φ",
    "Lambda": "Λ",
    "Pi": "Π",
    "Gamma": "Γ",
    "quad": " ",
    "qquad": " ",
    ",": " ",
    ";": " ",
    "!": "",
    "{": "{",
    "}": "}",
    "%": "%",
    "&": "&",
    "_": "_",
    "#": "#",
}
TEX_FUNCTIONS = {"log", "exp", "max", "min", "poly", "softmax", "sin", "cos", "det", "lim"}
# Where a paragraph is not the page's own prose (sphinx-proof's and sphinx-exercise's boxes are
# the node classes whose names end in "_node").
SKIP = (
    nodes.container,
    nodes.Admonition,
    nodes.caption,
    nodes.table,
    nodes.figure,
    nodes.footnote,
    nodes.citation,
    nodes.topic,
    nodes.sidebar,
)
FRAC = re.compile(r"\\frac\{([^{}]*)\}\{([^{}]*)\}")
TEX_COMMAND = re.compile(r"\\([A-Za-z]+|.)(\s?)")


def tex_to_text(tex: str) -> str:
    """A formula as plain text: ``\\mathcal A = \\{a_1, \\dots\\}`` -> ``A = {a_1, …}``."""

    def command(m: re.Match) -> str:
        name, space = m.group(1), m.group(2)
        if name in TEX_SYMBOLS:
            return TEX_SYMBOLS[name] + space
        # A font or operator command ("mathcal", "operatorname") is dropped with its space.
        return name + space if name in TEX_FUNCTIONS else ""

    text = FRAC.sub(r"(\1)/(\2)", tex.replace("^\\top", "\\top"))
    # Escaped braces (a set) stay; grouping braces go once the commands are read.
    text = text.replace("\\{", "\x00").replace("\\}", "\x01")
    text = re.sub(r"[{}]", "", TEX_COMMAND.sub(command, text))
    text = text.replace("\x00", "{").replace("\x01", "}")
    return re.sub(r"\s+", " ", text).strip()


def plain_text(node) -> str:
    """A paragraph's text, its formulas as plain text."""
    parts = []
    for child in node.findall(nodes.Text):
        if isinstance(child.parent, nodes.math):
            parts.append(tex_to_text(child.astext()))
        else:
            parts.append(child.astext())
    return re.sub(r"\s+", " ", "".join(parts)).strip()


def shorten(text: str, limit: int = MAX_DESCRIPTION) -> str:
    """At most ``limit`` characters, cut at a word and marked with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "…"


def description(doctree, meta: dict, fallback: str) -> str:
    """The page's ``description`` field, else its first paragraph of prose, else ``fallback``."""
    if meta.get("description"):
        return shorten(str(meta["description"]).strip())
    if doctree is not None:
        for para in doctree.findall(nodes.paragraph):
            # Prose of the page itself: not a box, caption, table or a notebook cell's output.
            if any(
                isinstance(a, SKIP) or type(a).__name__.endswith("_node") for a in _ancestors(para)
            ):
                continue
            text = plain_text(para)
            if len(text) >= 40:
                return shorten(text)
    return shorten(fallback)


def _ancestors(node):
    while node.parent is not None:
        node = node.parent
        yield node


def _head(app, pagename, templatename, context, doctree) -> None:
    title = re.sub(r"<[^>]+>", "", html.unescape(context.get("title") or ""))
    site = app.config.html_title or app.config.project
    desc = description(doctree, context.get("meta") or {}, title or site)
    tags = {
        "og:title": title or site,
        "og:description": desc,
        "og:type": "article" if doctree is not None else "website",
        "og:site_name": site,
    }
    # No og:url or og:image: the book has no public URL yet, and a preview image needs one.
    lines = [f'<meta name="description" content="{html.escape(desc)}" />']
    lines += [f'<meta property="{k}" content="{html.escape(v)}" />' for k, v in tags.items()]
    context["metatags"] = context.get("metatags", "") + "\n" + "\n".join(lines) + "\n"


def one_viewport(text: str) -> str:
    """Keep the first viewport tag of the page and drop the others."""
    seen = []

    def keep_first(m: re.Match) -> str:
        seen.append(m)
        return m.group(0) if len(seen) == 1 else ""

    return VIEWPORT.sub(keep_first, text)


def unique_ids(text: str) -> str:
    """Rename each later copy of an id on the page: ``proof-content``, ``proof-content-2``..."""
    used = Counter(m.group(2) for m in ID_ATTR.finditer(text))
    if all(n == 1 for n in used.values()):
        return text
    seen: Counter = Counter()

    def rename(m: re.Match) -> str:
        ident = m.group(2)
        seen[ident] += 1
        if used[ident] == 1 or seen[ident] == 1:
            return m.group(0)
        new, k = ident, seen[ident]
        while new in used:
            new, k = f"{ident}-{k}", k + 1
        used[new] += 1
        return f"{m.group(1)}{new}{m.group(3)}"

    return ID_ATTR.sub(rename, text)


def page_title(text: str) -> str:
    """A built page's title without the book's ("5. Lower bounds: ..."); '' if none."""
    m = TITLE.search(text)
    title = html.unescape(re.sub(r"<[^>]+>", "", m.group(1))) if m else ""
    return title.split(" \u2014 ")[0].strip()


def citing_sites(pages: dict[Path, str]) -> dict[str, list[tuple[str, str, str]]]:
    """For each bibliography entry id, the (page file, citation id, page title) of the first
    citation of it on each page that cites it, in the order of ``pages``."""
    sites: dict[str, list] = defaultdict(list)
    for page, text in pages.items():
        if page.name == "bibliography.html":
            continue
        seen = set()
        for span_id, inner in CITATION.findall(text):
            for entry in CITED_ENTRY.findall(inner):
                if entry not in seen:
                    seen.add(entry)
                    sites[entry].append((page.name, span_id, page_title(text) or page.stem))
    return sites


def with_backlinks(bib: str, sites: dict[str, list]) -> str:
    """The bibliography page with a "Cited in" line of links under each cited entry."""

    def add(m: re.Match) -> str:
        entry = m.group(2)
        if not sites.get(entry):
            return m.group(0)
        links = ", ".join(
            f'<a class="reference internal" role="doc-backlink" href="{html.escape(f)}#'
            f'{html.escape(i)}">{html.escape(label)}</a>'
            for f, i, label in sites[entry]
        )
        return f'{m.group(1)}<p class="book-cited-in">Cited in {links}.</p>\n{m.group(3)}'

    return ENTRY.sub(add, bib)


def doc_order(env, root: str) -> list[str]:
    """The documents in the book's order (the table of contents, depth first)."""
    order: list[str] = []

    def walk(doc: str) -> None:
        if doc not in order:
            order.append(doc)
            for child in env.toctree_includes.get(doc, []):
                walk(child)

    walk(root)
    return order


def _finish(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    pages = {p: p.read_text(encoding="utf-8") for p in out.rglob("*.html")}
    new = dict(pages)
    bib = out / "book" / "bibliography.html"
    if bib in pages:
        ordered = [out / f"{doc}.html" for doc in doc_order(app.env, app.config.root_doc)]
        cited = {p: pages[p] for p in ordered if p in pages and p.parent == bib.parent}
        new[bib] = with_backlinks(pages[bib], citing_sites(cited)).replace(
            # docutils' DPUB role is deprecated in ARIA 1.2; its list needs list items.
            ' role="doc-biblioentry"',
            ' role="listitem"',
        )
    for page, text in new.items():
        text = unique_ids(one_viewport(text))
        if text != pages[page]:
            page.write_text(text, encoding="utf-8")


def setup(app):
    # Their files are in static/, which book_site.py adds to html_static_path.
    app.add_css_file("book-a11y.css", priority=950)
    app.add_js_file("book-a11y.js", loading_method="defer")
    app.connect("html-page-context", _head)
    app.connect("build-finished", _finish)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
