"""cuBLAS through nvmath-python: products of row-major matrices on raw pointers.

**The call.** A ``Gemm`` is one product ``C = A @ B``, or a strided batch of
them: C (batch, m, n) C-contiguous; A (m, k) of entry i at ``a + i *
stride_a`` elements with its rows ``lda`` apart, or, ``trans_a``, stored as its
transpose (its columns ``lda`` apart; ``stride_a`` 0 repeats one matrix); B
likewise. cuBLAS is column-major, where a row-major matrix is its transpose:
the call computes C^T = B^T A^T (operands swapped, m and n swapped), which
writes C row-major with no copy (the complex types too: a transpose, never a
conjugate transpose). float16, bfloat16 and float32 multiply on
the tensor cores and sum in float32 (``CUBLAS_COMPUTE_32F``; the half types
rounded once at the store, reductions kept in float32; float32 exact unless
TF32 is asked for: ``CUBLAS_COMPUTE_32F_FAST_TF32``); float64 sums in float64
(``CUBLAS_COMPUTE_64F``); complex64 and complex128 as float32 and float64.

**Triangular solves.** ``trsm`` solves with a batch of column-major
triangles, one cublas<t>trsm per matrix: the two halves of an LU solve
(``tp.linalg.solve``, ``inv``). cuSOLVER's Xgetrs does the same through a
cuBLAS handle of its own, whose workspace cannot be given: inside a capture it
allocates (graph memory nodes, which a conditional body may not hold).

**Handles.** One per thread, made at its first product, or before a capture it
begins once cuBLAS is in use (``prepare_before_captures``); a thread that ends
hands its handle on to the next. Each call sets the handle's stream (the
current one) and workspace where they changed.

**Workspaces** come from tensorplay's allocator, so that cuBLAS never allocates
during a capture: 32 MiB per stream, made at the stream's first eager product
and kept while the stream lives; on a capturing stream (a conditional body's
too) a block of the capture's pool for that one call, given back at once, as
any temporary: the graph's later work may reuse it, in stream order, and it
stays the graph's while the graph lives.

``unavailable()`` says why cuBLAS cannot serve here (None when it can): the
simulator, nvmath-python missing, libcublas that does not load or start. It
imports nvmath-python the first time it is asked on a GPU.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from ..backend import CudaError
from ..capture import capture_state, flush_fused, prepare_before_captures, refuse_legacy_launch
from ..memory import allocator
from ..streams import current_stream
from ._nvmath import LibraryUnavailable, bindings, data_type, library_calls, load, version

__all__ = [
    "DTYPES", "MAX_DIM", "WORKSPACE_BYTES", "Gemm", "describe", "library_version", "trsm", "unavailable",
    "with_workspace",
]  # fmt: skip

DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")
MAX_DIM = (1 << 31) - 1  # cuBLAS's int arguments: sizes, leading dimensions, batch count
WORKSPACE_BYTES = 32 << 20  # what cuBLAS asks for on Hopper

_CUDA_TYPES = {
    "float16": "CUDA_R_16F", "bfloat16": "CUDA_R_16BF", "float32": "CUDA_R_32F", "float64": "CUDA_R_64F",
    "complex64": "CUDA_C_32F", "complex128": "CUDA_C_64F",
}  # fmt: skip
# alpha = 1 and beta = 0 in the type cuBLAS reads them in (the compute precision; complex for complex
# products), read from the host at each call
_SCALAR_TYPES = {"float64": np.float64, "complex64": np.complex64, "complex128": np.complex128}
_SCALARS = {name: (np.ones(1, t), np.zeros(1, t)) for name, t in {**_SCALAR_TYPES, "float32": np.float32}.items()}
_ADVICE = {
    "CUBLAS_STATUS_NOT_INITIALIZED": "cuBLAS could not start; check that its CUDA version suits the driver",
    "CUBLAS_STATUS_ALLOC_FAILED": "cuBLAS could not allocate memory; free tensors or call tp.cuda.empty_cache()",
    "CUBLAS_STATUS_INVALID_VALUE": "cuBLAS refused an argument of the call (a bug in tensorplay: please report it)",
    "CUBLAS_STATUS_ARCH_MISMATCH": "this GPU lacks a feature the call needs",
    "CUBLAS_STATUS_EXECUTION_FAILED": "a cuBLAS kernel failed to launch",
    "CUBLAS_STATUS_NOT_SUPPORTED": "cuBLAS does not take these types or layouts",
}
_TRSM = {"float32": "strsm", "float64": "dtrsm", "complex64": "ctrsm", "complex128": "ztrsm"}
_FALLBACK = "; set tp.backends.matmul.library = False to use tensorplay's own kernels"

_lock = threading.Lock()
_loaded = False
_lib = None  # nvmath.bindings.cublas once cuBLAS answered
_reason: str | None = None
_versions = ""  # "nvmath-python 1.0.1, cuBLAS 13.1.0"
_tls = threading.local()
_free_handles: list[int] = []  # handles no thread holds
_workspaces: dict[int, object] = {}  # stream handle -> its eager workspace (an allocator Block)


def unavailable() -> str | None:
    """None when cuBLAS serves products here, else why not (one sentence)."""
    if not _loaded:
        _load()
    return _reason


def library_version(lib) -> str:
    """The cuBLAS version of the bindings module ``lib``, loading libcublas;
    ``LibraryUnavailable`` when it does not load."""
    try:
        return ".".join(str(lib.get_property(part)) for part in range(3))  # major, minor, patch
    except Exception as e:
        raise LibraryUnavailable(
            f"libcublas could not be loaded ({type(e).__name__}: {e}); install NVIDIA's cuBLAS "
            "(nvidia-cublas for CUDA 13, nvidia-cublas-cu12 for CUDA 12) or the CUDA toolkit"
        ) from None


def _load() -> None:
    global _loaded, _reason, _versions
    with _lock:
        if not _loaded:
            _reason, _versions = load("cuBLAS", _start)
            _loaded = True


def _start() -> str:
    global _lib
    lib = bindings("cublas")
    cublas_version = library_version(lib)
    _free_handles.append(_create(lib))  # the first thread's, proving cuBLAS starts
    _lib = lib
    return f"nvmath-python {version()}, cuBLAS {cublas_version}"


# -- handles and workspaces --------------------------------------------------------------------


def _create(lib) -> int:
    """A new handle: scalars read from the host, reductions in the compute type."""
    try:
        h = lib.create()
    except Exception as e:
        raise _failed(lib, "cublasCreate", e) from None
    lib.set_pointer_mode(h, lib.PointerMode.HOST)
    lib.set_math_mode(h, lib.Math.DEFAULT_MATH | lib.Math.DISALLOW_REDUCED_PRECISION_REDUCTION)
    return h


class _Handle:
    """This thread's handle, with the stream and workspace last given to it."""

    __slots__ = ("h", "stream", "workspace", "pool")

    def __init__(self, h: int, pool: list) -> None:
        self.h, self.stream, self.workspace, self.pool = h, None, None, pool

    def __del__(self) -> None:  # the thread ended: the next one takes its handle
        self.pool.append(self.h)


