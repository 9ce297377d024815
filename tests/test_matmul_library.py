"""Matrix products through cuBLAS (nvmath-python's bindings) and the way back to
tensorplay's Numba kernels: which path a product takes and why, results
against NumPy in float64 and against the Numba kernels, capture into graphs and
while bodies, and the TF32 switch.

The ``library`` fixture gives the product tests cuBLAS: the real one on a GPU
(skipped, with the reason, where nvmath-python or libcublas is missing), and
on the simulator ``NumpyCublas``, a stand-in that computes cuBLAS's
column-major GEMMs in NumPy from the arguments tensorplay passes (operations,
leading dimensions, batch strides), queued on the handle's stream as a kernel
is, so that captures and while bodies take it. What only the real library can
show (TF32) is marked ``gpu``.
"""

from __future__ import annotations

import ctypes
import enum
import gc
import re
import subprocess
import sys
import threading
import types

import numpy as np
import pytest
from helpers import random_tensor, tolerance

import tensorplay as tp
from tensorplay.runtime.backend import get as get_backend
from tensorplay.runtime.libraries import cublas
from tensorplay.runtime.libraries._nvmath import LibraryUnavailable, bindings
from tensorplay.runtime.memory import allocator

LIBRARY_DTYPES = (tp.float16, tp.bfloat16, tp.float32, tp.float64)
ON_SIM = tp.cuda.backend() == "sim"


class NumpyCublas:
    """The few calls of ``nvmath.bindings.cublas`` tensorplay makes, on the
    simulator's memory: each GEMM reads its column-major operands as cuBLAS
    would (element (i, j) of a matrix at i + j * ld, op T reading the stored
    matrix transposed, entry e at e * stride) and refuses leading dimensions
    that cuBLAS refuses. ``calls`` records (function, arguments by name)."""

    Operation = enum.IntEnum("Operation", {"N": 0, "T": 1, "C": 2})
    ComputeType = enum.IntEnum("ComputeType", {"COMPUTE_32F": 68, "COMPUTE_64F": 70, "COMPUTE_32F_FAST_TF32": 77})
    GemmAlgo = enum.IntEnum("GemmAlgo", {"DEFAULT": -1})
    PointerMode = enum.IntEnum("PointerMode", {"HOST": 0, "DEVICE": 1})
    Math = enum.IntEnum("Math", {"DEFAULT_MATH": 0, "DISALLOW_REDUCED_PRECISION_REDUCTION": 16})
    Status = enum.IntEnum("Status", {"SUCCESS": 0, "INVALID_VALUE": 7})
    TYPES = {2: np.dtype(np.float16), 14: tp.bfloat16.np, 0: np.dtype(np.float32), 1: np.dtype(np.float64)}

    class cuBLASError(Exception):
        def __init__(self, status):
            self.status = status
            super().__init__(f"status {status}")

    def __init__(self) -> None:
        self.dev = get_backend()
        self.handles: dict[int, dict] = {}
        self.calls: list[tuple[str, dict]] = []

    def create(self) -> int:
        h = len(self.handles) + 1
        self.handles[h] = {"stream": 0, "workspace": None}
        return h

    def set_pointer_mode(self, h, mode) -> None:
        assert mode == self.PointerMode.HOST

    def set_math_mode(self, h, mode) -> None:
        self.handles[h]["math"] = mode

    def set_stream(self, h, stream) -> None:
        self.handles[h].update(stream=stream, workspace=None)  # as cuBLAS: back to its own workspace

    def set_workspace(self, h, ptr, size) -> None:
        self.dev.view(ptr, (size,), (1,), np.uint8)  # an allocation that holds it, or CUDA_ERROR_ILLEGAL_ADDRESS
        self.handles[h]["workspace"] = ptr

    def gemm_ex(self, h, transa, transb, m, n, k, alpha, a, atype, lda, b, btype, ldb, beta, c, ctype, ldc, *rest):
        self._gemm("gemm_ex", h, transa, transb, m, n, k, alpha, a, atype, lda, 0, b, btype, ldb, 0, beta, c,
                   ctype, ldc, 0, 1, *rest)  # fmt: skip

    def gemm_strided_batched_ex(self, *args):
        self._gemm("gemm_strided_batched_ex", *args)

    def _gemm(self, name, h, transa, transb, m, n, k, alpha, a, atype, lda, sa, b, btype, ldb, sb, beta, c,
              ctype, ldc, sc, batch, compute, algo):  # fmt: skip
        state = self.handles[h]
        assert state["workspace"] is not None, "no workspace set: cuBLAS would allocate one itself"
        assert atype == btype == ctype and algo == self.GemmAlgo.DEFAULT
        self.calls.append((name, {"transa": self.Operation(transa).name, "transb": self.Operation(transb).name,
                                  "m": m, "n": n, "k": k, "lda": lda, "ldb": ldb, "ldc": ldc,
                                  "stride_a": sa, "stride_b": sb, "stride_c": sc, "batch": batch}))  # fmt: skip
        rows_a, cols_a = (m, k) if transa == self.Operation.N else (k, m)
        rows_b, cols_b = (k, n) if transb == self.Operation.N else (n, k)
        if lda < max(1, rows_a) or ldb < max(1, rows_b) or ldc < max(1, m):
            raise self.cuBLASError(self.Status.INVALID_VALUE)
        scalar = np.float64 if compute == self.ComputeType.COMPUTE_64F else np.float32
        one, zero = (np.frombuffer(ctypes.string_at(p, np.dtype(scalar).itemsize), scalar)[0] for p in (alpha, beta))
        assert (one, zero) == (1, 0)
        dtype = self.TYPES[atype]
        size = dtype.itemsize

        def column_major(ptr, rows, cols, ld, stride):
            return self.dev.view(ptr, (batch, rows, cols), (stride * size, size, ld * size), dtype)

        def run():
            x = column_major(a, rows_a, cols_a, lda, sa).astype(np.float64)
            y = column_major(b, rows_b, cols_b, ldb, sb).astype(np.float64)
            x = x if transa == self.Operation.N else x.swapaxes(1, 2)
            y = y if transb == self.Operation.N else y.swapaxes(1, 2)
            column_major(c, m, n, ldc, sc)[...] = np.matmul(x, y).astype(dtype)

        self.dev.enqueue(self.dev.stream_from_int(state["stream"]), "kernel", run, f"cublas {name}")


