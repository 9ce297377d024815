"""Reductions over the last dimension of a 2-D view (M rows of K items).

``rows_kernel`` reduces rows with blocks of ``(lanes, rows)`` threads, several
short rows per block: eight loads in flight per thread, then warp shuffles (a
shared-memory tree on the simulator, which has no shuffles). For few long rows
``chunks_kernel`` first reduces P chunks of every row into an (M, P) array of
partials, and ``rows_kernel`` finishes. The tensor layer brings any reduction
over any dimensions to this shape with a permute and reshape.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from . import bfloat16 as bf16
from ._target import WARP_SHUFFLES, device_function

__all__ = ["BLOCK", "block_total", "chunks_kernel", "identity_value", "rows_kernel"]

BLOCK = 256  # largest block; the shared scratch array has this size
_SHUFFLED_AS = {"uint32": np.int32, "uint64": np.int64}  # Numba's warp shuffles take int32, int64, float32, float64
WARPS = BLOCK // 32  # its warps, for the per-warp scratch of the shuffle path


COMBINE = {
    "sum": device_function(lambda a, b: a + b),
    "prod": device_function(lambda a, b: a * b),
    "max": device_function(lambda a, b: a if (a > b or a != a) else b),
    "min": device_function(lambda a, b: a if (a < b or a != a) else b),
}
FINALIZE = {
    "sum": device_function(lambda acc, scale: acc),
    "mean": device_function(lambda acc, scale: acc * scale),
}


def identity_value(op: str, acc: np.dtype):
    """The starting value of an accumulator of type ``acc`` for ``op``."""
    if op in ("sum", "mean"):
        return acc.type(0)
    if op == "prod":
        return acc.type(1)
    if acc.kind == "b":
        return acc.type(op == "min")
    if acc.kind == "f":
        return acc.type(-np.inf if op == "max" else np.inf)
    info = np.iinfo(acc)
    return acc.type(info.min if op == "max" else info.max)


@functools.cache
def _parts(op: str, acc: str, bits: str = ""):
    """Device functions shared by both kernels, built once per op, type and
    input format (``bits="bfloat16"``: the items are bfloat16 bits)."""
    combine = COMBINE["sum" if op == "mean" else op]
    acc_t = np.dtype(acc).type
    load = bf16.decode if bits == "bfloat16" else acc_t

    @device_function
    def strided(x, row, k, step, k_count, init):
        """Combine x[row, k::step] with eight independent accumulators, so that
        eight loads are in flight per thread (unsigned indices: no wraparound).
        Each item is converted to the accumulator's type first (``load``): a
        uint64 item would turn an int64 sum into float64 (Numba's rule for
        mixed signs); bfloat16 bits are decoded to float32."""
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = init
        s2 = step + step  # sums, not products: uint64 * int64 is float64 in Numba
        s4 = s2 + s2
        s8 = s4 + s4
        last = k + s4 + s2 + step
        while last < k_count:
            a0 = combine(a0, load(x[row, k]))
            a1 = combine(a1, load(x[row, k + step]))
            a2 = combine(a2, load(x[row, k + s2]))
            a3 = combine(a3, load(x[row, k + s2 + step]))
            a4 = combine(a4, load(x[row, k + s4]))
            a5 = combine(a5, load(x[row, k + s4 + step]))
            a6 = combine(a6, load(x[row, k + s4 + s2]))
            a7 = combine(a7, load(x[row, last]))
            k += s8
            last += s8
        while k < k_count:
            a0 = combine(a0, load(x[row, k]))
            k += step
        return combine(combine(combine(a0, a1), combine(a2, a3)), combine(combine(a4, a5), combine(a6, a7)))

    if not WARP_SHUFFLES:

        @device_function
        def segment(lane, lanes, acc):
            """Combine the ``lanes`` values of each block segment (``lanes`` a power
            of two) through shared memory; every thread of the block calls it,
            and lane 0 of each segment gets the result."""
            scratch = cuda.shared.array(BLOCK, acc_t)
            base = cuda.threadIdx.y * lanes
            scratch[base + lane] = acc
            cuda.syncthreads()
            half = lanes // 2
            while half > 0:
                if lane < half:
                    scratch[base + lane] = combine(scratch[base + lane], scratch[base + lane + half])
                cuda.syncthreads()
                half //= 2
            total = scratch[base]
            cuda.syncthreads()
            return total

        return strided, segment

    signed = _SHUFFLED_AS.get(acc)
    if signed is None:

        @device_function
        def shuffle(acc, offset):
            return cuda.shfl_down_sync(0xFFFFFFFF, acc, offset)

    else:  # shuffles take signed ints only: unsigned bits cross as the signed type of their width

        @device_function
        def shuffle(acc, offset):
            return acc_t(cuda.shfl_down_sync(0xFFFFFFFF, signed(acc), offset))

    @device_function
    def warp(acc, width):
        """Combine ``width`` (a power of two up to 32) neighbouring lanes' values."""
        offset = width // 2
        while offset > 0:
            acc = combine(acc, shuffle(acc, offset))
            offset //= 2
        return acc

    @device_function
    def segment(lane, lanes, acc):
        """As above with warp shuffles: a warp's lanes first, then, for segments
        wider than a warp, one value per warp through shared memory."""
        acc = warp(acc, min(lanes, 32))
        if lanes > 32:
            scratch = cuda.shared.array(WARPS, acc_t)
            warps = lanes // 32
            base = cuda.threadIdx.y * warps
            if lane % 32 == 0:
                scratch[base + lane // 32] = acc
            cuda.syncthreads()
            if lane < 32:
                acc = warp(scratch[base + lane] if lane < warps else acc, warps)
            cuda.syncthreads()
        return acc

    return strided, segment


def block_total(op: str, acc: str):
    """The device function ``(t, lanes, acc)`` that combines the accumulators of
    a block's first ``lanes`` threads (``t`` = ``threadIdx.x``, ``lanes`` a
    power of two up to ``BLOCK``) for ``op``: warp shuffles, then a value a warp
    through shared memory (a shared-memory tree on the simulator). Every thread
    of the block calls it; thread 0 gets the total. The fused kernels of
    ``tp.compile`` combine their blocks' values with it."""
    return _parts(op, acc)[1]


@functools.cache
def rows_kernel(op: str, acc: str, source: str = "", result: str = ""):
    """``out[m] = finalize(reduce(x[m, :]), scale)`` for a 2-D ``x``.

    A block is ``(lanes, rows)`` threads: ``blockDim.y`` rows at a time, each
    reduced by ``blockDim.x`` lanes, so short rows do not leave threads idle.
    ``source`` and ``result`` say whether ``x`` and ``out`` hold bfloat16 bits
    (``"bfloat16"``) or plain values (``""``).
    """
    strided, segment = _parts(op, acc, source)
    done = FINALIZE["mean" if op == "mean" else "sum"]
    if result == "bfloat16":

        @device_function
        def finalize(acc, scale):
            return bf16.encode(done(acc, scale))

    else:
        finalize = done
    u64 = np.uint64

    def rows(x, out, init, scale):
        lane = cuda.threadIdx.x
        lanes = cuda.blockDim.x
        m_count = x.shape[0]
        first = cuda.blockIdx.x * cuda.blockDim.y
        while first < m_count:  # the same trip count for every thread of the block
            row = first + cuda.threadIdx.y
            acc = init
            if row < m_count:
                acc = strided(x, row, u64(lane), u64(lanes), u64(x.shape[1]), init)
            total = segment(lane, lanes, acc)
            if lane == 0 and row < m_count:
                out[row] = finalize(total, scale)
            first += cuda.gridDim.x * cuda.blockDim.y

    rows.__qualname__ = f"reduce.{op}_rows"
    kernel = cuda.jit(rows)
    kernel.tp_recipe = ("reduce", "rows_kernel", (op, acc, source, result))  # how to build it again elsewhere
    return kernel


@functools.cache
def chunks_kernel(op: str, acc: str, source: str = ""):
    """``partials[m, p]``: block (p, m) reduces every P-th chunk of row m
    (``source="bfloat16"``: ``x`` holds bfloat16 bits; the partials are ``acc``)."""
    strided, segment = _parts(op, acc, source)
    u64 = np.uint64

    def chunks(x, partials, init):
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        first = u64(cuda.blockIdx.x * nt + tid)
        step = u64(cuda.gridDim.x * nt)
        total = segment(tid, nt, strided(x, cuda.blockIdx.y, first, step, u64(x.shape[1]), init))
        if tid == 0:
            partials[cuda.blockIdx.y, cuda.blockIdx.x] = total

    chunks.__qualname__ = f"reduce.{op}_chunks"
    kernel = cuda.jit(chunks)
    kernel.tp_recipe = ("reduce", "chunks_kernel", (op, acc, source))
    return kernel
