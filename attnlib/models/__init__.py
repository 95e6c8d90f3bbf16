"""Real models and deep stacks for the evidence chapter.

* :mod:`attnlib.models.minilm`: all-MiniLM-L6-v2 (a 6-layer BERT) in numpy, with every
  head's Q, K and V; :mod:`attnlib.models.corpus`: the fixed text the chapter measures;
* :mod:`attnlib.models.stack`: a stack of L BERT layers with a hand-written backward pass and
  a pluggable attention kernel from :mod:`attnlib.models.kernels` (exact or approximate);
* :mod:`attnlib.models.depth`: the error of an approximate gradient through the stack, and
  how it grows with depth;
* :mod:`attnlib.models.quantize`: int8 rounding of a head's Q and K.

Importing this package loads no weights; :func:`load_minilm` does, once per process.
"""

from .depth import (
    EXACT,
    AttentionKernel,
    AttentionStack,
    GradientError,
    Growth,
    classify_growth,
    dense_polynomial_kernel,
    exact_kernel,
    exact_reference,
    gradient_errors,
    kernel_from_functions,
    observed_range_kernel,
    random_stack,
    stack_from_minilm,
    with_fallback,
)
from .minilm import (
    INSTALL_COMMAND,
    BertRun,
    MiniLM,
    ModelNotInstalledError,
    corpus_chunks,
    load_corpus,
    load_minilm,
    model_dir,
)
from .quantize import int8_round

__all__ = [
    "EXACT",
    "INSTALL_COMMAND",
    "AttentionKernel",
    "GradientError",
    "Growth",
    "classify_growth",
    "AttentionStack",
    "BertRun",
    "MiniLM",
    "ModelNotInstalledError",
    "corpus_chunks",
    "dense_polynomial_kernel",
    "exact_kernel",
    "exact_reference",
    "gradient_errors",
    "int8_round",
    "kernel_from_functions",
    "load_corpus",
    "load_minilm",
    "model_dir",
    "observed_range_kernel",
    "random_stack",
    "stack_from_minilm",
    "with_fallback",
]
