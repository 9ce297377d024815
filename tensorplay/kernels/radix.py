"""A least-significant-digit radix sort of the rows of a 2-D view, for rows
longer than a tile of ``kernels/sort``.

Each item becomes an unsigned key whose order is the items' order
(``key_of``: floats' sign bit flipped, or all their bits when negative; signed
integers' sign bit flipped; NaN above infinity and -0.0 as 0.0; every bit
inverted when descending), and the (M, N) items of all rows are sorted
together, 8 bits a pass from the lowest, carrying each item's flat position
``r * N + j`` (an int32, or int64 from 2^31 items). Then passes over the bits of the row ``r``
(recovered from the position) bring each row's items back together. Every pass
is stable, so the whole sort is (equal keys keep their order), and its result
is, per row, the int64 positions ``j`` that sort it.

A pass is three launches over tiles of ``lanes * items`` items:
``count_kernel`` counts each tile's digits into a digit-major array (all
tiles' counts of digit 0, then of digit 1, ...), whose running sum
(``kernels/scan``) gives every (digit, tile) its end in the output; then
``scatter_kernel`` ranks the tile's items by digit in shared memory, a round
of ``lanes`` neighbouring items at a time (``peers``: the lanes of a warp with
the same digit, by ``match_any_sync`` on the GPU), and writes them out side by
side in digit order. The launches depend only on the shape, so a sort is
captured into graphs like any op.

This module must not import the rest of tensorplay: the GPU compile check
(``tests/helpers/gpu_compile.py``) loads it on its own.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ._target import SMALL_BLOCKS, WARP_SHUFFLES, device_function, resident
from .scan import lanes_scan, warp_sync

__all__ = ["BLOCK", "RADIX", "bits_type", "count_kernel", "items_for", "key_of", "scatter_kernel"]

BLOCK = 16 if SMALL_BLOCKS else 256  # threads a block (the simulator runs a Python thread per lane)
RADIX = 256  # the values of a digit (8 bits)
WARP = min(32, BLOCK)  # lanes a warp (the simulator's block is one warp of 16)
WARPS = BLOCK // WARP
SCATTER_RESIDENT = 2  # blocks of scatter_kernel a multiprocessor holds at once (registers: 128 a thread)
i64 = np.int64
u32 = np.uint32

_BITS = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}
_INF = {"float16": 0x7C00, "bfloat16": 0x7F80, "float32": 0x7F800000, "float64": 0x7FF0000000000000}


def bits_type(itemsize: int) -> str:
    """The unsigned type whose bits the kernels read items of ``itemsize`` bytes as."""
    return _BITS[itemsize]


def _key_type(itemsize: int):
    return np.uint64 if itemsize == 8 else np.uint32


def items_for(itemsize: int, positions: str) -> int:
    """Items a lane ranks a tile: the tile's keys and ``positions`` (int32, or
    int64 for 2^31 items or more) fit in shared memory."""
    if SMALL_BLOCKS:  # long tiles: few digit counts to scan, few Python threads
        return 32
    return 8 if itemsize == 8 or positions == "int64" else 16


@functools.cache
def key_of(source: str, itemsize: int, descending: bool):
    """``key(bits)``: the sort key of an item of ``source`` given as its bits."""
    key_t = _key_type(itemsize)
    width = 8 * itemsize
    sign = key_t(1 << (width - 1))
    full = key_t((1 << width) - 1)
    magnitude = key_t((1 << (width - 1)) - 1)
    flip = full if descending else key_t(0)
    if source in _INF:
        inf = key_t(_INF[source])

        @device_function
        def key(bits):
            u = key_t(bits)
            if (u & magnitude) > inf:  # NaN, either sign: above +inf
                u = magnitude
            elif u == sign:  # -0.0 sorts as 0.0
                u = key_t(0)
            if u & sign:
                u = u ^ full
            else:
                u = u | sign
            return u ^ flip

    elif source.startswith("int"):

        @device_function
        def key(bits):
            return (key_t(bits) ^ sign) ^ flip

    else:  # unsigned integers and bools

        @device_function
        def key(bits):
            return key_t(bits) ^ flip

    return key


@functools.cache
def _digit_of(source: str, itemsize: int, descending: bool, first: bool, by_row: bool):
    """``digit(x, keys, ids, p, n, shift)``: item ``p``'s digit at ``shift``
    (``RADIX`` past the last item), from the source (``first``), its key, or
    its row (``by_row``)."""
    key_t = _key_type(itemsize)
    key = key_of(source, itemsize, descending)
    mask = key_t(RADIX - 1)

    @device_function
    def digit(x, keys, ids, p, n, shift):
        q = min(p, x.size - 1)  # read clamped, chosen after: no branch between an unrolled loop's loads
        if by_row:
            d = i64((ids[q] // n) >> shift) & (RADIX - 1)
        else:
            k = key(x[q]) if first else keys[q]
            d = i64((k >> key_t(shift)) & mask)
        return d if p < x.size else i64(RADIX)

    return digit


@functools.cache
def _peers(source: str, itemsize: int, descending: bool, first: bool, by_row: bool):
    """``peers(d, x, keys, ids, p, n, shift, warp_lane)``: the lanes of this warp
    whose item's digit is ``d`` (this lane's, of item ``p``), as a bit mask; the
    warp's lanes hold neighbouring items."""
    if WARP_SHUFFLES:

        @device_function
        def peers(d, x, keys, ids, p, n, shift, warp_lane):
            return u32(cuda.match_any_sync(0xFFFFFFFF, np.int32(d)))  # 32-bit votes: faster than 64

        return peers
    digit = _digit_of(source, itemsize, descending, first, by_row)

    @device_function
    def peers(d, x, keys, ids, p, n, shift, warp_lane):
        """The simulator has no warp votes: each lane reads its neighbours' items."""
        found = u32(0)
        for j in range(WARP):
            if digit(x, keys, ids, p - warp_lane + j, n, shift) == d:
                found |= u32(1) << u32(j)
        return found

    return peers


