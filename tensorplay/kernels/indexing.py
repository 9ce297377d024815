"""Indexing kernels: elements read or written along one dimension through an
index, and the stream compaction behind boolean masks.

The tensor layer (``tensorplay/_indexing.py``) brings every indexing op to one
of two forms over ``x`` seen as a 3-D ``(outer, n, inner)`` array (a view of any
strides, negative ones too):

- an index per middle position (``x[idx]``, ``take``, ``index_select``,
  ``index_add``, ``x[idx] = v``): ``out[o, j, i] = x[o, index[j], i]``
  (``take``) and its writes (``claim`` and ``put``, ``put_add``);
- an index per element (``gather``, ``take_along_axis``, ``scatter``):
  ``out[o, j, i] = x[o, index[o, j, i], i]`` (``take_along``) and its writes
  (``put_along``, ``put_along_add``).

A kernel cannot raise, so the index data is made safe where it is read: a
negative index counts from the end, then a read clamps to ``[0, n)`` and a
write skips an index outside ``[-n, n)``. No kernel touches memory outside its
arrays, whatever the indices hold. Repeated indices give NumPy's results: the
last write wins (``claim`` finds, for each target, the last position naming
it; ``put_along`` walks each column in order), and accumulating writes add
every value (atomics).

Boolean masks go through a compaction in tiles, in one pass: ``compact``
(the positions of the True elements, in order, or their values) or
``ranks`` (each True element's place among them) ranks a tile's elements in
shared memory, learns where the tile's first one goes from the tiles before
it as they run (``kernels/lookback``), and writes them out side by side.
``count_true`` counts them first where the output's size depends on it.

This module must not import the rest of tensorplay: the GPU compile check
(``tests/helpers/gpu_compile.py``) loads it on its own.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from . import lookback
from ._target import device_function, resident
from .scan import lanes_scan

__all__ = [
    "CONSTANTS", "MASK_BLOCK", "MASK_ITEMS", "claim", "combine", "compact", "constants", "count_true", "put",
    "put_add", "put_along", "put_along_add", "put_ranked", "ranks", "take", "take_along",
]  # fmt: skip

i64 = np.int64
CONSTANTS = 16  # values a ``constants`` launch writes
MASK_BLOCK = 256  # the most threads the mask kernels run with (their shared memory)
MASK_ITEMS = 16  # flags a lane ranks on its own: neighbours, read as WORDS words
WORDS = MASK_ITEMS // 4
MASK_TILE = MASK_BLOCK * MASK_ITEMS  # the most flags a tile
MASK_RESIDENT = 4  # blocks of the compaction a multiprocessor holds at once (its registers: 64 a thread)


@device_function
def clamped(j, n):
    """Index ``j`` into a dimension of ``n >= 1``: from the end when negative,
    then clamped into ``[0, n)`` (a uint64 past int64's range is past the end)."""
    k = i64(j)
    if k < 0 and j > 0:
        k = i64(n)
    elif k < 0:
        k += n
    if k < 0:
        k = i64(0)
    elif k >= n:
        k = n - 1
    return k


@device_function
def checked(j, n):
    """Index ``j`` into a dimension of ``n``: from the end when negative; -1
    when outside ``[-n, n)`` (a uint64 past int64's range is)."""
    k = i64(j)
    if k < 0 and j > 0:
        k = i64(n)
    elif k < 0:
        k += n
    if k < 0 or k >= n:
        k = i64(-1)
    return k


# -- an index per middle position ----------------------------------------------------------------


@cuda.jit
def take(x, index, out):
    """``out[o, j, i] = x[o, clamped(index[j]), i]``."""
    n = i64(x.shape[1])
    m = i64(out.shape[1])
    inner = i64(out.shape[2])
    total = i64(out.shape[0]) * m * inner
    k = i64(cuda.grid(1))
    step = i64(cuda.gridsize(1))
    while k < total:
        i = k % inner
        row = k // inner
        j = row % m
        out[row // m, j, i] = x[row // m, clamped(index[j], n), i]
        k += step


@cuda.jit
def combine(flat, index, n, scale, size, first, clamp):
    """One more index array into flat positions along merged dimensions:
    ``flat[j] = flat[j] + k * scale`` (``flat[j]`` counted as 0 when ``first``)
    with ``k`` index ``j`` into a dimension of ``n``, clamped when ``clamp`` (a
    read); otherwise (a write) an index out of range makes ``flat[j] = size``,
    which every later array keeps and the writes skip."""
    j = i64(cuda.grid(1))
    step = i64(cuda.gridsize(1))
    while j < flat.size:
        before = i64(0) if first else i64(flat[j])
        k = clamped(index[j], n) if clamp else checked(index[j], n)
        if before >= size or k < 0:
            flat[j] = size
        else:
            flat[j] = before + k * scale
        j += step


@cuda.jit
def claim(index, n, last):
    """``last[t]``: the largest ``j`` whose index names target ``t`` (``last``
    holds -1 before), so that of repeated indices the last write wins."""
    j = i64(cuda.grid(1))
    step = i64(cuda.gridsize(1))
    while j < index.size:
        t = checked(index[j], n)
        if t >= 0:
            cuda.atomic.max(last, t, j)
        j += step


@cuda.jit
def put(x, index, values, last):
    """``x[o, t, i] = values[o, j, i]`` with ``t`` index ``j`` (skipped when out of
    range), for the ``j`` that ``claim`` found last for ``t``."""
    n = i64(x.shape[1])
    m = i64(values.shape[1])
    inner = i64(values.shape[2])
    total = i64(values.shape[0]) * m * inner
    k = i64(cuda.grid(1))
    step = i64(cuda.gridsize(1))
    while k < total:
        i = k % inner
        row = k // inner
        j = row % m
        t = checked(index[j], n)
        if t >= 0 and last[t] == j:
            x[row // m, t, i] = values[row // m, j, i]
        k += step


@cuda.jit
def put_add(x, index, values):
    """``x[o, t, i] += values[o, j, i]`` (atomically) with ``t`` index ``j``,
    skipped when out of range."""
    n = i64(x.shape[1])
    m = i64(values.shape[1])
    inner = i64(values.shape[2])
    total = i64(values.shape[0]) * m * inner
    k = i64(cuda.grid(1))
    step = i64(cuda.gridsize(1))
    while k < total:
        i = k % inner
        row = k // inner
        j = row % m
        t = checked(index[j], n)
        if t >= 0:
            cuda.atomic.add(x, (row // m, t, i), values[row // m, j, i])
        k += step


# -- an index per element ------------------------------------------------------------------------


@cuda.jit
def take_along(x, index, out):
    """``out[o, j, i] = x[o, clamped(index[o, j, i]), i]``."""
    n = i64(x.shape[1])
    m = i64(out.shape[1])
    inner = i64(out.shape[2])
    total = i64(out.shape[0]) * m * inner
    k = i64(cuda.grid(1))
    step = i64(cuda.gridsize(1))
    while k < total:
        i = k % inner
        row = k // inner
        j = row % m
        o = row // m
        out[o, j, i] = x[o, clamped(index[o, j, i], n), i]
        k += step


@cuda.jit
def put_along(x, index, values):
    """``x[o, t, i] = values[o, j, i]`` with ``t = index[o, j, i]`` (skipped when
    out of range): a thread per ``(o, i)`` walks ``j`` in order, so the last of
    repeated indices wins."""
    n = i64(x.shape[1])
    m = i64(values.shape[1])
    inner = i64(values.shape[2])
    total = i64(values.shape[0]) * inner
    k = i64(cuda.grid(1))
    step = i64(cuda.gridsize(1))
    while k < total:
        i = k % inner
        o = k // inner
        for j in range(m):
            t = checked(index[o, j, i], n)
            if t >= 0:
                x[o, t, i] = values[o, j, i]
        k += step


@cuda.jit
def put_along_add(x, index, values):
    """``x[o, t, i] += values[o, j, i]`` (atomically) with ``t = index[o, j, i]``,
    skipped when out of range."""
    n = i64(x.shape[1])
    m = i64(values.shape[1])
    inner = i64(values.shape[2])
    total = i64(values.shape[0]) * m * inner
    k = i64(cuda.grid(1))
    step = i64(cuda.gridsize(1))
    while k < total:
        i = k % inner
        row = k // inner
        j = row % m
        t = checked(index[row // m, j, i], n)
        if t >= 0:
            cuda.atomic.add(x, (row // m, t, i), values[row // m, j, i])
        k += step


# -- host indices inside a capture ---------------------------------------------------------------


@cuda.jit
def constants(out, start, c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15):
    """``out[start + j] = c<j>`` for the ``j < CONSTANTS`` inside ``out``: host
    indices written by kernels, whose parameters a captured graph keeps."""
    values = cuda.local.array(CONSTANTS, i64)
    values[0] = c0
    values[1] = c1
    values[2] = c2
    values[3] = c3
    values[4] = c4
    values[5] = c5
    values[6] = c6
    values[7] = c7
    values[8] = c8
    values[9] = c9
    values[10] = c10
    values[11] = c11
    values[12] = c12
    values[13] = c13
    values[14] = c14
    values[15] = c15
    j = i64(cuda.grid(1))
    if j < CONSTANTS and start + j < out.size:
        out[start + j] = values[j]


# -- boolean masks: stream compaction ------------------------------------------------------------


_rank = lanes_scan("sum", "int64")
_publish, _earlier = lookback.chain("sum", lookback.COUNT)


@device_function
def _flag(mask, p, n):
    """1 where ``mask[p]`` is True, 0 where it is False or ``p >= n``: read
    clamped into the mask and chosen after, so an unrolled loop of these has no
    branch between its loads, which go out together."""
    flag = mask[min(p, n - 1)]
    return np.uint32(1) if flag & (p < n) else np.uint32(0)


@device_function
def _lane_flags(mask, words, p, n, w):
    """``MASK_ITEMS`` flags of ``mask`` from ``p`` (a multiple of 4) into ``w``,
    four to a uint32 word (a byte each, 1 or 0; 0 past the end): read as words
    from ``words`` (``mask``'s memory as uint32, its whole words; empty where
    not aligned) where it holds them all, else a byte at a time."""
    k = p // 4
    if k + WORDS <= words.size:
        for j in range(WORDS):  # the loads first, all in flight at once
            w[j] = words[k + j]
        for j in range(WORDS):  # each byte 1 where any of its bits is set: a True stored as 2 or 255 (memory
            v = w[j]  # from outside, NumPy's views) is one True, as a bool load reads it
            v |= v >> np.uint32(4)
            v |= v >> np.uint32(2)
            w[j] = (v | v >> np.uint32(1)) & np.uint32(0x01010101)
    else:
        for j in range(WORDS):
            v = np.uint32(0)
            for b in range(4):
                v |= _flag(mask, p + 4 * j + b, n) << np.uint32(8 * b)
            w[j] = v


@cuda.jit
def count_true(mask, words, total):
    """``total[0] +=`` the True elements of ``mask`` (a contiguous 1-D bool
    array; ``words`` as for ``_lane_flags``), each block adding its count once."""
    lane = i64(cuda.threadIdx.x)
    lanes = i64(cuda.blockDim.x)
    size = lanes * MASK_ITEMS
    n = i64(mask.size)
    w = cuda.local.array(WORDS, np.uint32)
    found = i64(0)
    start = i64(cuda.blockIdx.x) * size
    while start < n:  # the same trip count for every thread of the block
        _lane_flags(mask, words, start + lane * MASK_ITEMS, n, w)
        for j in range(WORDS):
            found += cuda.popc(w[j])
        start += i64(cuda.gridDim.x) * size
    block_total, _ = _rank(lane, lanes, found, i64(0))
    if lane == lanes - 1:
        cuda.atomic.add(total, 0, np.uint64(block_total))


@device_function
def _tile_ranks(mask, words, status, lane, lanes, places, claimed, sums):
    """The next tile of ``mask`` in order (``claimed[0]``, for the whole block;
    past the last, nothing else is done) ranked: each lane reads its
    ``MASK_ITEMS`` neighbouring flags and counts them, the counts are scanned
    across the block, and ``places[r]`` gets the tile position of the tile's
    r-th True element. ``sums[0]`` is the tile's count, published for the
    tiles after it (``kernels/lookback``)."""
    n = i64(mask.size)
    if lane == 0:
        claimed[0] = lookback.claim(status)
    cuda.syncthreads()
    start = claimed[0] * lanes * MASK_ITEMS
    if start >= n:
        return
    w = cuda.local.array(WORDS, np.uint32)
    _lane_flags(mask, words, start + lane * MASK_ITEMS, n, w)
    run = i64(0)
    for j in range(WORDS):
        run += cuda.popc(w[j])
    total, r = _rank(lane, lanes, run, i64(0))
    if lane == lanes - 1:  # the tile's count out first: the tiles after it need it
        sums[0] = total
        first = claimed[0] == 0
        _publish(status, status, claimed[0], total, lookback.INCLUSIVE if first else lookback.AGGREGATE)
    for i in range(MASK_ITEMS):
        if (w[i // 4] >> np.uint32(8 * (i % 4))) & np.uint32(1):
            places[r] = lane * MASK_ITEMS + i
            r += 1
    cuda.syncthreads()


@device_function
def _tile_offset(status, lane, claimed, sums):
    """``sums[1]``: the True elements of the tiles before tile ``claimed[0]``,
    from the tiles themselves (its first warp walks back), its own running
    count published in turn; for the whole block."""
    tile = claimed[0]
    if tile > 0 and lane < 32:
        before = _earlier(status, status, tile, 0, lane)
        if lane == 0:
            sums[1] = before
            _publish(status, status, tile, before + sums[0], lookback.INCLUSIVE)
    elif lane == 0:
        sums[1] = 0
    cuda.syncthreads()


@resident(MASK_RESIDENT, MASK_BLOCK)
def compact(mask, words, status, values, out):
    """``out[r]``: the ``r``-th True element of ``mask``'s value in ``values``
    (``mask``'s size) or, ``values`` empty, its position (for ``r <
    out.size``), in one pass: ``words`` as for ``_lane_flags``, ``status`` (1 +
    tiles) uint64 zeros, the chained tiles' state (``kernels/lookback``)."""
    places = cuda.shared.array(MASK_TILE, np.int32)
    claimed = cuda.shared.array(1, np.int64)
    sums = cuda.shared.array(2, np.int64)
    lane = i64(cuda.threadIdx.x)
    lanes = i64(cuda.blockDim.x)
    size = lanes * MASK_ITEMS
    while True:  # the same trip count for every thread of the block
        _tile_ranks(mask, words, status, lane, lanes, places, claimed, sums)
        c = claimed[0]
        if c * size >= mask.size:
            break
        count = sums[0]
        held = cuda.local.array(MASK_ITEMS, out.dtype)
        for k in range(MASK_ITEMS):  # the tile's results read while the tiles before are added up
            j = k * lanes + lane
            place = i64(places[j])  # past the count: stale, so not used
            p = c * size + (place if j < count else i64(0))
            if values.size:
                held[k] = values[min(p, values.size - 1)]
            else:
                held[k] = p
        _tile_offset(status, lane, claimed, sums)
        first = sums[1]
        count = min(first + count, out.size) - first
        for k in range(MASK_ITEMS):  # then out side by side
            j = k * lanes + lane
            if j < count:
                out[first + j] = held[k]
        cuda.syncthreads()


@cuda.jit
def ranks(mask, words, status, out):
    """``out[k]``: how many True elements of ``mask`` come before element ``k``
    where it is True, -1 where it is False (``words`` and ``status`` as for
    ``compact``)."""
    places = cuda.shared.array(MASK_TILE, np.int32)
    claimed = cuda.shared.array(1, np.int64)
    sums = cuda.shared.array(2, np.int64)
    lane = i64(cuda.threadIdx.x)
    lanes = i64(cuda.blockDim.x)
    size = lanes * MASK_ITEMS
    n = i64(mask.size)
    while True:  # the same trip count for every thread of the block
        _tile_ranks(mask, words, status, lane, lanes, places, claimed, sums)
        c = claimed[0]
        if c * size >= n:
            break
        _tile_offset(status, lane, claimed, sums)
        for i in range(MASK_ITEMS):  # -1 side by side, then the ranks over them
            p = c * size + i * lanes + lane
            if p < n:
                out[p] = -1
        cuda.syncthreads()
        first = sums[1]
        for k in range(MASK_ITEMS):
            j = k * lanes + lane
            if j < sums[0]:
                out[c * size + places[j]] = first + j
        cuda.syncthreads()


@cuda.jit
def put_ranked(x, rank, values):
    """``x[o, k, i] = values[o, clamped(rank[k]), i]`` where ``rank[k] >= 0``: the
    masked elements take the values in order (the last value repeats when
    there are fewer values than True elements)."""
    n = i64(values.shape[1])
    m = i64(x.shape[1])
    inner = i64(x.shape[2])
    total = i64(x.shape[0]) * m * inner
    k = i64(cuda.grid(1))
    step = i64(cuda.gridsize(1))
    while k < total:
        i = k % inner
        row = k // inner
        j = row % m
        r = rank[j]
        if r >= 0:
            x[row // m, j, i] = values[row // m, clamped(r, n), i]
        k += step
