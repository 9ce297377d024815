"""cuSOLVER's routines on the simulator: the same calls as ``cusolver``
(same arguments, same column-major buffers, same ``info``), each computed by
NumPy as one library call of ``simulated`` (a graph node when the stream
captures, run again at each replay and inside conditional bodies).

``numpy.linalg`` does the work where it has the routine: ``eigh`` for syevd,
``svd`` for gesvd, ``qr(mode="raw")`` (LAPACK's geqrf) for geqrf,
``cholesky`` for potrf. NumPy has no LU and no Householder product, so getrf
(partial pivoting, LAPACK's pivots), lu_solves (its triangular solves) and orgqr
are written out here on the views, row and column operations in NumPy. As on
the GPU, nothing raises on a singular or indefinite matrix: ``info`` says
what LAPACK would, and the results are what the arithmetic gives (a division
by a zero pivot gives infinities).
"""

from __future__ import annotations

import numpy as np

from .simulated import Operand, call

__all__ = ["geqrf", "gesvd", "getrf", "lu_solves", "orgqr", "potrf", "syevd"]

_REAL = {"float32": "float32", "float64": "float64", "complex64": "float32", "complex128": "float64"}


def _matrices(ptr: int, batch: int, rows: int, cols: int, dtype: str, ld: int | None = None, stride=None) -> Operand:
    """``batch`` column-major rows x cols matrices at ``ptr``: element (r, c) of
    matrix i at i * stride + r + c * ld, seen as an array indexed [i, r, c]."""
    ld = rows if ld is None else ld
    stride = ld * cols if stride is None else stride
    return Operand(ptr, (batch, rows, cols), (stride, 1, ld), np.dtype(dtype))


def _ints(ptr: int, shape: tuple, dtype=np.int32) -> Operand:
    return Operand.dense(ptr, shape, dtype)


def getrf(dtype: str, batch: int, n: int, a: int, ipiv: int, info: int) -> None:
    """As ``cusolver.getrf``."""
    if not batch or not n:
        return

    def compute(mats, pivots, infos):
        for i in range(batch):
            infos[i] = _lu(mats[i], pivots[i])

    call("getrf", compute, [_matrices(a, batch, n, n, dtype), _ints(ipiv, (batch, n), np.int64), _ints(info, (batch,))])


def _lu(m: np.ndarray, pivots: np.ndarray) -> int:
    """LAPACK's getf2 on ``m`` in place (row interchanges in ``pivots``, 1-based):
    the pivot of column k is its entry of largest |re| + |im| on or below the
    diagonal, as LAPACK's i?amax picks; returns the first zero pivot (1-based) or 0."""
    first_zero = 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for k in range(m.shape[0]):
            column = m[k:, k]
            p = k + int(np.argmax(np.abs(column.real) + np.abs(column.imag)))
            pivots[k] = p + 1
            if m[p, k] != 0:
                if p != k:
                    m[[k, p], :] = m[[p, k], :]
                m[k + 1 :, k] /= m[k, k]
            elif not first_zero:
                first_zero = k + 1
            m[k + 1 :, k + 1 :] -= np.outer(m[k + 1 :, k], m[k, k + 1 :])
    return first_zero


def lu_solves(dtype: str, batch: int, n: int, nrhs: int, trans: str, a: int, b: int) -> None:
    """As ``cusolver.lu_solves``."""
    if not batch or not n or not nrhs:
        return

    def compute(lus, rhs):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            for i in range(batch):
                _triangular_solves(lus[i], rhs[i], trans)

    call("lu_solves", compute, [_matrices(a, batch, n, n, dtype), _matrices(b, batch, n, nrhs, dtype)])


def _triangular_solves(lu: np.ndarray, x: np.ndarray, trans: str) -> None:
    """LAPACK's getrs without its row interchanges: ``x`` (n x nrhs) becomes
    U^-1 L^-1 x ("N") or L^-T U^-T x ("T"), L unit lower."""
    n = lu.shape[0]
    if trans == "N":
        for r in range(n):  # L y = x
            x[r] -= lu[r, :r] @ x[:r]
        for r in reversed(range(n)):  # U x = y
            x[r] = (x[r] - lu[r, r + 1 :] @ x[r + 1 :]) / lu[r, r]
        return
    for r in range(n):  # U^T y = x
        x[r] = (x[r] - lu[:r, r] @ x[:r]) / lu[r, r]
    for r in reversed(range(n)):  # L^T z = y
        x[r] -= lu[r + 1 :, r] @ x[r + 1 :]


