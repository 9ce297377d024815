"""tp.linalg through ``runtime/libraries/cusolver.py``, the module that calls
cuSOLVER: on a GPU the real library (skipped, with the reason, where
nvmath-python or libcusolver is missing); on the simulator ``NumpyCusolver``,
a stand-in for ``nvmath.bindings.cusolverDn`` that reads and writes the
column-major buffers tensorplay passes (pointers, leading dimensions,
workspaces, info) as cuSOLVER documents them and computes in NumPy, queued
on the handle's stream as a kernel is, so that captures and while bodies take
it. The results are compared with numpy.linalg in float64; the stand-in's
record of the calls shows the arguments. Also: the sentences of a failed
call, of a GPU without nvmath-python, of a libcusolver that does not load.
"""

from __future__ import annotations

import ctypes
import enum
import functools
import re
import threading
import types

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import _linalg_lapack
from tensorplay.runtime.backend import CudaError
from tensorplay.runtime.backend import get as get_backend
from tensorplay.runtime.libraries import cublas, cusolver, simsolver
from tensorplay.runtime.libraries._nvmath import INSTALL, LibraryUnavailable
from tensorplay.runtime.memory import allocator

ON_SIM = tp.cuda.backend() == "sim"
TYPES = {0: np.dtype(np.float32), 1: np.dtype(np.float64), 4: np.dtype(np.complex64), 5: np.dtype(np.complex128)}
NAMES = {"CUDA_R_32F": 0, "CUDA_R_64F": 1, "CUDA_C_32F": 4, "CUDA_C_64F": 5}
LOWER, UPPER = 0, 1


