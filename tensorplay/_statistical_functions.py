"""Statistical functions of the array API standard (``axis=``, ``keepdims=``,
``correction=``, ``dtype=``), each also taking PyTorch's spellings (``dim``,
``keepdim`` positional), plus PyTorch's ``logsumexp``, ``median`` and
``quantile``.

Where the two disagree, the function follows the standard and the Tensor
method PyTorch: ``tp.var(x)`` divides by ``N`` (``correction=0``),
``x.var()`` by ``N - 1``; ``tp.max(x, axis=1)`` gives the values, PyTorch's
``tp.max(x, 1)`` (one int ``dim``) gives ``(values, indices)``.

The sums, products and extremes are the reduction kernels (``_reduce``),
``median`` and ``quantile`` pick from ``sort``'s values; the rest is composed
of differentiable ops. Each carries gradients (floating point) and launches
nothing that reads device data on the host: each is captured into graphs.
"""

from __future__ import annotations

import numpy as np

from . import _differentiable as AG
from . import _dtype as dt
from . import _ops, _reduce
from ._aliases import either
from ._complex import imag_part, real_part
from ._factories import full, ones_like
from ._grad_mode import no_grad
from ._indexing_functions import index_select
from ._manipulation_functions import concat, moveaxis
from ._methods import ValuesIndices
from ._reduce import reduce_dims
from ._scans import pytorch_accumulation
from ._sorting_functions import sort
from ._tape import record
from ._tensor import Tensor, add_methods

__all__ = ["logsumexp", "max", "mean", "median", "min", "prod", "quantile", "std", "sum", "var"]

_builtin_sum = sum


def _reduction(op: str, x: Tensor, axis, keep: bool) -> Tensor:
    """``sum``, ``mean``, ``max`` or ``min`` of ``x``, recorded when it requires grad
    (complex sums and means by their parts: see ``_reduce``)."""
    if x.dtype.kind == "c" and op in ("max", "min"):
        raise TypeError(f"{op}() is not defined for complex tensors (they have no order), got {x.dtype}")
    if x._ag is None:
        return _reduce.reduce(op, x, axis, keep)
    return AG.reduce(op, x, axis, keep)


def _accumulated(x: Tensor, dtype) -> tuple[Tensor, dt.DType]:
    """``x`` as a sum or product takes it, and the result's dtype: ``dtype`` if
    given, else the input's for floats, int64 for signed integers and bools,
    uint64 for unsigned ones (the standard's rule; the kernels accumulate every
    integer type in int64, whose bits are the uint64 result's)."""
    if dtype is not None:
        want = dt.as_dtype(dtype)
    elif x.dtype.kind in "fc":
        want = x.dtype
    else:
        want = dt.uint64 if x.dtype.np.kind == "u" else dt.int64
    if want.kind in "fc" or x.dtype.kind in "fc":
        x = x.to(want)  # floats sum in the dtype asked for; floats asked for as integers are converted first
    return x, want


def sum(  # noqa: A001 (the standard's name)
    x: Tensor, dim=None, keepdim: bool = False, *, axis=None, keepdims: bool = False, dtype=None
) -> Tensor:
    """The sum over ``axis`` (all axes if None; PyTorch's ``dim`` too).

    Integers are summed in 64 bits: int64 for signed integers and bools,
    uint64 for unsigned ones (PyTorch's ``x.sum()`` gives int64 for both);
    ``dtype`` converts first.

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.tensor([[1, 2], [3, 4]], dtype=tp.int8)
    >>> tp.sum(x, axis=0).tolist(), tp.sum(x, 1, True).tolist(), tp.sum(x).dtype
    ([4, 6], [[3], [7]], tensorplay.int64)
    """
    x, want = _accumulated(x, dtype)
    out = _reduction("sum", x, either("sum", "axis", axis, "dim", dim), keepdims or keepdim)
    return out if out.dtype is want else out.to(want)


