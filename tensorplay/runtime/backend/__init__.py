"""The one door to the device.

Two implementations of one small protocol live here: ``driver`` (cuda-python's
``cuda.bindings.driver`` plus Numba sharing the primary context) and ``sim`` (the
CPU: host memory behind integer addresses, kernels in Numba's CUDA simulator).
Nothing above this package imports ``cuda.bindings`` or ``numba.cuda.simulator``.

``get()`` returns the backend chosen by ``TENSORPLAY_BACKEND`` (``cuda``, ``sim``
or ``auto``, the default). The choice must be made before ``numba.cuda`` is first
imported, because Numba reads ``NUMBA_ENABLE_CUDASIM`` once. ``auto`` falling
back to the simulator says so in one line through the ``tensorplay`` logger (a
warning: without logging set up, Python prints it to stderr; ``-W error``
leaves it alone).

The contract both implement, with the same behaviour (capture rules included),
is code: ``protocol.Backend``, split into its concerns (device, memory,
streams and events, kernels, graphs), with capability attributes
(``host_addressable``, launch shapes; what kernels may use is
``kernels/_target``'s) for callers to ask
what a backend can do rather than which it is. ``BACKENDS`` registers them by
name.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys

from .errors import CaptureError, CudaError
from .protocol import Backend

__all__ = ["BACKENDS", "SIMULATOR_NOTICE", "Backend", "CaptureError", "CudaError", "get", "name"]

SIMULATOR_NOTICE = (
    "tensorplay: no CUDA device found, running on the CPU simulator (set TENSORPLAY_BACKEND=sim to silence this)"
)

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
    logging.getLogger("tensorplay").warning(SIMULATOR_NOTICE)
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


# The backends, by name: (module in this package, class). A backend is one
# module implementing ``protocol.Backend`` and one line here. Only the chosen
# one is imported: the driver's needs cuda-python and a driver, the simulator's
# must come after NUMBA_ENABLE_CUDASIM is set.
BACKENDS = {"cuda": ("driver", "DriverBackend"), "sim": ("sim", "SimBackend")}


def get() -> Backend:
    """The process's backend, chosen on first use."""
    global _backend
    if _backend is None:
        chosen = _choose()
        if chosen == "sim":
            _enable_simulator()
        module, cls = BACKENDS[chosen]
        _backend = getattr(importlib.import_module(f".{module}", __name__), cls)()
    return _backend


def name() -> str:
    """``"cuda"`` or ``"sim"``."""
    return get().name
