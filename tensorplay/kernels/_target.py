"""What the kernels here are compiled for, as capabilities, read once.

The runtime's backend chose the target before any kernel module was imported:
the GPU, or Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM``), which runs a
kernel as Python, one thread per CUDA thread. Kernel source asks what the
target can do, never which target it is. This module imports nothing of
tensorplay, so the GPU compile check (``tests/helpers/gpu_compile.py``) loads
the kernel modules on their own.
"""

from __future__ import annotations

from numba import cuda
from numba.cuda.core import config

__all__ = [
    "ALIGNED_SHARED", "DISK_CACHE", "GRID_DEPENDENCY", "INTRINSICS", "IEEE_MATH", "LIBDEVICE", "NATIVE_INT_CASTS",
    "SMALL_BLOCKS", "WARP_SHUFFLES", "device_function", "resident",
]  # fmt: skip

_SIMULATED = bool(config.ENABLE_CUDASIM)

WARP_SHUFFLES = not _SIMULATED  # cuda.shfl_*_sync
ALIGNED_SHARED = not _SIMULATED  # cuda.shared.array(..., alignment=16)
INTRINSICS = not _SIMULATED  # numba @intrinsic lowering (pointer loads, typing helpers)
IEEE_MATH = not _SIMULATED  # math.* gives inf and NaN (Python's raises instead)
LIBDEVICE = not _SIMULATED  # numba.cuda.libdevice (the bit casts float_as_int, int_as_float)
SMALL_BLOCKS = _SIMULATED  # a Python thread per CUDA thread: keep tiles and blocks small
DISK_CACHE = not _SIMULATED  # cuda.jit(cache=True): compiled kernels kept on disk across processes
NATIVE_INT_CASTS = not _SIMULATED  # np.int32(x) of a float converts as the GPU's stores do (NumPy's wraps or raises)


def _capability() -> tuple[int, int]:
    """The current device's compute capability; where there is no driver, the
    9.0 that the GPU compile check (``tests/helpers/gpu_compile.py``) targets."""
    from numba.cuda.cudadrv.error import CudaSupportError

    try:
        return tuple(cuda.get_current_device().compute_capability)
    except CudaSupportError:
        return (9, 0)


# griddepcontrol (sm_90): a kernel may start while the one before it drains (_dependency.py)
GRID_DEPENDENCY = not _SIMULATED and _capability() >= (9, 0)


def device_function(fn):
    """``fn`` as a device function that the kernels calling it inline: on the
    GPU in NVVM (``forceinline``: compiled once per argument types and process,
    where Numba-IR inlining typed and lowered it again in every kernel, a
    quarter of a kernel's compile time); the simulator calls it as Python."""
    return cuda.jit(device=True)(fn) if _SIMULATED else cuda.jit(device=True, forceinline=True)(fn)


def resident(blocks: int, threads: int):
    """A kernel decorator: ``cuda.jit``, and on the GPU the launch bounds that
    ask the compiler to leave room for ``blocks`` blocks of ``threads`` threads
    on a multiprocessor (registers to ``65536 / (blocks * threads)`` a thread).
    For tile kernels whose loads are in flight a tile at a time: more blocks
    resident hide more of each one's barriers (the radix scatter at 2 blocks
    and the mask compaction at 4 ran 10 % and 7 % faster on the H200 than
    with the registers they took unbounded, 164 and 168)."""

    def jit(fn):
        return cuda.jit(fn) if _SIMULATED else cuda.jit(fn, launch_bounds=(threads, blocks))

    return jit