class NumpyCusolver:
    """The calls of ``nvmath.bindings.cusolverDn`` tensorplay makes, on the
    simulator's memory (see the module docstring). ``calls`` records
    (function, arguments by name); every routine checks its leading dimension
    and that its workspace lies in memory tensorplay allocated."""

    class cuSOLVERError(Exception):
        def __init__(self, status):
            self.status = status
            super().__init__(f"status {status}")

    Status = enum.IntEnum("Status", {"SUCCESS": 0, "NOT_INITIALIZED": 1, "INVALID_VALUE": 3})

    def __init__(self) -> None:
        self.dev = get_backend()
        self.streams: dict[int, int] = {}
        self.calls: list[tuple[str, dict]] = []
        self.fail: str | None = None  # a routine that raises INVALID_VALUE

    # -- handles
    def create(self) -> int:
        h = len(self.streams) + 1
        self.streams[h] = 0
        return h

    def create_params(self) -> int:
        return 99

    def set_stream(self, h, stream) -> None:
        self.streams[h] = stream

    # -- helpers
    def _matrix(self, ptr, rows, cols, ld, t):
        if ld < max(1, rows):
            raise self.cuSOLVERError(self.Status.INVALID_VALUE)
        size = TYPES[t].itemsize
        return self.dev.view(ptr, (rows, cols), (size, ld * size), TYPES[t])  # element (r, c) at r + c * ld

    def _workspace(self, ptr, nbytes) -> None:
        self.dev.view(ptr, (max(nbytes, 1),), (1,), np.uint8)  # an allocation that holds it, or an error

    def _queue(self, h, name, run, **args) -> None:
        self.calls.append((name, args))
        if self.fail == name:
            raise self.cuSOLVERError(self.Status.INVALID_VALUE)
        self.dev.enqueue(self.dev.stream_from_int(self.streams[h]), "kernel", run, f"cusolver {name}")

    def _info(self, ptr):
        return self.dev.view(ptr, (1,), (4,), np.int32)

    # -- LU
    def xgetrf_buffer_size(self, h, p, m, n, t, a, lda, ct):
        return 64 * n * TYPES[t].itemsize, 0

    def xgetrf(self, h, p, m, n, t, a, lda, ipiv, ct, ws, ws_bytes, host, host_bytes, info):
        assert m == n and t == ct and p == 99
        self._workspace(ws, ws_bytes)
        mat, pivots = self._matrix(a, m, n, lda, t), self.dev.view(ipiv, (n,), (8,), np.int64)

        def run():
            self._info(info)[0] = simsolver._lu(mat, pivots)

        self._queue(h, "xgetrf", run, n=n, lda=lda)

    # -- Cholesky
    def xpotrf_buffer_size(self, h, p, uplo, n, t, a, lda, ct):
        return 32 * n * TYPES[t].itemsize, 0

    def xpotrf(self, h, p, uplo, n, t, a, lda, ct, ws, ws_bytes, host, host_bytes, info):
        self._workspace(ws, ws_bytes)
        mat = self._matrix(a, n, n, lda, t)

        def run():
            part = np.tril(mat) if uplo == LOWER else np.triu(mat)
            strict = np.tril(mat, -1) if uplo == LOWER else np.triu(mat, 1)
            try:
                factor = np.linalg.cholesky(part + np.conj(strict.T))
            except np.linalg.LinAlgError:
                self._info(info)[0] = 1
                return
            rows, cols = np.tril_indices(n) if uplo == LOWER else np.triu_indices(n)
            mat[rows, cols] = (factor if uplo == LOWER else np.conj(factor.T))[rows, cols]
            self._info(info)[0] = 0

        self._queue(h, "xpotrf", run, uplo="LU"[uplo], n=n, lda=lda)

    # -- eigenvalues
    def xsyevd_buffer_size(self, h, p, jobz, uplo, n, ta, a, lda, tw, w, ct):
        assert TYPES[tw] == np.zeros(0, TYPES[ta]).real.dtype  # the eigenvalues' type is the real one
        return 128 * n * TYPES[ta].itemsize, 0

    def xsyevd(self, h, p, jobz, uplo, n, ta, a, lda, tw, w, ct, ws, ws_bytes, host, host_bytes, info):
        self._workspace(ws, ws_bytes)
        mat, values = self._matrix(a, n, n, lda, ta), self.dev.view(w, (n,), (TYPES[tw].itemsize,), TYPES[tw])

        def run():
            found, vectors = np.linalg.eigh(mat, UPLO="LU"[uplo])
            values[...] = found
            if jobz == 1:
                mat[...] = vectors
            self._info(info)[0] = 0

        self._queue(h, "xsyevd", run, jobz=jobz, uplo="LU"[uplo], n=n, lda=lda)

    # -- SVD
    def xgesvd_buffer_size(self, h, p, jobu, jobvt, m, n, ta, a, lda, ts, s, tu, u, ldu, tvt, vt, ldvt, ct):
        return 64 * m * TYPES[ta].itemsize, 0

    def xgesvd(self, h, p, jobu, jobvt, m, n, ta, a, lda, ts, s, tu, u, ldu, tvt, vt, ldvt, ct, ws, ws_bytes,
               host, host_bytes, info):  # fmt: skip
        if m < n:  # "gesvd only supports m >= n"
            raise self.cuSOLVERError(self.Status.INVALID_VALUE)
        self._workspace(ws, ws_bytes)
        job = chr(jobu)
        assert jobu == jobvt and job in "ASN"
        mat = self._matrix(a, m, n, lda, ta)
        values = self.dev.view(s, (n,), (TYPES[ts].itemsize,), TYPES[ts])
        left = self._matrix(u, m, m if job == "A" else n, ldu, tu) if job != "N" else None
        right = self._matrix(vt, n, n, ldvt, tvt) if job != "N" else None

        def run():
            if job == "N":
                values[...] = np.linalg.svd(mat, compute_uv=False)
            else:
                left[...], values[...], right[...] = np.linalg.svd(mat, full_matrices=job == "A")
            self._info(info)[0] = 0

        self._queue(h, "xgesvd", run, job=job, m=m, n=n, lda=lda, ldu=ldu, ldvt=ldvt)

    # -- QR
    def xgeqrf_buffer_size(self, h, p, m, n, ta, a, lda, ttau, tau, ct):
        return 32 * n * TYPES[ta].itemsize, 0

    def xgeqrf(self, h, p, m, n, ta, a, lda, ttau, tau, ct, ws, ws_bytes, host, host_bytes, info):
        self._workspace(ws, ws_bytes)
        mat, k = self._matrix(a, m, n, lda, ta), min(m, n)
        scales = self.dev.view(tau, (k,), (TYPES[ttau].itemsize,), TYPES[ttau])

        def run():
            reflectors, scales[...] = np.linalg.qr(mat, mode="raw")
            mat[...] = reflectors.T
            self._info(info)[0] = 0

        self._queue(h, "xgeqrf", run, m=m, n=n, lda=lda)

    def _orgqr_size(self, t):
        return lambda h, m, n, k, a, lda, tau: 16 * n

    def _orgqr(self, t):
        def routine(h, m, n, k, a, lda, tau, work, lwork, info):
            assert m >= n >= k
            self._workspace(work, lwork * TYPES[t].itemsize)
            mat = self._matrix(a, m, n, lda, t)
            scales = self.dev.view(tau, (k,), (TYPES[t].itemsize,), TYPES[t])

            def run():
                q = np.eye(m, n, dtype=TYPES[t])
                for j in reversed(range(k)):
                    v = np.zeros(m, TYPES[t])
                    v[j], v[j + 1 :] = 1, mat[j + 1 :, j]
                    q -= scales[j] * np.outer(v, np.conj(v) @ q)
                mat[...] = q
                self._info(info)[0] = 0

            self._queue(h, "orgqr", run, m=m, n=n, k=k, lda=lda, lwork=lwork)

        return routine

    def __getattr__(self, name):  # sorgqr, dorgqr, cungqr, zungqr and their buffer sizes
        for prefix, t in (("sorgqr", 0), ("dorgqr", 1), ("cungqr", 4), ("zungqr", 5)):
            if name == prefix:
                return self._orgqr(t)
            if name == f"{prefix}_buffer_size":
                return self._orgqr_size(t)
        raise AttributeError(name)


