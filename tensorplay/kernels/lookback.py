"""Tiles chained in one pass: each tile of a row learns the running total of the
tiles before it from the tiles themselves, while they run (decoupled
look-back, as in Merrill and Garland's single-pass scan).

Blocks take tiles in order from a ticket (``claim``), so every tile before a
claimed one is being worked on by a block that is running, and waiting for it
ends. A tile publishes its own total as soon as it has it (``AGGREGATE``),
then its first warp walks back over the tiles before it, adding their
totals, until it meets one whose running total is out (``INCLUSIVE``), and
publishes its own running total in turn (``chain``). The state is a
``uint64`` array of zeros, ``status``: the ticket in word 0, tile ``t``'s word
in ``1 + t``. Where a tile's value fits in a word with its flag (float32
bits, a non-negative count) the word is the whole message, written and read
in one access (``kernels/_order``): nothing to fence. Wider values go to
``values[2 t]`` (its total) and ``values[2 t + 1]`` (its running total),
fenced before their flag is raised and after it is seen.

This module must not import the rest of tensorplay (the GPU compile check
loads the kernel modules on their own).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ._order import fence, load_relaxed, store_relaxed
from ._target import LIBDEVICE, WARP_SHUFFLES, device_function

__all__ = ["AGGREGATE", "COUNT", "INCLUSIVE", "chain", "claim", "messages", "packed", "values_size"]

AGGREGATE = 1  # the tile's own total is out
INCLUSIVE = 2  # the running total up to the tile, and with it, is out
COUNT = "count"  # an accumulator of non-negative int64 sums (a mask's running count): packed
i64 = np.int64
u64 = np.uint64

COMBINE = {  # the ops chained tiles (and kernels/scan) combine
    "sum": device_function(lambda a, b: a + b),
    "prod": device_function(lambda a, b: a * b),
}


def packed(acc: str) -> bool:
    """Whether a tile's value of type ``acc`` travels in its status word."""
    return acc in ("float32", COUNT)


def values_size(acc: str, tiles: int) -> int:
    """The elements of the ``values`` array ``chain`` needs for ``tiles`` tiles."""
    return 0 if packed(acc) else 2 * tiles


@device_function
def claim(status):
    """The next tile in order, for a block (one thread asks)."""
    return i64(cuda.atomic.add(status, 0, u64(1)))


if LIBDEVICE:
    from numba.cuda import libdevice

    @device_function
    def _float_bits(v):
        return u64(np.uint32(libdevice.float_as_int(np.float32(v))))

    @device_function
    def _bits_float(w):
        return libdevice.int_as_float(np.int32(w & u64(0xFFFFFFFF)))

else:

    def _float_bits(v):
        return u64(np.float32(v).view(np.uint32))

    def _bits_float(w):
        return np.uint32(int(w) & 0xFFFFFFFF).view(np.float32)


@device_function
def _word(status, t):
    """Tile ``t``'s status word once it is published (it is 0 until then: every
    message carries a flag of 1 or more)."""
    w = load_relaxed(status, 1 + t)
    while w == 0:
        w = load_relaxed(status, 1 + t)
    return w


@functools.cache
def messages(acc: str):
    """``publish(status, values, t, value, flag)`` and ``read(status, values, t)
    -> (flag, value)`` (waiting for tile ``t``'s first flag) for ``acc``."""
    if acc == COUNT:

        @device_function
        def publish(status, values, t, value, flag):
            store_relaxed(status, 1 + t, (u64(value) << u64(2)) | u64(flag))

        @device_function
        def read(status, values, t):
            w = _word(status, t)
            return i64(w & u64(3)), i64(w >> u64(2))

    elif acc == "float32":

        @device_function
        def publish(status, values, t, value, flag):
            store_relaxed(status, 1 + t, (u64(flag) << u64(32)) | _float_bits(value))

        @device_function
        def read(status, values, t):
            w = _word(status, t)
            return i64(w >> u64(32)), _bits_float(w)

    else:

        @device_function
        def publish(status, values, t, value, flag):
            values[2 * t + flag - 1] = value
            fence()  # the value before its flag
            store_relaxed(status, 1 + t, u64(flag))

        @device_function
        def read(status, values, t):
            w = _word(status, t)
            fence()  # the flag before the value
            f = i64(w)
            return f, values[2 * t + f - 1]

    return publish, read


@functools.cache
def chain(op: str, acc: str):
    """``(publish, earlier)`` for tiles whose values ``op`` combines, in ``acc``:

    - ``publish(status, values, t, value, flag)``: tile ``t``'s ``value``
      out, ``AGGREGATE`` (its own total) or ``INCLUSIVE`` (its row's running
      total up to it, and with it); one thread calls it.
    - ``earlier(status, values, t, first, lane)``: the ``op`` of tiles
      ``first .. t - 1`` (tile ``t``'s row starts at tile ``first``), walked
      back from ``t - 1`` to the nearest tile whose running total is out.
      The 32 threads of the block's first warp call it (``lane`` 0 to 31);
      the value is lane 0's. On the GPU the warp reads 32 tiles at a time;
      where there are no warp votes one thread walks back tile by tile.
    """
    combine = COMBINE[op]
    acc_t = np.int64 if acc == COUNT else np.dtype(acc).type
    identity = 0 if op == "sum" else 1
    publish, read = messages(acc)

    if not WARP_SHUFFLES:

        @device_function
        def walk(status, values, t, first, lane):
            before = acc_t(identity)
            k = t - 1
            while lane == 0 and k >= first:
                f, v = read(status, values, k)
                before = combine(v, before)
                k = first - 1 if f == INCLUSIVE else k - 1
            return before

        return publish, walk

    @device_function
    def warp_walk(status, values, t, first, lane):
        window = cuda.shared.array(32, acc_t)
        init = acc_t(identity)
        before = init
        j = t - 1
        nearer = (np.uint32(1) << np.uint32(lane)) - np.uint32(1)  # the lanes reading tiles nearer t
        done = False
        while not done:  # the same trip count for the warp: its vote decides
            k = j - lane
            f = i64(INCLUSIVE)  # before the row's first tile: nothing more to add
            v = init
            if k >= first:
                f, v = read(status, values, k)
            stops = cuda.ballot_sync(0xFFFFFFFF, f == INCLUSIVE)
            window[lane] = v if (stops & nearer) == 0 else init  # up to the nearest running total
            cuda.syncwarp()
            if lane == 0:
                part = init
                for i in range(31, -1, -1):  # the farthest tile first
                    part = combine(part, window[i])
                before = combine(part, before)
            cuda.syncwarp()
            done = stops != 0
            j -= 32
        return before

    return publish, warp_walk
