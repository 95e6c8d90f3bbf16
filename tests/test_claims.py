"""The register of claims: every labelled statement of the book has an entry in book/claims.yml,
and every entry is checked or says why it cannot be.

A labelled statement is a ``prf:theorem``, ``prf:lemma``, ``prf:proposition``,
``prf:corollary`` or ``prf:conjecture`` box of a chapter or page (its ``:label:``), or a MyST
target ``(claim-<chapter>-<slug>)=`` put before a sentence that states a bound, an optimality,
a threshold or a winner outside a box. The register gives each one a status ("proved here",
"cited" with the source's theorem, lemma or section number and what was read of it, "our
reconstruction", or "measured": a sentence about measured time or memory, which a chapter
asserts against the committed results of ``make bench``, never a live timing), the checks
that attack it (pytest node ids, or a notebook's code cell with an ``assert`` named by a unique
substring of its source) and, when no machine check is possible, the reason. The page "How
each claim is checked" (book/claims.ipynb) renders the register, and book/_ext/book_claims.py
puts each box's status under its title.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest
import yaml

from attnlib.iomodel import certify

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
REGISTER = BOOK / "claims.yml"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "claims"

KINDS = ("theorem", "lemma", "proposition", "corollary", "conjecture")
STATUSES = ("proved here", "cited", "our reconstruction", "measured")
#: A box proves, cites or reconstructs; only a sentence outside a box states a measurement.
BOX_STATUS_WORDS = {
    "proved here": "proved here",
    "cited": "cited",
    "our reconstruction": "reconstruction",
}
#: What a cited entry must say it read of its source.
READ = ("paper", "abstract", "secondary")
FIELDS = {"label", "chapter", "kind", "status", "source", "check", "family", "sizes", "reason"}
#: "families": the families of attnlib.iomodel.certify (counted schedules and exact optima
#: held against a certified bound) whose smallest count/bound ratio the page computes;
#: "says": the sentence of a claim target in a few words (the page's link text).
FIELDS |= {"families", "says"}
#: The names of every family certify attacks with.
FAMILIES = {
    f.name for f in certify.schedule_families([(16, 16, 2, 2, 8)]) + certify.optimum_families()
}

_BOX = re.compile(r"^\s*(`{3,}|:{3,})\{prf:(\w+)\}\s*(.*?)\s*$")
_OPTION = re.compile(r"^\s*:(\w+):\s*(.*?)\s*$")
_TARGET = re.compile(r"^\((claim-[\w-]+)\)=\s*$")
# A source names a numbered place in the paper, or says it read the abstract only.
_NUMBERED = re.compile(
    r"\b(Theorem|Lemma|Corollary|Proposition|Hypothesis|Conjecture|Section|Algorithm|"
    r"Claim|Definition|Appendix)\s+(?:[A-Z]\.?)?\d+(?:\.\d+)*\b|§\s*\d|\babstract\b"
)


def boxes_in(markdown: str) -> list[tuple[str, str | None]]:
    """(kind, label) of every box of the five kinds in a markdown text; label None when the box
    has no ``:label:`` option (the options are the lines right after the opening fence)."""
    return [(kind, label) for kind, label, _ in titled_boxes_in(markdown)]


def titled_boxes_in(markdown: str) -> list[tuple[str, str | None, str]]:
    """(kind, label, title) of every box of the five kinds in a markdown text."""
    found, lines = [], markdown.splitlines()
    for i, line in enumerate(lines):
        m = _BOX.match(line)
        if not m or m.group(2) not in KINDS:
            continue
        label = None
        for option in lines[i + 1 :]:
            opt = _OPTION.match(option)
            if not opt:
                break
            if opt.group(1) == "label":
                label = opt.group(2) or None
        found.append((m.group(2), label, m.group(3)))
    return found


def status_in_title(title: str) -> str | None:
    """The status a box's title claims ("… (proved here)", "… (cited: SY24, Theorem 3.1)",
    "… (our reconstruction)"), or None when it names none."""
    words = title.lower()
    claimed = [s for s, w in BOX_STATUS_WORDS.items() if w in words]
    return claimed[0] if len(claimed) == 1 else None


def targets_in(markdown: str) -> list[str]:
    """The names of the ``(claim-…)=`` targets of a markdown text."""
    return [m.group(1) for line in markdown.splitlines() if (m := _TARGET.match(line.strip()))]


def markdown_of(path: Path) -> str:
    """A page's markdown: a .md file whole, a notebook's markdown cells joined."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".ipynb":
        return text
    cells = json.loads(text)["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def statements(book: Path) -> dict[str, tuple[str, str | None]]:
    """{label: (page, kind)} of every labelled statement of the book (kind None for a target);
    an unlabelled box is listed under "<page>: unlabelled <kind> n"."""
    return {label: (page, kind) for label, (page, kind, _) in _statements(book).items()}


def _statements(book: Path) -> dict[str, tuple[str, str | None, str]]:
    """{label: (page, kind, title)}, as :func:`statements` with each box's title ("" for a
    target)."""
    found: dict[str, tuple[str, str | None, str]] = {}
    for path in sorted([*book.glob("*.ipynb"), *book.glob("*.md")]):
        text = markdown_of(path)
        for n, (kind, label, title) in enumerate(titled_boxes_in(text)):
            found[label or f"{path.name}: unlabelled {kind} {n}"] = (path.name, kind, title)
        for label in targets_in(text):
            found[label] = (path.name, None, "")
    return found


def load_register(path: Path = REGISTER) -> list[dict]:
    entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(entries, list), f"{path.name} is not a list of entries"
    return entries


def _test_function(node_id: str, tests: Path):
    """The test function a pytest node id names, or None: the module imported (tests/ is on the
    path, as pytest puts it there), then each name after '::' looked up; a parametrised id's
    '[...]' is dropped."""
    file, *names = node_id.split("::")
    path = tests.parent / file
    if not names or not path.is_file() or path.parent != tests:
        return None
    obj = importlib.import_module(path.stem)
    for name in names:
        obj = getattr(obj, name.split("[")[0], None)
        if obj is None:
            return None
    return obj if callable(obj) and obj.__name__.startswith("test") else None


def _notebook_check(check: str, book: Path) -> str | None:
    """What is wrong with a notebook check "<notebook>: <substring>", or None: the substring
    must occur in exactly one code cell of the notebook (or be exactly one cell's tag), and
    that cell must contain an ``assert``."""
    name, _, needle = check.partition(": ")
    path = book.parent / name
    if not needle or not path.is_file():
        return f"no notebook {name} (a check is '<tests/…::test> or <book/x.ipynb: substring>')"
    cells = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]
    code = [c for c in cells if c["cell_type"] == "code"]
    hits = [c for c in code if needle in c.get("metadata", {}).get("tags", [])]
    hits = hits or [c for c in code if needle in "".join(c["source"])]
    if len(hits) != 1:
        return f"{needle!r} is in {len(hits)} code cells of {name}, not exactly one"
    if not re.search(r"\bassert\b", "".join(hits[0]["source"])):
        return f"the cell of {name} with {needle!r} asserts nothing"
    return None


