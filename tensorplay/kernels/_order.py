"""Words that the other blocks of a running kernel read while it runs.

Blocks of one launch that talk to each other (a chained scan's tiles,
``kernels/lookback``) need stores the others see and loads that see them, in
an order: ``store_relaxed`` and ``load_relaxed`` write and read a 64-bit word
of a ``uint64`` array as one access at the GPU's scope (``st.relaxed.gpu``,
``ld.relaxed.gpu``: never torn, never served from a block's stale cache),
and ``fence`` orders a thread's accesses before it against those after it
for every thread that fences too (``fence.acq_rel.gpu``). On the simulator,
which runs blocks one after another as Python, they are plain reads and
writes of host memory.

This module must not import the rest of tensorplay (the GPU compile check
loads the kernel modules on their own).
"""

from __future__ import annotations

from ._target import INTRINSICS

__all__ = ["fence", "load_relaxed", "store_relaxed"]

if not INTRINSICS:

    def load_relaxed(ary, index):
        return ary[index]

    def store_relaxed(ary, index, value) -> None:
        ary[index] = value

    def fence() -> None:
        """The simulator runs one block at a time: nothing to order."""

else:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    def _address(context, builder, aryty, ary, index, index_type):
        data = context.make_array(aryty)(context, builder, value=ary).data
        at = context.cast(builder, index, index_type, types.intp)
        return builder.ptrtoint(builder.gep(data, [at]), ir.IntType(64))

    def _words(ary, index) -> bool:
        return isinstance(ary, types.Array) and ary.dtype == types.uint64 and isinstance(index, types.Integer)

    @intrinsic
    def load_relaxed(typingctx, ary, index):
        if not _words(ary, index):
            return None

        def codegen(context, builder, sig, args):
            address = _address(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            fnty = ir.FunctionType(ir.IntType(64), [ir.IntType(64)])
            asm = ir.InlineAsm(fnty, "ld.relaxed.gpu.u64 $0, [$1];", "=l,l,~{memory}", side_effect=True)
            return builder.call(asm, [address])

        return types.uint64(ary, index), codegen

    @intrinsic
    def store_relaxed(typingctx, ary, index, value):
        if not _words(ary, index) or not isinstance(value, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            address = _address(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            word = context.cast(builder, args[2], sig.args[2], types.uint64)
            fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(64), ir.IntType(64)])
            asm = ir.InlineAsm(fnty, "st.relaxed.gpu.u64 [$0], $1;", "l,l,~{memory}", side_effect=True)
            builder.call(asm, [address, word])
            return context.get_dummy_value()

        return types.void(ary, index, value), codegen

    @intrinsic
    def fence(typingctx):
        def codegen(context, builder, sig, args):
            fnty = ir.FunctionType(ir.VoidType(), [])
            builder.call(ir.InlineAsm(fnty, "fence.acq_rel.gpu;", "~{memory}", side_effect=True), [])
            return context.get_dummy_value()

        return types.void(), codegen
