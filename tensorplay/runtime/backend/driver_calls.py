"""The CUDA driver's results as Python: every call's result goes through
``check``, a failure becomes a ``CudaError`` (a ``CaptureError`` for capture
misuse) naming the call, the code and what it means; waits poll, so that
Ctrl-C reaches a waiting program.

Calls made once per captured kernel, or with arrays of a whole graph's edges,
go through the driver's own entry points (``entry_point``): the bindings
build a Python object per handle, enum and edge they take or give, which
costs more than the call itself there.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from functools import cache, partial
from typing import Any

from cuda.bindings import driver as drv

from .errors import CaptureError, CudaError
from .interrupts import interrupted

__all__ = [
    "R",
    "add_dependencies",
    "check",
    "entry_point",
    "fail",
    "get_edges",
    "last_node_reader",
    "remove_dependencies",
]

R = drv.CUresult
_SUCCESS = R.CUDA_SUCCESS

# The edge-data forms of the graph's edge calls: cuda-bindings 12 names them _v2, 13 gives them the plain names
get_edges = getattr(drv, "cuGraphGetEdges_v2", None) or drv.cuGraphGetEdges
add_dependencies = getattr(drv, "cuGraphAddDependencies_v2", None) or drv.cuGraphAddDependencies
remove_dependencies = getattr(drv, "cuGraphRemoveDependencies_v2", None) or drv.cuGraphRemoveDependencies


def _code_name(err) -> str:
    try:
        return R(err).name
    except Exception:
        return f"CUresult({int(err)})"


def fail(function: str, err) -> CudaError:
    """The error for a failed driver call (a CaptureError for capture misuse)."""
    name = _code_name(err)
    try:
        e, desc = drv.cuGetErrorString(err)
        desc = desc.decode() if e == _SUCCESS and desc else ""
    except Exception:
        desc = ""
    cls = CaptureError if "CAPTURE" in name else CudaError
    return cls.from_result(function, name, desc)


def _done(function: str, err) -> bool:
    """A query's answer: True when the work is done, False while it is not ready."""
    if err == R.CUDA_ERROR_NOT_READY:
        return False
    if err:
        raise fail(function, err)
    return True


SPIN_S = 2e-3  # a wait polls the driver flat out this long,
YIELD_S = 50e-3  # then up to this long polls giving the CPU to any other thread or process between polls,
SLEEP_S = 1e-4  # then sleeps this long between polls (a sleep wakes 0.05 to 0.2 ms late on Linux)


def _wait_until_done(function: str, query, handle) -> None:
    """Wait for a stream or an event as its synchronise call would, but in
    Python, so that Ctrl-C (KeyboardInterrupt) reaches a waiting main thread:
    poll for ``SPIN_S``, then yield the CPU between polls up to ``YIELD_S``
    (so that the wait ends within microseconds of the work, as the driver's
    own spinning wait does), then sleep ``SLEEP_S`` between polls. Ctrl-C runs
    the interrupt hooks (they stop running graphs' loops) before it goes on."""
    err = query(handle)[0]
    if err != R.CUDA_ERROR_NOT_READY:
        _done(function, err)
        return
    start = time.perf_counter()
    try:
        while True:
            err = query(handle)[0]
            if err != R.CUDA_ERROR_NOT_READY:
                _done(function, err)
                return
            waited = time.perf_counter() - start
            if waited > YIELD_S:
                time.sleep(SLEEP_S)
            elif waited > SPIN_S:
                time.sleep(0)  # lets other threads and processes run; back at once where none waits
    except KeyboardInterrupt:
        interrupted()
        raise


def check(function: str, result):
    """Raise ``CudaError`` unless ``result`` (a driver call's tuple) succeeded."""
    err = result[0]
    if err:
        raise fail(function, err)
    return result[1] if len(result) == 2 else result[1:]


_get_proc_address = drv.cuGetProcAddress
_DEFAULT_SYMBOLS = drv.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT


@cache
def entry_point(name: str, version: int = 12000, nargs: int = 3) -> Callable[..., int] | None:
    """The driver's ``name`` in its form of CUDA ``version`` (the signature of
    ``PFN_<name>_v<version>`` in ``cudaTypedefs.h``) as a ctypes function of
    ``nargs`` pointer-sized arguments (handles, addresses and sizes, as ints)
    returning the result code, or None where the driver has no such function
    (an older driver). A call through it skips the bindings' argument and
    result objects: on the H200 0.9 us for cuGraphExecKernelNodeSetParams
    against 1.5 us through the bindings."""
    err, pfn, _ = _get_proc_address(name.encode(), version, _DEFAULT_SYMBOLS)
    if err != _SUCCESS or not pfn:
        return None
    return ctypes.CFUNCTYPE(ctypes.c_int, *[ctypes.c_void_p] * nargs)(int(pfn))


_CAPTURE_ACTIVE = int(drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE)
_read_u64 = ctypes.c_uint64.from_address
_CALLS_KEPT = 64  # prepared calls per thread: one per capturing stream


def last_node_reader() -> Callable[[Any], int | None] | None:
    """A function of a capturing stream (a ``CUstream``) giving the node its
    last captured work added (an int; None when the stream is not capturing
    or has no node yet), through ``cuStreamGetCaptureInfo`` of CUDA 12.3
    (``_v3``: status, id, graph, dependencies, edge data, their count); None
    where the driver has no such function.

    Called once per kernel captured: the call is prepared once per thread and
    stream (its arguments bound, its results written into buffers of the
    thread's own, as the call runs without the GIL), and none of the bindings'
    result objects (enums, handles, lists) is built."""
    raw = entry_point("cuStreamGetCaptureInfo", 12030, 7)
    if raw is None:
        return None
    local = threading.local()

    def prepared(stream) -> tuple:
        calls = local.__dict__.setdefault("calls", {})
        if len(calls) >= _CALLS_KEPT:  # streams come and go: keep the recent ones
            calls.clear()
        out = (ctypes.c_uint64 * 6)()  # status, id, graph, dependencies, edge data, count
        base = ctypes.addressof(out)
        calls[stream] = out, partial(raw, int(stream), *[base + 8 * i for i in range(6)])
        return calls[stream]

    def last_node(stream) -> int | None:
        try:
            out, call = local.calls[stream]
        except (AttributeError, KeyError):
            out, call = prepared(stream)
        err = call()
        if err:
            raise fail("cuStreamGetCaptureInfo", err)
        if out[0] != _CAPTURE_ACTIVE or not out[5]:
            return None
        return _read_u64(out[3]).value  # the first of the stream's dependencies: the node just added

    return last_node
