"""The one device: what the ``device=`` arguments accept.

Tensors live on ``cuda:0`` (which the simulator emulates): ``device=`` takes
None, a tensor's ``.device``, ``"cuda"`` or ``"cuda:0"`` and refuses the rest
with a sentence.
"""

from __future__ import annotations

from ._tensor import DEVICE, Device

__all__ = ["check_device"]


def check_device(device, error: type[Exception] = ValueError) -> Device:
    """The device ``device`` names (the one there is); ``error`` (a sentence) for any other."""
    if device is None or device is DEVICE or (isinstance(device, (str, Device)) and device == DEVICE):
        return DEVICE
    raise error(
        f"tensorplay has one device, cuda:0 (the simulator emulates it), got device={device!r}; "
        "leave device=None (or pass x.device), and take a host copy with x.numpy()"
    )
