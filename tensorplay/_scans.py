"""Running sums and products: the array API standard's ``cumulative_sum`` and
``cumulative_prod`` (statistical functions), which are PyTorch's ``cumsum``
and ``cumprod`` (``dim`` positional, ``axis=`` too).

The axis is moved last and the tensor seen as (m, n) rows (a view when the
layout allows, else a copy), which ``kernels/scan`` scans tile by tile in one
pass, each tile carrying the running total of the tiles before it
(``scan_rows``). Nothing reads device data on the host, so a scan is captured
into graphs. The gradient of a running sum
is the reversed running sum of its gradient; a running product's is composed
of running sums and products, right where elements are zero.

``along_last`` and ``scan_rows`` are the tools the sorting, searching and set
functions build on.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import _differentiable as AG
from . import _dtype as dt
from ._aliases import either
from ._grad_mode import no_grad
from ._ops import fill
from ._shape import numel
from ._tape import record
from ._tensor import Tensor, add_methods
from .kernels import lookback
from .kernels import scan as sk
from .runtime.backend import get as get_backend
from .runtime.caches import track_factories
from .runtime.launch import launch

__all__ = ["cumprod", "cumsum", "cumulative_prod", "cumulative_sum"]

track_factories(sk)  # tp.cuda.clear_caches() drops the kernels it built too


# -- one axis as rows ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rows:
    """A tensor with one axis moved last, seen as (m, n) rows, and how to put a
    result of (m, k) rows back in the tensor's order."""

    rows: Tensor
    moved: tuple  # the tensor's shape with the axis last ((), for a 0-d tensor)
    inverse: tuple | None  # the permutation that puts the axis back (None: it was last)

    def back(self, out: Tensor) -> Tensor:
        """``out`` ((m, k) rows) in the tensor's order, its axis of size k."""
        if not self.moved:  # a 0-d tensor: one item, or two with an initial value
            return out.reshape(() if out.shape[1] == 1 else (out.shape[1],))
        out = out.reshape(self.moved[:-1] + (out.shape[1],))
        return out if self.inverse is None else out.permute(self.inverse)


def along_last(x: Tensor, axis: int) -> Rows:
    """``x`` with ``axis`` moved last, as (m, n) rows: views, recorded for autograd
    (a copy when the layout does not allow a view)."""
    axis = x._dim(axis)
    if x.ndim == 0:
        return Rows(x.reshape(1, 1), (), None)
    order = [d for d in range(x.ndim) if d != axis] + [axis]
    last = axis == x.ndim - 1
    moved = x if last else x.permute(order)
    rows = moved.reshape(numel(moved.shape[:-1]), x.shape[axis])
    return Rows(rows, moved.shape, None if last else tuple(order.index(d) for d in range(x.ndim)))


# -- the scan ------------------------------------------------------------------------------


def accumulator(d: dt.DType) -> dt.DType:
    """The type a running sum or product with results of type ``d`` is computed in."""
    if d.is_complex:
        return d
    if d.kind == "f":
        return dt.float64 if d is dt.float64 else dt.float32  # float16 and bfloat16 in float32
    return dt.uint64 if d is dt.uint64 else dt.int64  # smaller integers wrap as they would in their own type


def scan_rows(rows: Tensor, op: str, acc: dt.DType, reverse: bool = False, out: Tensor | None = None) -> Tensor:
    """The inclusive running ``op`` ("sum" or "prod") along the (m, n) ``rows``,
    in ``acc``, into ``out`` (an (m, n) tensor of ``acc``, any layout) or a new
    tensor; from each row's end when ``reverse``. Not recorded for autograd."""
    m, n = rows.shape
    if out is None:
        out = Tensor._empty((m, n), acc)
    if not m or not n:
        return out
    source = "bfloat16" if rows.dtype is dt.bfloat16 else ""
    lanes, per_block, blocks = _launch_shape(m, n, sk.items_for(acc.name))
    tiles = sk.chained_tiles(m, n, lanes, acc.name)
    if not tiles:  # rows of one tile
        launch(sk.tiles_kernel(op, acc.name, source, reverse), (blocks, 1, 1), (lanes, per_block, 1), [rows, out])
        return out
    status = Tensor._empty((1 + tiles,), dt.uint64).zero_()  # the ticket and the flags the chained tiles start from
    values = Tensor._empty((lookback.values_size(acc.name, tiles),), acc)
    kernel = sk.chained_kernel(op, acc.name, source, reverse)
    launch(kernel, (blocks, 1, 1), (lanes, 1, 1), [rows, out, status, values])
    return out


