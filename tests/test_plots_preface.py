"""The preface's reading-path figure: every path is drawn, bad paths are refused."""

import pytest

from attnlib import AttnInputError
from attnlib.plots import reading_path_figure
from attnlib.plots.preface import _CHAPTERS, _READING_PATHS


def test_default_paths_cover_every_chapter_and_are_drawn():
    assert {c for steps in _READING_PATHS.values() for c in steps} == set(_CHAPTERS)
    fig = reading_path_figure()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(labels) == len(_READING_PATHS)
    arrows = [c for c in ax.get_children() if type(c).__name__ == "Annotation"]
    assert len(arrows) == sum(len(steps) - 1 for steps in _READING_PATHS.values())


def test_paths_argument_is_not_modified():
    paths = {"short": [1, 2]}
    reading_path_figure(paths)
    assert paths == {"short": [1, 2]}


@pytest.mark.parametrize(
    "paths",
    [
        {},
        [1, 2],
        {"x": [1]},
        {"x": [1, 12]},
        {"x": [1, True]},
        {"x": 3},
        {"": [1, 2]},
        {str(k): [1, 2] for k in range(5)},
    ],
)
def test_bad_paths_raise(paths):
    with pytest.raises(AttnInputError, match="paths"):
        reading_path_figure(paths)


def test_map_of_results_has_two_labelled_panels_and_refuses_a_bad_d():
    from attnlib.plots import map_of_results

    fig = map_of_results(d=32)
    top, bottom = fig.axes
    assert "fast memory M" in top.get_xlabel() and "d = 32" in top.get_xlabel()
    assert "entry bound B" in bottom.get_ylabel()
    assert top.get_position().y0 > bottom.get_position().y0  # one above the other
    for d in (1, 2.5, None):
        with pytest.raises(AttnInputError, match="d"):
            map_of_results(d=d)
