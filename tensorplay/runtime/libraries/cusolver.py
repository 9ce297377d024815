"""cuSOLVER through nvmath-python: dense factorizations of column-major
matrices on raw pointers.

**The routines.** Each takes a batch of dense column-major matrices (matrix
``i`` at ``ptr + i * stride`` elements, its columns ``ld`` apart) and runs
cuSOLVER's dense 64-bit API on each in turn, on the current stream:
``getrf`` (LU with partial pivoting, cusolverDnXgetrf) and ``lu_solves``
(its two triangular solves, by cuBLAS's trsm), ``potrf`` (Cholesky, Xpotrf), ``syevd``
(Hermitian eigenvalues and vectors, Xsyevd), ``gesvd`` (singular values and
vectors, Xgesvd, which takes m >= n only), ``geqrf`` (Householder QR,
Xgeqrf) and ``orgqr`` (its Q, by the typed cusolverDn<t>orgqr / ungqr: the
64-bit API has none). Pointers are bytes; sizes are elements. The tensor
layer (``_linalg_lapack``) maps row-major tensors onto these: a row-major
matrix is its transpose in column-major order. ``simsolver`` is the same
set of routines in NumPy, for the simulator.

**Handles.** One per thread (with its ``cusolverDnParams``), made at its first
call, or before a capture begins once cuSOLVER is in use; a thread that ends
hands its handle on to the next. Each call sets the handle's stream (the
current one) where it changed.

**Workspaces** come from tensorplay's allocator, so that cuSOLVER never
allocates during a capture: each routine asks for its size (the
``*_bufferSize`` query, kept per shape), takes a block for the call and gives
it back right after, in stream order; on a capturing stream the block comes
from the capture's pool, as any temporary. A host workspace, where a routine
asks one, is a NumPy buffer kept per thread.

**info**: every routine writes one int32 per matrix to ``info`` (device
memory): 0 where it succeeded, ``i > 0`` as LAPACK says (a zero pivot, a
leading minor that is not positive, no convergence). Nothing here reads it:
the caller reads it when it may wait for the device, and keeps it on the
device inside a capture.

``unavailable()`` says why cuSOLVER cannot serve here (None when it can): the
simulator, nvmath-python missing, libcusolver that does not load or start.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from ..backend import CudaError
from ..capture import capture_state, flush_fused, prepare_before_captures, refuse_legacy_launch
from ..memory import allocator
from ..streams import current_stream
from . import cublas
from ._nvmath import LibraryUnavailable, bindings, data_type, library_calls, load, version

__all__ = [
    "DTYPES", "describe", "geqrf", "gesvd", "getrf", "library_version", "lu_solves", "orgqr", "potrf", "syevd",
    "unavailable",
]  # fmt: skip

DTYPES = ("float32", "float64", "complex64", "complex128")

_CUDA_TYPES = {"float32": "CUDA_R_32F", "float64": "CUDA_R_64F", "complex64": "CUDA_C_32F", "complex128": "CUDA_C_64F"}
_REAL = {"float32": "float32", "float64": "float64", "complex64": "float32", "complex128": "float64"}
_ITEMSIZE = {"float32": 4, "float64": 8, "complex64": 8, "complex128": 16}
_ORGQR = {"float32": "sorgqr", "float64": "dorgqr", "complex64": "cungqr", "complex128": "zungqr"}
# The C API's values (cublas_api.h, cusolver_common.h), which cuSOLVER takes as plain ints
_FILL = {True: 0, False: 1}  # cublasFillMode_t: lower?
_EIG_MODE = {False: 0, True: 1}  # cusolverEigMode_t: vectors?
_ADVICE = {
    "CUSOLVER_STATUS_NOT_INITIALIZED": "cuSOLVER could not start; check that its CUDA version suits the driver",
    "CUSOLVER_STATUS_ALLOC_FAILED": "cuSOLVER could not allocate memory; free tensors or call tp.cuda.empty_cache()",
    "CUSOLVER_STATUS_INVALID_VALUE": "cuSOLVER refused an argument of the call (a bug in tensorplay: please report it)",
    "CUSOLVER_STATUS_ARCH_MISMATCH": "this GPU lacks a feature the call needs",
    "CUSOLVER_STATUS_EXECUTION_FAILED": "a cuSOLVER kernel failed to launch",
    "CUSOLVER_STATUS_INTERNAL_ERROR": "cuSOLVER failed inside (an out-of-memory or a driver error)",
    "CUSOLVER_STATUS_NOT_SUPPORTED": "cuSOLVER does not take these types or sizes",
}

_lock = threading.Lock()
_loaded = False
_lib = None  # nvmath.bindings.cusolverDn once cuSOLVER answered
_errors: tuple = ()  # the exceptions its calls raise (nvmath.bindings.cusolver.cuSOLVERError)
_status = None  # nvmath.bindings.cusolver.Status
_reason: str | None = None
_versions = ""  # "nvmath-python 0.8.0, cuSOLVER 12.0.4"
_tls = threading.local()
_free_handles: list[tuple[int, int]] = []  # (handle, params) no thread holds
_sizes: dict[tuple, tuple[int, int]] = {}  # (routine, dtype, sizes...) -> (device bytes, host bytes)


def unavailable() -> str | None:
    """None when cuSOLVER serves ``tp.linalg`` here, else why not (one sentence)."""
    if not _loaded:
        _load()
    return _reason


def library_version(common) -> str:
    """The cuSOLVER version of ``nvmath.bindings.cusolver`` (``common``), loading
    libcusolver; ``LibraryUnavailable`` when it does not load."""
    try:
        return ".".join(str(common.get_property(part)) for part in range(3))  # major, minor, patch
    except Exception as e:
        raise LibraryUnavailable(
            f"libcusolver could not be loaded ({type(e).__name__}: {e}); install NVIDIA's cuSOLVER "
            "(nvidia-cusolver for CUDA 13, nvidia-cusolver-cu12 for CUDA 12) or the CUDA toolkit"
        ) from None


def _load() -> None:
    global _loaded, _reason, _versions
    with _lock:
        if not _loaded:
            _reason, _versions = load("cuSOLVER", _start)
            _loaded = True


def _start() -> str:
    global _lib, _errors, _status
    lib, common = bindings("cusolverDn"), bindings("cusolver")
    solver_version = library_version(common)
    _free_handles.append(_create(lib))  # the first thread's, proving cuSOLVER starts
    _lib, _errors, _status = lib, (common.cuSOLVERError,), common.Status
    return f"nvmath-python {version()}, cuSOLVER {solver_version}"


def describe(calls: str) -> str:
    """``calls`` ("cusolverDnXgetrf + cusolverDnXgetrs") said with the library's versions (for ``explain``)."""
    return f"cuSOLVER ({_versions}) {calls}"


