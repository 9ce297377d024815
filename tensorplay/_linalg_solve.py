"""Linear systems and what LU and Cholesky give: ``solve``, ``inv``, ``det``,
``slogdet``, ``cholesky``, and PyTorch's ``solve_triangular`` and the ``_ex``
forms that return ``info`` instead of raising (``solve_ex``, ``inv_ex``,
``cholesky_ex``), each differentiable with its backward beside it, for real
and complex matrices (the backwards are written with conjugate transposes,
``adjoint``: PyTorch's gradients).

Each backward keeps its forward's result detached and, when a gradient of the
gradient is asked for (``create_graph=True``), recomputes it from the inputs
with recording on, so that the gradient's own graph reaches them.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from . import _dtype as dt
from ._complex import imag_part, real_part
from ._creation_functions import arange, eye, tril, triu
from ._elementwise_functions import atan2, cos, imag, log, sign, sin
from ._functions import where
from ._grad_mode import no_grad
from ._linalg_lapack import (
    NO_CONVERGENCE,
    NOT_POSITIVE,
    SINGULAR,
    adjoint,
    can_wait,
    cholesky_factor,
    float_dtype,
    grad_for,
    inverse,
    kept,
    lu,
    matrices,
    settle,
    singular,
    solve_system,
)
from ._linear_algebra_functions import diagonal
from ._statistical_functions import prod
from ._statistical_functions import sum as _sum
from ._tape import needs_grad, record
from ._tensor import Tensor

__all__ = [
    "SlogdetResult", "cholesky", "cholesky_ex", "det", "inv", "inv_ex", "slogdet", "solve", "solve_ex",
    "solve_triangular",
]  # fmt: skip


class SlogdetResult(NamedTuple):
    sign: Tensor
    logabsdet: Tensor


# -- solve ---------------------------------------------------------------------------------------


def solve(x1: Tensor, x2: Tensor, /, *, left: bool = True) -> Tensor:
    """The solution ``X`` of ``x1 @ X = x2`` for square ``x1`` (..., M, M):
    ``x2`` of shape (M,) is one vector (the result has shape (..., M)), of
    shape (..., M, K) a stack of right-hand sides broadcast against ``x1``.
    PyTorch's ``left=False`` solves ``X @ x1 = x2``. A singular matrix raises
    ``LinAlgError`` (inside a capture: NaN, see ``solve_ex``).

    Examples
    --------
    >>> import tensorplay as tp
    >>> a = tp.tensor([[3.0, 1.0], [1.0, 2.0]], dtype=tp.float64)
    >>> tp.linalg.solve(a, tp.tensor([9.0, 8.0], dtype=tp.float64)).tolist()
    [2.0, 3.0]
    """
    if not left:
        _right_hand_matrices("linalg.solve", x2)
        return solve(x1.transpose(-1, -2), x2.transpose(-1, -2)).transpose(-1, -2)
    return _solve("linalg.solve", x1, x2, check=True)[0]


def _right_hand_matrices(fn: str, b) -> None:
    """``left=False`` solves ``X @ A = B``: B must be a matrix or a stack of them (rows of X's)."""
    if isinstance(b, Tensor) and b.ndim < 2:
        raise ValueError(
            f"{fn}(A, B, left=False) solves X @ A = B for matrices B of shape (..., K, N), got B of shape "
            f"{tuple(b.shape)}; for one row, pass B[None, :] (or solve A.mT @ x = b with left=True)"
        )


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False) -> tuple[Tensor, Tensor]:  # noqa: N803 (PyTorch's names)
    """PyTorch's ``solve_ex``: ``(X, info)``, ``info`` an int32 tensor of the
    batch's shape, 0 where the matrix was invertible and ``i`` where its LU
    factorisation met a zero pivot at step ``i`` (X then holds infinities or NaN). Nothing
    waits for the device unless ``check_errors``: the form for graphs."""
    if not left:
        _right_hand_matrices("linalg.solve_ex", B)
        x, info = solve_ex(A.transpose(-1, -2), B.transpose(-1, -2), check_errors=check_errors)
        return x.transpose(-1, -2), info
    return _solve("linalg.solve_ex", A, B, check=check_errors)


