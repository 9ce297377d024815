"""Searching sorted rows, and writing out the items a scan picked.

``search_kernel``: a thread per value, a binary search of its row of the
sorted sequence, comparing as ``sort.before`` orders (NaN last), so that the
places agree with ``sort``'s.

The ops whose output size depends on the data (``nonzero``, ``unique_*``) are
a scan and a scatter: an inclusive running count of the items kept gives each
its place in the output, and ``coordinates`` / ``groups`` write those with a
place below the output's fixed size (the tensor layer fills the rest first).
Nothing here reads a count on the host.

This module must not import the rest of tensorplay: the GPU compile check
(``tests/helpers/gpu_compile.py``) loads it on its own.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from .sort import before, loader

__all__ = ["coordinates", "groups", "search_kernel"]

i64 = np.int64


@functools.cache
def search_kernel(sequence: str, values: str):
    """``search(seq, v, out, right)``: ``out[r, j]`` the number of items of row
    ``r`` of ``seq`` (row 0 when ``seq`` has one row) that go strictly before
    ``v[r, j]`` (``right=False``), or that ``v[r, j]`` does not go before
    (``right=True``). ``seq`` holds ``sequence`` items, ``v`` ``values`` items."""
    goes_before = before(False)
    load_seq, load_value = loader(sequence), loader(values)

    def search(seq, v, out, right):
        n = i64(seq.shape[1])
        k = i64(v.shape[1])
        total = i64(v.shape[0]) * k
        shared = seq.shape[0] == 1
        e = i64(cuda.grid(1))
        while e < total:
            r = e // k
            j = e % k
            s = 0 if shared else r
            value = load_value(v[r, j])
            lo, hi = i64(0), n
            while lo < hi:
                c = (lo + hi) // 2
                item = load_seq(seq[s, c])
                if (not goes_before(value, item)) if right else goes_before(item, value):
                    lo = c + 1
                else:
                    hi = c
            out[r, j] = lo
            e += cuda.gridsize(1)

    search.__qualname__ = f"search.sorted_{sequence}_{values}"
    kernel = cuda.jit(search)
    kernel.tp_recipe = ("search", "search_kernel", (sequence, values))  # how to build it again elsewhere
    return kernel


@cuda.jit
def coordinates(count, shaped, out):
    """For each flat position i (in C order) of an array of ``shaped.shape``
    where the running count ``count`` (int64, inclusive, flat) steps up, write
    i's coordinates into ``out[:, count[i] - 1]`` (``out``: (ndim, size)) when
    that place is below ``size``."""
    total = i64(count.shape[0])
    size = i64(out.shape[1])
    e = i64(cuda.grid(1))
    while e < total:
        place = count[e] - 1
        if place < size and (e == 0 and place == 0 or e > 0 and count[e - 1] == place):
            rest = e
            d = len(shaped.shape) - 1
            while d >= 0:
                out[d, place] = rest % shaped.shape[d]
                rest //= shaped.shape[d]
                d -= 1
        e += cuda.gridsize(1)


@cuda.jit
def groups(group, order, values, out_values, out_index, starts, ends, inverse):
    """For sorted ``values`` (flat) with ``group`` the running count of runs
    of equal values (int64, inclusive) and ``order`` their positions before
    sorting: each run g below the outputs' size writes its value, its first
    position, and where it starts and ends in ``values``; every item writes
    its run into ``inverse`` at its position before sorting."""
    total = i64(group.shape[0])
    size = i64(out_values.shape[0])
    e = i64(cuda.grid(1))
    while e < total:
        g = group[e] - 1
        inverse[order[e]] = g
        if g < size:
            if e == 0 or group[e - 1] != group[e]:
                out_values[g] = values[e]
                out_index[g] = order[e]
                starts[g] = e
            if e == total - 1 or group[e + 1] != group[e]:
                ends[g] = e + 1
        e += cuda.gridsize(1)