# -- handles ---------------------------------------------------------------------------------


def _create(lib) -> tuple[int, int]:
    """A new handle and its parameters (the default algorithms)."""
    try:
        return lib.create(), lib.create_params()
    except Exception as e:
        raise _failed("cusolverDnCreate", e) from None


class _Handle:
    """This thread's handle and parameters, with the stream last given to it."""

    __slots__ = ("h", "params", "stream", "host", "pool")

    def __init__(self, made: tuple[int, int], pool: list) -> None:
        self.h, self.params = made
        self.stream, self.host, self.pool = None, np.empty(0, np.uint8), pool

    def __del__(self) -> None:  # the thread ended: the next one takes its handle
        self.pool.append((self.h, self.params))


def _thread_handle() -> _Handle:
    th = getattr(_tls, "handle", None)
    if th is None:
        try:
            made = _free_handles.pop()
        except IndexError:
            made = _create(_lib)
        th = _tls.handle = _Handle(made, _free_handles)
    return th


@prepare_before_captures
def _handle_before_capture() -> None:
    """Make the capturing thread's handle outside the capture, once cuSOLVER is in use."""
    if _lib is not None and getattr(_tls, "handle", None) is None:
        _thread_handle()


def _failed(function: str, e: Exception) -> CudaError:
    """The error of a cuSOLVER call that failed with ``e`` (nvmath's cuSOLVERError)."""
    try:
        code = f"CUSOLVER_STATUS_{_status(e.status).name}"
    except Exception:
        code = "CUSOLVER_STATUS_UNKNOWN"
    return CudaError(f"{function} failed: {code}: {_ADVICE.get(code, str(e))}", function, code)


# -- one call: handle, stream, workspace ---------------------------------------------------------


