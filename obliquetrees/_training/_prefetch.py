"""A cache prefetch for numba kernels (LLVM's ``llvm.prefetch`` intrinsic)."""

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, arr, i, j, k):
    """Ask the CPU to start loading ``arr[i, j, k]`` into cache; no effect on results.

    ``arr`` is a 3-D array of any layout; the index is not checked (a
    prefetch of any address is harmless). A prefetch instruction retires at
    once, unlike a load whose value is waited for, so a random access into a
    large array (a tree's leaf weights) overlaps with other work (the next
    tree's walk) instead of stalling it.
    """
    sig = types.none(arr, i, j, k)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        pairs = zip(args[1:], signature.args[1:], strict=True)
        idx = [context.cast(builder, v, t, types.intp) for v, t in pairs]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx)
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        # read access, keep in all cache levels, data cache
        builder.call(fn, [builder.bitcast(ptr, cgutils.voidptr_t), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen
