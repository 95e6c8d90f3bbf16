"""Element-wise SIMD routines for the compiled kernels, without libm: ``exp`` and a row maximum.

numba compiles ``math.exp`` to a libm call per element, which LLVM does not vectorise without
fastmath. :func:`_exp_shifted` is a short branch-free routine instead (Cody–Waite reduction, a
polynomial for e^r, 2^k from exponent bits), x ← exp(x - shift) in one pass over a row of a
tile: Cephes' expf polynomial (about 1 ulp) in float32, a degree-13 Taylor polynomial in
float64. Callable from compiled code only, through :func:`numba.extending.overload`.

The routine is compiled with one fast-math flag only, ``contract``: a multiply followed by an
add may become one fused multiply-add (FMA) where the CPU has it, rounded once instead of
twice. That keeps the error within the bounds the tests assert (about 1 ulp) and shortens
the chain of dependent operations that bounds the routine's speed, as Estrin's scheme and the
exponent read from bits (below) do too. Results may differ in the last bit between CPUs with
and without FMA, as BLAS results already do. No other flag is used: the routine never assumes
away infinities, NaNs or signed zeros.

:func:`_row_max` is the maximum of a row of a tile, written in LLVM IR as a few vectors of
running maxima: a running maximum in a numba loop is a chain of dependent compares that LLVM
leaves scalar. A maximum is exact, so its order of comparisons changes nothing.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from llvmlite import ir as llvm_ir
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


#: Bytes of one SIMD vector of :func:`_row_max` (AVX2's 256 bits), and vectors per step.
_VECTOR_BYTES = 32
_MAX_VECTORS = 4


@intrinsic
def _row_max(typingctx, x):
    """max(x) for a contiguous 1-d float array x, -inf if x is empty or all -inf; x holds no
    NaN (logits, or -inf for dropped keys).

    A plain running maximum is a chain of dependent compares that LLVM does not vectorise
    without fast-math flags, and numba's loops over a few running maxima stay scalar too (the
    select does not vectorise). Written in LLVM IR instead: ``_MAX_VECTORS`` vectors of
    running maxima, the vectors then the lanes combined in a fixed order, a scalar loop for the
    last elements. A maximum is exact, so the order changes nothing: the result is a plain
    loop's.
    """
    if not (isinstance(x, types.Array) and x.ndim == 1 and x.layout == "C"):
        return None
    if x.dtype not in (types.float32, types.float64):
        return None
    sig = x.dtype(x)

    def codegen(context, builder, signature, args):
        dtype = signature.args[0].dtype
        scalar = context.get_data_type(dtype)
        width = _VECTOR_BYTES // (4 if dtype == types.float32 else 8)
        vec = llvm_ir.VectorType(scalar, width)
        i64 = llvm_ir.IntType(64)
        arr = context.make_array(signature.args[0])(context, builder, args[0])
        data = arr.data
        n = builder.extract_value(arr.shape, 0)
        step = _MAX_VECTORS * width
        main = builder.sub(n, builder.srem(n, llvm_ir.Constant(i64, step)))

        def larger(a, b):  # a if a > b else b, lane by lane or scalar
            return builder.select(builder.fcmp_ordered(">", a, b), a, b)

        # main loop: step elements at a time into _MAX_VECTORS running maxima
        entry = builder.block
        head = builder.append_basic_block("max_head")
        body = builder.append_basic_block("max_body")
        lanes = builder.append_basic_block("max_lanes")
        builder.branch(head)
        builder.position_at_end(head)
        i = builder.phi(i64)
        i.add_incoming(llvm_ir.Constant(i64, 0), entry)
        accs = [builder.phi(vec) for _ in range(_MAX_VECTORS)]
        for a in accs:
            a.add_incoming(llvm_ir.Constant(vec, [float("-inf")] * width), entry)
        builder.cbranch(builder.icmp_signed("<", i, main), body, lanes)
        builder.position_at_end(body)
        new = []
        for u, a in enumerate(accs):
            at = builder.gep(data, [builder.add(i, llvm_ir.Constant(i64, u * width))])
            new.append(larger(builder.load(builder.bitcast(at, vec.as_pointer()), align=1), a))
        i.add_incoming(builder.add(i, llvm_ir.Constant(i64, step)), builder.block)
        for a, v in zip(accs, new, strict=True):
            a.add_incoming(v, builder.block)
        builder.branch(head)

        # combine the vectors, then their lanes, in a fixed order
        builder.position_at_end(lanes)
        m = accs[0]
        for a in accs[1:]:
            m = larger(a, m)
        best = builder.extract_element(m, llvm_ir.Constant(i64, 0))
        for lane in range(1, width):
            best = larger(builder.extract_element(m, llvm_ir.Constant(i64, lane)), best)

        # the last n - main elements, one by one
        tail_head = builder.append_basic_block("max_tail_head")
        tail_body = builder.append_basic_block("max_tail_body")
        done = builder.append_basic_block("max_done")
        start = builder.block
        builder.branch(tail_head)
        builder.position_at_end(tail_head)
        j = builder.phi(i64)
        j.add_incoming(main, start)
        b = builder.phi(scalar)
        b.add_incoming(best, start)
        builder.cbranch(builder.icmp_signed("<", j, n), tail_body, done)
        builder.position_at_end(tail_body)
        b_next = larger(builder.load(builder.gep(data, [j])), b)
        j.add_incoming(builder.add(j, llvm_ir.Constant(i64, 1)), builder.block)
        b.add_incoming(b_next, builder.block)
        builder.branch(tail_head)
        builder.position_at_end(done)
        return b

    return sig, codegen