def _run(name: str, key: tuple, query: Callable, body: Callable) -> None:
    """Queue ``body(handle, params, workspace, workspace bytes, host buffer, host
    bytes)`` on the current stream as the routine ``name``, its workspaces sized
    by ``query(handle, params) -> (device bytes, host bytes)`` (asked once per ``key``)."""
    s = current_stream()
    if capture_state.active:
        refuse_legacy_launch(name, s)
        flush_fused()
    with library_calls():
        th = getattr(_tls, "handle", None) or _thread_handle()
        try:
            if th.stream != s.handle or capture_state.active:  # a capture's stream may take a freed one's address
                _lib.set_stream(th.h, s.handle)
                th.stream = s.handle
            sizes = _sizes.get(key)
            if sizes is None:
                sizes = _sizes[key] = tuple(int(v) for v in query(th.h, th.params))
            device_bytes, host_bytes = sizes
            if th.host.nbytes < host_bytes:
                th.host = np.empty(host_bytes, np.uint8)
            block = allocator.allocate(max(device_bytes, 1), s)
            try:
                body(th.h, th.params, block.ptr, device_bytes, th.host.ctypes.data if host_bytes else 0, host_bytes)
            finally:
                allocator.free(block)  # in stream order: later work on this stream may reuse it
        except _errors as e:
            th.stream = None  # set it again at the next call
            raise _failed(name, e) from None


def _types(dtype: str) -> tuple[int, int, int]:
    """(the matrices' cudaDataType, the real one of ``dtype``, its item size)."""
    return data_type(_CUDA_TYPES[dtype]), data_type(_CUDA_TYPES[_REAL[dtype]]), _ITEMSIZE[dtype]


# -- the routines --------------------------------------------------------------------------------


def getrf(dtype: str, batch: int, n: int, a: int, ipiv: int, info: int) -> None:
    """LU factorisation with partial pivoting of ``batch`` n x n matrices at ``a``
    (lda n), in place; ``ipiv``: int64 (batch, n), 1-based rows; ``info``: int32 (batch,)."""
    if not batch or not n:
        return
    t, _, size = _types(dtype)

    def body(h, p, ws, ws_bytes, host, host_bytes):
        for i in range(batch):
            _lib.xgetrf(
                h, p, n, n, t, a + i * n * n * size, n, ipiv + i * n * 8, t, ws, ws_bytes, host, host_bytes,
                info + 4 * i,
            )  # fmt: skip

    _run("cusolverDnXgetrf", ("getrf", dtype, n), lambda h, p: _lib.xgetrf_buffer_size(h, p, n, n, t, a, n, t), body)


def lu_solves(dtype: str, batch: int, n: int, nrhs: int, trans: str, a: int, b: int) -> None:
    """The triangular halves of LAPACK's getrs on ``batch`` LU factors at ``a``
    (``getrf``'s output), the row interchanges left to the caller: B (n x
    nrhs at ``b``, ldb n) becomes U^-1 L^-1 B ("N") or L^-T U^-T B ("T"), by
    cuBLAS's trsm (see ``cublas``: cuSOLVER's Xgetrs would allocate inside a
    capture)."""
    reason = cublas.unavailable()
    if reason is not None:
        raise LibraryUnavailable(f"LU solves run on cuBLAS on the GPU, which cannot be used here: {reason}")
    for lower, unit in ((False, False), (True, True)) if trans == "T" else ((True, True), (False, False)):
        cublas.trsm(dtype, batch, n, nrhs, a, b, lower, unit, trans == "T")


def potrf(dtype: str, batch: int, n: int, lower: bool, a: int, info: int) -> None:
    """Cholesky factorisation of ``batch`` Hermitian n x n matrices at ``a``, in
    place: only the ``lower`` (else upper) triangle is read and written."""
    if not batch or not n:
        return
    t, _, size = _types(dtype)
    uplo = _FILL[lower]

    def body(h, p, ws, ws_bytes, host, host_bytes):
        for i in range(batch):
            _lib.xpotrf(h, p, uplo, n, t, a + i * n * n * size, n, t, ws, ws_bytes, host, host_bytes, info + 4 * i)

    query = lambda h, p: _lib.xpotrf_buffer_size(h, p, uplo, n, t, a, n, t)  # noqa: E731
    _run("cusolverDnXpotrf", ("potrf", dtype, n, lower), query, body)


def syevd(dtype: str, batch: int, n: int, vectors: bool, lower: bool, a: int, w: int, info: int) -> None:
    """Eigenvalues (ascending, real: ``w``, (batch, n)) and, with ``vectors``, the
    eigenvectors (the columns of ``a``, overwritten) of ``batch`` Hermitian n x n
    matrices at ``a``, of which only the ``lower`` (else upper) triangle is read."""
    if not batch or not n:
        return
    t, tw, size = _types(dtype)
    real_size = _ITEMSIZE[_REAL[dtype]]
    jobz, uplo = _EIG_MODE[vectors], _FILL[lower]

    def body(h, p, ws, ws_bytes, host, host_bytes):
        for i in range(batch):
            _lib.xsyevd(
                h, p, jobz, uplo, n, t, a + i * n * n * size, n, tw, w + i * n * real_size, t, ws, ws_bytes,
                host, host_bytes, info + 4 * i,
            )  # fmt: skip

    query = lambda h, p: _lib.xsyevd_buffer_size(h, p, jobz, uplo, n, t, a, n, tw, w, t)  # noqa: E731
    _run("cusolverDnXsyevd", ("syevd", dtype, n, vectors, lower), query, body)


