"""What a reader installs and meets first: the two pinned sets of requirements, and the cell that
opens every notebook.

- ``requirements-reader.txt`` (the reader set) pins, exactly, attnlib's dependencies from
  pyproject.toml, JupyterLab and jupyterlab-myst, and every package they need in turn;
  ``requirements.txt`` (the authors' set) includes it and pins nothing twice.
- Every notebook in book/ starts with the same code cell, hidden online, which names the
  wheel of this version of attnlib and installs nothing.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
READER = ROOT / "requirements-reader.txt"
AUTHORS = ROOT / "requirements.txt"
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
# What a reader needs beyond attnlib's own dependencies: the notebook front end and its MyST.
FRONT_END = ("jupyterlab", "jupyterlab-myst", "ipykernel")
INCLUDE = "-r requirements-reader.txt"


def pins(text: str) -> dict[str, Requirement]:
    """{canonical name: requirement} of a requirements file; each line must pin one version."""
    found = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line == INCLUDE:
            continue
        req = Requirement(line)
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
            raise ValueError(f"not an exact pin: {line!r}")
        name = canonicalize_name(req.name)
        if name in found:
            raise ValueError(f"pinned twice: {req.name}")
        found[name] = req
    return found


def missing_requirements(pinned: dict[str, Requirement], env: dict) -> list[str]:
    """Requirements of the pinned packages (as installed here, for ``env``) that the set does
    not pin, or pins to a version they do not accept."""
    missing = []
    for name, req in pinned.items():
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        dist = importlib.metadata.distribution(name)
        extras = {""} | set(req.extras)
        for text in dist.requires or []:
            need = Requirement(text)
            if need.marker and not any(need.marker.evaluate({**env, "extra": e}) for e in extras):
                continue
            have = pinned.get(canonicalize_name(need.name))
            version = next(iter(have.specifier)).version if have else None
            if version is None or not need.specifier.contains(version, prereleases=True):
                missing.append(f"{req.name} needs {need}, the set pins {version}")
    return missing


def test_pins_are_exact_and_the_check_refuses_loose_ones():
    with pytest.raises(ValueError, match="not an exact pin"):
        pins("numpy>=2")
    with pytest.raises(ValueError, match="pinned twice"):
        pins("numpy==2.4.6\nNumPy==2.4.6")
    assert set(pins('appnope==1.0.0 ; platform_system == "Darwin"')) == {"appnope"}


def test_the_reader_set_pins_attnlibs_dependencies_and_the_front_end():
    reader = pins(READER.read_text(encoding="utf-8"))
    # attnlib's metadata, as `make setup` installed it from pyproject.toml
    wanted = [Requirement(r).name for r in importlib.metadata.requires("attnlib")] + list(FRONT_END)
    assert [w for w in wanted if canonicalize_name(w) not in reader] == []


def test_the_reader_set_pins_every_package_its_packages_need():
    reader = pins(READER.read_text(encoding="utf-8"))
    assert missing_requirements(reader, default_environment()) == []


def test_the_closure_check_finds_a_missing_requirement():
    reader = pins(READER.read_text(encoding="utf-8"))
    del reader["llvmlite"]
    assert [m for m in missing_requirements(reader, default_environment()) if "llvmlite" in m]


def test_the_authors_set_includes_the_reader_set_and_pins_nothing_twice():
    text = AUTHORS.read_text(encoding="utf-8")
    assert INCLUDE in text.splitlines()
    authors = pins(text)
    reader = pins(READER.read_text(encoding="utf-8"))
    assert sorted(set(authors) & set(reader)) == []
    assert {"playwright", "jupyter-book", "nbval", "pytest", "ruff"} <= set(authors)
    assert missing_requirements(authors | reader, default_environment()) == []


def first_cells() -> list[tuple[str, dict]]:
    return [(p.name, json.loads(p.read_text(encoding="utf-8"))["cells"][0]) for p in NOTEBOOKS]


def test_every_notebook_opens_with_the_same_cell_on_getting_attnlib():
    cells = first_cells()
    sources = {"".join(c["source"]) for _, c in cells}
    assert len(sources) == 1, "the first cells differ"
    for name, cell in cells:
        assert cell["cell_type"] == "code", name
        assert "remove-cell" in cell["metadata"].get("tags", []), name
    source = sources.pop()
    assert "import attnlib" in source and "pip install" in source
    assert not re.search(r"^\s*[%!]", source, re.M), "the cell must not install anything"


def test_the_first_cell_names_the_wheel_of_this_version():
    source = "".join(first_cells()[0][1]["source"])
    version = re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    wheels = re.findall(r"attnlib-\S+\.whl", source)
    assert wheels == [f"attnlib-{version}-py3-none-any.whl"]
