"""The README's layout section matches the tree: every module of attnlib/ it lists exists,
every module is listed, and its line-count claim holds (.ci/readme_layout.py; after adding,
renaming or removing a module, `make readme-layout` writes the map again)."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load():
    spec = importlib.util.spec_from_file_location(
        "readme_layout", ROOT / ".ci" / "readme_layout.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["readme_layout"] = module
    spec.loader.exec_module(module)
    return module


layout = _load()
FIX = "run `make readme-layout` (python .ci/readme_layout.py --write), then edit what it adds"


@pytest.fixture(scope="module")
def readme():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text, layout.parse(text)


def test_every_module_listed_in_the_readme_exists(readme):
    fails = layout.tree_problems(readme[1], ROOT / "attnlib")
    assert [f for f in fails if "is in the tree but not listed" not in f] == [], FIX


def test_every_module_of_attnlib_is_listed_in_the_readme(readme):
    fails = layout.tree_problems(readme[1], ROOT / "attnlib")
    assert [f for f in fails if "is in the tree but not listed" in f] == [], FIX


def test_the_readme_line_count_claim_holds(readme):
    section = layout.section_text(readme[0])
    assert layout.CLAIM.search(section), "the layout section states no line count"
    assert layout.claim_problems(section, ROOT / "attnlib") == []


def test_the_files_named_for_benchmarks_and_tests_exist(readme):
    assert layout.other_folder_problems(readme[1], ROOT) == []


# The check itself, on a small tree --------------------------------------------------------

README = """# A book

### The layout

One idea a file (none is over 5 lines).

```
attnlib/
  __init__.py     the public names
  core.py         the math, described by hand
                  over two lines
  gone.py         a module that was removed
  part/           Part I
    a.py            the first module of the part
benchmarks/       run.py (the driver)
tests/            naive.py (loop oracles)
```

After the block.
"""


@pytest.fixture
def tree(tmp_path):
    def write(rel, text):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")

    write("README.md", README)
    write("attnlib/__init__.py", '"""The package."""\n')
    write("attnlib/core.py", '"""Core."""\n')
    write("attnlib/new.py", '"""The new module: what it does. More detail."""\n')
    write("attnlib/part/__init__.py", '"""Part I."""\n')
    write("attnlib/part/a.py", '"""A."""\n')
    write("attnlib/part/b.py", '"""Uses :func:`attnlib.core.f` on ``x``. Then more."""\n')
    write("attnlib/part/__pycache__/a.cpython-311.py", "")
    write("benchmarks/run.py", "")
    write("benchmarks/extra.py", "")
    write("tests/naive.py", "")
    return tmp_path


def test_parse_reads_entries_and_their_continuation_lines(tree):
    parsed = layout.parse(README)
    assert [e.path for e in parsed.entries] == [
        "__init__.py",
        "core.py",
        "gone.py",
        "part/",
        "part/a.py",
    ]
    assert parsed.entries[1].lines[1].strip() == "over two lines"
    assert parsed.text() == README


def test_the_check_finds_each_kind_of_problem(tree):
    assert layout.problems(tree) == [
        "attnlib/gone.py is listed but not in the tree",
        "attnlib/new.py is in the tree but not listed",
        "attnlib/part/b.py is in the tree but not listed",
        "benchmarks/extra.py is not named in the layout",
    ]
    (tree / "attnlib" / "core.py").write_text("x = 1\n" * 6, encoding="utf-8")
    (tree / "tests" / "naive.py").unlink()
    fails = layout.problems(tree)
    assert "attnlib/core.py has 6 lines, over the 5 the README claims" in fails
    assert "tests/naive.py is named but not there" in fails


def test_a_line_count_said_otherwise_is_refused(tree):
    section = "No file is much over 450 lines, and the longest has 600 lines."
    assert layout.claim_problems(section, tree / "attnlib") == [
        "the line count '600 lines' is not a claim 'over N lines'"
    ]


def test_a_module_listed_twice_is_found(tree):
    text = README.replace("  gone.py ", "  core.py ")
    fails = layout.tree_problems(layout.parse(text), tree / "attnlib")
    assert fails[0] == "attnlib/core.py is listed twice"


def test_write_keeps_written_entries_drops_gone_ones_and_adds_new_ones(tree):
    assert layout.main(["--write", "--root", str(tree)]) == 1  # benchmarks/extra.py stays
    text = (tree / "README.md").read_text(encoding="utf-8")
    assert "\n".join(text.splitlines()[7:18]) == "\n".join(
        [
            "attnlib/",
            "  __init__.py     the public names",
            "  core.py         the math, described by hand",
            "                  over two lines",
            "  new.py          the new module: what it does",
            "  part/           Part I",
            "    a.py            the first module of the part",
            "    b.py            Uses attnlib.core.f on x",
            "benchmarks/       run.py (the driver)",
            "tests/            naive.py (loop oracles)",
            "```",
        ]
    )
    assert text.endswith("After the block.\n")
    assert layout.tree_problems(layout.parse(text), tree / "attnlib") == []
    # A second write changes nothing.
    assert layout.rewrite(text, tree / "attnlib") == text


def test_a_new_subpackage_goes_last_with_its_modules(tree):
    (tree / "attnlib" / "extra").mkdir()
    (tree / "attnlib" / "extra" / "__init__.py").write_text('"""The extra part."""\n')
    (tree / "attnlib" / "extra" / "z.py").write_text('"""Z."""\n')
    text = layout.rewrite(README, tree / "attnlib")
    paths = [e.path for e in layout.parse(text).entries]
    assert paths[-3:] == ["part/b.py", "extra/", "extra/z.py"]


def test_generated_lines_are_wrapped_to_the_readme_width():
    lines = layout.entry_lines("part/long.py", "word " * 40)
    assert len(lines) > 1
    assert all(len(line) <= layout.WIDTH for line in lines)
    assert lines[0].startswith("    long.py         word")
    assert all(line.startswith(" " * 20 + "word") for line in lines[1:])
