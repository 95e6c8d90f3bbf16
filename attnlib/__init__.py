"""attnlib: the library behind the verified textbook on the fine-grained complexity of
training attention.

The core (this namespace) holds the exact reference math, the compiled tiled kernels, and
:func:`forward_backward`, one training step by any of the algorithms ("standard", "flash",
"polynomial"); :mod:`attnlib.costs` counts what the kernels cost (tiles, memory, flops).
The three parts of the book are subpackages: :mod:`attnlib.iomodel` (I/O complexity),
:mod:`attnlib.polymethod` (the polynomial method) and :mod:`attnlib.hardness` (SETH);
:mod:`attnlib.models` runs a real model (all-MiniLM-L6-v2) and deep attention stacks in numpy
for the evidence chapter. :func:`advise` recommends an algorithm for given (n, d, B, eps, M).
"""

from ._checks import AttnInputError
from .exact import (
    attention,
    attention_backward,
    attention_forward,
    attention_loss,
    attention_loss_grad,
)
from .fast import flash_attention_loss_grad, flash_backward, flash_forward
from .step import forward_backward

__version__ = "0.1.0"

__all__ = [
    "AttnInputError",
    "attention",
    "attention_backward",
    "attention_forward",
    "attention_loss",
    "attention_loss_grad",
    "flash_attention_loss_grad",
    "flash_backward",
    "flash_forward",
    "forward_backward",
    "advise",
    "__version__",
]


def __getattr__(name):
    # advise draws on every part of the book; import it on first use so that
    # `import attnlib` stays light.
    if name == "advise":
        from .advice import advise

        return advise
    raise AttributeError(f"module 'attnlib' has no attribute {name!r}")
