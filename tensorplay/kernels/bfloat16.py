"""bfloat16 in kernels: stored as its 16 bits (a ``uint16`` array), computed in float32.

A bfloat16 is the upper half of a float32, so ``decode`` shifts the bits up
and reads them as a float32, and ``encode`` rounds a float32 to its upper half
(to the nearest, ties to even; NaN stays a quiet NaN of the same sign). The
same arithmetic runs on both targets: the GPU reinterprets bits with
libdevice's ``int_as_float`` and ``float_as_int``, the simulator with NumPy's
``view``. Neither needs Numba's bfloat16 type, which the simulator lacks.

Examples
--------
>>> import tensorplay as tp
>>> x = tp.tensor([1.0, 3.140625], dtype=tp.bfloat16)  # the bits 0x3f80 and 0x4049
>>> (x * 2).tolist()  # decoded, doubled in float32, encoded
[2.0, 6.28125]
"""

from __future__ import annotations

import numpy as np

from ._target import LIBDEVICE, device_function

__all__ = ["decode", "encode", "round_float32"]

if LIBDEVICE:
    from numba.cuda import libdevice

    @device_function
    def decode(bits):
        """The float32 value of bfloat16 ``bits``."""
        return libdevice.int_as_float(np.int32(np.uint32(bits) << np.uint32(16)))

    @device_function
    def encode(x):
        """The bfloat16 bits nearest ``x`` (first rounded to float32)."""
        u = np.uint32(libdevice.float_as_int(np.float32(x)))
        if (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):  # NaN: keep the sign, set the quiet bit
            return np.uint16((u >> np.uint32(16)) | np.uint32(0x40))
        return np.uint16((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))

    @device_function
    def round_float32(x):
        """``x`` rounded to bfloat16, as a float32 (an operand joining bfloat16 math)."""
        return decode(encode(x))

else:  # the simulator runs Python: plain functions are cheaper than its device functions

    def decode(bits):
        """The float32 value of bfloat16 ``bits``."""
        return np.uint32(int(bits) << 16).view(np.float32)

    def encode(x):
        """The bfloat16 bits nearest ``x`` (first rounded to float32)."""
        u = int(np.float32(x).view(np.uint32))
        if u & 0x7FFFFFFF > 0x7F800000:
            return np.uint16((u >> 16) | 0x40)
        return np.uint16((u + 0x7FFF + ((u >> 16) & 1)) >> 16)

    def round_float32(x):
        """``x`` rounded to bfloat16, as a float32 (an operand joining bfloat16 math)."""
        return decode(encode(x))
