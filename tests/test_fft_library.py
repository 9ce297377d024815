"""cuFFT through nvmath-python's bindings (``runtime/libraries/cufft.py``): the
plans tensorplay makes, their work areas and streams, what a capture keeps,
the errors, and what happens where cuFFT cannot serve.

The ``library`` fixture gives the tests cuFFT: the real one on a GPU (skipped,
with the reason, where nvmath-python or libcufft is missing), and on the
simulator ``NumpyCufft``, a stand-in that computes cuFFT's batched transforms
in NumPy from the arguments tensorplay passes (the plan's sizes, embeddings,
distances, type and batch), queued on the plan's stream as a kernel is, so
that captures and while bodies take it. It refuses what cuFFT would refuse
here (a plan made with auto-allocation on, a call without its work area),
and a C2R scribbles over its input, as cuFFT may.
"""

from __future__ import annotations

import enum
import gc
import re
import subprocess
import sys
import threading
import types

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import _fft_choice, _fft_ops
from tensorplay._fft_choice import FFT
from tensorplay.runtime.backend import CudaError
from tensorplay.runtime.backend import get as get_backend
from tensorplay.runtime.caches import BoundedCache
from tensorplay.runtime.libraries import cufft
from tensorplay.runtime.libraries._nvmath import INSTALL, LibraryUnavailable
from tensorplay.runtime.memory import allocator

ON_SIM = tp.cuda.backend() == "sim"


