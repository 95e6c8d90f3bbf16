"""Prose first (book/_ext/book_prose.py): every folded code cell of a chapter names what it
computes in its first line, which the build puts on the fold's toggle; a text output wraps
unless its columns line up; a long output folded after its summary line keeps every line."""

import json
import sys
from pathlib import Path

import pytest
from docutils import nodes
from docutils.utils import new_document

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))


sys.path.insert(0, str(ROOT / "book" / "_ext"))  # Sphinx loads the extension from there
import book_prose  # noqa: E402


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("# Figure 7.2: time against n\nx = 1", "Figure 7.2: time against n"),
        ("\n# Table: gaps  \nx = 1", "Table: gaps"),
        ("x = 1  # not a first-line comment", None),
        ("#!/usr/bin/env python\nx = 1", None),
        ("#\nx = 1", None),
        ("", None),
    ],
)
def test_cell_summary(source, expected):
    assert book_prose.cell_summary(source) == expected


def test_aligned_outputs_scroll_and_the_rest_wrap():
    table = "  n   error\n128   1e-3\n256   2e-3"
    assert book_prose.aligned(table)
    assert not book_prose.aligned("max |error| < 1e-13; counted 25458 words, closed form 25458")
    assert not book_prose.aligned("one line with  a double space\nand another line")


def _summarised(tags: list[str], text: str) -> list[nodes.Element]:
    """The children of a code cell with one text output ``text``, after the transform."""
    document = new_document("cell")
    cell = nodes.container(nb_element="cell_code", classes=["cell", *tags])
    output = nodes.container(nb_element="cell_code_output", classes=["cell_output"])
    output += nodes.literal_block(text, text, classes=["output", "stream"])
    cell += output
    document += cell
    book_prose.OutputSummaries(document).run()
    return cell.children


@pytest.mark.parametrize(
    ("tag", "text", "shown", "prompt", "folded"),
    [
        (
            "tag_output-summary-first",
            "72 shapes: all faster\n  row 1\n  row 2\n",
            "72 shapes: all faster",
            "Show the remaining 2 lines",
            "  row 1\n  row 2\n",
        ),
        (
            "tag_output-summary-last",
            "a  b\n1  2\n\n2 pairs checked\n",
            "2 pairs checked",
            "Show the full output (4 lines)",
            "a  b\n1  2\n\n2 pairs checked\n",
        ),
    ],
)
def test_a_long_output_shows_its_summary_and_folds_the_rest(tag, text, shown, prompt, folded):
    summary, toggle = _summarised([tag], text)
    assert summary.astext() == shown
    assert isinstance(toggle, book_prose.HideCodeCellNode)
    assert (toggle["prompt_show"], toggle.astext()) == (prompt, folded)


def test_an_output_without_a_summary_tag_is_left_alone():
    assert [c.astext() for c in _summarised([], "a\nb\n")] == ["a\nb\n"]


def _tagged(path: Path, tag: str) -> list[tuple[int, str]]:
    """(index, source) of each code cell of the notebook that carries ``tag``."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [
        (index, "".join(cell["source"]))
        for index, cell in enumerate(cells)
        if cell["cell_type"] == "code" and tag in cell.get("metadata", {}).get("tags", [])
    ]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_every_folded_cell_has_a_summary(notebook):
    missing = [
        i for i, source in _tagged(notebook, "hide-input") if not book_prose.cell_summary(source)
    ]
    assert missing == [], f"{notebook.name}: folded cells without a first-line summary"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_no_computation_is_removed_from_the_page(notebook):
    removed = [i for i, _ in _tagged(notebook, "remove-input")]
    assert removed == [], f"{notebook.name}: fold these cells' input (hide-input), not remove it"
