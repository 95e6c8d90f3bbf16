"""Site-level features of the online book: navigation, phone layout, downloads, lighter pages.

Loaded through ``sphinx.local_extensions`` in _config.yml.

- ``static/book-site.js`` (deferred, so it runs before the theme scripts bind their buttons)
  removes the hidden sidebar toggles that pydata-sphinx-theme 0.17 adds, which both theme
  scripts bind instead of the visible ones (figures enlarge through book_figures.py).
- ``static/book-site.css``: display math scrolls instead of being clipped, inline code wraps,
  figures fit the column.
- The downloads (attnlib's wheel, a zip of the chapter notebooks, the pinned requirements of a
  reader and of the authors and, once ``make pdf`` has run, the whole book as one PDF) are built
  by ``.ci/build_downloads.py`` into ``_build/downloads/downloads/`` and copied into the site as
  ``downloads/`` through ``html_extra_path``. Their links reach the pages as MyST substitutions
  ``wheel_link``, ``notebooks_link``, ``requirements_link``, ``reader_requirements_link`` and
  ``pdf_link``; ``wheel_file`` is the wheel's name for the ``pip install`` line. A missing wheel,
  zip or requirements file is a build warning (an error under ``-W``).
- sphinx-thebe is loaded by Jupyter Book unconditionally; the book has no Binder to run it,
  so its script, style sheet and per-page configuration are dropped from every page.
- pydata-sphinx-theme converts its icons to SVG with a 1.45 MB ``fontawesome.js``; its style
  sheet already draws the same icons from the Font Awesome web font, so the script is replaced
  by a one-line stub after the build. That font (156 kB) holds some 1,400 icons; the book shows
  about 15, so ``_static/book-icons.css`` points the font at a subset of it, written by
  fontTools after the build with the glyphs of every ``fa-*`` name the pages and theme scripts
  use. Without fontTools the style sheet is left empty and the full font is used.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
DOWNLOADS = "downloads"  # the folder name inside the site
PDF_NAME = "fine-grained-complexity-of-training-attention.pdf"
NOTEBOOKS_ZIP = "notebooks.zip"
REQUIREMENTS = "requirements.txt"
READER_REQUIREMENTS = "requirements-reader.txt"
FONTAWESOME_STUB = (
    "/* The icons are drawn by the Font Awesome web font of pydata-sphinx-theme.css; the 1.45 MB"
    " SVG script this file held is not needed (book/_ext/book_site.py). */\n"
)


def _link(name: str, label: str | None = None) -> str:
    # Pages live in book/, one folder below the site root.
    href = f"../{DOWNLOADS}/{name}"
    text = html.escape(label or name)
    return f'<a class="reference download" href="{html.escape(href)}">{text}</a>'


def _configure(app, config) -> None:
    config.html_static_path.append(str(STATIC))
    staging = Path(app.confdir) / config.book_downloads_dir
    folder = staging / DOWNLOADS
    wheels = sorted(folder.glob("attnlib-*.whl"))
    subs = dict(config.myst_substitutions or {})
    expected = (NOTEBOOKS_ZIP, REQUIREMENTS, READER_REQUIREMENTS)
    missing = [n for n in expected if not (folder / n).is_file()]
    if not wheels or missing:
        logger.warning(
            "book_site: no attnlib wheel, %s, %s or %s in %s: run `make downloads` (make book "
            "does)",
            *expected,
            folder,
        )
    wheel = wheels[-1].name if wheels else "attnlib.whl"
    subs.update(
        wheel_file=wheel,
        wheel_link=_link(wheel),
        notebooks_link=_link(NOTEBOOKS_ZIP),
        requirements_link=_link(REQUIREMENTS),
        reader_requirements_link=_link(READER_REQUIREMENTS),
        pdf_link=(
            _link(PDF_NAME, "the whole book as one PDF")
            if (folder / PDF_NAME).is_file()
            else "the whole book as one PDF (not part of this copy: `make pdf` builds it)"
        ),
    )
    config.myst_substitutions = subs
    if folder.is_dir() and str(staging) not in map(str, config.html_extra_path):
        config.html_extra_path.append(str(staging))


def _page_assets(app, pagename, templatename, context, doctree) -> None:
    """Drop sphinx-thebe's assets: there is no Binder for it to start a kernel on."""
    for key in ("script_files", "css_files"):
        files = context.get(key)
        if not isinstance(files, list):
            continue
        files[:] = [
            f
            for f in files
            if "thebe" not in str(getattr(f, "filename", f) or "")
            and "THEBE_JS_URL" not in str((getattr(f, "attributes", None) or {}).get("body", ""))
        ]