def entry_problems(entry: dict, book: Path, tests: Path) -> list[str]:
    """What is wrong with one entry of the register, one line each."""
    label = entry.get("label", "?")
    found = [f"{label}: unknown field {f!r}" for f in sorted(set(entry) - FIELDS)]
    if entry.get("status") not in STATUSES:
        found.append(f"{label}: status {entry.get('status')!r} is not one of {STATUSES}")
    source = str(entry.get("source") or "")
    if entry.get("status") == "cited":
        if not _NUMBERED.search(source):
            found.append(f"{label}: cited without a theorem, lemma or section number: {source!r}")
        if not any(word in source for word in READ):
            found.append(f"{label}: the source does not say what was read {READ}: {source!r}")
    for family in entry.get("families") or []:
        if family not in FAMILIES:
            found.append(f"{label}: {family!r} is no family of attnlib.iomodel.certify")
    if entry.get("kind") == "claim" and not str(entry.get("says") or "").strip():
        found.append(f"{label}: a claim target needs 'says', the sentence in a few words")
    checks = entry.get("check") or []
    if not isinstance(checks, list):
        found.append(f"{label}: check must be a list")
        checks = []
    for check in checks:
        if "::" in check:
            if _test_function(check, tests) is None:
                found.append(f"{label}: {check} names no test function")
        elif (wrong := _notebook_check(check, book)) is not None:
            found.append(f"{label}: {wrong}")
    if not checks and not str(entry.get("reason") or "").strip():
        found.append(f"{label}: no check and no reason why none is possible")
    if entry.get("status") == "measured" and not any(
        _reads_committed_results(c, book) for c in checks if "::" not in c
    ):
        found.append(
            f"{label}: measured, but no check is a chapter's assert on the committed results"
        )
    return found


