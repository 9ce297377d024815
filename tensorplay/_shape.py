"""Shape arithmetic: broadcasting, view strides, index parsing, coalescing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .runtime.caches import BoundedCache

_STRIDES = BoundedCache("shape.strides", 4096)  # shape -> its C-contiguous strides: few shapes, made many times


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    if type(shape) is not tuple:
        shape = tuple(shape)
    found = _STRIDES.get(shape)
    if found is not None:
        return found
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
    return _STRIDES.put(shape, tuple(reversed(strides)))


def is_contiguous(shape, strides) -> bool:
    acc = 1
    for d, s in zip(reversed(shape), reversed(strides), strict=False):
        if d != 1 and s != acc:
            return False
        acc *= d
    return True


def numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


__all__ = [
    "ArrayIndex",
    "IndexPlan",
    "broadcast_shapes",
    "broadcast_strides",
    "coalesce",
    "infer_shape",
    "parse_index",
    "view_strides",
]


def _as_shape(shape) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    out = []
    for d in shape:
        if isinstance(d, bool) or not hasattr(d, "__index__"):
            raise TypeError(f"expected a shape of integers, got {tuple(shape)!r}")
        out.append(int(d.__index__()))
    return tuple(out)


def infer_shape(shape, numel: int) -> tuple[int, ...]:
    """``shape`` with one ``-1`` replaced so that it holds ``numel`` elements."""
    shape = _as_shape(shape)
    if shape.count(-1) > 1:
        raise ValueError(f"only one dimension can be -1, got shape {shape}")
    known = 1
    for d in shape:
        if d != -1:
            if d < 0:
                raise ValueError(f"expected non-negative sizes, got shape {shape}")
            known *= d
    if -1 in shape:
        if known == 0 or numel % known:
            raise ValueError(f"shape {shape} is invalid for a tensor of {numel} elements")
        shape = tuple(numel // known if d == -1 else d for d in shape)
    elif known != numel:
        raise ValueError(f"shape {shape} is invalid for a tensor of {numel} elements")
    return shape


def view_strides(shape, strides, new_shape):
    """Strides that show memory of (shape, strides) as ``new_shape``, or None.

    Works chunk by chunk: each run of old dimensions that is contiguous in
    memory may be split into any new dimensions of the same total size.
    """
    if not new_shape and not shape:
        return ()
    if 0 in shape:  # no elements: any strides will do
        return contiguous_strides(tuple(new_shape))
    old = [(d, s) for d, s in zip(shape, strides, strict=False) if d != 1]
    new_strides = [0] * len(new_shape)
    oi, ni = 0, 0
    while ni < len(new_shape):
        if new_shape[ni] == 1:
            new_strides[ni] = 1
            ni += 1
            continue
        if oi >= len(old):
            return None
        # gather a contiguous chunk of old dims
        size, last_stride = old[oi][0], old[oi][1]
        oi += 1
        while oi < len(old) and old[oi - 1][1] == old[oi][0] * old[oi][1]:
            size *= old[oi][0]
            last_stride = old[oi][1]
            oi += 1
        # split it into new dims
        chunk = []
        acc = 1
        while ni < len(new_shape) and acc < size:
            if new_shape[ni] != 1:
                acc *= new_shape[ni]
            chunk.append(ni)
            ni += 1
        if acc != size:
            return None
        stride = last_stride
        for j in reversed(chunk):
            new_strides[j] = stride
            stride *= new_shape[j]
    return tuple(new_strides) if oi == len(old) else None


def broadcast_shapes(*shapes) -> tuple[int, ...]:
    """NumPy's broadcast of ``shapes``; ValueError naming them otherwise."""
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        size = 1
        for s in shapes:
            d = s[i - ndim + len(s)] if i - ndim + len(s) >= 0 else 1
            if d != 1:
                if size not in (1, d):
                    raise ValueError(
                        "shapes " + ", ".join(str(tuple(x)) for x in shapes) + " cannot be broadcast together"
                    )
                size = d
        out.append(size)
    return tuple(out)


