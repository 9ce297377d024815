"""The factorisations behind ``tp.linalg``, on tensors: LU, Cholesky, the
Hermitian eigendecomposition, the SVD and QR, each run by cuSOLVER on a GPU
(``runtime/libraries/cusolver.py``) and by its NumPy twin on the simulator
(``simsolver.py``), through the same calls on the same buffers.

**Layouts.** The routines are column-major, where a row-major matrix is its
transpose, and they overwrite their input: each factorisation works on a new
dense copy of the input (broadcast over the batch, cast to the result dtype),
laid out so that no transpose is copied where the algebra allows it:

- LU factors the copy of A as A^T; LAPACK's getrs with "T" (the pivots'
  row interchanges by a gather, two triangular solves) then solves A X = B for B
  copied transposed (column-major B), and with "N" solves A^T Y = I, whose
  column-major Y read row-major is A^-1 itself.
- A Hermitian A read column-major is conj(A): potrf on its "upper" triangle
  (A's lower) leaves L read row-major, on its "lower" one A's upper factor
  U = L^H; syevd on its upper triangle (A's lower, as NumPy reads) leaves
  conj(V) column by column, whose row-major reading is V^H.
- gesvd takes m >= n: a wide or square A is passed as its transpose, whose
  U and V^H read row-major are A's V^H and U; a tall one is copied
  transposed (column-major A) and its factors are read through ``.mT``.
- geqrf needs A column-major: it is copied transposed, with room for Q's
  columns when Q is complete; R is read before orgqr overwrites the copy.

**Failures.** LU of a singular matrix, Cholesky of one that is not positive
definite, an eigen- or singular value iteration that does not converge: each
routine writes an ``info`` per matrix. Called eagerly, a function that must
fail reads it (one wait for the device, as PyTorch does) and raises
``LinAlgError`` naming the matrix of the batch; inside a capture it cannot
read it back, so the results of the matrices that failed become NaN on the
device instead, the same on both backends (``settle``). The ``*_ex``
functions return ``info`` and never wait.
"""

from __future__ import annotations

import numpy as np

from . import _dtype as dt
from ._creation_functions import eye, tril, triu
from ._grad_mode import is_grad_enabled, no_grad
from ._indexing_functions import take_along_axis
from ._shape import broadcast_shapes, numel
from ._tape import needs_grad, sum_to
from ._tensor import Tensor
from .kernels import pivots as pivot_kernels
from .runtime.backend import CaptureError
from .runtime.backend import get as get_backend
from .runtime.capture import capture_state
from .runtime.launch import grid_1d, launch
from .runtime.libraries import cusolver, simsolver
from .runtime.libraries._nvmath import LibraryUnavailable
from .runtime.streams import current_stream

__all__ = [
    "FLOATS", "LinAlgError", "adjoint", "can_wait", "cholesky_factor", "eigen", "float_dtype", "grad_for",
    "householder", "inverse", "kept", "lu", "matrices", "settle", "singular", "solve_system", "solver",
]  # fmt: skip

FLOATS = (dt.float32, dt.float64, dt.complex64, dt.complex128)


class LinAlgError(RuntimeError):
    """A matrix that a linear algebra function cannot take: singular, not
    positive definite, or one whose iteration did not converge (as
    ``torch.linalg.LinAlgError``)."""


# -- arguments -----------------------------------------------------------------------------------


