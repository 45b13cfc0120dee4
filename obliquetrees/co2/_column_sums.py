"""The weight gradient's column sums of CO2's dense descent, one accumulator per column.

:func:`column_sums` (numba only) writes ``gw[j] = sum over u < na of
cbuf[u] * X[rbuf[u], j]`` for every column ``j`` of ``X``: the sum over the
rows a minibatch lists (:func:`~obliquetrees.co2._kernels.minibatch_leaves`)
of their coefficient times their row. Each column's sum is one accumulator
that adds the products in the order of ``u`` (IEEE, no fused multiply-add:
numba compiles without ``fastmath``, so the form is not contracted), so the
bits do not depend on how many columns one pass over the listed rows serves.

A pass serves a block of 16 columns, then of 8, then single columns. A
block's accumulators are the lanes of one LLVM vector of as many doubles,
written once for every width: 16 lanes are four 4-wide registers where the
CPU has them, four independent addition chains that hide the latency of
each addition, and each listed row's 16 entries are one contiguous load. The
generator writes the block loop once for all three widths; written out in
numba, it was three copies of one loop with 16, 8 and 1 scalar accumulators.
"""

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

_DOUBLE = ir.DoubleType()
#: Columns per pass over the listed rows, widest first; the last must be 1.
BLOCK_WIDTHS = (16, 8, 1)


def _c_array(t, ndim, dtype):
    """Whether the numba type ``t`` is a C-contiguous array of ``ndim`` dimensions of ``dtype``."""
    return isinstance(t, types.Array) and t.ndim == ndim and t.layout == "C" and t.dtype == dtype


def _column_block(builder, width, j, na, rows, coefs, x_row):
    """Code of one block: the ``width`` column sums from column ``j``, as a vector.

    ``rows``/``coefs`` point at ``rbuf``/``cbuf``; ``x_row(r)`` is a pointer to
    ``X[r, 0]``. Returns the vector of the sums.
    """
    vec = ir.VectorType(_DOUBLE, width)
    acc = cgutils.alloca_once_value(builder, ir.Constant(vec, [0.0] * width))
    with cgutils.for_range(builder, na) as loop:
        r = builder.load(builder.gep(rows, [loop.index]))
        c = builder.load(builder.gep(coefs, [loop.index]))
        ptr = builder.bitcast(builder.gep(x_row(r), [j]), vec.as_pointer())
        x = builder.load(ptr, align=8)
        cv = ir.Constant(vec, ir.Undefined)
        for k in range(width):  # c in every lane
            cv = builder.insert_element(cv, c, ir.Constant(ir.IntType(32), k))
        builder.store(builder.fadd(builder.load(acc), builder.fmul(cv, x)), acc)
    return builder.load(acc)


@intrinsic
def column_sums(typingctx, X, cbuf, rbuf, na, gw):
    """``gw[j] = sum(cbuf[u] * X[rbuf[u], j] for u < na)`` for every column ``j`` of ``X``.

    ``X`` C-contiguous float64 (2-D), ``cbuf`` float64 and ``rbuf`` int64
    (1-D, C-contiguous, at least ``na`` entries, valid rows of ``X``: not
    checked), ``gw`` float64 of ``X.shape[1]`` entries.
    """
    ok = _c_array(X, 2, types.float64) and _c_array(cbuf, 1, types.float64)
    ok = ok and _c_array(rbuf, 1, types.int64) and _c_array(gw, 1, types.float64)
    if not (ok and isinstance(na, types.Integer)):
        return None
    sig = types.void(X, cbuf, rbuf, na, gw)

    def codegen(context, builder, signature, args):
        tX, tc, tr, tna, tg = signature.args
        xa = context.make_array(tX)(context, builder, args[0])
        coefs = context.make_array(tc)(context, builder, args[1]).data
        rows = context.make_array(tr)(context, builder, args[2]).data
        out = context.make_array(tg)(context, builder, args[4]).data
        na_ = context.cast(builder, args[3], tna, types.intp)
        p = cgutils.unpack_tuple(builder, xa.shape, 2)[1]
        row_bytes = cgutils.unpack_tuple(builder, xa.strides, 2)[0]
        base = builder.bitcast(xa.data, ir.IntType(8).as_pointer())

        def x_row(r):
            start = builder.gep(base, [builder.mul(r, row_bytes)])
            return builder.bitcast(start, _DOUBLE.as_pointer())

        lo = ir.Constant(p.type, 0)
        for width in BLOCK_WIDTHS:
            step = ir.Constant(p.type, width)
            # the blocks of this width: from lo to the last column a whole block reaches
            hi = builder.add(lo, builder.mul(builder.sdiv(builder.sub(p, lo), step), step))
            with cgutils.for_range_slice(builder, lo, hi, step) as (j, _):
                sums = _column_block(builder, width, j, na_, rows, coefs, x_row)
                dest = builder.bitcast(builder.gep(out, [j]), sums.type.as_pointer())
                builder.store(sums, dest, align=8)
            lo = hi
        return context.get_dummy_value()

    return sig, codegen
