"""Row dot products of E2EDT's pruned kernels, four partial sums in one vector register.

:func:`block_dot` and :func:`block_dot_pair` (numba only) compute ``W[c] .
X[q]`` (and ``W[c] . X[r]``) with four partial sums ``a_k`` over the columns
``j = k (mod 4)``, a tail ``j >= n - n % 4`` added to ``a_0``, and the total
``(a_0 + a_1) + (a_2 + a_3)``: the operations, in the order, of the scalar
:func:`four_sum_dot`, so results are the same bits.

LLVM does not vectorise the scalar form (four floating-point accumulators
chained through a loop are not a pattern its SLP vectoriser takes), so for
C-contiguous float64 rows the four sums live in the lanes of one 4-wide
vector (:func:`_simd_dot`): lane ``k`` performs exactly ``a_k``'s multiplies
and adds, in order (IEEE, no fused multiply-add: numba compiles without
``fastmath``, so neither form is contracted). About 2x faster per dot product
(measured). Other layouts and dtypes take the scalar form.
"""

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from obliquetrees._core._jit import jit_inline, jit_overload

_V4 = ir.VectorType(ir.DoubleType(), 4)
_I32 = ir.IntType(32)


def block_dot(W, c, X, q):
    """``W[c] . X[q]`` in four partial sums (numba only)."""
    raise NotImplementedError("block_dot is only callable from numba kernels")


def block_dot_pair(W, c, X, q, r):
    """``(W[c] . X[q], W[c] . X[r])``, each exactly :func:`block_dot` (numba only)."""
    raise NotImplementedError("block_dot_pair is only callable from numba kernels")


def _vector_rows(*arrays):
    """Whether every numba type is a C-contiguous 2-D float64 array (the vector form)."""
    return all(
        isinstance(a, types.Array) and a.ndim == 2 and a.layout == "C" and a.dtype == types.float64
        for a in arrays
    )


def lookup(idx, k):
    """``idx[k]``, or ``k`` itself when ``idx`` is None (numba only)."""
    raise NotImplementedError("lookup is only callable from numba kernels")


@jit_overload(lookup, inline="always")
def _lookup(idx, k):
    if isinstance(idx, types.NoneType):
        return lambda idx, k: k
    return lambda idx, k: idx[k]


@jit_inline
def four_sum_dot(W, c, X, q, idx, k0, k1):
    """``sum over k in k0:k1 of W[c, j] X[q, j]``, ``j = idx[k]`` (``k`` if ``idx`` is None).

    The scalar form of every dot product of the pruned kernels, over all
    columns (``None, 0, n``) or a split's feature list: four partial sums
    ``a_i`` over the positions ``k - k0 = i (mod 4)``, the tail added to
    ``a_0``, total ``(a_0 + a_1) + (a_2 + a_3)``. One running sum is a chain
    of dependent additions (LLVM does not reorder floating-point sums); four
    independent ones overlap in the pipeline. Any layout and dtype
    (``X``'s entries are taken as float64); rows are indexed in place: a view
    per call would cost reference counting.
    """
    k4 = k1 - (k1 - k0) % 4
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    a3 = 0.0
    for k in range(k0, k4, 4):
        j = lookup(idx, k)
        a0 += W[c, j] * X[q, j]
        j = lookup(idx, k + 1)
        a1 += W[c, j] * X[q, j]
        j = lookup(idx, k + 2)
        a2 += W[c, j] * X[q, j]
        j = lookup(idx, k + 3)
        a3 += W[c, j] * X[q, j]
    for k in range(k4, k1):
        j = lookup(idx, k)
        a0 += W[c, j] * X[q, j]
    return (a0 + a1) + (a2 + a3)


@jit_overload(block_dot, inline="always")
def _block_dot(W, c, X, q):
    if _vector_rows(W, X):
        return lambda W, c, X, q: _simd_dot(W, c, X, q, q)[0]
    return lambda W, c, X, q: four_sum_dot(W, c, X, q, None, 0, X.shape[1])


@jit_overload(block_dot_pair, inline="always")
def _block_dot_pair(W, c, X, q, r):
    if _vector_rows(W, X):
        return lambda W, c, X, q, r: _simd_dot(W, c, X, q, r)
    return lambda W, c, X, q, r: (
        four_sum_dot(W, c, X, q, None, 0, X.shape[1]),
        four_sum_dot(W, c, X, r, None, 0, X.shape[1]),
    )


def _row_pointer(context, builder, arytype, ary, row):
    """Pointer to ``ary[row, 0]`` and the row length (indices not checked: callers' own)."""
    a = context.make_array(arytype)(context, builder, ary)
    shape = cgutils.unpack_tuple(builder, a.shape, 2)
    strides = cgutils.unpack_tuple(builder, a.strides, 2)
    zero = context.get_constant(types.intp, 0)
    index = [row, zero]
    ptr = cgutils.get_item_pointer2(context, builder, a.data, shape, strides, "C", index)
    return ptr, shape[1]


@intrinsic
def _simd_dot(typingctx, W, c, X, q, r):
    """``(W[c] . X[q], W[c] . X[r])`` with the four partial sums in vector lanes.

    ``W`` and ``X`` C-contiguous float64 with as many columns (not checked),
    ``c``, ``q``, ``r`` valid row indices (not checked). ``W[c]`` is loaded
    once for both rows.
    """
    if not (_vector_rows(W, X) and all(isinstance(t, types.Integer) for t in (c, q, r))):
        return None
    sig = types.UniTuple(types.float64, 2)(W, c, X, q, r)

    def codegen(context, builder, signature, args):
        tW, tc, tX, tq, tr = signature.args
        c_, q_, r_ = (
            context.cast(builder, v, t, types.intp)
            for v, t in ((args[1], tc), (args[3], tq), (args[4], tr))
        )
        pw, n = _row_pointer(context, builder, tW, args[0], c_)
        px = [_row_pointer(context, builder, tX, args[2], row)[0] for row in (q_, r_)]
        acc = [cgutils.alloca_once_value(builder, ir.Constant(_V4, [0.0] * 4)) for _ in px]
        four = ir.Constant(n.type, 4)
        n4 = builder.mul(builder.sdiv(n, four), four)

        def vload(ptr, j):
            return builder.load(builder.bitcast(builder.gep(ptr, [j]), _V4.as_pointer()), align=8)

        with cgutils.for_range_slice(builder, ir.Constant(n.type, 0), n4, four) as (j, _):
            w = vload(pw, j)
            for a, p in zip(acc, px, strict=True):  # lane k: a_k += W[c, j + k] * X[., j + k]
                builder.store(builder.fadd(builder.load(a), builder.fmul(w, vload(p, j))), a)
        lanes = [builder.load(a) for a in acc]
        # the tail into a_0, in order
        first = [builder.extract_element(v, _I32(0)) for v in lanes]
        a0 = [cgutils.alloca_once_value(builder, v) for v in first]
        with cgutils.for_range_slice(builder, n4, n, ir.Constant(n.type, 1)) as (j, _):
            w = builder.load(builder.gep(pw, [j]))
            for a, p in zip(a0, px, strict=True):
                x = builder.load(builder.gep(p, [j]))
                builder.store(builder.fadd(builder.load(a), builder.fmul(w, x)), a)
        totals = []
        for v, a in zip(lanes, a0, strict=True):
            a1, a2, a3 = (builder.extract_element(v, _I32(k)) for k in (1, 2, 3))
            totals.append(builder.fadd(builder.fadd(builder.load(a), a1), builder.fadd(a2, a3)))
        return context.make_tuple(builder, signature.return_type, totals)

    return sig, codegen
