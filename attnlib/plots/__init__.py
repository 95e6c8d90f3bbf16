"""The book's figures: one style (:mod:`.style`), then one module of builders per part.

Importing the package applies the book's style (:func:`use_book_style`), so every chapter's
figures look alike. Builders return the matplotlib ``Figure`` so a cell can end with
``plt.show()`` (a bare artist as a cell's last line prints a memory address, which breaks
nbval). The modules follow the book: :mod:`.preface`, :mod:`.exact` (Chapter 1),
:mod:`.iomodel` (Part I), :mod:`.polymethod` (Part II), :mod:`.hardness` (Part III),
:mod:`.models` (Part IV), :mod:`.advice` (the decision map of Chapter 9), :mod:`.roofline`
and :mod:`.performance` (Chapter 10), and :mod:`.devices` (Chapter 11). Every builder is
also importable from this package.
"""

from __future__ import annotations

from . import (
    advice,
    devices,
    exact,
    hardness,
    iomodel,
    models,
    performance,
    polymethod,
    preface,
    roofline,
    style,
)
from .advice import *  # noqa: F403
from .devices import *  # noqa: F403
from .exact import *  # noqa: F403
from .hardness import *  # noqa: F403
from .iomodel import *  # noqa: F403
from .models import *  # noqa: F403
from .performance import *  # noqa: F403
from .polymethod import *  # noqa: F403
from .preface import *  # noqa: F403
from .roofline import *  # noqa: F403
from .style import *  # noqa: F403

__all__ = style.__all__ + preface.__all__ + exact.__all__ + iomodel.__all__ + polymethod.__all__
__all__ += (
    hardness.__all__ + models.__all__ + advice.__all__ + roofline.__all__ + performance.__all__
)
__all__ += devices.__all__
