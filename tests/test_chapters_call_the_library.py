"""Chapters only call the library: no code cell of a notebook in book/ defines a function or a
class (``def``, ``async def``, ``class``, or a lambda bound to a name), imports a private name
of attnlib, or calls a private attribute (``x._name(...)``). Showing a private function's
source, ``nbt.show(fast._exp)``, names it without calling it and is allowed. IPython magics
(lines starting with ``%`` or ``!``) are not Python and are skipped."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _python(source: str) -> str:
    """The cell's source with each IPython magic line replaced by ``pass``."""
    lines = []
    for line in source.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")):
            line = line[: len(line) - len(stripped)] + "pass"
        lines.append(line)
    return "\n".join(lines)


def cell_violations(source: str) -> list[str]:
    """What in one code cell breaks "chapters only call the library", one line per finding."""
    found = []
    for node in ast.walk(ast.parse(_python(source))):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append(f"{where}: defines the function {node.name!r}")
        elif isinstance(node, ast.ClassDef):
            found.append(f"{where}: defines the class {node.name!r}")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Lambda):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = ", ".join(ast.unparse(t) for t in targets)
            found.append(f"{where}: defines the function {names!r} as a lambda")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "attnlib":
            parts = node.module.split(".")
            for alias in node.names:
                if any(_private(p) for p in parts) or _private(alias.name):
                    found.append(f"{where}: imports the private {node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "attnlib" and any(_private(p) for p in parts):
                    found.append(f"{where}: imports the private {alias.name}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and _private(node.func.attr)
        ):
            found.append(f"{where}: calls the private {ast.unparse(node.func)}(...)")
    return found


def notebook_violations(path: Path) -> list[str]:
    """Every violation of every code cell of the notebook, naming the cell."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found = []
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        name = f"{path.name} cell {index} (id {cell.get('id', '?')})"
        found += [f"{name}, {v}" for v in cell_violations(source)]
    return found


# ---- the checker on small synthetic cells ----


@pytest.mark.parametrize(
    "source,expected",
    [
        ("def helper(x):\n    return x + 1\n", "defines the function 'helper'"),
        ("async def fetch():\n    pass\n", "defines the function 'fetch'"),
        ("if True:\n    def inner():\n        pass\n", "defines the function 'inner'"),
        ("class Point:\n    pass\n", "defines the class 'Point'"),
        ("square = lambda x: x * x\n", "defines the function 'square' as a lambda"),
        (
            "from attnlib.fast import _block_sizes\n",
            "imports the private attnlib.fast._block_sizes",
        ),
        (
            "from attnlib._checks import check_int\n",
            "imports the private attnlib._checks.check_int",
        ),
        ("import attnlib._checks as ck\n", "imports the private attnlib._checks"),
        (
            "from attnlib import fast\nfast._block_sizes(64, 64)\n",
            "calls the private fast._block_sizes",
        ),
        ("io.TwoLevelMemory(64)._reserve(3)\n", "calls the private io.TwoLevelMemory(64)._reserve"),
    ],
)
def test_checker_refuses(source, expected):
    found = cell_violations(source)
    assert len(found) == 1 and expected in found[0], found


@pytest.mark.parametrize(
    "source",
    [
        "nbt.show(io.TwoLevelMemory._reserve)\n",
        "nbt.show(fast._exp, docstring=False)\n",
        "from attnlib import nbtools as nbt\nnbt.glue_number('x', 1.5)\n",
        "text = repr(model).__len__()\n",
        "%timeit al.attention(Q, K, V)\nx = 1\n",
        "for n in ns:\n    !echo {n}\n",
        "errors = sorted(errs, key=lambda e: e[1])\n",
    ],
)
def test_checker_allows(source):
    assert cell_violations(source) == []


def test_checker_names_notebook_and_cell(tmp_path):
    notebook = {
        "cells": [
            {"cell_type": "markdown", "id": "m1", "source": ["def not_code(): pass"]},
            {"cell_type": "code", "id": "c1", "source": ["x = 1\n"]},
            {"cell_type": "code", "id": "c2", "source": ["def f():\n", "    pass\n"]},
        ]
    }
    path = tmp_path / "99_example.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    assert notebook_violations(path) == [
        "99_example.ipynb cell 2 (id c2), line 1: defines the function 'f'"
    ]


# ---- the chapters ----


def test_there_are_chapters():
    assert len(NOTEBOOKS) >= 10


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_chapter_only_calls_the_library(notebook):
    found = notebook_violations(notebook)
    assert not found, "chapter code that belongs in the library:\n" + "\n".join(found)
