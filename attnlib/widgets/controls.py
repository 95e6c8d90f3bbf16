"""The controls of a live figure: a slider over an explicit grid of values, a drop-down list.

A control holds the finite list of values its figure is drawn at (every one of them is drawn
in advance, see :mod:`attnlib.widgets.live`) and what the reader sees for each. Values are
strings, bools, ints or finite floats, so that the page's JSON holds them exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._checks import AttnInputError, as_entries

__all__ = ["grid_slider", "choice"]

#: More frames than this make a page too heavy to load.
_MAX_FRAMES = 200


@dataclass(frozen=True)
class _GridControl:
    """One control of a :func:`live_figure`: a finite list of values and their readouts.

    Fields
    ------
    description : str, the control's label (e.g. ``"log₂ M"``)
    values : tuple, the values the drawing function receives, in slider order
    value : the starting value, one of ``values``
    labels : tuple of str, what the reader sees for each value (readout, aria-valuetext)
    kind : ``"range"`` (a slider) or ``"select"`` (a drop-down list)
    """

    description: str
    values: tuple
    value: object
    labels: tuple
    kind: str

    def __post_init__(self):
        if self.kind not in ("range", "select"):
            raise AttnInputError(f"kind must be 'range' or 'select', got {self.kind!r:.60}")
        _check_grid(self.description, self.values, self.value, self.labels, "values")

    @property
    def index(self) -> int:
        """The position of the starting value in ``values``."""
        return self.values.index(self.value)


def _human(v) -> str:
    """A value as a reader writes it: 0.3, 1e-06, 1024 (no 0.30000000000000004)."""
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _scalar(name: str, v):
    """A control value as the page stores it: a string, a bool, an int or a finite float
    (numpy scalars become Python ones), so that JSON holds it exactly and the browser check
    hands ``draw`` the same value."""
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or isinstance(v, (str, bool, int)):
        return v
    if isinstance(v, float) and np.isfinite(v):
        return v
    raise AttnInputError(
        f"{name} must be a string, a bool, an int or a finite float, got {v!r:.60}"
    )


def _check_grid(description, values, value, labels, arg: str) -> None:
    """The checks of a control's fields (``arg`` names the values: "values" or "options")."""
    if not isinstance(description, str) or not description.strip():
        raise AttnInputError(f"description must be a non-empty string, got {description!r:.60}")
    values = as_entries(arg, values, of="values", max_len=_MAX_FRAMES)
    if not values:
        raise AttnInputError(f"{arg} of {description!r} must not be empty")
    for k, v in enumerate(values):
        if _scalar(f"{arg}[{k}]", v) is not v:
            raise AttnInputError(f"{arg}[{k}] must be a Python scalar, got {type(v).__name__}")
    # 1 and 1.0 (or True) are equal: one would stand for the other's frame
    if len(set(values)) != len(values):
        raise AttnInputError(
            f"{arg} of {description!r} must be distinct (1, 1.0 and True are equal), "
            f"got {values!r:.80}"
        )
    if _scalar("value", value) not in values:
        raise AttnInputError(f"value {value!r:.60} of {description!r} is not in its {arg}")
    labels = as_entries("labels", labels, of="labels", max_len=_MAX_FRAMES)
    if len(labels) != len(values) or not all(isinstance(t, str) and t for t in labels):
        raise AttnInputError(
            f"labels of {description!r} must be one non-empty string per value "
            f"({len(values)}), got {labels!r:.80}"
        )


def _grid(kind: str, description, values, value, labels, arg: str) -> _GridControl:
    values = as_entries(arg, values, of="values", max_len=_MAX_FRAMES)
    values = tuple(_scalar(f"{arg}[{k}]", v) for k, v in enumerate(values))
    value = _scalar("value", value)
    if labels is None:
        labels = tuple(_human(v) for v in values)
    labels = as_entries("labels", labels, of="labels", max_len=_MAX_FRAMES)
    _check_grid(description, values, value, labels, arg)
    return _GridControl(description, values, value, labels, kind)


def grid_slider(description: str, values, value, *, labels=None) -> _GridControl:
    """A slider over an explicit list of values (a linear or log grid, in slider order).

    ``labels`` are the readouts, one string per value (default: ``f"{v:g}"`` for floats,
    ``str(v)`` otherwise), e.g. ``"2^10 = 1024"`` for the exponent 10.

    Values are strings, bools, ints or finite floats (numpy scalars are converted), stored
    exactly in the page.

    Raises :class:`attnlib.AttnInputError` if ``description`` is not a non-empty string,
    ``values`` is a string or empty, holds more than 200 values (a page's frames), another
    kind of value or one twice (``1`` and ``1.0`` count as one), ``value`` is not among them,
    or ``labels`` is not one non-empty string per value.

    >>> grid_slider("R", [0.5, 1.0, 2.0], 1.0).labels
    ('0.5', '1', '2')
    """
    return _grid("range", description, values, value, labels, "values")


def choice(description: str, options, value, *, labels=None) -> _GridControl:
    """A drop-down list over ``options`` (e.g. machine names), starting at ``value``.

    Raises :class:`attnlib.AttnInputError` like :func:`grid_slider` (naming ``options``).
    """
    return _grid("select", description, options, value, labels, "options")