class NumpyCufft:
    """The calls of ``nvmath.bindings.cufft`` tensorplay makes, on the simulator's
    memory. ``calls`` records (function, arguments by name); ``destroyed`` the
    plans destroyed."""

    Type = enum.IntEnum("Type", {"C2C": 0x29, "R2C": 0x2A, "C2R": 0x2C, "Z2Z": 0x69, "D2Z": 0x6A, "Z2D": 0x6C})
    Result = enum.IntEnum(
        "Result", {"SUCCESS": 0, "INVALID_PLAN": 1, "ALLOC_FAILED": 2, "INVALID_VALUE": 4, "EXEC_FAILED": 6,
                   "INVALID_SIZE": 8, "NO_WORKSPACE": 13}
    )  # fmt: skip
    # cuFFT's type: (input NumPy type, output NumPy type)
    TYPES = {
        "C2C": (np.complex64, np.complex64), "Z2Z": (np.complex128, np.complex128),
        "R2C": (np.float32, np.complex64), "D2Z": (np.float64, np.complex128),
        "C2R": (np.complex64, np.float32), "Z2D": (np.complex128, np.float64),
    }  # fmt: skip

    class cuFFTError(Exception):
        def __init__(self, status):
            self.status = status
            super().__init__(f"status {status}")

    def __init__(self) -> None:
        self.dev = get_backend()
        self.plans: dict[int, dict] = {}
        self.calls: list[tuple[str, dict]] = []
        self.destroyed: list[int] = []
        self.fail: dict[str, int] = {}  # function -> the status it fails with

    def _maybe_fail(self, name: str) -> None:
        if name in self.fail:
            raise self.cuFFTError(self.fail[name])

    def get_version(self) -> int:
        return 12000

    def create(self) -> int:
        h = len(self.plans) + 1
        self.plans[h] = {"auto": 1, "stream": None, "work": None}
        return h

    def destroy(self, h) -> None:
        self.destroyed.append(h)

    def set_auto_allocation(self, h, value) -> None:
        self.plans[h]["auto"] = value

    def make_plan_many64(self, h, rank, n, inembed, istride, idist, onembed, ostride, odist, type_, batch) -> int:
        self._maybe_fail("make_plan_many64")
        plan = self.plans[h]
        assert plan["auto"] == 0, "auto-allocation on: cuFFT would allocate its own work area"
        kind = self.Type(type_).name
        assert rank == len(n) == len(inembed) == len(onembed) and 1 <= rank <= 3
        assert istride == ostride == 1 and idist == int(np.prod(inembed)) and odist == int(np.prod(onembed))
        complex_side = list(n[:-1]) + [n[-1] // 2 + 1]
        want_in, want_out = {"R2C": (n, complex_side), "D2Z": (n, complex_side), "C2R": (complex_side, n),
                             "Z2D": (complex_side, n)}.get(kind, (n, n))  # fmt: skip
        assert list(inembed) == list(want_in) and list(onembed) == list(want_out)
        work = 64 * int(np.prod(n))  # some work area, growing with the size
        plan.update(kind=kind, n=list(n), inembed=list(inembed), onembed=list(onembed), batch=batch, work_size=work)
        self.calls.append(("make_plan_many64", {"kind": kind, "n": list(n), "batch": batch}))
        return work

    def set_stream(self, h, stream) -> None:
        self.plans[h]["stream"] = stream

    def set_work_area(self, h, ptr) -> None:
        plan = self.plans[h]
        self.dev.view(ptr, (plan["work_size"],), (1,), np.uint8)  # an allocation that holds it
        plan["work"] = ptr

    def exec_c2c(self, h, i, o, direction) -> None:
        self._exec("exec_c2c", h, i, o, direction)

    def exec_z2z(self, h, i, o, direction) -> None:
        self._exec("exec_z2z", h, i, o, direction)

    def exec_r2c(self, h, i, o) -> None:
        self._exec("exec_r2c", h, i, o, -1)

    def exec_d2z(self, h, i, o) -> None:
        self._exec("exec_d2z", h, i, o, -1)

    def exec_c2r(self, h, i, o) -> None:
        self._exec("exec_c2r", h, i, o, 1)

    def exec_z2d(self, h, i, o) -> None:
        self._exec("exec_z2d", h, i, o, 1)

    def _exec(self, name, h, i, o, direction) -> None:
        self._maybe_fail(name)
        plan = self.plans[h]
        assert plan["stream"] is not None and plan["work"] is not None, "no stream or work area set"
        assert name == f"exec_{plan['kind'].lower()}"
        self.calls.append((name, {"h": h, "stream": plan["stream"], "work": plan["work"], "direction": direction}))
        tin, tout = self.TYPES[plan["kind"]]
        batch, n = plan["batch"], plan["n"]

        def view(ptr, dims, dtype):
            shape = (batch, *dims)
            strides = [np.dtype(dtype).itemsize]
            for d in reversed(shape[1:]):
                strides.insert(0, strides[0] * d)
            return self.dev.view(ptr, shape, tuple(strides), np.dtype(dtype))

        def run():
            a, b = view(i, plan["inembed"], tin), view(o, plan["onembed"], tout)
            axes = tuple(range(1, len(n) + 1))
            if plan["kind"] in ("C2C", "Z2Z"):
                b[...] = np.fft.fftn(a, axes=axes) if direction == -1 else np.fft.ifftn(a, axes=axes, norm="forward")
            elif plan["kind"] in ("R2C", "D2Z"):
                b[...] = np.fft.rfftn(a, axes=axes)
            else:
                b[...] = np.fft.irfftn(a, s=n, axes=axes, norm="forward")
                a[...] = np.nan  # cuFFT's C2R may overwrite its input

        self.dev.enqueue(self.dev.stream_from_int(plan["stream"]), "kernel", run, f"cufft {name}")

    def execs(self) -> list[dict]:
        return [args | {"name": name} for name, args in self.calls if name.startswith("exec")]

    def made(self) -> list[dict]:
        return [args for name, args in self.calls if name == "make_plan_many64"]


@pytest.fixture
def library(monkeypatch):
    """cuFFT for the test: the real one on a GPU (or a skip saying why not),
    ``NumpyCufft`` on the simulator (yielded, to read its calls)."""
    if not ON_SIM:
        reason = cufft.unavailable()
        if reason is not None:
            pytest.skip(f"cuFFT is not usable here: {reason}")
        yield None
        return
    fake, workspaces = NumpyCufft(), {}
    for name, value in {
        "_lib": fake, "_loaded": True, "_reason": None, "_versions": "nvmath-python (NumpyCufft), cuFFT 12.0.0",
        "_plans": BoundedCache("cufft.plans (test)", 1024), "_workspaces": workspaces,
    }.items():  # fmt: skip
        monkeypatch.setattr(cufft, name, value)
    yield fake
    tp.cuda.synchronize()
    for block in workspaces.values():
        allocator.free(block)


def _data(shape, kind: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if kind == "c" else x


def _close(got: tp.Tensor, want: np.ndarray, tol: float = 1e-12) -> None:
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))


