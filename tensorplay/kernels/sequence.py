"""``arange``'s kernel: evenly spaced values written on the device, so that a
sequence can be made inside a graph capture (no host data to copy).

Examples
--------
>>> import numpy as np
>>> out = np.zeros(4, np.int64)
>>> arange[1, 32](out, 3, 2)
>>> out.tolist()
[3, 5, 7, 9]
"""

from numba import cuda

__all__ = ["arange"]


@cuda.jit
def arange(out, start, step):
    """``out[i] = start + i * step``, computed in ``start``'s type (int64 or
    float64, as NumPy's ``arange`` computes) and stored in ``out``'s dtype."""
    i = cuda.grid(1)
    while i < out.size:
        out[i] = start + i * step
        i += cuda.gridsize(1)
