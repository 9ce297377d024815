"""Inclusive scans (running sums and products) along the rows of a 2-D view.

A row is cut into tiles of ``lanes * items`` items (``items_for``: a tile of
16 KiB of the accumulator's type). When a row has more than one tile,
``totals_kernel`` first reduces each tile (reads only, coalesced) into an (M,
tiles) array of partials, which the tensor layer scans the same way
(recursively) into the carries. ``tiles_kernel`` then scans each tile: its
lanes load it into shared memory side by side (coalesced), each lane scans its
``items`` neighbouring items there, the lanes' totals are scanned across the
block (``lanes_scan``: warp shuffles on the GPU, shared memory on the
simulator), and every item gets its lane's prefix and the tile's carry before
the tile goes back to global memory side by side. That is one read for the
totals and one read and one write for the scan (a reduce-then-scan). A block
is ``(lanes, rows)`` threads, so short rows share a block, as in the
reductions. The launches depend only on the shape, so a scan is captured into
graphs like any op.

``reverse=True`` scans each row from its end (the gradient of a running sum is
the reversed running sum of its gradient).

``lanes_scan`` is also what the compaction of boolean masks
(``kernels/indexing``) and the radix sort (``kernels/radix``) rank with.

This module must not import the rest of tensorplay: the GPU compile check
(``tests/helpers/gpu_compile.py``) loads it on its own.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from . import bfloat16 as bf16
from ._target import WARP_SHUFFLES, device_function

__all__ = ["BLOCK", "items_for", "lanes_scan", "tiles_kernel", "totals_kernel"]

BLOCK = 256  # the most threads a block; the shared scratch has this size
WARPS = BLOCK // 32
TILE_BYTES = 16384  # a tile of the accumulator's type in shared memory
i64 = np.int64

COMBINE = {
    "sum": device_function(lambda a, b: a + b),
    "prod": device_function(lambda a, b: a * b),
}
_SHUFFLED = {"int32", "int64", "float32", "float64"}  # the types Numba's warp shuffles take


def items_for(acc: str) -> int:
    """Items a lane scans on its own for an accumulator of type ``acc``."""
    return max(2, TILE_BYTES // (BLOCK * np.dtype(acc).itemsize))


@functools.cache
def lanes_scan(op: str, acc: str):
    """``scan(lane, lanes, value, init)``: (inclusive, exclusive) running ``op``
    of ``value`` over the ``lanes`` lanes (a power of two, at most ``BLOCK``)
    of this thread's block row; ``init`` is ``op``'s identity. Every thread of
    the block calls it."""
    combine = COMBINE[op]
    acc_t = np.dtype(acc).type

    if not WARP_SHUFFLES or acc not in _SHUFFLED:

        @device_function
        def scan(lane, lanes, value, init):
            """Hillis-Steele in shared memory: log2(lanes) steps."""
            scratch = cuda.shared.array(BLOCK, acc_t)
            base = cuda.threadIdx.y * lanes
            scratch[base + lane] = value
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
            inclusive = scratch[base + lane]
            exclusive = scratch[base + lane - 1] if lane > 0 else init
            cuda.syncthreads()
            return inclusive, exclusive

        return scan

    @device_function
    def scan(lane, lanes, value, init):
        """A warp's lanes by shuffles, then each warp's total through shared memory."""
        warp_lane = lane % 32
        width = min(lanes, 32)
        v = value
        d = 1
        while d < width:
            other = cuda.shfl_up_sync(0xFFFFFFFF, v, d)
            if warp_lane >= d:
                v = combine(other, v)
            d += d
        before = cuda.shfl_up_sync(0xFFFFFFFF, v, 1)
        if warp_lane == 0:
            before = init
        if lanes > 32:
            sums = cuda.shared.array(WARPS, acc_t)
            warps = lanes // 32
            base = cuda.threadIdx.y * warps
            if warp_lane == 31:
                sums[base + lane // 32] = v
            cuda.syncthreads()
            carry = init
            for w in range(lane // 32):
                carry = combine(carry, sums[base + w])
            cuda.syncthreads()
            v = combine(carry, v)
            before = combine(carry, before)
        return v, before

    return scan


@functools.cache
def row_reader(acc: str, source: str = "", reverse: bool = False):
    """``read(x, row, p, m, n, init)``: item ``p`` of row ``row`` of the (m, n)
    array ``x`` as ``acc`` (from the row's end when ``reverse``; ``x`` holds
    bfloat16 bits when ``source="bfloat16"``), or ``init`` outside the array.
    The read itself is clamped into the array and the choice made after it, so
    an unrolled loop of reads has no branch between them: the loads go out
    together instead of one at a time."""
    acc_t = np.dtype(acc).type
    load = bf16.decode if source == "bfloat16" else acc_t

    @device_function
    def read(x, row, p, m, n, init):
        q = min(p, n - 1)
        v = load(x[min(row, m - 1), n - 1 - q if reverse else q])
        return v if (row < m) & (p < n) else init

    return read


def _tile_parts(op: str, acc: str, source: str, reverse: bool):
    """What both tile kernels are built from: (combine, the accumulator's type,
    the reader of an item, ``op``'s identity, items a lane, the lanes' scan)."""
    read = row_reader(acc, source, reverse)
    return COMBINE[op], np.dtype(acc).type, read, 0 if op == "sum" else 1, items_for(acc), lanes_scan(op, acc)


@functools.cache
def totals_kernel(op: str, acc: str, source: str = "", reverse: bool = False):
    """``totals(x, partials)``: ``partials[r, c]`` the ``op`` of tile c of row r
    of ``x`` (an (M, N) array, any layout; ``source="bfloat16"``: its bits),
    tiles of ``items_for(acc) * blockDim.x`` items counted from the row's end
    when ``reverse``. One block row a tile, its lanes reading side by side."""
    combine, acc_t, read, identity, items, scan = _tile_parts(op, acc, source, reverse)

    def totals(x, partials):
        init = acc_t(identity)
        lane = i64(cuda.threadIdx.x)
        lanes = i64(cuda.blockDim.x)
        m = i64(x.shape[0])
        n = i64(x.shape[1])
        count = i64(partials.shape[1])
        size = lanes * items
        groups = (m + cuda.blockDim.y - 1) // cuda.blockDim.y
        item = i64(cuda.blockIdx.x)
        while item < groups * count:  # the same trip count for every thread of the block
            row = (item // count) * cuda.blockDim.y + cuda.threadIdx.y
            c = item % count
            run = init
            for i in range(items):  # a fixed count: the loads unrolled, all in flight at once
                run = combine(run, read(x, row, c * size + i * lanes + lane, m, n, init))
            total, _ = scan(lane, lanes, run, init)
            if lane == lanes - 1 and row < m:
                partials[row, c] = total
            item += cuda.gridDim.x

    totals.__qualname__ = f"scan.{op}_totals{'_reversed' if reverse else ''}"
    kernel = cuda.jit(totals)
    kernel.tp_recipe = ("scan", "totals_kernel", (op, acc, source, reverse))  # how to build it again elsewhere
    return kernel


@functools.cache
def tiles_kernel(op: str, acc: str, source: str = "", reverse: bool = False):
    """``tiles(x, out, carries)``: ``out[r, :]`` the running ``op`` of row r of
    ``x`` (an (M, N) array, any layout; ``source="bfloat16"``: its bits), tile
    by tile, tile c > 0 starting from ``carries[r, c - 1]`` (the scanned
    tile totals; an (M, 0) array when a row is one tile). ``out`` holds ``acc``
    (a real or complex type), any layout."""
    combine, acc_t, read, identity, items, scan = _tile_parts(op, acc, source, reverse)
    padded = BLOCK * items + BLOCK * items // 32  # a spare slot every 32: a lane's run meets no bank twice

    def tiles(x, out, carries):
        init = acc_t(identity)  # made here: a complex number cannot be a kernel parameter
        tile = cuda.shared.array(padded, acc_t)
        held = cuda.local.array(items, acc_t)
        lane = i64(cuda.threadIdx.x)
        lanes = i64(cuda.blockDim.x)
        size = lanes * items
        base = i64(cuda.threadIdx.y) * size
        m = i64(x.shape[0])
        n = i64(x.shape[1])
        count = (n + size - 1) // size  # tiles a row
        groups = (m + cuda.blockDim.y - 1) // cuda.blockDim.y
        item = i64(cuda.blockIdx.x)
        while item < groups * count:  # the same trip count for every thread of the block
            row = (item // count) * cuda.blockDim.y + cuda.threadIdx.y
            c = item % count
            start = c * size
            for i in range(items):  # the tile in, lanes side by side: the loads first, all in flight at once
                held[i] = read(x, row, start + i * lanes + lane, m, n, init)
            for i in range(items):
                q = base + i * lanes + lane
                tile[q + q // 32] = held[i]
            cuda.syncthreads()
            run = init
            for i in range(items):  # this lane's run of neighbouring items
                q = base + lane * items + i
                run = combine(run, tile[q + q // 32])
                tile[q + q // 32] = run
            _, prefix = scan(lane, lanes, run, init)
            if c > 0 and row < m:
                prefix = combine(carries[row, c - 1], prefix)
            for i in range(items):
                q = base + lane * items + i
                tile[q + q // 32] = combine(prefix, tile[q + q // 32])
            cuda.syncthreads()
            for i in range(items):  # and out, side by side
                q = base + i * lanes + lane
                p = start + i * lanes + lane
                if row < m and p < n:
                    out[row, n - 1 - p if reverse else p] = tile[q + q // 32]
            cuda.syncthreads()
            item += cuda.gridDim.x

    tiles.__qualname__ = f"scan.{op}_tiles{'_reversed' if reverse else ''}"
    kernel = cuda.jit(tiles)
    kernel.tp_recipe = ("scan", "tiles_kernel", (op, acc, source, reverse))
    return kernel