class NumpyTrsm:
    """The calls of ``nvmath.bindings.cublas`` that an LU solve makes (its two
    triangular solves, cublas<t>trsm), as ``NumpyCusolver``'s: on the
    simulator's memory, queued on the handle's stream, recorded in ``calls``
    (shared with the solver's stand-in, in the order they came)."""

    SideMode = enum.IntEnum("SideMode", {"LEFT": 0, "RIGHT": 1})
    FillMode = enum.IntEnum("FillMode", {"LOWER": 0, "UPPER": 1})
    Operation = enum.IntEnum("Operation", {"N": 0, "T": 1, "C": 2})
    DiagType = enum.IntEnum("DiagType", {"NON_UNIT": 0, "UNIT": 1})
    PointerMode = enum.IntEnum("PointerMode", {"HOST": 0, "DEVICE": 1})
    Math = enum.IntEnum("Math", {"DEFAULT_MATH": 0, "DISALLOW_REDUCED_PRECISION_REDUCTION": 16})
    Status = enum.IntEnum("Status", {"SUCCESS": 0, "INVALID_VALUE": 7})
    cuBLASError = NumpyCusolver.cuSOLVERError

    def __init__(self, calls: list) -> None:
        self.dev, self.streams, self.calls = get_backend(), {}, calls
        for name, dtype in {
            "strsm": np.float32,
            "dtrsm": np.float64,
            "ctrsm": np.complex64,
            "ztrsm": np.complex128,
        }.items():
            setattr(self, name, functools.partial(self._trsm, np.dtype(dtype)))

    def create(self) -> int:
        h = len(self.streams) + 1
        self.streams[h] = 0
        return h

    def set_pointer_mode(self, h, mode) -> None:
        assert mode == self.PointerMode.HOST

    def set_math_mode(self, h, mode) -> None:
        pass

    def set_stream(self, h, stream) -> None:
        self.streams[h] = stream

    def set_workspace(self, h, ptr, size) -> None:
        self.dev.view(ptr, (size,), (1,), np.uint8)  # an allocation that holds it, or an error

    def _trsm(self, dtype, h, side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb) -> None:
        assert side == self.SideMode.LEFT and lda >= m and ldb >= m
        size = dtype.itemsize
        scale = np.frombuffer((ctypes.c_char * size).from_address(alpha), dtype)[0]
        tri = self.dev.view(a, (m, m), (size, lda * size), dtype)  # column-major: (r, c) at r + c * ld
        rhs = self.dev.view(b, (m, n), (size, ldb * size), dtype)

        def run():
            t = np.tril(tri) if uplo == self.FillMode.LOWER else np.triu(tri)
            if diag == self.DiagType.UNIT:
                np.fill_diagonal(t, 1)
            rhs[...] = np.linalg.solve(t.T if trans == self.Operation.T else t, scale * rhs)

        args = {"uplo": "LU"[uplo], "trans": "NT"[trans], "unit": diag == self.DiagType.UNIT, "m": m, "n": n}
        self.calls.append(("trsm", args))
        self.dev.enqueue(self.dev.stream_from_int(self.streams[h]), "kernel", run, "cublas trsm")


