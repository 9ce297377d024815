"""Indexing functions: the array API's (``take``, ``take_along_axis``) and
PyTorch's (``gather``, ``scatter``, ``scatter_add``, ``index_select``,
``index_add``, ``index_put``, ``masked_fill``), with their Tensor methods and
in-place forms; and the array forms of ``x[index]`` and ``x[index] = v``,
which ``Tensor.__getitem__`` and ``__setitem__`` hand here. The launches are
in ``_indexing``.

Gradients: the gradient of a read through indices (``x[arrays]``, ``take``,
``take_along_axis``, ``gather``, ``index_select``) is an adding write of the
output's gradient into zeros, and that of an adding write (``scatter_add``,
``index_add``, ``index_put(accumulate=True)``) a read; each backward is built
of these same differentiable functions, so gradients of gradients work.

Out-of-range indices. Host indices (Python lists, NumPy arrays) are checked
and raise IndexError, as NumPy. Indices in a tensor are never read back to the
host (no op waits for the device, and every one is captured in graphs): reads
clamp them into range and writes skip them, as JAX does, so that no kernel
reads or writes outside its tensors (the gradient of such a read, an adding
write, is skipped too). Negative indices count from the end.

Examples
--------
>>> import tensorplay as tp
>>> x = tp.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
>>> tp.take(x, tp.tensor([2, 0]), axis=1).tolist()
[[3.0, 1.0], [6.0, 4.0]]
>>> x.gather(1, tp.tensor([[0, 0], [2, 1]])).tolist()
[[1.0, 1.0], [6.0, 5.0]]
>>> tp.zeros(3).index_put_((tp.tensor([0, 2, 0]),), tp.tensor([1.0, 2.0, 3.0]), accumulate=True).tolist()
[4.0, 0.0, 2.0]
"""

from __future__ import annotations

import numpy as np

from . import _differentiable as AG
from . import _dtype as dt
from . import _indexing as ix
from . import _ops
from ._aliases import either
from ._grad_mode import is_grad_enabled, no_grad
from ._shape import broadcast_shapes, parse_index
from ._tape import needs_grad, record, refuse_in_place, sum_to
from ._tensor import Tensor, add_methods

__all__ = [
    "gather", "index_add", "index_put", "index_select", "masked_fill", "scatter", "scatter_add", "take",
    "take_along_axis",
]  # fmt: skip


def _zeros(shape, dtype: dt.DType) -> Tensor:
    return Tensor._empty(tuple(shape), dtype).zero_()


def _index(fn: str, index, size: int | None = None, dim: int = 0) -> Tensor:
    """``index`` as an integer tensor; host data (checked against ``size`` when given) copied."""
    if isinstance(index, Tensor):
        if index.dtype.kind != "i":
            raise TypeError(f"{fn}() expects an integer index tensor, got {index.dtype.name}")
        return index.detach()
    host = np.asarray(index)
    if host.dtype.kind not in "iu" and host.size:
        raise TypeError(f"{fn}() expects integer indices, got {host.dtype}")
    host = host.astype(np.int64)
    if size is not None and host.size and ((host < -size) | (host >= size)).any():
        bad = host[(host < -size) | (host >= size)].flat[0]
        raise IndexError(f"index {bad} is out of range for dimension {dim} of size {size}")
    return ix.device_index(host)


def _same_rank(fn: str, index: Tensor, x: Tensor, dim: int) -> None:
    if index.ndim != x.ndim:
        raise ValueError(f"{fn}() expects an index of {x.ndim} dimensions (as the input), got shape {index.shape}")
    if any(index.shape[d] > x.shape[d] for d in range(x.ndim) if d != dim):
        raise ValueError(
            f"{fn}() expects an index no larger than the input outside dimension {dim}, "
            f"got shape {index.shape} for an input of shape {x.shape}"
        )


