"""Small Sphinx fixes for the book's HTML, found by the browser check (.ci/browser_check/).

Loaded through ``sphinx.local_extensions`` in _config.yml.

- Sphinx 7.4 emits an inline ``<script>`` twice when an extension adds it after the builder
  starts (``app.add_js_file(None, body=...)``: the registry copy has filename ``None``, the
  builder copy ``''``, so they do not compare equal). sphinx-thebe's body declares
  ``const THEBE_JS_URL``, so the second copy throws a SyntaxError on every page. Drop exact
  duplicates before the page is rendered.
- pydata-sphinx-theme's layout loads Sphinx's search tools and the whole search index on every
  page, for a search-as-you-type box the book does not enable (``search_as_you_type`` is off:
  the search button opens ``search.html``). That is about 140 kB on every page, over the page
  budget on the longest chapters; drop the three tags from every page but the search page.
- Images load lazily (``loading="lazy"``): a chapter's thirty-odd figures no longer hold up the
  first screen, which matters most on a phone. Only in the multi-page site: the single page
  that ``make pdf`` prints needs every image before it prints.
"""

from __future__ import annotations

import re
from pathlib import Path

# The three tags the theme's layout writes (with or without a relative prefix and cache query).
_SEARCH_TAGS = re.compile(
    r'[ \t]*<script src="[^"]*(?:_static/searchtools\.js|_static/language_data\.js|searchindex\.js)'
    r'(?:\?[^"]*)?"></script>\n?'
)
# An <img> tag that does not say how to load, of a file (an inline data: image, such as a live
# figure's frame, is in the page already; deferring it only delays its drawing).
_EAGER_IMG = re.compile(r"<img (?![^>]*\bloading=)(?![^>]*\bsrc=\"data:)")


def _drop_duplicate_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not isinstance(scripts, list):
        return
    seen, unique = set(), []
    for js in scripts:
        key = (
            getattr(js, "filename", js) or "",
            tuple(sorted((getattr(js, "attributes", None) or {}).items())),
        )
        if key not in seen:
            seen.add(key)
            unique.append(js)
    scripts[:] = unique


def _lighten_pages(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    lazy = app.builder.name == "html"
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        lean = text if page == out / "search.html" else _SEARCH_TAGS.sub("", text)
        if lazy:
            lean = _EAGER_IMG.sub('<img loading="lazy" ', lean)
        if lean != text:
            page.write_text(lean, encoding="utf-8")


def setup(app):
    # Late priority: after myst-nb and the theme have added their per-page scripts.
    app.connect("html-page-context", _drop_duplicate_scripts, priority=900)
    app.connect("build-finished", _lighten_pages)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
