"""The CUDA driver's results as Python: every call's result goes through
``check``, a failure becomes a ``CudaError`` (a ``CaptureError`` for capture
misuse) naming the call, the code and what it means; waits poll, so that
Ctrl-C reaches a waiting program."""

from __future__ import annotations

import time

from cuda.bindings import driver as drv

from .errors import CaptureError, CudaError
from .interrupts import interrupted

__all__ = ["R", "add_dependencies", "check", "fail", "get_edges", "remove_dependencies"]

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


def _wait_until_done(function: str, query, handle) -> None:
    """Wait for a stream or an event as its synchronise call would, but in
    Python, so that Ctrl-C (KeyboardInterrupt) reaches a waiting main thread:
    poll for 2 ms, then sleep 0.1 ms between polls. Ctrl-C runs the interrupt
    hooks (they stop running graphs' loops) before it goes on."""
    err = query(handle)[0]
    if err != R.CUDA_ERROR_NOT_READY:
        _done(function, err)
        return
    spin_until = time.perf_counter() + 2e-3
    try:
        while True:
            err = query(handle)[0]
            if err != R.CUDA_ERROR_NOT_READY:
                _done(function, err)
                return
            if time.perf_counter() > spin_until:
                time.sleep(1e-4)
    except KeyboardInterrupt:
        interrupted()
        raise


def check(function: str, result):
    """Raise ``CudaError`` unless ``result`` (a driver call's tuple) succeeded."""
    err = result[0]
    if err:
        raise fail(function, err)
    return result[1] if len(result) == 2 else result[1:]