def _launch_shape(m: int, n: int, items: int) -> tuple[int, int, int]:
    """(lanes, rows a block, blocks): lanes enough for a row, at most a block;
    short rows several to a block."""
    dev = get_backend()
    threads = 1 << (min(sk.BLOCK, dev.max_block).bit_length() - 1)  # a power of two
    lanes = min(threads, 1 << max(0, (-(-n // items) - 1).bit_length()))
    per_block = threads // lanes
    work = -(-m // per_block) * -(-n // (lanes * items))
    return lanes, per_block, max(1, min(work, dev.max_threads_per_launch // threads))


def running(op: str, rows: Tensor, acc: dt.DType, reverse: bool = False, initial: bool = False) -> Tensor:
    """``scan_rows`` recorded for autograd; ``initial``: with a first column of
    ``op``'s identity ((m, n + 1) rows)."""
    m, n = rows.shape
    with no_grad():
        if initial:
            out = Tensor._empty((m, n + 1), acc)
            fill(out.narrow(1, 0, 1), 0 if op == "sum" else 1)
            scan_rows(rows.detach(), op, acc, reverse, out.narrow(1, 1, n))
        else:
            out = scan_rows(rows.detach(), op, acc, reverse)
    if out.dtype.kind != "f":
        return out

    def grads(gs):
        g = gs[0].narrow(1, 1, n) if initial else gs[0]
        if op == "sum":
            grad = running("sum", g, acc, not reverse)
        else:
            grad = _product_gradient(rows, g, acc)
        return (grad if grad.dtype is rows.dtype else grad.to(rows.dtype),)

    return record("CumsumBackward" if op == "sum" else "CumprodBackward", out, (rows,), grads)


def _product_gradient(x: Tensor, g: Tensor, acc: dt.DType) -> Tensor:
    """The gradient of ``running("prod", x)`` along rows, from ``g``: item k gets
    the sum over j >= k of g[j] times the product of the items up to j but k.
    Before a row's first zero that is ``rsum(g * out) / x``; at the first zero
    it is ``rsum(g * out')`` with that zero replaced by 1 in ``out'``; past it, 0
    (``rsum``: the reversed running sum)."""
    zero = x == 0
    zeros_so_far = scan_rows(zero, "sum", dt.int64)
    before = zeros_so_far == 0
    first = zero & (zeros_so_far == 1)
    out = running("prod", x, acc)
    divided = running("sum", g * out, acc, reverse=True) / AG.where(zero, 1.0, x)
    at_zero = running("sum", g * running("prod", AG.where(first, 1.0, x), acc), acc, reverse=True)
    return AG.where(before, divided, AG.where(first, at_zero, 0.0))


# -- the functions ---------------------------------------------------------------------------


def _result_dtype(fn: str, x: Tensor, dtype) -> dt.DType:
    """``dtype`` if given, else the standard's: ``x``'s for floating types, int64 for
    signed integers and bools, uint64 for unsigned ones (as ``sum``)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}() expects a tensor, got {type(x).__name__}")
    if dtype is not None:
        return dt.as_dtype(dtype)
    if x.dtype.kind in "fc":
        return x.dtype
    return dt.uint64 if x.dtype.np.kind == "u" else dt.int64


def _cumulative(fn: str, op: str, x: Tensor, axis, dtype, include_initial: bool) -> Tensor:
    want = _result_dtype(fn, x, dtype)
    if axis is None:
        if x.ndim > 1:
            raise ValueError(
                f"{fn}() of a tensor of {x.ndim} dimensions needs the axis to run along; pass axis= (or dim)"
            )
        axis = 0
    acc = accumulator(want)
    if x.dtype is not want and (want.kind in "fc" or x.dtype.kind in "fc" or want.itemsize < 8):
        x = x.to(want)  # the standard: converted first (integers widen as they load)
    r = along_last(x, axis)
    out = running(op, r.rows, acc, initial=include_initial)
    return r.back(out if out.dtype is want else out.to(want))


def cumulative_sum(
    x: Tensor, /, dim: int | None = None, *, axis: int | None = None, dtype=None, include_initial: bool = False
) -> Tensor:
    """The running sum along ``axis`` (optional for a 1-D tensor): the standard's
    ``cumulative_sum``, and PyTorch's ``cumsum(x, dim, dtype=)``.

    Integers and bools are summed in 64 bits (int64, or uint64 for unsigned
    integers), as ``sum``; ``dtype`` converts first. ``include_initial`` puts
    a 0 first (the result one longer along ``axis``). Differentiable.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.cumulative_sum(tp.tensor([1, 2, 3])).tolist(), tp.cumsum(tp.tensor([[1.0, 2.0]]), 1).tolist()
    ([1, 3, 6], [[1.0, 3.0]])
    >>> tp.cumulative_sum(tp.tensor([1, 2, 3]), include_initial=True).tolist()
    [0, 1, 3, 6]
    """
    axis = either("cumulative_sum", "axis", axis, "dim", dim)
    return _cumulative("cumulative_sum", "sum", x, axis, dtype, include_initial)


def cumulative_prod(
    x: Tensor, /, dim: int | None = None, *, axis: int | None = None, dtype=None, include_initial: bool = False
) -> Tensor:
    """The running product along ``axis`` (optional for a 1-D tensor): the
    standard's ``cumulative_prod``, and PyTorch's ``cumprod(x, dim, dtype=)``;
    the dtypes of ``cumulative_sum``; ``include_initial`` puts a 1 first. Its
    gradient is right where elements are zero.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.cumprod(tp.tensor([1.0, 2.0, 3.0]), 0).tolist()
    [1.0, 2.0, 6.0]
    """
    axis = either("cumulative_prod", "axis", axis, "dim", dim)
    return _cumulative("cumulative_prod", "prod", x, axis, dtype, include_initial)


cumsum = cumulative_sum  # PyTorch's names
cumprod = cumulative_prod


def pytorch_accumulation(fn):
    """``fn`` (``prod``, ``cumulative_sum`` or ``cumulative_prod``) as a method with PyTorch's
    dtypes: unsigned integers accumulate to int64 as the other integers do, as ``x.sum()``
    (the standard's functions give uint64)."""

    def method(self: Tensor, *args, dtype=None, **kwargs) -> Tensor:
        if dtype is None and self.dtype.np.kind == "u":
            dtype = dt.int64
        return fn(self, *args, dtype=dtype, **kwargs)

    method.__name__, method.__doc__ = fn.__name__, fn.__doc__
    return method


add_methods({"cumsum": pytorch_accumulation(cumulative_sum), "cumprod": pytorch_accumulation(cumulative_prod)})