def _embed(g: Tensor, shape) -> Tensor:
    """``g`` in the leading corner of zeros of ``shape`` (differentiable): the
    gradient of a source of which a function used the leading block."""
    if g.shape == tuple(shape):
        return g
    corner = tuple(slice(0, n) for n in g.shape)
    with no_grad():
        out = _zeros(shape, g.dtype)
        out[corner] = g.detach()
    return record("EmbedBackward", out, (g,), lambda gs: (gs[0][corner],))


# -- reads: take, take_along_axis, gather, index_select ---------------------------------------


def index_select(input: Tensor, dim: int, index) -> Tensor:  # noqa: A002 (PyTorch's names)
    """The slices of ``input`` at ``index`` (1-D) along ``dim``, as PyTorch.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.index_select(tp.tensor([[1, 2], [3, 4]]), 0, tp.tensor([1, 1, 0])).tolist()
    [[3, 4], [3, 4], [1, 2]]
    """
    dim = input._dim(dim)
    index = _index("index_select", index, input.shape[dim] if input.ndim else 1, dim)
    if index.ndim > 1:
        raise ValueError(f"index_select() expects a 1-D index, got shape {index.shape}")
    if input.ndim == 0:
        return index_select(input.reshape(1), 0, index).reshape(index.shape)
    with no_grad():
        out = ix.index_select(input.detach(), dim, index)

    def grads(gs):
        return (index_add(_zeros(input.shape, gs[0].dtype), dim, index, gs[0]),)

    return record("IndexSelectBackward", out, (input,), grads)


def take(x: Tensor, indices, /, *, axis: int | None = None) -> Tensor:
    """The elements of ``x`` at ``indices`` along ``axis`` (of the flattened
    ``x`` when None), as NumPy: the result's dimensions are ``x``'s with
    ``axis`` replaced by ``indices``' (``indices``' alone when None). Also
    ``x.take(indices)`` (PyTorch's, flat).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.take(tp.tensor([[1, 2], [3, 4]]), tp.tensor([3, -4])).tolist()
    [4, 1]
    """
    if axis is None:
        index = _index("take", indices, x.numel())
        return index_select(x.reshape(-1), 0, index.reshape(-1)).reshape(index.shape)
    axis = x._dim(axis)
    index = _index("take", indices, x.shape[axis] if x.ndim else 1, axis)
    shape = x.shape[:axis] + index.shape + x.shape[axis + 1 :]
    return index_select(x, axis, index.reshape(-1)).reshape(shape)


def gather(input: Tensor, dim: int, index) -> Tensor:  # noqa: A002 (PyTorch's names)
    """``out[i][j][k] = input[index[i][j][k]][j][k]`` for ``dim=0`` (and so on),
    as PyTorch: ``index`` has ``input``'s dimensions, no larger outside ``dim``;
    the result has ``index``'s shape.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.gather(tp.tensor([[1, 2], [3, 4]]), 1, tp.tensor([[0, 0], [1, 0]])).tolist()
    [[1, 1], [4, 3]]
    """
    dim = input._dim(dim)
    index = _index("gather", index, input.shape[dim] if input.ndim else 1, dim)
    _same_rank("gather", index, input, dim)
    if input.ndim == 0:
        return gather(input.reshape(1), 0, index.reshape(1)).reshape(())
    with no_grad():
        out = ix.gather(input.detach(), dim, index)

    def grads(gs):
        return (scatter_add(_zeros(input.shape, gs[0].dtype), dim, index, gs[0]),)

    return record("GatherBackward", out, (input,), grads)


