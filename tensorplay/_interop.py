"""Zero-copy exchange with other GPU libraries, the import side: tensors over
memory that others made (CUDA Array Interface, DLPack). ``_export`` gives ours."""

from __future__ import annotations

import weakref

import numpy as np

from . import _dlpack
from . import _dtype as dt
from ._export import dlpack_device
from ._factories import tensor
from ._shape import contiguous_strides
from ._tensor import Storage, Tensor
from .runtime.backend import get as get_backend
from .runtime.streams import current_stream

__all__ = ["as_tensor", "from_dlpack"]


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
        kwargs = {}
        if want == _dlpack.DLPACK_CUDA:
            s = current_stream().handle
            kwargs["stream"] = s if s else 1
        try:
            capsule = obj.__dlpack__(max_version=_dlpack.DLPACK_VERSION, **kwargs)
        except TypeError:  # a producer older than DLPack 1 takes no max_version
            capsule = obj.__dlpack__(**kwargs)
    else:
        capsule = obj
    view = _dlpack.from_capsule(capsule)
    if view.read_only:
        view.release()
        raise ValueError(
            "from_dlpack() got memory its producer marked read-only, and tensors are writable; "
            "copy it with tp.tensor(...) instead"
        )
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
            strides_elems = contiguous_strides(shape)
        else:
            if any(s % np_dtype.itemsize for s in strides):
                raise ValueError(f"strides {strides} are not multiples of the item size {np_dtype.itemsize}")
            strides_elems = tuple(s // np_dtype.itemsize for s in strides)
        if cai.get("mask") is not None:
            raise TypeError("masked arrays (CUDA Array Interface 'mask') are not supported")
        if cai["data"][1]:
            raise ValueError(
                "as_tensor() got memory its producer marked read-only (CUDA Array Interface 'data'), "
                "and tensors are writable; copy it with tp.tensor(...) instead"
            )
        return _wrap(cai["data"][0], shape, strides_elems, np_dtype, owner=obj)
    if hasattr(obj, "__dlpack__") and not isinstance(obj, (np.ndarray, np.generic)):
        return from_dlpack(obj)  # NumPy's are host data: copied, on every backend
    return tensor(obj)
