"""The one door to the device.

Two implementations of one small protocol live here: ``driver`` (cuda-python's
``cuda.bindings.driver`` plus Numba sharing the primary context) and ``sim`` (the
CPU: host memory behind integer addresses, kernels in Numba's CUDA simulator).
Nothing above this package imports ``cuda.bindings`` or ``numba.cuda.simulator``.

``get()`` returns the backend chosen by ``TENSORPLAY_BACKEND`` (``cuda``, ``sim``
or ``auto``, the default). The choice must be made before ``numba.cuda`` is first
imported, because Numba reads ``NUMBA_ENABLE_CUDASIM`` once.

The protocol, in words (both classes implement it with the same behaviour):

- memory: ``mem_alloc(nbytes) -> int``, ``mem_free(ptr)``,
  ``copy_htod(dst, host, stream)``, ``read(src, nbytes, stream) -> bytes array``,
  ``copy_dtod(dst, src, nbytes, stream)``, ``memset(ptr, byte, nbytes, stream)``,
  ``adopt_foreign(ptr, nbytes) -> token | None`` and ``release_foreign(token)``
  (memory shared in from another library: the simulator must learn its range);
- streams and events: ``stream_create``, ``stream_destroy``, ``stream_synchronize``,
  ``stream_query``, ``stream_wait_event``, ``event_create``, ``event_record``,
  ``event_synchronize``, ``event_query``, ``event_elapsed_ms``, ``event_destroy``,
  ``synchronize`` (waits that Ctrl-C can interrupt); stream and event handles are opaque objects, ``handle_int(h)``
  gives the integer a user sees;
- kernels: ``launcher(dispatcher, argtypes) -> callable(grid, block, stream, args)``
  where each arg is a ``KernelArray`` (anything with ``ptr``, ``shape``,
  ``strides`` in bytes, ``dtype``, ``size``) or a scalar already of its type;
- launch limits: ``launch_limits() -> dict`` (``max_grid_dim``,
  ``max_block_dim``, ``max_threads_per_block``, ``max_shared_memory_per_block``):
  the device's on the GPU, the H200's on the simulator, which refuses what the
  GPU would;
- capture: ``capture_status(stream)``, ``capture_id(stream)`` (0 when not
  capturing; a stream forked from a capture shares its id), ``begin_capture``, ``end_capture``,
  ``graph_instantiate``, ``graph_launch`` and friends (see the graphs layer);
- staged graphs: ``staged_graph(graph, graph_exec, heads)`` puts kernels
  (``heads``: ``[(launcher, grid, block, packed)]``) in front of a captured
  graph and returns an object with ``single_launch`` (True when the kernels
  and a clone of the graph go in one ``cuGraphLaunch``), ``launch(params, stream)``
  (each kernel's packed parameters, taken at the call) and ``destroy()``.
"""

from __future__ import annotations

import os
import sys
import warnings

from .errors import CaptureError, CudaError

__all__ = ["CaptureError", "CudaError", "SimulatorWarning", "get", "name"]

_backend = None


def _driver_answers() -> bool:
    """True when a CUDA driver loads and reports at least one device."""
    try:
        from cuda.bindings import driver as drv
    except Exception:
        return False
    try:
        (err,) = drv.cuInit(0)
        if err != drv.CUresult.CUDA_SUCCESS:
            return False
        err, count = drv.cuDeviceGetCount()
        return err == drv.CUresult.CUDA_SUCCESS and count > 0
    except Exception:
        return False


class SimulatorWarning(UserWarning):
    """Announces that ``auto`` fell back to the CPU simulator."""


def _choose() -> str:
    wanted = os.environ.get("TENSORPLAY_BACKEND", "auto").strip().lower()
    if wanted not in ("auto", "cuda", "sim"):
        raise ValueError(f"TENSORPLAY_BACKEND must be 'cuda', 'sim' or 'auto', got {wanted!r}")
    if wanted == "sim":
        return "sim"
    if _driver_answers():
        return "cuda"
    if wanted == "cuda":
        raise CudaError(
            "TENSORPLAY_BACKEND=cuda, but no CUDA driver with a device answered "
            "(libcuda could not be loaded or cuInit failed); install the NVIDIA "
            "driver, or set TENSORPLAY_BACKEND=sim to run on the CPU simulator"
        )
    # warn_explicit with no source file to quote keeps the announcement to one line
    warnings.warn_explicit(
        "tensorplay: no CUDA device found, running on the CPU simulator (set TENSORPLAY_BACKEND=sim to silence this)",
        SimulatorWarning,
        "tensorplay",
        0,
    )
    return "sim"


def _enable_simulator() -> None:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    config = sys.modules.get("numba.cuda.core.config")
    if config is None:
        return  # numba.cuda reads the variable when it is first imported
    if "numba.cuda" in sys.modules and not config.ENABLE_CUDASIM:
        raise CudaError(
            "tensorplay needs Numba's CUDA simulator, but numba.cuda was imported "
            "before tensorplay without it; import tensorplay first, or set "
            "NUMBA_ENABLE_CUDASIM=1 before starting Python"
        )
    config.ENABLE_CUDASIM = 1


def get():
    """The process's backend, chosen on first use."""
    global _backend
    if _backend is None:
        if _choose() == "sim":
            _enable_simulator()
            from .sim import SimBackend

            _backend = SimBackend()
        else:
            from .driver import DriverBackend

            _backend = DriverBackend()
    return _backend


def name() -> str:
    """``"cuda"`` or ``"sim"``."""
    return get().name
