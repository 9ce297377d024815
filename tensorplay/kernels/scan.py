"""Inclusive scans (running sums and products) along the rows of a 2-D view.

A row is cut into tiles of ``lanes * items`` items (``items_for``: a tile of
16 KiB of the accumulator's type), and ``tiles_kernel`` scans each tile: its
lanes load it into shared memory side by side (coalesced), each lane scans its
``items`` neighbouring items there, the lanes' totals are scanned across the
block (``lanes_scan``: warp shuffles on the GPU, shared memory on the
simulator), and every item gets its lane's prefix and the running total of
the tiles before it before the tile goes back to global memory side by side.
That running total comes from the tiles before, in the same pass
(``kernels/lookback``: a chained scan with decoupled look-back). So ``x`` is read once and ``out`` written
once. A block is ``(lanes, rows)`` threads, so short rows share a block, as
in the reductions. The launch depends only on the shape, so a scan is
captured into graphs like any op.

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
from . import lookback
from ._target import WARP_SHUFFLES, device_function, resident
from .lookback import COMBINE

__all__ = ["BLOCK", "chained_tiles", "items_for", "lanes_scan", "tiles_kernel"]

BLOCK = 256  # the most threads a block; the shared scratch has this size
WARPS = BLOCK // 32
TILE_BYTES = 16384  # a tile of the accumulator's type in shared memory
SCAN_RESIDENT = 4  # blocks a multiprocessor holds at once (64 registers a thread; unbounded, 96 held it to 2:
# cumsum of 2^26 float32 on the H200 ran 485 us so, 390 at 3 and 372 at 4)
i64 = np.int64

_SHUFFLED = {"int32", "int64", "float32", "float64"}  # the types Numba's warp shuffles take


def chained_tiles(m: int, n: int, lanes: int, acc: str) -> int:
    """The tiles ``tiles_kernel`` chains for (m, n) rows scanned ``lanes``
    lanes a block: 0 where a row is one tile."""
    tiles = -(-n // (lanes * items_for(acc)))
    return m * tiles if tiles > 1 else 0


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
    """What the tile kernel is built from: (combine, the accumulator's type,
    the reader of an item, ``op``'s identity, items a lane, the lanes' scan)."""
    read = row_reader(acc, source, reverse)
    return COMBINE[op], np.dtype(acc).type, read, 0 if op == "sum" else 1, items_for(acc), lanes_scan(op, acc)


@functools.cache
def tiles_kernel(op: str, acc: str, source: str = "", reverse: bool = False):
    """``tiles(x, out, status, values)``: ``out[r, :]`` the
    running ``op`` of row r of ``x`` (an (M, N) array, any layout;
    ``source="bfloat16"``: its bits), in one pass over ``x``. ``out`` holds
    ``acc`` (a real or complex type), any layout.

    A row of one tile is scanned by the block that takes it (several rows to
    a block, ``blockDim.y`` of them). Longer rows (``blockDim.y`` 1) are
    chained (``kernels/lookback``): ``status`` is then (1 + M * tiles) uint64
    zeros and ``values`` ``lookback.values_size(acc, M * tiles)`` elements of
    ``acc`` (both of any size when rows are one tile: unused)."""
    combine, acc_t, read, identity, items, scan = _tile_parts(op, acc, source, reverse)
    publish, earlier = lookback.chain(op, acc)
    padded = BLOCK * items + BLOCK * items // 32  # a spare slot every 32: a lane's run meets no bank twice

    def tiles(x, out, status, values):
        init = acc_t(identity)  # made here: a complex number cannot be a kernel parameter
        tile = cuda.shared.array(padded, acc_t)
        held = cuda.local.array(items, acc_t)
        sums = cuda.shared.array(2, acc_t)  # the tile's total, and the tiles' before it
        claimed = cuda.shared.array(1, np.int64)
        lane = i64(cuda.threadIdx.x)
        lanes = i64(cuda.blockDim.x)
        size = lanes * items
        base = i64(cuda.threadIdx.y) * size
        m = i64(x.shape[0])
        n = i64(x.shape[1])
        count = (n + size - 1) // size  # tiles a row
        chained = count > 1
        groups = (m + cuda.blockDim.y - 1) // cuda.blockDim.y
        item = i64(cuda.blockIdx.x)
        while True:  # the same trip count for every thread of the block
            if chained:
                if lane == 0:
                    claimed[0] = lookback.claim(status)
                cuda.syncthreads()
                item = claimed[0]
            if item >= groups * count:
                break
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
            total, prefix = scan(lane, lanes, run, init)
            if chained:
                if lane == lanes - 1:  # the tile's total out first: the tiles after it need it
                    sums[0] = total
                    publish(status, values, item, total, lookback.AGGREGATE if c > 0 else lookback.INCLUSIVE)
                cuda.syncthreads()
                if c > 0 and lane < 32:
                    before = earlier(status, values, item, item - c, lane)
                    if lane == 0:
                        sums[1] = before
                        publish(status, values, item, combine(before, sums[0]), lookback.INCLUSIVE)
                cuda.syncthreads()
                if c > 0:
                    prefix = combine(sums[1], prefix)
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
    kernel = resident(SCAN_RESIDENT, BLOCK)(tiles)
    kernel.tp_recipe = ("scan", "tiles_kernel", (op, acc, source, reverse))
    return kernel
