"""The memory an operation reads and writes, as byte ranges.

A kernel's array parameter covers the bytes its elements span (a view's
strides included: two halves of a tensor taken with a step do not meet); an
element pointer parameter (the flat kernels' inputs) covers as many elements
as the kernel says it walks (its count, for the kernels that declare it) or
else one. Whether a parameter is written comes from the kernel's code
(``written``); where that cannot be read, every array is taken as written.

A kernel may name parameters it reads while other work writes them on
purpose, a request it polls (``kernel.tp_polled``, a set of parameter names:
a while loop's cancel request, which the host sets from another stream while
the graph runs): those reads are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend.params import param_formats
from .written import written_parameters

__all__ = ["Access", "array_access", "kernel_accesses", "meet", "unpack"]

_MAX_EXACT = 1 << 24  # bytes compared one by one between two strided views; past that, they are taken to meet


@dataclass(frozen=True, slots=True)
class Access:
    """Bytes ``[start, end)`` read or written by an operation; ``what`` names the
    operand; ``layout`` (address, shape, strides, itemsize) where the operand is a
    view with gaps between its elements (None: every byte of the range)."""

    start: int
    end: int
    write: bool
    what: str
    layout: tuple | None = None

    def describe(self) -> str:
        verb = "writes" if self.write else "reads"
        return f"{verb} {self.what}, {self.end - self.start} bytes at {self.start:#x}"


def meet(a: Access, b: Access) -> bool:
    """Whether two accesses touch a byte in common."""
    if a.end <= b.start or b.end <= a.start:
        return False
    if a.layout is None and b.layout is None:
        return True
    lo, hi = max(a.start, b.start), min(a.end, b.end)
    if hi - lo > _MAX_EXACT:
        return True
    return bool(np.any(_covered(a, lo, hi) & _covered(b, lo, hi)))


def _covered(a: Access, lo: int, hi: int) -> np.ndarray:
    """Which bytes of ``[lo, hi)`` the access covers."""
    mask = np.zeros(hi - lo, bool)
    if a.layout is None:
        mask[max(a.start, lo) - lo : min(a.end, hi) - lo] = True
        return mask
    ptr, shape, strides, itemsize = a.layout
    offsets = np.full(1, ptr, np.int64)
    for n, st in zip(shape, strides, strict=True):
        offsets = (offsets[:, None] + np.arange(n, dtype=np.int64) * st).reshape(-1)
    for k in range(itemsize):
        at = offsets + k - lo
        mask[at[(at >= 0) & (at < hi - lo)]] = True
    return mask


def array_access(k: tuple, write: bool, what: str) -> Access | None:
    """The access of a kernel array whose fields are ``k`` (meminfo, parent,
    nitems, itemsize, data, shape..., strides...); None when it is empty."""
    itemsize, ptr = k[3], k[4]
    ndim = (len(k) - 5) // 2
    shape, strides = k[5 : 5 + ndim], k[5 + ndim :]
    if any(n == 0 for n in shape):
        return None
    lo = ptr + sum(min(0, (n - 1) * st) for n, st in zip(shape, strides, strict=True))
    hi = ptr + sum(max(0, (n - 1) * st) for n, st in zip(shape, strides, strict=True)) + itemsize
    count = 1
    for n in shape:
        count *= n
    dense = hi - lo == count * itemsize and not any(n > 1 and st == 0 for n, st in zip(shape, strides, strict=True))
    return Access(lo, hi, write, what, None if dense else (ptr, tuple(shape), tuple(strides), itemsize))


def _array_what(name: str, dtype, k: tuple) -> str:
    ndim = (len(k) - 5) // 2
    shape = ", ".join(str(n) for n in k[5 : 5 + ndim])
    return f"{name} ({dtype}[{shape}])"


_formats: dict = {}  # argtypes -> param_formats


def unpack(argtypes: tuple, packed: bytes) -> list:
    """The arguments packed in ``packed`` for a kernel of ``argtypes``: an array's
    fields as a tuple, an element pointer's address, a scalar's value."""
    formats = _formats.get(argtypes)
    if formats is None:
        formats = _formats[argtypes] = param_formats(argtypes)
    args, offset = [], 0
    for is_array, packing, _ in formats:
        values = packing.unpack_from(packed, offset)
        args.append(values if is_array else values[0])
        offset += packing.size
    return args


def kernel_accesses(kernel, argtypes: tuple | None, args: list) -> list[Access]:
    """What a launch of ``kernel`` (a Numba kernel) with ``args`` reads and
    writes. ``args`` hold kernel arrays (objects with ``_karray``, or the fields
    as a tuple), element pointers (addresses or kernel arrays) and scalars;
    ``argtypes``, the compiled signature, where known (None for a plain Numba launch)."""
    found = written_parameters(kernel)
    names, writes = found if found is not None else ((), None)
    counted = bool(getattr(kernel, "tp_counted", False)) and len(args) > 1
    polled = getattr(kernel, "tp_polled", ())
    out = []
    for i, arg in enumerate(args):
        name = names[i] if i < len(names) else f"argument {i}"
        write = writes is None or name in writes
        if name in polled and not write:
            continue
        ty = argtypes[i] if argtypes is not None and i < len(argtypes) else None
        k = _fields(arg)
        if k is not None and (ty is None or getattr(ty, "ndim", None) is not None):
            access = array_access(k, write, _array_what(name, getattr(ty, "dtype", _dtype_of(arg)), k))
        elif ty is not None and type(ty).__name__ == "CPointer":
            access = _pointer_access(arg, k, ty, write, name, args[1] if counted else None)
        else:
            access = None
        if access is not None:
            out.append(access)
    return out


def _fields(arg) -> tuple | None:
    if isinstance(arg, tuple):
        return arg
    return getattr(arg, "_karray", None)


def _dtype_of(arg) -> Any:
    dtype = getattr(arg, "dtype", None)
    return getattr(dtype, "name", None) or dtype or "?"


def _pointer_access(arg, k, ty, write: bool, name: str, count) -> Access | None:
    """An element pointer parameter: the array given for it (``launch_with``),
    or its address and the kernel's count of elements (one when none is declared)."""
    if k is not None:
        return array_access(k, write, _array_what(name, ty.dtype, k))
    from numba.np.numpy_support import as_dtype

    ptr = int(arg)
    n = max(int(count), 1) if count is not None else 1
    return Access(ptr, ptr + n * as_dtype(ty.dtype).itemsize, write, f"{name} ({ty.dtype}*, {n} elements)")
