"""Indexing by arrays: the launches behind ``x[index]`` and ``x[index] = v``
with integer arrays and boolean masks, and behind the indexing functions
(``_indexing_functions``, which checks their arguments and adds gradients).

Every op is brought to the forms of ``kernels/indexing``: the tensor seen as
a 3-D ``(outer, n, inner)`` array around the indexed dimensions, a view where
the strides allow (negative ones too), otherwise a copy (which a write copies
back). Several index arrays become one flat position along their merged
dimensions (``combine``).

Index data is never read back to the host, except a boolean mask's count for
``x[mask]`` (its result's size): out-of-range indices in a tensor are clamped
by reads and skipped by writes (host indices were checked by
``_shape.parse_index``). Host indices inside a capture are written by
kernels, so that the graph keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _dtype as dt
from . import _ops
from ._complex import imag_part, real_part
from ._factories import tensor
from ._overlap import byte_span, may_alias, self_overlapping
from ._shape import IndexPlan, broadcast_shapes, numel, view_strides
from ._tensor import Tensor
from .kernels import indexing as ik
from .runtime.backend import CaptureError
from .runtime.backend import get as get_backend
from .runtime.capture import capture_state
from .runtime.launch import grid_1d, launch
from .runtime.streams import current_stream

__all__ = [
    "ArrayPlan", "gather", "getitem", "index_add_", "index_select", "masked_values", "nonzero_flat", "put_arrays",
    "resolve", "scatter_", "setitem", "take_arrays", "view_of",
]  # fmt: skip

_I64 = np.int64
_ATOMIC = {dt.int32, dt.uint32, dt.int64, dt.uint64, dt.float32, dt.float64}  # what the device adds atomically
_WIDE = {dt.float16: dt.float32, dt.bfloat16: dt.float32, dt.bool: dt.int32, dt.int8: dt.int32,
         dt.uint8: dt.int32, dt.int16: dt.int32, dt.uint16: dt.int32}  # fmt: skip


def _launch(kernel, threads: int, args) -> None:
    if threads:
        launch(kernel, *grid_1d(threads), args)


def _split(shape, at: int, count: int) -> tuple[int, int, int]:
    """The ``(outer, n, inner)`` sizes of ``shape`` around its dimensions ``[at, at + count)``."""
    return numel(shape[:at]), numel(shape[at : at + count]), numel(shape[at + count :])


def _view3(t: Tensor, at: int, count: int) -> Tensor | None:
    """``t`` seen as ``(outer, n, inner)`` around its dimensions ``[at, at + count)``,
    or None when the strides do not allow a view."""
    shape = _split(t.shape, at, count)
    strides = view_strides(t.shape, t._strides, shape)
    return None if strides is None else t._view(shape, strides)


def _read3(t: Tensor, at: int, count: int) -> Tensor:
    """``t`` as ``(outer, n, inner)`` to read: a view, or a copy."""
    view = _view3(t, at, count)
    return view if view is not None else _view3(t.clone(), at, count)


def _shares(t: Tensor, target: Tensor) -> bool:
    """Whether ``t`` and ``target`` may reach a common byte (the same view included)."""
    if not may_alias(t, target):
        return False
    (lo, hi), (target_lo, target_hi) = byte_span(t), byte_span(target)
    return lo < target_hi and target_lo < hi


def _read_apart(t: Tensor, target: Tensor) -> Tensor:
    """``t``, copied when the writes into ``target`` could change it while it is read."""
    return t.clone() if t.numel() and _shares(t, target) else t


def _refuse_overlapping(target: Tensor, what: str) -> None:
    if self_overlapping(target):
        raise RuntimeError(
            f"cannot {what} a tensor of shape {target.shape} and strides {target._strides}: more than one of its "
            "elements refers to the same memory location (an expand()ed view); clone() it first and write into "
            "the copy"
        )


class _Writable:
    """The target of a write as ``(outer, n, inner)``: a view of it, or a
    contiguous copy (also when the write needs a wider type for atomic adds)
    that ``done()`` copies back."""

    def __init__(self, target: Tensor, at: int, count: int, accumulate: bool) -> None:
        if accumulate and target.dtype not in _ATOMIC and target.dtype.kind != "c":
            wide = _WIDE.get(target.dtype)
            if wide is None:
                raise TypeError(f"accumulating writes into {target.dtype} tensors are not supported")
            self.target, self.copy = target, target.to(wide)
        else:
            view = _view3(target, at, count)
            self.target, self.copy = target, None if view is not None else target.clone()
        self.t3 = _view3(self.copy, at, count) if self.copy is not None else view

    @property
    def dtype(self) -> dt.DType:
        return self.t3.dtype

    def done(self) -> None:
        if self.copy is not None:
            self.target.copy_(self.copy)


def _add(kernel, target3: Tensor, index: Tensor, values3: Tensor, threads: int) -> None:
    """An accumulating write; complex tensors as their real and imaginary parts."""
    if target3.dtype.kind == "c":
        _launch(kernel, threads, [real_part(target3), index, real_part(values3)])
        _launch(kernel, threads, [imag_part(target3), index, imag_part(values3)])
    else:
        _launch(kernel, threads, [target3, index, values3])


# -- host indices and boolean masks ----------------------------------------------------------


def device_index(host: np.ndarray) -> Tensor:
    """An int64 device copy of host indices; inside a capture, where copies from
    the host are refused, written by ``constants`` kernels the graph keeps."""
    host = np.require(host, dtype=np.int64, requirements="C")  # a 0-d index stays 0-d (ascontiguousarray: 1-d)
    if not capture_state.active and not current_stream().is_capturing():
        return tensor(host)
    out = Tensor._empty(host.shape, dt.int64)
    values, flat = host.reshape(-1).tolist(), out._flat()
    for start in range(0, len(values), ik.CONSTANTS):
        chunk = values[start : start + ik.CONSTANTS]
        chunk += [0] * (ik.CONSTANTS - len(chunk))
        launch(ik.constants, (1, 1, 1), (ik.CONSTANTS, 1, 1), [flat, _I64(start), *map(_I64, chunk)])
    return out


def _mask_state(flat: Tensor) -> tuple[Tensor, int]:
    """Zeros for a chained pass over the contiguous 1-D bool ``flat``
    (``kernels/lookback``): a word to count its True elements in, then the
    tiles' ticket and flags; and the number of tiles."""
    tiles = -(-flat.numel() // (_mask_lanes() * ik.MASK_ITEMS))
    state = Tensor._empty((2 + tiles,), dt.uint64)
    return state.zero_(), tiles


def _mask_words(flat: Tensor) -> Tensor:
    """The contiguous 1-D bool ``flat``'s memory as uint32 words (four flags
    each), its whole ones; none where it does not start on a word."""
    if flat._ptr % 4:
        return Tensor._empty((0,), dt.uint32)
    return Tensor._make(flat._storage, flat._ptr, (flat.numel() // 4,), (1,), dt.uint32)


def _mask_lanes() -> int:
    return min(ik.MASK_BLOCK, 1 << (get_backend().max_block.bit_length() - 1))


def _mask_launch(tiles: int) -> tuple[tuple, tuple]:
    """(grid, block) of the mask kernels over ``tiles`` tiles."""
    lanes = _mask_lanes()
    return (max(1, min(tiles, get_backend().max_threads_per_launch // lanes)), 1, 1), (lanes, 1, 1)


def _flat_mask(mask: Tensor) -> Tensor:
    flat = mask.reshape(-1)
    return flat if flat._contig else flat.clone()


def nonzero_flat(mask: Tensor) -> Tensor:
    """The positions of ``mask``'s True elements in the flattened mask (int64,
    in order). Reads their count back: refused inside a capture."""
    return _compacted(mask, None)


def masked_values(x: Tensor, plan: IndexPlan) -> Tensor | None:
    """``x[mask]`` for one mask tensor over every dimension of a contiguous view:
    the True elements' values compacted straight from ``x`` (no positions, no
    gather); None for any other index. Not recorded for autograd."""
    if len(plan.arrays) != 1:
        return None
    (a,) = plan.arrays
    view = x._view(plan.shape, plan.strides, plan.offset)
    if not a.mask or not isinstance(a.array, Tensor) or a.sizes != plan.shape or not view._contig:
        return None
    return _compacted(a.array, view.reshape(-1))


def _compacted(mask: Tensor, values: Tensor | None) -> Tensor:
    """The positions of ``mask``'s True elements, or their ``values`` (flat, of
    the mask's size): their count is read back, refused inside a capture."""
    s = current_stream()
    if s.is_capturing():
        raise CaptureError(
            f"x[mask] with a mask tensor makes a tensor whose size is the mask's count of True elements, read "
            f"back to the host, which is not allowed while stream {s.handle:#x} is capturing a graph; use a "
            "graph-safe form: tp.where(mask, x, 0) keeps x's shape, x[tp.nonzero(mask, size=k, fill_value=0)] "
            "takes k elements, and x[mask] = v writes in place"
        )
    flat = _flat_mask(mask)
    dtype = dt.int64 if values is None else values.dtype
    if not flat.numel():
        return Tensor._empty((0,), dtype)
    state, tiles = _mask_state(flat)
    total, status = state.narrow(0, 0, 1), state.narrow(0, 1, 1 + tiles)
    words = _mask_words(flat)
    launch(ik.count_true, *_mask_launch(tiles), [flat, words, total])
    out = Tensor._empty((int(total.item()),), dtype)
    if out.numel():
        given = Tensor._empty((0,), dt.int64) if values is None else values
        launch(ik.compact, *_mask_launch(tiles), [flat, words, status, given, out])
    return out


def _ranks(mask: Tensor) -> Tensor:
    """Per element of the flattened ``mask``, its place among the True elements, -1 where False."""
    flat = _flat_mask(mask)
    state, tiles = _mask_state(flat)
    out = Tensor._empty((flat.numel(),), dt.int64)
    launch(ik.ranks, *_mask_launch(tiles), [flat, _mask_words(flat), state.narrow(0, 1, 1 + tiles), out])
    return out


# -- x[arrays] and x[arrays] = v --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArrayPlan:
    """An ``IndexPlan``'s arrays on the device, and where they index: the view's
    dimensions permuted (``order``) so that the indexed ones form a block of
    ``count`` at ``at``, where the arrays' broadcast ``shape`` goes in the
    result. Each index holds flat positions along its array's dimensions, of
    ``sizes`` positions."""

    order: tuple
    at: int
    count: int
    indices: tuple
    sizes: tuple
    shape: tuple


def resolve(plan: IndexPlan) -> ArrayPlan:
    """The arrays of ``plan`` on the device: host data copied (masks as their
    True positions), mask tensors compacted (eagerly: a count is read)."""
    indices = []
    for a in plan.arrays:
        array = a.array
        if isinstance(array, np.ndarray):
            indices.append(device_index(np.flatnonzero(array) if a.mask else array))
        elif a.mask:
            indices.append(nonzero_flat(array))
        else:
            indices.append(array)
    try:
        shape = broadcast_shapes(*[i.shape for i in indices])
    except ValueError:
        shapes = " ".join(str(i.shape) for i in indices)
        message = f"shape mismatch: indexing arrays could not be broadcast together with shapes {shapes}"
        raise IndexError(message) from None
    order, at, count = _block(plan)
    return ArrayPlan(order, at, count, tuple(indices), tuple(numel(a.sizes) for a in plan.arrays), shape)


def _block(plan: IndexPlan) -> tuple[tuple, int, int]:
    """(order, at, count): the view's dimensions ordered so that the ``count``
    indexed ones form a block at ``at``: where they are when the arrays are
    adjacent in the index, else first (NumPy's rule)."""
    block = tuple(a.dim + k for a in plan.arrays for k in range(len(a.sizes)))
    ndim = len(plan.shape)
    if plan.adjacent:
        return tuple(range(ndim)), block[0], len(block)
    return block + tuple(d for d in range(ndim) if d not in block), 0, len(block)


def view_of(x: Tensor, plan: IndexPlan, order: tuple) -> Tensor:
    """The view of ``x`` that ``plan`` describes, its dimensions in ``order``."""
    return x._view([plan.shape[d] for d in order], [plan.strides[d] for d in order], plan.offset)


def _flat_index(ap: ArrayPlan, n: int, read: bool) -> Tensor:
    """One index into the merged indexed dimensions (of ``n`` positions) per
    element of the arrays' broadcast shape."""
    if len(ap.indices) == 1:
        (index,) = ap.indices
        return index.expand(ap.shape).reshape(-1)
    flat = Tensor._empty((numel(ap.shape),), dt.int64)
    scale = n
    for k, (index, size) in enumerate(zip(ap.indices, ap.sizes, strict=True)):
        scale //= size
        args = [flat, index.expand(ap.shape).reshape(-1), _I64(size), _I64(scale), _I64(n), k == 0, read]
        _launch(ik.combine, flat.numel(), args)
    return flat


def take_arrays(view: Tensor, ap: ArrayPlan) -> Tensor:
    """``view`` (permuted as ``ap.order`` says) indexed by ``ap``'s arrays: a new tensor."""
    outer, n, inner = _split(view.shape, ap.at, ap.count)
    m = numel(ap.shape)
    out = Tensor._empty((outer, m, inner), view.dtype)
    if out.numel():
        if n == 0:
            raise IndexError(f"cannot take {m} elements from dimensions of size {view.shape[ap.at : ap.at + ap.count]}")
        _launch(ik.take, out.numel(), [_read3(view, ap.at, ap.count), _flat_index(ap, n, True), out])
    return out.view(view.shape[: ap.at] + ap.shape + view.shape[ap.at + ap.count :])


def getitem(x: Tensor, plan: IndexPlan) -> tuple[Tensor, ArrayPlan]:
    """``x[index]`` for an index with arrays (parsed as ``plan``), and the
    device plan of its arrays (which its gradient reuses)."""
    ap = resolve(plan)
    return take_arrays(view_of(x, plan, ap.order), ap), ap


def _values(value, dtype: dt.DType, ndim: int) -> Tensor:
    """``value`` (a tensor, host data or a number) as a tensor of ``dtype`` of
    at most ``ndim`` dimensions (leading 1s dropped, as NumPy broadcasts)."""
    if isinstance(value, Tensor):
        v = value if value.dtype is dtype else value.to(dtype)
    elif isinstance(value, (list, tuple, np.ndarray)):
        v = tensor(np.asarray(value), dtype=dtype)
    else:
        v = _ops.fill(Tensor._empty((), dtype), value)
    while v.ndim > ndim and v.shape[0] == 1:
        v = v[0]
    return v


def put_arrays(view: Tensor, ap: ArrayPlan, values: Tensor, accumulate: bool) -> None:
    """``view[arrays] = values`` (or ``+=``, every repeated index adding), ``view``
    permuted as ``ap.order`` says and ``values`` of its dtype."""
    outer, n, inner = _split(view.shape, ap.at, ap.count)
    m = numel(ap.shape)
    result = view.shape[: ap.at] + ap.shape + view.shape[ap.at + ap.count :]
    values = values.expand(result)
    if not outer * m * inner or not n:
        return
    _refuse_overlapping(view, "write through indices into")
    values3 = _read_apart(values, view).reshape(outer, m, inner)
    index = _flat_index(ap, n, False)
    index = _read_apart(index, view) if len(ap.indices) == 1 else index
    out = _Writable(view, ap.at, ap.count, accumulate)
    if values3.dtype is not out.dtype:
        values3 = values3.to(out.dtype)
    if accumulate:
        _add(ik.put_add, out.t3, index, values3, values3.numel())
    else:
        last = _ops.fill(Tensor._empty((n,), dt.int64), -1)
        _launch(ik.claim, m, [index, _I64(n), last])
        _launch(ik.put, values3.numel(), [out.t3, index, values3, last])
    out.done()


def setitem(x: Tensor, plan: IndexPlan, value, accumulate: bool = False) -> None:
    """``x[index] = value`` (``+=`` with ``accumulate``) for an index with arrays.
    A mask tensor alone writes without reading its count (graph-safe)."""
    (first,) = plan.arrays[:1]
    if len(plan.arrays) == 1 and first.mask and not isinstance(first.array, np.ndarray) and not accumulate:
        _put_masked(x, plan, value)
        return
    ap = resolve(plan)
    view = view_of(x, plan, ap.order)
    put_arrays(view, ap, _values(value, x.dtype, view.ndim - ap.count + len(ap.shape)), accumulate)


def _put_masked(x: Tensor, plan: IndexPlan, value) -> None:
    """``x[mask] = value`` with a mask tensor: where the mask is True, one value
    broadcast (``where``), or as many values as True elements, in order (their
    ranks). Eagerly, as in NumPy, another number of values is an error (the
    count of True elements is read back: one wait for the device). Inside a
    capture no count can be read: too few values, the last repeats; too many,
    the rest are left."""
    (a,) = plan.arrays
    if not a.array.numel():  # an empty mask selects nothing
        return
    order, at, dims = _block(plan)
    view = view_of(x, plan, order)
    before, after = view.shape[:at], view.shape[at + dims :]
    v = _values(value, x.dtype, len(before) + 1 + len(after))
    v = v.reshape((1,) * (len(before) + 1 + len(after) - v.ndim) + v.shape)
    count = v.shape[len(before)]  # the values along the True elements
    mask = a.array.reshape(a.sizes)
    if count == 1:  # one value for every True element: a where
        v = v.reshape(v.shape[: len(before)] + (1,) * dims + v.shape[len(before) + 1 :])
        _ops.where_into(view, mask.reshape((1,) * len(before) + a.sizes + (1,) * len(after)), v)
        return
    _refuse_overlapping(view, "write through a mask into")
    _check_value_count(mask, count)
    outer, n, inner = _split(view.shape, at, dims)
    if not outer * n * inner or not count:
        return
    values3 = _read_apart(v.expand(before + (count,) + after), view).reshape(outer, count, inner)
    rank = _ranks(mask)
    out = _Writable(view, at, dims, False)
    _launch(ik.put_ranked, outer * n * inner, [out.t3, rank, values3])
    out.done()


def _check_value_count(mask: Tensor, count: int) -> None:
    """Refuse ``count`` values (other than one) for a mask with another number of True elements:
    eagerly by reading that number; inside a capture, only no values at all (which nothing could be taken from)."""
    if capture_state.active or current_stream().is_capturing():
        if not count:
            raise CaptureError(
                "x[mask] = <no values> inside a capture: the number of True elements cannot be read while "
                "capturing, and any of them would have no value to take; assign outside the capture, or give one value"
            )
        return
    selected = int(mask.sum().item())
    if selected != count:
        raise ValueError(
            f"x[mask] = values: cannot assign {count} values to the {selected} elements the mask selects; "
            f"give {selected} values (in the order of the True elements) or one value for all of them"
        )


# -- along one dimension: index_select, index_add, gather, scatter --------------------------------


def index_select(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """``x``'s slices at ``index`` (1-D) along ``dim``."""
    outer, n, inner = _split(x.shape, dim, 1)
    out = Tensor._empty((outer, index.numel(), inner), x.dtype)
    if out.numel():
        if n == 0:
            raise IndexError(f"cannot take {index.numel()} elements from dimension {dim} of size 0")
        _launch(ik.take, out.numel(), [_read3(x, dim, 1), index.reshape(-1), out])
    return out.view(x.shape[:dim] + (index.numel(),) + x.shape[dim + 1 :])


def index_add_(x: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """``x[..., index[j], ...] += source[..., j, ...]`` along ``dim`` (``source`` of
    ``x``'s dtype), every repeated index adding."""
    outer, n, inner = _split(x.shape, dim, 1)
    if not source.numel() or not n:
        return x
    _refuse_overlapping(x, "add through indices into")
    index, values3 = _read_apart(index.reshape(-1), x), _read3(_read_apart(source, x), dim, 1)
    out = _Writable(x, dim, 1, True)
    _add(ik.put_add, out.t3, index, values3.to(out.dtype), values3.numel())
    out.done()
    return x


def gather(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """``out[..., j, ...] = x[..., index[..., j, ...], ...]`` along ``dim``, of
    ``index``'s shape (``x`` read where it overlaps ``index``'s shape)."""
    out = Tensor._empty(_split(index.shape, dim, 1), x.dtype)
    if out.numel():
        if x.shape[dim] == 0:
            raise IndexError(f"cannot gather from dimension {dim} of size 0")
        read = x._view(index.shape[:dim] + (x.shape[dim],) + index.shape[dim + 1 :], x._strides)
        _launch(ik.take_along, out.numel(), [_read3(read, dim, 1), _read3(index, dim, 1), out])
    return out.view(index.shape)


def scatter_(x: Tensor, dim: int, index: Tensor, values: Tensor, accumulate: bool) -> Tensor:
    """``x[..., index[..., j, ...], ...] = values[..., j, ...]`` along ``dim``
    (``+=`` with ``accumulate``) over ``index``'s shape; ``values`` of ``x``'s
    dtype, at least as large as ``index``."""
    outer, m, inner = _split(index.shape, dim, 1)
    if not outer * m * inner or not x.shape[dim]:
        return x
    target = x._view(index.shape[:dim] + (x.shape[dim],) + index.shape[dim + 1 :], x._strides)
    _refuse_overlapping(target, "scatter into")
    values = values._view(index.shape, values._strides) if values.ndim else values.expand(index.shape)
    index3 = _read3(_read_apart(index, target), dim, 1)
    values3 = _read3(_read_apart(values, target), dim, 1)
    out = _Writable(target, dim, 1, accumulate)
    values3 = values3 if values3.dtype is out.dtype else values3.to(out.dtype)
    if accumulate:
        _add(ik.put_along_add, out.t3, index3, values3, values3.numel())
    else:
        _launch(ik.put_along, outer * inner, [out.t3, index3, values3])
    out.done()
    return x
