"""The row order that LAPACK's pivots give (getrf's ``ipiv``), so that the
row interchanges of an LU solve are one gather, which a graph captures.

Examples
--------
>>> import numpy as np
>>> pivots = np.array([[3, 3, 3]], np.int64)  # swap rows 0 and 2, then 1 and 2, then nothing
>>> order, inverse = np.zeros((1, 3), np.int64), np.zeros((1, 3), np.int64)
>>> row_order[1, 32](pivots, order, inverse)
>>> order.tolist(), inverse.tolist()
([[2, 0, 1]], [[1, 2, 0]])
"""

from numba import cuda

__all__ = ["row_order"]


@cuda.jit
def row_order(pivots, order, inverse):
    """For each matrix ``i`` (a thread each) of ``pivots`` (1-based, int64,
    (batch, n)): the swaps of rows k and ``pivots[i, k] - 1``, k = 0, 1, ...,
    applied in turn to the rows 0..n-1 leave the original row ``order[i, k]``
    at row k; ``inverse[i, order[i, k]] = k``. A pivot outside 1..n swaps nothing."""
    i = cuda.grid(1)
    if i < pivots.shape[0]:
        n = pivots.shape[1]
        for k in range(n):
            order[i, k] = k
        for k in range(n):
            p = pivots[i, k] - 1
            if p != k and 0 <= p < n:
                row = order[i, k]
                order[i, k] = order[i, p]
                order[i, p] = row
        for k in range(n):
            inverse[i, order[i, k]] = k