@pytest.fixture
def library(monkeypatch):
    """cuSOLVER for the test: the real one on a GPU (or a skip saying why not),
    ``NumpyCusolver`` on the simulator (yielded, to read its calls)."""
    if not ON_SIM:
        reason = cusolver.unavailable()
        if reason is not None:
            pytest.skip(f"cuSOLVER is not usable here: {reason}")
        yield None
        return
    fake = NumpyCusolver()
    for name, value in {
        "_lib": fake, "_loaded": True, "_reason": None, "_errors": (NumpyCusolver.cuSOLVERError,),
        "_status": NumpyCusolver.Status, "_versions": "nvmath-python (NumpyCusolver), cuSOLVER 0.0.0",
        "_tls": threading.local(), "_free_handles": [], "_sizes": {}, "data_type": NAMES.__getitem__,
    }.items():  # fmt: skip
        monkeypatch.setattr(cusolver, name, value)
    triangles, workspaces = NumpyTrsm(fake.calls), {}
    for name, value in {
        "_lib": triangles, "_loaded": True, "_reason": None, "_versions": "nvmath-python (NumpyTrsm), cuBLAS 0.0.0",
        "_tls": threading.local(), "_free_handles": [], "_workspaces": workspaces,
    }.items():  # fmt: skip
        monkeypatch.setattr(cublas, name, value)
    monkeypatch.setattr(_linalg_lapack, "solver", lambda fn: cusolver)
    yield fake
    for block in workspaces.values():
        allocator.free(block)


def _random(shape, dtype, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = rng.uniform(-1, 1, shape)
    if np.dtype(dtype).kind == "c":
        out = out + 1j * rng.uniform(-1, 1, shape)
    return out.astype(dtype)


def _close(t, want, tol=1e-10) -> None:
    got = t.numpy()
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got.astype(np.complex128), np.asarray(want, np.complex128), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float64", "complex128", "float32"])
def test_every_factorisation_against_numpy(library, dtype):
    tol = 1e-4 if dtype == "float32" else 1e-10
    a = _random((2, 3, 3), dtype, 1) + 3 * np.eye(3, dtype=dtype)
    b = _random((2, 3, 2), dtype, 2)
    h = a @ np.conj(np.swapaxes(a, -1, -2))
    x, y, hx = tp.tensor(a), tp.tensor(b), tp.tensor(h)
    _close(tp.linalg.solve(x, y), np.linalg.solve(a, b), tol)
    _close(tp.linalg.inv(x), np.linalg.inv(a), tol)
    _close(tp.linalg.det(x), np.linalg.det(a), tol)
    _close(tp.linalg.cholesky(hx), np.linalg.cholesky(h), tol)
    _close(tp.linalg.cholesky(hx, upper=True), np.conj(np.swapaxes(np.linalg.cholesky(h), -1, -2)), tol)
    _close(tp.linalg.eigvalsh(hx), np.linalg.eigvalsh(h), tol)
    w, v = tp.linalg.eigh(hx)
    np.testing.assert_allclose(h @ v.numpy(), v.numpy() * w.numpy()[..., None, :], atol=tol * 100)
    for shape in ((2, 3, 5), (2, 5, 3)):
        m = _random(shape, dtype, 3)
        _close(tp.linalg.svdvals(tp.tensor(m)), np.linalg.svd(m, compute_uv=False), tol)
        for full in (True, False):
            u, s, vh = tp.linalg.svd(tp.tensor(m), full_matrices=full)
            k = s.shape[-1]
            np.testing.assert_allclose(
                (u.numpy()[..., :k] * s.numpy()[..., None, :]) @ vh.numpy()[..., :k, :], m, atol=tol * 10
            )
        for mode in ("reduced", "complete"):
            q, r = tp.linalg.qr(tp.tensor(m), mode=mode)
            np.testing.assert_allclose(q.numpy() @ r.numpy(), m, atol=tol * 10)
            cols = q.shape[-1]
            np.testing.assert_allclose(
                np.conj(np.swapaxes(q.numpy(), -1, -2)) @ q.numpy(),
                np.broadcast_to(np.eye(cols), (2, cols, cols)),
                atol=tol * 10,
            )


def test_the_calls_arguments(library):
    if library is None:
        pytest.skip("the stand-in's record (simulator)")
    a = tp.tensor(_random((2, 3, 3), "float64", 4) + 3 * np.eye(3))
    tp.linalg.solve(a, tp.ones((2, 3, 4), dtype=tp.float64))
    assert [c for c, _ in library.calls] == ["xgetrf", "xgetrf", "trsm", "trsm", "trsm", "trsm"]  # one per matrix
    assert [args for _, args in library.calls[2::2]] == [  # U^T, then L^T (unit): A^T's factors solve A X = B
        {"uplo": "U", "trans": "T", "unit": False, "m": 3, "n": 4},
        {"uplo": "L", "trans": "T", "unit": True, "m": 3, "n": 4},
    ]
    library.calls.clear()
    tp.linalg.inv(a)
    assert [args["uplo"] + args["trans"] for _, args in library.calls[2::2]] == ["LN", "UN"]
    library.calls.clear()
    tp.linalg.svd(tp.ones((4, 2), dtype=tp.float64), full_matrices=True)  # tall: A itself, column-major
    tp.linalg.svd(tp.ones((2, 4), dtype=tp.float64), full_matrices=False)  # wide: A^T
    assert [args for _, args in library.calls] == [
        {"job": "A", "m": 4, "n": 2, "lda": 4, "ldu": 4, "ldvt": 2},
        {"job": "S", "m": 4, "n": 2, "lda": 4, "ldu": 4, "ldvt": 2},
    ]
    library.calls.clear()
    tp.linalg.qr(tp.ones((4, 2), dtype=tp.float64), mode="complete")
    assert library.calls == [
        ("xgeqrf", {"m": 4, "n": 2, "lda": 4}),
        ("orgqr", {"m": 4, "n": 4, "k": 2, "lda": 4, "lwork": 64}),
    ]
    library.calls.clear()
    tp.linalg.eigvalsh(tp.eye(3, dtype=tp.float32))
    tp.linalg.cholesky(tp.eye(3, dtype=tp.float32), upper=True)
    assert library.calls == [
        ("xsyevd", {"jobz": 0, "uplo": "U", "n": 3, "lda": 3}),
        ("xpotrf", {"uplo": "L", "n": 3, "lda": 3}),
    ]


def test_captured_and_in_a_while_body(library):
    a_np, b_np = _random((3, 3), "float64", 5) + 3 * np.eye(3), _random((3, 2), "float64", 6)
    a, b = tp.tensor(a_np), tp.tensor(b_np)
    count, go = tp.zeros(1, dtype=tp.int32), tp.ones(1, dtype=tp.bool)
    tp.linalg.solve(a, b), tp.linalg.qr(a)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):  # eigvalsh and svd are refused in captures (cuSOLVER's syevd and gesvd wait for the host)
        r = tp.linalg.qr(a).R
        with g.while_(go):
            b.copy_(tp.linalg.solve(a, b))
            count.add_(1)
            tp.lt(count, 3, out=go)
    a_np = a_np + a_np.T
    a.copy_(tp.tensor(a_np))
    g.replay()
    _close(r, np.linalg.qr(a_np)[1])
    _close(b, np.linalg.solve(np.linalg.matrix_power(a_np, 3), b_np), 1e-9)