def gesvd(dtype: str, batch: int, m: int, n: int, job: str, a: int, s: int, u: int, vt: int, info: int) -> None:
    """Singular values (descending, real: ``s``, (batch, n)) of ``batch`` m x n
    matrices at ``a`` (lda m, destroyed), m >= n, and with ``job`` "A" all m
    columns of U (m x m at ``u``) and V^H (n x n at ``vt``), with "S" the first
    n columns of U (m x n), with "N" neither (``u``, ``vt`` unused)."""
    if m < n:
        raise ValueError(f"cusolverDnXgesvd takes m >= n, got {m} x {n}")
    if not batch or not n:
        return
    t, ts, size = _types(dtype)
    real_size = _ITEMSIZE[_REAL[dtype]]
    u_cols = m if job == "A" else n
    jobu = jobvt = ord(job)  # signed char arguments
    ldu, ldvt = max(m, 1), max(n, 1)
    u_step, vt_step = (m * u_cols * size, n * n * size) if job != "N" else (0, 0)

    def body(h, p, ws, ws_bytes, host, host_bytes):
        for i in range(batch):
            _lib.xgesvd(
                h, p, jobu, jobvt, m, n, t, a + i * m * n * size, m, ts, s + i * n * real_size,
                t, u + i * u_step, ldu, t, vt + i * vt_step, ldvt, t, ws, ws_bytes, host, host_bytes, info + 4 * i,
            )  # fmt: skip

    query = lambda h, p: _lib.xgesvd_buffer_size(h, p, jobu, jobvt, m, n, t, a, m, ts, s, t, u, ldu, t, vt, ldvt, t)  # noqa: E731
    _run("cusolverDnXgesvd", ("gesvd", dtype, m, n, job), query, body)


def geqrf(dtype: str, batch: int, m: int, n: int, a: int, stride: int, tau: int, info: int) -> None:
    """Householder QR of ``batch`` m x n matrices at ``a`` (lda m, ``stride``
    elements apart), in place: R on and above the diagonal, the reflectors
    below, their scales in ``tau`` ((batch, min(m, n)))."""
    k = min(m, n)
    if not batch or not k:
        return
    t, _, size = _types(dtype)

    def body(h, p, ws, ws_bytes, host, host_bytes):
        for i in range(batch):
            _lib.xgeqrf(
                h, p, m, n, t, a + i * stride * size, m, t, tau + i * k * size, t, ws, ws_bytes, host, host_bytes,
                info + 4 * i,
            )  # fmt: skip

    query = lambda h, p: _lib.xgeqrf_buffer_size(h, p, m, n, t, a, m, t, tau, t)  # noqa: E731
    _run("cusolverDnXgeqrf", ("geqrf", dtype, m, n), query, body)


def orgqr(dtype: str, batch: int, m: int, n: int, k: int, a: int, stride: int, tau: int, info: int) -> None:
    """The first ``n`` columns of Q (m x n, in place at ``a``, lda m, ``stride``
    elements apart) from the ``k`` reflectors ``geqrf`` left there and ``tau``
    ((batch, k)); m >= n >= k. The typed routine, whose sizes are 32-bit ints."""
    if not batch or not n:
        return
    if m > (1 << 31) - 1:
        raise ValueError(f"cusolverDn{_ORGQR[dtype]} takes at most 2**31 - 1 rows, got {m}")
    _, _, size = _types(dtype)
    name = _ORGQR[dtype]
    routine, query_size = getattr(_lib, name), getattr(_lib, f"{name}_buffer_size")

    def body(h, p, ws, ws_bytes, host, host_bytes):
        for i in range(batch):
            routine(h, m, n, k, a + i * stride * size, m, tau + i * k * size, ws, ws_bytes // size, info + 4 * i)

    query = lambda h, p: (query_size(h, m, n, k, a, m, tau) * size, 0)  # noqa: E731 (the legacy API counts elements)
    _run(f"cusolverDn{name}", ("orgqr", dtype, m, n, k), query, body)
