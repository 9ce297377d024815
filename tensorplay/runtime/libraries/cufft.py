"""cuFFT through nvmath-python: batched transforms of dense arrays on raw pointers.

**The call.** A ``Plan`` is one transform of rank 1 to 3 over the last axes of
a C-contiguous array, ``batch`` times: the input is (batch, *in_sizes)
dense, the output (batch, *out_sizes) dense, out of place. ``sizes`` are the
logical lengths (the real side's for real transforms): a complex-to-complex
plan (C2C, Z2Z in double precision) keeps them, real-to-complex (R2C, D2Z)
gives ``sizes[-1] // 2 + 1`` complex values along the last axis, and
complex-to-real (C2R, Z2D) takes that many. Transforms are unnormalised,
as cuFFT computes them; C2C runs either way (``forward``), R2C forward and
C2R inverse only. C2R overwrites its input: the callers pass a copy.

**Plans** are made once per (kind, precision, sizes, batch) with
``cufftMakePlanMany64`` after ``cufftSetAutoAllocation(plan, 0)``: cuFFT
never allocates its work area itself. A plan whose work a capture recorded is
held by that graph (``allocator.hold``) and destroyed only when neither the
cache nor a graph has it, once no capture is in progress.

**Work areas** come from tensorplay's allocator, as cuBLAS's workspaces do:
eagerly one block per stream, grown to the largest plan met on it and kept
while the stream lives; on a capturing stream (a conditional body's too) a
block of the capture's pool for that one call, given back at once. Each call
sets the plan's stream (the current one) and work area, under the plan's lock.

``unavailable()`` says why cuFFT cannot serve here (None when it can): the
simulator, nvmath-python missing, libcufft that does not load. It imports
nvmath-python the first time it is asked on a GPU.
"""

from __future__ import annotations

import threading
import weakref
from functools import partial

from ..backend import CudaError
from ..backend import get as get_backend
from ..caches import BoundedCache
from ..capture import capture_state, flush_fused, refuse_legacy_launch, release_after_captures
from ..memory import allocator
from ..streams import current_stream
from ._nvmath import LibraryUnavailable, bindings, library_calls, load, version

__all__ = [
    "KINDS", "MAX_RANK", "PRECISIONS", "Plan", "describe", "half", "library_version", "plan", "plan_count",
    "unavailable", "versions",
]  # fmt: skip

KINDS = ("C2C", "R2C", "C2R")
PRECISIONS = ("float32", "float64")  # the real side's type: complex64 and complex128 on the complex side
MAX_RANK = 3  # cuFFT's transforms have one to three axes
FORWARD, INVERSE = -1, 1  # CUFFT_FORWARD, CUFFT_INVERSE: the sign of the exponent

# cuFFT's type of each (kind, precision), and the function executing it
_TYPES = {
    ("C2C", "float32"): "C2C", ("C2C", "float64"): "Z2Z",
    ("R2C", "float32"): "R2C", ("R2C", "float64"): "D2Z",
    ("C2R", "float32"): "C2R", ("C2R", "float64"): "Z2D",
}  # fmt: skip
_ADVICE = {
    "CUFFT_ALLOC_FAILED": "cuFFT could not allocate memory; free tensors or call tp.cuda.empty_cache()",
    "CUFFT_INVALID_PLAN": "cuFFT was given a plan it does not know (a bug in tensorplay: please report it)",
    "CUFFT_INVALID_VALUE": "cuFFT refused an argument of the call (a bug in tensorplay: please report it)",
    "CUFFT_INVALID_TYPE": "cuFFT refused the transform's type (a bug in tensorplay: please report it)",
    "CUFFT_INVALID_SIZE": "cuFFT does not take a transform of these sizes",
    "CUFFT_INTERNAL_ERROR": "cuFFT failed inside; check that its CUDA version suits the driver",
    "CUFFT_EXEC_FAILED": "a cuFFT kernel failed to launch",
    "CUFFT_SETUP_FAILED": "cuFFT could not start; check that its CUDA version suits the driver",
    "CUFFT_NO_WORKSPACE": "cuFFT was given no work area (a bug in tensorplay: please report it)",
    "CUFFT_NOT_SUPPORTED": "cuFFT does not take this transform's sizes or layout",
}

