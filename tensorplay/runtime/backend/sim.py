"""The CPU simulator backend.

Device memory is host memory behind integer addresses (the addresses of NumPy
buffers; ``simmemory.SimMemory``, this backend's base, keeps them), kernels run
in Numba's CUDA simulator, and work runs as soon as it is issued, so each
stream's order holds trivially. A capture records nodes with their stream-order
dependencies instead of running them (``simgraph``), and a graph launch runs
them; the capture rules of the driver are enforced with the driver's error
codes, on the memory's calls too (a ``cuMemFree`` during a capture) and on
``end_capture`` (another thread's end of a 'global' or 'thread_local'
capture: ``CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD``).
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref

import numpy as np

from . import simgraph, simplain
from .errors import CaptureError, CudaError
from .interrupts import deferred
from .launch_limits import H200_ATTRIBUTES, H200_LAUNCH_LIMITS
from .params import PackedLaunch
from .protocol import conditional_missing
from .simgraph import Capture, SimCondition, SimGraph, SimGraphExec, SimNodeSetter, SimStagedGraph
from .simint import float_to_int, wrap_int
from .simlaunch import SimLauncher
from .simmemory import SimMemory
from .simplain import StreamBase, TensorArgument, install

# Conditional handles of the process: the simulator's twin of the driver's
# handle table, written by ``set_conditional`` from inside kernels.
_CONDITIONS: dict[int, SimCondition] = {}
_HANDLES = itertools.count(0x1000)
_UINT32 = np.dtype(np.uint32)


def set_conditional(handle, value) -> int:
    """Device-side setter of a conditional handle (``cudaGraphSetConditional``).
    Its value is the driver's unsigned 32-bit int, converted as the GPU converts
    the argument to it: an integer modulo 2**32 (-1 is 4294967295, past every
    case of a switch; 2**32 is 0, false), a float as a store into a uint32."""
    if isinstance(value, (float, np.floating)):
        value = float_to_int(value, _UINT32)
    else:
        value = wrap_int(int(value), _UINT32)
    _CONDITIONS[int(handle)].value = int(value)
    return 0


def _fail(function: str, code: str, cls=CaptureError):
    return cls.from_result(function, code)


def _grid(ndim: int):
    from numba.cuda.simulator.kernel import _get_kernel_context

    return _get_kernel_context().grid(ndim)


def _gridsize(ndim: int):
    from numba.cuda.simulator.kernel import _get_kernel_context

    return _get_kernel_context().gridsize(ndim)


class SimStream:
    __slots__ = ("handle", "capture", "frontier", "__weakref__")

    def __init__(self, handle: int) -> None:
        self.handle = handle
        self.capture: Capture | None = None  # the capture this stream takes part in
        self.frontier: tuple = ()  # the capture nodes the next node depends on

    def __int__(self) -> int:
        return self.handle


class SimEvent:
    __slots__ = ("timing", "time", "captured", "__weakref__")

    def __init__(self, timing: bool) -> None:
        self.timing = timing
        self.time: float | None = None
        self.captured: tuple | None = None  # (capture, frontier) when recorded in one


class SimBackend(SimMemory):
    """Device calls simulated on the CPU (device memory: ``SimMemory``)."""

    name = "sim"
    host_addressable = True  # device memory is host memory
    grid, gridsize = staticmethod(_grid), staticmethod(_gridsize)  # for kernels: tp.cuda.grid
    # One Python thread per simulated CUDA thread: keep launches small (kernels
    # loop over their data, so any launch shape covers it).
    max_block = 16
    max_threads_per_launch = 64
    sm_count = 4  # small, so that the ops' launch rules for small outputs run here too
    max_grid_threads = 64
    pretend_driver_version = 13000  # what driver_version() reports: set it lower to see the errors of an older driver
    observer = None  # told of plain Numba launches while the hazard check is on (launched(kernel, name, stream, args))

    @staticmethod
    def launch_limits() -> dict:
        """The H200's launch limits, which the simulator enforces as its own."""
        return dict(H200_LAUNCH_LIMITS)

    @staticmethod
    def device_attributes() -> dict:
        """The H200's, as the launch limits."""
        return dict(H200_ATTRIBUTES)

    def __init__(self) -> None:
        from numba import cuda

        super().__init__()
        self._numba_cuda = cuda
        self._ids = itertools.count(1)
        self.legacy_stream = SimStream(0)
        self._captures: list[Capture] = []
        self._setter = None
        self._streams: weakref.WeakValueDictionary[int, SimStream] = weakref.WeakValueDictionary()  # by handle
        install(self)  # plain Numba launches: simplain

    # -- device ------------------------------------------------------------
    def ensure_thread(self) -> None:
        pass

    def device_count(self) -> int:
        return 1

    def device_name(self) -> str:
        return "tensorplay CPU simulator"

    def device_uuid(self) -> bytes:
        return b"tensorplay-sim\0\0"  # every process's simulator is the same emulated device

    def synchronize(self) -> None:
        # A context-wide wait breaks captures of every mode, from any thread.
        active = [c for c in self._captures if c.state == "active"]
        for capture in active:
            self._invalidate(capture)
        if active:
            raise _fail("cuCtxSynchronize", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")

    def jit(self):
        return self._numba_cuda

    # -- memory: SimMemory's, with the capture rules and the copies ------------
    def mem_free(self, ptr: int) -> None:
        self._check_unsafe("cuMemFree")  # refused in a capture that forbids it, before any bookkeeping
        super().mem_free(ptr)

    def copy_htod(self, dst: int, host: np.ndarray, stream) -> None:
        self._refuse_host_copy("cuMemcpyHtoDAsync", stream)
        self._bytes(dst, host.nbytes)[:] = np.ascontiguousarray(host).reshape(-1).view(np.uint8)

    def read(self, src: int, nbytes: int, stream) -> np.ndarray:
        self._refuse_host_copy("cuMemcpyDtoHAsync", stream)
        return self._bytes(src, nbytes).copy()

    def copy_dtod(self, dst: int, src: int, nbytes: int, stream) -> None:
        d, s = self._bytes(dst, nbytes), self._bytes(src, nbytes)
        self.enqueue(stream, "memcpy", lambda: np.copyto(d, s), f"memcpy {nbytes} B")

    def memset(self, ptr: int, byte: int, nbytes: int, stream) -> None:
        d = self._bytes(ptr, nbytes)
        self.enqueue(stream, "memset", lambda: d.fill(byte), f"memset {nbytes} B = {byte}")

    # -- streams and events --------------------------------------------------
    def stream_create(self) -> SimStream:
        stream = SimStream(0x5000 + next(self._ids))
        self._streams[stream.handle] = stream
        return stream

    def stream_destroy(self, stream) -> None:
        if stream.capture is not None:
            raise _fail("cuStreamDestroy", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")

    @staticmethod
    def handle_int(handle) -> int:
        return handle.handle

    def stream_from_int(self, handle: int) -> SimStream:
        """The stream of ``handle``: one made here (as the driver's handles name
        streams), or a stream that takes part in no capture."""
        if handle == 0:
            return self.legacy_stream
        return self._streams.get(handle) or SimStream(handle)

    def stream_synchronize(self, stream) -> None:
        if stream.capture is not None:
            self._invalidate(stream.capture)
            raise _fail("cuStreamSynchronize", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
        self._check_unsafe("cuStreamSynchronize")

    def stream_query(self, stream) -> bool:
        if stream.capture is not None:
            self._invalidate(stream.capture)
            raise _fail("cuStreamQuery", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
        self._check_unsafe("cuStreamQuery")
        return True

    def stream_wait_event(self, stream, event) -> None:
        captured = event.captured
        if captured is None or captured[0].state == "ended":
            return  # recorded eagerly: already complete in a synchronous world
        capture, frontier = captured
        if stream.capture is None:  # this stream joins the capture (a fork)
            stream.capture = capture
            stream.frontier = frontier
            capture.streams.add(stream)
        elif stream.capture is capture:
            stream.frontier = tuple(dict.fromkeys(stream.frontier + frontier))
        else:
            raise _fail("cuStreamWaitEvent", "CUDA_ERROR_STREAM_CAPTURE_ISOLATION")

    def event_create(self, timing: bool) -> SimEvent:
        return SimEvent(timing)

    def event_destroy(self, event) -> None:
        pass

    def event_record(self, event, stream) -> None:
        if stream.capture is not None:
            if stream.capture.state == "invalidated":  # as the driver (measured on an H100, driver 580)
                raise _fail("cuEventRecord", "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
            event.captured = (stream.capture, stream.frontier)
        else:
            event.captured = None
            event.time = time.perf_counter()

    def event_synchronize(self, event) -> None:
        if event.captured is not None:
            raise _fail("cuEventSynchronize", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
        self._check_unsafe("cuEventSynchronize")

    def event_query(self, event) -> bool:
        if event.captured is not None:
            raise _fail("cuEventQuery", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
        self._check_unsafe("cuEventQuery")
        return True

    def event_elapsed_ms(self, start, end) -> float:
        if not (start.timing and end.timing):
            raise _fail("cuEventElapsedTime", "CUDA_ERROR_INVALID_HANDLE", CudaError)
        if start.time is None or end.time is None:
            raise _fail("cuEventElapsedTime", "CUDA_ERROR_INVALID_HANDLE", CudaError)
        return (end.time - start.time) * 1e3

    # -- kernels -------------------------------------------------------------
    def launcher(self, dispatcher, argtypes) -> SimLauncher:
        return SimLauncher(self, dispatcher, argtypes)

    @staticmethod
    def tensor_bases() -> tuple:
        """One of Numba's argument hints: a plain launch on Numba's default stream
        (``kernel[grid, block](tensor)``) gets an array over the tensor's memory,
        as on the GPU, where Numba takes the tensor through DLPack."""
        return (TensorArgument,)

    @staticmethod
    def stream_bases() -> tuple:
        """The class a plain launch here takes as its stream (see ``simplain``)."""
        return (StreamBase,)

    def enqueue(self, stream, kind: str, run, label: str) -> None:
        """Run ``run`` now, or record it as a node when ``stream`` is capturing."""
        capture = stream.capture
        if capture is None:
            if stream is self.legacy_stream:
                self._check_legacy(kind)
            run()
            return
        if capture.state == "invalidated":
            raise _fail(f"{kind} launch", "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
        stream.frontier = (capture.graph.add(kind, run, label, stream.frontier),)

    # -- capture rules ---------------------------------------------------------
    def _prohibiting(self):
        """Active captures whose mode forbids unsafe calls from this thread."""
        me = threading.get_ident()
        return [
            c
            for c in self._captures
            if c.state == "active" and (c.mode == "global" or (c.mode == "thread_local" and c.thread == me))
        ]

    def _check_unsafe(self, function: str) -> None:
        prohibiting = self._prohibiting()
        for capture in prohibiting:
            self._invalidate(capture)
        if prohibiting:
            raise _fail(function, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")

    def strict_capture_of_thread(self) -> Capture | None:
        """An active capture this thread began in a mode other than relaxed, or None:
        work this thread issues outside it (on the legacy stream) is not in its graph."""
        me = threading.get_ident()
        return next((c for c in self._captures if c.state == "active" and c.thread == me and c.mode != "relaxed"), None)

    def _check_legacy(self, kind: str) -> None:
        # Capture streams are non-blocking: other threads' legacy-stream work
        # leaves a capture alone; the capturing thread's own is refused.
        capture = self.strict_capture_of_thread()
        if capture is not None:
            self._invalidate(capture)
            raise _fail(f"{kind} launch on the legacy default stream", "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT")

    def _refuse_host_copy(self, function: str, stream) -> None:
        if stream.capture is not None:
            self._invalidate(stream.capture)
            raise _fail(function, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
        self._check_unsafe(function)

    def _invalidate(self, capture: Capture) -> None:
        """Invalidate ``capture`` and the captures holding it (as the driver
        does when a conditional body's capture breaks)."""
        while capture is not None:
            if capture.state == "active":
                capture.state = "invalidated"
            capture = capture.parent

    # -- capture and graphs --------------------------------------------------
    def capture_status(self, stream) -> str:
        return "none" if stream.capture is None else stream.capture.state

    @staticmethod
    def capture_id(stream) -> int:
        return 0 if stream.capture is None else id(stream.capture)

    def begin_capture(self, stream, mode: str) -> None:
        if stream is self.legacy_stream:
            raise _fail("cuStreamBeginCapture", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
        if stream.capture is not None:
            raise _fail("cuStreamBeginCapture", "CUDA_ERROR_ILLEGAL_STATE", CudaError)
        capture = Capture(stream, mode, threading.get_ident())
        stream.capture, stream.frontier = capture, ()
        self._captures.append(capture)

    def end_capture(self, stream) -> SimGraph:
        """The capture begun on ``stream``'s graph, or the driver's refusal
        (driver 580, seen on an H100): on a stream that captures nothing,
        ``CUDA_ERROR_ILLEGAL_STATE``; on a stream forked into a capture,
        ``..._UNMATCHED``, the capture invalidated; on another thread than the
        one that began a 'global' or 'thread_local' capture, ``..._WRONG_THREAD``,
        the capture ended all the same (a 'relaxed' one ends on any thread)."""
        capture = stream.capture
        if capture is None:
            raise _fail("cuStreamEndCapture", "CUDA_ERROR_ILLEGAL_STATE", CudaError)
        if capture.origin is not stream:
            self._invalidate(capture)
            raise _fail("cuStreamEndCapture", "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED")
        self._captures.remove(capture)
        unjoined = capture.unjoined(stream)
        for s in capture.streams:
            s.capture, s.frontier = None, ()
        failed = None
        if capture.mode != "relaxed" and capture.thread != threading.get_ident():
            failed = "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD"
        elif capture.state == "invalidated":
            failed = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"
        elif unjoined:
            failed = "CUDA_ERROR_STREAM_CAPTURE_UNJOINED"
        capture.state = "ended"
        if failed is not None:
            if capture.parent is None:  # the driver destroys the graph of a capture that fails to end
                self.graph_destroy(capture.graph)
            raise _fail("cuStreamEndCapture", failed)
        return capture.graph

    # -- conditional nodes -----------------------------------------------------
    def driver_version(self) -> int:
        return self.pretend_driver_version

    def conditional_support(self, kind: str = "if") -> str | None:
        return conditional_missing(kind, self.driver_version())

    def conditional_setter(self):
        if self._setter is None:
            self._setter = self._numba_cuda.jit(device=True)(set_conditional)
        return self._setter

    def conditional_handle(self, stream, default: int = 0) -> int:
        if stream.capture is None:
            raise _fail("cuGraphConditionalHandleCreate", "CUDA_ERROR_ILLEGAL_STATE", CudaError)
        return self.conditional_handle_in(stream.capture.graph, default)

    def conditional_add(self, stream, handle: int, kind: str, size: int) -> tuple:
        """Add a conditional node with ``size`` bodies after the stream's work; return its body graphs."""
        capture = stream.capture
        if capture is None or capture.state != "active":
            raise _fail("cuGraphAddNode", "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
        cond = _CONDITIONS[handle]
        cond.kind, cond.bodies = kind, tuple(SimGraph(capture=capture) for _ in range(size))
        label = f"{kind.replace('_', '/')} (handle {handle:#x})"
        node = capture.graph.add("conditional", cond.run, label, stream.frontier, cond.bodies, kind)
        stream.frontier = (node,)
        return cond.bodies

    def conditional_body_capture(self, body: SimGraph, mode: str) -> SimStream:
        """A new stream capturing into the body graph ``body``."""
        body_stream = self.stream_create()
        capture = Capture(body_stream, mode, threading.get_ident(), graph=body, parent=body.capture)
        body_stream.capture, body_stream.frontier = capture, ()
        self._captures.append(capture)
        return body_stream

    def conditional_handle_in(self, graph: SimGraph, default: int = 0) -> int:
        handle = next(_HANDLES)
        _CONDITIONS[handle] = cond = SimCondition("if", (), value=default, default=default)
        graph.handles.append(handle)  # freed with the graph, as the driver's
        graph.conditions.append(cond)  # set to their defaults at each launch of the graph
        return handle

    def graph_create(self) -> SimGraph:
        return SimGraph()

    def conditional_repeat(self, body_stream, target: SimGraph, handles: list[int]) -> None:
        """End the capture on ``body_stream`` (into a graph of its own), then put
        in the body graph ``target`` a child graph node of what was captured,
        and after it, one after another, an if node per handle holding another."""
        copy = body_stream.capture.graph
        self.end_capture(body_stream)
        last = (target.add("graph", SimGraphExec(copy).run, "the loop body", ()),)
        for handle in handles:
            cond = _CONDITIONS[handle]
            cond.kind = "if"
            cond.bodies = (SimGraph(capture=target.capture),)
            cond.bodies[0].add("graph", SimGraphExec(copy).run, "a copy of the loop body", ())
            last = (target.add("conditional", cond.run, f"if (handle {handle:#x})", last, cond.bodies, "if"),)
        target.handles.extend(copy.handles)
        target.conditions.extend(copy.conditions)

    def conditional_end(self, body_stream) -> None:
        """End the capture into a conditional body."""
        self.end_capture(body_stream)

    def graph_instantiate(self, graph: SimGraph, launches=()) -> SimGraphExec:
        """The executable graph (``launches``, what the capture recorded, is the
        driver's help in rewriting edges: the simulator has no edge types)."""
        return SimGraphExec(graph)

    def graph_exec_update(
        self, graph_exec: SimGraphExec, graph: SimGraph, instantiated: SimGraph, launches=()
    ) -> str | None:
        """The driver's ``cuGraphExecUpdate``: None when done, else why not."""
        return graph_exec.update(graph)

    @staticmethod
    def captured_node(stream) -> tuple | None:
        """(graph, node id) of the last node captured on ``stream``."""
        if stream.capture is None or not stream.frontier:
            return None
        return stream.capture.graph, stream.frontier[-1]

    @staticmethod
    def sole_captured_node(stream) -> tuple | None:
        if stream.capture is None or len(stream.frontier) != 1:
            return None
        return stream.capture.graph, stream.frontier[0]

    @staticmethod
    def set_captured_kernel(node: tuple, launcher, grid, block, args) -> None:
        graph, i = node
        graph.set_kernel(i, launcher.run_for(grid, block, args), launcher.label(grid, block))

    @staticmethod
    def kernel_node_setter(graph_exec: SimGraphExec, exec_node: tuple, graph: SimGraph, node: tuple, *launch):
        """A function of packed parameter bytes that makes ``graph_exec``'s node
        ``exec_node`` launch with them (and ``node`` of ``graph``, once asked);
        the driver's rule: ``exec_node`` is of the graph it was instantiated from."""
        if exec_node[0] is not graph_exec.origin:
            raise _fail("cuGraphExecKernelNodeSetParams", "CUDA_ERROR_INVALID_VALUE", CudaError)
        return SimNodeSetter(graph_exec, graph, exec_node[1], node[1], *launch)  # launcher, grid, block, shared bytes

    def graph_launch(self, graph_exec: SimGraphExec, stream) -> None:
        if stream.capture is not None:
            raise _fail("cuGraphLaunch", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
        if stream is self.legacy_stream:
            self._check_legacy("graph")
        with deferred():  # Ctrl-C stops the loops at their next pass, then interrupts
            graph_exec.run()

    def graph_launch_raw(self, graph_exec: SimGraphExec, stream) -> tuple[int]:
        self.graph_launch(graph_exec, stream)
        return (0,)

    def staged_graph(self, graph: SimGraph, graph_exec: SimGraphExec, heads: list[PackedLaunch]) -> SimStagedGraph:
        """``graph`` behind kernels whose parameters each launch sets (see ``SimStagedGraph``)."""
        return SimStagedGraph(self, graph, graph_exec, heads)

    @staticmethod
    def error(function: str, err) -> CudaError:
        return CudaError(f"{function} failed: {err}", function, str(err))

    def graph_destroy(self, graph) -> None:
        for handle in graph.all_handles():
            _CONDITIONS.pop(handle, None)

    def graph_exec_destroy(self, graph_exec) -> None:
        self._check_unsafe("cuGraphExecDestroy")  # the driver's rule, measured on the H200

    def graph_node_count(self, graph: SimGraph) -> int:
        return len(graph.nodes)

    @staticmethod
    def graph_edges(graph: SimGraph) -> list[tuple]:
        """The edges of ``graph`` (not its bodies'), each node (graph, id) as ``captured_node`` gives it."""
        return [((graph, d), (graph, n.id)) for n in graph.nodes for d in n.deps]

    @staticmethod
    def interleave(rng) -> None:
        """While the hazard check is on: replay graph nodes that nothing orders, and
        run a kernel's blocks and threads where they never meet, in orders drawn
        from ``rng`` (a ``random.Random``; None: in recorded and index order)."""
        simgraph.interleave(rng)
        simplain.interleave(rng)

    def graph_dot(self, graph: SimGraph, path: str) -> None:
        with open(path, "w") as f:
            f.write(graph.dot())
