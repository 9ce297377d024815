"""Zero-copy exchange with other GPU libraries: CUDA Array Interface and DLPack."""

from __future__ import annotations

import weakref

import numpy as np

from . import _dlpack
from . import _dtype as dt
from ._tensor import Storage, Tensor
from .runtime.backend import get as get_backend
from .runtime.streams import Event, current_stream

__all__ = ["as_tensor", "cuda_array_interface", "dlpack_device", "from_dlpack", "to_dlpack"]


def cuda_array_interface(t: Tensor) -> dict:
    """Version 3 of the interface, with ``"stream": None`` so that consumers such
    as Numba do not synchronise a stream (which would break a capture)."""
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
    return (_dlpack.DLPACK_CUDA if get_backend().name == "cuda" else _dlpack.DLPACK_CPU, 0)


def to_dlpack(t: Tensor, stream=None):
    """A DLPack capsule for ``t``; the consumer's ``stream`` waits for our work."""
    if stream is not None and get_backend().name == "cuda" and stream != -1:
        consumer = get_backend().stream_from_int({1: 0}.get(stream, stream))
        event = Event()
        event.record(current_stream())
        get_backend().stream_wait_event(consumer, event._h)
    device_type, device_id = dlpack_device()
    return _dlpack.to_capsule(t._ptr, t.shape, t._strides, t.dtype.np, device_type, device_id, owner=t)


def _wrap(ptr: int, shape, strides_elems, np_dtype, owner) -> Tensor:
    dtype = dt.from_numpy_dtype(np_dtype)
    n = int(np.prod(shape, dtype=np.int64))
    storage = Storage(ptr, n * dtype.itemsize, owner=owner)
    if n:
        # The simulator only reaches memory it knows: adopt the foreign range
        # (all elements the strides span) for as long as the storage lives.
        lo = sum(min(0, (d - 1) * s) for d, s in zip(shape, strides_elems, strict=True))
        hi = sum(max(0, (d - 1) * s) for d, s in zip(shape, strides_elems, strict=True)) + 1
        dev = get_backend()
        token = dev.adopt_foreign(ptr + lo * dtype.itemsize, (hi - lo) * dtype.itemsize)
        if token is not None:
            weakref.finalize(storage, dev.release_foreign, token)
    return Tensor._make(storage, ptr, tuple(shape), tuple(strides_elems), dtype)


def from_dlpack(obj) -> Tensor:
    """A Tensor sharing the memory of ``obj`` (a DLPack producer or capsule).

    On the GPU backend ``obj`` must live on the CUDA device (PyTorch and CuPy
    tensors do); the simulator takes host (CPU) producers such as NumPy arrays.
    """
    if hasattr(obj, "__dlpack__"):
        want = dlpack_device()[0]
        device = obj.__dlpack_device__()[0] if hasattr(obj, "__dlpack_device__") else want
        if device != want:
            raise TypeError(_wrong_device(device, want))
        if want == _dlpack.DLPACK_CUDA:
            s = current_stream().handle
            capsule = obj.__dlpack__(stream=s if s else 1)
        else:
            capsule = obj.__dlpack__()
    else:
        capsule = obj
    view = _dlpack.from_capsule(capsule)
    if view.device_type != dlpack_device()[0]:
        raise TypeError(_wrong_device(view.device_type, dlpack_device()[0]))
    return _wrap(view.data_ptr, view.shape, view.strides_elems, view.dtype, owner=view)


def _wrong_device(got: int, want: int) -> str:
    names = {1: "the CPU", 2: "a CUDA device"}
    return (
        f"from_dlpack() expected memory on {names.get(want, want)}, got memory on "
        f"{names.get(got, f'device type {got}')}; copy host data with tp.tensor(...)"
    )


def as_tensor(obj) -> Tensor:
    """A Tensor sharing the memory of ``obj``: a Tensor, anything with
    ``__cuda_array_interface__`` (Numba device arrays, CuPy, PyTorch), or a DLPack
    producer. Host data is copied (as ``tp.tensor``)."""
    if isinstance(obj, Tensor):
        return obj
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        np_dtype = np.dtype(cai["typestr"])
        shape = tuple(cai["shape"])
        strides = cai.get("strides")
        if strides is None:
            from ._tensor import contiguous_strides

            strides_elems = contiguous_strides(shape)
        else:
            if any(s % np_dtype.itemsize for s in strides):
                raise ValueError(f"strides {strides} are not multiples of the item size {np_dtype.itemsize}")
            strides_elems = tuple(s // np_dtype.itemsize for s in strides)
        if cai.get("mask") is not None:
            raise TypeError("masked arrays (CUDA Array Interface 'mask') are not supported")
        return _wrap(cai["data"][0], shape, strides_elems, np_dtype, owner=obj)
    if hasattr(obj, "__dlpack__") and not isinstance(obj, (np.ndarray, np.generic)):
        return from_dlpack(obj)  # NumPy's are host data: copied, on every backend
    from ._factories import tensor

    return tensor(obj)
