"""Kernels of the creation functions that write their values on the device, so
that they can be captured in a graph (``arange``'s is in ``sequence``): the
identity, evenly spaced values, the triangles of stacks of matrices. Numba
compiles each once per argument types; bfloat16 tensors are made in float32
and converted (the kernels would see their bits), complex ones part by part
(``linspace``) or as they are (``eye``, ``triangle``: 0 and 1 convert).

Examples
--------
>>> import numpy as np
>>> out = np.zeros(6, np.float32)
>>> eye[1, 32](out, 3, 1)
>>> out.reshape(2, 3).tolist()
[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
"""

import math

from numba import cuda

__all__ = ["eye", "linspace", "triangle"]


@cuda.jit
def eye(out, cols, k):
    """``out`` (a C-contiguous matrix of ``cols`` columns, seen flat): 1 on the
    ``k``-th diagonal (column - row == k), 0 elsewhere."""
    i = cuda.grid(1)
    while i < out.size:
        row = i // cols
        out[i] = 1 if i - row * cols - row == k else 0
        i += cuda.gridsize(1)


@cuda.jit
def linspace(out, start, step, stop, last, integral):
    """``out[i] = start + i * step`` in float64, as NumPy's ``linspace``: the
    element ``last`` (-1: none) is ``stop`` exactly, and an integer ``out``
    takes the floor (``integral``)."""
    i = cuda.grid(1)
    while i < out.size:
        value = start + i * step
        if i == last:
            value = stop
        if integral:
            out[i] = math.floor(value)
        else:
            out[i] = value
        i += cuda.gridsize(1)


@cuda.jit
def triangle(out, x, k, lower):
    """``out = x`` (3-D: stacks of matrices, ``out`` C-contiguous) on and below
    the ``k``-th diagonal (``lower``) or on and above it, 0 elsewhere."""
    i = cuda.grid(1)
    rows, cols = out.shape[1], out.shape[2]
    while i < out.size:
        matrix = i // (rows * cols)
        at = i - matrix * rows * cols
        row = at // cols
        col = at - row * cols
        if (col - row <= k) if lower else (col - row >= k):
            out[matrix, row, col] = x[matrix, row, col]
        else:
            out[matrix, row, col] = 0
        i += cuda.gridsize(1)
