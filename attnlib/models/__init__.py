"""Real models and deep stacks for the evidence chapter.

* :mod:`attnlib.models.minilm`: all-MiniLM-L6-v2 (a 6-layer BERT) in numpy, with every
  head's Q, K and V, and the fixed text corpus the chapter measures.
* :mod:`attnlib.models.depth`: a stack of L attention layers (residual + LayerNorm) with a
  hand-written backward pass and a pluggable attention kernel (exact or approximate).

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
    "kernel_from_functions",
    "load_corpus",
    "load_minilm",
    "model_dir",
    "random_stack",
    "stack_from_minilm",
    "with_fallback",
]
