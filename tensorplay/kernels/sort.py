"""Sorting the rows of a 2-D view (M rows of N items) on the device, rows of
at most a tile; longer ones go to the radix sort (``kernels/radix``).

A row is a tile of ``tile`` items (a power of two, at most ``TILE``).
``tiles_kernel`` sorts each tile in shared memory with a bitonic network, a
block row per tile (short tiles several to a block), each lane taking its
share of the compare-exchanges of a step: one launch, a fixed size, so a sort is
captured into graphs like any op.

The kernel sorts (key, index) pairs: keys are the items converted to one of
four key types (float32 for the 16-bit floats, bfloat16 arriving as its bits),
indices their positions in the row. The sort is stable: the bitonic network
breaks ties by index. NaNs go last (first when descending: NaN counts as the
largest value, as in NumPy's and PyTorch's sorts). ``taken_rows`` then
gathers the values by index and ``placed_rows`` scatters a gradient back.

This module must not import the rest of tensorplay: the GPU compile check
(``tests/helpers/gpu_compile.py``) loads it on its own.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from . import bfloat16 as bf16
from ._target import device_function

__all__ = ["TILE", "before", "key_type", "loader", "placed_rows", "taken_rows", "tiles_kernel"]

TILE = 1024  # the longest tile a block sorts in shared memory (16 KiB of float64 keys and int64 indices)
i64 = np.int64


def key_type(dtype_name: str) -> str:
    """The type items of ``dtype_name`` are compared as."""
    if dtype_name in ("float16", "bfloat16", "float32"):
        return "float32"
    if dtype_name in ("float64", "uint64"):
        return dtype_name
    return "int64"  # bool and the other integers


@functools.cache
def loader(dtype_name: str):
    """A device function reading an item of ``dtype_name`` as its key type."""
    if dtype_name == "bfloat16":
        return bf16.decode
    key_t = np.dtype(key_type(dtype_name)).type
    return device_function(lambda v: key_t(v))


@functools.cache
def before(descending: bool):
    """``before(a, b)``: whether ``a`` goes strictly before ``b`` (NaN as the largest)."""
    if descending:
        return device_function(lambda a, b: a > b or (a != a and b == b))
    return device_function(lambda a, b: a < b or (b != b and a == a))


@functools.cache
def tiles_kernel(source: str, descending: bool, tile: int):
    """``tiles(x, keys, index)``: sorts each row of ``x`` (an (M, N) array of
    ``source`` items, any layout, N at most ``tile``) into ``keys`` (M, N, of
    ``key_type(source)``) and ``index`` (M, N, int64 positions in the row).
    Launch it with blocks of ``(lanes, rows)`` threads, ``lanes`` at most
    ``tile // 2`` (each lane takes every ``lanes``-th compare-exchange of a
    step) and ``rows * tile`` at most ``TILE``: a block sorts several short
    rows side by side."""
    key_t = np.dtype(key_type(source)).type
    load = loader(source)
    goes_before = before(descending)
    half = tile // 2

    @device_function
    def precedes(ka, ia, kb, ib, n):
        """(key, index) a before b: positions past the row's end after all, ties by index."""
        if ia >= n:
            return False
        if ib >= n:
            return True
        if goes_before(ka, kb):
            return True
        if goes_before(kb, ka):
            return False
        return ia < ib

    def tiles(x, keys, index):
        sk = cuda.shared.array(TILE, key_t)
        si = cuda.shared.array(TILE, i64)
        t = i64(cuda.threadIdx.x)
        lanes = i64(cuda.blockDim.x)
        mine = i64(cuda.threadIdx.y) * tile  # this block row's tile in the shared arrays
        m = i64(x.shape[0])
        first = i64(cuda.blockIdx.x) * cuda.blockDim.y
        while first < m:  # the same trip count for every thread of the block
            row = first + cuda.threadIdx.y
            n = i64(x.shape[1]) if row < m else i64(0)  # no row for this block row: its tile all past the end
            for p in range(t, tile, lanes):
                si[mine + p] = p
                if p < n:
                    sk[mine + p] = load(x[row, p])
            cuda.syncthreads()
            k = 2
            while k <= tile:
                j = k // 2
                while j > 0:
                    for e in range(t, half, lanes):  # this lane's compare-exchanges of the step
                        i = mine + 2 * j * (e // j) + e % j
                        other = i + j
                        if ((i - mine) & k) == 0:  # this part of the network sorts upwards
                            swap = precedes(sk[other], si[other], sk[i], si[i], n)
                        else:
                            swap = precedes(sk[i], si[i], sk[other], si[other], n)
                        if swap:
                            ka, ia = sk[i], si[i]
                            sk[i], si[i] = sk[other], si[other]
                            sk[other], si[other] = ka, ia
                    cuda.syncthreads()
                    j //= 2
                k *= 2
            for p in range(t, tile, lanes):
                if p < n:
                    keys[row, p] = sk[mine + p]
                    index[row, p] = si[mine + p]
            cuda.syncthreads()
            first += i64(cuda.gridDim.x) * cuda.blockDim.y

    tiles.__qualname__ = f"sort.tiles_{source}_{'down' if descending else 'up'}_{tile}"
    kernel = cuda.jit(tiles)
    kernel.tp_recipe = ("sort", "tiles_kernel", (source, descending, tile))  # how to build it again elsewhere
    return kernel


@cuda.jit
def taken_rows(x, index, out):
    """``out[r, j] = x[r, index[r, j]]`` (``index`` int64 positions along ``x``'s rows;
    one out of range, as a user's ``sorter`` may hold, is clamped into it)."""
    k = i64(out.shape[1])
    last = i64(x.shape[1]) - 1
    total = i64(out.shape[0]) * k
    e = i64(cuda.grid(1))
    while e < total:
        r = e // k
        j = e % k
        out[r, j] = x[r, min(max(index[r, j], i64(0)), last)]
        e += cuda.gridsize(1)


@cuda.jit
def placed_rows(x, index, out):
    """``out[r, index[r, j]] = x[r, j]`` (distinct positions within a row)."""
    k = i64(x.shape[1])
    total = i64(x.shape[0]) * k
    e = i64(cuda.grid(1))
    while e < total:
        r = e // k
        j = e % k
        out[r, index[r, j]] = x[r, j]
        e += cuda.gridsize(1)
