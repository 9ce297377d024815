"""Plain Numba kernels on the simulator: ``kernel[grid, block, stream](...)``.

Numba's simulator runs a configured kernel at once and ignores its stream. On
the GPU, Numba launches on the stream it is given, and tensorplay's Stream is
one of Numba's streams there, so a launch on a capturing Stream is captured by
the driver. This module does the same on the simulator: it takes over
``FakeCUDAKernel.__getitem__``, and a launch whose stream is a tensorplay Stream
goes onto that stream like any kernel of tensorplay's: run now, or, while the
stream captures, recorded as a kernel node that each replay runs again. Its
arrays alias the tensors' memory, so a replay reads what the memory holds then,
and its numbers are taken at the launch, as the driver copies kernel parameters.

Each tensor argument is asked for its memory through ``__dlpack__`` with the
launch's stream as consumer, as Numba does on the GPU: that is where tensorplay
orders the launch after its own work and, during a capture, lets the graph keep
the tensor alive. A launch on any other stream (none given: Numba's default
stream; a Numba stream) runs at once, as the simulator runs it, and is refused
while this thread captures in a mode other than relaxed: it would not be in the
graph (the GPU refuses a legacy-stream launch during such a capture too).
"""

from __future__ import annotations

import random
import sys
import threading
import warnings
import weakref
from typing import TYPE_CHECKING

import numpy as np
from numba.cuda.errors import normalize_kernel_dimensions
from numba.cuda.simulator import kernelapi
from numba.cuda.simulator.args import ArgHint
from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray, FakeWithinKernelCUDAArray
from numba.cuda.simulator.kernel import FakeCUDAKernel, _push_kernel_context
from numba.cuda.simulator.kernelapi import Dim3, FakeCUDAModule, FakeCUDAShared, swapped_cuda_module

from .errors import CaptureError, HazardError
from .kernel_names import code_names, names_reached
from .launch_limits import H200_LAUNCH_LIMITS, refuse_launch_shape
from .simint import int_array_type
from .simthreads import Watch, WatchedAtomics

if TYPE_CHECKING:
    from .sim import SimBackend

__all__ = ["StreamBase", "TensorArgument", "install", "interleave", "memory_array", "pointer_array", "run_kernel"]

_KERNEL_LOCK = threading.RLock()  # re-entrant: a while node's body runs inside its node
_numba_configure = FakeCUDAKernel.__getitem__  # the simulator's own, which ignores the stream
_sim: SimBackend | None = None  # the backend, once installed
_shuffle: random.Random | None = None  # set while the hazard check interleaves independent work


def interleave(rng: random.Random | None) -> None:
    """Run the blocks of a kernel whose threads never meet, and each block's
    threads, in orders drawn from ``rng``, and watch them for races between
    them (``simthreads``); None: in index order, unwatched."""
    global _shuffle
    _shuffle = rng


class StreamBase:
    """A base of tensorplay's Stream on the simulator: a plain launch takes an
    instance as its stream (``kernel[grid, block, stream]``) and reads the
    backend's stream from its ``_h``."""


class TensorArgument(ArgHint):
    """A base of Tensor on the simulator, one of Numba's argument hints: a plain
    launch on Numba's default stream passes an array over the tensor's memory,
    as on the GPU, where Numba takes a tensor through DLPack."""

    __slots__ = ()

    def to_device(self, retr, stream=0):
        return tensor_array(self)


def tensor_array(t):
    """A simulator array over the memory of tensor ``t``."""
    if t.dtype.np.kind not in "biuf":  # bfloat16: Numba has no array of it, on the GPU either
        _ = t.__cuda_array_interface__  # which refuses it with a sentence
    return memory_array(_sim, t._karray, t.ndim, t.dtype.np)


def memory_array(backend: SimBackend, k: tuple, ndim: int, dtype: np.dtype):
    """A simulator array over the device memory a kernel array's fields ``k``
    describe (meminfo, parent, nitems, itemsize, ptr, shape..., strides...);
    integer stores wrap as on the GPU."""
    array = int_array_type() if dtype.kind in "iu" else FakeCUDAArray
    return array(backend.view(k[4], k[5 : 5 + ndim], k[5 + ndim :], dtype))


def pointer_array(backend: SimBackend, ptr: int, dtype: np.dtype):
    """A simulator array over the device memory from ``ptr`` to the end of its
    allocation: what an element pointer parameter reaches."""
    array = int_array_type() if dtype.kind in "iu" else FakeCUDAArray
    return array(backend.view_to_end(ptr, dtype))


# A thread per CUDA thread meets the others at each barrier, which passes only once every thread has
# had the interpreter: at Python's default switch interval (5 ms) a barrier of 16 threads took about
# 20 ms; at 0.1 ms, a seventh of that (set for the kernel's run only).
_THREAD_SWITCH_S = 1e-4