# -- the calls (NumpyCufft on the simulator, cuFFT on a GPU) ----------------------------------------


@pytest.mark.parametrize("single", [False, True], ids=["double", "single"])
def test_every_kind_matches_numpy(library, single):
    c, r = np.complex64 if single else np.complex128, np.float32 if single else np.float64
    tol = 2e-5 if single else 1e-12
    a, x = _data((4, 6, 5, 3), "c", seed=1), _data((3, 4, 5, 6), "r", seed=2)
    ta, tx = tp.tensor(a.astype(c)), tp.tensor(x.astype(r))
    a, x = a.astype(c).astype(complex), x.astype(r).astype(float)
    _close(tp.fft.fft(ta, n=7, axis=1), np.fft.fft(a, n=7, axis=1), tol)
    _close(tp.fft.ifftn(ta, norm="ortho"), np.fft.ifftn(a, norm="ortho"), tol)  # four axes: two steps
    _close(tp.fft.rfftn(tx, axes=(3, 1, 0, 2)), np.fft.rfftn(x, axes=(3, 1, 0, 2)), tol)
    _close(tp.fft.irfftn(ta), np.fft.irfftn(a, axes=(0, 1, 2, 3)), tol)
    _close(tp.fft.hfft(ta, n=5, axis=0), np.fft.hfft(a, n=5, axis=0), tol)
    _close(tp.fft.ihfft(tx, axis=2), np.fft.ihfft(x, axis=2), tol)


def test_the_plans_and_calls_of_a_four_axis_c2r(library):
    if library is None:
        pytest.skip("the calls are read from the stand-in")
    a = tp.tensor(_data((4, 6, 5, 3), "c", seed=3))
    tp.fft.irfftn(a)
    assert library.made() == [
        {"kind": "Z2Z", "n": [4], "batch": 90},  # the first axis by itself (6 * 5 * 3 entries)...
        {"kind": "Z2D", "n": [6, 5, 4], "batch": 4},  # ...then a rank-3 C2R over the others
    ]
    execs = library.execs()
    assert [(e["name"], e["direction"]) for e in execs] == [("exec_z2z", 1), ("exec_z2d", 1)]
    s = tp.cuda.current_stream()
    assert all(e["stream"] == s.handle for e in execs)


def test_a_plan_is_made_once_per_shape(library):
    x = tp.tensor(_data((3, 46), "c", seed=4))  # sizes no other test uses: the cache is the process's
    count = cufft.plan_count()
    for _ in range(3):
        tp.fft.fft(x)
        tp.fft.ifft(x)  # the same plan, run the other way
    assert cufft.plan_count() == count + 1
    tp.fft.fft(x[:2])  # another batch: another plan
    tp.fft.fft(x.to(tp.complex64))  # another precision too
    assert cufft.plan_count() == count + 3
    if library is not None:
        assert len(library.made()) == 3