def _reads_committed_results(check: str, book: Path) -> bool:
    """True if the notebook of a check "<notebook>: <substring>" reads the committed results of
    ``make bench`` (``attnlib.results.read_committed``): a measured sentence is asserted against
    those, never against a timing taken while the chapter runs."""
    path = book.parent / check.partition(": ")[0]
    if not path.is_file():
        return False
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return any("read_committed(" in "".join(c["source"]) for c in cells if c["cell_type"] == "code")


def register_problems(entries: list[dict], book: Path, tests: Path) -> list[str]:
    """Every way the register and the book disagree, one line each."""
    labels = statements(book)
    titles = {label: title for label, (_, _, title) in _statements(book).items()}
    found = [
        f"{label} ({page}) has no :label:" for label, (page, _) in labels.items() if ":" in label
    ]
    seen: dict[str, int] = {}
    for entry in entries:
        label = entry.get("label")
        seen[label] = seen.get(label, 0) + 1
        if label not in labels:
            found.append(f"{label}: in the register, not in the book")
        elif labels[label][1] not in (None, entry.get("kind")):
            found.append(
                f"{label}: the book has a {labels[label][1]}, the register {entry.get('kind')}"
            )
        elif labels[label][1] is None and entry.get("kind") != "claim":
            found.append(f"{label}: a claim target, registered as {entry.get('kind')!r}")
        claimed = status_in_title(titles.get(label, ""))
        if claimed not in (None, entry.get("status")):
            found.append(f"{label}: the title says {claimed}, the register {entry.get('status')}")
        found += entry_problems(entry, book, tests)
    found += [f"{label}: {n} entries" for label, n in seen.items() if n > 1]
    found += [
        f"{label} ({page}) has no entry in the register"
        for label, (page, _) in labels.items()
        if ":" not in label and label not in seen
    ]
    return found


# ---- the book's register --------------------------------------------------------------------


def test_every_statement_of_the_book_has_a_checked_entry():
    problems = register_problems(load_register(), BOOK, ROOT / "tests")
    assert not problems, "\n".join(problems)


def test_the_register_covers_every_chapter_with_boxes():
    chapters = {page for page, _ in statements(BOOK).values()}
    registered = {statements(BOOK)[e["label"]][0] for e in load_register()}
    assert chapters == registered and len(load_register()) >= 30


# ---- the parser and the checks on small fixture texts ----------------------------------------


def test_boxes_are_found_in_both_fences_with_their_labels():
    text = (FIXTURES / "book" / "page.md").read_text(encoding="utf-8")
    assert boxes_in(text) == [
        ("theorem", "thm-fx-one"),
        ("corollary", "cor-fx-two"),
        ("lemma", None),
        ("proposition", "prop-fx-cited"),
    ]
    assert targets_in(text) == ["claim-fx-sentence", "claim-fx-speed"]
    assert [status_in_title(t) for _, _, t in titled_boxes_in(text)] == [None] * 3 + ["cited"]
    assert status_in_title("Partition lemma (proved here)") == "proved here"
    assert status_in_title("Small-cache backward (our reconstruction)") == "our reconstruction"
    # a definition, an algorithm and a proof are not claims; a prf:ref is not a box
    assert boxes_in("```{prf:definition} D\n:label: def-x\n```\n{prf:ref}`thm-x`") == []


def test_notebook_markdown_cells_are_read_and_code_cells_are_not():
    labels = statements(FIXTURES / "book")
    assert labels["prop-fx-nb"] == ("chapter.ipynb", "proposition")
    assert "thm-fx-in-code" not in labels  # a box inside a code cell's string is not in the book


