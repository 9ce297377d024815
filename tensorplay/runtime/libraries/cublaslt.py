"""cuBLASLt through nvmath-python: an affine map with its bias added in the
product's epilogue.

``BiasGemm`` is ``out = x @ w.T + bias`` for row-major ``x`` (m, k), ``w``
(n, k) and ``bias`` (n,), C-contiguous, of float16, bfloat16 or float32 (what
``nn.Linear`` computes): one ``cublasLtMatmul`` with ``CUBLASLT_EPILOGUE_BIAS``,
where cuBLAS's GemmEx and an elementwise add would read and write the output
twice. In cuBLAS's column-major terms the call computes ``out^T = w x^T``: w
(stored as the column-major k x n ``w^T``) is the first operand, transposed,
and the bias runs along the output's columns there, its rows here. Products
sum in float32 (TF32 only when ``tp.backends.matmul.allow_tf32``), the half
types rounded once at the store, as ``cublas.Gemm`` computes them.

A ``BiasGemm`` is made once per shape and dtype: its descriptors and the
algorithm cuBLASLt's heuristics chose are kept, so a call only enqueues. The
workspace is ``cublas``'s (``with_workspace``): the stream's, or a block of a
capture's pool inside a capture, so the call is captured into graphs and while
bodies like any product. ``plan(...)`` gives None, and says why in
``refusal()``, where cuBLASLt cannot serve: the caller then multiplies and
adds.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from ..caches import BoundedCache
from . import cublas
from ._nvmath import LibraryUnavailable, bindings, data_type, library_calls

__all__ = ["DTYPES", "BiasGemm", "plan", "refusal"]

DTYPES = ("float16", "bfloat16", "float32")
_CUDA_TYPES = {"float16": "CUDA_R_16F", "bfloat16": "CUDA_R_16BF", "float32": "CUDA_R_32F"}
_ONE, _ZERO = np.ones(1, np.float32), np.zeros(1, np.float32)  # alpha and beta, read from the host

_lock = threading.Lock()
_lt = None  # nvmath.bindings.cublasLt once it answered
_handle = 0
_reason: str | None = None  # why cuBLASLt cannot serve, once it was tried


def refusal() -> str | None:
    """Why products with a bias do not go through cuBLASLt here (None: they do)."""
    return _reason if _lt is None else None


def _start() -> bool:
    """Load cuBLASLt and make the process's handle, once; False where it cannot."""
    global _lt, _handle, _reason
    if _lt is not None:
        return True
    with _lock:
        if _lt is None and _reason is None:
            try:
                lt = bindings("cublasLt")
                with library_calls():
                    _handle = lt.create()
                _lt = lt
            except LibraryUnavailable as e:
                _reason = str(e)
            except Exception as e:
                _reason = f"cuBLASLt could not start ({type(e).__name__}: {e})"
    return _lt is not None


def _attribute(getter, attr, value) -> np.ndarray:
    """An attribute's value as the one-element array its setter reads."""
    return np.array([value], dtype=getter(attr))


