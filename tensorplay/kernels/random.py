"""Counter-based random numbers: element i of a draw is a hash of (seed, offset + i).

The hash is SplitMix64's finaliser, so the numbers need no per-thread state and
are the same on the GPU and on the simulator, whatever the launch shape.

The generator's state lives on the device, in an int64 array ``state``: the
seed, the offset of the next draw, then counts of the blocks of the current
draw that are done (``STATE_SIZE`` values in all; only the first two are the
generator's state proper, the counts are back at 0 between draws). Each draw
reads the seed and its offset there, and the last of its blocks to finish
moves the offset past the numbers it used (``_advance``), so that a draw
captured in a graph, or in a while node's body, takes fresh numbers at every
replay and every pass without the host.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from ._target import device_function
from ._vector import load4, store4, vector_base

__all__ = ["STATE_SIZE", "dropout", "normal", "seed_state", "uniform", "uniform_double"]

# Blocks count themselves done on one of _LANES counters (state[3:]), and the
# last of each lane on state[2]: atomics on one address serialise, and 1024
# blocks counting on one cost about 1 us on an H200.
_LANES = 32
STATE_SIZE = 3 + _LANES

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S40, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(40), np.uint64(11)
_INV24, _INV53 = 1.0 / (1 << 24), 1.0 / (1 << 53)
_ZERO, _ONE, _TWO, _THREE, _FOUR = (np.uint64(k) for k in range(5))
_ALIGN = np.uint64(15)


@device_function
def _hash(seed, counter):
    z = seed + counter * _GOLDEN
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@device_function
def _unit(seed, counter):
    """A float in [0, 1) with 24 random bits (exact in float32): the hash's top 24."""
    return np.float32(_hash(seed, counter) >> _S40) * np.float32(_INV24)


@device_function
def _unit53(seed, counter):
    """A float64 in [0, 1) with 53 random bits (exact in float64): the hash's top 53,
    whose first 24 are ``_unit``'s."""
    return np.float64(_hash(seed, counter) >> _S11) * _INV53


@device_function
def _advance(state, base, used):
    """Called by every thread once it has drawn: the last block to get here
    moves the offset from ``base`` past the ``used`` numbers. A block counts
    itself done on its lane's counter, and the last of a lane on ``state[2]``;
    each last one sets its counter back to 0. No fence is needed before the
    count: a thread that draws has used ``base`` before the barrier, and one
    that does not never reads it again (but the writer itself, after its own
    load of it)."""
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        blocks, lane = cuda.gridDim.x, cuda.blockIdx.x % _LANES
        in_lane = (blocks - lane + _LANES - 1) // _LANES
        if cuda.atomic.add(state, 3 + lane, 1) == in_lane - 1:
            state[3 + lane] = 0
            if cuda.atomic.add(state, 2, 1) == min(blocks, _LANES) - 1:
                state[1] = base + used
                state[2] = 0


@cuda.jit
def seed_state(state, seed):
    """``tp.manual_seed``: the seed (its 64 bits, mixed: ``_random.mixed_seed``, as an int64), offset 0,
    no block counted."""
    if cuda.grid(1) == 0:
        state[0] = seed
        for i in range(1, state.size):
            state[i] = 0


@cuda.jit
def uniform(out, state, top):
    """``top``: the largest value below 1 in ``out``'s dtype, so that rounding to
    a narrow type (float16) never gives 1."""
    seed, base = np.uint64(state[0]), state[1]
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    n = out.size
    top32 = np.float32(top)  # exact for float16's; rounds to 1 for wider types, which 24 bits never reach
    while i < n:
        out[i] = min(_unit(seed, np.uint64(base + i)), top32)
        i += step
    _advance(state, base, n)


@cuda.jit
def uniform_double(out, state):
    """``uniform`` for float64: 53 random bits a number, as NumPy's and PyTorch's."""
    seed, base = np.uint64(state[0]), state[1]
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    n = out.size
    while i < n:
        out[i] = _unit53(seed, np.uint64(base + i))
        i += step
    _advance(state, base, n)


@cuda.jit
def normal(out, state):
    seed, base = np.uint64(state[0]), state[1]
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    n = out.size
    while i < n:
        c = np.uint64(base + 2 * i)  # the numbers base to base + 2n: where the offset moves to
        u1 = 1.0 - _unit53(seed, c)  # in (0, 1], so the log is finite (53 bits: tails to 8.6 sigma)
        u2 = _unit53(seed, c + np.uint64(1))
        out[i] = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
        i += step
    _advance(state, base, 2 * n)


@device_function
def _dropped(x, seed, counter, p, scale):
    """(kept, value): ``x * scale`` where the draw at ``counter`` is ``>= p``, else 0."""
    k = _unit(seed, counter) >= p
    return k, x * scale if k else 0


@cuda.jit
def dropout(out, keep, x, state, p, scale, store_mask):
    """``out = x * scale`` where a uniform draw is ``>= p`` (``keep``, stored
    when ``store_mask``: for the gradient), else 0: the draw, the mask and the
    scaling in one pass (``nn.functional.dropout``). Element i takes the draw
    at ``offset + i`` whatever the loop that reaches it. Where ``out`` and
    ``x`` are 16-byte aligned, a thread takes four elements side by side with
    one vector load and store; the loop after it takes the rest (or all),
    four strided elements a pass, loaded before any is stored, so that a
    thread waits for memory once a pass, not four times."""
    start = state[1]
    seed, base = np.uint64(state[0]), np.uint64(start)
    i = np.uint64(cuda.grid(1))
    step = np.uint64(cuda.gridsize(1))
    n = np.uint64(out.size)
    if (vector_base(out) | vector_base(x)) & _ALIGN == _ZERO:
        while i < n // _FOUR:
            x0, x1, x2, x3 = load4(x, i)
            c = base + _FOUR * i
            k0, v0 = _dropped(x0, seed, c, p, scale)
            k1, v1 = _dropped(x1, seed, c + _ONE, p, scale)
            k2, v2 = _dropped(x2, seed, c + _TWO, p, scale)
            k3, v3 = _dropped(x3, seed, c + _THREE, p, scale)
            store4(out, i, v0, v1, v2, v3)
            if store_mask:
                j = _FOUR * i
                keep[j], keep[j + _ONE], keep[j + _TWO], keep[j + _THREE] = k0, k1, k2, k3
            i += step
        i = n // _FOUR * _FOUR + np.uint64(cuda.grid(1))
    while i + _THREE * step < n:
        j1, j2, j3 = i + step, i + _TWO * step, i + _THREE * step
        x0, x1, x2, x3 = x[i], x[j1], x[j2], x[j3]
        k0, v0 = _dropped(x0, seed, base + i, p, scale)
        k1, v1 = _dropped(x1, seed, base + j1, p, scale)
        k2, v2 = _dropped(x2, seed, base + j2, p, scale)
        k3, v3 = _dropped(x3, seed, base + j3, p, scale)
        out[i], out[j1], out[j2], out[j3] = v0, v1, v2, v3
        if store_mask:
            keep[i], keep[j1], keep[j2], keep[j3] = k0, k1, k2, k3
        i = j3 + step
    while i < n:
        k, out[i] = _dropped(x[i], seed, base + i, p, scale)
        if store_mask:
            keep[i] = k
        i += step
    _advance(state, start, out.size)