@pytest.fixture
def settings():
    """tp.backends.matmul, its library and TF32 settings restored afterwards
    (which makes the plans of the test's settings stale)."""
    s = tp.backends.matmul
    saved = s.library, s.allow_tf32
    yield s
    s.library, s.allow_tf32 = saved


@pytest.fixture
def library(settings, monkeypatch):
    """cuBLAS for the test: the real one on a GPU (or a skip saying why not),
    ``NumpyCublas`` on the simulator (yielded, to read its calls)."""
    if not ON_SIM:
        reason = cublas.unavailable()
        if reason is not None:
            pytest.skip(f"cuBLAS is not usable here: {reason}")
        yield None
        return
    fake, workspaces = NumpyCublas(), {}
    for name, value in {
        "_lib": fake, "_loaded": True, "_reason": None, "_versions": "nvmath-python (NumpyCublas), cuBLAS 0.0.0",
        "_tls": threading.local(), "_free_handles": [], "_workspaces": workspaces,
        "data_type": lambda name: {"CUDA_R_16F": 2, "CUDA_R_16BF": 14, "CUDA_R_32F": 0, "CUDA_R_64F": 1}[name],
    }.items():  # fmt: skip
        monkeypatch.setattr(cublas, name, value)
    settings.library = True  # plans made before are stale
    yield fake
    for block in workspaces.values():
        allocator.free(block)


# -- which path, and why (both backends) --------------------------------------------------


