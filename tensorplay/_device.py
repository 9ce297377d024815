"""The one device: what the ``device=`` arguments accept.

Tensors live on ``cuda:0`` (which the simulator emulates): ``device=`` takes
None, a tensor's ``.device``, ``"cuda"``, ``"cuda:0"`` or 0 and refuses the rest
with a sentence.
"""

from __future__ import annotations

__all__ = ["DEVICE", "Device", "check_device", "names_device", "to_arguments"]


class Device:
    """Where a tensor lives: always ``cuda:0`` (the simulator emulates it)."""

    type = "cuda"
    index = 0

    def __eq__(self, other) -> bool:
        return isinstance(other, Device) or other in ("cuda", "cuda:0")

    def __hash__(self) -> int:
        return hash("cuda:0")

    def __repr__(self) -> str:
        return "device(type='cuda', index=0)"

    def __str__(self) -> str:
        return "cuda:0"


DEVICE = Device()


def names_device(value) -> bool:
    """Whether ``value`` is given as a device (a ``Device``, ``"cuda"``, ``"cuda:N"``,
    ``"cpu"``...) rather than a dtype: what ``x.to(...)`` tells apart."""
    if isinstance(value, Device):
        return True
    return isinstance(value, str) and value.split(":", 1)[0] in ("cuda", "cpu", "meta", "mps", "xpu")


def check_device(device, error: type[Exception] = ValueError) -> Device:
    """The device ``device`` names (the one there is: None, ``"cuda"``, ``"cuda:0"``,
    0 or a tensor's ``.device``); ``error`` (a sentence) for any other."""
    if device is None or device is DEVICE or (isinstance(device, (str, Device)) and device == DEVICE):
        return DEVICE
    if isinstance(device, int) and not isinstance(device, bool) and device == 0:
        return DEVICE
    if device == "cpu" or getattr(device, "type", None) == "cpu":
        raise error(
            f"tensorplay has one device, cuda:0, and keeps tensors there, got device={device!r}; "
            "take a host copy with x.numpy() (or np.asarray(x))"
        )
    raise error(
        f"tensorplay has one device, cuda:0, got device={device!r}; leave device=None (or pass x.device); "
        "to use several GPUs run a process per GPU (python -m tensorplay.distributed.run --nproc-per-node N), "
        "each of which sees its own as cuda:0"
    )


def to_arguments(args: tuple, dtype=None, device=None):
    """The dtype that PyTorch's ``to(...)`` arguments ask for (None: none), once their device
    is checked: positional ones are a device (``"cuda"``, ``"cuda:0"``, 0, a ``Device``), a dtype,
    or a tensor (its dtype); a bool, PyTorch's positional ``non_blocking``, changes nothing here."""
    for arg in args:
        if isinstance(arg, bool):
            continue
        if names_device(arg) or isinstance(arg, int):
            device = arg
            continue
        if dtype is not None:
            raise TypeError(f"to() got a dtype twice: {arg!r} and {dtype!r}; pass it once")
        if hasattr(arg, "dtype") and hasattr(arg, "shape") and not isinstance(arg, type):  # not np.float64
            dtype = arg.dtype
        else:
            dtype = arg
    check_device(device)
    return dtype