_lock = threading.Lock()
_loaded = False
_lib = None  # nvmath.bindings.cufft once cuFFT answered
_reason: str | None = None
_versions = ""  # "nvmath-python 1.0.1, cuFFT 12.0.0"
_plans = BoundedCache("cufft.plans", 1024)  # (kind, precision, sizes, batch) -> Plan
_workspaces: dict[int, object] = {}  # stream handle -> its eager work area (an allocator Block)


def unavailable() -> str | None:
    """None when cuFFT serves transforms here, else why not (one sentence)."""
    if not _loaded:
        _load()
    return _reason


def library_version(lib) -> str:
    """The cuFFT version of the bindings module ``lib``, loading libcufft;
    ``LibraryUnavailable`` when it does not load."""
    try:
        v = int(lib.get_version())  # major * 1000 + minor * 100 + patch
    except Exception as e:
        raise LibraryUnavailable(
            f"libcufft could not be loaded ({type(e).__name__}: {e}); install NVIDIA's cuFFT "
            "(nvidia-cufft for CUDA 13, nvidia-cufft-cu12 for CUDA 12) or the CUDA toolkit"
        ) from None
    return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"


def _load() -> None:
    global _loaded, _reason, _versions
    with _lock:
        if not _loaded:
            _reason, _versions = load("cuFFT", _start)
            _loaded = True


def _start() -> str:
    global _lib
    lib = bindings("cufft")
    cufft_version = library_version(lib)
    lib.destroy(lib.create())  # proving cuFFT starts
    _lib = lib
    return f"nvmath-python {version()}, cuFFT {cufft_version}"


def _failed(lib, function: str, e: Exception) -> CudaError:
    """The error of a cuFFT call that failed with ``e`` (nvmath's cuFFTError)."""
    try:
        code = f"CUFFT_{lib.Result(e.status).name}"
    except Exception:
        code = "CUFFT_UNKNOWN"
    advice = _ADVICE.get(code, str(e))
    return CudaError(f"{function} failed: {code}: {advice}", function, code)


# -- work areas ---------------------------------------------------------------------------------


def _stream_workspace(s, nbytes: int) -> int:
    """The eager work area of stream ``s``, of at least ``nbytes``: made at its
    first transform, replaced by a larger one when a plan needs more (the old
    block goes back to the allocator, reused in stream order)."""
    with _lock:
        block = _workspaces.get(s.handle)
        if block is None or block.size < nbytes:
            if block is not None:
                allocator.free(block)
            block = _workspaces[s.handle] = allocator.allocate(nbytes, s)
            try:
                weakref.finalize(s, _release_workspace, s.handle, block)
            except TypeError:  # a stream that cannot be referenced weakly: kept for the process
                pass
    return block.ptr


def _release_workspace(key: int, block) -> None:
    """The stream went: its work area goes back to the allocator (once)."""
    if _workspaces.get(key) is block:
        del _workspaces[key]
        allocator.free(block)


# -- plans ------------------------------------------------------------------------------------


def plan(kind: str, precision: str, sizes: tuple, batch: int) -> Plan:
    """The plan of ``batch`` transforms ``kind`` of ``sizes`` in ``precision``
    ("float32", "float64"), made at its first use; cuFFT must be available."""
    key = (kind, precision, sizes, batch)
    p = _plans.get(key)
    if p is None:
        p = _plans.put(key, Plan(kind, precision, sizes, batch))
    return p


def plan_count() -> int:
    """How many plans are kept."""
    return len(_plans)


