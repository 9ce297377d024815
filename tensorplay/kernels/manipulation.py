"""Copies that move elements along one dimension: reversed or rotated.

The tensor layer shows its source as an ``(outer, n, inner)`` array (a view
when the layout allows, else a copy) and the result as a contiguous
``(outer, n, inner)`` one: every element of the result is one load and one
store, whatever the dtype (bfloat16 arrives as its bits). One thread per
element, grid-stride, no division by a dimension the compiler cannot see
except the two that split the flat index.

This module must not import the rest of tensorplay: the GPU compile check
(``tests/helpers/gpu_compile.py``) loads it on its own.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

__all__ = ["shifted"]

i64 = np.int64


@cuda.jit
def shifted(x, out, start, step):
    """``out[o, j, i] = x[o, (start + step * j) mod n, i]`` with ``step`` 1 or -1
    and ``start`` in ``[0, n]``: ``step=-1, start=n-1`` reverses (``flip``),
    ``step=1, start=n-s`` rotates by ``s`` (``roll``)."""
    n = i64(x.shape[1])
    inner = i64(x.shape[2])
    total = i64(x.shape[0]) * n * inner
    k = i64(cuda.grid(1))
    stride = i64(cuda.gridsize(1))
    while k < total:
        i = k % inner
        row = k // inner
        j = row % n
        o = row // n
        src = start + step * j
        if src >= n:
            src -= n
        elif src < 0:
            src += n
        out[o, j, i] = x[o, src, i]
        k += stride
