"""Display equations that fit the column, or show that they scroll.

Loaded through ``sphinx.local_extensions`` in _config.yml.

MathJax 3 does not break lines: an equation wider than the column is written on several lines
in its source (``aligned``), or it scrolls sideways inside its ``mjx-container``
(``static/book-site.css``). A scroll box with nothing at its edge reads as an equation that
ends there, so

- ``static/book-math.js`` marks each display equation that has more to its right or to its
  left (``book-math-more-right``, ``book-math-more-left``), as it is typeset (MathJax's lazy
  typesetting included), resized or scrolled;
- ``static/book-math.css`` fades the equation out at such an edge, and on a phone puts the
  equation number under the equation instead of beside it, so the equation has the column's
  whole width. In print nothing scrolls: an equation is shown whole (``.ci/print_pdf.py`` scales
  one that is still wider than the page).
"""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).parent / "static"


def _configure(app, config) -> None:
    config.html_static_path.append(str(STATIC))


def setup(app):
    app.connect("config-inited", _configure)
    app.add_css_file("book-math.css")
    app.add_js_file("book-math.js", loading_method="defer")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