def _thread_handle() -> _Handle:
    th = getattr(_tls, "handle", None)
    if th is None:
        try:
            h = _free_handles.pop()
        except IndexError:
            h = _create(_lib)
        th = _tls.handle = _Handle(h, _free_handles)
    return th


@prepare_before_captures
def _handle_before_capture() -> None:
    """Make the capturing thread's handle outside the capture, once cuBLAS is in use."""
    if _lib is not None and getattr(_tls, "handle", None) is None:
        _thread_handle()


def _stream_workspace(s) -> int:
    """The eager workspace of stream ``s``, made at its first product."""
    block = _workspaces.get(s.handle)
    if block is not None:
        return block.ptr
    with _lock:
        block = _workspaces.get(s.handle)
        if block is None:
            block = _workspaces[s.handle] = allocator.allocate(WORKSPACE_BYTES, s)
            try:
                weakref.finalize(s, _release_workspace, s.handle, block)
            except TypeError:  # a stream that cannot be referenced weakly: kept for the process
                pass
    return block.ptr


def _release_workspace(key: int, block) -> None:
    """The stream went: its workspace goes back to the allocator (once)."""
    if _workspaces.get(key) is block:
        del _workspaces[key]
        allocator.free(block)


def _failed(lib, function: str, e: Exception) -> CudaError:
    """The error of a cuBLAS call that failed with ``e`` (nvmath's cuBLASError)."""
    try:
        code = f"CUBLAS_STATUS_{lib.Status(e.status).name}"
    except Exception:
        code = "CUBLAS_STATUS_UNKNOWN"
    advice = _ADVICE.get(code, str(e))
    return CudaError(f"{function} failed: {code}: {advice}{_FALLBACK}", function, code)