@functools.cache
def count_kernel(source: str, itemsize: int, descending: bool, first: bool, by_row: bool, positions: str):
    """``count(x, keys, ids, counts, n, shift)``: ``counts[d * tiles + c]`` the
    items of tile c whose digit at ``shift`` is d. The items are those of ``x``
    (the M * N items' bits, flat, rows of ``n``) when ``first``, else
    ``keys``; their rows (``ids // n``) when ``by_row``."""
    digit = _digit_of(source, itemsize, descending, first, by_row)
    items = items_for(itemsize, positions)

    def count(x, keys, ids, counts, n, shift):
        seen = cuda.shared.array(RADIX, np.int32)
        lane = i64(cuda.threadIdx.x)
        lanes = i64(cuda.blockDim.x)
        size = lanes * items
        tiles = i64(counts.size) // RADIX
        c = i64(cuda.blockIdx.x)
        while c < tiles:  # the same trip count for every thread of the block
            for d in range(lane, RADIX, lanes):
                seen[d] = 0
            cuda.syncthreads()
            digits = cuda.local.array(items, np.int64)
            for i in range(items):  # the loads first, all in flight at once
                digits[i] = digit(x, keys, ids, c * size + i * lanes + lane, n, shift)
            for i in range(items):
                if digits[i] < RADIX:
                    cuda.atomic.add(seen, digits[i], 1)
            cuda.syncthreads()
            for d in range(lane, RADIX, lanes):
                counts[d * tiles + c] = seen[d]
            cuda.syncthreads()
            c += cuda.gridDim.x

    count.__qualname__ = f"radix.count_{source}{'_down' if descending else ''}{'_first' if first else ''}"
    kernel = cuda.jit(count)
    kernel.tp_recipe = ("radix", "count_kernel", (source, itemsize, descending, first, by_row, positions))
    return kernel


