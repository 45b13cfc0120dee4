"""A cache prefetch for numba kernels (LLVM's ``llvm.prefetch`` intrinsic)."""

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, arr, index):
    """Ask the CPU to start loading ``arr[index]`` into cache; no effect on results.

    ``arr`` is an array of any layout, ``index`` a tuple of ``arr.ndim``
    integers, not checked (a prefetch of any address is harmless). A
    prefetch instruction retires at once, unlike a load whose value is waited
    for, so a random access into a large array (a tree's leaf weights)
    overlaps with other work (the next tree's walk) instead of stalling it.
    """
    if not isinstance(arr, types.Array) or not isinstance(index, types.BaseTuple):
        return None
    if len(index) != arr.ndim or not all(isinstance(t, types.Integer) for t in index):
        return None
    sig = types.none(arr, index)

    def codegen(context, builder, signature, args):
        aryty, idxty = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        values = cgutils.unpack_tuple(builder, args[1], len(idxty))
        idx = [context.cast(builder, v, t, types.intp) for v, t in zip(values, idxty, strict=True)]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx)
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        # read access, keep in all cache levels, data cache
        builder.call(fn, [builder.bitcast(ptr, cgutils.voidptr_t), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen
