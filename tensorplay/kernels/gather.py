"""The gather-copy kernel: one launch copies up to ``MAX_PAIRS`` buffers.

``kernel(k)`` copies ``k`` (source, destination) pairs of raw device memory,
one pair per block row (``blockIdx.y``). The destinations are a table in
device memory (fixed for a staged graph); the source addresses and byte
counts are kernel parameters, so that updating a graph's kernel node with
new ones (``cuGraphExecKernelNodeSetParams``) is all a staged replay changes,
and the driver copies them at that call. A pair whose count is 0 copies
nothing.

Addresses become pointers through an ``@intrinsic`` (``inttoptr``); pairs
aligned alike move in 8-byte words between a byte head and tail, others byte
by byte. Numba's simulator runs kernels as Python, so there the loads and
stores are Python twins reading the host memory behind the addresses.

This module must not import the rest of tensorplay: the GPU compile check
(``tests/helpers/gpu_compile.py``) loads it on its own.
"""

from __future__ import annotations

import functools

import numpy as np

from ._source import jit_source
from ._target import INTRINSICS, device_function

__all__ = ["MAX_PAIRS", "kernel"]

# Pairs per launch: 16 bytes of parameters each keeps a launch under the 4 KiB
# every driver takes; a staged graph with more pairs gets more gather nodes.
MAX_PAIRS = 128

if not INTRINSICS:  # the simulator runs Python: plain memory reads
    import ctypes

    def load_u64(addr, index):
        return np.uint64(ctypes.c_uint64.from_address(int(addr) + 8 * int(index)).value)

    def store_u64(addr, index, value) -> None:
        ctypes.c_uint64.from_address(int(addr) + 8 * int(index)).value = int(value)

    def load_u8(addr, index):
        return np.uint8(ctypes.c_uint8.from_address(int(addr) + int(index)).value)

    def store_u8(addr, index, value) -> None:
        ctypes.c_uint8.from_address(int(addr) + int(index)).value = int(value)

else:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    def _load(bits: int, result):
        @intrinsic
        def load(typingctx, addr, index):
            def codegen(context, builder, sig, args):
                ptr = builder.inttoptr(args[0], ir.PointerType(ir.IntType(bits)))
                return builder.load(builder.gep(ptr, [args[1]]))

            return result(types.int64, types.int64), codegen

        return load

    def _store(bits: int, value_type):
        @intrinsic
        def store(typingctx, addr, index, value):
            def codegen(context, builder, sig, args):
                ptr = builder.inttoptr(args[0], ir.PointerType(ir.IntType(bits)))
                builder.store(args[2], builder.gep(ptr, [args[1]]))
                return context.get_dummy_value()

            return types.void(types.int64, types.int64, value_type), codegen

        return store

    load_u64, store_u64 = _load(64, types.uint64), _store(64, types.uint64)
    load_u8, store_u8 = _load(8, types.uint8), _store(8, types.uint8)


@device_function
def copy_bytes(dst, src, n, i, step):
    """Threads ``i``, ``i + step``, ... copy bytes ``[0, n)`` from ``src`` to ``dst``."""
    if ((dst ^ src) & 7) == 0:  # aligned alike: words between a byte head and tail
        head = (8 - (src & 7)) & 7
        if head > n:
            head = n
        words = (n - head) >> 3
        k = i
        while k < words:
            store_u64(dst + head, k, load_u64(src + head, k))
            k += step
        k = i
        while k < head:
            store_u8(dst, k, load_u8(src, k))
            k += step
        k = head + (words << 3) + i
        while k < n:
            store_u8(dst, k, load_u8(src, k))
            k += step
    else:
        k = i
        while k < n:
            store_u8(dst, k, load_u8(src, k))
            k += step


_SOURCE = """import numpy as np
from numba import cuda

from tensorplay.kernels.gather import copy_bytes

i64 = np.int64


def {name}(dst, {params}):
    srcs = cuda.local.array({k}, i64)
    nbytes = cuda.local.array({k}, i64)
{fill}
    j = cuda.blockIdx.y
    n = nbytes[j]
    if n > 0:
        copy_bytes(dst[j], srcs[j], n, i64(cuda.grid(1)), i64(cuda.gridsize(1)))
"""


@functools.cache
def kernel(k: int):
    """The kernel ``gather_<k>(dst, src0, ..., src<k-1>, n0, ..., n<k-1>)``.

    ``dst`` is an int64 array of ``k`` destination addresses; each ``src`` an
    int64 source address and each ``n`` an int64 byte count. Launch it with
    ``gridDim.y == k``; ``gridDim.x`` blocks share each pair.
    """
    if not 1 <= k <= MAX_PAIRS:
        raise ValueError(f"a gather kernel copies 1 to {MAX_PAIRS} pairs, got {k}")
    name = f"gather_{k}"
    fill = [f"    srcs[{p}] = src{p}\n    nbytes[{p}] = n{p}" for p in range(k)]
    params = ", ".join([f"src{p}" for p in range(k)] + [f"n{p}" for p in range(k)])
    source = _SOURCE.format(name=name, params=params, k=k, fill="\n".join(fill))
    compiled = jit_source(name, source, "gather", f"gather.{name}")  # on a GPU, kept on disk for other processes
    compiled.tp_recipe = ("gather", "kernel", (k,))  # how to build it again elsewhere (the GPU compile check)
    return compiled
