"""The JavaScript the check runs in the page, one function a file in js/, read at run time."""

from __future__ import annotations

import functools
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "js"


@functools.cache
def js(name: str) -> str:
    """The function expression in ``js/<name>.js`` (its leading comments included)."""
    return (FOLDER / f"{name}.js").read_text(encoding="utf-8").strip()
