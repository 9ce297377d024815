"""The real backend: cuda-python's driver API, sharing Numba's primary context.

Every driver result goes through ``check``; kernels compiled by Numba are
launched by ``driver_launch.Launcher`` (``cuLaunchKernel`` with parameters packed
once per call into a pre-built buffer, which skips Numba's dispatcher).
"""

from __future__ import annotations

import ctypes
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
from cuda.bindings import driver as drv

from .driver_calls import _SUCCESS, _done, _wait_until_done, check, fail, get_edges, last_node_reader
from .driver_launch import KERNEL_NAMES, Launcher
from .driver_overlap import known_kernels, overlap_kernels
from .driver_staging import KernelNode, NodeSetter, StagedGraph
from .errors import CudaError, update_refusal
from .launch_limits import DEVICE_ATTRIBUTES
from .params import PackedLaunch
from .protocol import conditional_missing

_CAPTURE_MODES = {
    "global": drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL,
    "thread_local": drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
    "relaxed": drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED,
}
_CAPTURE_STATUS = {
    drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE: "none",
    drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE: "active",
    drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_INVALIDATED: "invalidated",
}


_SET_CONDITIONAL_SRC = r"""
extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle, unsigned int value);
extern "C" __device__ int tp_set_conditional(unsigned long long handle, unsigned int value) {
    cudaGraphSetConditional(handle, value);
    return 0;
}
"""
_COND = drv.CUgraphConditionalNodeType
_CONDITIONAL_TYPES = {  # if/else is an if node with two bodies
    "if": _COND.CU_GRAPH_COND_TYPE_IF,
    "while": _COND.CU_GRAPH_COND_TYPE_WHILE,
    "if_else": _COND.CU_GRAPH_COND_TYPE_IF,
    "switch": getattr(_COND, "CU_GRAPH_COND_TYPE_SWITCH", None),
}


def _cudadevrt() -> list[str]:
    """CUDA's device runtime library (``libcudadevrt.a``), where one is installed:
    as ``cuda.pathfinder`` finds it (the CUDA wheels, a conda environment,
    ``CUDA_HOME`` or ``CUDA_PATH``), else in ``/usr/local/cuda*``."""
    import glob
    import os

    try:
        from cuda.pathfinder import find_static_lib

        return [find_static_lib("cudadevrt")]
    except Exception:  # none found that way, or a cuda-pathfinder without static libraries
        pass
    roots = ["/usr/local/cuda", *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]
    return [p for r in roots for p in glob.glob(os.path.join(r, "lib*", "libcudadevrt.a"))]


_STAGING_BYTES = 4096


# Programmatic edges inside the bodies of conditional nodes: off. Switched on, on
# an H100 (driver 580), a while body's values were right but fewer of its edges
# came back rewritten than tests/cuda/test_overlap.py expects, and the while rows
# did not improve (benchmarks/RESULTS.md, 2026-12-05). The loops' kernels wait
# for the kernels before them either way.
OVERLAP_BODIES = False


