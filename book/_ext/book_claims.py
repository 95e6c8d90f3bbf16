"""Every labelled claim shows its status: the register book/claims.yml, printed under each box.

Loaded through ``sphinx.local_extensions`` in _config.yml.

The register has one entry per labelled ``prf:theorem``, ``lemma``, ``proposition``,
``corollary`` and ``conjecture`` box, and per ``(claim-…)=`` target put before a sentence that
states a bound or an optimality outside a box. When a page is read, each such box gets a line
under its title, from its entry: the status ("Proved here", "Cited: SY24, Theorem 3.1
(paper)", "Our reconstruction"), what checks it (the tests and cells of the register, or why
nothing can), and a link to the page "How each claim is checked", which lists them all. A claim
target gets the same line after its paragraph. A box or target with no entry is reported as a
warning, which the strict build (``-W``) turns into a failure; tests/test_claims.py checks the
register against the book and the tests.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from docutils import nodes
from sphinx import addnodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

KINDS = ("theorem", "lemma", "proposition", "corollary", "conjecture")
REGISTER = Path("book") / "claims.yml"
CLAIMS_PAGE = "/book/claims"


def _load(app) -> None:
    path = Path(app.srcdir) / REGISTER
    entries = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    app.env.book_claims = {entry["label"]: entry for entry in entries}


def _page(notebook: str) -> str:
    """Where a notebook check's cell is, in words: "in Chapter 5" for book/05_lower_bounds.ipynb,
    "in the preface" for book/intro.ipynb, "on the claims page" for book/claims.ipynb."""
    stem = Path(notebook).stem
    if stem[:2].isdigit():
        return f"in Chapter {int(stem[:2])}"
    return {"intro": "in the preface", "claims": "on the claims page"}.get(stem, f"in {stem}")


def _checked_by(entry: dict) -> str:
    """The checks in words ("checked by test_a and an assert in Chapter 5"), or why nothing can
    check the claim."""
    names = []
    for check in entry.get("check") or []:
        if "::" in check:
            names.append(check.rsplit("::", 1)[1].split("[")[0])
        else:
            names.append("an assert " + _page(check.split(":", 1)[0]))
    if not names:
        return "not machine-checked: " + str(entry.get("reason", "")).strip().rstrip(".")
    joined = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return "checked by " + joined


def status_line(entry: dict, docname: str) -> nodes.paragraph:
    """The paragraph printed under a box's title."""
    status = str(entry["status"])
    head = status.capitalize()
    if status == "cited":
        head = "Cited: " + str(entry.get("source", "")).strip()
    elif status == "measured":
        head = "Measured: asserted against the committed results of make bench"
    para = nodes.paragraph(classes=["claim-status"])
    para += nodes.emphasis(text=f"{head} · {_checked_by(entry)} · see ")
    ref = addnodes.pending_xref(
        "",
        refdomain="std",
        reftype="doc",
        reftarget=CLAIMS_PAGE,
        refexplicit=True,
        refdoc=docname,
        refwarn=True,
    )
    ref += nodes.inline(text="How each claim is checked", classes=["std", "std-doc"])
    para += nodes.emphasis("", "", ref)
    return para


def _box_kind(node: nodes.Element) -> str | None:
    classes = node.get("classes", [])
    if "proof" not in classes:
        return None
    return next((kind for kind in KINDS if kind in classes), None)


def add_status_lines(app, doctree: nodes.document) -> None:
    """Put the status line under every labelled box and after every claim target's block;
    warn (an error under -W) about a box or target the register does not list."""
    env = app.env
    env.note_dependency(str(Path(app.srcdir) / REGISTER))
    register = env.book_claims
    for node in list(doctree.findall(nodes.Admonition)):
        kind = _box_kind(node)
        if kind is None:
            continue
        label = node.get("label", "")
        if re.fullmatch(rf"{kind}-\d+", label):
            logger.warning(f"a {kind} box has no :label:, so it has no status", location=node)
            continue
        if label not in register:
            logger.warning(f"{label} has no entry in {REGISTER}", location=node)
            continue
        content = next((c for c in node.children if isinstance(c, nodes.section)), None)
        if content is not None:
            content.insert(0, status_line(register[label], env.docname))
    for node in list(doctree.findall(nodes.Element)):
        ids = [i for i in node.get("ids", []) if i.startswith("claim-")]
        if not ids or isinstance(node, nodes.target):
            continue
        label = ids[0]
        if label not in register:
            logger.warning(f"{label} has no entry in {REGISTER}", location=node)
            continue
        line = status_line(register[label], env.docname)
        node.parent.insert(node.parent.index(node) + 1, line)


def setup(app):
    app.connect("builder-inited", _load)
    app.connect("doctree-read", add_status_lines)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