def half(sizes: tuple) -> tuple:
    """The complex side's sizes of a real transform of ``sizes``."""
    return tuple(sizes[:-1]) + (sizes[-1] // 2 + 1,)


def describe(kind: str, precision: str, sizes: tuple, batch: int) -> str:
    """How cuFFT computes one step (for ``explain``; cuFFT available): the call
    and, once the plan is made, its work area."""
    name = _TYPES[kind, precision]
    made = _plans.get((kind, precision, tuple(sizes), batch))
    work = f"work area {made.work_bytes} bytes" if made is not None else "plan made at the first call"
    return f"cufftExec{name} of rank {len(sizes)}, sizes {list(sizes)}, batch {batch} ({work})"


def versions() -> str:
    """ "nvmath-python X, cuFFT Y" (cuFFT available)."""
    return _versions


def _destroy(lib, h: int) -> None:
    lib.destroy(h)


class Plan:
    """A cuFFT plan (see the module docstring for the layout); call it with the
    data pointers ``(src, dst)`` and, for C2C, ``forward``."""

    __slots__ = ("kind", "precision", "sizes", "batch", "work_bytes", "name", "block", "_lib", "_h", "_exec", "_lock",
                 "__weakref__")  # fmt: skip

    def __init__(self, kind: str, precision: str, sizes: tuple, batch: int) -> None:
        lib = self._lib = _lib
        cufft_type = _TYPES[kind, precision]
        self.kind, self.precision, self.sizes, self.batch = kind, precision, tuple(sizes), batch
        self.name = f"cufftExec{cufft_type}"
        self.block = None  # what allocator.hold asks of what a graph keeps: no memory of the allocator's
        self._exec = getattr(lib, f"exec_{cufft_type.lower()}")
        self._lock = threading.Lock()
        n = list(self.sizes)
        inembed, onembed = {"C2C": (n, n), "R2C": (n, list(half(n))), "C2R": (list(half(n)), n)}[kind]
        idist, odist = _count(inembed), _count(onembed)
        with library_calls():
            get_backend().ensure_thread()
            try:
                h = lib.create()
            except lib.cuFFTError as e:
                raise _failed(lib, "cufftCreate", e) from None
            try:
                lib.set_auto_allocation(h, 0)  # the work area is tensorplay's: none allocated by cuFFT
                cufft_type_value = int(lib.Type[cufft_type])
                self.work_bytes = int(
                    lib.make_plan_many64(h, len(n), n, inembed, 1, idist, onembed, 1, odist, cufft_type_value, batch)
                )
            except lib.cuFFTError as e:
                lib.destroy(h)
                raise _failed(lib, "cufftMakePlanMany64", e) from None
        self._h = h
        done = weakref.finalize(self, release_after_captures, partial(_destroy, lib, h))
        done.atexit = False  # the driver may be gone by then

    def __call__(self, src: int, dst: int, forward: bool = True) -> None:
        s = current_stream()
        if not capture_state.active:
            self._issue(s, src, dst, forward, None)
            return
        refuse_legacy_launch(self.name, s)
        flush_fused()
        with library_calls():
            capturing = s.is_capturing()
            block = allocator.allocate(self.work_bytes, s) if capturing and self.work_bytes else None
            try:
                self._issue(s, src, dst, forward, block)
            finally:
                if block is not None:
                    allocator.free(block)
            if capturing:
                allocator.hold(s, [self])  # the graph runs the plan's kernels on its tables

    def _issue(self, s, src: int, dst: int, forward: bool, block) -> None:
        lib, h = self._lib, self._h
        work = self.work_bytes
        area = block.ptr if block is not None else (_stream_workspace(s, work) if work else 0)
        with self._lock:  # one plan, one stream and work area at a time
            try:
                lib.set_stream(h, s.handle)
                if work:
                    lib.set_work_area(h, area)
                if self.kind == "C2C":
                    self._exec(h, src, dst, FORWARD if forward else INVERSE)
                else:
                    self._exec(h, src, dst)
            except lib.cuFFTError as e:
                raise _failed(lib, self.name, e) from None


def _count(sizes) -> int:
    n = 1
    for d in sizes:
        n *= d
    return n
