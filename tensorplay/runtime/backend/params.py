"""Kernel parameter layout (Numba's ABI), shared by both backends.

Every parameter takes 8-byte slots: an array is meminfo, parent, nitems,
itemsize, data, shape..., strides... (5 + 2 * ndim slots); an element pointer
(``CPointer``) and a scalar are one slot each.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["POINTER", "PackedLaunch", "array_struct", "pack_pointer", "param_formats", "scalar_struct"]

POINTER = struct.Struct("<Q")  # an element pointer parameter: the address


def pack_pointer(a) -> bytes:
    """An element pointer parameter to the data of kernel array ``a`` (a tensor)."""
    return POINTER.pack(a._karray[4])


_SCALAR_CODES = {
    "int8": "b", "int16": "h", "int32": "i", "int64": "q",
    "uint8": "B", "uint16": "H", "uint32": "I", "uint64": "Q",
    "float16": "e", "float32": "f", "float64": "d", "bool": "?",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class PackedLaunch:
    """A kernel launch with its parameters packed: a launcher (the backend's),
    its grid and block (3-tuples), and the parameter bytes (``staged_graph``
    takes these for the kernels it puts in front of a graph)."""

    launcher: Any
    grid: tuple
    block: tuple
    params: bytes


@functools.cache
def array_struct(ndim: int) -> struct.Struct:
    """The packing of one array parameter of ``ndim`` dimensions."""
    return struct.Struct(f"<{5 + 2 * ndim}q")


def scalar_struct(dtype) -> struct.Struct:
    """The packing of one scalar parameter of NumPy ``dtype`` (padded to 8 bytes)."""
    name = np.dtype(dtype).name
    code = _SCALAR_CODES.get(name)
    if code is None:
        raise TypeError(f"kernel argument of type {name} is not supported")
    return struct.Struct("<" + code + "x" * (8 - struct.calcsize(code)))


def param_formats(argtypes) -> list[tuple[bool, struct.Struct, object]]:
    """(is_array, packing, NumPy dtype) for each parameter of a Numba signature;
    an element pointer's packing is ``POINTER`` and its dtype its elements'."""
    from numba.cuda import types
    from numba.cuda.np.numpy_support import as_dtype

    out = []
    for ty in argtypes:
        if isinstance(ty, types.Array):
            out.append((True, array_struct(ty.ndim), as_dtype(ty.dtype)))
        elif isinstance(ty, types.CPointer):
            out.append((False, POINTER, as_dtype(ty.dtype)))
        else:
            dtype = np.dtype(np.bool_) if ty == types.boolean else as_dtype(ty)
            out.append((False, scalar_struct(dtype), dtype))
    return out