def _solve(fn: str, a: Tensor, b: Tensor, check: bool) -> tuple[Tensor, Tensor]:
    matrices(fn, a, square=True)
    if not isinstance(b, Tensor):
        raise TypeError(f"{fn}() expects a tensor of right-hand sides, got {type(b).__name__}")
    n, vector = a.shape[-1], b.ndim == 1
    if b.ndim == 0 or (b.shape[0] if vector else b.shape[-2]) != n:
        raise ValueError(
            f"{fn}() expects right-hand sides of shape ({n},) or (..., {n}, K) for A of shape {a.shape}, got {b.shape}"
        )
    dtype = float_dtype(fn, a, b)
    with no_grad():
        x, info = solve_system(fn, a, b, dtype, vector)
        if check:
            (x,) = settle(fn, info, (x,), SINGULAR)
    if not (needs_grad(a) or needs_grad(b)):
        return x, info
    again = kept(x, lambda: solve(a, b))

    def grads(gs):  # gB = A^-H gX, gA = -gB X^H
        x = again()
        g = gs[0].unsqueeze(-1) if vector else gs[0]
        gb = solve(adjoint(a), g)
        ga = -(gb @ adjoint(x.unsqueeze(-1) if vector else x)) if needs_grad(a) else None
        return grad_for(ga, a) if ga is not None else None, grad_for(gb.squeeze(-1) if vector else gb, b)

    return record("LinalgSolveBackward", x, (a, b), grads), info


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False) -> Tensor:  # noqa: N803
    """PyTorch's ``solve_triangular``: ``X`` with ``A @ X = B`` (``left=False``:
    ``X @ A = B``) where only the ``upper`` (else lower) triangle of ``A`` is
    read, its diagonal taken as ones if ``unitriangular``. Solved as ``solve``
    on that triangle (LU of a triangular matrix), differentiable through it.

    Examples
    --------
    >>> import tensorplay as tp
    >>> a = tp.tensor([[2.0, 9.0], [1.0, 4.0]], dtype=tp.float64)  # 9.0 is not read
    >>> tp.linalg.solve_triangular(a, tp.tensor([[4.0], [6.0]], dtype=tp.float64), upper=False).tolist()
    [[2.0], [1.0]]
    """
    fn = "linalg.solve_triangular"
    matrices(fn, A, square=True)
    matrices(fn, B)
    t = triu(A) if upper else tril(A)
    if unitriangular:
        one = eye(A.shape[-1], dtype=A.dtype)
        t = t * (1 - one) + one
    return solve(t, B) if left else solve(t.transpose(-1, -2), B.transpose(-1, -2)).transpose(-1, -2)


# -- inv -----------------------------------------------------------------------------------------


def inv(x: Tensor, /) -> Tensor:
    """The inverse of each square matrix of ``x``; a singular one raises
    ``LinAlgError`` (inside a capture: NaN, see ``inv_ex``).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.linalg.inv(tp.tensor([[2.0, 0.0], [0.0, 4.0]], dtype=tp.float64)).tolist()
    [[0.5, 0.0], [0.0, 0.25]]
    """
    return _inv("linalg.inv", x, check=True)[0]


def inv_ex(A: Tensor, *, check_errors: bool = False) -> tuple[Tensor, Tensor]:  # noqa: N803
    """PyTorch's ``inv_ex``: ``(inverse, info)``, as ``solve_ex``."""
    return _inv("linalg.inv_ex", A, check=check_errors)


def _inv(fn: str, x: Tensor, check: bool) -> tuple[Tensor, Tensor]:
    matrices(fn, x, square=True)
    dtype = float_dtype(fn, x)
    with no_grad():
        y, info = inverse(fn, x, dtype)
        if check:
            (y,) = settle(fn, info, (y,), SINGULAR)
    if not needs_grad(x):
        return y, info
    again = kept(y, lambda: inv(x))

    def grads(gs):  # gA = -Y^H gY Y^H
        yh = adjoint(again())
        return (grad_for(-(yh @ gs[0] @ yh), x),)

    return record("LinalgInvExBackward", y, (x,), grads), info


