"""Sorting functions of the array API standard (``sort``, ``argsort``), with
PyTorch's forms: ``sort(x, dim)`` and ``x.sort()`` give ``(values, indices)``,
and ``topk``.

The axis is moved last and the tensor seen as (m, n) rows; ``kernels/sort``
sorts rows of up to a tile in shared memory, ``kernels/radix`` longer ones, a
byte of the keys a pass (``sort_indices``), and the values are gathered by index (``take_rows``), which carries the
gradient back to where each value came from. Every sort is stable and puts
NaNs last (first when descending: NaN is the largest value), as NumPy's and
PyTorch's do. Nothing reads device data on the host: each is captured into
graphs.
"""

from __future__ import annotations

import numpy as np

from . import _dtype as dt
from ._aliases import either
from ._methods import ValuesIndices
from ._scans import along_last, scan_rows
from ._tape import record
from ._tensor import Tensor, add_methods
from .kernels import radix as rk
from .kernels import sort as sk
from .runtime.backend import get as get_backend
from .runtime.caches import track_factories
from .runtime.launch import grid_1d, launch

__all__ = ["argsort", "sort", "topk"]

track_factories(sk, rk)  # tp.cuda.clear_caches() drops the kernels they built too


def _check_real(fn: str, x) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}() expects a tensor, got {type(x).__name__}")
    if x.dtype.is_complex:
        raise TypeError(f"{fn}() needs a real-valued tensor (complex numbers have no order), got {x.dtype}")