def take_along_axis(x: Tensor, indices, /, axis: int = -1, *, dim: int | None = None) -> Tensor:
    """The elements of ``x`` at ``indices`` along ``axis`` (PyTorch's ``dim=``),
    as NumPy: ``indices`` has ``x``'s dimensions; the others broadcast.

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    >>> tp.take_along_axis(x, tp.tensor([[1, 2, 0], [0, 2, 1]]), axis=1).tolist()
    [[1.0, 2.0, 3.0], [0.0, 4.0, 5.0]]
    """
    axis = x._dim(either("take_along_axis", "axis", axis, "dim", dim, -1))
    index = _index("take_along_axis", indices, x.shape[axis] if x.ndim else 1, axis)
    if index.ndim != x.ndim:
        raise ValueError(f"take_along_axis() expects indices of {x.ndim} dimensions (as x), got shape {index.shape}")
    if x.ndim == 0:  # dimension 0 (or -1) of a 0-d tensor, as PyTorch takes it: its one element
        return gather(x, axis, index)

    def along(shape, n):  # ``shape`` with ``n`` at ``axis``
        return shape[:axis] + (n,) + shape[axis + 1 :]

    around = broadcast_shapes(along(x.shape, 1), along(index.shape, 1))  # the other dimensions broadcast
    x_shape, index_shape = along(around, x.shape[axis]), along(around, index.shape[axis])
    return gather(x if x.shape == x_shape else x.expand(x_shape), axis, index.expand(index_shape))


# -- writes: scatter, scatter_add, index_add, index_put ---------------------------------------


def _source(fn: str, src, index: Tensor, dtype: dt.DType) -> Tensor:
    """``src`` (a tensor at least as large as ``index``, or a number) as values of ``dtype``."""
    if not isinstance(src, Tensor):
        return _ops.fill(Tensor._empty((), dtype), src)
    if src.ndim != index.ndim or any(i > s for i, s in zip(index.shape, src.shape, strict=True)):
        raise ValueError(
            f"{fn}() expects a source no smaller than the index, "
            f"got shape {src.shape} for an index of shape {index.shape}"
        )
    src = src.detach()
    return src if src.dtype is dtype else src.to(dtype)


def _scatter(fn: str, input: Tensor, dim: int, index, src, accumulate: bool, in_place: bool) -> Tensor:  # noqa: A002
    dim = input._dim(dim)
    index = _index(fn, index, input.shape[dim] if input.ndim else 1, dim)
    _same_rank(fn, index, input, dim)
    if in_place:
        refuse_in_place(f"{fn}()", input, src)
    with no_grad():
        values = _source(fn, src, index, input.dtype)
        out = input if in_place else input.detach().clone()
        if input.ndim == 0:
            ix.scatter_(out.reshape(1), 0, index.reshape(1), values.reshape(1), accumulate)
        else:
            ix.scatter_(out, dim, index, values, accumulate)
    if in_place:
        return out

    def grads(gs):
        (g,) = gs
        g_src = _embed(gather(g, dim, index), src.shape) if isinstance(src, Tensor) else None
        return (g if accumulate else scatter(g, dim, index, 0.0)), g_src

    return record("ScatterAddBackward" if accumulate else "ScatterBackward", out, (input, src), grads)


