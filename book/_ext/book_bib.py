"""The bibliography lists entries as the text cites them, and links their arXiv ids and DOIs.

Loaded through ``sphinx.local_extensions`` in _config.yml, which sets
``bibtex_default_style: book_author_year``.

- Labels: the text cites author-year (``bibtex_reference_style: author_year``), "[Hong and Kung,
  1981]"; pybtex's default ``alpha`` labels would list that entry as "[HK81]". The
  ``book_author_year`` style labels each entry the way sphinxcontrib-bibtex's author-year
  citations name it: one or two surnames joined by "and", or the first surname and "et al." for
  three or more, then the year; a letter after the year tells apart equal labels. Entries are
  sorted by author, year and title, as before.
- Links: pybtex links ``url``, ``doi`` and ``eprint`` fields; an arXiv id (``arXiv:2402.04497``)
  or a URL written in a ``note`` stays plain text, so it is turned into a link here, in every
  citation node of the resolved pages.
"""

from __future__ import annotations

import re
from collections import Counter

from docutils import nodes
from pybtex.plugin import register_plugin
from pybtex.style.formatting.alpha import Style as AlphaStyle
from pybtex.style.labels import BaseLabelStyle

LINKABLE = re.compile(
    r"(?P<arxiv>arXiv:(?P<id>\d{4}\.\d{4,5}(?:v\d+)?))|(?P<url>https?://[^\s,;)]+[^\s,;).])"
)


def _surname(person) -> str:
    parts = person.prelast_names + person.last_names
    return " ".join(parts).replace("{", "").replace("}", "")


class AuthorYearLabelStyle(BaseLabelStyle):
    """'Hong and Kung, 1981', 'Dao et al., 2022': the names author-year citations print."""

    def format_labels(self, sorted_entries):
        labels = [self._label(entry) for entry in sorted_entries]
        seen = Counter(labels)
        suffix: Counter = Counter()
        for label in labels:
            if seen[label] > 1:
                suffix[label] += 1
                yield label + "abcdefghijklmnopqrstuvwxyz"[suffix[label] - 1]
            else:
                yield label

    @staticmethod
    def _label(entry) -> str:
        people = entry.persons.get("author") or entry.persons.get("editor") or []
        names = [_surname(p) for p in people]
        if not names:
            who = entry.key
        elif len(names) <= 2:
            who = " and ".join(names)
        else:
            who = f"{names[0]} et al."
        return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearStyle(AlphaStyle):
    default_label_style = "book_author_year"


def _link_notes(app, doctree, docname) -> None:
    for citation in doctree.findall(nodes.citation):
        for text in list(citation.findall(nodes.Text)):
            if isinstance(text.parent, nodes.reference) or not LINKABLE.search(text):
                continue
            pieces, last = [], 0
            for m in LINKABLE.finditer(text):
                pieces.append(nodes.Text(text[last : m.start()]))
                uri = f"https://arxiv.org/abs/{m['id']}" if m["arxiv"] else m["url"]
                pieces.append(nodes.reference(m.group(0), m.group(0), refuri=uri))
                last = m.end()
            pieces.append(nodes.Text(text[last:]))
            text.parent.replace(text, [p for p in pieces if not (isinstance(p, str) and not p)])


def setup(app):
    register_plugin("pybtex.style.labels", "book_author_year", AuthorYearLabelStyle)
    register_plugin("pybtex.style.formatting", "book_author_year", AuthorYearStyle)
    app.connect("doctree-resolved", _link_notes)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