def sort_indices(rows: Tensor, descending: bool = False) -> Tensor:
    """The int64 positions that sort each of the (m, n) ``rows`` (any layout),
    stably, NaNs last (first when ``descending``): an (m, n) tensor."""
    m, n = rows.shape
    if not m or not n:
        return Tensor._empty((m, n), dt.int64)
    if n > sk.TILE:
        return _radix_indices(rows, descending)
    dev = get_backend()
    tile = 1 << max(1, (n - 1).bit_length())
    index = Tensor._empty((m, n), dt.int64)
    keys = Tensor._empty((m, n), dt.as_dtype(sk.key_type(rows.dtype.name)))
    threads = min(1 << (dev.max_block.bit_length() - 1), sk.TILE // 2)
    lanes = min(tile // 2, threads)
    per_block = threads // lanes  # short tiles share a block
    blocks = max(1, min(-(-m // per_block), dev.max_threads_per_launch // (lanes * per_block)))
    kernel = sk.tiles_kernel(rows.dtype.name, descending, tile)
    launch(kernel, (blocks, 1, 1), (lanes, per_block, 1), [rows.detach(), keys, index])
    return index


NARROW_POSITIONS = 1 << 31  # fewer items than this: the radix sort carries int32 positions


def _radix_indices(rows: Tensor, descending: bool, values: Tensor | None = None) -> Tensor:
    """``sort_indices`` of rows longer than a tile: ``kernels/radix``, every
    pass's digits counted at once, then a pass per byte of the keys and per
    byte of the row numbers, carrying the items' bits as long as a pass
    needs them; the last also writes the sorted items into ``values`` (a
    contiguous (m, n) tensor of the rows' type) if given."""
    m, n = rows.shape
    total, size = m * n, rows.dtype.itemsize
    positions = dt.int32 if total < NARROW_POSITIONS else dt.int64
    bits = rows.detach().contiguous()  # the items' bits, flat: no division to find an item
    bits = Tensor._make(bits._storage, bits._ptr, (total,), (1,), dt.as_dtype(rk.bits_type(size)))
    lanes = rk.BLOCK
    tiles = -(-total // (lanes * rk.items_for(size, positions.name)))
    grid = (max(1, min(tiles, get_backend().max_threads_per_launch // lanes)), 1, 1)
    carried, spare = Tensor._empty((total,), bits.dtype), Tensor._empty((total,), bits.dtype)
    nothing = Tensor._empty((0,), bits.dtype)
    ids, spare_ids = Tensor._empty((total,), positions), Tensor._empty((total,), positions)
    index = Tensor._empty((m, n), dt.int64)
    sorted_bits = Tensor._empty((0,), bits.dtype)
    if values is not None:
        sorted_bits = Tensor._make(values._storage, values._ptr, (total,), (1,), bits.dtype)
    passes = [(shift, False) for shift in range(0, 8 * size, 8)]
    passes += [(shift, True) for shift in range(0, (m - 1).bit_length(), 8)]
    source, n64 = rows.dtype.name, np.int64(n)
    hist = Tensor._empty((len(passes), rk.RADIX), dt.int64).zero_()
    histogram = rk.histogram_kernel(source, size, descending, len(passes) - size, positions.name)
    launch(histogram, grid, (lanes, 1, 1), [bits, hist.reshape(-1), n64])
    ends = scan_rows(hist, "sum", dt.int64)
    status = Tensor._empty((1 + tiles * rk.RADIX,), dt.uint64)
    for k, (shift, by_row) in enumerate(passes):
        first, last = k == 0, k == len(passes) - 1
        carry = not last and (not passes[k + 1][1] or values is not None)  # the items' bits, read next
        scatter = rk.scatter_kernel(source, size, descending, first, by_row, last, positions.name)
        out = spare if carry else nothing
        status.zero_()  # the ticket and every tile's counts, afresh for each pass
        args = [bits, carried, ids, status, hist[k], ends[k], out, spare_ids, index.reshape(-1), sorted_bits]
        launch(scatter, grid, (lanes, 1, 1), [*args, n64, np.int64(shift)])
        carried, spare = (out, carried) if carry else (nothing, spare)
        ids, spare_ids = spare_ids, ids
    return index


def take_rows(x: Tensor, index: Tensor, taken: Tensor | None = None) -> Tensor:
    """``out[r, j] = x[r, index[r, j]]`` for (m, n) ``x`` and (m, k) int64
    ``index`` of distinct positions a row (``taken``: that result, already
    made); the gradient goes back to them."""
    out = taken
    if out is None:
        out = Tensor._empty(index.shape, x.dtype)
        if out.numel():
            launch(sk.taken_rows, *grid_1d(out.numel()), [x.detach(), index, out])
    n = x.shape[1]
    return record("GatherBackward", out, (x,), lambda gs: (put_rows(gs[0], index, n),))


def put_rows(g: Tensor, index: Tensor, n: int) -> Tensor:
    """An (m, n) tensor of zeros with ``g[r, j]`` at ``[r, index[r, j]]``: the
    gradient of ``take_rows`` (itself differentiable)."""
    out = Tensor._empty((g.shape[0], n), g.dtype).zero_()
    if g.numel():
        launch(sk.placed_rows, *grid_1d(g.numel()), [g.detach(), index, out])
    return record("ScatterBackward", out, (g,), lambda gs: (take_rows(gs[0], index),))


def _sorted(fn: str, x: Tensor, axis: int, descending: bool, k: int | None = None) -> ValuesIndices:
    """Values and indices of ``x`` sorted along ``axis``; the first ``k`` of each row if given."""
    _check_real(fn, x)
    r = along_last(x, axis)
    m, n = r.rows.shape
    if k is None and n > sk.TILE and m * n:  # the radix sort's last pass writes the values too
        values = Tensor._empty((m, n), x.dtype)
        index = _radix_indices(r.rows, descending, values)
        return ValuesIndices(r.back(take_rows(r.rows, index, values)), r.back(index))
    index = sort_indices(r.rows, descending)
    if k is not None:
        index = index.narrow(1, 0, k).contiguous()
    return ValuesIndices(r.back(take_rows(r.rows, index)), r.back(index))


def sort(
    x: Tensor, /, dim: int | None = None, descending: bool = False, *, axis: int = -1, stable: bool = True
) -> Tensor | ValuesIndices:
    """A sorted copy of ``x`` along ``axis`` (the last by default): the standard's
    ``sort``. PyTorch's ``sort(x, dim)`` (a ``dim`` given) gives ``(values,
    indices)``, as ``x.sort()`` does.

    Always stable (``stable=False`` allows any order of equal values; this one
    is as good); NaNs last, first when ``descending``. Differentiable.

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.tensor([[3.0, 1.0, 2.0]])
    >>> tp.sort(x).tolist(), tp.sort(x, descending=True).tolist()
    ([[1.0, 2.0, 3.0]], [[3.0, 2.0, 1.0]])
    >>> tp.sort(x, 1).indices.tolist()
    [[1, 2, 0]]
    """
    found = _sorted("sort", x, either("sort", "axis", axis, "dim", dim, -1), bool(descending))
    return found if dim is not None else found.values


def argsort(
    x: Tensor, /, dim: int | None = None, descending: bool = False, *, axis: int = -1, stable: bool = True
) -> Tensor:
    """The int64 indices that sort ``x`` along ``axis`` (the last by default),
    stably: the standard's ``argsort``, and PyTorch's ``argsort(x, dim, descending)``.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.argsort(tp.tensor([3, 1, 2, 1])).tolist()
    [1, 3, 2, 0]
    """
    _check_real("argsort", x)
    r = along_last(x.detach(), either("argsort", "axis", axis, "dim", dim, -1))
    return r.back(sort_indices(r.rows, bool(descending)))


def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> ValuesIndices:  # noqa: A002
    """PyTorch's ``topk``: the ``k`` largest values along ``dim`` (the smallest
    if not ``largest``) and their indices, largest first (smallest first);
    equal values in the order they come, NaN as the largest value.
    Differentiable.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.topk(tp.tensor([1.0, 5.0, 3.0, 4.0]), 2)
    ValuesIndices(values=tensor([5., 4.]), indices=tensor([1, 3]))
    """
    _check_real("topk", x)
    n = x.shape[x._dim(dim)] if x.ndim else 1
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= n:
        raise ValueError(f"topk() expects k between 0 and {n} (the size of dimension {dim}), got {k!r}")
    return _sorted("topk", x, dim, bool(largest), int(k))


# -- Tensor methods: PyTorch's ----------------------------------------------------------------------


def _method_sort(self: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> ValuesIndices:
    """PyTorch's ``x.sort(dim=-1, descending=False, stable=False)``: ``(values, indices)`` (always stable)."""
    return _sorted("sort", self, dim, bool(descending))


def _method_argsort(self: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """PyTorch's ``x.argsort(dim=-1, descending=False, stable=False)`` (always stable)."""
    return argsort(self, dim, descending)


add_methods({"sort": _method_sort, "argsort": _method_argsort, "topk": topk})