def broadcast_strides(shape, strides, target) -> tuple[int, ...]:
    """Strides showing (shape, strides) broadcast to ``target`` (0 where repeated)."""
    lead = len(target) - len(shape)
    if lead < 0:
        raise ValueError(f"cannot broadcast shape {tuple(shape)} to {tuple(target)}")
    out = []
    for i, t in enumerate(target):
        if i < lead:
            out.append(0)
            continue
        d, s = shape[i - lead], strides[i - lead]
        if d == t:
            out.append(s if t != 1 else 0)
        elif d == 1:
            out.append(0)
        else:
            raise ValueError(f"cannot broadcast shape {tuple(shape)} to {tuple(target)}")
    return tuple(out)


def coalesce(shape, strides_list):
    """Merge adjacent dimensions that are contiguous in every operand.

    ``strides_list`` holds one strides tuple per operand (all of ``shape``'s
    length). Returns the merged shape and strides; size-1 dimensions vanish.
    """
    keep = [i for i, d in enumerate(shape) if d != 1]
    if not keep:
        return (1,), [(0,) for _ in strides_list]
    dims = [shape[keep[0]]]
    strides = [[s[keep[0]]] for s in strides_list]
    for i in keep[1:]:
        d = shape[i]
        if all(st[-1] == s[i] * d for st, s in zip(strides, strides_list, strict=False)):
            dims[-1] *= d
            for st, s in zip(strides, strides_list, strict=False):
                st[-1] = s[i]
        else:
            dims.append(d)
            for st, s in zip(strides, strides_list, strict=False):
                st.append(s[i])
    return tuple(dims), [tuple(st) for st in strides]


# -- indexing ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArrayIndex:
    """An array in an index: integers along one dimension, or a boolean mask
    over ``len(sizes)`` dimensions (a 0-d mask: over a new dimension of 1)."""

    dim: int  # the first dimension it indexes, counted in the plan's view
    sizes: tuple  # the sizes of the dimensions it indexes
    array: object  # a tensor (device data), or a NumPy array (host data, checked here)
    mask: bool


@dataclass(frozen=True, slots=True)
class IndexPlan:
    """``tensor[index]`` parsed. The view that the integers, slices, None and
    ``...`` give (``offset`` in elements), keeping the dimensions the arrays
    index; the arrays (none: basic indexing, the view is the result); and
    whether the arrays and the integers among them stand next to each other in
    the index: then their broadcast shape replaces their dimensions where they
    were, otherwise it comes first (NumPy's rule)."""

    shape: tuple
    strides: tuple
    offset: int
    arrays: tuple = ()
    adjacent: bool = True


_NEW, _ELLIPSIS, _SLICE, _INT, _ARRAY = range(5)


def _host_array(item) -> np.ndarray:
    a = np.asarray(item)
    if a.dtype.kind in "biu":
        return a
    if a.size == 0 and a.dtype.kind == "f":  # [] is an empty integer index, as in NumPy
        return a.astype(np.int64)
    raise IndexError(f"arrays used as indices must be of integer (or boolean) type, got {a.dtype}")


def _classify(item) -> tuple[int, object]:
    """(kind, the item as used): host sequences become NumPy arrays."""
    t = type(item)
    if t is int:
        return _INT, item
    if t is slice:
        return _SLICE, item
    if item is None:
        return _NEW, None
    if item is Ellipsis:
        return _ELLIPSIS, item
    if t is bool or t is np.bool_ or isinstance(item, (list, tuple, range, np.ndarray)):
        return _ARRAY, _host_array(item)
    if isinstance(item, np.integer):
        return _INT, int(item)
    if hasattr(item, "shape") and hasattr(item, "dtype"):  # a tensor
        if getattr(item.dtype, "kind", "") not in ("b", "i", "u"):
            name = getattr(item.dtype, "name", item.dtype)
            raise IndexError(f"arrays used as indices must be of integer (or boolean) type, got {name}")
        return _ARRAY, item
    if hasattr(item, "__index__") and not isinstance(item, (float, np.floating)):
        return _INT, item.__index__()
    raise TypeError(
        f"expected an integer, slice, None, ..., or an integer or boolean array as an index, got {t.__name__}"
    )


