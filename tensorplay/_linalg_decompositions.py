"""Decompositions: ``eigh`` and ``eigvalsh`` (Hermitian), ``svd`` and
``svdvals``, ``qr``, each differentiable with its backward beside it, the
formulas of PyTorch's ``FunctionsManual.cpp``: they assume distinct
eigenvalues (singular values), and for the SVD of a non-square matrix full
rank. For complex matrices they are written with conjugate transposes; the
vectors are then defined up to a phase each, and a loss must not depend on
those phases (``|v|**2`` does not) for its gradient to mean anything.
"""

from __future__ import annotations

from typing import NamedTuple

from ._creation_functions import eye, tril, triu
from ._grad_mode import no_grad
from ._linalg_lapack import (
    NO_CONVERGENCE,
    adjoint,
    eigen,
    float_dtype,
    grad_for,
    householder,
    kept,
    matrices,
    settle,
    singular,
)
from ._linalg_solve import solve
from ._manipulation_functions import concat
from ._tape import needs_grad, record
from ._tensor import Tensor

__all__ = ["EighResult", "QRResult", "SVDResult", "eigh", "eigvalsh", "qr", "svd", "svdvals"]


class EighResult(NamedTuple):
    eigenvalues: Tensor
    eigenvectors: Tensor


class SVDResult(NamedTuple):
    U: Tensor
    S: Tensor
    Vh: Tensor


class QRResult(NamedTuple):
    Q: Tensor
    R: Tensor


def _uplo(fn: str, uplo: str) -> bool:
    """PyTorch's ``UPLO``: whether the upper triangle is read."""
    if uplo not in ("L", "U"):
        raise ValueError(f"{fn}() expects UPLO='L' or 'U', got {uplo!r}")
    return uplo == "U"


# -- eigh ----------------------------------------------------------------------------------------


def eigh(x: Tensor, /, UPLO: str = "L") -> EighResult:  # noqa: N803 (PyTorch's name)
    """The eigenvalues (ascending, real) and eigenvectors (the columns of
    ``eigenvectors``, orthonormal) of each Hermitian matrix of ``x``, read from
    its lower triangle (PyTorch's ``UPLO="U"``: the upper one).

    Examples
    --------
    >>> import tensorplay as tp
    >>> w, v = tp.linalg.eigh(tp.tensor([[2.0, 1.0], [1.0, 2.0]], dtype=tp.float64))
    >>> [round(e, 12) for e in w.tolist()]
    [1.0, 3.0]
    """
    fn = "linalg.eigh"
    matrices(fn, x, square=True)
    upper, dtype = _uplo(fn, UPLO), float_dtype(fn, x)
    with no_grad():
        values, vectors, info = eigen(fn, x, dtype, True, upper)
        values, vectors = settle(fn, info, (values, vectors), NO_CONVERGENCE)
    if not needs_grad(x):
        return EighResult(values, vectors)
    again = kept((values, vectors), lambda: tuple(eigh(x, UPLO)))

    def grads(gs):  # gA = V (diag(gw) + skew(V^H gV) / E) V^H, E_ij = w_j - w_i (1 on the diagonal)
        w, v = again()
        gw, gv = gs
        one = eye(x.shape[-1], dtype=w.dtype)
        inner = adjoint(v) @ gv
        gaps = w.unsqueeze(-2) - w.unsqueeze(-1) + one
        middle = 0.5 * (inner - adjoint(inner)) / gaps + gw.unsqueeze(-2) * one
        return (grad_for(v @ middle @ adjoint(v), x),)

    values, vectors = record("LinalgEighBackward", (values, vectors), (x,), grads)
    return EighResult(values, vectors)


