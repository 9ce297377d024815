"""The functions of ``tp.linalg`` made of other ops: ``cross``,
``matrix_power``, ``matrix_rank``, ``pinv``, the standard's ``diagonal``
(of the last two axes) and PyTorch's ``lstsq``. They need no device code of
their own and are differentiable through what they are made of.
"""

from __future__ import annotations

from typing import NamedTuple

from . import _dtype as dt
from ._aliases import either
from ._creation_functions import eye
from ._data_type_functions import finfo
from ._functions import where
from ._linalg_decompositions import eigvalsh, svd, svdvals
from ._linalg_lapack import float_dtype, matrices
from ._linalg_solve import inv
from ._linear_algebra_functions import diagonal as _diagonal
from ._linear_algebra_functions import matmul
from ._manipulation_functions import broadcast_arrays, concat
from ._shape import broadcast_shapes
from ._tensor import Tensor

__all__ = ["LstsqResult", "cross", "diagonal", "lstsq", "matrix_power", "matrix_rank", "pinv"]


class LstsqResult(NamedTuple):
    solution: Tensor
    residuals: Tensor
    rank: Tensor
    singular_values: Tensor


def _adjoint(x: Tensor) -> Tensor:
    """The conjugate transpose of each matrix."""
    t = x.transpose(-1, -2)
    return t.conj() if x.dtype.kind == "c" else t


