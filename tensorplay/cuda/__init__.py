"""The graph layer's package, and the face of the runtime below it.

``tp.cuda`` gives the runtime's public names (device, streams, events, memory:
``tensorplay.runtime``) beside the graph layer's own (``graphs``, ``stage``,
graphed callables), so user code names one place. The backend (real CUDA or the
CPU simulator) is chosen when ``tensorplay.runtime`` is first imported.
"""

from __future__ import annotations

from .._jit import launch_kernel
from ..runtime import (
    CaptureError,
    CudaError,
    Event,
    HazardError,
    Stream,
    backend,
    capture_stream,
    clear_caches,
    current_device,
    current_stream,
    default_stream,
    device,
    device_count,
    empty_cache,
    get_device_name,
    get_device_properties,
    grid,
    gridsize,
    is_available,
    max_memory_allocated,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    reset_peak_memory_stats,
    sanitize,
    set_conditional,
    set_device,
    set_stream,
    stream,
    synchronize,
)
from . import graphs
from .graphed import make_graphed_callables
from .graphs import CUDAGraph, graph, graph_pool_handle, is_current_stream_capturing

graphs.make_graphed_callables = make_graphed_callables  # the contract names it there too; it stands on graphs


def launch(kernel, blocks, threads, *args, stream: Stream | None = None, shared_bytes: int = 0) -> None:
    """Launch a plain ``numba.cuda.jit`` kernel (or a ``tp.jit`` one) on ``stream``
    (the current stream if None); Tensors go in as arrays.

    Examples
    --------
    >>> import tensorplay as tp
    >>> from numba import cuda
    >>> @cuda.jit
    ... def double(x):
    ...     i = cuda.grid(1)
    ...     if i < x.size:
    ...         x[i] *= 2
    >>> t = tp.arange(4).float()
    >>> tp.cuda.launch(double, 1, 4, t)
    >>> t.tolist()
    [0.0, 2.0, 4.0, 6.0]
    """
    launch_kernel(kernel, blocks, threads, args, stream, shared_bytes)


__all__ = [
    "backend", "capture_stream", "CaptureError", "clear_caches", "CudaError", "CUDAGraph", "current_device",
    "current_stream", "default_stream", "device", "device_count", "empty_cache", "Event", "get_device_name",
    "get_device_properties", "graph", "graph_pool_handle", "graphs", "grid", "gridsize", "HazardError",
    "is_available", "is_current_stream_capturing", "launch", "make_graphed_callables", "max_memory_allocated",
    "mem_get_info", "memory_allocated", "memory_reserved", "memory_stats", "reset_peak_memory_stats", "sanitize",
    "set_conditional", "set_device", "set_stream", "Stream", "stream", "synchronize",
]  # fmt: skip