def scatter(input: Tensor, dim: int, index, src) -> Tensor:  # noqa: A002 (PyTorch's names)
    """A copy of ``input`` with ``input[index[i][j][k]][j][k] = src[i][j][k]`` for
    ``dim=0`` (and so on), as PyTorch; ``src`` a tensor no smaller than
    ``index`` or a number. Of repeated indices the last write wins.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.scatter(tp.zeros(2, 3), 1, tp.tensor([[2], [0]]), 1.0).tolist()
    [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    return _scatter("scatter", input, dim, index, src, False, False)


def scatter_add(input: Tensor, dim: int, index, src) -> Tensor:  # noqa: A002 (PyTorch's names)
    """A copy of ``input`` with ``input[index[i][j][k]][j][k] += src[i][j][k]`` for
    ``dim=0`` (and so on), every repeated index adding (atomics), as PyTorch."""
    return _scatter("scatter_add", input, dim, index, src, True, False)


def _scatter_in_place(self: Tensor, dim: int, index, src) -> Tensor:
    """``scatter`` in place; returns this tensor."""
    return _scatter("scatter_", self, dim, index, src, False, True)


def _scatter_add_in_place(self: Tensor, dim: int, index, src) -> Tensor:
    """``scatter_add`` in place; returns this tensor."""
    return _scatter("scatter_add_", self, dim, index, src, True, True)


def _index_add_source(fn: str, input: Tensor, dim: int, index: Tensor, source: Tensor) -> None:  # noqa: A002
    shape = input.shape[:dim] + (index.numel(),) + input.shape[dim + 1 :]
    if index.ndim > 1:
        raise ValueError(f"{fn}() expects a 1-D index, got shape {index.shape}")
    if not isinstance(source, Tensor) or source.shape != shape:
        got = source.shape if isinstance(source, Tensor) else type(source).__name__
        raise ValueError(f"{fn}() expects a source of shape {shape}, got {got}")


def index_add(input: Tensor, dim: int, index, source: Tensor, *, alpha=1) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``alpha * source`` added at ``index`` along
    ``dim``, every repeated index adding, as PyTorch.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.index_add(tp.zeros(3), 0, tp.tensor([0, 0, 2]), tp.tensor([1.0, 2.0, 3.0])).tolist()
    [3.0, 0.0, 3.0]
    """
    dim = input._dim(dim)
    if input.ndim == 0:  # dimension 0 (or -1) of a 0-d tensor, as PyTorch takes it: its one element
        return index_add(input.reshape(1), 0, index, source, alpha=alpha).reshape(())
    index = _index("index_add", index, input.shape[dim], dim)
    _index_add_source("index_add", input, dim, index, source)
    with no_grad():
        values = source.detach() if alpha == 1 else source.detach() * alpha
        out = ix.index_add_(input.detach().clone(), dim, index, values.to(input.dtype))

    def grads(gs):
        g_source = index_select(gs[0], dim, index)
        return gs[0], (g_source if alpha == 1 else g_source * alpha)

    return record("IndexAddBackward", out, (input, source), grads)


def _index_add_in_place(self: Tensor, dim: int, index, source: Tensor, *, alpha=1) -> Tensor:
    """``index_add`` in place; returns this tensor."""
    refuse_in_place("index_add_()", self, source)
    dim = self._dim(dim)
    if self.ndim == 0:  # its one element, through a view
        _index_add_in_place(self.reshape(1), 0, index, source, alpha=alpha)
        return self
    index = _index("index_add_", index, self.shape[dim], dim)
    _index_add_source("index_add_", self, dim, index, source)
    values = source if alpha == 1 else source * alpha
    return ix.index_add_(self, dim, index, values.to(self.dtype))


def _put(x: Tensor, index, values, accumulate: bool) -> None:
    """``x[index] = values`` (``+=`` with ``accumulate``) into ``x`` (no recording)."""
    plan = parse_index(x.shape, x._strides, index)
    if plan.arrays:
        ix.setitem(x, plan, values, accumulate)
    elif accumulate:
        x[index].add_(values)
    else:
        x[index] = values