def potrf(dtype: str, batch: int, n: int, lower: bool, a: int, info: int) -> None:
    """As ``cusolver.potrf`` (a matrix that is not positive definite is left as it was)."""
    if not batch or not n:
        return

    def compute(mats, infos):
        for i in range(batch):
            m = mats[i]
            h = _hermitian(m, lower)
            try:
                factor = np.linalg.cholesky(h)
            except np.linalg.LinAlgError:
                infos[i] = _first_not_positive(h)
                continue
            infos[i] = 0
            rows, cols = np.tril_indices(n) if lower else np.triu_indices(n)
            m[rows, cols] = (factor if lower else factor.conj().T)[rows, cols]

    call("potrf", compute, [_matrices(a, batch, n, n, dtype), _ints(info, (batch,))])


def _hermitian(m: np.ndarray, lower: bool) -> np.ndarray:
    """The Hermitian matrix of which ``m`` holds the ``lower`` (else upper) triangle."""
    part = np.tril(m) if lower else np.triu(m)
    strict = np.tril(m, -1) if lower else np.triu(m, 1)
    return part + strict.conj().T


def _first_not_positive(h: np.ndarray) -> int:
    """The order of ``h``'s first leading minor that is not positive definite (potrf's info)."""
    for k in range(1, h.shape[0] + 1):
        try:
            np.linalg.cholesky(h[:k, :k])
        except np.linalg.LinAlgError:
            return k
    return h.shape[0]


def syevd(dtype: str, batch: int, n: int, vectors: bool, lower: bool, a: int, w: int, info: int) -> None:
    """As ``cusolver.syevd``."""
    if not batch or not n:
        return

    def compute(mats, values, infos):
        for i in range(batch):
            try:
                if vectors:
                    values[i], mats[i] = np.linalg.eigh(mats[i], UPLO="L" if lower else "U")
                else:
                    values[i] = np.linalg.eigvalsh(mats[i], UPLO="L" if lower else "U")
                infos[i] = 0
            except np.linalg.LinAlgError:
                infos[i] = 1

    real = Operand.dense(w, (batch, n), _REAL[dtype])
    call("syevd", compute, [_matrices(a, batch, n, n, dtype), real, _ints(info, (batch,))])


def gesvd(dtype: str, batch: int, m: int, n: int, job: str, a: int, s: int, u: int, vt: int, info: int) -> None:
    """As ``cusolver.gesvd``."""
    if m < n:
        raise ValueError(f"cusolverDnXgesvd takes m >= n, got {m} x {n}")
    if not batch or not n:
        return
    operands = [_matrices(a, batch, m, n, dtype), Operand.dense(s, (batch, n), _REAL[dtype]), _ints(info, (batch,))]
    if job != "N":
        operands += [_matrices(u, batch, m, m if job == "A" else n, dtype), _matrices(vt, batch, n, n, dtype)]

    def compute(mats, values, infos, *vectors):
        for i in range(batch):
            try:
                if job == "N":
                    values[i] = np.linalg.svd(mats[i], compute_uv=False)
                else:
                    vectors[0][i], values[i], vectors[1][i] = np.linalg.svd(mats[i], full_matrices=job == "A")
                infos[i] = 0
            except np.linalg.LinAlgError:
                infos[i] = 1

    call("gesvd", compute, operands)


def geqrf(dtype: str, batch: int, m: int, n: int, a: int, stride: int, tau: int, info: int) -> None:
    """As ``cusolver.geqrf``."""
    k = min(m, n)
    if not batch or not k:
        return

    def compute(mats, scales, infos):
        for i in range(batch):
            h, scales[i] = np.linalg.qr(mats[i], mode="raw")  # LAPACK's geqrf; h is its output transposed
            mats[i] = h.T
            infos[i] = 0

    operands = [_matrices(a, batch, m, n, dtype, stride=stride), Operand.dense(tau, (batch, k), dtype)]
    call("geqrf", compute, [*operands, _ints(info, (batch,))])


def orgqr(dtype: str, batch: int, m: int, n: int, k: int, a: int, stride: int, tau: int, info: int) -> None:
    """As ``cusolver.orgqr``: Q = H(1) ... H(k) applied to the first ``n``
    columns of the identity, with H(i) = I - tau_i v_i v_i^H (LAPACK's org2r)."""
    if not batch or not n:
        return

    def compute(mats, scales, infos):
        for i in range(batch):
            reflectors, q = mats[i], np.eye(m, n, dtype=mats.dtype)
            for j in reversed(range(k)):
                v = np.zeros(m, mats.dtype)
                v[j], v[j + 1 :] = 1, reflectors[j + 1 :, j]
                q -= scales[i, j] * np.outer(v, v.conj() @ q)
            mats[i] = q
            infos[i] = 0

    operands = [_matrices(a, batch, m, n, dtype, stride=stride), Operand.dense(tau, (batch, k), dtype)]
    call("orgqr", compute, [*operands, _ints(info, (batch,))])