def test_a_failed_call_is_a_sentence(library):
    if library is None:
        pytest.skip("the stand-in fails on request (simulator)")
    library.fail = "xgetrf"
    message = "cusolverDnXgetrf failed: CUSOLVER_STATUS_INVALID_VALUE: cuSOLVER refused an argument of the call"
    with pytest.raises(CudaError, match=re.escape(message)):
        tp.linalg.det(tp.eye(2, dtype=tp.float64))


def test_a_gpu_without_nvmath_refuses_with_what_to_install(monkeypatch):
    monkeypatch.setattr(_linalg_lapack, "get_backend", lambda: types.SimpleNamespace(name="cuda"))
    monkeypatch.setattr(cusolver, "unavailable", lambda: f"nvmath-python is not installed; {INSTALL}")
    message = (
        "linalg.inv() runs on cuSOLVER on the GPU, which cannot be used here: nvmath-python is not installed; "
        "pip install 'nvmath-python[cu13]'"
    )
    with pytest.raises(LibraryUnavailable, match=re.escape(message)):
        tp.linalg.inv(tp.eye(2))


def test_a_libcusolver_that_does_not_load_is_a_sentence():
    def refuse(_):
        raise RuntimeError("libcusolver.so.12: cannot open shared object file")

    with pytest.raises(
        LibraryUnavailable, match=r"^libcusolver could not be loaded \(RuntimeError: libcusolver\.so\.12"
    ):
        cusolver.library_version(types.SimpleNamespace(get_property=refuse))