def _as_typed(a):
    """A Python number as the NumPy scalar of the type Numba gives it in a kernel on the GPU
    (int: int64, or uint64 past it; float: float64; complex: complex128), so that its
    arithmetic wraps and divides by zero there as on the GPU; anything else as it is (a
    bool too: Python's arithmetic on bools is Numba's, NumPy's refuses some)."""
    kind = type(a)
    if kind is int:
        return np.int64(a) if -(1 << 63) <= a < 1 << 63 else np.uint64(a) if 0 <= a < 1 << 64 else a
    if kind is float:
        return np.float64(a)
    return np.complex128(a) if kind is complex else a


def run_kernel(dispatcher, grid, block, shared_bytes, args) -> None:
    """Run a simulator kernel now (the simulator runs one kernel at a time in a
    process). Python numbers go in typed as on the GPU (``_as_typed``); integer
    overflow wraps, and a division by zero gives inf or NaN, silently on the GPU,
    where NumPy scalars warn."""
    args = [_as_typed(a) for a in args]
    with _KERNEL_LOCK, warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=RuntimeWarning)
        if _runs_in_sequence(dispatcher, args):
            _run_in_sequence(dispatcher.fn, grid, block, shared_bytes, args)
        else:
            switch = sys.getswitchinterval()
            sys.setswitchinterval(_THREAD_SWITCH_S)
            try:
                _numba_configure(dispatcher, (grid, block, 0, shared_bytes))(*args)
            finally:
                sys.setswitchinterval(switch)


# -- kernels whose threads never meet, one after another ----------------------------------------
# Numba's simulator starts a Python thread per CUDA thread, so that threads can wait for each other
# (syncthreads, warp shuffles): 64 thread starts and joins, about 45 ms, for a launch of 4 blocks of
# 16. A kernel none of whose code (its own and its device functions', found through their globals
# and closures) names a block-wide or warp-wide call or shared memory cannot tell that from running
# its threads one after another in one Python thread, which takes a few ms: so it runs that way.
# And a device function whose code names no ``cuda`` is called as its plain function: the simulator
# otherwise swaps its module's ``cuda`` for the simulated one around each call (16 us a call).

_THREADS_MEET = frozenset(
    {"syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or", "syncwarp", "shared", "cg"}
    | {"activemask", "lanemask_lt", "this_grid", "sync"}
)
_in_sequence: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # kernel function -> runs in sequence
_plain: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # device function -> names no ``cuda``


def _runs_in_sequence(dispatcher, args) -> bool:
    """Whether the kernel runs one thread after another (see above); Numba's own
    path remains for host arrays (copied in and out around the launch) and for
    argument extensions."""
    if getattr(dispatcher, "extensions", None) or not hasattr(dispatcher, "fn"):
        return False
    fn = dispatcher.fn
    if fn not in _in_sequence:
        names = names_reached(fn)
        _in_sequence[fn] = not (names & _THREADS_MEET or any(n.endswith("_sync") for n in names))
    return _in_sequence[fn] and not any(isinstance(a, (np.ndarray, np.void, ArgHint)) for a in args)


def _run_in_sequence(fn, grid, block, shared_bytes, args) -> None:
    """Run kernel function ``fn`` over ``grid`` x ``block`` in the calling thread,
    a CUDA thread at a time: the simulator's ``cuda`` module finds the thread's
    indices on the current Python thread, where they are set in turn."""
    module = FakeCUDAModule(grid, block, shared_bytes)
    me = threading.current_thread()
    blocks, threads = list(np.ndindex(*grid)), list(np.ndindex(*block))
    rng, watch = _shuffle, None
    if rng is None:
        fake = [FakeWithinKernelCUDAArray(a) if isinstance(a, FakeCUDAArray) else a for a in args]
    else:  # threads that never meet run in any order on a GPU: here too, watched for races
        rng.shuffle(blocks)
        code = fn.__code__
        watch = Watch(f"kernel {fn.__qualname__}", code.co_varnames[: code.co_argcount])
        fake = [watch.array(a, i) if isinstance(a, FakeCUDAArray) else a for i, a in enumerate(args)]
        module._atomic = WatchedAtomics(module._atomic, watch)
    with _push_kernel_context(module), swapped_cuda_module(fn, module):  # as the simulator runs a kernel
        try:
            for b in blocks:
                me.blockIdx = Dim3(*b)
                if rng is not None:
                    rng.shuffle(threads)
                for t in threads:
                    me.threadIdx = Dim3(*t)
                    me.thread_id = t[0] + block[0] * (t[1] + block[1] * t[2])
                    if watch is not None:
                        watch.thread = (b, t)
                    try:
                        fn(*fake)
                    except HazardError:
                        raise
                    except Exception as e:  # as the simulator's threads say it
                        raise type(e)(f"tid={list(t)} ctaid={list(b)}: {e}") from e
        finally:
            for name in ("blockIdx", "threadIdx", "thread_id"):
                me.__dict__.pop(name, None)


_numba_call = FakeCUDAKernel.__call__


def _call(kernel, *args):
    """A simulator kernel or device function called: a device function whose code
    names no ``cuda`` is its plain function (see above)."""
    if kernel._device:
        fn = kernel.fn
        plain = _plain.get(fn)
        if plain is None:
            plain = _plain[fn] = not any(_is_cuda(fn.__globals__.get(n)) for n in code_names(fn))
        if plain:
            return fn(*args)
    return _numba_call(kernel, *args)


