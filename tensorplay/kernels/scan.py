"""Inclusive scans (running sums and products) along the rows of a 2-D view.

A row is cut into tiles of ``lanes * items`` items (``items_for``: a tile of
16 KiB of the accumulator's type). Rows of one tile go to ``tiles_kernel``,
several to a block (a block is ``(lanes, rows)`` threads, as in the
reductions): the lanes load a tile into shared memory side by side
(coalesced), each lane scans its ``items`` neighbouring items there, the
lanes' totals are scanned across the block (``lanes_scan``: warp shuffles on
the GPU, shared memory on the simulator), and every item gets its lane's
prefix before the tile goes back side by side. Longer rows go to
``chained_kernel``, which does the same a warp at a time and adds to each
tile the running total of the tiles before it, learnt from those tiles in the
same pass (``kernels/lookback``: a chained scan with decoupled look-back). So
``x`` is read once and ``out`` written once. The launches depend only on the
shape, so a scan is captured into graphs like any op.

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

__all__ = [
    "BLOCK",
    "block_scan",
    "chained_kernel",
    "chained_tiles",
    "items_for",
    "lanes_scan",
    "tiles_kernel",
    "warp_sync",
]

BLOCK = 256  # the most threads a block; the shared scratch has this size
WARP = np.int64(32)
WARPS = BLOCK // 32
TILE_BYTES = 16384  # a tile of the accumulator's type in shared memory
SCAN_RESIDENT = 4  # blocks a multiprocessor holds at once (64 registers a thread; unbounded, 96 held it to 2:
# cumsum of 2^26 float32 on the H200 ran 485 us so, 390 at 3 and 372 at 4)
i64 = np.int64
u64 = np.uint64

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
def _within_warp(op: str, acc: str):
    """``scan(warp_lane, width, value, init)``: (inclusive, exclusive) running
    ``op`` of ``value`` over the first ``width`` lanes of this warp (a power of
    two, at most 32), by warp shuffles; every lane of the warp calls it."""
    combine = COMBINE[op]

    @device_function
    def scan(warp_lane, width, value, init):
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
        return v, before

    return scan


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

    within = _within_warp(op, acc)

    @device_function
    def scan(lane, lanes, value, init):
        """A warp's lanes by shuffles, then each warp's total through shared memory."""
        v, before = within(lane % 32, min(lanes, 32), value, init)
        if lanes > 32:
            sums = cuda.shared.array(WARPS, acc_t)
            warps = lanes // 32
            base = cuda.threadIdx.y * warps
            if lane % 32 == 31:
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


@functools.cache
def inside_reader(acc: str, source: str = "", reverse: bool = False):
    """``read(x, row, p, n)``: as ``row_reader``'s, for an item known to be
    inside the array: no clamp and no choice, so the unrolled loads of a
    contiguous row are one address and its offsets (no register each), with
    unsigned indices, which Numba does not check for wrapping around."""
    load = bf16.decode if source == "bfloat16" else np.dtype(acc).type

    @device_function
    def read(x, row, p, n):
        return load(x[u64(row), u64(n - 1 - p if reverse else p)])  # unsigned: no wrap-around of negative indices

    return read


def _tile_parts(op: str, acc: str, source: str, reverse: bool):
    """What the tile kernel is built from: (combine, the accumulator's type,
    the reader of an item, ``op``'s identity, items a lane, the lanes' scan)."""
    read = row_reader(acc, source, reverse)
    return COMBINE[op], np.dtype(acc).type, read, 0 if op == "sum" else 1, items_for(acc), lanes_scan(op, acc)


@functools.cache
def tiles_kernel(op: str, acc: str, source: str = "", reverse: bool = False):
    """``tiles(x, out)``: ``out[r, :]`` the running ``op`` of row r of ``x`` (an
    (M, N) array, any layout; ``source="bfloat16"``: its bits), for rows of
    one tile (``chained_kernel`` takes longer ones), ``blockDim.y`` rows a
    block. ``out`` holds ``acc`` (a real or complex type), any layout."""
    combine, acc_t, read, identity, items, scan = _tile_parts(op, acc, source, reverse)
    padded = BLOCK * items + BLOCK * items // 32  # a spare slot every 32: a lane's run meets no bank twice

    def tiles(x, out):
        init = acc_t(identity)  # made here: a complex number cannot be a kernel parameter
        tile = cuda.shared.array(padded, acc_t)
        held = cuda.local.array(items, acc_t)
        lane = i64(cuda.threadIdx.x)
        lanes = i64(cuda.blockDim.x)
        base = i64(cuda.threadIdx.y) * lanes * items
        m = i64(x.shape[0])
        n = i64(x.shape[1])
        group = i64(cuda.blockIdx.x)
        while group * cuda.blockDim.y < m:  # the same trip count for every thread of the block
            row = group * cuda.blockDim.y + cuda.threadIdx.y
            for i in range(items):  # the tile in, lanes side by side: the loads first, all in flight at once
                held[i] = read(x, row, i * lanes + lane, m, n, init)
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
            for i in range(items):
                q = base + lane * items + i
                tile[q + q // 32] = combine(prefix, tile[q + q // 32])
            cuda.syncthreads()
            for i in range(items):  # and out, side by side
                q = base + i * lanes + lane
                p = i * lanes + lane
                if row < m and p < n:
                    out[row, n - 1 - p if reverse else p] = tile[q + q // 32]
            cuda.syncthreads()
            group += cuda.gridDim.x

    tiles.__qualname__ = f"scan.{op}_tiles{'_reversed' if reverse else ''}"
    kernel = cuda.jit(tiles)
    kernel.tp_recipe = ("scan", "tiles_kernel", (op, acc, source, reverse))
    return kernel


@functools.cache
def block_scan(op: str, acc: str):
    """``scan(lane, lanes, value, init) -> (exclusive, total)``: the running
    ``op`` of ``value`` over the lanes before this one, and over all ``lanes``
    (the whole block, one block row; on the GPU a multiple of 32). One block
    barrier; the block syncs again before the next call."""
    combine = COMBINE[op]
    acc_t = np.dtype(acc).type

    if not WARP_SHUFFLES or acc not in _SHUFFLED:
        inner = lanes_scan(op, acc)

        @device_function
        def scan(lane, lanes, value, init):
            last = cuda.shared.array(1, acc_t)
            inclusive, exclusive = inner(lane, lanes, value, init)
            if lane == lanes - 1:
                last[0] = inclusive
            cuda.syncthreads()
            return exclusive, last[0]

        return scan

    within = _within_warp(op, acc)

    @device_function
    def warp_scan(lane, lanes, value, init):
        """Each warp by shuffles, then every lane adds up the warps' totals."""
        totals = cuda.shared.array(WARPS, acc_t)
        v, before = within(lane % 32, 32, value, init)
        if lane % 32 == 31:
            totals[lane // 32] = v
        cuda.syncthreads()
        carry = init
        total = init
        for w in range(lanes // 32):
            t = totals[w]
            if w < lane // 32:
                carry = combine(carry, t)
            total = combine(total, t)
        return combine(carry, before), total

    return warp_scan


if WARP_SHUFFLES:
    warp_sync = device_function(lambda: cuda.syncwarp(0xFFFFFFFF))
else:  # the simulator's block is one warp
    warp_sync = device_function(lambda: cuda.syncthreads())


@device_function
def _padded(q):
    """Slot ``q`` of a tile staged with a spare slot every 32 (``q`` unsigned)."""
    return q + (q >> u64(5))


@functools.cache
def chained_kernel(
    op: str,
    acc: str,
    source: str = "",
    reverse: bool = False,
    items: int = 0,
    blocks_resident: int = SCAN_RESIDENT,
    claim_early: bool = False,
):
    """``chained(x, out, status, values)``: ``out[r, :]`` the running ``op`` of
    row r of ``x`` as ``tiles_kernel`` gives it, for rows longer than a tile,
    in one pass: blocks (one block row) take tiles in order and chain them by
    look-back (``kernels/lookback``; ``status`` (1 + M * tiles) uint64 zeros,
    ``values`` ``lookback.values_size(acc, M * tiles)`` elements of ``acc``).

    Each warp takes a run of the tile: it loads the run side by side, turns
    it in shared memory so that each lane holds ``items`` neighbouring items
    in registers, scans them, and turns the results back to store them side
    by side; only the lanes' totals cross warps (``block_scan``), so a tile
    waits at three block barriers (the ticket, the totals, the tiles before).
    A block asks for a tile's ticket only when it can begin it: a ticket
    taken ahead, while the block finishes another tile, leaves the tiles
    after it waiting a whole tile longer (cumsum of 2^26 float32 on the H200:
    830 us so, against 352).

    A tile inside its row (all but a row's last) is read and written with no
    bounds checked, and with unsigned indices, as are the slots of ``stage``:
    on the GPU its loads and stores are then one address and constant offsets.
    With signed indices, each item's address held a register (Numba wraps
    negative ones around), and at 64 registers a thread (4 blocks resident)
    float32's kernel spilled 60 bytes a thread, and ran 2500 instructions
    against 1520 now (ptxas for sm_90).

    ``items`` (0: ``items_for(acc)``), ``blocks_resident`` and ``claim_early``
    are for ``benchmarks/scan_variants.py``, which times other choices:
    ``claim_early`` asks for the next tile's ticket once this tile's prefix is
    known, so that the atomic's round trip overlaps the stores."""
    combine, acc_t, read, identity, default_items, _ = _tile_parts(op, acc, source, reverse)
    items = items or default_items
    read_inside = inside_reader(acc, source, reverse)
    scan = block_scan(op, acc)
    publish, earlier = lookback.chain(op, acc)
    padded = BLOCK * items + BLOCK * items // 32  # a spare slot every 32: a lane's run meets no bank twice

    def chained(x, out, status, values):
        init = acc_t(identity)
        stage = cuda.shared.array(padded, acc_t)
        earlier_total = cuda.shared.array(1, acc_t)
        claimed = cuda.shared.array(1, np.int64)
        held = cuda.local.array(items, acc_t)
        lane = i64(cuda.threadIdx.x)
        lanes = i64(cuda.blockDim.x)
        width = WARP if WARP_SHUFFLES else min(lanes, WARP)  # lanes a warp: a constant on the GPU (blocks of 256)
        warp_lane = lane % width
        base = (lane - warp_lane) * items  # the warp's run of the tile
        # the run's slots in ``stage``, unsigned: no wrap-around of negative indices, and shifts for the padding
        side = u64(base) + u64(warp_lane)  # item i side by side: side + i * width
        mine = u64(base) + u64(warp_lane * items)  # item i of this lane's neighbours: mine + i
        size = lanes * items
        m = i64(x.shape[0])
        n = i64(x.shape[1])
        count = (n + size - 1) // size  # tiles a row
        if claim_early and lane == 0:
            claimed[0] = lookback.claim(status)
        while True:  # the same trip count for every thread of the block
            if not claim_early and lane == 0:
                claimed[0] = lookback.claim(status)
            cuda.syncthreads()
            item = claimed[0]
            if item >= m * count:
                break
            row = item // count
            c = item % count
            start = c * size + base
            whole = (c + 1) * size <= n  # the tile inside the row (all but a row's last): no bounds to check
            if whole:  # the warp's run in, side by side: the loads first, all in flight at once
                for i in range(items):
                    held[i] = read_inside(x, row, start + i * width + warp_lane, n)
            else:
                for i in range(items):
                    held[i] = read(x, row, start + i * width + warp_lane, m, n, init)
            for i in range(items):
                stage[_padded(side + u64(i * width))] = held[i]
            warp_sync()
            run = init
            for i in range(items):  # this lane's neighbouring items, scanned in registers
                run = combine(run, stage[_padded(mine + u64(i))])
                held[i] = run
            prefix, total = scan(lane, lanes, run, init)
            if c > 0:
                if lane < 32:  # the first warp: the tile's total out, then the tiles before it added up
                    if lane == 0:
                        publish(status, values, item, total, lookback.AGGREGATE)
                    before = earlier(status, values, item, item - c, lane)
                    if lane == 0:
                        earlier_total[0] = before
                        publish(status, values, item, combine(before, total), lookback.INCLUSIVE)
                cuda.syncthreads()
                prefix = combine(earlier_total[0], prefix)
            elif lane == 0:
                publish(status, values, item, total, lookback.INCLUSIVE)
            if claim_early and lane == 0:  # every thread read this tile's ticket before the block scan's barrier
                claimed[0] = lookback.claim(status)
            for i in range(items):
                stage[_padded(mine + u64(i))] = combine(prefix, held[i])
            warp_sync()
            for i in range(items):  # and out, side by side
                p = start + i * width + warp_lane
                if whole or p < n:
                    out[u64(row), u64(n - 1 - p if reverse else p)] = stage[_padded(side + u64(i * width))]

    chained.__qualname__ = f"scan.{op}_chained{'_reversed' if reverse else ''}"
    kernel = resident(blocks_resident, BLOCK)(chained)
    kernel.tp_recipe = ("scan", "chained_kernel", (op, acc, source, reverse, items, blocks_resident, claim_early))
    return kernel