# -- determinants ----------------------------------------------------------------------------------


def _lu_parts(fn: str, x: Tensor) -> tuple[Tensor, Tensor, dt.DType]:
    """(U's diagonal, whether the pivots made an odd number of row swaps, dtype)."""
    matrices(fn, x, square=True)
    dtype = float_dtype(fn, x)
    factors, pivots, _ = lu(fn, x, dtype)  # a singular matrix is no failure here: its determinant is 0
    n = x.shape[-1]
    swaps = _sum((pivots != arange(1, n + 1, dtype=dt.int64)).to(dt.int64), axis=-1)
    return diagonal(factors, 0, -2, -1), (swaps % 2) == 1, dtype


def _phase(diag: Tensor, odd: Tensor) -> Tensor:
    """The angle of the product of the complex diagonal, a swap adding pi."""
    angle = _sum(atan2(imag_part(diag), real_part(diag)), axis=-1)
    return angle + odd.to(angle.dtype) * math.pi


def _polar(magnitude: Tensor, angle: Tensor, dtype: dt.DType) -> Tensor:
    return (magnitude * cos(angle)).to(dtype) + (magnitude * sin(angle)).to(dtype) * 1j


def det(x: Tensor, /) -> Tensor:
    """The determinant of each square matrix of ``x``: the product of U's
    diagonal in its LU factorisation, its sign flipped by each row swap (0 for
    a singular matrix, which is no error).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.linalg.det(tp.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=tp.float64)).item()
    -2.0
    """
    fn = "linalg.det"
    with no_grad():
        diag, odd, dtype = _lu_parts(fn, x)
        if dtype.kind == "c":
            out = _polar(prod(diag.abs(), axis=-1), _phase(diag, odd), dtype)
        else:
            out = prod(diag, axis=-1) * (1 - 2 * odd.to(dtype))
    if not needs_grad(x):
        return out
    again = kept(out, lambda: det(x))

    def grads(gs):  # gA = g conj(det(A)) A^-H: g times the conjugate cofactors, which singular A have too
        d, g = again(), gs[0].unsqueeze(-1).unsqueeze(-1)
        inverse_, info = inv_ex(x)
        ga = g * (d.conj() if d.dtype.kind == "c" else d).unsqueeze(-1).unsqueeze(-1) * adjoint(inverse_)
        if can_wait() and bool((info != 0).any()):  # eagerly: the singular ones' from their SVD
            ga = where((info != 0).unsqueeze(-1).unsqueeze(-1), g * _conjugate_cofactors(x), ga)
        return (grad_for(ga, x),)

    return record("LinalgDetBackward", out, (x,), grads)


def _conjugate_cofactors(x: Tensor) -> Tensor:
    """The conjugate cofactor matrix of each square matrix, ``conj(det(A)) A^-H`` where A is
    invertible and defined where it is not: from A = U diag(S) Vh, ``conj(det(U) det(Vh))
    U diag(P) Vh`` with P_i the product of the singular values but S_i."""
    fn = "linalg.det"
    with no_grad():
        u, s, vh, info = singular(fn, x, float_dtype(fn, x), "A")
        u, s, vh = settle(fn, info, (u, s, vh), NO_CONVERGENCE)
        others = prod(where(eye(s.shape[-1], dtype=dt.bool), 1.0, s.unsqueeze(-2)), axis=-1)
        phase = det(u) * det(vh)
        phase = phase.conj() if phase.dtype.kind == "c" else phase
        return phase.unsqueeze(-1).unsqueeze(-1) * ((u * others.unsqueeze(-2).to(u.dtype)) @ vh)