def prod(x: Tensor, dim=None, keepdim: bool = False, *, axis=None, keepdims: bool = False, dtype=None) -> Tensor:
    """The product over ``axis`` (all axes if None; PyTorch's ``dim`` too), with
    the dtypes of ``sum``; 1 for an empty axis. Its gradient is right where
    elements are zero.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.prod(tp.tensor([[1.0, 2.0], [3.0, 4.0]]), axis=1).tolist()
    [2.0, 12.0]
    """
    x, want = _accumulated(x, dtype)
    axis = either("prod", "axis", axis, "dim", dim)
    keep = keepdims or keepdim
    if x.dtype.kind == "c":
        return _complex_prod(x, axis, keep)
    with no_grad():
        out = _reduce.reduce("prod", x.detach(), axis, keep)
    out = out if out.dtype is want else out.to(want)
    dims = reduce_dims(x, axis)
    kept = tuple(1 if i in dims else d for i, d in enumerate(x.shape))

    def grads(gs):
        # d out / d x_i is the product of the others: out / x_i without zeros; with one zero, the product of
        # the nonzero elements at the zero and 0 elsewhere; with more, 0 everywhere.
        zero = x == 0
        zeros = zero.sum(dims, keepdim=True)
        others = prod(AG.where(zero, 1.0, x), axis=dims, keepdims=True)
        at_zero = others * (zeros == 1)
        elsewhere = others / AG.where(zero, 1.0, x) * (zeros == 0)
        return (gs[0].reshape(kept) * AG.where(zero, at_zero, elsewhere),)

    return record("ProdBackward", out, (x,), grads)


def _complex_prod(x: Tensor, axis, keep: bool) -> Tensor:
    """The product of a complex tensor over ``axis``: its reduced axes moved last
    and merged, then halved by elementwise products (padded with ones to an even
    length) until one is left: ``log2(N)`` launches, each captured like any op."""
    dims = reduce_dims(x, axis)
    kept = [d for d in range(x.ndim) if d not in dims]
    shape = tuple(x.shape[d] for d in kept)
    rows = moveaxis(x, list(dims), list(range(len(kept), x.ndim))).reshape(*shape, -1)
    if rows.shape[-1] == 0:  # the empty product
        rows = full((*shape, 1), 1, dtype=x.dtype)
    while rows.shape[-1] != 1:
        if rows.shape[-1] % 2:
            rows = concat([rows, ones_like(rows[..., :1])], axis=-1)
        rows = rows[..., 0::2] * rows[..., 1::2]
    out = rows.reshape(shape)
    if keep:
        out = out.reshape(tuple(1 if d in dims else n for d, n in enumerate(x.shape)))
    return out


def mean(x: Tensor, dim=None, keepdim: bool = False, *, axis=None, keepdims: bool = False, dtype=None) -> Tensor:
    """The mean over ``axis`` (all axes if None; PyTorch's ``dim`` too) of a
    floating point tensor (converted to ``dtype`` first if given); NaN for an empty axis."""
    if dtype is not None:
        x = x.to(dtype)
    return _reduction("mean", x, either("mean", "axis", axis, "dim", dim), keepdims or keepdim)


def _extreme(op: str):
    def extreme(x: Tensor, dim=None, keepdim: bool = False, *, axis=None, keepdims: bool = False):
        if isinstance(dim, Tensor):  # PyTorch's max(a, b): elementwise
            return x.maximum(dim) if op == "max" else x.minimum(dim)
        keep = keepdims or keepdim
        if isinstance(dim, int) and not isinstance(dim, bool) and axis is None:
            return getattr(x, op)(dim, keep)  # PyTorch's (values, indices)
        return _reduction(op, x, either(op, "axis", axis, "dim", dim), keep)

    extreme.__name__ = extreme.__qualname__ = op
    extreme.__doc__ = f"""The {op}imum over ``axis`` (all axes if None), NaN where a NaN is.

    PyTorch's forms too: ``{op}(x, dim)`` with one int ``dim`` gives
    ``(values, indices)``, ``{op}(x, other)`` with a tensor is elementwise.

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.tensor([[1.0, 5.0], [3.0, 2.0]])
    >>> tp.{op}(x, axis=0).tolist(), tp.{op}(x, 1).indices.tolist()
    ({[3.0, 5.0] if op == "max" else [1.0, 2.0]}, {[1, 0] if op == "max" else [0, 1]})
    """
    return extreme


max = _extreme("max")  # noqa: A001 (the standard's name)
min = _extreme("min")  # noqa: A001 (the standard's name)


