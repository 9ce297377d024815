"""Shape arithmetic: broadcasting, view strides, basic indexing, coalescing."""

from __future__ import annotations

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
    "basic_index",
    "broadcast_shapes",
    "broadcast_strides",
    "coalesce",
    "infer_shape",
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


def basic_index(shape, strides, index):
    """Shape, strides and element offset of ``tensor[index]`` for basic indexing
    (integers, slices with positive steps, None and Ellipsis)."""
    if not isinstance(index, tuple):
        index = (index,)
    if any(type(i).__name__ == "Tensor" or isinstance(i, (list,)) for i in index):
        raise TypeError(
            "indexing with tensors or lists (advanced indexing) is not supported; "
            "use integers, slices, None and ... (basic indexing gives views)"
        )
    n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_real > len(shape):
        raise IndexError(f"too many indices for a tensor of {len(shape)} dimensions")
    expanded = []
    for i in index:
        if i is Ellipsis:
            expanded.extend([slice(None)] * (len(shape) - n_real))
        else:
            expanded.append(i)
    if not any(i is Ellipsis for i in index):
        expanded.extend([slice(None)] * (len(shape) - n_real))
    out_shape, out_strides, offset, dim = [], [], 0, 0
    for i in expanded:
        if i is None:
            out_shape.append(1)
            out_strides.append(0)
        elif isinstance(i, slice):
            start, stop, step = i.indices(shape[dim])
            if step <= 0:
                raise ValueError(f"slices need a positive step, got {step}")
            length = max(0, -(-(stop - start) // step))
            out_shape.append(length)
            out_strides.append(strides[dim] * step)
            offset += start * strides[dim] if length else 0
            dim += 1
        elif hasattr(i, "__index__") and not isinstance(i, bool):
            k = i.__index__()
            if not -shape[dim] <= k < shape[dim]:
                raise IndexError(f"index {k} is out of range for dimension {dim} of size {shape[dim]}")
            offset += (k % shape[dim]) * strides[dim]
            dim += 1
        else:
            raise TypeError(f"expected an integer, slice, None or ..., got {type(i).__name__}")
    return tuple(out_shape), tuple(out_strides), offset