# -- the product ---------------------------------------------------------------------------------


def _compute_name(dtype: str, tf32: bool) -> str:
    if dtype in ("float64", "complex128"):
        return "COMPUTE_64F"
    return "COMPUTE_32F_FAST_TF32" if tf32 and dtype in ("float32", "complex64") else "COMPUTE_32F"


def describe(dtype: str, batch: int = 1, tf32: bool = False) -> str:
    """How cuBLAS computes a product of ``dtype`` (for ``explain``; cuBLAS available)."""
    call = "cublasGemmStridedBatchedEx" if batch > 1 else "cublasGemmEx"
    compute = _compute_name(dtype, tf32)
    if dtype in ("float64", "complex128"):
        how = f"{dtype} products and sums"
    elif dtype == "complex64" and not compute.endswith("TF32"):
        how = "complex64 products and sums in float32, no TF32 (tp.backends.matmul.allow_tf32 is False)"
    elif dtype not in ("float32", "complex64"):
        how = f"tensor-core products summed in float32, rounded once to {dtype}"
    elif compute.endswith("TF32"):
        how = "TF32 tensor-core products (10-bit mantissas) summed in float32 (tp.backends.matmul.allow_tf32 is True)"
    else:
        how = "float32 products and sums, no TF32 (tp.backends.matmul.allow_tf32 is False)"
    return f"cuBLAS ({_versions}) {call}, CUBLAS_{compute}: {how}"


class Gemm:
    """``C = A @ B`` for row-major matrices, by cuBLAS on the current stream
    (see the module docstring for the layout); call it with the data pointers
    ``(a, b, c)``. Made once per layout; cuBLAS must be available."""

    __slots__ = (
        "name", "batch", "m", "n", "k", "lda", "ldb", "stride_a", "stride_b",
        "_lib", "_type", "_op_a", "_op_b", "_alpha", "_beta", "_compute", "_algo",
    )  # fmt: skip

    def __init__(
        self, dtype: str, batch: int, m: int, n: int, k: int,
        trans_a: bool, lda: int, stride_a: int, trans_b: bool, ldb: int, stride_b: int, tf32: bool = False,
    ) -> None:  # fmt: skip
        lib = self._lib = _lib
        self.name = "cublasGemmStridedBatchedEx" if batch > 1 else "cublasGemmEx"
        self.batch, self.m, self.n, self.k = batch, m, n, k
        self.lda, self.ldb, self.stride_a, self.stride_b = lda, ldb, stride_a, stride_b
        self._type = data_type(_CUDA_TYPES[dtype])
        self._alpha, self._beta = (v.ctypes.data for v in _SCALARS[dtype if dtype in _SCALAR_TYPES else "float32"])
        self._op_a, self._op_b = (int(lib.Operation.T if flip else lib.Operation.N) for flip in (trans_a, trans_b))
        self._compute, self._algo = int(lib.ComputeType[_compute_name(dtype, tf32)]), int(lib.GemmAlgo.DEFAULT)

    def __call__(self, a: int, b: int, c: int) -> None:
        _call(self.name, lambda h: self._issue(h, a, b, c))

    def _issue(self, h: int, a: int, b: int, c: int) -> None:
        lib, t, m, n = self._lib, self._type, self.m, self.n
        # C^T (n x m, column-major, ldc n) = op(B^T) op(A^T): b is cuBLAS's first operand
        if self.batch > 1:
            lib.gemm_strided_batched_ex(
                h, self._op_b, self._op_a, n, m, self.k, self._alpha,
                b, t, self.ldb, self.stride_b,
                a, t, self.lda, self.stride_a,
                self._beta, c, t, n, m * n, self.batch, self._compute, self._algo,
            )  # fmt: skip
        else:
            lib.gemm_ex(
                h, self._op_b, self._op_a, n, m, self.k, self._alpha,
                b, t, self.ldb, a, t, self.lda,
                self._beta, c, t, n, self._compute, self._algo,
            )  # fmt: skip