def _variance(fn: str, x: Tensor, axis, correction, keep: bool) -> Tensor:
    """The sum of squared deviations from the mean over ``axis``, divided by
    ``N - correction`` (NaN where that is not positive): two passes, composed;
    its square root for ``fn="std"``."""
    if x.dtype.kind not in "fc":
        raise TypeError(f"{fn}() needs a floating point tensor, got {x.dtype}; convert with .float() first")
    if x.dtype in (dt.float16, dt.bfloat16):  # deviations, squares and root in float32, as PyTorch's:
        return _variance(fn, x.to(dt.float32), axis, correction, keep).to(x.dtype)  # std 30000 has var 9e8
    dims = reduce_dims(x, axis)
    n = int(np.prod([x.shape[d] for d in dims]))
    deviation = x - mean(x, dims, keepdim=True)
    if x.dtype.kind == "c":  # |deviation|^2, real, as NumPy and PyTorch give it
        re, im = real_part(deviation), imag_part(deviation)
        squares = (re * re + im * im).sum(dims, keepdim=keep)
    else:
        squares = (deviation * deviation).sum(dims, keepdim=keep)
    out = squares * (1.0 / (n - correction) if n - correction > 0 else float("nan"))
    return out.sqrt() if fn == "std" else out


def var(x: Tensor, dim=None, *, axis=None, correction=0.0, keepdims: bool = False, keepdim: bool = False) -> Tensor:
    """The variance over ``axis`` (all axes if None; PyTorch's ``dim`` too),
    dividing by ``N - correction``: ``correction=0`` by default, as the
    standard says (PyTorch's ``x.var()`` method defaults to 1).

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.tensor([1.0, 2.0, 3.0, 4.0])
    >>> [round(v.item(), 4) for v in (tp.var(x), tp.var(x, correction=1), x.var())]
    [1.25, 1.6667, 1.6667]
    """
    return _variance("var", x, either("var", "axis", axis, "dim", dim), correction, keepdims or keepdim)


def std(x: Tensor, dim=None, *, axis=None, correction=0.0, keepdims: bool = False, keepdim: bool = False) -> Tensor:
    """The standard deviation: the square root of ``var`` (same arguments and defaults)."""
    return _variance("std", x, either("std", "axis", axis, "dim", dim), correction, keepdims or keepdim)


def logsumexp(x: Tensor, dim=None, keepdim: bool = False, *, axis=None, keepdims: bool = False) -> Tensor:
    """``log(sum(exp(x)))`` over ``dim`` (all dimensions if None), computed as
    ``m + log(sum(exp(x - m)))`` with ``m`` the maximum, so that large values
    do not overflow; its gradient is the softmax.

    Examples
    --------
    >>> import tensorplay as tp
    >>> round(tp.logsumexp(tp.tensor([1000.0, 1000.0], dtype=tp.float64), 0).item(), 4)
    1000.6931
    """
    axis = either("logsumexp", "axis", axis, "dim", dim)
    keep = keepdims or keepdim
    dims = reduce_dims(x, axis)
    if x.dtype.kind == "c":
        raise TypeError(f"logsumexp() takes real tensors, got {x.dtype}; pass x.real or x.abs() as you mean it")
    if x.dtype in (dt.float16, dt.bfloat16):  # exp's sum in float32 (70000 zeros overflow float16)
        return logsumexp(x.to(dt.float32), axis=axis, keepdims=keep).to(x.dtype)
    if x.dtype.kind != "f":
        x = x.to(dt.DEFAULT_FLOAT)
    if any(x.shape[d] == 0 for d in dims):  # log(0): -inf, as PyTorch and SciPy
        out = x.sum(dims, keepdim=True) - float("inf")
        return out if keep else out.reshape(tuple(d for i, d in enumerate(x.shape) if i not in dims))
    with no_grad():
        top = _reduce.reduce("max", x.detach(), dims, True)
        top = _ops.where(top.abs() == float("inf"), 0.0, top)  # rows of infinities: exp(x - 0)
    out = (x - top).exp().sum(dims, keepdim=True).log() + top
    return out if keep else out.reshape(tuple(d for i, d in enumerate(x.shape) if i not in dims))


