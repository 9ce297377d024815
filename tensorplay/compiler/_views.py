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
    "broadcast_layout",
    "broadcast_strides",
    "interleaved",
    "read_strides",
    "sharing",
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
    return broadcast_layout(t.shape, t.stride(), shape)


def broadcast_layout(dims: tuple, element_strides: tuple, shape: tuple) -> tuple | None:
    """``broadcast_strides`` of a tensor of shape ``dims`` and ``element_strides``."""
    if len(dims) > len(shape):
        return None
    pad = len(shape) - len(dims)
    strides = [0] * pad
    for size, want, stride in zip(dims, shape[pad:], element_strides, strict=True):
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


def sharing(a: tuple, b: tuple, shape: tuple) -> str:
    """Which elements views ``a`` and ``b`` (as ``view_at`` gives them, over
    the group's ``shape``) share: ``"none"``; ``"same"``, each shared element
    at one index in both, so one thread touches it (the row and the column of
    a matrix that cross at their first elements); or ``"other"``, where two
    threads may. Exact over one dimension, where it solves
    ``a + k sa = b + j sb`` for indices ``k``, ``j`` below the size; over more,
    ``interleaved`` views share none and any others count as ``"other"``."""
    if a == b:  # one view: each element at one index
        return "same"
    if interleaved(a, b):
        return "none"
    (a_ptr, a_strides, size), (b_ptr, b_strides, b_size) = a, b
    if len(shape) != 1 or size != b_size:
        return "other"
    sa, sb = (a_strides or (1,))[0], (b_strides or (1,))[0]  # None: contiguous
    d, part = divmod(b_ptr - a_ptr, size)
    if part or sa <= 0 or sb <= 0:
        return "other"
    g, x, y = _gcd_terms(sa, sb)
    if d % g:
        return "none"
    k0, j0, dk, dj = x * (d // g), -y * (d // g), sb // g, sa // g  # k = k0 + t dk, j = j0 + t dj
    n = shape[0]
    first = max(-(k0 // dk), -(j0 // dj))  # the smallest t with k, j >= 0
    last = min((n - 1 - k0) // dk, (n - 1 - j0) // dj)
    if first > last:
        return "none"
    if dk == dj:  # k - j is the same for every t
        return "same" if k0 == j0 else "other"
    return "same" if first == last and k0 + first * dk == j0 + first * dj else "other"


def _gcd_terms(a: int, b: int) -> tuple[int, int, int]:
    """(g, x, y) with g = gcd(a, b) = a x + b y."""
    if b == 0:
        return a, 1, 0
    g, x, y = _gcd_terms(b, a % b)
    return g, y, x - (a // b) * y


def view_at(t: Tensor, strides: tuple | None) -> tuple:
    """``t`` as ``sharing`` takes a view: its address, ``strides``, its itemsize."""
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