def diagonal(x: Tensor, /, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The ``offset``-th diagonal of each matrix of ``x`` (its last two axes;
    PyTorch's ``dim1``, ``dim2`` pick two others), a view: the standard's
    ``linalg.diagonal`` (``tp.diagonal`` is PyTorch's, of the first two axes).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.linalg.diagonal(tp.tensor([[1, 2], [3, 4]]), offset=1).tolist()
    [2]
    """
    if x.ndim < 2:
        raise ValueError(f"linalg.diagonal() expects at least 2 dimensions, got shape {x.shape}")
    return _diagonal(x, offset, dim1, dim2)


def cross(x1: Tensor, x2: Tensor, /, *, axis: int = -1, dim: int | None = None) -> Tensor:
    """The cross product of the 3-vectors along ``axis`` (PyTorch's ``dim``),
    the other axes broadcast.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.linalg.cross(tp.tensor([1, 0, 0]), tp.tensor([0, 1, 0])).tolist()
    [0, 0, 1]
    """
    fn = "linalg.cross"
    axis = either(fn, "axis", axis, "dim", dim, -1)
    if not isinstance(x1, Tensor) or not isinstance(x2, Tensor):
        raise TypeError(f"{fn}() expects two tensors, got {type(x1).__name__} and {type(x2).__name__}")
    if min(x1.ndim, x2.ndim) == 0:
        raise ValueError(f"{fn}() expects tensors of vectors, got shapes {x1.shape} and {x2.shape}")
    if axis >= 0:  # counted in the broadcast shape
        axis -= len(broadcast_shapes(x1.shape, x2.shape))
    if not -min(x1.ndim, x2.ndim) <= axis < 0 or x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(
            f"{fn}() expects vectors of 3 components along axis {axis}, got shapes {x1.shape} and {x2.shape}"
        )
    a, b = broadcast_arrays(x1, x2)
    a0, a1, a2 = (a.narrow(axis, i, 1) for i in range(3))
    b0, b1, b2 = (b.narrow(axis, i, 1) for i in range(3))
    return concat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=axis)


def matrix_power(x: Tensor, n: int, /) -> Tensor:
    """``x`` multiplied by itself ``n`` times (square matrices; the identity for
    ``n = 0``, powers of the inverse for ``n < 0``), by repeated squaring.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.linalg.matrix_power(tp.tensor([[1.0, 1.0], [0.0, 1.0]]), 3).tolist()
    [[1.0, 3.0], [0.0, 1.0]]
    """
    fn = "linalg.matrix_power"
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{fn}() expects an integer power, got {type(n).__name__}")
    matrices(fn, x, square=True)
    if n == 0:
        out = Tensor._empty(x.shape, x.dtype)
        return out.copy_(eye(x.shape[-1], dtype=x.dtype)) if out.numel() else out
    if n < 0:
        float_dtype(fn, x)
        x, n = inv(x), -n
    result, base = None, x
    while True:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if not n:
            return result if result is not x else x.clone()
        base = matmul(base, base)


def _tolerance(fn: str, values: Tensor, m: int, n: int, rtol, atol) -> Tensor:
    """The cut below which singular values count as zero: max(atol, rtol * the
    largest), rtol max(m, n) * eps by default (0 when only atol is given)."""
    if rtol is None:
        rtol = 0.0 if atol is not None else max(m, n) * finfo(values.dtype).eps
    if isinstance(rtol, Tensor):  # a tolerance a matrix: against that matrix's values
        rtol = rtol.unsqueeze(-1)
    if isinstance(atol, Tensor):
        atol = atol.unsqueeze(-1)
    largest = values.amax(-1, True) if values.shape[-1] else values.sum(-1, True)
    cut = largest * rtol
    return cut if atol is None else where(cut > atol, cut, atol)


def matrix_rank(x: Tensor, /, *, rtol=None, atol=None, hermitian: bool = False, tol=None) -> Tensor:
    """The rank of each matrix: its count of singular values above ``max(atol,
    rtol * the largest)``, ``rtol`` max(M, N) * eps by default (a number, or a
    tensor broadcast against the batch); ``hermitian``: from the eigenvalues.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.linalg.matrix_rank(tp.tensor([[1.0, 2.0], [2.0, 4.0]])).item()
    1
    """
    fn = "linalg.matrix_rank"
    matrices(fn, x)
    atol = tol if tol is not None else atol
    values = eigvalsh(x).abs() if hermitian else svdvals(x)
    return (values > _tolerance(fn, values, *x.shape[-2:], rtol, atol)).to(dt.int64).sum(-1)


def pinv(x: Tensor, /, *, rtol=None, atol=None, hermitian: bool = False) -> Tensor:
    """The Moore-Penrose pseudo-inverse of each matrix (..., M, N), of shape
    (..., N, M): from the SVD, singular values at most ``max(atol, rtol * the
    largest)`` taken as zero (``rtol`` max(M, N) * eps by default).
    ``hermitian`` is taken and ignored (the SVD serves every matrix).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.linalg.pinv(tp.tensor([[2.0, 0.0], [0.0, 0.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.0]]
    """
    fn = "linalg.pinv"
    matrices(fn, x)
    u, s, vh = svd(x, full_matrices=False)
    kept = s > _tolerance(fn, s, *x.shape[-2:], rtol, atol)
    inverse = where(kept, 1.0 / where(kept, s, 1.0), 0.0)  # no 1/0 for the backward to meet
    scaled = _adjoint(vh) * inverse.unsqueeze(-2).to(vh.dtype)
    return matmul(scaled, _adjoint(u))


def lstsq(A: Tensor, B: Tensor, rcond=None, *, driver=None) -> LstsqResult:  # noqa: N803 (PyTorch's names)
    """PyTorch's ``lstsq``: the least-squares solution of ``A @ X = B`` (the
    minimum-norm one where ``A`` is rank deficient) as ``pinv(A) @ B``, singular
    values below ``rcond`` times the largest dropped (max(M, N) * eps by
    default); with it ``residuals`` (the squared residual norm of each column
    when M > N, else empty), ``rank`` and ``singular_values``. ``driver`` is
    taken and ignored.

    Examples
    --------
    >>> import tensorplay as tp
    >>> a = tp.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=tp.float64)
    >>> x = tp.linalg.lstsq(a, tp.tensor([1.0, 2.0, 3.0], dtype=tp.float64)).solution
    >>> [round(v, 12) for v in x.tolist()]
    [1.0, 2.0]
    """
    fn = "linalg.lstsq"
    matrices(fn, A)
    if not isinstance(B, Tensor):
        raise TypeError(f"{fn}() expects a tensor of right-hand sides, got {type(B).__name__}")
    vector = B.ndim == A.ndim - 1  # PyTorch's rule: one dimension fewer than A is a vector (of each matrix)
    rhs = B.unsqueeze(-1) if vector else B
    if rhs.ndim < A.ndim or rhs.shape[-2] != A.shape[-2]:
        m = A.shape[-2]
        raise ValueError(
            f"{fn}() expects B of shape (..., {m}, K) or (..., {m}) with as many dimensions as A or one fewer, "
            f"for A of shape {A.shape}, got shape {B.shape}"
        )
    float_dtype(fn, A, B)
    m, n = A.shape[-2:]
    solution = matmul(pinv(A, rtol=rcond), rhs)
    if m > n:
        residual = matmul(A, solution) - rhs
        residuals = (residual.abs() ** 2).sum(-2)
        residuals = residuals.squeeze(-1) if vector else residuals
    else:
        residuals = Tensor._empty((0,), dt.real_dtype(solution.dtype))
    values = svdvals(A)
    rank = (values > _tolerance(fn, values, m, n, rcond, None)).to(dt.int64).sum(-1)
    return LstsqResult(solution.squeeze(-1) if vector else solution, residuals, rank, values)
