"""Counter-based random numbers: element i of a draw is a hash of (seed, offset + i).

The hash is SplitMix64's finaliser, so a draw needs no state on the device and
gives the same numbers on the GPU and on the simulator, whatever the launch shape.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

__all__ = ["normal", "uniform"]

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
    """A float in [0, 1) with 24 random bits."""
    return np.float64(_hash(seed, counter) >> _S40) * _INV24


@cuda.jit
def uniform(out, seed, offset, top):
    """``top``: the largest value below 1 in ``out``'s dtype, so that rounding to
    a narrow type (float16) never gives 1."""
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    n = out.size
    while i < n:
        out[i] = min(_unit(seed, np.uint64(offset + i)), top)
        i += step


@cuda.jit
def normal(out, seed, offset):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    n = out.size
    while i < n:
        c = np.uint64(2 * (offset + i))
        u1 = 1.0 - _unit(seed, c)  # in (0, 1], so the log is finite
        u2 = _unit(seed, c + np.uint64(1))
        out[i] = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
        i += step
