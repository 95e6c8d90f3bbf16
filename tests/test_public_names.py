"""The public line of every module of attnlib: each function or class a module defines without
a leading underscore is in its ``__all__``, and each name its ``__all__`` lists exists."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

import pytest

import attnlib


def _modules() -> list[str]:
    """attnlib and every module below it. A package that fails to import is still listed (its
    test then fails on the import); its submodules cannot be found without it."""
    found = pkgutil.walk_packages(attnlib.__path__, "attnlib.", onerror=lambda name: None)
    return ["attnlib", *sorted(info.name for info in found)]


MODULES = _modules()


def missing_from_all(module: types.ModuleType) -> list[str]:
    """The public functions and classes ``module`` defines (not those it imports) that its
    ``__all__`` does not list; all of them when it has no ``__all__``."""
    listed = set(getattr(module, "__all__", ()))
    return sorted(
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and not inspect.ismodule(obj)
        and (inspect.isclass(obj) or callable(obj))
        and getattr(obj, "__module__", None) == module.__name__
        and name not in listed
    )


def absent_from_module(module: types.ModuleType) -> list[str]:
    """The names ``module.__all__`` lists that the module does not have, and those it lists
    twice."""
    listed = list(getattr(module, "__all__", ()))
    twice = sorted({name for name in listed if listed.count(name) > 1})
    return [name for name in listed if not hasattr(module, name)] + twice


def _fake_module(source: str) -> types.ModuleType:
    module = types.ModuleType("attnlib_fake")
    exec(compile(source, "<attnlib_fake>", "exec"), module.__dict__)
    return module


def test_the_finders_see_what_is_missing():
    """Each finder reports a broken line and stays quiet on a sound one (so the checks below
    can fail)."""
    source = (
        "import math\n"
        "from math import sqrt\n"
        "def public(): pass\n"
        "def _private(): pass\n"
        "class Shape: pass\n"
        "CONSTANT = 3\n"
    )
    fake = _fake_module(source + "__all__ = ['public', 'ghost', 'public']\n")
    assert missing_from_all(fake) == ["Shape"]
    assert absent_from_module(fake) == ["ghost", "public"]
    assert missing_from_all(_fake_module(source)) == ["Shape", "public"]
    sound = _fake_module(source + "__all__ = ['public', 'Shape', 'sqrt']\n")
    assert missing_from_all(sound) == [] and absent_from_module(sound) == []


def test_every_module_is_found():
    """The walk reaches the subpackages and their modules, not only the top level."""
    assert {"attnlib", "attnlib._checks.arrays", "attnlib.plots.models"} <= set(MODULES)
    assert any(name.startswith("attnlib.iomodel.") for name in MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_public_functions_and_classes_are_in_all(name):
    module = importlib.import_module(name)
    missing = missing_from_all(module)
    assert not missing, f"{name} defines public names its __all__ does not list: {missing}"


@pytest.mark.parametrize("name", MODULES)
def test_every_name_in_all_exists(name):
    module = importlib.import_module(name)
    absent = absent_from_module(module)
    assert not absent, f"{name}.__all__ lists names it does not have (or twice): {absent}"
