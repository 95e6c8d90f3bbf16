"""Theorem, exercise, figure and equation numbers per chapter ("Theorem 2.3", "(4.1)").

Loaded through ``sphinx.local_extensions`` in _config.yml.

Sphinx numbers enumerable nodes (sphinx-proof's theorems, sphinx-exercise's exercises, figures,
and display math with ``math_numfig``) per chapter only inside a numbered toctree, so the
chapter parts of _toc.yml are ``numbered: true`` and ``numfig_secnum_depth`` is 1. The
chapter titles already carry their number ("# 2. The two-level memory machine"), so the
section numbers Sphinx would also print before each heading and each navigation entry
("2. 2. The two-level ...") are dropped once the enumerable numbers have been assigned from
them.
"""

from __future__ import annotations

from docutils import nodes


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


def setup(app):
    app.connect("env-get-updated", _drop_section_numbers, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
