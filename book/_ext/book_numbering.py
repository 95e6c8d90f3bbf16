"""Theorem, exercise, figure and equation numbers per chapter ("Theorem 2.3", "(4.1)").

Loaded through ``sphinx.local_extensions`` in _config.yml.

Sphinx numbers enumerable nodes (sphinx-proof's theorems, sphinx-exercise's exercises, figures,
and display math with ``math_numfig``) per chapter only inside a numbered toctree, so the
chapter parts of _toc.yml are ``numbered: true`` and ``numfig_secnum_depth`` is 1. The
chapter titles already carry their number ("# 2. The two-level memory machine"), so the
section numbers Sphinx would also print before each heading and each navigation entry
("2. 2. The two-level ...") are dropped once the enumerable numbers have been assigned from
them.

Figures drawn by code cells get their caption, target name and alt text from the cell's
``mystnb`` metadata (``figure`` and ``image``), which myst-nb applies to every display output
of the cell. A cell that displays several images, or an image and a table, lists one entry per
image instead, in ``book_figures`` (``name``, ``caption``, ``alt``): each image output is then
wrapped in its own figure, and the cell's other outputs stay as they are. Such captions are
plain text with ``$...$`` math. Figures are labelled "Figure 3.2", like theorems.
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx.transforms import SphinxTransform

MATH = re.compile(r"\$([^$]+)\$")


def _drop_section_numbers(app, env) -> list[str]:
    # Runs after the toctree collector's env-get-updated handler (priority 500), which assigned
    # env.toc_fignumbers from these section numbers.
    env.toc_secnumbers = {}
    for toc in env.tocs.values():
        for ref in toc.findall(nodes.reference):
            ref.attributes.pop("secnumber", None)
    for title in env.titles.values():
        title.attributes.pop("secnumber", None)
    return []


def _caption(text: str) -> nodes.caption:
    """A caption node from plain text with $...$ inline math."""
    caption = nodes.caption(text)
    pos = 0
    for m in MATH.finditer(text):
        caption += nodes.Text(text[pos : m.start()])
        caption += nodes.math(m.group(0), m.group(1))
        pos = m.end()
    caption += nodes.Text(text[pos:])
    return caption


class CellFigures(SphinxTransform):
    """Wrap each image output of a cell with ``book_figures`` metadata in a named figure."""

    # Before Sphinx's AutoNumbering (210), which gives the figures without a name an id.
    default_priority = 205

    def apply(self, **kwargs) -> None:
        for cell in list(self.document.findall(nodes.container)):
            if cell.get("nb_element") != "cell_code":
                continue
            specs = (cell.get("cell_metadata") or {}).get("book_figures")
            if not specs:
                continue
            bundles = [
                b
                for b in cell.findall(nodes.container)
                if b.get("nb_element") == "mime_bundle"
                and any(c.get("mime_type", "").startswith("image/") for c in b.children)
            ]
            if len(bundles) != len(specs):
                self.document.reporter.warning(
                    f"book_figures lists {len(specs)} figures, the cell shows {len(bundles)} "
                    "images",
                    base_node=cell,
                )
                continue
            for bundle, spec in zip(bundles, specs, strict=True):
                for image in bundle.findall(nodes.image):
                    image["alt"] = spec["alt"]
                figure = nodes.figure()
                figure.source, figure.line = cell.source, cell.line
                bundle.replace_self(figure)
                figure += bundle
                figure += _caption(spec["caption"])
                figure["names"].append(nodes.fully_normalize_name(spec["name"]))
                self.document.note_explicit_target(figure, figure)


def _figure_label(app, config) -> None:
    config.numfig_format = {**(config.numfig_format or {}), "figure": "Figure %s"}


def setup(app):
    app.add_transform(CellFigures)
    app.connect("config-inited", _figure_label)
    app.connect("env-get-updated", _drop_section_numbers, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
