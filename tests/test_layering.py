"""attnlib's layers, read from every module's imports (with ``ast``, so nothing is imported).

The book's parts are subpackages on top of one core:

* a **part** (``iomodel``, ``polymethod``, ``hardness``, ``models``) imports the core and its
  own part, never another part sideways;
* a **core** module (every other module of attnlib) imports no part;
* the modules that draw on every part may import all of them: ``advice`` and ``advice_maps``
  (the cost model and its maps), ``step`` (one training step by any algorithm, the polynomial
  method included), the figures (``plots``) and the live widgets (``widgets``);
* ``nbtools`` is for the chapters: no module of the library imports it;
* a module never imports the ``__init__`` of its own package (or of an enclosing one): the
  package would then have to import it last, after the names it takes from there;
* no two modules import each other, directly or through others.

Every import counts, also one inside a function: a lazy import is an edge all the same, it
only moves the failure from import time to the first call.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "attnlib"

PARTS = ("iomodel", "polymethod", "hardness", "models")
#: Modules and packages that may import every part.
EVERY_PART = ("advice", "advice_maps", "step", "plots", "widgets", "distributed")
#: Imported by the chapters only.
CHAPTERS_ONLY = "nbtools"


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Every module under ``root`` (a package directory): dotted name -> (file, is a package)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, package)
    return found


def _target(name: str, package: bool, node: ast.ImportFrom) -> str:
    """The module an ``from ... import`` statement reads from (before its names)."""
    if not node.level:
        return node.module or ""
    base = name.split(".") if package else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + (node.module.split(".") if node.module else []))


def import_edges(root: Path) -> dict[str, set[str]]:
    """module -> the modules of the same library it imports. ``from P import x`` is an edge to
    the submodule P.x when there is one, else to P itself (its ``__init__``)."""
    mods = modules(root)
    top = root.name
    edges: dict[str, set[str]] = {name: set() for name in mods}
    for name, (path, package) in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = _target(name, package, node)
                targets = [
                    f"{source}.{a.name}" if f"{source}.{a.name}" in mods else source
                    for a in node.names
                ]
            else:
                continue
            for target in targets:
                if target == top or target.startswith(top + "."):
                    assert target in mods, f"{name} imports {target}, which is not a module"
                    if target != name:
                        edges[name].add(target)
    return edges


def _part(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in PARTS else None


def _draws_on_every_part(name: str) -> bool:
    parts = name.split(".")
    return len(parts) > 1 and parts[1] in EVERY_PART


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def violations(root: Path) -> list[str]:
    """Every import that breaks a rule of the module docstring, one line each."""
    mods = modules(root)
    edges = import_edges(root)
    found = []
    for name in sorted(edges):
        package = mods[name][1]
        enclosing = name.split(".")[: None if package else -1]
        for target in sorted(edges[name]):
            if _part(target) and not _part(name) and not _draws_on_every_part(name):
                found.append(f"{name} (core) imports the part {target}")
            if _part(name) and _part(target) and _part(target) != _part(name):
                found.append(f"{name} imports {target} sideways, from another part")
            if target.split(".") == enclosing[: len(target.split("."))] and mods[target][1]:
                found.append(f"{name} imports the __init__ of its own package, {target}")
            if target.split(".")[-1] == CHAPTERS_ONLY and name != target:
                found.append(f"{name} imports {target}, which is for the chapters only")
    found += [f"these modules import each other: {', '.join(c)}" for c in _cycles(edges)]
    return found


# ---- the checker on a small library of its own ----


def _library(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "lib"
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for package in [path.parent, *path.parent.parents]:  # every enclosing package
            if package == tmp_path:
                break
            (package / "__init__.py").touch()
        path.write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize(
    "files, expected",
    [
        (
            {"core.py": "from .iomodel import machine\n", "iomodel/machine.py": ""},
            "lib.core (core) imports the part lib.iomodel.machine",
        ),
        (
            {"core.py": "def f():\n    from . import polymethod\n", "polymethod/__init__.py": ""},
            "lib.core (core) imports the part lib.polymethod",
        ),
        (
            {"iomodel/a.py": "from ..hardness import sat\n", "hardness/sat.py": ""},
            "lib.iomodel.a imports lib.hardness.sat sideways",
        ),
        (
            {"iomodel/a.py": "from . import IOCount\n", "iomodel/__init__.py": "IOCount = 1\n"},
            "lib.iomodel.a imports the __init__ of its own package, lib.iomodel",
        ),
        (
            {"models/deep/a.py": "from ... import models\n"},
            "lib.models.deep.a imports the __init__ of its own package, lib.models",
        ),
        (
            {"advice.py": "import lib.nbtools\n", "nbtools.py": ""},
            "lib.advice imports lib.nbtools, which is for the chapters only",
        ),
        (
            {
                "models/corpus.py": "def f():\n    from .minilm import MiniLM\n",
                "models/minilm.py": "from .corpus import load\n",
            },
            "these modules import each other: lib.models.corpus, lib.models.minilm",
        ),
        (
            {
                "a.py": "from . import b\n",
                "b.py": "from . import c\n",
                "c.py": "from .a import x\n",
            },
            "these modules import each other: lib.a, lib.b, lib.c",
        ),
    ],
)
def test_checker_finds_each_kind_of_violation(tmp_path, files, expected):
    found = violations(_library(tmp_path, files))
    assert len(found) == 1 and found[0].startswith(expected), found


def test_checker_allows_what_the_layers_allow(tmp_path):
    root = _library(
        tmp_path,
        {
            "core.py": "import numpy\nfrom .other import f\n",
            "other.py": "",
            "nbtools.py": "from .core import f\n",
            "advice.py": "from . import iomodel, polymethod\nfrom .iomodel import flash\n",
            "plots/figures.py": "from ..hardness import sat\nfrom .style import takeaway\n",
            "plots/style.py": "",
            "iomodel/__init__.py": "from .flash import *\nfrom . import flash\n",
            "iomodel/flash.py": "from ..core import f\nfrom .machine import IOCount\n",
            "iomodel/machine.py": "",
            "polymethod/__init__.py": "",
            "hardness/sat.py": "",
        },
    )
    assert violations(root) == []
    assert import_edges(root)["lib.advice"] == {
        "lib.iomodel",
        "lib.polymethod",
        "lib.iomodel.flash",
    }


def test_checker_refuses_an_import_of_no_module(tmp_path):
    root = _library(tmp_path, {"core.py": "from .gone import f\n"})
    with pytest.raises(AssertionError, match="lib.core imports lib.gone, which is not a module"):
        import_edges(root)


# ---- the library ----


def test_the_checker_sees_the_whole_library():
    edges = import_edges(ROOT)
    assert {"attnlib", "attnlib.advice", "attnlib.iomodel.flash", "attnlib.models.minilm"} <= set(
        edges
    )
    assert "attnlib.iomodel.flash" in edges["attnlib.iomodel"]  # the package's own imports
    assert any(_part(t) == "polymethod" for t in edges["attnlib.advice"])


def test_attnlib_is_layered():
    found = violations(ROOT)
    assert not found, "imports that break attnlib's layers:\n" + "\n".join(found)
