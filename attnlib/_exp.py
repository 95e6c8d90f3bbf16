"""A vectorisable ``exp`` for the compiled kernels, without libm.

numba compiles ``math.exp`` to a libm call per element, which LLVM does not vectorise without
fastmath. :func:`_exp_shifted` is a short branch-free routine instead (Cody–Waite reduction, a
polynomial for e^r, 2^k from exponent bits), x ← exp(x - shift) in one pass over a row of a
tile: Cephes' expf polynomial (about 1 ulp) in float32, a degree-13 Taylor polynomial in
float64. Callable from compiled code only, through :func:`numba.extending.overload`.

The routine is compiled with one fast-math flag only, ``contract``: a multiply followed by an
add may become one fused multiply-add (FMA) where the CPU has it, rounded once instead of
twice. That keeps the error within the bounds the tests assert (about 1 ulp) and shortens
the chain of dependent operations that bounds the routine's speed (measured on a Zen 3 core,
together with Estrin's scheme and the exponent read from bits, below: about 1.2 to 1.6 times
faster per float32 element, twice per float64 one). Results may differ in the last bit
between CPUs with and without FMA, as BLAS results already do. No other flag is used: the
routine never assumes away infinities, NaNs or signed zeros.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import types
from numba.extending import intrinsic, overload

_LOG2E = 1.4426950408889634
# ln 2 split so that k·_LN2_HI is exact for the k that occur (fdlibm's constants)
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
# adding then subtracting 1.5·2⁵² rounds a double of magnitude < 2⁵¹ to the nearest integer
_ROUND = 6755399441055744.0
# below this, exp(t) < 2⁻¹⁰²¹ ≈ 4e-308 and is returned as exactly 0
_EXP_MIN = -708.0
_EXP_MAX = 708.0

# float32 versions: Cephes' expf (ln 2 split, degree-5 minimax polynomial, ~1 ulp)
_LN2_HI32 = np.float32(0.693359375)
_LN2_LO32 = np.float32(-2.12194440e-4)
_LOG2E32 = np.float32(1.44269504088896341)
_ROUND32 = np.float32(12582912.0)  # 1.5·2²³
_EXP_MIN32 = np.float32(-87.0)  # exp(-87) ≈ 1.6e-38, just above the smallest normal float32
_EXP_MAX32 = np.float32(88.0)
_EXPF_POLY = tuple(
    np.float32(c)
    for c in (
        1.9875691500e-4,
        1.3981999507e-3,
        8.3334519073e-3,
        4.1665795894e-2,
        1.6666665459e-1,
        5.0000001201e-1,
    )
)
_ZERO32 = np.float32(0.0)
_ONE32 = np.float32(1.0)


def _exp_shifted(x, shift):
    """x = exp(x - shift), in place, for a 1-d array x and a number ``shift`` of x's float
    dtype, without libm (compiled via the overload). x - shift is rounded to the dtype first,
    as if x had been shifted in place and then exponentiated.

    Arguments x - shift below about -708 (float64) or -87 (float32), including -inf, give
    exactly 0; ``shift`` must be finite. One pass, one load and one store per element: the
    kernels call it on each row of a tile with the row's maximum (forward) or log-sum-exp
    (backward) as the shift, so that the shift costs no pass of its own.
    """
    raise NotImplementedError("only callable from compiled code")


@intrinsic
def _two_to_the(typingctx, rounded, offset, mantissa):
    """2^k as a float of ``rounded``'s dtype, from the bits of ``rounded`` = k + 1.5·2^p
    (p the mantissa width) rounded to an integer: ((bits - offset) << mantissa) read back as a
    float, where offset = bits(1.5·2^p) - exponent bias. Integer arithmetic on the float's own
    bits: no float-to-integer conversion, which AVX2 lacks for float64."""
    itype = types.int32 if rounded == types.float32 else types.int64
    sig = rounded(rounded, offset, mantissa)

    def codegen(context, builder, signature, args):
        ity = context.get_value_type(itype)
        bits = builder.bitcast(args[0], ity)
        off = context.cast(builder, args[1], signature.args[1], itype)
        shift = context.cast(builder, args[2], signature.args[2], itype)
        return builder.bitcast(builder.shl(builder.sub(bits, off), shift), args[0].type)

    return sig, codegen


@nb.njit(inline="always")
def _expf_polynomial(r):
    """e^r on |r| ≤ ln2/2 in float32: Cephes' degree-5 minimax polynomial (about 1 ulp),
    1 + r + r²·p(r), with p evaluated by Estrin's scheme: three independent multiply-adds
    in r, then two in r², a shorter chain of dependent operations than Horner's rule."""
    r2 = r * r
    p = (_EXPF_POLY[0] * r + _EXPF_POLY[1]) * r2 + (_EXPF_POLY[2] * r + _EXPF_POLY[3])
    p = p * r2 + (_EXPF_POLY[4] * r + _EXPF_POLY[5])
    return (p * r2 + r) + _ONE32


@nb.njit(inline="always")
def _exp_taylor(r):
    """e^r on |r| ≤ ln2/2 in float64: the Taylor polynomial of degree 13 (truncation error
    below 2e-16 relative)."""
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    return p * r + 1.0


def _exp_kernel(lo, hi, log2e, rnd, ln2_hi, ln2_lo, polynomial, zero, ftype, itype, bias, mantissa):
    """The loop of ``exp`` for one dtype, from its constants: Cody–Waite reduction
    t = k·ln2 + r with |r| ≤ ln2/2 (8 float32 or 4 float64 lanes per AVX2 vector), the
    polynomial for e^r, then 2^k from the exponent bits of the rounded t·log2(e) + 1.5·2^p
    (:func:`_two_to_the`).
    """
    offset = itype(np.array([rnd]).view(itype)[0] - bias)

    def kernel(x, shift):
        s = ftype(shift)  # in x's dtype, whatever the caller's
        for c in range(x.shape[0]):
            t = x[c] - s
            tc = min(max(t, lo), hi)  # a max and a min instruction; a NaN t gives 0 below
            kr = tc * log2e + rnd  # k + 1.5·2^p, rounded: k in the last bits
            kf = kr - rnd
            r = (tc - kf * ln2_hi) - kf * ln2_lo
            x[c] = polynomial(r) * _two_to_the(kr, offset, mantissa) if t >= lo else zero

    return kernel


@overload(_exp_shifted, jit_options={"cache": True, "fastmath": {"contract"}})
def _exp_impl(x, shift):
    if x.dtype == types.float32:
        return _exp_kernel(
            _EXP_MIN32,
            _EXP_MAX32,
            _LOG2E32,
            _ROUND32,
            _LN2_HI32,
            _LN2_LO32,
            _expf_polynomial,
            _ZERO32,
            np.float32,
            np.int32,
            np.int32(127),
            np.int32(23),
        )
    return _exp_kernel(
        _EXP_MIN,
        _EXP_MAX,
        _LOG2E,
        _ROUND,
        _LN2_HI,
        _LN2_LO,
        _exp_taylor,
        0.0,
        np.float64,
        np.int64,
        1023,
        52,
    )
