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

A sort begins with ``histogram_kernel``, which counts every pass's digits in
one read of the items; the running sum of each pass's counts (``kernels/scan``)
gives every digit its place in that pass's output. Then a pass is one launch
of ``scatter_kernel`` over tiles of ``lanes * items`` items, chained by
decoupled look-back (a chain per digit, as in Adinets and Merrill's onesweep
sort): it ranks the tile's items by digit in shared memory, a round of
``lanes`` neighbouring items at a time (``peers``: the lanes of a warp with the
same digit, by ``match_any_sync`` on the GPU), learns from the tiles before it
where its items of each digit go, and writes them out side by side in digit
order. The launches depend only on the shape, so a sort is captured into
graphs like any op.

This module must not import the rest of tensorplay: the GPU compile check
(``tests/helpers/gpu_compile.py``) loads it on its own.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from . import lookback
from ._target import SMALL_BLOCKS, WARP_SHUFFLES, device_function, resident
from .scan import lanes_scan, warp_sync

__all__ = ["BLOCK", "RADIX", "bits_type", "histogram_kernel", "items_for", "key_of", "scatter_kernel"]

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
    """``digit(x, carried, ids, p, n, shift)``: item ``p``'s digit at ``shift``
    (``RADIX`` past the last item), from its bits in the source (``first``)
    or as the passes carry them (``carried``), or from its row (``by_row``)."""
    key_t = _key_type(itemsize)
    key = key_of(source, itemsize, descending)
    mask = key_t(RADIX - 1)

    @device_function
    def digit(x, carried, ids, p, n, shift):
        q = min(p, x.size - 1)  # read clamped, chosen after: no branch between an unrolled loop's loads
        if by_row:
            d = i64((ids[q] // n) >> shift) & (RADIX - 1)
        else:
            k = key(x[q] if first else carried[q])
            d = i64((k >> key_t(shift)) & mask)
        return d if p < x.size else i64(RADIX)

    return digit


@functools.cache
def _peers(source: str, itemsize: int, descending: bool, first: bool, by_row: bool):
    """``peers(d, x, carried, ids, p, n, shift, warp_lane)``: the lanes of this warp
    whose item's digit is ``d`` (this lane's, of item ``p``), as a bit mask; the
    warp's lanes hold neighbouring items."""
    if WARP_SHUFFLES:

        @device_function
        def peers(d, x, carried, ids, p, n, shift, warp_lane):
            return u32(cuda.match_any_sync(0xFFFFFFFF, np.int32(d)))  # 32-bit votes: faster than 64

        return peers
    digit = _digit_of(source, itemsize, descending, first, by_row)

    @device_function
    def peers(d, x, carried, ids, p, n, shift, warp_lane):
        """The simulator has no warp votes: each lane reads its neighbours' items."""
        found = u32(0)
        for j in range(WARP):
            if digit(x, carried, ids, p - warp_lane + j, n, shift) == d:
                found |= u32(1) << u32(j)
        return found

    return peers


HISTOGRAM_WORDS = 8192  # the shared int32 counts a block of histogram_kernel keeps (32 KiB)


@functools.cache
def histogram_kernel(source: str, itemsize: int, descending: bool, row_passes: int, positions: str):
    """``histogram(x, hist, n)``: ``hist[j * RADIX + d]`` (int64 zeros) the
    items of ``x`` (the M * N items' bits, flat, rows of ``n``) whose digit is
    d in pass j: the key's byte j for the first ``itemsize`` passes, then
    byte j - itemsize of the item's row for ``row_passes`` more. Every pass's
    count, from one read of the items.

    A block keeps a copy of the counts per warp where they fit in
    ``HISTOGRAM_WORDS`` (fewer warps on one address: the top byte of most
    keys takes few values), adds its items up in shared memory, then adds
    its counts to ``hist``."""
    key = key_of(source, itemsize, descending)
    key_t = _key_type(itemsize)
    passes = itemsize + row_passes
    copies = max(1, min(WARPS, HISTOGRAM_WORDS // (passes * RADIX)))
    items = items_for(itemsize, positions)
    mask = key_t(RADIX - 1)
    words = copies * passes * RADIX

    def histogram(x, hist, n):
        seen = cuda.shared.array(words, np.int32)
        held = cuda.local.array(items, key_t)
        lane = i64(cuda.threadIdx.x)
        lanes = i64(cuda.blockDim.x)
        for i in range(lane, words, lanes):
            seen[i] = 0
        cuda.syncthreads()
        mine = ((lane // WARP) % copies) * passes * RADIX  # this warp's copy
        size = lanes * items
        total = i64(x.size)
        c = i64(cuda.blockIdx.x)
        while c * size < total:
            for i in range(items):  # the loads first, all in flight at once
                q = min(c * size + i * lanes + lane, total - 1)  # clamped: no branch between the loads
                held[i] = key(x[q])
            for i in range(items):
                p = c * size + i * lanes + lane
                if p < total:
                    for j in range(itemsize):
                        cuda.atomic.add(seen, mine + j * RADIX + i64((held[i] >> key_t(8 * j)) & mask), 1)
                    row = p // n
                    for j in range(row_passes):
                        cuda.atomic.add(seen, mine + (itemsize + j) * RADIX + ((row >> (8 * j)) & (RADIX - 1)), 1)
            c += cuda.gridDim.x
        cuda.syncthreads()
        for i in range(lane, passes * RADIX, lanes):
            here = i64(0)
            for k in range(copies):
                here += seen[k * passes * RADIX + i]
            if here:
                cuda.atomic.add(hist, i, here)

    histogram.__qualname__ = f"radix.histogram_{source}{'_down' if descending else ''}"
    kernel = cuda.jit(histogram)
    kernel.tp_recipe = ("radix", "histogram_kernel", (source, itemsize, descending, row_passes, positions))
    return kernel


@functools.cache
def scatter_kernel(source: str, itemsize: int, descending: bool, first: bool, by_row: bool, last: bool, positions: str):
    """``scatter(x, carried, ids, status, hist, ends, carried_out, ids_out, index, values, n, shift)``:
    the items (as ``histogram_kernel`` reads them) in the order of their
    digit at ``shift``, stably, a tile of ``BLOCK * items`` at a time: item s
    of digit d of tile c goes after the items of the digits below d (``ends
    - hist``: this pass's row of the histogram and its running sum), and
    after the items of digit d of the tiles before c. The items travel as
    their own bits (``carried``: a digit is taken from ``key_of`` them as it is
    needed) with their positions: each pass writes the positions, and the
    bits unless ``carried_out`` is empty (the passes by row need them only to
    bring the values along); the ``last`` writes, instead, ``index``: each
    position within its row (int64), and, unless empty, ``values``: the
    items' bits in sorted order, as they came (no gather). Positions are of
    type ``positions``.

    Blocks take tiles in order from a ticket (``status``: ``1 + tiles *
    RADIX`` uint64 zeros, ``kernels/lookback``). Warp w ranks the w-th run of
    ``WARP * items`` items of the tile, ``WARP`` neighbouring items a round,
    counting its digits as it goes (no block-wide barrier between rounds).
    The tile then publishes its count of each digit, and each lane, for its
    digit, walks back over the tiles before it to the nearest one whose
    running count is out (decoupled look-back, a chain per digit), and
    publishes its own. The warps' counts of each digit, scanned, place every
    item in the tile's digit order in shared memory, and the tile goes out
    side by side."""
    key_t = _key_type(itemsize)
    key = key_of(source, itemsize, descending)
    peers = _peers(source, itemsize, descending, first, by_row)
    publish, read = lookback.messages(lookback.COUNT)
    pos_t = np.dtype(positions).type
    items = items_for(itemsize, positions)

    @device_function
    def digit(k, pid, width, shift):
        """An item's digit at ``shift``: of the key of its bits ``k``, or of
        its row (position ``pid``, rows of ``width``)."""
        if by_row:
            return i64((pid // width) >> shift) & (RADIX - 1)
        return i64((key(k) >> key_t(shift)) & key_t(RADIX - 1))

    @device_function
    def before_tile(status, c, d):
        """The items of digit ``d`` in the tiles before tile ``c``: their counts
        added up back to the nearest tile whose running count is out."""
        before = i64(0)
        t = c - 1
        while t >= 0:
            flag, count = read(status, status, t * RADIX + d)
            before += count
            t = i64(-1) if flag == lookback.INCLUSIVE else t - 1
        return before

    tile_items = BLOCK * items
    exclusive = lanes_scan("sum", "int64")
    per = max(1, RADIX // BLOCK)  # digits a lane starts

    def scatter(x, carried, ids, status, hist, ends, carried_out, ids_out, index, values, n, shift):
        tile_bits = cuda.shared.array(tile_items, key_t)
        tile_ids = cuda.shared.array(tile_items, pos_t)
        start = cuda.shared.array(RADIX, np.int64)  # where digit d's items of this tile go
        local = cuda.shared.array(RADIX, np.int32)  # where they start in the tile's order
        by_warp = cuda.shared.array((WARPS, RADIX), np.int32)  # each warp's count of each digit, then their scan
        claimed = cuda.shared.array(1, np.int64)
        my_bits = cuda.local.array(items, key_t)
        my_ids = cuda.local.array(items, pos_t)
        my_digits = cuda.local.array(items, np.int32)
        my_ranks = cuda.local.array(items, np.int32)
        width = pos_t(n)  # the row length, in the positions' type
        lane = i64(cuda.threadIdx.x)
        lanes = i64(cuda.blockDim.x)
        warp = lane // WARP
        warp_lane = lane % WARP
        below = (u32(1) << u32(warp_lane)) - u32(1)
        size = lanes * items
        total = i64(x.size)
        tiles = (total + size - 1) // size
        while True:  # the same trip count for every thread of the block
            if lane == 0:
                claimed[0] = lookback.claim(status)
            for k in range(per):
                for w in range(WARPS):
                    by_warp[w, lane * per + k] = 0
            cuda.syncthreads()
            c = claimed[0]
            if c >= tiles:
                break
            for i in range(items):  # this warp's run of the tile, loaded first: all the loads in flight at once
                p = c * size + (warp * items + i) * WARP + warp_lane
                q = min(p, total - 1)  # clamped: past the end, an item of its own digit (below) that goes nowhere
                if first:
                    my_bits[i] = x[q]
                    my_ids[i] = pos_t(q)
                else:
                    if carried.size:  # carried (the passes by row carry them only when the values are wanted)
                        my_bits[i] = carried[q]
                    my_ids[i] = ids[q]
            for i in range(items):  # then ranked stably, a round of neighbouring items at a time
                p = c * size + (warp * items + i) * WARP + warp_lane
                d = i64(RADIX)  # past the last item: a digit of its own, placed nowhere
                if p < total:
                    d = digit(my_bits[i], my_ids[i], width, shift)
                same = peers(d, x, carried, ids, p, n, shift, warp_lane)
                seen = by_warp[warp, d] if d < RADIX else 0
                my_digits[i] = d
                my_ranks[i] = seen + cuda.popc(same & below)
                warp_sync()
                if d < RADIX and (same & below) == 0:  # the first lane of its digit counts the round's
                    by_warp[warp, d] = seen + cuda.popc(same)
                warp_sync()
            cuda.syncthreads()
            run = i64(0)  # this lane's digits' counts in the tile: out to the tiles after it at once
            for k in range(per):
                d = lane * per + k
                here = i64(0)
                for w in range(WARPS):
                    here += by_warp[w, d]
                publish(status, status, c * RADIX + d, here, lookback.INCLUSIVE if c == 0 else lookback.AGGREGATE)
                run += here
            _, first_here = exclusive(lane, lanes, run, i64(0))  # where this lane's first digit starts in the tile
            for k in range(per):  # each digit's count per warp, scanned over the warps; the tiles before added up
                d = lane * per + k
                local[d] = first_here
                for w in range(WARPS):
                    here = by_warp[w, d]
                    by_warp[w, d] = first_here
                    first_here += here
                before = before_tile(status, c, d)
                if c > 0:  # the running count up to this tile, and with it
                    publish(status, status, c * RADIX + d, before + (first_here - local[d]), lookback.INCLUSIVE)
                start[d] = ends[d] - hist[d] + before
            cuda.syncthreads()
            for i in range(items):
                d = my_digits[i]
                if d < RADIX:
                    q = by_warp[warp, d] + my_ranks[i]
                    tile_bits[q] = my_bits[i]
                    tile_ids[q] = my_ids[i]
            cuda.syncthreads()
            held = min(size, total - c * size)
            for i in range(items):  # out side by side, each digit's run to its place
                s = i * lanes + lane
                if s < held:
                    d = digit(tile_bits[s], tile_ids[s], width, shift)
                    dest = start[d] + s - local[d]
                    if last:
                        index[dest] = tile_ids[s] % width  # in the positions' type: 32-bit division when it can
                        if values.size:
                            values[dest] = tile_bits[s]
                    else:
                        ids_out[dest] = tile_ids[s]
                        if carried_out.size:
                            carried_out[dest] = tile_bits[s]
            cuda.syncthreads()

    scatter.__qualname__ = f"radix.scatter_{source}{'_down' if descending else ''}{'_first' if first else ''}"
    kernel = resident(SCATTER_RESIDENT, BLOCK)(scatter)
    kernel.tp_recipe = ("radix", "scatter_kernel", (source, itemsize, descending, first, by_row, last, positions))
    return kernel