def index_put(input: Tensor, indices, values, accumulate: bool = False) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``input[indices] = values`` (``indices`` a tuple
    of index tensors, as PyTorch); with ``accumulate`` every repeated index
    adds (atomics), otherwise the last write wins."""
    indices = tuple(indices)
    with no_grad():
        out = input.detach().clone()
        _put(out, indices, values.detach() if isinstance(values, Tensor) else values, accumulate)

    def grads(gs):
        (g,) = gs
        g_values = sum_to(g[indices], values.shape) if isinstance(values, Tensor) else None
        return (g if accumulate else index_put(g, indices, 0.0)), g_values

    return record("IndexPutBackward", out, (input, values), grads)


def _index_put_in_place(self: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    """``index_put`` in place; returns this tensor."""
    refuse_in_place("index_put_()", self, values)
    _put(self, tuple(indices), values, accumulate)
    return self


# -- masks -------------------------------------------------------------------------------------


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:  # noqa: A002 (PyTorch's names)
    """A copy of ``input`` with ``value`` (a number or a 0-d tensor) where the
    bool ``mask`` (broadcast to ``input``'s shape) is True, as PyTorch; a where,
    so captured like any op.

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.tensor([1.0, -2.0, 3.0])
    >>> tp.masked_fill(x, x < 0, 0.0).tolist()
    [1.0, 0.0, 3.0]
    """
    if not isinstance(mask, Tensor) or mask.dtype is not dt.bool:
        got = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise TypeError(f"masked_fill() expects a bool mask, got {got}")
    if broadcast_shapes(input.shape, mask.shape) != input.shape:
        raise ValueError(f"masked_fill() expects a mask that broadcasts to {input.shape}, got shape {mask.shape}")
    if isinstance(value, Tensor) and value.ndim:
        raise ValueError(f"masked_fill() expects a number or a 0-d tensor as the value, got shape {value.shape}")
    if AG.tracked(input) or AG.tracked(value):
        out = AG.where(mask, value, input)
    else:
        out = _ops.where(mask, value, input)
    return out if out.dtype is input.dtype else out.to(input.dtype)


def _masked_fill_in_place(self: Tensor, mask: Tensor, value) -> Tensor:
    """``masked_fill`` in place; returns this tensor."""
    refuse_in_place("masked_fill_()", self, value)
    return self.copy_(masked_fill(self, mask, value))


# -- x[arrays] and x[arrays] = v ------------------------------------------------------------------


def _read(x: Tensor, index, ap: ix.ArrayPlan) -> Tensor:
    """``x[index]`` through the device arrays ``ap`` already holds (differentiable)."""
    plan = parse_index(x.shape, x._strides, index)
    out = ix.take_arrays(ix.view_of(x, plan, ap.order), ap)
    return record("IndexBackward", out, (x,), lambda gs: (_added(gs[0], x.shape, index, ap),))


def _added(g: Tensor, shape, index, ap: ix.ArrayPlan) -> Tensor:
    """Zeros of ``shape`` with ``g`` added at ``index`` (differentiable): the
    gradient of ``x[index]``, repeated indices adding."""
    out = _zeros(shape, g.dtype)
    plan = parse_index(out.shape, out._strides, index)
    ix.put_arrays(ix.view_of(out, plan, ap.order), ap, g.detach(), True)
    return record("IndexPutBackward", out, (g,), lambda gs: (_read(gs[0], index, ap),))


def _getitem_arrays(self: Tensor, index, plan) -> Tensor:
    """``self[index]`` for an index with arrays (``Tensor.__getitem__``)."""
    if not (is_grad_enabled() and needs_grad(self)):
        masked = ix.masked_values(self, plan)  # x[mask] of a whole mask: the values straight out
        if masked is not None:
            return masked
    out, ap = ix.getitem(self, plan)
    return record("IndexBackward", out, (self,), lambda gs: (_added(gs[0], self.shape, index, ap),))


def _setitem_arrays(self: Tensor, plan, value) -> None:
    """``self[index] = value`` for an index with arrays (``Tensor.__setitem__``)."""
    ix.setitem(self, plan, value)


add_methods({
    "_getitem_arrays": _getitem_arrays, "_setitem_arrays": _setitem_arrays,
    "take": take, "gather": gather, "index_select": index_select, "scatter": scatter, "scatter_": _scatter_in_place,
    "scatter_add": scatter_add, "scatter_add_": _scatter_add_in_place, "index_add": index_add,
    "index_add_": _index_add_in_place, "index_put": index_put, "index_put_": _index_put_in_place,
    "masked_fill": masked_fill, "masked_fill_": _masked_fill_in_place,
})  # fmt: skip