class DriverBackend:
    """Device calls through ``cuda.bindings.driver``."""

    name = "cuda"
    host_addressable = False

    def __init__(self) -> None:
        from numba import cuda

        self._numba_cuda = cuda
        self.grid, self.gridsize = cuda.grid, cuda.gridsize  # for kernels: tp.cuda.grid
        cuda.current_context()  # retains the primary context and makes it current
        self.ctx = check("cuCtxGetCurrent", drv.cuCtxGetCurrent())
        self.device = check("cuCtxGetDevice", drv.cuCtxGetDevice())
        self.sm_count = check(
            "cuDeviceGetAttribute",
            drv.cuDeviceGetAttribute(drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, self.device),
        )
        self.legacy_stream = drv.CUstream(0)
        self.max_block = 1024
        self.max_threads_per_launch = self.sm_count * 2048  # one wave: grid-stride reductions
        self.max_grid_threads = (1 << 31) - 1  # elementwise grids cover their data in one pass
        self._relaxed = _CAPTURE_MODES["relaxed"]
        self._driver_version: int | None = None  # read once
        self._setter = None
        self._staging: tuple[np.ndarray, int] | None = None  # pinned, for small reads: (bytes, address)
        self._staging_lock = threading.Lock()
        self._streams: dict[int, object] = {}  # the streams made here, by handle
        self._streams_lock = threading.RLock()  # re-entrant: a Stream collected during a query
        self._compiler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tensorplay-compile")
        self._numba_frees_held: dict[int, list] = {}  # capture stream -> its holds on Numba's frees
        self._numba_frees_lock = threading.Lock()
        fast = last_node_reader()  # captured_node through the driver's entry point, where it has one
        if fast is not None:
            self.captured_node = fast

    # -- device ------------------------------------------------------------
    def launch_limits(self) -> dict:
        """The largest launch the device takes: grid and block sizes, threads
        per block, and dynamic shared memory per block without opting in and with."""
        get = self._attribute
        return {
            "max_grid_dim": tuple(get(f"MAX_GRID_DIM_{a}") for a in "XYZ"),
            "max_block_dim": tuple(get(f"MAX_BLOCK_DIM_{a}") for a in "XYZ"),
            "max_threads_per_block": get("MAX_THREADS_PER_BLOCK"),
            "max_shared_memory_per_block": get("MAX_SHARED_MEMORY_PER_BLOCK"),
            "max_shared_memory_per_block_optin": get("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        }

    # -- device ------------------------------------------------------------
    def ensure_thread(self) -> None:
        """Make the shared context current on the calling thread."""
        check("cuCtxSetCurrent", drv.cuCtxSetCurrent(self.ctx))

    def device_count(self) -> int:
        return check("cuDeviceGetCount", drv.cuDeviceGetCount())

    def device_attributes(self) -> dict:
        """The device's attributes named in ``launch_limits.DEVICE_ATTRIBUTES``, by PyTorch's names."""
        return {name: self._attribute(attr) for name, attr in DEVICE_ATTRIBUTES.items()}

    def _attribute(self, name: str) -> int:
        """The device's ``CU_DEVICE_ATTRIBUTE_`` ``name``."""
        attribute = getattr(drv.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
        return check("cuDeviceGetAttribute", drv.cuDeviceGetAttribute(attribute, self.device))

    def device_name(self) -> str:
        raw = check("cuDeviceGetName", drv.cuDeviceGetName(256, self.device))
        return raw.split(b"\0", 1)[0].decode()

    def device_uuid(self) -> bytes:
        """The device's 16-byte identity (the same seen from any process)."""
        return bytes(check("cuDeviceGetUuid", drv.cuDeviceGetUuid(self.device)).bytes)

    def synchronize(self) -> None:
        # Wait for the streams this backend made first, interruptibly (a graph
        # whose loop never ends must not leave the process deaf to Ctrl-C).
        self.ensure_thread()  # a thread's first call may be this one
        for key in list(self._streams):
            _wait_until_done("cuStreamSynchronize", self._query_made_stream, key)
        _wait_until_done("cuStreamSynchronize", drv.cuStreamQuery, self.legacy_stream)  # Numba's default
        check("cuCtxSynchronize", drv.cuCtxSynchronize())

    def jit(self):
        return self._numba_cuda

    # -- memory ------------------------------------------------------------
    @contextmanager
    def _relaxed_capture_mode(self):
        """Let this thread make calls that a global-mode capture forbids
        (allocations, module loads) without invalidating the capture."""
        old = check("cuThreadExchangeStreamCaptureMode", drv.cuThreadExchangeStreamCaptureMode(self._relaxed))
        try:
            yield
        finally:
            drv.cuThreadExchangeStreamCaptureMode(old)

    def mem_alloc(self, nbytes: int) -> int:
        with self._relaxed_capture_mode():
            err, ptr = drv.cuMemAlloc(nbytes)
        if err:
            raise fail(f"cuMemAlloc({nbytes})", err)
        return int(ptr)

    def mem_free(self, ptr: int) -> None:
        check("cuMemFree", drv.cuMemFree(ptr))

    def mem_info(self) -> tuple[int, int]:
        return check("cuMemGetInfo", drv.cuMemGetInfo())

    @staticmethod
    def adopt_foreign(ptr: int, nbytes: int) -> None:
        """Foreign device memory needs no registration here (see the simulator's)."""
        return None

    @staticmethod
    def release_foreign(token) -> None:
        pass

    def copy_htod(self, dst: int, host: np.ndarray, stream) -> None:
        check("cuMemcpyHtoDAsync", drv.cuMemcpyHtoDAsync(dst, host.ctypes.data, host.nbytes, stream))

    def read(self, src: int, nbytes: int, stream) -> np.ndarray:
        """``nbytes`` from ``src`` as a new host array of bytes, once ``stream`` is done.
        Small reads go through a pinned buffer: 2 us faster than pageable memory
        on the H200 (readbacks in host-driven loops)."""
        if nbytes <= _STAGING_BYTES and self._staging_lock.acquire(blocking=False):
            try:
                staging, addr = self._staging or self._make_staging()
                self._copy_dtoh(addr, src, nbytes, stream)
                return staging[:nbytes].copy()
            finally:
                self._staging_lock.release()
        host = np.empty(nbytes, np.uint8)
        self.stream_synchronize(stream)  # interruptibly: a copy into pageable memory waits inside the driver
        self._copy_dtoh(host.ctypes.data, src, nbytes, stream)
        return host

    def _copy_dtoh(self, dst: int, src: int, nbytes: int, stream) -> None:
        check("cuMemcpyDtoHAsync", drv.cuMemcpyDtoHAsync(dst, src, nbytes, stream))
        self.stream_synchronize(stream)

    def _make_staging(self) -> tuple[np.ndarray, int]:
        addr = int(check("cuMemHostAlloc", drv.cuMemHostAlloc(_STAGING_BYTES, 0)))  # kept for the process
        self._staging = (np.ctypeslib.as_array((ctypes.c_uint8 * _STAGING_BYTES).from_address(addr)), addr)
        return self._staging

    def copy_dtod(self, dst: int, src: int, nbytes: int, stream) -> None:
        check("cuMemcpyDtoDAsync", drv.cuMemcpyDtoDAsync(dst, src, nbytes, stream))

    def memset(self, ptr: int, byte: int, nbytes: int, stream) -> None:
        check("cuMemsetD8Async", drv.cuMemsetD8Async(ptr, byte, nbytes, stream))

    # -- streams and events --------------------------------------------------
    def stream_create(self):
        stream = check("cuStreamCreate", drv.cuStreamCreate(drv.CUstream_flags.CU_STREAM_NON_BLOCKING))
        with self._streams_lock:
            self._streams[int(stream)] = stream
        return stream

    def stream_destroy(self, stream) -> None:
        with self._streams_lock:  # never while synchronize() queries it
            self._streams.pop(int(stream), None)
            check("cuStreamDestroy", drv.cuStreamDestroy(stream))

    def _query_made_stream(self, key: int) -> tuple:
        """cuStreamQuery of a stream made here, or success once it is destroyed
        (another thread may destroy it while synchronize() waits)."""
        with self._streams_lock:
            stream = self._streams.get(key)
            return (_SUCCESS,) if stream is None else drv.cuStreamQuery(stream)

    @staticmethod
    def handle_int(handle) -> int:
        return int(handle)

    @staticmethod
    def stream_from_int(handle: int):
        return drv.CUstream(handle)

    def stream_synchronize(self, stream) -> None:
        _wait_until_done("cuStreamSynchronize", drv.cuStreamQuery, stream)

    def stream_query(self, stream) -> bool:
        return _done("cuStreamQuery", drv.cuStreamQuery(stream)[0])

    def stream_wait_event(self, stream, event) -> None:
        check("cuStreamWaitEvent", drv.cuStreamWaitEvent(stream, event, 0))

    def event_create(self, timing: bool):
        flags = 0 if timing else drv.CUevent_flags.CU_EVENT_DISABLE_TIMING
        return check("cuEventCreate", drv.cuEventCreate(flags))

    def event_destroy(self, event) -> None:
        check("cuEventDestroy", drv.cuEventDestroy(event))

    def event_record(self, event, stream) -> None:
        check("cuEventRecord", drv.cuEventRecord(event, stream))

    def event_synchronize(self, event) -> None:
        _wait_until_done("cuEventSynchronize", drv.cuEventQuery, event)

    def event_query(self, event) -> bool:
        return _done("cuEventQuery", drv.cuEventQuery(event)[0])

    def event_elapsed_ms(self, start, end) -> float:
        return check("cuEventElapsedTime", drv.cuEventElapsedTime(start, end))

    # -- kernels -------------------------------------------------------------
    @staticmethod
    def tensor_bases() -> tuple:
        return ()  # Numba takes a tensor through DLPack (its __dlpack__, with the launch's stream)

    @staticmethod
    def stream_bases() -> tuple:
        """Numba's stream class: a plain launch on a tensorplay Stream
        (``kernel[grid, block, stream]``) converts it by its ``handle``, the
        CUstream, and launches there, so a capturing stream captures it."""
        # Imported here, as numba.cuda in __init__: the docstring tests import this
        # module on the simulator too, where numba.cuda is the simulator's.
        from numba.cuda.cudadrv.driver import Stream as NumbaStream

        return (NumbaStream,)

    def launcher(self, dispatcher, argtypes) -> Launcher:
        # Numba compiles in a thread of its own: the exceptions its typing keeps
        # for the life of the process hold tracebacks, and a traceback's frames
        # hold their callers, so compiling here would keep the caller's stack,
        # tensors included, alive for good (measured on the H200).
        return self._compiler.submit(self._build_launcher, dispatcher, argtypes).result()

    def _build_launcher(self, dispatcher, argtypes) -> Launcher:
        self.ensure_thread()
        # Compiling and loading a kernel first used inside a capture would
        # otherwise invalidate it (measured on the H200).
        with self._relaxed_capture_mode():
            return Launcher(dispatcher, argtypes)

    # -- capture and graphs --------------------------------------------------
    def capture_status(self, stream) -> str:
        """``"none"``, ``"active"`` or ``"invalidated"`` for ``stream``."""
        return _CAPTURE_STATUS[check("cuStreamIsCapturing", drv.cuStreamIsCapturing(stream))]

    def capture_id(self, stream) -> int:
        """The id of the capture ``stream`` takes part in (0 when none): a
        stream forked from a capture shares its origin's id."""
        err, status, capture_id, *_ = drv.cuStreamGetCaptureInfo(stream)
        if err or status == drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE:
            return 0
        return int(capture_id)

    def begin_capture(self, stream, mode: str) -> None:
        check("cuStreamBeginCapture", drv.cuStreamBeginCapture(stream, _CAPTURE_MODES[mode]))
        # Numba frees what Python collected of its own (device arrays, streams,
        # events, modules of dropped kernels) in batches, from whichever thread
        # collects the tenth: a cuMemFree or cuModuleUnload then invalidates a
        # capture in progress (seen as random invalidations in GPU runs). Its
        # frees wait until no capture of ours is in progress. Its memory manager
        # keeps the memory's queue, the context that of the rest.
        ctx = self._numba_cuda.current_context()
        queues = (ctx.deallocations, getattr(ctx.memory_manager, "deallocations", ctx.deallocations))
        holds = [q.disable() for q in {id(q): q for q in queues}.values()]  # an empty queue is falsy
        with self._numba_frees_lock:
            for hold in holds:
                hold.__enter__()
            self._numba_frees_held[self.handle_int(stream)] = holds

    def end_capture(self, stream):
        try:
            return check("cuStreamEndCapture", drv.cuStreamEndCapture(stream))
        finally:
            with self._numba_frees_lock:
                for hold in self._numba_frees_held.pop(self.handle_int(stream), ()):
                    hold.__exit__(None, None, None)

    # -- conditional nodes -----------------------------------------------------
    def driver_version(self) -> int:
        """The driver's CUDA version as an int (12080 for 12.8)."""
        if self._driver_version is None:
            self._driver_version = check("cuDriverGetVersion", drv.cuDriverGetVersion())
        return self._driver_version

    def conditional_support(self, kind: str = "if") -> str | None:
        """None when conditional nodes of ``kind`` work here, else what is missing."""
        missing = conditional_missing(kind, self.driver_version())
        if missing is None and (_CONDITIONAL_TYPES[kind] is None or not hasattr(drv, "cuGraphConditionalHandleCreate")):
            missing = f"{kind.replace('_', '/')} conditional graph nodes need a newer cuda-bindings"
        return missing

    def conditional_setter(self):
        """A device function ``(uint64 handle, uint32 value) -> int32`` calling
        ``cudaGraphSetConditional``, linked from CUDA C source (made once)."""
        if self._setter is None:
            cuda = self._numba_cuda
            links = [cuda.CUSource(_SET_CONDITIONAL_SRC)] + _cudadevrt()[:1]
            self._setter = cuda.declare_device("tp_set_conditional", "int32(uint64, uint32)", link=links, abi="c")
        return self._setter

    def conditional_handle(self, stream, default: int = 0) -> int:
        _, _, graph, *_ = check("cuStreamGetCaptureInfo", drv.cuStreamGetCaptureInfo(stream))
        return self.conditional_handle_in(graph, default)

    def conditional_add(self, stream, handle: int, kind: str, size: int) -> tuple:
        """Add a conditional node of ``kind`` with ``size`` bodies after the
        stream's work (the stream's later work depends on it); return its body graphs."""
        _, _, graph, deps, edges, ndeps = check("cuStreamGetCaptureInfo", drv.cuStreamGetCaptureInfo(stream))
        p = self._conditional_params(handle, kind, size)
        node = check("cuGraphAddNode", drv.cuGraphAddNode(graph, deps, edges, ndeps, p))
        bodies = tuple(p.conditional.phGraph_out[i] for i in range(size))
        flags = drv.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES
        check(
            "cuStreamUpdateCaptureDependencies", drv.cuStreamUpdateCaptureDependencies(stream, [node], None, 1, flags)
        )
        return bodies

    def _conditional_params(self, handle: int, kind: str, size: int):
        p = drv.CUgraphNodeParams()
        p.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
        p.conditional.handle = drv.CUgraphConditionalHandle(handle)
        p.conditional.type = _CONDITIONAL_TYPES[kind]
        p.conditional.size = size
        p.conditional.ctx = self.ctx
        return p

    def conditional_body_capture(self, body, mode: str):
        """A new stream capturing into the body graph ``body``."""
        body_stream = self.stream_create()
        try:
            check(
                "cuStreamBeginCaptureToGraph",
                drv.cuStreamBeginCaptureToGraph(body_stream, body, None, None, 0, _CAPTURE_MODES[mode]),
            )
        except CudaError:
            self.stream_destroy(body_stream)
            raise
        return body_stream

    def conditional_handle_in(self, graph, default: int = 0) -> int:
        """A conditional handle created in ``graph``, set to ``default`` at each launch of it."""
        created = drv.cuGraphConditionalHandleCreate(graph, self.ctx, default, drv.CU_GRAPH_COND_ASSIGN_DEFAULT)
        return int(check("cuGraphConditionalHandleCreate", created))

    def graph_create(self):
        return check("cuGraphCreate", drv.cuGraphCreate(0))

    def conditional_repeat(self, body_stream, target, handles: list[int]) -> None:
        """End the capture on ``body_stream`` (into a graph of its own), then put
        in the body graph ``target`` a child graph node of what was captured,
        and after it, one after another, an if node per handle holding another
        (the driver does not clone a conditional body, but does a plain graph)."""
        _, _, copy, *_ = check("cuStreamGetCaptureInfo", drv.cuStreamGetCaptureInfo(body_stream))
        self.conditional_end(body_stream, overlap=False)  # child graphs stay plain
        try:
            last = [check("cuGraphAddChildGraphNode", drv.cuGraphAddChildGraphNode(target, None, 0, copy))]
            for handle in handles:
                p = self._conditional_params(handle, "if", 1)
                node = check("cuGraphAddNode", drv.cuGraphAddNode(target, last, None, len(last), p))
                if_body = p.conditional.phGraph_out[0]
                check("cuGraphAddChildGraphNode", drv.cuGraphAddChildGraphNode(if_body, None, 0, copy))
                last = [node]
        finally:
            drv.cuGraphDestroy(copy)  # each child graph node holds a copy of its own

    def conditional_end(self, body_stream, overlap: bool = True) -> None:
        """End the capture into a conditional body, its kernels that wait for the
        ones before them launched early where ``OVERLAP_BODIES`` (and ``overlap``;
        ``driver_overlap.py``)."""
        try:
            body = check("cuStreamEndCapture", drv.cuStreamEndCapture(body_stream))
            if overlap and OVERLAP_BODIES:
                try:
                    overlap_kernels(body)
                except CudaError:  # a driver that takes no programmatic edge in a body: they stay plain
                    pass
        finally:
            self.stream_destroy(body_stream)

    def graph_instantiate(self, graph, launches=()):
        """The executable graph of ``graph``, its kernels that wait for the ones
        before them launched early (``driver_overlap.py``); ``launches``: what
        the capture recorded (``captured_node``'s node and the launcher first),
        which the driver is then not asked about."""
        with self._relaxed_capture_mode():  # leaves other threads' global captures alone
            overlap_kernels(graph, known_kernels(launches))
            return check("cuGraphInstantiate", drv.cuGraphInstantiate(graph, 0))

    # replay()'s hot path calls this directly: (err,) = graph_launch_raw(exec, stream)
    graph_launch_raw = staticmethod(drv.cuGraphLaunch)

    def graph_launch(self, graph_exec, stream) -> None:
        check("cuGraphLaunch", drv.cuGraphLaunch(graph_exec, stream))

    error = staticmethod(fail)  # the error for a raw call's result code

    def graph_destroy(self, graph) -> None:
        check("cuGraphDestroy", drv.cuGraphDestroy(graph))

    def graph_exec_destroy(self, graph_exec) -> None:
        check("cuGraphExecDestroy", drv.cuGraphExecDestroy(graph_exec))

    def staged_graph(self, graph, graph_exec, heads: list[PackedLaunch]) -> StagedGraph:
        """``graph`` (instantiated as ``graph_exec``) behind kernels whose
        parameters each launch sets, one per ``PackedLaunch`` of ``heads`` (its
        first parameters); see ``StagedGraph``."""
        return StagedGraph(graph, graph_exec, heads)

    def graph_exec_update(self, graph_exec, graph, instantiated, launches=()) -> str | None:
        """Apply ``graph``'s parameters to ``graph_exec``, made from the graph
        ``instantiated`` (``cuGraphExecUpdate``); None when done, else why the
        driver refused (then nothing changed). ``launches`` as for ``graph_instantiate``."""
        with self._relaxed_capture_mode():
            overlap_kernels(graph, known_kernels(launches))  # the edges graph_instantiate gave the graph instantiated
            err, info = drv.cuGraphExecUpdate(graph_exec, graph)
        if err == _SUCCESS:
            return None
        if err != drv.CUresult.CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE:
            raise fail("cuGraphExecUpdate", err)
        # cuda-bindings gives no result info with the failure (driver 580): say what can be seen
        if info is None and self.graph_node_count(graph) != self.graph_node_count(instantiated):
            return update_refusal("CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED")
        return update_refusal(info.result.name if info is not None else "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE")

    @staticmethod
    def captured_node(stream) -> int | None:
        """The node the last work captured on ``stream`` added, as an int (None
        when there is none). Through the bindings: ``__init__`` puts the
        driver's entry point in its place where there is one (called once per
        captured kernel; 0.9 us against 1.2 through the bindings, measured with
        a stand-in driver library, which builds none of their result objects)."""
        deps = check("cuStreamGetCaptureInfo", drv.cuStreamGetCaptureInfo(stream))[3]
        return int(deps[0]) if deps else None

    @staticmethod
    def sole_captured_node(stream) -> int | None:
        deps = check("cuStreamGetCaptureInfo", drv.cuStreamGetCaptureInfo(stream))[3]
        return int(deps[0]) if deps is not None and len(deps) == 1 else None

    @staticmethod
    def set_captured_kernel(node: int, launcher, grid, block, args) -> None:
        """``cuGraphKernelNodeSetParams``, which copies the parameters (``kernel`` holds
        their buffer until then: the struct keeps only its address)."""
        kernel = KernelNode(launcher, grid, block, launcher.pack(args))
        check("cuGraphKernelNodeSetParams", drv.cuGraphKernelNodeSetParams(node, kernel.params))

    @staticmethod
    def kernel_node_setter(graph_exec, exec_node, graph, node, launcher, grid, block, shared_bytes=0):
        """A function of packed parameter bytes that sets them on ``graph_exec``'s
        node ``exec_node`` (of the graph it was instantiated from:
        ``cuGraphExecKernelNodeSetParams`` takes no other) and, once asked, on
        ``node`` of the captured ``graph``, launched with ``grid``, ``block``
        and ``shared_bytes`` of dynamic shared memory; see ``NodeSetter``."""
        return NodeSetter(graph_exec, exec_node, node, launcher, grid, block, shared_bytes)

    def graph_node_count(self, graph) -> int:
        return check("cuGraphGetNodes", drv.cuGraphGetNodes(graph, 0))[1]

    @staticmethod
    def graph_edges(graph) -> list[tuple[int, int]]:
        """The edges of ``graph`` (not its bodies'), each node an int as ``captured_node`` gives it."""
        count = check("cuGraphGetEdges", get_edges(graph, 0))[-1]  # the count first
        froms, tos, *_ = check("cuGraphGetEdges", get_edges(graph, count)) if count else ((), ())
        return [(int(a), int(b)) for a, b in zip(froms, tos, strict=False)]

    def graph_dot(self, graph, path: str) -> None:
        """DOT with Numba's mangled kernel names replaced by Python qualified names."""
        check("cuGraphDebugDotPrint", drv.cuGraphDebugDotPrint(graph, path.encode(), (1 << 15) - 1))
        with open(path) as f:
            text = f.read()
        for mangled in sorted(KERNEL_NAMES, key=len, reverse=True):
            if mangled in text:
                text = text.replace(mangled, KERNEL_NAMES[mangled])
        with open(path, "w") as f:
            f.write(text)
