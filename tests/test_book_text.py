"""The book's text: every measured number in prose is computed, and nothing points at notes a
reader does not have.

A number a chapter's prose quotes must come from a cell: glued (``{glue:text}``) or printed just
above. This test reads every markdown cell of every chapter and fails on a decimal number in the
prose itself. Numbers inside math (``$…$``: constants and formulas), inside code (``…``), in
citations and cross-references, and after words that label a numbered thing (Theorem 3.1,
Section 10.2, version 0.1.0) are not measurements and are skipped.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "book").glob("*.ipynb"))
PAGES = sorted((ROOT / "book").glob("*.md"))

# A fence opens code (```python, ```) or a directive whose body is prose (```{prf:theorem}).
_FENCE = re.compile(r"^(`{3,}|:{3,})\s*(\{[^}]*\})?")
_NOT_PROSE = [
    re.compile(p, re.S)
    for p in (
        r"\$\$.*?\$\$",  # display math
        r"\$[^$\n]*\$",  # inline math
        r"\{[\w:-]+\}`[^`]*`",  # roles: {glue:text}`…`, {cite}`…`, {ref}`…`, {eq}`…`
        r"`[^`\n]*`",  # inline code
        r"https?://\S+",
        r"<!--.*?-->",
        r"^\(\S+\)=$",  # labels
        r"^:\w+:.*$",  # directive options (:label:, :class:)
    )
]
# Words after which a number names a thing rather than measures one.
_LABEL = re.compile(
    r"(Theorem|Thm|Lemma|Definition|Def|Corollary|Cor|Proposition|Prop|Algorithm|Alg|Section|"
    r"Sec|§|Appendix|App|Hypothesis|Hyp|Equation|Eq|Table|Figure|Fig|Chapter|Step|Exercise|"
    r"version|v|in|##+)\.?\s*$",
    re.I,
)
_DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\d.])")
_ORDINAL = re.compile(r"^(st|nd|rd|th)\b")


def prose(markdown: str) -> str:
    """The prose of a markdown cell: code blocks dropped, math, code and roles blanked."""
    kept, in_code = [], False
    for line in markdown.splitlines():
        fence = _FENCE.match(line.strip())
        if fence and line.strip().startswith("```"):
            if in_code:
                in_code = False
            elif fence.group(2) is None:
                in_code = True
            continue
        if not in_code and not (fence and line.strip().startswith(":::")):
            kept.append(line)
    text = "\n".join(kept)
    for pattern in _NOT_PROSE:
        text = pattern.sub(" ", text) if pattern.flags & re.M == 0 else text
    for pattern in _NOT_PROSE[-2:]:
        text = re.sub(pattern.pattern, " ", text, flags=re.M)
    return text


def typed_numbers(markdown: str) -> list[str]:
    text = prose(markdown)
    found = []
    for m in _DECIMAL.finditer(text):
        if _LABEL.search(text[max(0, m.start() - 16) : m.start()]):
            continue
        if _ORDINAL.match(text[m.end() :]):  # the 99.9th percentile: a setting
            continue
        found.append(f"{m.group()} in «…{text[max(0, m.start() - 50) : m.end() + 25].strip()}…»")
    return found


def markdown_cells(path: Path) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def test_the_prose_scanner_finds_typed_numbers():
    text = "The crossover lands at 1.57 d² (glued: {glue:text}`x:.2f`), Theorem 3.1, $e^{2.5}$."
    assert [hit.split()[0] for hit in typed_numbers(text)] == ["1.57"]
    assert typed_numbers("```python\nx = 0.5\n```\nthe 99.9th percentile, `v0.1.0`") == []


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_no_measured_number_is_typed_into_prose(chapter):
    hits = [hit for cell in markdown_cells(chapter) for hit in typed_numbers(cell)]
    assert not hits, "glue these numbers or print them in the cell above:\n" + "\n".join(hits)


_TEAM_NOTES = re.compile(
    r"THEORY\.md|DESIGN\.md|TOOLCHAIN\.md|\bthe issue\b|\bissue #?\d|appended by",
    re.I,
)


def test_no_reference_to_notes_a_reader_does_not_have():
    texts = {p: p.read_text() for p in sorted((ROOT / "attnlib").rglob("*.py")) + PAGES}
    texts |= {p: "\n".join(markdown_cells(p)) for p in CHAPTERS}
    for p in CHAPTERS:  # code cells too: comments and strings
        cells = json.loads(p.read_text())["cells"]
        texts[p] += "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    hits = [
        f"{p.relative_to(ROOT)}: {m.group()}"
        for p, t in texts.items()
        for m in _TEAM_NOTES.finditer(t)
    ]
    assert not hits, hits