# -- triangular solves ---------------------------------------------------------------------------


def trsm(dtype: str, batch: int, n: int, nrhs: int, a: int, b: int, lower: bool, unit: bool, trans: bool) -> None:
    """Solve ``op(T) X = B`` in place for each of ``batch`` column-major n x n
    triangles T at ``a`` (lda n; its ``lower`` or upper triangle, its diagonal
    taken as ones when ``unit``; ``op`` a transpose when ``trans``, never a
    conjugate one) and B (n x nrhs at ``b``, ldb n): cublas<t>trsm per matrix,
    on the current stream. ``dtype``: float32, float64, complex64 or complex128."""
    if not batch or not n or not nrhs:
        return
    lib = _lib
    solve = getattr(lib, _TRSM[dtype])
    modes = (
        int(lib.SideMode.LEFT), int(lib.FillMode.LOWER if lower else lib.FillMode.UPPER),
        int(lib.Operation.T if trans else lib.Operation.N), int(lib.DiagType.UNIT if unit else lib.DiagType.NON_UNIT),
    )  # fmt: skip
    alpha, size = _SCALARS[dtype][0], _SCALARS[dtype][0].itemsize

    def issue(h: int) -> None:
        for i in range(batch):
            solve(h, *modes, n, nrhs, alpha.ctypes.data, a + i * n * n * size, n, b + i * n * nrhs * size, n)

    _call(f"cublas{_TRSM[dtype].capitalize()}", issue)


# -- one call: handle, stream, workspace ---------------------------------------------------------


def with_workspace(name: str, use) -> None:
    """``use(stream, workspace, fresh)`` with the current stream and a workspace
    of ``WORKSPACE_BYTES`` of tensorplay's for it (see the module docstring;
    ``fresh``: a capture's block, for this call only); the call named ``name``
    in a capture's errors. cuBLAS's calls and cuBLASLt's (``cublaslt``) share it."""
    s = current_stream()
    if not capture_state.active:
        use(s, _stream_workspace(s), False)
        return
    refuse_legacy_launch(name, s)
    flush_fused()
    with library_calls():
        block = allocator.allocate(WORKSPACE_BYTES, s) if s.is_capturing() else None
        try:
            use(s, block.ptr if block is not None else _stream_workspace(s), block is not None)
        finally:
            if block is not None:
                allocator.free(block)


def _call(name: str, issue) -> None:
    """``issue(handle)`` on the current stream, the handle given the stream and
    a workspace of tensorplay's (see the module docstring); the call named
    ``name`` in errors."""
    with_workspace(name, lambda s, ws, fresh: _on_stream(name, s, issue, ws, fresh))


def _on_stream(name: str, s, issue, ws: int, fresh: bool) -> None:
    lib = _lib
    th = getattr(_tls, "handle", None) or _thread_handle()
    key = s.handle
    try:
        if th.stream != key or th.workspace != ws or fresh:  # a capture's stream may reuse an address
            lib.set_stream(th.h, key)  # which resets the workspace: set it after
            lib.set_workspace(th.h, ws, WORKSPACE_BYTES)
            th.stream, th.workspace = key, ws
        issue(th.h)
    except lib.cuBLASError as e:
        th.stream = None  # set both again at the next call
        raise _failed(lib, name, e) from None
