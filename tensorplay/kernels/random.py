"""Counter-based random numbers: element i of a draw is a hash of (seed, offset + i).

The hash is SplitMix64's finaliser, so the numbers need no per-thread state and
are the same on the GPU and on the simulator, whatever the launch shape.

The generator's state lives on the device, in a 3-element int64 array
``state``: the seed, the offset of the next draw, and a count of the blocks of
the current draw that are done. Each draw reads the seed and its offset there,
and the last of its blocks to finish moves the offset past the numbers it used
(``_advance``), so that a draw captured in a graph, or in a while node's body,
takes fresh numbers at every replay and every pass without the host.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

__all__ = ["dropout", "normal", "seed_state", "uniform"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S40 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(40)
_INV24 = 1.0 / (1 << 24)


@cuda.jit(device=True, inline=True)
def _hash(seed, counter):
    z = seed + counter * _GOLDEN
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@cuda.jit(device=True, inline=True)
def _unit(seed, counter):
    """A float in [0, 1) with 24 random bits (exact in float32)."""
    return np.float32(_hash(seed, counter) >> _S40) * np.float32(_INV24)


@cuda.jit(device=True, inline=True)
def _advance(state, base, used):
    """Called by every thread once it has drawn: the last block to get here
    moves the offset from ``base`` past the ``used`` numbers. Every block read
    ``base`` before counting itself done, so none reads the new offset."""
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        cuda.threadfence()
        if cuda.atomic.add(state, 2, 1) == cuda.gridDim.x - 1:
            state[1] = base + used
            state[2] = 0


@cuda.jit
def seed_state(state, seed):
    """``tp.manual_seed``: the seed (its 64 bits as an int64), offset 0."""
    if cuda.grid(1) == 0:
        state[0] = seed
        state[1] = 0
        state[2] = 0


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
def normal(out, state):
    seed, base = np.uint64(state[0]), state[1]
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    n = out.size
    while i < n:
        c = np.uint64(2 * (base + i))
        u1 = 1.0 - np.float64(_unit(seed, c))  # in (0, 1], so the log is finite
        u2 = np.float64(_unit(seed, c + np.uint64(1)))
        out[i] = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
        i += step
    _advance(state, base, 2 * n)


@cuda.jit
def dropout(out, keep, x, state, p, scale):
    """``out = x * scale`` where a uniform draw is ``>= p`` (``keep``), else 0:
    the draw, the mask and the scaling in one pass (``nn.functional.dropout``)."""
    seed, base = np.uint64(state[0]), state[1]
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    n = out.size
    while i < n:
        k = _unit(seed, np.uint64(base + i)) >= p
        keep[i] = k
        out[i] = x[i] * scale if k else 0
        i += step
    _advance(state, base, n)
