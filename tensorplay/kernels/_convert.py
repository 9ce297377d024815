"""Conversions to integers in generated kernels, as the GPU's stores convert.

On the GPU they are ``np.int32`` and ``np.int64``, whose conversion of a float
saturates as a store into an integer array does. On the simulator NumPy's would
wrap or raise (NaN, inf, 1e20), so there they follow the GPU's rule
(``runtime.backend.simint``): a fused kernel converts as the eager ones store.
"""

from __future__ import annotations

import numpy as np

from ._target import NATIVE_INT_CASTS

__all__ = ["to_int32", "to_int64"]

if NATIVE_INT_CASTS:
    to_int32, to_int64 = np.int32, np.int64
else:
    from ..runtime.backend.simint import float_to_int, wrap_int

    def _converter(dtype: np.dtype):
        def convert(value):
            if isinstance(value, (float, np.floating)):
                return float_to_int(value, dtype)
            return wrap_int(int(value), dtype)

        return convert

    to_int32, to_int64 = _converter(np.dtype(np.int32)), _converter(np.dtype(np.int64))
