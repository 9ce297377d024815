"""Zero-copy exchange with other GPU libraries, the export side: a tensor's
memory as the CUDA Array Interface and as a DLPack capsule (``Tensor`` calls
these; ``_interop`` is the import side)."""

from __future__ import annotations

import numbers

from . import _dlpack
from .runtime.backend import get as get_backend
from .runtime.capture import capture_state, current_fuser, flush_fused
from .runtime.memory import allocator
from .runtime.streams import Event, Stream, current_stream

__all__ = ["cuda_array_interface", "dlpack_device", "hold_for_graph", "to_dlpack"]


def hold_for_graph(stream: Stream, tensors) -> None:
    """Tensors that a kernel captured on ``stream`` reads or writes stay alive as
    long as the graph does (``allocator.hold``), so that no replay reaches memory
    handed to someone else. Only while a capture is in progress; tensors the
    capture allocated live in the graph's pool and are not held."""
    if capture_state.active:
        allocator.hold(stream, [t._storage for t in tensors])


def lend(t, handle: int) -> None:
    """``t``'s memory goes to work on the stream of ``handle`` (a kernel argument:
    a plain Numba launch takes tensors through DLPack, with its stream). During
    a capture the ops tp.compile holds back are launched first, and it notes the
    write, as for a tensorplay launch; the graph keeps ``t`` alive."""
    if not capture_state.active:
        return
    flush_fused()
    fuser = current_fuser()
    if fuser is not None:
        fuser.note_written([t._ptr])
    hold_for_graph(Stream._wrap(get_backend().stream_from_int(handle)), [t])


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
    ``max_version`` allows DLPack 1); the consumer's ``stream`` waits for our work
    and, while it captures a graph, has ``t`` held for it (``lend``). With
    ``copy=True`` the capsule holds a copy of ``t`` (made on the current stream)."""
    if dl_device is not None and tuple(dl_device) != tuple(dlpack_device()):
        if tuple(dl_device) == (1, 0) and copy is not False:  # the CPU: a host copy, as the standard allows
            return t.numpy().copy().__dlpack__(max_version=max_version)
        raise BufferError(
            f"tensorplay's memory is on DLPack device {dlpack_device()}, not {tuple(dl_device)}"
            + ("; only a copy can reach the CPU (copy=None or True)" if tuple(dl_device) == (1, 0) else "")
        )
    if copy:
        t = t.clone()
    if stream is not None and (not isinstance(stream, numbers.Integral) or isinstance(stream, bool)):
        advice = "; pass its .handle" if hasattr(stream, "__cuda_stream__") else ""
        raise TypeError(
            f"__dlpack__() expected stream as an int (the consumer's CUstream handle, 1 for the legacy "
            f"default stream, -1 for no ordering) or None, got {type(stream).__name__}{advice}"
        )
    if stream is not None and stream != -1:
        stream = int(stream)
        handle = {1: 0}.get(stream, stream)  # DLPack's 1 is the legacy default stream
        lend(t, handle)
        producer = current_stream()
        if handle != producer.handle:  # a stream is ordered with itself
            event = Event()
            event.record(producer)
            get_backend().stream_wait_event(get_backend().stream_from_int(handle), event._h)
    device_type, device_id = dlpack_device()
    versioned = max_version is not None and max_version[0] >= _dlpack.DLPACK_VERSION[0]
    return _dlpack.to_capsule(
        t._ptr, t.shape, t._strides, t.dtype.np, device_type, device_id, owner=t, versioned=versioned
    )