def test_work_areas_come_from_the_allocator_per_stream(library):
    if library is None:
        pytest.skip("the work areas are read from the stand-in")
    small, large = tp.tensor(_data((8,), "c", seed=5)), tp.tensor(_data((64,), "c", seed=6))
    s = tp.cuda.current_stream()
    tp.fft.fft(small)
    first = cufft._workspaces[s.handle]
    assert library.execs()[-1]["work"] == first.ptr and first.size >= 64 * 8
    tp.fft.fft(small)
    assert cufft._workspaces[s.handle] is first  # kept
    tp.fft.fft(large)  # a plan needing more: a larger block replaces it
    grown = cufft._workspaces[s.handle]
    assert grown.size >= 64 * 64 and library.execs()[-1]["work"] == grown.ptr
    other = tp.cuda.Stream()
    with tp.cuda.stream(other):
        tp.fft.fft(small)
    assert library.execs()[-1]["stream"] == other.handle
    assert cufft._workspaces[other.handle] is not grown  # a stream's own work area


def test_the_input_of_a_c2r_is_left_alone(library):
    # cuFFT's C2R overwrites its input (the stand-in writes NaNs there): the library gets a copy
    a = np.fft.rfft(_data((3, 10), "r", seed=7))
    x = tp.tensor(a)
    _close(tp.fft.irfft(x), np.fft.irfft(a))
    _close(tp.fft.irfft2(x), np.fft.irfft2(a))
    np.testing.assert_array_equal(x.numpy(), a)


def test_a_capture_takes_its_work_area_from_its_pool_and_keeps_the_plan(library):
    a = _data((5, 12), "c", seed=8)
    x = tp.tensor(a)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        out = tp.fft.fft(x)
    if library is not None:
        captured = library.execs()[-1]
        assert captured["work"] not in [b.ptr for b in cufft._workspaces.values()]  # the capture's own block
        handle = captured["h"]
    tp.cuda.clear_caches()  # the cache lets go of the plan: the graph keeps it
    gc.collect()
    if library is not None:
        assert handle not in library.destroyed
    for seed in (9, 10):
        a = _data((5, 12), "c", seed=seed)
        x.copy_(tp.tensor(a))
        g.replay()
        _close(out, np.fft.fft(a))
    del out
    g.reset()
    gc.collect()
    if library is not None:
        assert handle in library.destroyed  # neither the cache nor a graph has it: destroyed


def test_a_while_body_through_the_library(library):
    # v <- ifft(fft(v) * k): a filter applied at each pass of a while node
    a = _data((2, 9), "c", seed=11)
    k = np.exp(-0.1 * np.arange(9))
    v, kt = tp.tensor(a), tp.tensor(k.astype(complex))
    n, flag = tp.tensor([0], dtype=tp.int32), tp.empty(1, dtype=tp.bool)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        tp.gt(n, 0, out=flag)
        with g.while_(flag):
            v.copy_(tp.fft.ifft(tp.fft.fft(v) * kt))
            n.sub_(1)
            tp.gt(n, 0, out=flag)
    want = a.copy()
    for passes in (3, 1):
        n.fill_(passes)
        g.replay()
        for _ in range(passes):
            want = np.fft.ifft(np.fft.fft(want) * k)
        _close(v, want)


def test_a_thread_whose_first_transform_is_inside_a_capture(library):
    # The thread has made no plan, nor anything else: the plan is made during its capture.
    a = _data((3, 14), "c", seed=13)
    x = tp.tensor(a)
    result, errors = {}, []

    def work():
        try:
            g = tp.cuda.CUDAGraph()
            with tp.cuda.graph(g):
                out = tp.fft.ifft(x, n=15)
            g.replay()
            result["out"] = out.numpy()
        except Exception as e:  # reported by the test's thread
            errors.append(e)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert not errors, errors
    np.testing.assert_allclose(result["out"], np.fft.ifft(a, n=15), rtol=1e-12, atol=1e-12)


def test_explain_names_cufft_and_its_plan(library):
    text = FFT.explain("rfft2", (3, 6, 10), "float64")
    assert text.startswith(
        "rfft2 (3, 6, 10) float64 -> (3, 6, 6) complex128, axes (1, 2), n (6, 10): cuFFT (nvmath-python "
    )
    assert "cufftExecD2Z of rank 2, sizes [6, 10], batch 3 (plan made at the first call) over axes (1, 2)" in text, text
    tp.fft.rfft2(tp.ones((3, 6, 10), dtype=tp.float64))
    work = cufft.plan("R2C", "float64", (6, 10), 3).work_bytes
    assert f"cufftExecD2Z of rank 2, sizes [6, 10], batch 3 (work area {work} bytes)" in FFT.explain(
        "rfft2", (3, 6, 10), "float64"
    )