def slogdet(x: Tensor, /) -> SlogdetResult:
    """``(sign, logabsdet)`` of each square matrix: the determinant is ``sign *
    exp(logabsdet)``, ``sign`` of ``x``'s dtype (a unit complex number for
    complex ``x``), ``logabsdet`` real; (0, -inf) for a singular matrix.

    Examples
    --------
    >>> import tensorplay as tp
    >>> sign, logabsdet = tp.linalg.slogdet(tp.tensor([[0.0, 2.0], [3.0, 0.0]], dtype=tp.float64))
    >>> sign.item(), round(logabsdet.exp().item(), 12)
    (-1.0, 6.0)
    """
    fn = "linalg.slogdet"
    with no_grad():
        diag, odd, dtype = _lu_parts(fn, x)
        magnitude = diag.abs()
        logabsdet = _sum(log(magnitude), axis=-1)
        if dtype.kind == "c":
            nonzero = prod((magnitude != 0).to(magnitude.dtype), axis=-1)
            sgn = _polar(nonzero, _phase(diag, odd), dtype)
        else:
            sgn = prod(sign(diag), axis=-1) * (1 - 2 * odd.to(dtype))
    if not needs_grad(x):
        return SlogdetResult(sgn, logabsdet)
    again = kept(sgn, lambda: slogdet(x).sign)

    def grads(gs):  # d log det = tr(A^-1 dA): logabsdet moves by its real part, a complex sign's angle by its imaginary
        g = gs[1]
        if dtype.kind == "c":  # (a real sign is locally constant)
            g = g - 1j * imag(gs[0].conj() * again())
        return (grad_for(g.unsqueeze(-1).unsqueeze(-1) * adjoint(inv(x)), x),)

    sgn, logabsdet = record("LinalgSlogdetBackward", (sgn, logabsdet), (x,), grads)
    return SlogdetResult(sgn, logabsdet)


# -- cholesky ------------------------------------------------------------------------------------


def cholesky(x: Tensor, /, *, upper: bool = False) -> Tensor:
    """The Cholesky factor of each Hermitian positive-definite matrix: ``L``
    lower triangular with ``x = L @ L^H``, read from ``x``'s lower triangle,
    or with ``upper`` ``U`` with ``x = U^H @ U``, read from its upper one. A
    matrix that is not positive-definite raises ``LinAlgError`` (inside a
    capture: NaN, see ``cholesky_ex``).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.linalg.cholesky(tp.tensor([[4.0, 2.0], [2.0, 2.0]], dtype=tp.float64)).tolist()
    [[2.0, 0.0], [1.0, 1.0]]
    """
    return _cholesky("linalg.cholesky", x, upper, check=True)[0]


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False) -> tuple[Tensor, Tensor]:  # noqa: N803
    """PyTorch's ``cholesky_ex``: ``(factor, info)``, ``info`` ``i`` where the
    leading minor of order ``i`` is not positive-definite (the factor is then
    not meaningful), as ``solve_ex``."""
    return _cholesky("linalg.cholesky_ex", A, upper, check=check_errors)


def _cholesky(fn: str, x: Tensor, upper: bool, check: bool) -> tuple[Tensor, Tensor]:
    matrices(fn, x, square=True)
    dtype = float_dtype(fn, x)
    with no_grad():
        factor, info = cholesky_factor(fn, x, dtype, upper)
        if check:
            (factor,) = settle(fn, info, (factor,), NOT_POSITIVE)
    if not needs_grad(x):
        return factor, info
    again = kept(factor, lambda: cholesky(x, upper=upper))

    def grads(gs):  # Murray (2016): gA = L^-H Phi(L^H gL) L^-1, Phi: the lower triangle, its diagonal halved
        low = adjoint(again()) if upper else again()
        g = adjoint(gs[0]) if upper else gs[0]
        phi = tril(adjoint(low) @ g)
        phi = 0.5 * (phi + adjoint(tril(phi, -1)))
        left = solve(adjoint(low), phi)  # L^-H Phi
        return (grad_for(adjoint(solve(adjoint(low), adjoint(left))), x),)

    return record("LinalgCholeskyExBackward", factor, (x,), grads), info
