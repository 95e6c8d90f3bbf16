"""attnlib: the library behind the verified textbook on the fine-grained complexity of
training attention.

The core (this namespace) holds the exact reference math and the compiled tiled kernels.
The three parts of the book are subpackages: :mod:`attnlib.iomodel` (I/O complexity),
:mod:`attnlib.polymethod` (the polynomial method) and :mod:`attnlib.hardness` (SETH).
"""

from ._checks import AttnInputError
from .exact import (
    attention,
    attention_backward,
    attention_forward,
    attention_loss,
    attention_loss_grad,
)

__version__ = "0.1.0"

__all__ = [
    "AttnInputError",
    "attention",
    "attention_backward",
    "attention_forward",
    "attention_loss",
    "attention_loss_grad",
    "__version__",
]