@functools.cache
def scatter_kernel(source: str, itemsize: int, descending: bool, first: bool, by_row: bool, last: bool, positions: str):
    """``scatter(x, keys, ids, counts, ends, keys_out, ids_out, index, values, n, shift)``:
    the items of each tile (as ``count_kernel`` reads them) in the order of
    their digit at ``shift``, stably: item s of digit d goes to ``ends[d * tiles
    + c] - counts[d * tiles + c] + s``. Each pass writes the keys (not by row,
    nor when ``keys_out`` is empty) and the positions; the ``last`` writes,
    instead, ``index``: each position within its row (int64), and, unless
    empty, ``values``: the items' bits in sorted order. Positions are of type
    ``positions``.

    Warp w ranks the w-th run of ``WARP * items`` items of the tile, ``WARP``
    neighbouring items a round, counting its digits as it goes (no block-wide
    barrier between rounds); the warps' counts of each digit, scanned, then
    place every item in the tile's digit order in shared memory."""
    key_t = _key_type(itemsize)
    key = key_of(source, itemsize, descending)
    peers = _peers(source, itemsize, descending, first, by_row)
    pos_t = np.dtype(positions).type
    items = items_for(itemsize, positions)

    @device_function
    def digit(k, pid, width, shift):
        """An item's digit at ``shift``: of its key, or of its row (position ``pid``, rows of ``width``)."""
        if by_row:
            return i64((pid // width) >> shift) & (RADIX - 1)
        return i64((k >> key_t(shift)) & key_t(RADIX - 1))

    tile_items = BLOCK * items
    exclusive = lanes_scan("sum", "int64")
    per = max(1, RADIX // BLOCK)  # digits a lane starts

    def scatter(x, keys, ids, counts, ends, keys_out, ids_out, index, values, n, shift):
        tile_keys = cuda.shared.array(tile_items, key_t)
        tile_ids = cuda.shared.array(tile_items, pos_t)
        start = cuda.shared.array(RADIX, np.int64)  # where digit d's items of this tile go
        local = cuda.shared.array(RADIX, np.int32)  # where they start in the tile's order
        by_warp = cuda.shared.array((WARPS, RADIX), np.int32)  # each warp's count of each digit, then their scan
        my_keys = cuda.local.array(items, key_t)
        my_ids = cuda.local.array(items, pos_t)
        my_digits = cuda.local.array(items, np.int32)
        my_ranks = cuda.local.array(items, np.int32)
        gathered = cuda.local.array(items, x.dtype)
        width = pos_t(n)  # the row length, in the positions' type
        lane = i64(cuda.threadIdx.x)
        lanes = i64(cuda.blockDim.x)
        warp = lane // WARP
        warp_lane = lane % WARP
        below = (u32(1) << u32(warp_lane)) - u32(1)
        size = lanes * items
        total = i64(x.size)
        tiles = i64(counts.size) // RADIX
        c = i64(cuda.blockIdx.x)
        while c < tiles:  # the same trip count for every thread of the block
            run = i64(0)  # this lane's digits' counts, scanned across the block into where they start
            for k in range(per):
                run += counts[(lane * per + k) * tiles + c]
            _, before = exclusive(lane, lanes, run, i64(0))
            for k in range(per):
                d = lane * per + k
                here = counts[d * tiles + c]
                start[d] = ends[d * tiles + c] - here
                local[d] = before
                before += here
                for w in range(WARPS):
                    by_warp[w, d] = 0
            cuda.syncthreads()
            for i in range(items):  # this warp's run of the tile, loaded first: all the loads in flight at once
                p = c * size + (warp * items + i) * WARP + warp_lane
                q = min(p, total - 1)  # clamped: past the end, an item of its own digit (below) that goes nowhere
                if first:
                    my_keys[i] = key(x[q])
                    my_ids[i] = pos_t(q)
                else:
                    if not by_row:
                        my_keys[i] = keys[q]
                    my_ids[i] = ids[q]
            for i in range(items):  # then ranked stably, a round of neighbouring items at a time
                p = c * size + (warp * items + i) * WARP + warp_lane
                d = i64(RADIX)  # past the last item: a digit of its own, placed nowhere
                if p < total:
                    d = digit(my_keys[i], my_ids[i], width, shift)
                same = peers(d, x, keys, ids, p, n, shift, warp_lane)
                seen = by_warp[warp, d] if d < RADIX else 0
                my_digits[i] = d
                my_ranks[i] = seen + cuda.popc(same & below)
                warp_sync()
                if d < RADIX and (same & below) == 0:  # the first lane of its digit counts the round's
                    by_warp[warp, d] = seen + cuda.popc(same)
                warp_sync()
            cuda.syncthreads()
            for k in range(per):  # each digit's count per warp, scanned over the warps
                d = lane * per + k
                run = local[d]
                for w in range(WARPS):
                    here = by_warp[w, d]
                    by_warp[w, d] = run
                    run += here
            cuda.syncthreads()
            for i in range(items):
                d = my_digits[i]
                if d < RADIX:
                    q = by_warp[warp, d] + my_ranks[i]
                    tile_keys[q] = my_keys[i]
                    tile_ids[q] = my_ids[i]
            cuda.syncthreads()
            held = min(size, total - c * size)
            if last and values.size:  # the sorted items' own bits, gathered first: all those loads in flight at once
                for i in range(items):
                    gathered[i] = x[tile_ids[min(i * lanes + lane, held - 1)]]
            for i in range(items):  # out side by side, each digit's run to its place
                s = i * lanes + lane
                if s < held:
                    d = digit(tile_keys[s], tile_ids[s], width, shift)
                    dest = start[d] + s - local[d]
                    if last:
                        index[dest] = tile_ids[s] % width  # in the positions' type: 32-bit division when it can
                        if values.size:
                            values[dest] = gathered[i]
                    else:
                        ids_out[dest] = tile_ids[s]
                        if not by_row and keys_out.size:
                            keys_out[dest] = tile_keys[s]
            cuda.syncthreads()
            c += cuda.gridDim.x

    scatter.__qualname__ = f"radix.scatter_{source}{'_down' if descending else ''}{'_first' if first else ''}"
    kernel = resident(SCATTER_RESIDENT, BLOCK)(scatter)
    kernel.tp_recipe = ("radix", "scatter_kernel", (source, itemsize, descending, first, by_row, last, positions))
    return kernel
