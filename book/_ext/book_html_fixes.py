"""Small Sphinx fixes for the book's HTML, found by the browser check (.ci/browser_check.py).

Loaded through ``sphinx.local_extensions`` in _config.yml.

- Sphinx 7.4 emits an inline ``<script>`` twice when an extension adds it after the builder
  starts (``app.add_js_file(None, body=...)``: the registry copy has filename ``None``, the
  builder copy ``''``, so they do not compare equal). sphinx-thebe's body declares
  ``const THEBE_JS_URL``, so the second copy throws a SyntaxError on every page. Drop exact
  duplicates before the page is rendered.
"""

from __future__ import annotations


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


def setup(app):
    # Late priority: after myst-nb and the theme have added their per-page scripts.
    app.connect("html-page-context", _drop_duplicate_scripts, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