def parse_index(shape, strides, index) -> IndexPlan:
    """The ``IndexPlan`` of ``tensor[index]`` for a tensor of ``shape`` and
    ``strides``: slices of any step (negative steps give negative strides),
    integers, None and ``...``, integer arrays and boolean masks (tensors,
    NumPy arrays, lists). Host data is checked here (IndexError, as NumPy);
    a tensor's values are not read."""
    items = index if type(index) is tuple else (index,)
    kinds = [_classify(i) for i in items]
    ndim, used, ellipses, any_array = len(shape), 0, 0, False
    for kind, item in kinds:
        if kind == _ELLIPSIS:
            ellipses += 1
        elif kind == _ARRAY:
            any_array = True
            used += item.ndim if item.dtype.kind == "b" else 1
        elif kind != _NEW:
            used += 1
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if used > ndim:
        raise IndexError(f"too many indices for a tensor of {ndim} dimensions")
    out_shape, out_strides, offset, dim = [], [], 0, 0
    arrays, advanced = [], []  # advanced: positions in the index of the arrays and, with them, the integers
    for position, (kind, item) in enumerate(kinds):
        if kind == _SLICE:
            start, stop, step = item.indices(shape[dim])
            length = len(range(start, stop, step))
            out_shape.append(length)
            out_strides.append(strides[dim] * step)
            offset += start * strides[dim] if length else 0
            dim += 1
        elif kind == _INT:
            if not -shape[dim] <= item < shape[dim]:
                raise IndexError(f"index {item} is out of range for dimension {dim} of size {shape[dim]}")
            offset += (item % shape[dim]) * strides[dim]
            dim += 1
            if any_array:
                advanced.append(position)
        elif kind == _NEW:
            out_shape.append(1)
            out_strides.append(0)
        elif kind == _ELLIPSIS:
            for _ in range(ndim - used):
                out_shape.append(shape[dim])
                out_strides.append(strides[dim])
                dim += 1
        else:
            advanced.append(position)
            arrays.append(_array_index(item, shape, strides, dim, out_shape, out_strides))
            dim += item.ndim if item.dtype.kind == "b" else 1
    out_shape.extend(shape[dim:])
    out_strides.extend(strides[dim:])
    adjacent = advanced == list(range(advanced[0], advanced[0] + len(advanced))) if advanced else True
    return IndexPlan(tuple(out_shape), tuple(out_strides), offset, tuple(arrays), adjacent)


def _array_index(item, shape, strides, dim: int, out_shape: list, out_strides: list) -> ArrayIndex:
    """The ``ArrayIndex`` of ``item`` at dimension ``dim`` of the tensor, whose
    dimensions it adds to the view (``out_shape``, ``out_strides``)."""
    first = len(out_shape)
    if item.dtype.kind == "b":
        if item.ndim == 0:  # True or False: a new dimension, of 1 or 0 elements
            out_shape.append(1)
            out_strides.append(0)
            return ArrayIndex(first, (1,), item, True)
        for k, size in enumerate(item.shape):
            if size not in (shape[dim + k], 0):  # a mask with a dimension of 0 selects nothing (the standard's rule)
                raise IndexError(
                    f"boolean index did not match the indexed tensor along dimension {dim + k}; "
                    f"its size is {shape[dim + k]} but the boolean index's is {size}"
                )
        sizes = tuple(shape[dim : dim + item.ndim])
        out_shape.extend(sizes)
        out_strides.extend(strides[dim : dim + item.ndim])
        return ArrayIndex(first, sizes, item, True)
    n = shape[dim]
    if isinstance(item, np.ndarray) and item.size:
        values = item.astype(np.int64) if item.dtype.kind == "u" else item
        outside = (values < -n) | (values >= n)
        if outside.any():
            raise IndexError(f"index {values[outside].flat[0]} is out of range for dimension {dim} of size {n}")
    out_shape.append(n)
    out_strides.append(strides[dim])
    return ArrayIndex(first, (n,), item, False)


def expanded_sizes(shape: tuple, sizes: tuple) -> tuple:
    """``expand``'s sizes (a tuple, or one list or tuple of them) for a tensor of ``shape``:
    -1 keeps one of its own sizes; a negative size, or -1 for a new leading dimension, is a sentence."""
    sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes
    lead = len(sizes) - len(shape)
    for i, s in enumerate(sizes):
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s < -1 or (s == -1 and i < lead):
            raise ValueError(
                f"expand{sizes}: sizes are numbers 0 or more, or -1 to keep one of the tensor's own "
                f"{shape} (not for a new leading dimension); got {s!r} at dimension {i}"
            )
    return tuple(int(s) if s != -1 else shape[i - lead] for i, s in enumerate(sizes))
