"""Tensors pickled as their values, and ``tp.save`` / ``tp.load`` for checkpoints.

A tensor pickles as a host copy of its elements with its dtype, shape, type
(a ``Parameter`` comes back as one) and ``requires_grad``, and unpickles into
new device memory: ``pickle``, ``copy.deepcopy`` through pickle, and a
module's ``state_dict()`` saved to a file. Unlike PyTorch's storages, tensors
that shared memory (a view and its base) come back as tensors of their own, a
gradient is not saved (as PyTorch), and a non-leaf comes back as a leaf.
Pickling reads the device, so it is refused during a capture, as ``numpy()``.

``tp.load`` unpickles only tensors, NumPy-free containers (dicts, lists,
tuples, ``OrderedDict``), numbers and strings unless ``weights_only=False``:
a pickle can run any code it names, and a checkpoint from elsewhere should
not. ``copy.copy(t)`` keeps giving a tensor over the same memory.

Examples
--------
>>> import io
>>> import tensorplay as tp
>>> f = io.BytesIO()
>>> tp.save({"w": tp.tensor([1.0, 2.0]), "step": 3}, f)
>>> _ = f.seek(0)
>>> tp.load(f)["w"].tolist()
[1.0, 2.0]
"""

from __future__ import annotations

import os
import pickle

import numpy as np

from . import _dtype as dt
from ._factories import upload
from ._tensor import Tensor, add_methods

__all__ = ["load", "save"]


def _rebuild(cls: type, data: bytes, dtype: str, shape: tuple, requires_grad: bool) -> Tensor:
    """What ``_reduce`` wrote, in new device memory on the current device."""
    kind = getattr(dt, dtype)
    t = Tensor._empty(tuple(shape), kind)
    upload(t, np.frombuffer(data, dtype=kind.np).reshape(shape))
    if cls is not Tensor:
        t = cls._make(t._storage, t._ptr, t.shape, t._strides, t.dtype)
    if requires_grad and not t.requires_grad:
        t.requires_grad_()
    return t


def _reduce(self: Tensor, protocol: int):
    values = np.ascontiguousarray(self.numpy())  # refused during a capture, with numpy()'s sentence
    return _rebuild, (type(self), values.tobytes(), self.dtype.name, tuple(self.shape), self.requires_grad)


def _shallow_copy(self: Tensor) -> Tensor:
    """``copy.copy``: a tensor over the same memory, as before tensors pickled."""
    new = object.__new__(type(self))
    for name in Tensor.__slots__[:-1]:  # all but __weakref__
        setattr(new, name, getattr(self, name))
    if hasattr(self, "__dict__"):  # a subclass's attributes
        new.__dict__.update(self.__dict__)
    return new


add_methods({"__reduce_ex__": _reduce, "__copy__": _shallow_copy})


def save(obj, f) -> None:
    """Pickle ``obj`` (a tensor, a ``state_dict()``, any picklable object
    holding tensors) to ``f``, a path or a binary file open for writing."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as out:
            pickle.dump(obj, out, protocol=pickle.HIGHEST_PROTOCOL)
    else:
        pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)


_ALLOWED = {
    ("tensorplay._pickling", "_rebuild"),
    ("tensorplay._tensor", "Tensor"),
    ("tensorplay.nn.parameter", "Parameter"),
    ("collections", "OrderedDict"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "slice"),
    ("builtins", "complex"),
}


class _WeightsOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"tp.load(weights_only=True) refuses {module}.{name}: it unpickles tensors, containers, numbers and "
            "strings only; pass weights_only=False for a file you trust (a pickle can run any code it names)"
        )


def load(f, *, weights_only: bool = True):
    """What ``save`` wrote to ``f`` (a path or a binary file open for reading),
    its tensors in new device memory. ``weights_only=True`` (the default, as
    PyTorch's) refuses anything but tensors, containers, numbers and strings."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as source:
            return load(source, weights_only=weights_only)
    if not weights_only:
        return pickle.load(f)
    return _WeightsOnly(f).load()