class BiasGemm:
    """``out = x @ w.T + bias`` (row-major, C-contiguous: x (m, k), w (n, k),
    bias and the rows of out n long) by one cuBLASLt call on the current
    stream; call it with the data pointers ``(x, w, bias, out)``."""

    __slots__ = ("m", "n", "k", "_desc", "_layouts", "_pref", "_result", "_algo", "_lock", "__weakref__")

    def __init__(self, dtype: str, m: int, n: int, k: int, tf32: bool) -> None:
        lt, ops = _lt, bindings("cublas")
        self.m, self.n, self.k = m, n, k
        self._lock = threading.Lock()  # the bias pointer is set on the descriptor for each call
        compute = int(ops.ComputeType["COMPUTE_32F_FAST_TF32" if tf32 and dtype == "float32" else "COMPUTE_32F"])
        t = data_type(_CUDA_TYPES[dtype])
        self._desc = lt.matmul_desc_create(compute, data_type("CUDA_R_32F"))
        self._layouts = (
            lt.matrix_layout_create(t, k, n, k),  # w, stored as the column-major k x n w^T, read transposed
            lt.matrix_layout_create(t, k, m, k),  # x^T, column-major k x m
            lt.matrix_layout_create(t, n, m, n),  # out^T, column-major n x m
        )
        self._pref = lt.matmul_preference_create()
        weakref.finalize(self, _destroy, lt, self._desc, self._layouts, self._pref)
        desc_type, A = lt.get_matmul_desc_attribute_dtype, lt.MatmulDescAttribute
        for attr, value in (
            (A.TRANSA, int(ops.Operation.T)),
            (A.TRANSB, int(ops.Operation.N)),
            (A.EPILOGUE, int(lt.Epilogue.BIAS)),
            (A.BIAS_DATA_TYPE, t),
        ):
            buf = _attribute(desc_type, attr, value)
            lt.matmul_desc_set_attribute(self._desc, attr, buf.ctypes.data, buf.itemsize)
        attr = lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES
        buf = _attribute(lt.get_matmul_preference_attribute_dtype, attr, cublas.WORKSPACE_BYTES)
        lt.matmul_preference_set_attribute(self._pref, attr, buf.ctypes.data, buf.itemsize)
        self._result = lt.MatmulHeuristicResult(1)
        found = np.zeros(1, np.int32)
        a, b, c = self._layouts
        lt.matmul_algo_get_heuristic(
            _handle, self._desc, a, b, c, c, self._pref, 1, self._result.ptr, found.ctypes.data
        )  # fmt: skip
        if found[0] < 1:
            raise RuntimeError(f"cuBLASLt has no algorithm for ({m}, {k}) @ ({k}, {n}) in {dtype} with a bias")
        self._algo = self._result.ptr  # the result's first field is its algorithm

    def __call__(self, x: int, w: int, bias: int, out: int) -> None:
        lt, desc, (a, b, c) = _lt, self._desc, self._layouts
        bias_ptr = np.array([bias], dtype=np.uint64)
        pointer = lt.MatmulDescAttribute.BIAS_POINTER

        def use(s, ws: int, fresh: bool) -> None:
            lt.matmul_desc_set_attribute(desc, pointer, bias_ptr.ctypes.data, bias_ptr.itemsize)
            lt.matmul(
                _handle, desc, _ONE.ctypes.data, w, a, x, b, _ZERO.ctypes.data, out, c, out, c,
                self._algo, ws, cublas.WORKSPACE_BYTES, s.handle,
            )  # fmt: skip

        try:
            with self._lock:
                cublas.with_workspace("cublasLtMatmul", use)
        except lt.cuBLASLtError as e:
            raise RuntimeError(f"cublasLtMatmul failed: {e}; set tp.backends.matmul.library = False") from None


def _destroy(lt, desc, layouts, pref) -> None:
    for layout in layouts:
        lt.matrix_layout_destroy(layout)
    lt.matmul_desc_destroy(desc)
    lt.matmul_preference_destroy(pref)


_plans = BoundedCache("cublaslt.plans", 1024)  # (dtype, m, n, k, tf32) -> BiasGemm, or None where refused


def plan(dtype: str, m: int, n: int, k: int, tf32: bool) -> BiasGemm | None:
    """The ``BiasGemm`` of this shape, made at its first use; None where cuBLASLt
    cannot serve it (``refusal()`` says why when it is cuBLASLt as a whole)."""
    key = (dtype, m, n, k, tf32)
    if key in _plans:
        return _plans[key]
    found = None
    if dtype in DTYPES and max(m, n, k) <= cublas.MAX_DIM and _start():
        try:
            with library_calls():
                found = BiasGemm(dtype, m, n, k, tf32)
        except Exception:  # no algorithm, or a layout it refuses: the caller multiplies and adds
            found = None
    return _plans.put(key, found)
