"""Reductions over the last dimension of a 2-D view (M rows of K items).

``rows_kernel`` reduces rows with blocks of ``(lanes, rows)`` threads: a
shared-memory tree per row, several short rows per block. For few long rows
``chunks_kernel`` first reduces P chunks of every row into an (M, P) array of
partials, and ``rows_kernel`` finishes. The tensor layer brings any reduction
over any dimensions to this shape with a permute and reshape.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

__all__ = ["BLOCK", "chunks_kernel", "identity_value", "rows_kernel"]

BLOCK = 256  # largest block; the shared scratch array has this size


def _device(fn):
    return cuda.jit(device=True, inline=True)(fn)


COMBINE = {
    "sum": _device(lambda a, b: a + b),
    "max": _device(lambda a, b: a if (a > b or a != a) else b),
    "min": _device(lambda a, b: a if (a < b or a != a) else b),
}
FINALIZE = {
    "sum": _device(lambda acc, scale: acc),
    "mean": _device(lambda acc, scale: acc * scale),
}


def identity_value(op: str, acc: np.dtype):
    """The starting value of an accumulator of type ``acc`` for ``op``."""
    if op in ("sum", "mean"):
        return acc.type(0)
    if acc.kind == "b":
        return acc.type(op == "min")
    if acc.kind == "f":
        return acc.type(-np.inf if op == "max" else np.inf)
    info = np.iinfo(acc)
    return acc.type(info.min if op == "max" else info.max)


@functools.cache
def _parts(op: str):
    """Device functions shared by both kernels, built once per op."""
    combine = COMBINE["sum" if op == "mean" else op]

    @cuda.jit(device=True, inline=True)
    def strided(x, row, k, step, k_count, init):
        """Combine x[row, k::step] with four independent accumulators, so that
        four loads are in flight per thread (unsigned indices: no wraparound)."""
        a0 = init
        a1 = init
        a2 = init
        a3 = init
        while k + step + step + step < k_count:
            a0 = combine(a0, x[row, k])
            a1 = combine(a1, x[row, k + step])
            a2 = combine(a2, x[row, k + step + step])
            a3 = combine(a3, x[row, k + step + step + step])
            k += step + step + step + step
        while k < k_count:
            a0 = combine(a0, x[row, k])
            k += step
        return combine(combine(a0, a1), combine(a2, a3))

    @cuda.jit(device=True, inline=True)
    def tree(scratch, base, lane, lanes, acc):
        """Combine the ``lanes`` values of one segment of the block (``lanes`` a
        power of two) through shared memory; every thread of the block calls it."""
        scratch[base + lane] = acc
        cuda.syncthreads()
        half = lanes // 2
        while half > 0:
            if lane < half:
                scratch[base + lane] = combine(scratch[base + lane], scratch[base + lane + half])
            cuda.syncthreads()
            half //= 2
        return scratch[base]

    return strided, tree


@functools.cache
def rows_kernel(op: str, acc: str):
    """``out[m] = finalize(reduce(x[m, :]), scale)`` for a 2-D ``x``.

    A block is ``(lanes, rows)`` threads: ``blockDim.y`` rows at a time, each
    reduced by ``blockDim.x`` lanes, so short rows do not leave threads idle.
    """
    strided, tree = _parts(op)
    finalize = FINALIZE["mean" if op == "mean" else "sum"]
    acc_t = np.dtype(acc).type
    u64 = np.uint64

    def rows(x, out, init, scale):
        scratch = cuda.shared.array(BLOCK, acc_t)
        lane = cuda.threadIdx.x
        lanes = cuda.blockDim.x
        base = cuda.threadIdx.y * lanes
        m_count = x.shape[0]
        first = cuda.blockIdx.x * cuda.blockDim.y
        while first < m_count:  # the same trip count for every thread of the block
            row = first + cuda.threadIdx.y
            acc = init
            if row < m_count:
                acc = strided(x, row, u64(lane), u64(lanes), u64(x.shape[1]), init)
            total = tree(scratch, base, lane, lanes, acc)
            if lane == 0 and row < m_count:
                out[row] = finalize(total, scale)
            cuda.syncthreads()
            first += cuda.gridDim.x * cuda.blockDim.y

    rows.__qualname__ = f"reduce.{op}_rows"
    return cuda.jit(rows)


@functools.cache
def chunks_kernel(op: str, acc: str):
    """``partials[m, p]``: block (p, m) reduces every P-th chunk of row m."""
    strided, tree = _parts(op)
    acc_t = np.dtype(acc).type
    u64 = np.uint64

    def chunks(x, partials, init):
        scratch = cuda.shared.array(BLOCK, acc_t)
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        first = u64(cuda.blockIdx.x * nt + tid)
        step = u64(cuda.gridDim.x * nt)
        total = tree(scratch, 0, tid, nt, strided(x, cuda.blockIdx.y, first, step, u64(x.shape[1]), init))
        if tid == 0:
            partials[cuda.blockIdx.y, cuda.blockIdx.x] = total

    chunks.__qualname__ = f"reduce.{op}_chunks"
    return cuda.jit(chunks)
