"""The preface's reading-path figure: every path is drawn, bad paths are refused."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from attnlib import AttnInputError  # noqa: E402
from attnlib.plots import CHAPTERS, READING_PATHS, reading_path_figure  # noqa: E402


def test_default_paths_cover_every_chapter_and_are_drawn():
    assert {c for steps in READING_PATHS.values() for c in steps} == set(CHAPTERS)
    fig = reading_path_figure()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(labels) == len(READING_PATHS)
    arrows = [c for c in ax.get_children() if type(c).__name__ == "Annotation"]
    assert len(arrows) == sum(len(steps) - 1 for steps in READING_PATHS.values())
    plt.close(fig)


def test_paths_argument_is_not_modified():
    paths = {"short": [1, 2]}
    reading_path_figure(paths)
    plt.close("all")
    assert paths == {"short": [1, 2]}


@pytest.mark.parametrize(
    "paths",
    [
        {},
        [1, 2],
        {"x": [1]},
        {"x": [1, 11]},
        {"x": [1, True]},
        {"x": 3},
        {"": [1, 2]},
        {str(k): [1, 2] for k in range(5)},
    ],
)
def test_bad_paths_raise(paths):
    with pytest.raises(AttnInputError, match="paths"):
        reading_path_figure(paths)
