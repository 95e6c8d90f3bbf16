"""The one exception every check raises."""

from __future__ import annotations

__all__ = ["AttnInputError"]


class AttnInputError(ValueError):
    """An argument of an attnlib function has the wrong shape, dtype, size or value."""
