"""The runtime: the device, streams and events, memory and kernel launches.

It knows nothing of ``Tensor``: everything above stands on it. The backend
(the CUDA driver, or the CPU simulator) is chosen when this package is first
imported (see ``runtime.backend``), before anything imports ``numba.cuda``.
``tp.cuda`` re-exports the public names.
"""

from __future__ import annotations

from dataclasses import dataclass

from .backend import CaptureError, CudaError
from .backend import get as _get_backend
from .caches import clear_caches
from .hazards import HazardError, enable_from_environment, sanitize
from .memory import (
    empty_cache,
    max_memory_allocated,
    memory_allocated,
    memory_reserved,
    memory_stats,
    reset_peak_memory_stats,
)
from .streams import (
    Event,
    Stream,
    capture_stream,
    current_stream,
    default_stream,
    set_stream,
    stream,
    synchronize,
)

_device = _get_backend()
enable_from_environment()  # TENSORPLAY_SANITIZE=1
grid = _device.grid  # use inside kernels: i = tp.cuda.grid(1)
gridsize = _device.gridsize
# inside kernels: tp.cuda.set_conditional(handle, np.uint32(keep_going)) sets a
# conditional graph node's condition (the handle from `with g.while_() as handle`)
try:
    set_conditional = _device.conditional_setter()
except Exception as _error:  # conditional nodes then say why when used
    _reason = f"tp.cuda.set_conditional is not available here: {_error}"

    def set_conditional(handle, value):
        raise RuntimeError(_reason)


def backend() -> str:
    """``"cuda"`` on a real GPU, ``"sim"`` on the CPU simulator."""
    return _device.name


def is_available() -> bool:
    """True on a real GPU and on the simulator (which emulates one device)."""
    return True


def device_count() -> int:
    return _device.device_count()


def current_device() -> int:
    return 0


def _one_device(fn: str, device) -> int:
    """0 for the names of cuda:0 (0, "cuda", "cuda:0", its ``Device``, None); a sentence for any other."""
    index = device if isinstance(device, (str, int)) or device is None else getattr(device, "index", device)
    if index == "cuda":
        index = 0
    elif isinstance(index, str) and index.startswith("cuda:") and index[5:].isdigit():
        index = int(index[5:])
    if index is None or (isinstance(index, int) and not isinstance(index, bool) and index == 0):
        return 0
    raise ValueError(
        f"{fn}({device!r}): tensorplay drives one device per process, cuda:0 (this machine has "
        f"{device_count()}); run a process per GPU instead: python -m tensorplay.distributed.run "
        "--nproc-per-node N gives each rank a GPU of its own, which it sees as cuda:0"
    )


def set_device(device) -> None:
    """Make ``device`` the current one: cuda:0, the device tensorplay drives
    (PyTorch's ``torch.cuda.set_device``; any other is a sentence saying how to
    use several GPUs)."""
    _one_device("set_device", device)


class device:  # noqa: N801 (PyTorch's name)
    """``with tp.cuda.device(0):``, as PyTorch's: the block's work on that device
    (cuda:0, the one tensorplay drives; any other is a sentence)."""

    def __init__(self, device) -> None:
        self.idx = _one_device("device", device)

    def __enter__(self) -> device:
        return self

    def __exit__(self, *exc) -> bool:
        return False


def get_device_name(device: int | None = None) -> str:
    return _device.device_name()


@dataclass(frozen=True)
class DeviceProperties:
    """What ``get_device_properties`` reports, by PyTorch's names. On the simulator: the
    H200's numbers, under the simulator's name and memory."""

    name: str
    total_memory: int
    major: int
    minor: int
    multi_processor_count: int
    max_threads_per_block: int
    max_threads_per_multi_processor: int
    warp_size: int
    regs_per_multiprocessor: int
    shared_memory_per_block: int
    shared_memory_per_block_optin: int  # dynamic shared memory a tensorplay launch may ask for
    shared_memory_per_multiprocessor: int
    L2_cache_size: int  # noqa: N815 (PyTorch's name)


def get_device_properties(device=None) -> DeviceProperties:
    """The device's name, memory, compute capability, multiprocessors and limits
    (PyTorch's ``torch.cuda.get_device_properties``), for sizing kernels' launches.

    Examples
    --------
    >>> import tensorplay as tp
    >>> props = tp.cuda.get_device_properties()
    >>> props.warp_size, props.shared_memory_per_block_optin >= props.shared_memory_per_block
    (32, True)
    """
    _one_device("get_device_properties", device)
    return DeviceProperties(_device.device_name(), _device.mem_info()[1], **_device.device_attributes())


def mem_get_info() -> tuple[int, int]:
    """(free, total) bytes of device memory, as the driver reports them."""
    return _device.mem_info()


__all__ = [
    "backend", "capture_stream", "CaptureError", "clear_caches", "CudaError", "current_device", "current_stream",
    "default_stream", "device", "device_count", "DeviceProperties", "empty_cache", "Event", "get_device_name",
    "get_device_properties", "grid", "gridsize", "HazardError", "is_available", "max_memory_allocated",
    "mem_get_info", "memory_allocated", "memory_reserved", "memory_stats", "reset_peak_memory_stats", "sanitize",
    "set_conditional", "set_device", "set_stream", "Stream", "stream", "synchronize",
]  # fmt: skip
