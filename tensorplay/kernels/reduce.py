"""Reductions over the last dimension of a 2-D view (M rows of K items).

``rows_kernel`` reduces each row with one thread block (a shared-memory tree);
for few long rows ``chunks_kernel`` first reduces P chunks of every row into an
(M, P) array of partials, and ``rows_kernel`` finishes. The tensor layer brings
any reduction over any dimensions to this shape with a permute and reshape.
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
def rows_kernel(op: str, acc: str):
    """``out[m] = finalize(reduce(x[m, :]), scale)`` for a 2-D ``x``."""
    combine = COMBINE["sum" if op == "mean" else op]
    finalize = FINALIZE["mean" if op == "mean" else "sum"]
    acc_t = np.dtype(acc).type

    def rows(x, out, init, scale):
        scratch = cuda.shared.array(BLOCK, acc_t)
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        m_count = x.shape[0]
        k_count = x.shape[1]
        row = cuda.blockIdx.x
        while row < m_count:
            acc = init
            k = tid
            while k < k_count:
                acc = combine(acc, x[row, k])
                k += nt
            scratch[tid] = acc
            cuda.syncthreads()
            half = nt // 2
            while half > 0:
                if tid < half:
                    scratch[tid] = combine(scratch[tid], scratch[tid + half])
                cuda.syncthreads()
                half //= 2
            if tid == 0:
                out[row] = finalize(scratch[0], scale)
            cuda.syncthreads()
            row += cuda.gridDim.x

    rows.__qualname__ = f"reduce.{op}_rows"
    return cuda.jit(rows)


@functools.cache
def chunks_kernel(op: str, acc: str):
    """``partials[m, p]``: block (p, m) reduces every P-th chunk of row m."""
    combine = COMBINE["sum" if op == "mean" else op]
    acc_t = np.dtype(acc).type

    def chunks(x, partials, init):
        scratch = cuda.shared.array(BLOCK, acc_t)
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        row = cuda.blockIdx.y
        k_count = x.shape[1]
        acc = init
        k = cuda.blockIdx.x * nt + tid
        step = cuda.gridDim.x * nt
        while k < k_count:
            acc = combine(acc, x[row, k])
            k += step
        scratch[tid] = acc
        cuda.syncthreads()
        half = nt // 2
        while half > 0:
            if tid < half:
                scratch[tid] = combine(scratch[tid], scratch[tid + half])
            cuda.syncthreads()
            half //= 2
        if tid == 0:
            partials[row, cuda.blockIdx.x] = scratch[0]

    chunks.__qualname__ = f"reduce.{op}_chunks"
    return cuda.jit(chunks)
