"""Which tensors share memory: the geometry of views, in bytes.

The one place that reads a tensor's pointer, strides and storage to decide
whether writes through one view are seen through another. The ops (in-place
writes, ``copy_``), staging (``stage_and_launch``) and ``tp.compile`` (aliased
arguments) all ask here.
"""

from __future__ import annotations

from ._shape import numel
from ._tensor import Tensor

__all__ = [
    "byte_span",
    "foreign",
    "may_alias",
    "overlap_groups",
    "overlaps",
    "same_view",
    "self_overlapping",
    "storage_key",
]


def storage_key(t: Tensor) -> int:
    """A key equal for ``t`` and every view of the same memory block."""
    return id(t._storage)


def byte_span(t: Tensor) -> tuple[int, int]:
    """The bytes ``t`` reaches: from its lowest element's first byte to one past its highest's last."""
    isz = t.dtype.itemsize
    if t._contig:  # the common case, without the loop (in-place ops on imports ask at every call)
        n = numel(t.shape)
        if n:
            return t._ptr, t._ptr + n * isz
    lo = hi = t._ptr
    for size, stride in zip(t.shape, t._strides, strict=True):
        step = (size - 1) * stride * isz
        if step < 0:
            lo += step
        else:
            hi += step
    return lo, hi + isz


def same_view(a: Tensor, b: Tensor) -> bool:
    """True when ``a`` and ``b`` are the same elements of the same memory, in the same dtype."""
    return a._ptr == b._ptr and a.shape == b.shape and a._strides == b._strides and a.dtype is b.dtype


def foreign(t: Tensor) -> bool:
    """True for memory tensorplay's allocator did not give (a DLPack or CUDA
    Array Interface import): it may be any other tensor's memory too."""
    return t._storage.block is None


def may_alias(a: Tensor, b: Tensor) -> bool:
    """False when ``a`` and ``b`` cannot share a byte: they lie in different
    allocator blocks. Views of one storage may, and so may foreign memory (a
    DLPack or CUDA Array Interface import), which can be another import of the
    same buffer or one of our own blocks exported and imported back."""
    sa, sb = a._storage, b._storage
    return sa is sb or sa.block is None or sb.block is None


def overlaps(x: Tensor, out: Tensor) -> bool:
    """True when ``out`` and ``x`` are different views whose bytes overlap, decided
    on addresses (not on storage objects: two imports of one buffer overlap). The
    same view is not counted: elementwise, each element is read before it is written."""
    if not may_alias(x, out) or (
        x._ptr == out._ptr
        and x._strides == out._strides
        and x.shape == out.shape
        and x.dtype.itemsize == out.dtype.itemsize
    ):
        return False
    (x_lo, x_hi), (out_lo, out_hi) = byte_span(x), byte_span(out)
    return x_lo < out_hi and out_lo < x_hi


def self_overlapping(t: Tensor) -> bool:
    """True when two elements of ``t`` may share memory (a stride 0, as
    ``expand()`` makes, or strides that step inside another dimension's extent)."""
    if t._contig:
        return False
    extent = 1  # in elements: what the dimensions of smaller strides span
    for stride, size in sorted((abs(st), d) for d, st in zip(t.shape, t._strides, strict=True) if d > 1):
        if stride < extent:
            return True
        extent += (size - 1) * stride
    return False


def overlap_groups(tensors) -> list[tuple[int, list[int]]]:
    """The tensors that share bytes, directly or through others: per group of
    more than one, ``(its lowest byte, the members' indices)``, by address.
    Empty tensors share nothing; one tensor given twice is a group."""
    if len(tensors) < 2:
        return []
    if len({id(t._storage) for t in tensors}) == len(tensors) and all(t._storage.block is not None for t in tensors):
        return []  # distinct allocator blocks never overlap (foreign memory may: it is checked)
    groups: list[list] = []  # [lowest byte, end, members]
    for lo, hi, i in sorted((*byte_span(t), i) for i, t in enumerate(tensors) if t.numel()):
        if groups and lo < groups[-1][1]:
            groups[-1][1] = max(groups[-1][1], hi)
            groups[-1][2].append(i)
        else:
            groups.append([lo, hi, [i]])
    return [(lo, members) for lo, _, members in groups if len(members) > 1]
