"""Zero-copy exchange with other GPU libraries, the export side: a tensor's
memory as the CUDA Array Interface and as a DLPack capsule (``Tensor`` calls
these; ``_interop`` is the import side)."""

from __future__ import annotations

from . import _dlpack
from .runtime.backend import get as get_backend
from .runtime.streams import Event, current_stream

__all__ = ["cuda_array_interface", "dlpack_device", "to_dlpack"]


def cuda_array_interface(t) -> dict:
    """Version 3 of the interface, with ``"stream": None`` so that consumers such
    as Numba do not synchronise a stream (which would break a capture)."""
    if t.dtype.np.kind == "V":
        raise TypeError(
            f"the CUDA Array Interface has no type string for {t.dtype} (as PyTorch's has none); "
            "share it through DLPack (torch.from_dlpack(t), tp.from_dlpack) or convert it first (t.float())"
        )
    isz = t.dtype.itemsize
    return {
        "shape": t.shape,
        "typestr": t.dtype.np.str,
        "data": (t._ptr, False),
        "strides": None if t._contig else tuple(s * isz for s in t._strides),
        "version": 3,
        "stream": None,
    }


def dlpack_device() -> tuple[int, int]:
    # The simulator's memory is host memory, so it is exported as CPU memory.
    return (_dlpack.DLPACK_CPU if get_backend().host_addressable else _dlpack.DLPACK_CUDA, 0)


def to_dlpack(t, stream=None, max_version=None, dl_device=None, copy=None):
    """A DLPack capsule for ``t`` (versioned and writable when the consumer's
    ``max_version`` allows DLPack 1); the consumer's ``stream`` waits for our work."""
    if copy:
        raise BufferError("tensorplay shares a tensor's memory through DLPack and makes no copy; pass copy=None")
    if dl_device is not None and tuple(dl_device) != tuple(dlpack_device()):
        raise BufferError(f"tensorplay's memory is on DLPack device {dlpack_device()}, not {tuple(dl_device)}")
    if stream is not None and not get_backend().host_addressable and stream != -1:
        consumer = get_backend().stream_from_int({1: 0}.get(stream, stream))
        event = Event()
        event.record(current_stream())
        get_backend().stream_wait_event(consumer, event._h)
    device_type, device_id = dlpack_device()
    versioned = max_version is not None and max_version[0] >= _dlpack.DLPACK_VERSION[0]
    return _dlpack.to_capsule(
        t._ptr, t.shape, t._strides, t.dtype.np, device_type, device_id, owner=t, versioned=versioned
    )