# -- errors (the stand-in) ------------------------------------------------------------------------------


@pytest.mark.skipif(not ON_SIM, reason="the stand-in fails on request")
def test_cufft_errors_become_sentences(library):
    x = tp.tensor(_data((4, 8), "c", seed=12))
    library.fail["make_plan_many64"] = NumpyCufft.Result.INVALID_SIZE
    with pytest.raises(
        CudaError,
        match=r"^cufftMakePlanMany64 failed: CUFFT_INVALID_SIZE: cuFFT does not take a transform of these sizes$",
    ):
        tp.fft.fft(x)
    assert library.destroyed  # the handle of the plan that failed
    del library.fail["make_plan_many64"]
    library.fail["exec_z2z"] = NumpyCufft.Result.EXEC_FAILED
    with pytest.raises(CudaError, match=r"^cufftExecZ2Z failed: CUFFT_EXEC_FAILED: a cuFFT kernel failed to launch$"):
        tp.fft.fft(x)


# -- where cuFFT cannot serve ---------------------------------------------------------------------------


def test_on_a_gpu_without_cufft_a_transform_is_refused_with_what_to_install(monkeypatch):
    reason = f"nvmath-python is not installed; {INSTALL}"
    monkeypatch.setattr(cufft, "_loaded", True)
    monkeypatch.setattr(cufft, "_reason", reason)
    gpu = types.SimpleNamespace(name="cuda")  # as the GPU's backend answers
    monkeypatch.setattr(_fft_ops, "get_backend", lambda: gpu)
    monkeypatch.setattr(_fft_choice, "get_backend", lambda: gpu)
    sentence = f"tensorplay computes transforms on the GPU with cuFFT only, which cannot serve: {reason}"
    with pytest.raises(LibraryUnavailable, match="^" + re.escape(sentence) + "$"):
        tp.fft.rfft(tp.ones(8))
    assert FFT.explain("rfft", (8,), "float32").endswith(f": refused: {sentence}")
    assert tp.fft.fft(tp.ones((3, 1)), axis=1).shape == (3, 1)  # nothing to transform: no library needed


@pytest.mark.skipif(not ON_SIM, reason="the simulator's reason")
def test_the_simulator_says_why_it_takes_numpy():
    assert cufft.unavailable() == "cuFFT runs on a GPU only, and this is the CPU simulator"
    assert "numpy.fft on the simulator (cuFFT runs on a GPU only, and this is the CPU simulator)" in FFT.explain(
        "fft", (8,)
    )


def test_a_libcufft_that_does_not_load_is_a_sentence():
    def refuse():
        raise RuntimeError("libcufft.so.12: cannot open shared object file")

    with pytest.raises(LibraryUnavailable, match=r"^libcufft could not be loaded \(RuntimeError: libcufft\.so\.12"):
        cufft.library_version(types.SimpleNamespace(get_version=refuse))
    assert cufft.library_version(types.SimpleNamespace(get_version=lambda: 11302)) == "11.3.2"


def test_without_nvmath_tensorplay_imports_and_transforms_on_the_simulator():
    code = (
        "import sys; sys.modules['nvmath'] = None\n"
        "import numpy as np, tensorplay as tp\n"
        "try:\n"
        "    ok = np.allclose(tp.fft.fft(tp.ones(4)).numpy(), [4, 0, 0, 0])\n"
        "except RuntimeError as e:\n"
        "    ok = str(e)\n"
        "print(ok)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    want = "True" if ON_SIM else "tensorplay computes transforms on the GPU with cuFFT only, which cannot serve: "
    assert out.stdout.startswith(want), out.stdout + out.stderr
