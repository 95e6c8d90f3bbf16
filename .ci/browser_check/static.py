"""Checks of the built HTML as it is on disk: links, figure numbers, glossary links, the
notebook download, the favicon and the bibliography.

Each check is a function of the parsed page (and the files of the build it points at) that
returns ``(problems, number of things checked)``; none needs a browser.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urlsplit

from bs4 import BeautifulSoup

from .settings import FIGURE_NUMBER, SKIP_DIRS, SKIP_SCHEMES, WIDGET_VIEW

# The attributes that reference another file of the build.
LINK_ATTRIBUTES = (
    ("a", "href"),
    ("link", "href"),
    ("script", "src"),
    ("img", "src"),
    ("source", "src"),
)


def parse(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8", errors="replace"), "html.parser")


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
            soup = parse(path)
            ids = {t["id"] for t in soup.find_all(id=True)}
            ids |= {t["name"] for t in soup.find_all("a", attrs={"name": True})}
            self._cache[path] = ids
        return self._cache[path]


def redirect_target(soup: BeautifulSoup) -> str | None:
    """Where a ``<meta http-equiv="refresh">`` page sends the reader, or None."""
    meta = soup.find("meta", attrs={"http-equiv": re.compile("^refresh$", re.I)})
    if meta is None:
        return None
    m = re.search(r"url=(.+)$", meta.get("content", ""), re.I)
    return m.group(1).strip().strip("'\"") if m else None


def _link_targets(soup: BeautifulSoup) -> list[tuple[str, str]]:
    """(kind, URL) of every internal reference of the page, the redirect included."""
    targets = [
        (tag.name, tag[attr])
        for name, attr in LINK_ATTRIBUTES
        for tag in soup.find_all(name)
        if tag.get(attr)
    ]
    redirect = redirect_target(soup)
    if redirect:
        targets.append(("meta refresh", redirect))
    out = []
    for kind, url in targets:
        url = url.strip()
        if url and not url.lower().startswith(SKIP_SCHEMES) and not url.startswith("//"):
            out.append((kind, url))
    return out


def _link_problem(kind: str, url: str, page: Path, root: Path, ids: Ids) -> str | None:
    """What is wrong with one internal link: no file, or no element for its fragment."""
    parts = urlsplit(url)
    target = page
    if parts.path:
        target = (page.parent / unquote(parts.path)).resolve()
        if target.is_dir():
            target = target / "index.html"
    try:
        target.relative_to(root.resolve())
    except ValueError:
        return f"{kind} {url!r} points outside the build"
    if not target.is_file():
        return f"{kind} {url!r}: no file {target.relative_to(root.resolve())}"
    frag = unquote(parts.fragment)
    if frag and target.suffix == ".html" and frag not in ids(target):
        return f"{kind} {url!r}: no element with id {frag!r} in {target.name}"
    return None


def check_links(page: Path, root: Path, soup: BeautifulSoup, ids: Ids) -> tuple[list[str], int]:
    """Every internal href/src resolves to a file, and every fragment to an id."""
    targets = _link_targets(soup)
    problems = (_link_problem(kind, url, page, root, ids) for kind, url in targets)
    return [p for p in problems if p], len(targets)


def is_chapter(rel: str, root: Path) -> bool:
    """A page built from a notebook: the preface and the chapters."""
    return (root / "_sources" / Path(rel).with_suffix(".ipynb")).is_file()


def chapter_number(rel: str) -> int | None:
    """The number of a chapter page (book/03_x.html -> 3); None for other pages."""
    m = re.match(r"book/(\d+)_", rel)
    return int(m.group(1)) if m else None


def _widget_cell(tag) -> bool:
    """A code cell whose output is a live widget (tagged nbval-ignore-output, with a view)."""
    cell = tag.find_parent(class_="cell")
    return bool(
        cell
        and "tag_nbval-ignore-output" in cell.get("class", [])
        and cell.find("script", type=WIDGET_VIEW)
    )


def _figure_images(soup: BeautifulSoup) -> list:
    """The images code cells draw, apart from live widgets (a live figure's image counts: it
    is a numbered figure like a static one)."""
    article = soup.select_one(".bd-article") or soup
    return [img for img in article.select(".cell_output img") if not _widget_cell(img)]


def _figure_number(img, chapter: int | None) -> tuple[int | None, list[str]]:
    """The number k of the figure an image sits in, and what is wrong with its caption."""
    figure = img.find_parent("figure")
    span = figure.select_one("figcaption .caption-number") if figure else None
    if span is None:
        name = Path(img.get("src", "?")).name[:16]
        return None, [f"figure image {name}… is not in a <figure> with a numbered caption"]
    label = span.get_text(" ", strip=True)
    m = FIGURE_NUMBER.match(label)
    if not m or (int(m.group(1)) if m.group(1) else None) != chapter:
        want = f"Figure {chapter}.k" if chapter is not None else "Figure k"
        return None, [f"figure {label!r} is not numbered {want!r}"]
    if not figure.select_one("figcaption .caption-text"):
        return int(m.group(2)), [f"{label} has a number but no caption text"]
    return int(m.group(2)), []


def check_figures(rel: str, root: Path, soup: BeautifulSoup) -> tuple[list[str], int]:
    """On a page built from a notebook, every image a code cell draws (live widgets apart) is
    in a <figure> captioned "Figure N.k" (N the chapter, none on the preface), k = 1, 2, ..."""
    if not is_chapter(rel, root):
        return [], 0
    images = _figure_images(soup)
    fails, numbers = [], []
    for img in images:
        number, problems = _figure_number(img, chapter_number(rel))
        fails += problems
        if number is not None:
            numbers.append(number)
    if numbers and numbers != list(range(1, len(numbers) + 1)):
        fails.append(f"figure numbers on this page run {numbers}, not 1, 2, ... (per chapter)")
    return fails, len(images)


_TERMS: dict[Path, set[str]] = {}


def glossary_terms(glossary: Path) -> set[str]:
    """The ids of the terms (<dt>) of the glossary page."""
    if glossary not in _TERMS:
        soup = BeautifulSoup(glossary.read_text(encoding="utf-8"), "html.parser")
        _TERMS[glossary] = {dt["id"] for dt in soup.select("dl.glossary dt[id]")}
    return _TERMS[glossary]


def _term_problem(span, page: Path, glossary: Path) -> str | None:
    """What is wrong with one glossary term of the text: not linked, or linked elsewhere."""
    a = span.find_parent("a")
    if a is None or not a.get("href"):
        return f"glossary term {span.get_text()!r} is not linked (unknown term?)"
    parts = urlsplit(a["href"])
    target = (page.parent / unquote(parts.path)).resolve() if parts.path else page.resolve()
    if target != glossary.resolve() or unquote(parts.fragment) not in glossary_terms(glossary):
        return f"term link {a['href']!r} does not point at a term of the glossary"
    return None


def check_glossary_links(
    page: Path, rel: str, root: Path, soup: BeautifulSoup
) -> tuple[list[str], int]:
    """Term links point at terms of the glossary; each page built from a notebook has one."""
    glossary = root / "book" / "glossary.html"
    if not glossary.is_file():
        return ["no glossary page book/glossary.html"], 1
    article = soup.select_one(".bd-article") or soup
    spans = article.select("span.std-term")
    problems = [_term_problem(span, page, glossary) for span in spans]
    fails = [p for p in problems if p]
    n = len(spans)
    linked = len(spans) - len(fails)
    if is_chapter(rel, root):
        n += 1
        if not linked:
            fails.append("the chapter links no glossary term")
    return fails, n


def check_download(rel: str, root: Path, soup: BeautifulSoup) -> tuple[list[str], int]:
    """A page built from a notebook offers its .ipynb for download."""
    src_nb = root / "_sources" / Path(rel).with_suffix(".ipynb")
    if not src_nb.is_file():
        return [], 0
    if not soup.find("a", href=re.compile(r"\.ipynb$")):
        return [f"no download link to {src_nb.name}"], 1
    return [], 1


def check_favicon(soup: BeautifulSoup) -> tuple[list[str], int]:
    """A favicon, so browsers do not request a missing /favicon.ico."""
    if not soup.find("link", rel=lambda v: v and "icon" in v):
        return ["no favicon link"], 1
    return [], 1


def check_static(page: Path, root: Path, soup: BeautifulSoup, ids: Ids):
    """Every check of this module on one page: (problems, Counter of checks by kind). A
    redirect page is only link-checked."""
    rel = page.relative_to(root).as_posix()
    fails, n_links = check_links(page, root, soup, ids)
    checks = Counter(links=n_links)
    if redirect_target(soup):
        return fails, checks
    for kind, (kind_fails, n) in {
        "figures": check_figures(rel, root, soup),
        "glossary": check_glossary_links(page, rel, root, soup),
        "download": check_download(rel, root, soup),
        "favicon": check_favicon(soup),
    }.items():
        checks[kind] += n
        fails.extend(kind_fails)
    return fails, checks


def words(text: str) -> str:
    """The text in lower case with everything but letters and digits removed, for matching
    titles across HTML, BibTeX and PDF text."""
    return re.sub(r"[^a-z0-9]+", "", text.lower())


def check_bibliography(root: Path, bib: Path) -> tuple[list[str], int]:
    """Every .bib entry's title appears on the page that holds the bibliography."""
    from pybtex.database import parse_file

    entries = parse_file(str(bib)).entries
    pages = [(p.read_text(encoding="utf-8", errors="replace"), p) for p in page_list(root)]
    # sphinxcontrib-bibtex writes each entry as <div class="citation" role="doc-biblioentry">;
    # book_a11y makes the deprecated role a list item: count an entry by either mark
    entry = re.compile(r'<div\b[^>]*(?:class="citation"|role="doc-biblioentry")')
    pages = [(len(entry.findall(html)), html, p) for html, p in pages]
    count, html, _ = max(pages, key=lambda t: t[0], default=(0, "", None))
    if not count:
        return [f"no page lists a bibliography, but {bib.name} has {len(entries)} entries"], 1
    text = words(BeautifulSoup(html, "html.parser").get_text())
    fails = [
        f"{key} ({bib.name}) is not in the bibliography: cite it somewhere in the book"
        for key, entry in entries.items()
        if words(re.sub(r"[{}\\]", "", entry.fields.get("title", key))) not in text
    ]
    return fails, len(entries)
