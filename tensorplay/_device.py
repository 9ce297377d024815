"""The one device: what the ``device=`` arguments accept.

Tensors live on ``cuda:0`` (which the simulator emulates): ``device=`` takes
None, a tensor's ``.device``, ``"cuda"`` or ``"cuda:0"`` and refuses the rest
with a sentence.
"""

from __future__ import annotations

__all__ = ["DEVICE", "Device", "check_device"]


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


def check_device(device, error: type[Exception] = ValueError) -> Device:
    """The device ``device`` names (the one there is); ``error`` (a sentence) for any other."""
    if device is None or device is DEVICE or (isinstance(device, (str, Device)) and device == DEVICE):
        return DEVICE
    raise error(
        f"tensorplay has one device, cuda:0 (the simulator emulates it), got device={device!r}; "
        "leave device=None (or pass x.device), and take a host copy with x.numpy()"
    )
