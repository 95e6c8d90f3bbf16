"""The tests mirror the library: every module attnlib/<path>.py has its own test file,
tests/test_<name>.py, and every test file is either some module's or one of the few
cross-cutting files listed below with the reason it cuts across.

<name> is the module's dotted path below attnlib with the dots as underscores and leading
underscores dropped: attnlib/iomodel/flash.py -> test_iomodel_flash.py, attnlib/_heads.py ->
test_heads.py, attnlib/_checks/arrays.py -> test_checks_arrays.py. A package's __init__.py
needs a file only when it defines code (a function or a class), not when it only gathers its
modules' names: attnlib/plots/__init__.py -> test_plots.py; the root package's is
test_attnlib.py. The modules are found by reading the source tree, so a new module without
tests fails here at once."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "attnlib"
TESTS = ROOT / "tests"

#: Test files that are about no single module, each with the reason.
CROSS_CUTTING = {
    "test_qkv_inputs.py": "the bad Q, K, V table: every implementation that takes Q, K, V "
    "refuses the same malformed arrays with the same message",
    "test_contract.py": "the two cores (exact and compiled) accept and refuse the same calls",
    "test_batched_reference.py": "every attention implementation (exact, compiled, the "
    "training step) against one float64 reference, never against each other",
    "test_naive.py": "the slow naive oracles of tests/naive.py, which the other tests trust",
    "test_layering.py": "the import graph: no core module imports a part, no part another",
    "test_public_names.py": "every module's __all__ lists its public names and only those",
    "test_iomodel_twins.py": "every machine schedule of every iomodel module against its "
    "closed-form count, found by introspection",
    "test_book_text.py": "the book's prose: no typed measured number, no team notes",
    "test_claims.py": "the register of claims (book/claims.yml) against the book's labelled "
    "statements and the tests and cells that check them",
    "test_chapters_call_the_library.py": "the chapters define no code of their own",
    "test_readme.py": "README's module map against the source tree",
    "test_browser_check.py": "the CI browser check of the built book (.ci/browser_check)",
    "test_layout_of_tests.py": "this file: the test files against the modules",
    "test_benchmarks_chapters.py": "benchmarks/chapters.py, outside attnlib: the timings the "
    "chapters assert their statements about speed against",
    "test_book_figures.py": "book/_ext/book_figures.py, outside attnlib: each figure's phone "
    "form served by width, and the whole-book PDF keeping the desktop form",
    "test_book_prose.py": "book/_ext/book_prose.py and the chapters' cells, outside attnlib: "
    "every folded cell has its one-line summary, no computation is removed from a page",
    "test_reader_setup.py": "requirements-reader.txt and requirements.txt, outside attnlib: the "
    "reader's and the authors' pins, and every notebook's first cell on getting attnlib",
}

#: Files named like this belong to the bad-input tables (split by subpackage), whatever follows.
CROSS_CUTTING_PREFIXES = {"test_bad_input_": "the bad-input tables, one file per subpackage"}


def defines_code(path: Path) -> bool:
    """True if the module defines a function or a class (a package's __init__.py that only
    imports its modules' names defines none)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return any(isinstance(node, kinds) for node in tree.body)


def expected_test_file(path: Path, library: Path = LIBRARY) -> str:
    """tests/test_<name>.py of the module at ``path`` (a file under ``library``)."""
    parts = list(path.relative_to(library).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if not parts:
        return "test_attnlib.py"
    return "test_" + "_".join(part.lstrip("_") for part in parts) + ".py"


def modules_needing_tests(library: Path = LIBRARY) -> dict[str, Path]:
    """{test file name: module path} for every module of ``library`` that needs one."""
    found: dict[str, Path] = {}
    for path in sorted(library.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        if path.name == "__init__.py" and not defines_code(path):
            continue
        name = expected_test_file(path, library)
        assert name not in found, f"{path} and {found[name]} both map to {name}"
        found[name] = path
    return found


def is_cross_cutting(name: str) -> bool:
    return name in CROSS_CUTTING or any(name.startswith(p) for p in CROSS_CUTTING_PREFIXES)


def layout_problems(library: Path = LIBRARY, tests: Path = TESTS) -> list[str]:
    """What breaks the rule: a module without its test file, a test file of no module that is
    not listed as cross-cutting, and a listed cross-cutting file that is missing or that is in
    fact some module's file."""
    wanted = modules_needing_tests(library)
    present = {p.name for p in tests.glob("test_*.py")}
    problems = [
        f"{path.relative_to(library.parent)} has no tests/{name}"
        for name, path in wanted.items()
        if name not in present
    ]
    problems += [
        f"tests/{name} tests no module (rename it after the module it tests, move its tests "
        "there, or list it in CROSS_CUTTING with the reason)"
        for name in sorted(present - set(wanted))
        if not is_cross_cutting(name)
    ]
    problems += [
        f"CROSS_CUTTING lists {name}, which does not exist"
        for name in CROSS_CUTTING
        if name not in present
    ]
    problems += [
        f"CROSS_CUTTING lists {name}, which is the test file of {wanted[name]}"
        for name in CROSS_CUTTING
        if name in wanted
    ]
    return problems


def test_every_module_has_its_test_file_and_every_test_file_its_module():
    problems = layout_problems()
    assert not problems, "\n".join(problems)


def test_a_module_test_file_tests_its_module():
    """A file named after a module uses it: it names the module or one of the names the
    module defines, so that a file is not left behind under a module's name after its tests
    moved away."""
    lazy = []
    for name, path in modules_needing_tests().items():
        test_file = TESTS / name
        if not test_file.exists():
            continue  # reported by the test above
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = {
            node.name
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        }
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined |= {t.id for t in targets if isinstance(t, ast.Name)}
        defined -= {"__all__", "__version__"}
        text = test_file.read_text(encoding="utf-8")
        dotted = ".".join(path.relative_to(LIBRARY.parent).with_suffix("").parts)
        dotted = dotted.removesuffix(".__init__")
        words = set(re.findall(r"\w+", text))
        if dotted not in text and not defined & words:
            lazy.append(f"tests/{name} names neither {dotted} nor anything it defines")
        if "def test_" not in text:
            lazy.append(f"tests/{name} has no test")
    assert not lazy, "\n".join(lazy)


# ---- the rule itself, on a small tree ---------------------------------------------------------


def _tree(tmp_path, modules, test_files):
    library, tests = tmp_path / "attnlib", tmp_path / "tests"
    for rel, text in modules.items():
        (library / rel).parent.mkdir(parents=True, exist_ok=True)
        (library / rel).write_text(text)
    tests.mkdir()
    for name in test_files:
        (tests / name).write_text("def test_x():\n    pass\n")
    return library, tests


@pytest.mark.parametrize(
    "rel, name",
    [
        ("iomodel/flash.py", "test_iomodel_flash.py"),
        ("_heads.py", "test_heads.py"),
        ("_checks/arrays.py", "test_checks_arrays.py"),
        ("plots/iomodel.py", "test_plots_iomodel.py"),
        ("plots/__init__.py", "test_plots.py"),
        ("__init__.py", "test_attnlib.py"),
    ],
)
def test_names_follow_the_module_path(rel, name):
    assert expected_test_file(LIBRARY / rel) == name


def test_the_rule_catches_a_missing_an_orphan_and_a_stale_listing(tmp_path):
    library, tests = _tree(
        tmp_path,
        {
            "__init__.py": "from .exact import f\n",  # gathers names only: no file needed
            "exact.py": "def f():\n    pass\n",
            "_heads.py": "def g():\n    pass\n",
            "plots/__init__.py": "def style():\n    pass\n",  # defines code: needs one
            "plots/iomodel.py": "X = 1\n",
        },
        ["test_exact.py", "test_heads.py", "test_plots_iomodel.py", "test_exact_batched.py"],
    )
    problems = layout_problems(library, tests)
    assert any("attnlib/plots/__init__.py has no tests/test_plots.py" in p for p in problems)
    assert any("tests/test_exact_batched.py tests no module" in p for p in problems)
    assert any("test_contract.py, which does not exist" in p for p in problems)
    assert not any("test_attnlib.py" in p for p in problems)
    (tests / "test_plots.py").write_text("")
    (tests / "test_exact_batched.py").rename(tests / "test_bad_input_core.py")
    assert all("does not exist" in p for p in layout_problems(library, tests))