# -- order statistics: sorted (``_sorting_functions``), then picked ----------------------------------


def median(x: Tensor, dim=None, keepdim: bool = False, *, axis=None, keepdims: bool = False):
    """PyTorch's ``median``: the middle value along ``dim``, the lower of the two
    middle ones for an even count (not their mean, as NumPy's), NaN where a NaN
    is. With an int ``dim``, ``(values, indices)`` (the index of the value
    taken; of a NaN where there is one); with ``axis=``, the values; with
    neither, the median of all elements (a 0-d tensor). Differentiable.

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.tensor([[3.0, 1.0, 4.0, 2.0], [5.0, 9.0, 6.0, 7.0]])
    >>> tp.median(x).item(), tp.median(x, 1).values.tolist(), tp.median(x, 1).indices.tolist()
    (4.0, [2.0, 6.0], [3, 2])
    """
    keep = keepdims or keepdim
    if dim is None and axis is None:
        middle = median(x.reshape(-1), axis=0)
        return middle.reshape((1,) * x.ndim) if keep else middle
    d = x._dim(either("median", "axis", axis, "dim", dim))
    n = x.shape[d] if x.ndim else 1
    if n == 0:
        raise ValueError(f"median() of an empty dimension has no value; shape {x.shape}, dim {d}")
    scalar = x.ndim == 0  # dimension 0 (or -1) of a 0-d tensor, as PyTorch takes it: 0-d results, kept or not
    if scalar:
        x, d = x.reshape(1), 0
    ordered = sort(x, d)  # NaNs last
    values, indices = ordered.values.narrow(d, (n - 1) // 2, 1), ordered.indices.narrow(d, (n - 1) // 2, 1)
    if x.dtype.kind == "f":
        last = ordered.values.detach().narrow(d, n - 1, 1)
        nan = last != last
        values = AG.where(nan, float("nan"), values)
        indices = _ops.where(nan, ordered.indices.narrow(d, n - 1, 1), indices)
    if not keep or scalar:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return ValuesIndices(values, indices) if dim is not None else values


QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def quantile(x: Tensor, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear") -> Tensor:
    """PyTorch's ``quantile``: the ``q``-th quantiles along ``dim`` (of all
    elements if None), between the two nearest sorted values at ``q * (n - 1)``
    by ``interpolation`` ("linear", "lower", "higher", "midpoint", "nearest"),
    NaN where a NaN is. ``q`` is a number, a sequence of them or a 1-D tensor
    (whose values are not checked: no op reads the device); for a sequence or
    tensor the result has a first dimension of one quantile each. Differentiable.

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.tensor([[1.0, 2.0, 3.0, 4.0]])
    >>> tp.quantile(x, 0.5, dim=1).tolist(), tp.quantile(x, [0.25, 1.0]).tolist()
    ([2.5], [1.75, 4.0])
    """
    if interpolation not in QUANTILE_METHODS:
        raise ValueError(
            f"quantile() interpolation must be one of {', '.join(QUANTILE_METHODS)}, got {interpolation!r}"
        )
    if x.dtype.kind != "f":
        raise TypeError(f"quantile() needs a floating point tensor, got {x.dtype}; convert with .float() first")
    ndim, d = x.ndim, 0 if dim is None else x._dim(dim)
    if not ndim:  # dimension 0 (or -1) of a 0-d tensor, as PyTorch takes it: its one element
        dim = None
    rest = () if dim is None else tuple(s for i, s in enumerate(x.shape) if i != d)
    n = x.numel() if dim is None else x.shape[d]
    if n == 0:
        raise ValueError(f"quantile() of an empty dimension has no value; shape {x.shape}, dim {dim}")
    ordered = moveaxis(sort(x.reshape(-1) if dim is None else x, 0 if dim is None else d).values, d, -1)
    if isinstance(q, Tensor):
        out = _picked_on_device(ordered, q.reshape(-1).to(x.dtype), interpolation)
    else:
        qs = [float(v) for v in np.ravel(q)]  # a number, a sequence or a NumPy array (0-d too)
        for v in qs:
            if not 0 <= v <= 1:
                raise ValueError(f"quantile() expects q in [0, 1], got {v}")
        out = concat([_picked(ordered, v, interpolation) for v in qs], axis=-1)
    last = ordered.detach().narrow(-1, n - 1, 1)
    out = AG.where(last != last, float("nan"), out)  # a NaN anywhere makes the quantile NaN
    out = moveaxis(out, -1, 0)  # one quantile each: (nq, *rest)
    if keepdim:
        out = out.reshape((out.shape[0],) + ((1,) * ndim if dim is None else rest[:d] + (1,) + rest[d:]))
    scalar = (q.ndim if isinstance(q, Tensor) else np.ndim(q)) == 0
    return out.squeeze(0) if scalar else out


def _picked(ordered: Tensor, q: float, interpolation: str) -> Tensor:
    """The ``q``-th quantile of the sorted rows of ``ordered`` (along its last axis), a last axis of 1."""
    n = ordered.shape[-1]
    pos = q * (n - 1)
    lo = int(np.floor(pos))
    frac = pos - lo
    if interpolation == "nearest":
        lo, frac = round(pos), 0.0  # half to even, as PyTorch and NumPy
    a = ordered.narrow(-1, lo, 1)
    if frac == 0 or interpolation == "lower":
        return a
    b = ordered.narrow(-1, lo + 1, 1)
    if interpolation == "higher":
        return b
    return (a + b) * 0.5 if interpolation == "midpoint" else a + (b - a) * frac


def _picked_on_device(ordered: Tensor, q: Tensor, interpolation: str) -> Tensor:
    """As ``_picked`` for each of the quantiles ``q`` (a 1-D tensor), positions computed on the device."""
    n = ordered.shape[-1]
    pos = q * (n - 1)
    lo = pos.to(dt.int64)  # q >= 0: truncation is the floor
    frac = pos - lo.to(q.dtype)
    if interpolation == "nearest":
        lo = lo + ((frac > 0.5) | ((frac == 0.5) & (lo % 2 == 1))).to(dt.int64)
    a = index_select(ordered, -1, lo)
    if interpolation in ("lower", "nearest"):
        return a
    b = index_select(ordered, -1, lo + (frac > 0).to(dt.int64))
    if interpolation == "higher":
        return b
    between = (a + b) * 0.5 if interpolation == "midpoint" else a + (b - a) * frac
    return AG.where(frac > 0, between, a)


# -- Tensor methods, where PyTorch has them ---------------------------------------------------------


def _pytorch_correction(correction, unbiased) -> float:
    if correction is not None and unbiased is not None:
        raise TypeError("var() and std() take correction= or unbiased=, not both; pass correction=")
    if correction is not None:
        return correction
    return 0 if unbiased is False else 1


def _pytorch_variance(fn: str):
    """PyTorch's ``x.var`` or ``x.std`` method (``fn``): ``N - 1`` by default."""

    def method(self: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:
        if isinstance(dim, bool):  # x.var(False): PyTorch's old unbiased-first form
            dim, unbiased = None, dim
        return _variance(fn, self, dim, _pytorch_correction(correction, unbiased), keepdim)

    method.__name__ = fn
    method.__doc__ = f"PyTorch's ``x.{fn}(dim, unbiased, keepdim, correction=)``: ``N - 1`` by default."
    return method


def _accumulation(fn, op: str):
    """``x.sum`` or ``x.mean``: the reduction, or with PyTorch's ``dtype=`` (the
    input converted to it first) or NumPy's ``axis=`` and ``keepdims=``, ``fn``."""

    def method(self: Tensor, dim=None, keepdim: bool = False, *, dtype=None, **names) -> Tensor:
        if dtype is None and not names:
            return _reduction(op, self, dim, keepdim)
        return fn(self, dim, keepdim, dtype=dtype, **names)

    method.__name__, method.__doc__ = op, f"The {op} over ``dim`` (all dimensions if None), in ``dtype`` if given."
    return method


add_methods(
    {
        "sum": _accumulation(sum, "sum"),
        "mean": _accumulation(mean, "mean"),
        "logsumexp": logsumexp,
        "median": median,
        "prod": pytorch_accumulation(prod),
        "quantile": quantile,
        "std": _pytorch_variance("std"),
        "var": _pytorch_variance("var"),
    }
)
