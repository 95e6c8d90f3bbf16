"""Real models and deep stacks for the evidence chapter.

* :mod:`attnlib.models.minilm`: all-MiniLM-L6-v2 (a 6-layer BERT) in numpy, with every
  head's Q, K and V; :mod:`attnlib.models.corpus`: the fixed text the chapter measures;
* :mod:`attnlib.models.kernels`: softmax attention of one head as a pluggable kernel, the
  standard algorithm (:data:`STANDARD`) or the polynomial method's approximation;
* :mod:`attnlib.models.stack`: a stack of L BERT layers with a hand-written backward pass that
  runs every head through a kernel;
* :mod:`attnlib.models.depth`: the error of an approximate gradient through the stack, and
  how it grows with depth; :mod:`attnlib.models.composition`: the bound on that error from
  per-layer Lipschitz constants and local errors;
* :mod:`attnlib.models.quantize`: int8 rounding of a head's Q and K;
* :mod:`attnlib.models.smollm`: SmolLM2-135M-Instruct, a Llama-architecture decoder, read from
  its GGUF file by :mod:`attnlib.models.gguf`.

The names a chapter or a reader's experiment uses are importable from this package too.
Importing it loads no weights; :func:`load_minilm` does, once per process.
"""

from .composition import DepthBound, depth_error_bound, layer_lipschitz
from .corpus import corpus_chunks, load_corpus
from .depth import GradientError, Growth, classify_growth, exact_reference, gradient_errors
from .kernels import (
    STANDARD,
    AttentionKernel,
    dense_polynomial_kernel,
    observed_range_kernel,
    with_fallback,
)
from .minilm import BertRun, MiniLM, ModelNotInstalledError, load_minilm, stack_from_minilm
from .quantize import int8_round
from .stack import AttentionStack, random_stack

__all__ = [
    # minilm, corpus
    "MiniLM",
    "BertRun",
    "ModelNotInstalledError",
    "load_minilm",
    "stack_from_minilm",
    "load_corpus",
    "corpus_chunks",
    # kernels
    "AttentionKernel",
    "STANDARD",
    "dense_polynomial_kernel",
    "observed_range_kernel",
    "with_fallback",
    # stack
    "AttentionStack",
    "random_stack",
    # depth
    "GradientError",
    "exact_reference",
    "gradient_errors",
    "Growth",
    "classify_growth",
    # composition
    "DepthBound",
    "layer_lipschitz",
    "depth_error_bound",
    # quantize
    "int8_round",
]
