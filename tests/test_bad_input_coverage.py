"""The bad-input table covers attnlib: every public callable has a row.

Public callables are found by introspection. Every module of attnlib whose dotted name has no
private part (one starting with ``_``) declares ``__all__``; each name in it that is callable and
defined in attnlib is public: a function, a class (its constructor), and every public method of
such a class that takes an argument besides ``self``. A callable exported by several modules is
one callable. Each must be the callable of a row in some test_bad_input_<part>.py, or be in
NO_ROW with the reason it has nothing to validate.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import signal
import time
from pathlib import Path

import pytest
from bad_input_cases import CaseTimeout, time_limit

import attnlib

EXCEPTION = "an exception type: the library raises it and a reader catches it"
RECORD = "a record of results that the library builds and returns; it validates nothing"
STEP = "a step of the schedules on the machine, called by them with arguments already checked"
SEARCH_STEP = "a step of the search that run() drives; the constructor checks G and M"

#: Public callables with nothing a row could refuse, each with the reason.
NO_ROW: dict[str, str] = {
    "attnlib.AttnInputError": EXCEPTION,
    "iomodel.CapacityError": EXCEPTION,
    "iomodel.MachineError": EXCEPTION,
    "models.ModelNotInstalledError": EXCEPTION,
    "distributed.DistributedError": EXCEPTION,
    "advice.Advice": RECORD,
    "distributed.DistributedResult": RECORD,
    "distributed.RankCount": RECORD,
    "distributed.Job": "a job's arguments, checked by run_jobs against its P (its rows)",
    "advice.MethodCost": RECORD,
    "iomodel.Intensity": RECORD,
    "iomodel.L2Absorption": RECORD,
    "iomodel.RooflinePoint": RECORD,
    "iomodel.ThreeLevelCount": RECORD,
    "iomodel.causal.CausalSaving": RECORD,
    "iomodel.Family": RECORD,
    "iomodel.Worst": RECORD,
    "iomodel.default_sizes": "takes no arguments",
    "iomodel.machine.Op": RECORD,
    "models.BertRun": RECORD,
    "models.GradientError": RECORD,
    "models.Growth": RECORD,
    "models.DepthBound": RECORD,
    "models.smollm.DecoderRun": RECORD,
    "models.smollm.load_smollm": "takes no arguments",
    "models.minilm.BertConfig": RECORD,
    "polymethod.ApproxPlan": RECORD,
    "polymethod.ThresholdSweep": RECORD,
    "iomodel.layout.drop_masked": STEP,
    "iomodel.layout.probabilities": STEP,
    "iomodel.layout.pass_setup": STEP,
    "iomodel.tiling.finish_run": STEP,
    "iomodel.tiling.store_constant": STEP,
    "iomodel.tiling.tiled_product": STEP,
    "iomodel.PebbleSearch.alive": SEARCH_STEP,
    "iomodel.PebbleSearch.canon": SEARCH_STEP,
    "iomodel.PebbleSearch.h": SEARCH_STEP,
    "plots.use_book_style": "takes no arguments",
}


def part_modules():
    """The modules of rows, test_bad_input_<part>.py beside this file."""
    here = Path(__file__)
    for path in sorted(here.parent.glob("test_bad_input_*.py")):
        if path != here:
            yield importlib.import_module(path.stem)


def all_cases():
    return [case for module in part_modules() for case in module.table.cases]


def public_modules():
    yield attnlib
    for info in pkgutil.walk_packages(attnlib.__path__, "attnlib."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            yield importlib.import_module(info.name)


def resolve(path: str):
    """The object a row's callable names: ``exact.attention``, ``iomodel.IOCount.__add__``,
    ``iomodel.flash_forward(is_causal)`` (a variant of one callable, in parentheses)."""
    obj = attnlib
    for part in path.split("(")[0].split("."):
        if part == "attnlib" and obj is attnlib:
            continue
        obj = getattr(obj, part)
    return getattr(obj, "__func__", obj)  # a classmethod is its function


def _exists(path: str) -> bool:
    try:
        resolve(path)
    except AttributeError:
        return False
    return True


def _own(obj) -> bool:
    return getattr(obj, "__module__", None) is not None and obj.__module__.startswith("attnlib")


def _takes_arguments(fn, bound: bool) -> bool:
    params = list(inspect.signature(fn).parameters.values())
    return len(params) > (1 if bound else 0)


def public_callables() -> dict[object, str]:
    """Every public callable of attnlib, with its shortest public path."""
    found: dict[object, str] = {}

    def add(obj, path):
        if obj not in found or (path.count("."), path) < (found[obj].count("."), found[obj]):
            found[obj] = path

    for module in public_modules():
        prefix = module.__name__.removeprefix("attnlib.")
        assert hasattr(module, "__all__"), f"{module.__name__} declares no __all__"
        for name in module.__all__:
            obj = getattr(module, name)
            if not callable(obj) or not _own(obj):
                continue
            add(obj, f"{prefix}.{name}")
            if not isinstance(obj, type):
                continue
            for klass in obj.__mro__:
                if not _own(klass):
                    continue
                for attr, value in vars(klass).items():
                    if attr.startswith("_") or isinstance(value, property):
                        continue
                    bound = not isinstance(value, staticmethod)
                    fn = getattr(value, "__func__", value)
                    if inspect.isfunction(fn) and _takes_arguments(fn, bound):
                        add(fn, f"{prefix}.{name}.{attr}")
    return found


def test_every_public_callable_has_a_row():
    """Each public callable is a row's callable or in NO_ROW, and each row names a callable."""
    public = public_callables()
    covered = {}
    for case in all_cases():
        covered.setdefault(resolve(case.callable), case.callable)
    exempt = {resolve(path) for path in NO_ROW if _exists(path)}
    missing = sorted(path for obj, path in public.items() if obj not in covered.keys() | exempt)
    assert not missing, f"public callables with no bad-input row: {missing}"


def test_no_row_names_public_callables_without_rows():
    """Every entry of NO_ROW names a public callable that exists and still has no row."""
    public = public_callables()
    covered = {resolve(case.callable) for case in all_cases()}
    gone = [path for path in NO_ROW if not _exists(path)]
    assert not gone, f"NO_ROW names what no longer exists: {gone}"
    private = [path for path in NO_ROW if resolve(path) not in public]
    assert not private, f"NO_ROW names what is not a public callable: {private}"
    rows = [path for path in NO_ROW if resolve(path) in covered]
    assert not rows, f"NO_ROW names callables that have a row now: {rows}"


def test_row_ids_are_unique_and_name_callables():
    """Row ids are unique across the parts, and each row's callable is an object of attnlib."""
    cases = all_cases()
    ids = [case.id for case in cases]
    assert len(set(ids)) == len(ids), [i for i in set(ids) if ids.count(i) > 1]
    for case in cases:
        assert case.id.startswith(case.callable + "-")
        assert callable(resolve(case.callable)), case.callable


def test_time_limit_stops_a_hang():
    """The per-row limit turns a hang into a failure (checked with a short limit)."""
    start = time.perf_counter()
    with pytest.raises(CaseTimeout), time_limit(0.2):
        while True:
            pass
    assert time.perf_counter() - start < 5
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