def test_the_setting_forces_the_numba_kernels_and_explain_says_so(settings):
    assert settings.library is True and settings.allow_tf32 is False  # the defaults
    generation = settings.generation
    settings.library = False
    assert settings.library is False
    assert settings.generation > generation  # plans made before are stale
    text = settings.explain(64, 64, 64)
    assert text.startswith("matmul (64, 64) @ (64, 64) float32, A, B: tiles "), text
    assert text.endswith("; Numba kernel: tp.backends.matmul.library is False"), text
    x, a = random_tensor((5, 7), tp.float32, seed=1)
    y, b = random_tensor((7, 3), tp.float32, seed=2)
    np.testing.assert_allclose((x @ y).numpy(), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_the_settings_take_booleans_only(settings):
    with pytest.raises(TypeError, match=re.escape("tp.backends.matmul.library expects True or False, got 'yes'")):
        settings.library = "yes"
    with pytest.raises(TypeError, match=re.escape("tp.backends.matmul.allow_tf32 expects True or False, got 1")):
        settings.allow_tf32 = 1
    assert settings.library is True and settings.allow_tf32 is False  # nothing changed


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_integer_products_take_the_numba_kernels(dtype):
    text = tp.backends.matmul.explain(8, 8, 8, dtype=dtype)
    assert text.endswith(
        f"; Numba kernel: cuBLAS serves float16, bfloat16, float32 and float64 products, not {dtype}"
    ), text


@pytest.mark.skipif(not ON_SIM, reason="the simulator's reason")
def test_explain_says_the_simulator_takes_the_numba_kernels():
    text = tp.backends.matmul.explain(4096, 4096, 4096, dtype="bfloat16")
    assert text.startswith("matmul (4096, 4096) @ (4096, 4096) bfloat16, A, B: tiles "), text
    assert text.endswith("; Numba kernel: cuBLAS runs on a GPU only, and this is the CPU simulator"), text
    assert cublas.unavailable() == "cuBLAS runs on a GPU only, and this is the CPU simulator"


def test_importing_tensorplay_does_not_import_nvmath():
    code = "import sys, tensorplay; print('nvmath' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_without_nvmath_tensorplay_imports_and_multiplies():
    # nvmath-python made unimportable: the import, a product and explain() all work,
    # on the GPU by the Numba kernels (explain says why), on the simulator as always.
    code = (
        "import sys; sys.modules['nvmath'] = None\n"
        "import numpy as np, tensorplay as tp\n"
        "a = np.arange(6.0).reshape(2, 3)\n"
        "assert ((tp.tensor(a) @ tp.tensor(a.T)).numpy() == a @ a.T).all()\n"
        "print(tp.backends.matmul.explain(2, 2, 3, dtype='float64'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    reason = "the CPU simulator" if ON_SIM else "nvmath-python is not installed"
    assert reason in out.stdout, out.stdout + out.stderr


def test_a_missing_nvmath_is_a_sentence_that_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "nvmath", None)  # as if not installed
    with pytest.raises(
        LibraryUnavailable, match=r"^nvmath-python is not installed; pip install 'nvmath-python\[cu13\]'"
    ):
        bindings("cublas")


def test_a_broken_nvmath_says_what_failed(monkeypatch):
    broken = types.ModuleType("nvmath")
    broken.__path__ = []  # a package with nothing in it: its bindings cannot be found
    monkeypatch.setitem(sys.modules, "nvmath", broken)
    for name in ("nvmath.bindings", "nvmath.bindings.cublas"):  # imported already where a product ran in this process
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(LibraryUnavailable, match=r"^nvmath-python could not be imported \(ModuleNotFoundError: "):
        bindings("cublas")


def test_a_libcublas_that_does_not_load_is_a_sentence():
    def refuse(_):
        raise RuntimeError("libcublas.so.13: cannot open shared object file")

    fake = types.SimpleNamespace(get_property=refuse)
    with pytest.raises(LibraryUnavailable, match=r"^libcublas could not be loaded \(RuntimeError: libcublas\.so\.13"):
        cublas.library_version(fake)


# -- products by cuBLAS (the real one on a GPU, NumpyCublas on the simulator) -----------------------


def _tol(dtype) -> dict:
    """Tolerances against float64 of products of small k: one rounding to ``dtype``
    (float32 sums also round as they go)."""
    rtol, atol = tolerance(dtype)
    return {"rtol": rtol, "atol": max(atol, 1e-4 if dtype is tp.float32 else atol)}


def _stored(shape, dtype, flip: bool, seed: int):
    """A tensor of ``shape`` and its NumPy array: stored transposed (the last two
    dimensions swapped, seen through ``.transpose(-1, -2)``) when ``flip``."""
    if not flip:
        return random_tensor(shape, dtype, seed=seed)
    t, t_np = random_tensor(tuple(shape[:-2]) + tuple(shape[-2:][::-1]), dtype, seed=seed)
    return t.transpose(-1, -2), np.swapaxes(t_np, -1, -2)


def _both_paths(settings, x, y):
    """``x @ y`` by cuBLAS, then by the Numba kernels."""
    settings.library = True
    by_library = (x @ y).numpy()
    settings.library = False
    by_kernels = (x @ y).numpy()
    settings.library = True
    return by_library, by_kernels


@pytest.mark.parametrize("dtype", LIBRARY_DTYPES, ids=str)
def test_each_dtype_against_float64_and_the_numba_kernels(settings, library, dtype):
    text = settings.explain(24, 40, 16, dtype=dtype.name)
    assert "A, B: cuBLAS (nvmath-python" in text and "cublasGemmEx" in text, text
    x, a = random_tensor((24, 16), dtype, seed=10)
    y, b = random_tensor((16, 40), dtype, seed=11)
    want = a.astype(np.float64) @ b.astype(np.float64)
    by_library, by_kernels = _both_paths(settings, x, y)
    assert by_library.dtype == dtype.np
    np.testing.assert_allclose(by_library.astype(np.float64), want, **_tol(dtype))
    np.testing.assert_allclose(by_library.astype(np.float64), by_kernels.astype(np.float64), **_tol(dtype))


@pytest.mark.parametrize(
    "shape_a, shape_b, flip_a, flip_b",
    [
        ((9, 7), (7, 5), True, False),
        ((9, 7), (7, 5), False, True),
        ((9, 7), (7, 5), True, True),
        ((3, 6, 4), (3, 4, 5), False, False),
        ((3, 6, 4), (3, 4, 5), True, True),
        ((2, 3, 6, 4), (4, 5), False, True),  # a batch of rows times one matrix: one product
        ((4, 5), (2, 3, 5, 3), True, False),  # one matrix times a batch: batch stride 0
        ((2, 1, 3, 4), (1, 3, 4, 5), False, False),  # both broadcast
        ((5,), (4, 5, 3), False, False),
        ((4, 6, 5), (5,), True, False),
        ((5,), (5,), False, False),
    ],
    ids=str,
)
@pytest.mark.parametrize("dtype", [tp.float32, tp.bfloat16], ids=str)
def test_transposed_batched_and_broadcast_operands(settings, library, shape_a, shape_b, flip_a, flip_b, dtype):
    x, a = _stored(shape_a, dtype, flip_a, 20) if len(shape_a) > 1 else random_tensor(shape_a, dtype, seed=20)
    y, b = _stored(shape_b, dtype, flip_b, 21) if len(shape_b) > 1 else random_tensor(shape_b, dtype, seed=21)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    for _ in range(2):  # the first product makes a plan, the second uses it
        by_library, by_kernels = _both_paths(settings, x, y)
        assert by_library.shape == want.shape
        np.testing.assert_allclose(by_library.astype(np.float64), want, **_tol(dtype))
        np.testing.assert_allclose(by_library.astype(np.float64), by_kernels.astype(np.float64), **_tol(dtype))


def test_strided_views_are_read_where_they_lie(library):
    # Rows at a pitch (a slice of columns), a transposed slice, a batch at a
    # stride: cuBLAS reads them in place, and the product allocates its output only.
    big, big_np = random_tensor((4, 20, 25), tp.float64, seed=30)
    cases = [
        (big[0, :, :15], big[1, :15, :10], big_np[0, :, :15], big_np[1, :15, :10]),
        (big[0, :15, :].t(), big[2, :15, 5:15], big_np[0, :15, :].T, big_np[2, :15, 5:15]),
        (
            big[::2, :10, :15],
            big[1::2, :10, :15].transpose(-1, -2),
            big_np[::2, :10, :15],
            np.swapaxes(big_np[1::2, :10, :15], -1, -2),
        ),  # fmt: skip
    ]
    for x, y, a, b in cases:
        x @ y  # the first product makes the plan (and this stream's workspace)
        before = tp.cuda.memory_stats()["num_allocs"]
        out = x @ y
        assert tp.cuda.memory_stats()["num_allocs"] - before == 1
        np.testing.assert_allclose(out.numpy(), np.matmul(a, b), rtol=1e-12, atol=1e-12)


def test_a_streams_workspace_is_made_once_and_goes_with_the_stream(library):
    x, a = random_tensor((4, 4), tp.float32, seed=90)
    s = tp.cuda.Stream()
    gc.collect()  # an earlier test's garbage, collected during this one, would move the count
    before = tp.cuda.memory_allocated()
    with tp.cuda.stream(s):
        out = x @ x
        after_first = tp.cuda.memory_allocated()
        assert after_first - before >= cublas.WORKSPACE_BYTES  # the stream's workspace, from tensorplay's allocator
        out2 = x @ x
        assert tp.cuda.memory_allocated() - after_first < cublas.WORKSPACE_BYTES  # the output alone
    s.synchronize()
    np.testing.assert_allclose(out2.numpy(), a.astype(np.float64) @ a, rtol=1e-5, atol=1e-4)
    del out, out2, s
    gc.collect()
    assert tp.cuda.memory_allocated() == before


@pytest.mark.skipif(not ON_SIM, reason="reads NumpyCublas's record of the calls")
def test_the_calls_cublas_gets(library):
    # C = A @ B row-major is C^T = B^T A^T column-major: B first, m and n swapped.
    x, _ = random_tensor((6, 4), tp.float32, seed=80)
    y, _ = random_tensor((5, 4), tp.float32, seed=81)
    x @ y.t()
    assert library.calls[-1] == ("gemm_ex", {"transa": "T", "transb": "N", "m": 5, "n": 6, "k": 4, "lda": 4,
                                             "ldb": 4, "ldc": 5, "stride_a": 0, "stride_b": 0, "stride_c": 0,
                                             "batch": 1})  # fmt: skip
    rows, _ = random_tensor((2, 3, 6, 4), tp.float32, seed=82)
    rows @ y.t()  # the batch of rows is one product of 36 rows
    name, args = library.calls[-1]
    assert (name, args["m"], args["n"], args["batch"]) == ("gemm_ex", 5, 36, 1)
    y3, _ = random_tensor((3, 4, 5), tp.float32, seed=83)
    x @ y3  # one matrix times a batch: stride 0 for it
    name, args = library.calls[-1]
    assert (name, args["batch"], args["stride_a"], args["stride_b"], args["stride_c"]) == (
        "gemm_strided_batched_ex",
        3,
        20,
        0,
        30,
    )


# -- graphs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", LIBRARY_DTYPES, ids=str)
def test_products_are_captured_and_replayed(library, dtype):
    x, _ = random_tensor((3, 6, 8), dtype, seed=50)
    y, _ = random_tensor((8, 5), dtype, seed=51)
    x @ y  # warm-up
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        out = (x @ y).transpose(-1, -2) @ x  # a product of a product: its operand transposed
    for seed in (52, 53):  # new inputs, written into the captured tensors
        xs, a = random_tensor((3, 6, 8), dtype, seed=seed)
        ys, b = random_tensor((8, 5), dtype, seed=seed + 10)
        x.copy_(xs)
        y.copy_(ys)
        g.replay()
        first = np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(dtype.np).astype(np.float64)
        want = np.matmul(np.swapaxes(first, -1, -2), a.astype(np.float64))
        np.testing.assert_allclose(out.numpy().astype(np.float64), want, **_tol(dtype))


def test_a_while_body_multiplies_at_every_pass(library):
    # v <- m @ v, n times, inside a while node: cuBLAS in a conditional body.
    m, m_np = random_tensor((8, 8), tp.float64, seed=60, low=-0.3, high=0.3, min_abs=0.01)
    v, v_np = random_tensor((8, 3), tp.float64, seed=61)
    n, flag = tp.tensor([5], dtype=tp.int32), tp.empty(1, dtype=tp.bool)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        tp.gt(n, 0, out=flag)
        with g.while_(flag):
            v.copy_(m @ v)
            n.sub_(1)
            tp.gt(n, 0, out=flag)
    want = v_np.copy()
    for passes in (5, 3):
        n.fill_(passes)
        g.replay()
        for _ in range(passes):
            want = m_np @ want
        np.testing.assert_allclose(v.numpy(), want, rtol=1e-12, atol=1e-12)


def test_a_thread_whose_first_product_is_inside_a_capture(library):
    # The thread has no cuBLAS handle yet when its capture meets the product:
    # it is made without breaking the capture.
    x, a = random_tensor((6, 4), tp.float32, seed=70)
    y, b = random_tensor((4, 5), tp.float32, seed=71)
    result, errors = {}, []

    def work():
        try:
            g = tp.cuda.CUDAGraph()
            with tp.cuda.graph(g):
                out = x @ y
            g.replay()
            result["out"] = out.numpy()
        except Exception as e:  # reported by the test's thread
            errors.append(e)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert not errors, errors
    np.testing.assert_allclose(result["out"], a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)


def test_explain_names_cublas(settings, library):
    text = settings.explain(8, 8, 8, batch=4, dtype="float16")
    assert text.startswith("matmul 4 x (8, 8) @ (8, 8) float16, A, B: cuBLAS (nvmath-python "), text
    assert "cublasGemmStridedBatchedEx, CUBLAS_COMPUTE_32F: tensor-core products summed in float32" in text, text
    assert "cublasGemmEx, CUBLAS_COMPUTE_64F: float64 products and sums" in settings.explain(8, 8, 8, dtype="float64")


# -- only the real library ------------------------------------------------------------------------------


@pytest.mark.gpu
def test_float32_is_exact_by_default_and_tf32_is_opt_in(settings, library):
    x, a = random_tensor((256, 1024), tp.float32, seed=40)
    y, b = random_tensor((1024, 256), tp.float32, seed=41)
    want = a.astype(np.float64) @ b.astype(np.float64)

    def rel_err(out):
        return np.linalg.norm(out.numpy().astype(np.float64) - want) / np.linalg.norm(want)

    exact = rel_err(x @ y)
    assert exact < 1e-6, exact  # float32 products and sums: TF32's 10-bit mantissas would give ~1e-4
    assert "tp.backends.matmul.allow_tf32 is False" in settings.explain(256, 256, 1024)
    settings.allow_tf32 = True
    assert "CUBLAS_COMPUTE_32F_FAST_TF32" in settings.explain(256, 256, 1024)
    tf32 = rel_err(x @ y)
    assert exact < tf32 < 5e-3, (exact, tf32)  # changed, within TF32's tolerance
    settings.allow_tf32 = False
    assert rel_err(x @ y) == exact  # and back


@pytest.mark.gpu
def test_a_cublas_error_is_a_sentence(library):
    with pytest.raises(tp.cuda.CudaError, match=r"^cublasGemmEx failed: CUBLAS_STATUS_INVALID_VALUE: "):
        cublas.Gemm("float32", 1, 4, 4, 4, False, 1, 0, False, 4, 0)(0, 0, 0)  # lda 1 < k: refused


# -- a bias in cuBLASLt's epilogue (the GPU) -----------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [tp.float16, tp.bfloat16, tp.float32], ids=str)
def test_a_linear_maps_bias_is_added_in_cublaslts_epilogue(library, dtype):
    import tensorplay.nn.functional as F
    from tensorplay.runtime.libraries import cublaslt

    x, a = random_tensor((2, 9, 24), dtype, seed=70)
    w, b = random_tensor((40, 24), dtype, seed=71)
    bias, c = random_tensor((40,), dtype, seed=72)
    assert cublaslt.plan(dtype.name, 18, 40, 24, False) is not None, cublaslt.refusal()
    want = a.astype(np.float64) @ b.astype(np.float64).T + c.astype(np.float64)
    np.testing.assert_allclose(F.linear(x, w, bias).numpy().astype(np.float64), want, **_tol(dtype))
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        out = F.linear(x, w, bias)
    assert "elementwise.add" not in g.dot(), g.dot()  # the bias went into the product's call
    xs, a = random_tensor((2, 9, 24), dtype, seed=73)
    x.copy_(xs)
    g.replay()
    want = a.astype(np.float64) @ b.astype(np.float64).T + c.astype(np.float64)
    np.testing.assert_allclose(out.numpy().astype(np.float64), want, **_tol(dtype))