def eigvalsh(x: Tensor, /, UPLO: str = "L") -> Tensor:  # noqa: N803
    """The eigenvalues (ascending, real) of each Hermitian matrix of ``x``, read
    from its lower triangle (``UPLO="U"``: the upper one).

    Examples
    --------
    >>> import tensorplay as tp
    >>> [round(e, 12) for e in tp.linalg.eigvalsh(tp.tensor([[2.0, 1.0], [1.0, 2.0]], dtype=tp.float64)).tolist()]
    [1.0, 3.0]
    """
    fn = "linalg.eigvalsh"
    matrices(fn, x, square=True)
    upper, dtype = _uplo(fn, UPLO), float_dtype(fn, x)
    if needs_grad(x):  # the gradient needs the vectors: V diag(gw) V^T
        return eigh(x, UPLO).eigenvalues
    values, _, info = eigen(fn, x, dtype, False, upper)
    return settle(fn, info, (values,), NO_CONVERGENCE)[0]


# -- svd -----------------------------------------------------------------------------------------


def svd(x: Tensor, /, full_matrices: bool = True, *, driver=None) -> SVDResult:
    """``(U, S, Vh)`` with ``x = U @ diag(S) @ Vh`` for each matrix (..., M, N):
    ``S`` the K = min(M, N) singular values (descending, real), ``U`` (..., M,
    M) and ``Vh`` (..., N, N) unitary, or with ``full_matrices=False`` their
    first K columns (rows). PyTorch's ``driver`` is taken and ignored (one
    algorithm: gesvd).

    Examples
    --------
    >>> import tensorplay as tp
    >>> u, s, vh = tp.linalg.svd(tp.tensor([[3.0, 0.0], [0.0, -2.0]], dtype=tp.float64))
    >>> s.tolist()
    [3.0, 2.0]
    """
    fn = "linalg.svd"
    matrices(fn, x)
    dtype = float_dtype(fn, x)
    with no_grad():
        u, s, vh, info = singular(fn, x, dtype, "A" if full_matrices else "S")
        u, s, vh = settle(fn, info, (u, s, vh), NO_CONVERGENCE)
    if not needs_grad(x):
        return SVDResult(u, s, vh)
    again = kept((u, s, vh), lambda: tuple(svd(x, full_matrices)))

    def grads(gs):
        u, s, vh = again()
        gu, gs_, gvh = gs
        k = s.shape[-1]
        if full_matrices:  # the columns past K are not differentiable: narrowed away
            u, vh, gu, gvh = u.narrow(-1, 0, k), vh.narrow(-2, 0, k), gu.narrow(-1, 0, k), gvh.narrow(-2, 0, k)
        return (grad_for(_svd_backward(gu, gs_, gvh, u, s, vh), x),)

    u, s, vh = record("LinalgSvdBackward", (u, s, vh), (x,), grads)
    return SVDResult(u, s, vh)


def _svd_backward(gu: Tensor, gs: Tensor, gvh: Tensor, u: Tensor, s: Tensor, vh: Tensor) -> Tensor:
    """The gradient of A = U diag(S) Vh (reduced), as PyTorch's svd_backward."""
    m, n = u.shape[-2], vh.shape[-1]
    one = eye(s.shape[-1], dtype=s.dtype)
    inner_u, inner_v = adjoint(u) @ gu, vh @ adjoint(gvh)
    skew_u, skew_v = inner_u - adjoint(inner_u), inner_v - adjoint(inner_v)
    squares = s * s
    gaps = squares.unsqueeze(-2) - squares.unsqueeze(-1) + one  # E_jk = S_k^2 - S_j^2, 1 on the diagonal
    middle = (skew_u * s.unsqueeze(-2) + s.unsqueeze(-1) * skew_v) / gaps + gs.unsqueeze(-2) * one
    if u.dtype.kind == "c":  # the imaginary diagonal of skew(U^H gU) (0 for real matrices), over 2 S
        middle = middle + skew_u * one / (2 * s.unsqueeze(-2))
    if m > n:  # + (I - U U^H) gU S^-1, then V^H
        scaled = gu / s.unsqueeze(-2)
        return (u @ middle + scaled - u @ (adjoint(u) @ scaled)) @ vh
    if m < n:  # + S^-1 gVh (I - V V^H), after U
        scaled = gvh / s.unsqueeze(-1)
        return u @ (middle @ vh + scaled - (scaled @ adjoint(vh)) @ vh)
    return u @ middle @ vh


