"""Linear algebra: the array API standard's ``linalg`` extension (2024.12), as
``tp.linalg``, with PyTorch's ``norm``, ``lstsq``, ``solve_triangular`` and
the ``*_ex`` forms.

The factorisations (``solve``, ``inv``, ``det``, ``slogdet``, ``cholesky``,
``eigh``, ``eigvalsh``, ``svd``, ``svdvals``, ``qr``) run in cuSOLVER on a GPU
and in NumPy on the simulator, on the current stream, so they are captured in
graphs and run inside ``while_`` and ``if_`` bodies; the rest is composed of
tensorplay's ops. ``tp.backends.linalg.explain(...)`` says which path a call
takes. Every function takes stacks of matrices (leading dimensions) and
float32, float64, complex64 and complex128 (integers are refused);
gradients flow through all of them for real dtypes.

A singular matrix (``solve``, ``inv``) or one that is not positive-definite
(``cholesky``) raises ``LinAlgError`` when called eagerly, after one wait for
the device; inside a capture, where nothing may wait, the results of that
matrix are NaN instead (on both backends), and the ``*_ex`` forms return
the ``info`` codes on the device. ``det`` and ``slogdet`` of a singular matrix
are 0 and (0, -inf), no error.

``matmul``, ``matrix_transpose``, ``outer``, ``tensordot``, ``trace`` and
``vecdot`` are the main namespace's functions.

Examples
--------
>>> import tensorplay as tp
>>> a = tp.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=tp.float64)
>>> x = tp.linalg.solve(a, tp.tensor([1.0, 2.0], dtype=tp.float64))
>>> [round(v, 12) for v in (a @ x).tolist()]
[1.0, 2.0]
"""

from __future__ import annotations

from ._linalg_composites import LstsqResult, cross, diagonal, lstsq, matrix_power, matrix_rank, pinv
from ._linalg_decompositions import EighResult, QRResult, SVDResult, eigh, eigvalsh, qr, svd, svdvals
from ._linalg_lapack import LinAlgError
from ._linalg_norms import matrix_norm, norm, vector_norm
from ._linalg_solve import (
    SlogdetResult,
    cholesky,
    cholesky_ex,
    det,
    inv,
    inv_ex,
    slogdet,
    solve,
    solve_ex,
    solve_triangular,
)
from ._linear_algebra_functions import matmul, matrix_transpose, outer, tensordot, trace, vecdot

__all__ = [
    "EighResult", "LinAlgError", "LstsqResult", "QRResult", "SVDResult", "SlogdetResult", "cholesky",
    "cholesky_ex", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "inv_ex", "lstsq", "matmul",
    "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "norm", "outer", "pinv", "qr", "slogdet",
    "solve", "solve_ex", "solve_triangular", "svd", "svdvals", "tensordot", "trace", "vecdot", "vector_norm",
]  # fmt: skip