def _drop_thebe_config(app, doctree, docname) -> None:
    """Drop the per-page Thebe configuration sphinx-thebe appends (it names a Binder repo)."""
    for node in list(doctree.findall(nodes.raw)):
        text = node.astext()
        if "x-thebe-config" in text or text.strip().startswith("<script>kernelName ="):
            node.parent.remove(node)


def _icon_codepoints(out: Path) -> set[int]:
    """The code points of every Font Awesome icon the built pages, scripts and styles use."""
    static = out / "_static"
    glyph, points = {}, set()
    sheets = list(static.glob("*.css")) + list((static / "styles").glob("*.css"))
    for sheet in sheets:
        css = sheet.read_text(encoding="utf-8", errors="replace")
        for selector, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
            # An icon is a private-use character, escaped ("\\f0c9") or literal (in the
            # theme's --pst-icon-* variables).
            codes = {int(c, 16) for c in re.findall(r'"\\([ef][0-9a-f]{3})"', body)}
            codes |= {ord(ch) for ch in body if 0xE000 <= ord(ch) <= 0xF8FF}
            names = re.findall(r"\.fa-([a-z0-9-]+):(?::)?before", selector)
            if names:
                # Font Awesome's own class list: an icon counts only if something names it.
                for name in names:
                    glyph[name] = codes
            else:
                # Icons a style sheet draws itself: admonition titles, "on this page" arrows.
                points |= codes
    # The pages, and the scripts of the themes and extensions that add icons at run time (the
    # widget bundle's icons come from its own font).
    scripts = list(static.glob("*.js")) + list((static / "scripts").glob("*.js"))
    for path in list(out.rglob("*.html")) + scripts:
        if path.name != "fontawesome.js":
            for name in set(re.findall(r"fa-([a-z0-9-]+)", path.read_text(errors="replace"))):
                points |= glyph.get(name, set())
    return points


def _subset_icon_font(out: Path) -> str:
    """Write the subset font; return the @font-face rule that uses it ('' when not possible)."""
    font = out / "_static" / "vendor" / "fontawesome" / "webfonts" / "fa-solid-900.ttf"
    try:
        from fontTools import subset
    except ImportError:
        return ""
    if not font.is_file():
        return ""
    points = _icon_codepoints(out)
    if not points:
        return ""
    options = subset.Options()
    options.flavor = "woff"  # woff2 would need brotli
    ttf = subset.load_font(str(font), options)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=points)
    subsetter.subset(ttf)
    subset.save_font(ttf, str(out / "_static" / "book-icons.woff"), options)
    # Declared after the theme's rule for the same family and weight, so it replaces it.
    return (
        f"/* {len(points)} icons of Font Awesome 6 Free Solid (book/_ext/book_site.py). */\n"
        '@font-face { font-family: "Font Awesome 6 Free"; font-style: normal; font-weight: 900;'
        ' font-display: block; src: url(book-icons.woff) format("woff"); }\n'
    )


def _lighter_icons(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    script = out / "_static" / "scripts" / "fontawesome.js"
    if script.is_file():
        script.write_text(FONTAWESOME_STUB, encoding="utf-8")
        for extra in (".map", ".LICENSE.txt"):
            Path(str(script) + extra).unlink(missing_ok=True)
    rule = _subset_icon_font(out)
    (out / "_static" / "book-icons.css").write_text(
        rule or "/* The theme's full icon font is used (no fontTools to subset it). */\n",
        encoding="utf-8",
    )


def _singlehtml_handlers(app) -> None:
    """Give the single-page build (``make pdf``) every HTML node handler.

    Sphinx looks up node handlers by builder name before format, so once one extension
    registers a handler for ``singlehtml``, the ``html`` handlers of the others (sphinx-proof's
    theorem nodes, for one) are not used there and the build stops on an unknown node.
    """
    if app.builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    single = handlers.setdefault("singlehtml", {})
    for node, visitors in handlers.get("html", {}).items():
        single.setdefault(node, visitors)


def setup(app):
    app.add_config_value("book_downloads_dir", "_build/downloads", "html")
    app.connect("config-inited", _configure)
    app.connect("builder-inited", _singlehtml_handlers)
    app.add_css_file("book-site.css")
    # Written after the build (see _lighter_icons); loaded after the theme's style sheet.
    app.add_css_file("book-icons.css", priority=900)
    app.add_js_file("book-site.js", loading_method="defer")
    app.connect("html-page-context", _page_assets, priority=900)
    # After sphinx-thebe's own doctree-resolved handler (default priority 500).
    app.connect("doctree-resolved", _drop_thebe_config, priority=900)
    app.connect("build-finished", _lighter_icons)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
