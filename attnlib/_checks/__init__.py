"""Input validation shared by every public function of attnlib (the only place it lives).

Every check raises :class:`AttnInputError`, a :class:`ValueError` whose message names
the argument and says what was expected, e.g. ``K must have d=64 columns like Q, got 32``.
The checks never copy or modify their inputs except to convert array-likes to arrays.

One idea per module:

- :mod:`.scalars`: :func:`check_real` (and its forms :func:`check_positive_real`,
  :func:`check_open_unit`), :func:`check_int`, :func:`check_bool`, :func:`check_choice`,
  :func:`check_float_dtype` and the softmax :func:`check_scale`;
- :mod:`.arrays`: :func:`as_float_array` and :func:`as_real_array` (dtype, dimensions,
  finiteness in bounded memory), :func:`as_series` (a 1-D series of real numbers: its
  length, positivity, missing points), shapes, boolean masks, :func:`max_abs`;
- :mod:`.containers`: :func:`as_entries` and :func:`as_dict`, sequences and dicts of a
  bounded number of entries (a string is not a sequence);
- :mod:`.memory`: :func:`check_memory` refuses, before anything is allocated, a call whose
  working memory exceeds :data:`MAX_ALLOCATION_BYTES` (or the function's ``memory_budget``);
  :func:`check_memory_parts` names the part that dominates;
- :mod:`.attention`: the argument bundles of the attention passes (2-D and batched) and of
  AS24's loss.

Every name is imported from here: ``from attnlib._checks import check_int``.
"""

from __future__ import annotations

# Each module lists its checks in its __all__; this package is where they are imported from.
from . import arrays, attention, containers, error, memory, scalars
from .arrays import *  # noqa: F403
from .attention import *  # noqa: F403
from .containers import *  # noqa: F403
from .error import *  # noqa: F403
from .memory import *  # noqa: F403
from .scalars import *  # noqa: F403

__all__ = [
    *error.__all__,
    *scalars.__all__,
    *arrays.__all__,
    *containers.__all__,
    *memory.__all__,
    *attention.__all__,
]