def svdvals(x: Tensor, /) -> Tensor:
    """The singular values (descending, real) of each matrix of ``x``.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.linalg.svdvals(tp.tensor([[0.0, 2.0], [1.0, 0.0]], dtype=tp.float64)).tolist()
    [2.0, 1.0]
    """
    fn = "linalg.svdvals"
    matrices(fn, x)
    dtype = float_dtype(fn, x)
    if not needs_grad(x):
        _, s, _, info = singular(fn, x, dtype, "N")
        return settle(fn, info, (s,), NO_CONVERGENCE)[0]
    with no_grad():
        u, s, vh, info = singular(fn, x, dtype, "S")  # the gradient is U diag(gS) Vh
        u, s, vh = settle(fn, info, (u, s, vh), NO_CONVERGENCE)
    again = kept((u, s, vh), lambda: tuple(svd(x, False)))

    def grads(gs):
        u, _, vh = again()
        return (grad_for((u * gs[0].unsqueeze(-2)) @ vh, x),)

    return record("LinalgSvdvalsBackward", s, (x,), grads)


# -- qr ------------------------------------------------------------------------------------------


def qr(x: Tensor, /, *, mode: str = "reduced") -> QRResult:
    """``(Q, R)`` with ``x = Q @ R`` for each matrix (..., M, N), Q with
    orthonormal columns and R upper triangular: with ``mode="reduced"`` Q
    (..., M, K) and R (..., K, N), K = min(M, N); ``"complete"``: Q (..., M, M)
    and R (..., M, N); PyTorch's ``"r"``: R only (Q empty).

    Examples
    --------
    >>> import tensorplay as tp
    >>> q, r = tp.linalg.qr(tp.tensor([[3.0, 1.0], [4.0, 2.0]], dtype=tp.float64))
    >>> [round(v, 12) for v in r[0].tolist()]
    [-5.0, -2.2]
    """
    fn = "linalg.qr"
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"{fn}() expects mode='reduced', 'complete' or 'r', got {mode!r}")
    matrices(fn, x)
    dtype = float_dtype(fn, x)
    with no_grad():
        q, r, _ = householder(fn, x, dtype, mode == "complete")  # no failure: info only checks the arguments
        if mode == "r":
            q = Tensor._empty((0,), dtype)
    if not needs_grad(x):
        return QRResult(q, r)
    m, n = x.shape[-2:]
    again = kept((q, r), lambda: tuple(qr(x, mode=mode)))

    def grads(gs):
        if mode == "r" or (mode == "complete" and m > n):
            raise RuntimeError(
                "linalg.qr is not differentiable with mode='r', nor with mode='complete' and more rows than "
                f"columns (here {m} x {n}); use mode='reduced'"
            )
        q, r = again()
        return (grad_for(_qr_backward(gs[0], gs[1], q, r), x),)

    q, r = record("LinalgQrBackward", (q, r), (x,), grads)
    return QRResult(q, r)


def _qr_backward(gq: Tensor, gr: Tensor, q: Tensor, r: Tensor) -> Tensor:
    """The gradient of A = Q R, as PyTorch's linalg_qr_backward."""
    m, n = q.shape[-2], r.shape[-1]
    inner = gr @ adjoint(r) - adjoint(q) @ gq
    if m >= n:  # gA = (Q syminvadj(triu(inner)) + gQ) R^-H, syminvadj(X) = X + X^H with Re(diag(X)) halved
        upper = triu(inner)
        diagonal = upper * eye(n, dtype=upper.dtype)
        real_diagonal = diagonal if upper.dtype.kind != "c" else 0.5 * (diagonal + diagonal.conj())
        ga = q @ (upper + adjoint(upper) - real_diagonal) + gq
        return adjoint(solve(r, adjoint(ga)))
    lower = tril(adjoint(inner) - inner)  # of -inner: tril(X - X^H), its (imaginary) diagonal halved
    if lower.dtype.kind == "c":
        lower = lower - 0.5 * lower * eye(m, dtype=lower.dtype)
    ga = adjoint(solve(r.narrow(-1, 0, m), adjoint(q @ lower)))
    pad = Tensor._empty(tuple(ga.shape[:-1]) + (n - m,), ga.dtype).zero_()
    return concat([ga, pad], axis=-1) + q @ gr
