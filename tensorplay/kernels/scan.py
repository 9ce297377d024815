"""Inclusive scans (running sums and products) along the rows of a 2-D view.

``chunks_kernel`` gives each row chunks of ``lanes * ITEMS`` items: a thread
combines its ``ITEMS`` neighbouring items, the lanes of the block scan their
totals in shared memory (a Hillis-Steele scan, ``log2(lanes)`` steps), and
every item gets its thread's prefix. A block is ``(lanes, rows)`` threads, so
short rows share a block, as in the reductions. A row longer than one chunk
leaves each chunk's total in an (M, chunks) array of partials, which the tensor
layer scans the same way (recursively), and ``carry_kernel`` combines each
chunk's items with the scanned total of the chunks before it. No thread walks
a long row, and the launches depend only on the shape, so a scan is captured
into graphs like any op.

``reverse=True`` scans each row from its end (the gradient of a running sum is
the reversed running sum of its gradient).

This module must not import the rest of tensorplay: the GPU compile check
(``tests/helpers/gpu_compile.py``) loads it on its own.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from . import bfloat16 as bf16
from ._target import SMALL_BLOCKS, device_function

__all__ = ["BLOCK", "ITEMS", "carry_kernel", "chunks_kernel"]

BLOCK = 256  # the most threads a block; the shared scratch has this size
ITEMS = 2 if SMALL_BLOCKS else 8  # items a thread scans on its own (the simulator runs a Python thread per lane)
i64 = np.int64

COMBINE = {
    "sum": device_function(lambda a, b: a + b),
    "prod": device_function(lambda a, b: a * b),
}


@functools.cache
def chunks_kernel(op: str, acc: str, source: str = "", reverse: bool = False):
    """``chunks(x, out, partials)``: ``out[r, :]`` the scan of each chunk of
    row r of ``x`` (an (M, N) array, any layout; ``source="bfloat16"``: its
    bits), ``partials[r, c]`` the total of chunk c (``ITEMS * blockDim.x`` items).
    ``out`` and ``partials`` hold ``acc`` (a real or complex type)."""
    combine = COMBINE[op]
    acc_t = np.dtype(acc).type
    load = bf16.decode if source == "bfloat16" else acc_t
    identity = 0 if op == "sum" else 1

    def chunks(x, out, partials):
        init = acc_t(identity)  # made here: a complex number cannot be a kernel parameter
        scratch = cuda.shared.array(BLOCK, acc_t)
        mine = cuda.local.array(ITEMS, acc_t)
        lane = i64(cuda.threadIdx.x)
        lanes = i64(cuda.blockDim.x)
        base = i64(cuda.threadIdx.y) * lanes
        m = i64(x.shape[0])
        n = i64(x.shape[1])
        count = i64(partials.shape[1])  # chunks a row
        groups = (m + cuda.blockDim.y - 1) // cuda.blockDim.y
        item = i64(cuda.blockIdx.x)
        while item < groups * count:  # the same trip count for every thread of the block
            row = (item // count) * cuda.blockDim.y + cuda.threadIdx.y
            c = item % count
            first = c * lanes * ITEMS + lane * ITEMS
            total = init
            for i in range(ITEMS):
                p = first + i
                if row < m and p < n:
                    total = combine(total, load(x[row, n - 1 - p if reverse else p]))
                mine[i] = total
            scratch[base + lane] = total
            cuda.syncthreads()
            offset = 1
            while offset < lanes:
                v = scratch[base + lane]
                if lane >= offset:
                    v = combine(scratch[base + lane - offset], v)
                cuda.syncthreads()
                scratch[base + lane] = v
                cuda.syncthreads()
                offset += offset
            prefix = scratch[base + lane - 1] if lane > 0 else init
            if row < m:
                for i in range(ITEMS):
                    p = first + i
                    if p < n:
                        out[row, n - 1 - p if reverse else p] = combine(prefix, mine[i])
                if lane == lanes - 1:
                    partials[row, c] = scratch[base + lane]
            cuda.syncthreads()
            item += cuda.gridDim.x

    chunks.__qualname__ = f"scan.{op}_chunks{'_reversed' if reverse else ''}"
    kernel = cuda.jit(chunks)
    kernel.tp_recipe = ("scan", "chunks_kernel", (op, acc, source, reverse))  # how to build it again elsewhere
    return kernel


@functools.cache
def carry_kernel(op: str, acc: str, reverse: bool = False):
    """``carry(out, carries, chunk)``: combines every item of chunk c > 0 of each
    row of ``out`` with ``carries[r, c - 1]``, the scanned totals of the chunks
    (of ``chunk`` items) before it."""
    combine = COMBINE[op]

    def carry(out, carries, chunk):
        n = i64(out.shape[1])
        total = i64(out.shape[0]) * n
        e = i64(cuda.grid(1))
        while e < total:
            row = e // n
            q = e % n
            c = (n - 1 - q if reverse else q) // chunk
            if c > 0:
                out[row, q] = combine(carries[row, c - 1], out[row, q])
            e += cuda.gridsize(1)

    carry.__qualname__ = f"scan.{op}_carry{'_reversed' if reverse else ''}"
    kernel = cuda.jit(carry)
    kernel.tp_recipe = ("scan", "carry_kernel", (op, acc, reverse))
    return kernel
