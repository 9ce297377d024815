"""How the fusion pass sees a tensor in a group: the iteration space it
belongs to, the element strides it is read or written with over that space,
whether two views can share an element, and the kernel argument it is passed
as. Pure functions of shapes, strides and addresses (``compiler/fusion.py``
decides with them what joins a group)."""

from __future__ import annotations

from .. import _dtype as dt
from .._tensor import Tensor
from ..runtime.launch import ArrayArg

__all__ = [
    "array_arg",
    "broadcast_strides",
    "interleaved",
    "read_strides",
    "space_of",
    "spanned",
    "spans_overlap",
    "squeezed",
    "view_at",
]


def broadcast_strides(t: Tensor, shape: tuple) -> tuple | None:
    """``t``'s element strides as it is read over ``shape`` (0 along the
    dimensions it is broadcast in), or None when it does not broadcast to it or
    steps backwards (a negative stride: the op runs eagerly)."""
    if t.ndim > len(shape):
        return None
    pad = len(shape) - t.ndim
    strides = [0] * pad
    for size, want, stride in zip(t.shape, shape[pad:], t.stride(), strict=True):
        if (size != want and size != 1) or (stride < 0 and size > 1):  # the kernel reads at offsets >= 0
            return None
        strides.append(stride if size == want else 0)
    return tuple(strides)


def interleaved(a: tuple, b: tuple) -> bool:
    """True when views ``a`` and ``b``, each ``(address, element strides over
    the group's shape, itemsize)``, never share an element: the same strides,
    every one a multiple of the smallest, and starts that do not differ by a
    multiple of it (the columns of a ``stack``, an interleaved layout's channels)."""
    (a_ptr, strides, size), (b_ptr, b_strides, b_size) = a, b
    if not strides or strides != b_strides or size != b_size:
        return False
    delta, part = divmod(b_ptr - a_ptr, size)
    smallest = min(strides)
    return not part and smallest > 1 and all(st % smallest == 0 for st in strides) and delta % smallest != 0


def view_at(t: Tensor, strides: tuple | None) -> tuple:
    """``t`` as ``interleaved`` takes a view: its address, ``strides``, its itemsize."""
    return t._ptr, strides, t.dtype.itemsize


def read_strides(o: Tensor, out: Tensor) -> tuple | None:
    """``o``'s element strides as an op writing ``out`` reads it, over the
    group's shape (``out``'s without its dimensions of one element), or None
    (see ``broadcast_strides``)."""
    strides = broadcast_strides(o, out.shape)
    return None if strides is None else squeezed(strides, out.shape)


def squeezed(values: tuple, shape: tuple) -> tuple:
    """Per-dimension ``values`` (strides, shifts) without the dimensions of one
    element, which place nothing: equal strides, equal elements."""
    return tuple(v for v, size in zip(values, shape, strict=True) if size != 1)


def space_of(t: Tensor) -> tuple:
    """The iteration space of a group ``t`` can join: its shape without its
    dimensions of one element (a column ``(n, 1)`` and a vector ``(n,)`` are
    one space, element by element), so ``()`` for any one-element tensor
    (every one reads and writes element 0)."""
    return tuple(size for size in t.shape if size != 1)


def spans_overlap(a: tuple, b: tuple) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def spanned(t: Tensor, shape: tuple, strides: tuple) -> ArrayArg:
    """``t`` as a flat array over the elements it is read at (its offsets are from its data pointer)."""
    return array_arg(t._ptr, 1 + sum((size - 1) * stride for size, stride in zip(shape, strides, strict=True)), t.dtype)


def array_arg(ptr: int, n: int, dtype: dt.DType) -> ArrayArg:
    """``n`` elements of ``dtype`` at ``ptr``, as a kernel argument (which keeps no tensor alive)."""
    isz = dtype.itemsize
    return ArrayArg(ptr, (n,), (isz,), dtype.name, isz, True)