def _is_cuda(value) -> bool:
    from numba import cuda

    return value is cuda or isinstance(value, FakeCUDAModule)


def install(backend: SimBackend) -> None:
    """Take over the simulator's kernel configuration for ``backend`` (the process's)."""
    global _sim
    _sim = backend
    FakeCUDAKernel.__getitem__ = _configure
    FakeCUDAKernel.__call__ = _call
    FakeCUDAShared.array = _shared_array


_SHARED_LOCK = threading.Lock()
_numba_shared_array = FakeCUDAShared.array


def _shared_array(self, shape, dtype, alignment=None):
    """``cuda.shared.array`` in a simulated block: the array its source line
    made first in this block. The simulator's own looked it up and made it
    without a lock, so two threads could each make one, and each then write
    and read its own; and it read the whole stack to find the caller."""
    if alignment is not None or shape == 0:  # refused, or dynamic shared memory: the simulator's answer
        return _numba_shared_array(self, shape, dtype, alignment)
    caller = sys._getframe(1)
    where = (caller.f_code.co_filename, caller.f_lineno)
    with _SHARED_LOCK:
        found = self._allocations.get(where)
        if found is None:
            if isinstance(dtype, kernelapi.types.Type):
                dtype = kernelapi.numpy_support.as_dtype(dtype)
            found = self._allocations[where] = np.empty(shape, dtype)
    return found


def _configure(kernel, configuration) -> PlainLaunch:
    if not isinstance(configuration, tuple) or not 2 <= len(configuration) <= 4:
        raise ValueError("launch a kernel as kernel[grid, block], kernel[grid, block, stream] or with shared memory")
    grid, block = normalize_kernel_dimensions(*configuration[:2])
    stream = configuration[2] if len(configuration) > 2 else 0
    shared = configuration[3] if len(configuration) > 3 else 0
    refuse_launch_shape(H200_LAUNCH_LIMITS, tuple(grid), tuple(block), shared, opt_in=False)  # as Numba on a GPU
    return PlainLaunch(kernel, grid, block, stream, shared)


class PlainLaunch:
    """A configured plain launch (what ``kernel[grid, block, ...]`` gives)."""

    __slots__ = ("kernel", "grid", "block", "stream", "shared_bytes")

    def __init__(self, kernel, grid, block, stream, shared_bytes) -> None:
        self.kernel, self.grid, self.block = kernel, grid, block
        self.stream, self.shared_bytes = stream, shared_bytes

    @property
    def name(self) -> str:
        fn = getattr(self.kernel, "fn", self.kernel)
        return getattr(fn, "__qualname__", None) or repr(fn)

    def __call__(self, *args) -> None:
        if isinstance(self.stream, StreamBase):
            self._on_stream(self.stream, args)
            return
        _refuse_outside_capture(self.name, self.stream)
        run_kernel(self.kernel, self.grid, self.block, self.shared_bytes, args)
        if _sim.observer is not None:  # on Numba's default stream: the legacy one
            _sim.observer.launched(self.kernel, self.name, _sim.legacy_stream, args)

    def _on_stream(self, stream: StreamBase, args) -> None:
        s = stream._h
        arrays = []
        for i, a in enumerate(args):
            if isinstance(a, TensorArgument):
                a.__dlpack__(stream=stream.handle)  # what Numba does on the GPU (see the module's notes)
                a = tensor_array(a)
            elif isinstance(a, np.ndarray) and s.capture is not None:
                raise CaptureError(
                    f"argument {i} of {self.name} is a NumPy array, which lives on the host: Numba copies it to "
                    f"the device and back around the launch, and stream {stream.handle:#x} is capturing a graph, "
                    "which cannot hold that; pass a tensor made before the capture (tp.tensor(array))"
                )
            arrays.append(a)
        kernel, grid, block, shared = self.kernel, self.grid, self.block, self.shared_bytes

        def run() -> None:
            run_kernel(kernel, grid, block, shared, arrays)

        _sim.enqueue(s, "kernel", run, f"{self.name}\\n<<<{grid}, {block}>>>")
        if _sim.observer is not None:
            _sim.observer.launched(kernel, self.name, s, args)


def _refuse_outside_capture(name: str, stream) -> None:
    """A launch on a stream tensorplay does not know, while this thread captures
    in a mode other than relaxed: the graph would not hold it."""
    capture = _sim.strict_capture_of_thread()
    if capture is None:
        return
    where = "Numba's default stream"
    if stream:
        where = f"a stream that is not a tensorplay Stream ({type(stream).__name__})"
    raise CaptureError(
        f"a plain Numba launch (kernel[grid, block](...)) of {name} on {where} would run outside the graph that "
        f"stream {capture.origin.handle:#x} is capturing; pass the capturing stream as the launch's stream, "
        "kernel[grid, block, tp.cuda.current_stream()](...), and the launch is captured"
    )
