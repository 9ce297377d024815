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

Boolean masks go through a compaction in three launches: ``count_chunks``
counts the True elements of each chunk, ``scan_chunks`` (one block) turns the
counts into each chunk's first output position, and ``compact`` (the
positions of the True elements, in order) or ``ranks`` (each True element's
place among them) writes the result.

This module must not import the rest of tensorplay: the GPU compile check
(``tests/helpers/gpu_compile.py``) loads it on its own.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ._target import device_function

__all__ = [
    "CONSTANTS", "SCAN_BLOCK", "claim", "combine", "compact", "constants", "count_chunks", "put", "put_add",
    "put_along", "put_along_add", "put_ranked", "ranks", "scan_chunks", "take", "take_along",
]  # fmt: skip

i64 = np.int64
CONSTANTS = 16  # values a ``constants`` launch writes
SCAN_BLOCK = 256  # the most threads ``scan_chunks`` runs with (its shared memory)


@device_function
def clamped(j, n):
    """Index ``j`` into a dimension of ``n >= 1``: from the end when negative,
    then clamped into ``[0, n)``."""
    k = i64(j)
    if k < 0:
        k += n
    if k < 0:
        k = i64(0)
    elif k >= n:
        k = n - 1
    return k


@device_function
def checked(j, n):
    """Index ``j`` into a dimension of ``n``: from the end when negative; -1
    when outside ``[-n, n)``."""
    k = i64(j)
    if k < 0:
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


@cuda.jit
def count_chunks(mask, chunk, counts):
    """``counts[c]``: the True elements of ``mask[c * chunk:(c + 1) * chunk]``."""
    n = i64(mask.size)
    c = i64(cuda.grid(1))
    step = i64(cuda.gridsize(1))
    while c < counts.size:
        found = i64(0)
        for k in range(c * chunk, min(c * chunk + chunk, n)):
            if mask[k]:
                found += 1
        counts[c] = found
        c += step


@cuda.jit
def scan_chunks(counts, total):
    """``counts`` replaced by its exclusive prefix sums (each chunk's first
    output position) and ``total[0]`` their sum: one block, each thread a run
    of chunks, the runs' sums scanned in shared memory."""
    sums = cuda.shared.array(SCAN_BLOCK, i64)
    t = i64(cuda.threadIdx.x)
    threads = i64(cuda.blockDim.x)
    c = i64(counts.size)
    per = (c + threads - 1) // threads
    lo = min(t * per, c)
    hi = min(lo + per, c)
    run = i64(0)
    for k in range(lo, hi):
        run += counts[k]
    sums[t] = run
    cuda.syncthreads()
    if t == 0:
        run = i64(0)
        for k in range(threads):
            here = sums[k]
            sums[k] = run
            run += here
        total[0] = run
    cuda.syncthreads()
    run = sums[t]
    for k in range(lo, hi):
        here = counts[k]
        counts[k] = run
        run += here


@cuda.jit
def compact(mask, chunk, offsets, out):
    """``out[r]``: the position of the ``r``-th True element of ``mask`` (for
    ``r < out.size``); ``offsets`` from ``scan_chunks``."""
    n = i64(mask.size)
    c = i64(cuda.grid(1))
    step = i64(cuda.gridsize(1))
    while c < offsets.size:
        r = i64(offsets[c])
        for k in range(c * chunk, min(c * chunk + chunk, n)):
            if mask[k]:
                if r < out.size:
                    out[r] = k
                r += 1
        c += step


@cuda.jit
def ranks(mask, chunk, offsets, out):
    """``out[k]``: how many True elements of ``mask`` come before element ``k``
    where it is True, -1 where it is False."""
    n = i64(mask.size)
    c = i64(cuda.grid(1))
    step = i64(cuda.gridsize(1))
    while c < offsets.size:
        r = i64(offsets[c])
        for k in range(c * chunk, min(c * chunk + chunk, n)):
            if mask[k]:
                out[k] = r
                r += 1
            else:
                out[k] = -1
        c += step


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
