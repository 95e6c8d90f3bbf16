"""The controls of a live figure (attnlib.widgets.controls): a grid slider or a choice holds the
finite grid of values a page stores (Python scalars, distinct, with human labels), and refuses
anything else by name."""

import numpy as np
import pytest

from attnlib import AttnInputError, widgets
from attnlib.widgets import controls


def test_grid_labels_are_human():
    assert widgets.grid_slider("B", [0.1 + 0.2, 1e-6], 1e-6).labels == ("0.3", "1e-06")


@pytest.mark.parametrize(
    "args, match",
    [
        (("k", [], 1), "empty"),
        (("k", [1, 2], 3), "not in its values"),
        (("k", [1, 1], 1), "distinct"),
        (("", [1], 1), "description"),
        (("k", [1, 2], 1, ["one"]), "labels"),
        (("k", 5, 5), "values"),
    ],
)
def test_grid_slider_rejects_bad_input(args, match):
    with pytest.raises(AttnInputError, match=match):
        widgets.grid_slider(*args[:3], labels=args[3] if len(args) > 3 else None)


def test_control_values_are_the_scalars_the_page_stores():
    c = widgets.grid_slider("k", np.arange(3), np.int64(1))
    assert c.values == (0, 1, 2) and all(type(v) is int for v in c.values)
    assert c.value == 1 and type(c.value) is int and c.index == 1
    assert widgets.choice("m", ("a", "b"), np.str_("b")).index == 1
    for values, value, match in [
        ([1, 1.0], 1, r"^values of 'k' must be distinct \(1, 1\.0 and True are equal\)"),
        ([True, 1], 1, r"^values of 'k' must be distinct"),
        ([np.array([1, 2])], 1, r"^values\[0\] must be a string, a bool, an int or a finite"),
        ([float("nan"), 1.0], 1.0, r"^values\[0\] must be"),
        ([(1, 2)], (1, 2), r"^values\[0\] must be"),
        ("abc", "a", r"^values must be a sequence of values, got"),
        (np.array(1.0), 1.0, r"^values must be a sequence of values, got"),
        ([1, 2], np.array([1]), r"^value must be"),
    ]:
        with pytest.raises(AttnInputError, match=match):
            widgets.grid_slider("k", values, value)
    with pytest.raises(AttnInputError, match=r"^labels must be a sequence of labels, got"):
        widgets.grid_slider("k", [1, 2, 3], 1, labels="abc")


def test_choice_names_its_options_and_grid_control_checks_itself():
    with pytest.raises(AttnInputError, match=r"^options of 'm' must not be empty"):
        widgets.choice("m", [], "a")
    with pytest.raises(AttnInputError, match=r"is not in its options$"):
        widgets.choice("m", ["a"], "b")
    with pytest.raises(AttnInputError, match=r"^value 5 of 'k' is not in its values$"):
        controls._GridControl("k", (1, 2), 5, ("1", "2"), "range")
    with pytest.raises(AttnInputError, match=r"^kind must be 'range' or 'select'"):
        controls._GridControl("k", (1, 2), 1, ("1", "2"), "slider")
    with pytest.raises(AttnInputError, match=r"^values\[0\] must be a Python scalar"):
        controls._GridControl("k", (np.int64(1),), 1, ("1",), "range")