def matrices(fn: str, x, square: bool = False) -> Tensor:
    """``x`` checked to be a tensor of matrices (at least 2 dimensions, square if asked)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}() expects a tensor, got {type(x).__name__}")
    if x.ndim < 2:
        raise ValueError(f"{fn}() expects a matrix or a stack of matrices (at least 2 dimensions), got shape {x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{fn}() expects square matrices, got shape {x.shape}")
    return x


def float_dtype(fn: str, *tensors: Tensor) -> dt.DType:
    """The dtype the tensors promote to, which must be one the factorisations
    take (integers are refused, as the standard leaves them unspecified and
    PyTorch refuses them)."""
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = dt.promote(dtype, t.dtype)
    if dtype not in FLOATS:
        got = " and ".join(str(t.dtype) for t in tensors)
        raise TypeError(
            f"{fn}() expects float32, float64, complex64 or complex128 tensors, got {got}; convert first "
            "(x.to(tp.float64))"
        )
    return dtype


def solver(fn: str):
    """The module whose routines run here: ``cusolver`` on a GPU, ``simsolver``
    on the simulator; ``LibraryUnavailable`` on a GPU where cuSOLVER is not."""
    if get_backend().name != "cuda":
        return simsolver
    reason = cusolver.unavailable()
    if reason is not None:
        raise LibraryUnavailable(f"{fn}() runs on cuSOLVER on the GPU, which cannot be used here: {reason}")
    return cusolver


def _copy(x: Tensor, shape: tuple, dtype: dt.DType, transposed: bool = False) -> Tensor:
    """A new dense tensor of ``shape`` holding ``x`` broadcast and cast (or,
    ``transposed``, its matrices' transposes): the buffer a routine overwrites."""
    out = Tensor._empty(shape, dtype)
    if not out.numel():
        return out
    if transposed:
        x = x.expand(tuple(shape[:-2]) + (shape[-1], shape[-2])).transpose(-1, -2)
    out.copy_(x if x.dtype is dtype else x.to(dtype))
    return out


def _info(batch_shape: tuple, ran: bool) -> Tensor:
    """The int32 ``info`` of each matrix; zeros where no routine runs (empty matrices)."""
    info = Tensor._empty(tuple(batch_shape), dt.int32)
    return info if ran else info.zero_()


# -- the factorisations --------------------------------------------------------------------------


def lu(fn: str, x: Tensor, dtype: dt.DType, batch_shape: tuple | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """getrf of ``x`` (broadcast to ``batch_shape``): (the factors, of A^T read
    column-major, so that the diagonal is U's; the int64 pivots, 1-based; info)."""
    n = x.shape[-1]
    batch_shape = tuple(x.shape[:-2]) if batch_shape is None else tuple(batch_shape)
    factors = _copy(x, batch_shape + (n, n), dtype)
    pivots = Tensor._empty(batch_shape + (n,), dt.int64)
    info = _info(batch_shape, n > 0)
    solver(fn).getrf(dtype.name, numel(batch_shape), n, factors._ptr, pivots._ptr, info._ptr)
    return factors, pivots, info


def solve_system(fn: str, a: Tensor, b: Tensor, dtype: dt.DType, vector: bool) -> tuple[Tensor, Tensor]:
    """``A X = B`` for every matrix of the broadcast batch: (X, info); ``vector``:
    ``b`` is one vector (n,), and X has A's batch shape and n."""
    n = a.shape[-1]
    k = 1 if vector else b.shape[-1]
    batch = broadcast_shapes(a.shape[:-2], () if vector else b.shape[:-2])
    factors, pivots, info = lu(fn, a, dtype, batch)
    rhs = _copy(b.reshape(1, n) if vector else b, tuple(batch) + (k, n), dtype, transposed=not vector)
    _solves(fn, "T", factors, pivots, rhs, dtype)
    return (rhs.reshape(tuple(batch) + (n,)) if vector else rhs.transpose(-1, -2)), info


def inverse(fn: str, a: Tensor, dtype: dt.DType) -> tuple[Tensor, Tensor]:
    """A^-1 for every matrix: (the inverses, info)."""
    factors, pivots, info = lu(fn, a, dtype)
    identity = _copy(eye(a.shape[-1], dtype=dtype), tuple(a.shape), dtype)
    _solves(fn, "N", factors, pivots, identity, dtype)  # A^T Y = I, column-major: Y read row-major is A^-1
    return identity, info


def _solves(fn: str, trans: str, factors: Tensor, pivots: Tensor, rhs: Tensor, dtype: dt.DType) -> None:
    """LAPACK's getrs on ``rhs`` (column-major right-hand sides, each (nrhs, n)
    row-major), in place: the pivots' row interchanges, a gather of
    tensorplay's, before ("N") or after ("T") the two triangular solves."""
    n, nrhs = factors.shape[-1], rhs.shape[-2]
    batch = numel(factors.shape[:-2])
    if not batch or not n or not nrhs:
        return
    order, inverse = Tensor._empty((batch, n), dt.int64), Tensor._empty((batch, n), dt.int64)
    launch(pivot_kernels.row_order, *grid_1d(batch), [pivots.reshape(batch, n), order, inverse])
    if trans == "N":
        rhs.copy_(take_along_axis(rhs, order.reshape(rhs.shape[:-2] + (1, n)), axis=-1))
    solver(fn).lu_solves(dtype.name, batch, n, nrhs, trans, factors._ptr, rhs._ptr)
    if trans == "T":
        rhs.copy_(take_along_axis(rhs, inverse.reshape(rhs.shape[:-2] + (1, n)), axis=-1))


def cholesky_factor(fn: str, a: Tensor, dtype: dt.DType, upper: bool) -> tuple[Tensor, Tensor]:
    """(L with A = L L^H, or U with A = U^H U when ``upper``; info). L is read
    from A's lower triangle, U from its upper one."""
    n = a.shape[-1]
    work = _copy(a, tuple(a.shape), dtype)
    info = _info(tuple(a.shape[:-2]), n > 0)
    solver(fn).potrf(dtype.name, numel(a.shape[:-2]), n, upper, work._ptr, info._ptr)
    return (triu(work) if upper else tril(work)), info


def refuse_in_capture(fn: str, routine: str) -> None:
    """cuSOLVER's eigen- and singular value routines (syevd, gesvd) cannot run
    inside a capture: on the H200 they fail (CUSOLVER_STATUS_INTERNAL_ERROR) in
    a graph and crash in a while body, as they wait for the host inside. They
    are refused there with what to do, on the simulator too."""
    s = current_stream()
    if s.is_capturing():
        raise CaptureError(
            f"{fn}() cannot be captured in a graph: cuSOLVER's {routine}, which computes it, waits for the host "
            f"inside, which a capture (stream {s.handle:#x}) forbids; call it before capture_begin() or after "
            "capture_end() (LU, Cholesky and QR: solve, inv, det, cholesky, qr are captured, in while bodies too)"
        )


def eigen(
    fn: str, a: Tensor, dtype: dt.DType, vectors: bool, upper: bool = False
) -> tuple[Tensor, Tensor | None, Tensor]:
    """(eigenvalues ascending, eigenvectors as columns or None, info) of the
    Hermitian matrices of ``a``, read from their lower (``upper``: upper) triangles."""
    refuse_in_capture(fn, "syevd")
    n = a.shape[-1]
    work = _copy(a, tuple(a.shape), dtype)
    values = Tensor._empty(tuple(a.shape[:-1]), dt.real_dtype(dtype))
    info = _info(tuple(a.shape[:-2]), n > 0)
    solver(fn).syevd(dtype.name, numel(a.shape[:-2]), n, vectors, upper, work._ptr, values._ptr, info._ptr)
    if not vectors:
        return values, None, info
    v = work.transpose(-1, -2)  # the rows of work are conj(v_j)
    return values, (v.conj() if dtype.kind == "c" else v), info


def singular(fn: str, a: Tensor, dtype: dt.DType, job: str) -> tuple[Tensor | None, Tensor, Tensor | None, Tensor]:
    """(U, S descending, V^H, info) of every matrix: ``job`` "A" (U m x m, V^H
    n x n), "S" (the first min(m, n) of each) or "N" (S only; U, V^H None)."""
    refuse_in_capture(fn, "gesvd")
    *batch, m, n = a.shape
    k = min(m, n)
    batch = tuple(batch)
    values = Tensor._empty(batch + (k,), dt.real_dtype(dtype))
    info = _info(batch, k > 0)
    if not k:  # no singular value: the vectors are any orthonormal basis
        u = _copy(eye(m, m if job == "A" else 0, dtype=dtype), batch + (m, m if job == "A" else 0), dtype)
        vh = _copy(eye(n if job == "A" else 0, n, dtype=dtype), batch + (n if job == "A" else 0, n), dtype)
        return (None, values, None, info) if job == "N" else (u, values, vh, info)
    wide = m <= n  # pass A^T (rows: n >= m), whose factors read row-major are A's V^H and U
    rows, cols = (n, m) if wide else (m, n)
    work = _copy(a, batch + (cols, rows), dtype, transposed=not wide)  # column-major rows x cols
    u_cols = rows if job == "A" else cols
    left = Tensor._empty(batch + (u_cols, rows), dtype) if job != "N" else None  # column-major rows x u_cols
    right = Tensor._empty(batch + (cols, cols), dtype) if job != "N" else None
    solver(fn).gesvd(
        dtype.name, numel(batch), rows, cols, job, work._ptr, values._ptr,
        left._ptr if left is not None else 0, right._ptr if right is not None else 0, info._ptr,
    )  # fmt: skip
    if job == "N":
        return None, values, None, info
    if wide:
        return right, values, left, info  # V'^H read row-major is conj(V') = U; U' read row-major is U'^T = V^H
    return left.transpose(-1, -2), values, right.transpose(-1, -2), info


def householder(fn: str, a: Tensor, dtype: dt.DType, complete: bool) -> tuple[Tensor, Tensor, Tensor]:
    """(Q, R, info) of every matrix: Q m x k and R k x n (k = min(m, n)), or
    with ``complete`` Q m x m and R m x n."""
    *batch, m, n = a.shape
    batch, k = tuple(batch), min(m, n)
    q_cols = m if complete else k
    columns = max(n, q_cols)
    work = Tensor._empty(batch + (columns, m), dtype)  # column-major m x columns: A in the first n
    if work.numel():
        work.narrow(-2, 0, n).copy_(a.transpose(-1, -2) if a.dtype is dtype else a.to(dtype).transpose(-1, -2))
    scales = Tensor._empty(batch + (k,), dtype)
    info = _info(batch, k > 0)
    lib, count = solver(fn), numel(batch)
    lib.geqrf(dtype.name, count, m, n, work._ptr, columns * m, scales._ptr, info._ptr)
    r = triu(work.narrow(-2, 0, n).transpose(-1, -2).narrow(-2, 0, m if complete else k))
    lib.orgqr(dtype.name, count, m, q_cols, k, work._ptr, columns * m, scales._ptr, info._ptr)
    q = work.narrow(-2, 0, q_cols).transpose(-1, -2)
    if not k and q.numel():  # no reflector: Q is the identity's first columns
        q.copy_(eye(m, q_cols, dtype=dtype))
    return q, r, info


# -- failures ------------------------------------------------------------------------------------


def can_wait() -> bool:
    """Whether the host may read the device now: no capture on the current stream,
    and none elsewhere that prohibits a wait (a global one)."""
    return not capture_state.active or (not current_stream().is_capturing() and capture_state.prohibiting() is None)


def settle(fn: str, info: Tensor, results: tuple, failure: str) -> tuple:
    """``results`` of a factorisation that may fail (see the module docstring):
    eagerly, raise ``LinAlgError`` where an ``info`` is not 0 (``failure``
    formats the message with ``{matrix}`` and ``{info}``); inside a capture,
    or while another thread captures globally, NaN in the results of those
    matrices instead, with no wait."""
    if not info.numel():
        return results
    if can_wait():
        codes = info.numpy()
        bad = np.flatnonzero(codes)
        if bad.size:
            where = np.unravel_index(bad[0], codes.shape)
            matrix = f" (matrix {tuple(int(i) for i in where)} of the batch)" if codes.ndim else ""
            code = int(codes.flat[bad[0]])
            raise LinAlgError(failure.format(fn=fn, matrix=matrix, info=code, index=code - 1))
        return results
    with no_grad():
        scale = (info == 0).to(dt.float64)
        scale = scale / scale  # 1 where it succeeded, NaN (0 / 0) where it failed
    out = []
    for r in results:
        if r is None:
            out.append(None)
            continue
        mask = scale.to(dt.real_dtype(r.dtype)).reshape(tuple(info.shape) + (1,) * (r.ndim - info.ndim))
        out.append(r * mask)
    return tuple(out)


SINGULAR = "{fn}: the input matrix{matrix} is singular: its LU factorisation met a zero pivot at step {info}"
NOT_POSITIVE = "{fn}: the input matrix{matrix} is not positive-definite: its leading minor of order {info} is not"
NO_CONVERGENCE = "{fn}: the algorithm did not converge for the input matrix{matrix} (info {info})"


# -- what the backwards share --------------------------------------------------------------------


def adjoint(x: Tensor) -> Tensor:
    """The conjugate transpose of each matrix of ``x`` (a real one's transpose,
    a view): the backwards are written with it, so that they serve complex
    matrices as PyTorch's do (``gA = -A^-H gY A^-H`` for the inverse)."""
    t = x.transpose(-1, -2)
    return t.conj() if x.dtype.kind == "c" else t


def grad_for(g, x):
    """``g`` as the gradient of input ``x``: summed over what was broadcast, in
    ``x``'s dtype; None where ``x`` needs none."""
    if g is None or not needs_grad(x):
        return None
    g = sum_to(g, x.shape)
    return g if g.dtype is x.dtype else g.to(x.dtype)


def kept(out, again):
    """A forward's result (a tensor or a tuple) as its backward uses it: a
    function giving ``again()`` (the result recomputed, recorded) when the
    gradient's own graph is being made (``create_graph=True``), else ``out``'s
    values (detached: a backward that held the result would make a cycle)."""
    data = tuple(o.detach() for o in out) if isinstance(out, tuple) else out.detach()
    return lambda: again() if is_grad_enabled() else data
