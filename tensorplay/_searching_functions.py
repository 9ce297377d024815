"""Searching functions of the array API standard (``argmax``, ``argmin``,
``count_nonzero``, ``nonzero``, ``searchsorted``), each also taking PyTorch's
spellings (``dim``, ``keepdim``, ``right=``, ``out_int32=``), plus PyTorch's
``argwhere``.

``searchsorted`` is a binary search a value (``kernels/search``), ordered as
``sort`` orders (NaN last). ``nonzero``'s output size depends on the data: a
running count of the nonzero elements (``_scans.scan_rows``) gives each its
place, and a kernel writes their coordinates. Eagerly the count is read on the
host to size the result; inside a graph capture that is refused, and
``size=`` (with ``fill_value=``) gives a result of fixed size instead, cut or
padded, as in JAX, which is captured and runs in while bodies.
"""

from __future__ import annotations

import numpy as np

from . import _dtype as dt
from ._aliases import either
from ._factories import tensor
from ._indexing import nonzero_flat
from ._ops import fill, stack
from ._scans import along_last, scan_rows
from ._sorting_functions import take_rows
from ._tensor import Tensor, add_methods
from .kernels import search as sk
from .runtime.backend import CaptureError
from .runtime.caches import track_factories
from .runtime.launch import grid_1d, launch
from .runtime.streams import current_stream, is_current_stream_capturing

__all__ = ["argmax", "argmin", "argwhere", "count_nonzero", "nonzero", "searchsorted"]

track_factories(sk)  # tp.cuda.clear_caches() drops the kernels it built too


# -- argmax, argmin, count_nonzero --------------------------------------------------------------


def argmax(x: Tensor, /, dim: int | None = None, keepdim: bool = False, *, axis=None, keepdims: bool = False) -> Tensor:
    """The int64 index of the first maximum along ``axis`` (of the flattened
    tensor if None; PyTorch's ``dim``, ``keepdim`` too); NaN counts as the
    maximum, as in NumPy and PyTorch.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.argmax(tp.tensor([[1, 5, 5], [7, 0, 7]]), axis=1).tolist()
    [1, 0]
    """
    return x.argmax(either("argmax", "axis", axis, "dim", dim), keepdims or keepdim)


def argmin(x: Tensor, /, dim: int | None = None, keepdim: bool = False, *, axis=None, keepdims: bool = False) -> Tensor:
    """The int64 index of the first minimum along ``axis`` (of the flattened
    tensor if None; PyTorch's ``dim``, ``keepdim`` too); NaN counts as the minimum."""
    return x.argmin(either("argmin", "axis", axis, "dim", dim), keepdims or keepdim)


def count_nonzero(x: Tensor, /, dim=None, *, axis=None, keepdims: bool = False) -> Tensor:
    """The number (int64) of nonzero elements over ``axis`` (an int, a tuple, or
    all axes if None; PyTorch's ``dim`` too).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.count_nonzero(tp.tensor([[0, 1], [2, 3]]), axis=0).tolist()
    [1, 2]
    """
    return (x != 0).sum(either("count_nonzero", "axis", axis, "dim", dim), keepdims)


# -- searchsorted --------------------------------------------------------------------------


def _side(side, right: bool) -> bool:
    """Whether to search from the right: ``side`` (the standard's) or ``right`` (PyTorch's)."""
    if side is None:
        return bool(right)
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted() expects side='left' or 'right', got {side!r}")
    if right and side == "left":
        raise ValueError("searchsorted() got side='left' and right=True, which disagree; pass one of them")
    return side == "right"


def searchsorted(
    x1: Tensor, x2, /, *, side: str | None = None, sorter: Tensor | None = None, right: bool = False,
    out_int32: bool = False,
) -> Tensor:  # fmt: skip
    """Where the values ``x2`` would go in the sorted ``x1`` to keep it sorted:
    for each, the number of items of ``x1`` below it (``side="left"``), or not
    above it (``side="right"``; PyTorch's ``right=True``). int64 indices of
    ``x2``'s shape (int32 with ``out_int32``).

    ``x1`` is 1-D, sorted ascending (or put in order by the indices
    ``sorter``), NaNs last as ``sort`` leaves them; or, as in PyTorch, (...,
    n) with ``x2`` (..., k): a sequence per leading index. The two are
    compared in their promoted dtype; ``x2`` may be a number.

    Examples
    --------
    >>> import tensorplay as tp
    >>> seq = tp.tensor([1.0, 2.0, 2.0, 3.0])
    >>> tp.searchsorted(seq, tp.tensor([2.0, 5.0])).tolist(), tp.searchsorted(seq, 2.0, side="right").item()
    ([1, 4], 3)
    """
    from_right = _side(side, right)
    if not isinstance(x1, Tensor):
        raise TypeError(f"searchsorted() expects a tensor as the sorted sequence, got {type(x1).__name__}")
    if not isinstance(x2, Tensor):
        x2 = tensor(x2, dtype=dt.promote_scalar(x1.dtype, x2))
    for t in (x1, x2):
        if t.dtype.is_complex:
            raise TypeError(f"searchsorted() needs real-valued tensors, got {t.dtype}")
    if x1.ndim == 0:
        raise ValueError("searchsorted() needs a sorted sequence of at least one dimension, got a 0-d tensor")
    common = dt.promote(x1.dtype, x2.dtype)
    seq = along_last(x1.detach().to(common), -1).rows
    if sorter is not None:
        if not isinstance(sorter, Tensor) or sorter.shape != x1.shape:
            got = sorter.shape if isinstance(sorter, Tensor) else type(sorter).__name__
            raise ValueError(f"searchsorted() expects a sorter of the sequence's shape {x1.shape}, got {got}")
        seq = take_rows(seq, along_last(sorter.detach().to(dt.int64), -1).rows)
    values = x2.detach().to(common)
    if x1.ndim == 1:
        rows = values.reshape(1, values.numel())
    elif values.shape[:-1] == x1.shape[:-1] and values.ndim == x1.ndim:
        rows = along_last(values, -1).rows
    else:
        lead = "".join(f"{d}, " for d in x1.shape[:-1])
        raise ValueError(
            f"searchsorted() expects values of shape ({lead}...) for sorted sequences of shape {x1.shape} "
            f"(a row of values for each sequence), or a 1-D sequence; got values of shape {x2.shape}"
        )
    out = Tensor._empty(rows.shape, dt.int64)
    if out.numel():
        kernel = sk.search_kernel(seq.dtype.name, rows.dtype.name)
        launch(kernel, *grid_1d(out.numel()), [seq, rows, out, from_right])
    out = out.reshape(x2.shape)
    return out.to(dt.int32) if out_int32 else out


