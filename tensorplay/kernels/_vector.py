"""Four elements of an array in one memory instruction, for the flat kernels.

``load4(a, i)`` reads elements ``4i .. 4i + 3`` of a C-contiguous array (of any
dimensions, seen flat) as one vector load (``ld.global.v4.f32`` for float32: one instruction where four
scalar loads take four) and returns them as a tuple; ``store4(a, i, v0, v1,
v2, v3)`` writes them back in one store, each value converted to the array's
dtype as ``a[k] = v`` converts it. The array must be C-contiguous and the
vector aligned to its size (up to 16 bytes): a kernel checks both first, as
``vector_base(a) % 16 == 0``. (Complex elements, which no vector holds, are
loaded and stored one by one.) All three also take an element pointer (a
``CPointer`` parameter: the flat kernels' arrays, see
``kernels/elementwise.py``), as does ``store(a, i, v)``, one element. On the
simulator (no ``@intrinsic`` lowering) they are Python twins over the same
elements, so the kernels' vector loops run there too.

This module must not import the rest of tensorplay (the GPU compile check
loads the kernel modules on their own).
"""

from __future__ import annotations

import numpy as np

from ._target import INTRINSICS

__all__ = ["load4", "store", "store4", "vector_base"]

if not INTRINSICS:  # the simulator runs kernels as Python, over arrays of host memory

    def vector_base(ary):
        return np.uint64(ary.__array_interface__["data"][0] if ary.flags.c_contiguous else 1)

    def _check_aligned(ary, k: int) -> None:
        """The GPU faults on a vector access not aligned to its size: so does this."""
        size = min(16, 4 * ary.dtype.itemsize)
        address = ary.__array_interface__["data"][0] + k * ary.dtype.itemsize
        if address % size:
            raise RuntimeError(f"misaligned vector load: {size} bytes at address {address:#x}")

    def load4(ary, index):
        k = 4 * int(index)
        _check_aligned(ary, k)
        flat = ary.flat if getattr(ary, "ndim", 1) > 1 else ary
        return flat[k], flat[k + 1], flat[k + 2], flat[k + 3]

    def store4(ary, index, v0, v1, v2, v3) -> None:
        k = 4 * int(index)
        ary[k], ary[k + 1], ary[k + 2], ary[k + 3] = v0, v1, v2, v3

    def store(ary, index, value) -> None:
        ary[index] = value

else:
    import operator

    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    def _data(context, builder, aryty, ary):
        """The pointer to the first element of an array or of an element pointer."""
        if isinstance(aryty, types.CPointer):
            return ary
        return context.make_array(aryty)(context, builder, value=ary).data

    def _element_pointers(context, builder, aryty, ary, index, index_type):
        """Pointers to the four elements of the ``index``-th group, one by one: for
        complex elements, which no LLVM vector holds (four loads or stores)."""
        data = _data(context, builder, aryty, ary)
        first = builder.mul(context.cast(builder, index, index_type, types.intp), context.get_constant(types.intp, 4))
        return [builder.gep(data, [builder.add(first, context.get_constant(types.intp, k))]) for k in range(4)]

    def _vector_pointer(context, builder, aryty, ary, index, index_type):
        """A pointer to the ``index``-th group of four elements, and its alignment."""
        data = _data(context, builder, aryty, ary)
        vty = ir.VectorType(context.get_data_type(aryty.dtype), 4)
        at = context.cast(builder, index, index_type, types.intp)
        align = min(16, 4 * context.get_abi_sizeof(context.get_data_type(aryty.dtype)))
        return builder.gep(builder.bitcast(data, vty.as_pointer()), [at]), align

    @intrinsic
    def vector_base(typingctx, ary):
        """The address of a C-contiguous array's first element, as a uint64; 1
        (never aligned) for an array of another layout, whose elements are not
        side by side (the flat kernels take strided 1-D arrays too). An element
        pointer's address is the pointer's."""
        if not isinstance(ary, (types.Array, types.CPointer)):
            return None

        def codegen(context, builder, sig, args):
            if getattr(sig.args[0], "layout", "C") != "C":
                return ir.Constant(ir.IntType(64), 1)
            return builder.ptrtoint(_data(context, builder, sig.args[0], args[0]), ir.IntType(64))

        return types.uint64(ary), codegen

    @intrinsic
    def load4(typingctx, ary, index):
        if not isinstance(ary, (types.Array, types.CPointer)) or not isinstance(index, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            aryty = sig.args[0]
            model = context.data_model_manager[aryty.dtype]
            if isinstance(aryty.dtype, types.Complex):
                ptrs = _element_pointers(context, builder, aryty, args[0], args[1], sig.args[1])
                values = [model.from_data(builder, builder.load(p)) for p in ptrs]
                return context.make_tuple(builder, sig.return_type, values)
            ptr, align = _vector_pointer(context, builder, aryty, args[0], args[1], sig.args[1])
            vec = builder.load(ptr, align=align)
            values = [model.from_data(builder, builder.extract_element(vec, ir.IntType(32)(k))) for k in range(4)]
            return context.make_tuple(builder, sig.return_type, values)

        return types.UniTuple(ary.dtype, 4)(ary, index), codegen

    @intrinsic
    def store4(typingctx, ary, index, v0, v1, v2, v3):
        if not isinstance(ary, (types.Array, types.CPointer)) or not isinstance(index, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            aryty = sig.args[0]
            model = context.data_model_manager[aryty.dtype]
            if isinstance(aryty.dtype, types.Complex):
                ptrs = _element_pointers(context, builder, aryty, args[0], args[1], sig.args[1])
                for k, p in enumerate(ptrs):
                    builder.store(
                        model.as_data(builder, context.cast(builder, args[2 + k], sig.args[2 + k], aryty.dtype)), p
                    )
                return context.get_dummy_value()
            ptr, align = _vector_pointer(context, builder, aryty, args[0], args[1], sig.args[1])
            vec = ir.Constant(ir.VectorType(context.get_data_type(aryty.dtype), 4), None)
            for k in range(4):
                value = context.cast(builder, args[2 + k], sig.args[2 + k], aryty.dtype)
                vec = builder.insert_element(vec, model.as_data(builder, value), ir.IntType(32)(k))
            builder.store(vec, ptr, align=align)
            return context.get_dummy_value()

        return types.void(ary, index, v0, v1, v2, v3), codegen

    @intrinsic
    def store(typingctx, ary, index, value):
        """``ary[index] = value`` for an array or an element pointer: Numba's own
        store through a ``CPointer`` writes the value as it is computed, which
        for a bool (``i1``) is not its stored form (a byte)."""
        if not isinstance(ary, (types.Array, types.CPointer)) or not isinstance(index, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            aryty, indexty, valuety = sig.args
            if isinstance(aryty, types.Array):
                setitem = context.get_function(operator.setitem, types.void(aryty, indexty, aryty.dtype))
                return setitem(builder, (args[0], args[1], context.cast(builder, args[2], valuety, aryty.dtype)))
            value = context.cast(builder, args[2], valuety, aryty.dtype)
            at = context.cast(builder, args[1], indexty, types.intp)
            data = context.data_model_manager[aryty.dtype].as_data(builder, value)
            builder.store(data, builder.gep(args[0], [at]))
            return context.get_dummy_value()

        return types.void(ary, index, value), codegen