def test_a_bad_register_is_refused_on_every_count():
    problems = register_problems(
        load_register(FIXTURES / "bad.yml"), FIXTURES / "book", Path(__file__).parent
    )
    expected = [
        "page.md: unlabelled lemma 2 (page.md) has no :label:",
        "thm-fx-gone: in the register, not in the book",
        "thm-fx-one: status 'proven' is not one of",
        "cor-fx-two: cited without a theorem, lemma or section number",
        "cor-fx-two: the source does not say what was read",
        "prop-fx-nb: tests/test_claims.py::test_no_such_test names no test function",
        "prop-fx-nb: the cell of book/chapter.ipynb with 'total = 1 + 1' asserts nothing",
        "prop-fx-nb: 'print' is in 2 code cells of book/chapter.ipynb, not exactly one",
        "claim-fx-sentence: 'forward_order' is no family of attnlib.iomodel.certify",
        "claim-fx-sentence: a claim target needs 'says', the sentence in a few words",
        "claim-fx-sentence: no check and no reason why none is possible",
        "prop-fx-cited: the title says cited, the register proved here",
        "thm-fx-one: 2 entries",
        "conj-fx-nb (chapter.ipynb) has no entry in the register",
        "claim-fx-speed: measured, but no check is a chapter's assert on the committed results",
    ]
    for line in expected:
        assert any(p.startswith(line) for p in problems), (line, problems)
    assert len(problems) == len(expected), problems


def test_a_good_register_passes():
    problems = register_problems(
        load_register(FIXTURES / "good.yml"), FIXTURES / "book", Path(__file__).parent
    )
    assert problems == ["page.md: unlabelled lemma 2 (page.md) has no :label:"]


@pytest.mark.parametrize(
    "node_id, found",
    [
        ("tests/test_claims.py::test_a_good_register_passes", True),
        ("tests/test_claims.py::test_boxes_found[x-1]", False),
        ("tests/test_claims.py::test_a_good_register_passes[param]", True),
        ("tests/test_claims.py::KINDS", False),  # a name, not a test
        ("tests/test_nothing_here.py::test_x", False),
        ("tests/test_claims.py", False),
    ],
)
def test_pytest_node_ids_resolve_to_test_functions(node_id, found):
    assert (_test_function(node_id, Path(__file__).parent) is not None) == found


def test_the_source_rule_wants_a_number_or_the_abstract():
    assert _NUMBERED.search("SY24, Theorem 3.1 (paper)")
    assert _NUMBERED.search("LLS+24 (abstract)")
    assert _NUMBERED.search("AS24, Lemma E.2 (paper)")
    assert not _NUMBERED.search("SY24 (paper)")


# ---- the Sphinx extension: the status line, and the strict build's failure ------------------


def _build(tmp_path: Path, register: str) -> tuple[int, str, str]:
    """Build a one-box Sphinx project with sphinx_proof and book/_ext/book_claims.py, warnings as
    errors; return the exit status, the warnings and the page's HTML."""
    from sphinx.cmd.build import build_main

    src, out = tmp_path / "src", tmp_path / "out"
    (src / "book").mkdir(parents=True)
    ext = BOOK / "_ext"
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ext)!r})\n"
        "extensions = ['sphinx_proof', 'book_claims']\n"
    )
    (src / "index.rst").write_text(
        "Index\n=====\n\n.. toctree::\n\n   book/claims\n\n"
        ".. prf:theorem:: One\n   :label: thm-fx-one\n\n   Every schedule moves a word.\n"
    )
    (src / "book" / "claims.rst").write_text("How each claim is checked\n" + "=" * 25 + "\n")
    (src / "book" / "claims.yml").write_text(register)
    warnings = tmp_path / "warnings.txt"
    status = build_main(["-q", "-W", "-w", str(warnings), "-b", "html", str(src), str(out)])
    page = out / "index.html"
    html = page.read_text(encoding="utf-8") if page.exists() else ""
    return status, warnings.read_text(encoding="utf-8"), html


def test_the_build_prints_the_status_under_the_box(tmp_path):
    status, warnings, html = _build(
        tmp_path,
        "- label: thm-fx-one\n  kind: theorem\n  status: cited\n"
        "  source: HK81, Corollary 6.2 (paper)\n"
        "  check: [tests/test_claims.py::test_a_good_register_passes, 'book/05_x.ipynb: assert']\n",
    )
    assert status == 0 and warnings == ""
    line = re.search(r'<p class="claim-status">(.*?)</p>', html, re.S).group(1)
    text = re.sub(r"<[^>]+>", "", line)
    assert text == (
        "Cited: HK81, Corollary 6.2 (paper) · checked by test_a_good_register_passes and an "
        "assert in Chapter 5 · see How each claim is checked"
    )
    assert 'href="book/claims.html"' in line


def test_the_strict_build_fails_for_a_box_the_register_does_not_list(tmp_path):
    status, warnings, _ = _build(tmp_path, "[]\n")
    assert status != 0 and "thm-fx-one has no entry in book/claims.yml" in warnings