# -- nonzero -------------------------------------------------------------------------------------


def refuse_unsized(fn: str, what: str) -> None:
    """Refuse, inside a capture, an op that would read ``what`` on the host to
    size its result; ``size=`` is the graph-safe form."""
    if is_current_stream_capturing():
        raise CaptureError(
            f"{fn}() needs to read {what} on the host to size its result, which is not allowed while stream "
            f"{current_stream().handle:#x} is capturing a graph; pass size= (and fill_value=) for a result of "
            "fixed size, cut or padded, which works inside graphs and while bodies"
        )


def _nonzero_index(x: Tensor, size: int | None, fill_value) -> Tensor:
    """The (ndim, size) int64 coordinates of ``x``'s nonzero elements, in C order."""
    if not isinstance(x, Tensor):
        raise TypeError(f"nonzero() expects a tensor, got {type(x).__name__}")
    if x.ndim == 0:
        raise ValueError("nonzero() needs a tensor of at least one dimension, got a 0-d tensor; reshape it first")
    n = x.numel()
    if size is None:
        refuse_unsized("nonzero", "the number of nonzero elements")
        return _coordinates(nonzero_flat(x.detach() != 0), x.shape)
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
        raise ValueError(f"nonzero() expects size= to be a non-negative int, got {size!r}")
    size = int(size)
    counts = scan_rows((x.detach() != 0).reshape(1, n), "sum", dt.int64).reshape(n)
    out = Tensor._empty((x.ndim, size), dt.int64)
    if out.numel():
        fill(out, 0 if fill_value is None else fill_value)
    if n and size:
        launch(sk.coordinates, *grid_1d(n), [counts, counts.reshape(x.shape), out])
    return out


def _coordinates(positions: Tensor, shape: tuple) -> Tensor:
    """The (ndim, k) coordinates in ``shape`` of flat C-order ``positions``."""
    if len(shape) == 1:
        return positions.reshape(1, -1)
    coords = []
    for size in reversed(shape):
        coords.append(positions % size)
        positions = positions // size
    return stack(coords[::-1])


def nonzero(x: Tensor, /, *, size: int | None = None, fill_value=None, as_tuple: bool = True):
    """The indices of the nonzero elements of ``x``, one int64 tensor a
    dimension, in C order: the standard's ``nonzero`` (``as_tuple=False``:
    PyTorch's (n, ndim) tensor, as ``x.nonzero()`` and ``argwhere`` give).

    The number found decides the result's size, so it is read on the host,
    which a graph capture does not allow: there, pass ``size=``, and the first
    ``size`` are kept, padded with ``fill_value`` (0 by default), as in JAX.

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.tensor([[0, 1], [2, 0]])
    >>> [t.tolist() for t in tp.nonzero(x)], tp.nonzero(x, size=3, fill_value=-1)[1].tolist()
    ([[0, 1], [1, 0]], [1, 0, -1])
    """
    if not as_tuple:
        return argwhere(x, size=size, fill_value=fill_value)
    index = _nonzero_index(x, size, fill_value)
    return tuple(index[d] for d in range(index.shape[0]))


def argwhere(x: Tensor, /, *, size: int | None = None, fill_value=None) -> Tensor:
    """PyTorch's ``argwhere``: the (n, ndim) int64 indices of the nonzero elements (``nonzero``'s ``size=`` too);
    of a 0-d tensor, (1, 0) if it is nonzero, else (0, 0), as NumPy's and PyTorch's."""
    if isinstance(x, Tensor) and x.ndim == 0:  # one element, no coordinates
        return _nonzero_index(x.reshape(1), size, fill_value)[:0].T.contiguous()
    return _nonzero_index(x, size, fill_value).T.contiguous()


def _method_nonzero(self: Tensor, *, as_tuple: bool = False, size: int | None = None, fill_value=None):
    """PyTorch's ``x.nonzero(as_tuple=False)``: an (n, ndim) int64 tensor (a tuple with ``as_tuple``)."""
    return nonzero(self, size=size, fill_value=fill_value, as_tuple=as_tuple)


add_methods({"nonzero": _method_nonzero, "argwhere": argwhere, "count_nonzero": count_nonzero})
