"""Integer stores on the simulator as the GPU does them: a float stored into an
integer array converts as the H200 converts it (NumPy raises for NaN, inf and
1e20), through the array type the simulator gives integer arguments.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["float_to_int", "int_array_type", "wrap_int"]


def float_to_int(value, dtype: np.dtype):
    """``value``, a float stored into an integer array of ``dtype``, converted as
    the GPU converts it (measured on the H200; NumPy raises for NaN, inf and
    1e20): towards zero (from float16: to the nearest, ties to even),
    saturating at the type's bounds; NaN gives 0 from float16 and float32 into
    32 bits or fewer, else the pattern 0x80...0. From float32 and float64,
    8-bit types get the low byte of a 16-bit conversion."""
    source_bits = 64 if type(value) is float else value.dtype.itemsize * 8
    bits, signed = dtype.itemsize * 8, dtype.kind == "i"
    width = bits if source_bits == 16 else max(bits, 16)
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    f = float(value)
    if f != f:
        r = 0 if source_bits < 64 and width <= 32 else lo if signed else 1 << (width - 1)
    else:
        r = hi if f >= hi else lo if f <= lo else round(f) if source_bits == 16 else int(f)
    return wrap_int(r, dtype)


def wrap_int(value: int, dtype: np.dtype):
    """The Python int ``value`` stored into an integer array of ``dtype`` as
    the GPU stores it: its low bits (NumPy raises when it is out of range)."""
    bits = dtype.itemsize * 8
    r = value & ((1 << bits) - 1)
    if dtype.kind == "i" and r >> (bits - 1):
        r -= 1 << bits
    return dtype.type(r)


@functools.cache
def int_array_type():
    """The simulator's array for integer arguments: float stores convert as on
    the GPU (``float_to_int``) instead of raising (NaN, inf, 1e20)."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    class IntArray(FakeCUDAArray):
        def __getitem__(self, idx):
            item = self._ary[idx]
            return IntArray(item) if type(item) is np.ndarray else item

        def __setitem__(self, idx, value) -> None:
            if isinstance(value, (float, np.floating)):
                value = float_to_int(value, self._ary.dtype)
            elif isinstance(value, (int, np.integer)):  # NumPy raises for one out of range; the GPU keeps the low bits
                value = wrap_int(int(value), self._ary.dtype)
            self._ary[idx] = value

    return IntArray
