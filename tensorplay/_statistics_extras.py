"""Statistics NumPy and PyTorch users reach for beyond the standard's:
``nansum``, ``nanmean``, ``cov``, ``corrcoef`` and ``trapezoid``.

Each is made of differentiable ops (``where``, the reductions, ``matmul``),
so each has a gradient and captures as they do; none reads device data on the
host.
"""

from __future__ import annotations

from . import _dtype as dt
from ._aliases import either
from ._functions import where
from ._statistical_functions import sum as _sum
from ._tensor import Tensor, add_methods

__all__ = ["corrcoef", "cov", "nanmean", "nansum", "trapezoid"]


def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims: bool = False) -> Tensor:  # noqa: A002
    """The sum over ``dim`` (every element if None) with NaN counted as zero.

    >>> import tensorplay as tp
    >>> tp.nansum(tp.tensor([1.0, float("nan"), 2.0])).item()
    3.0
    """
    x = where(input.isnan(), 0, input) if input.dtype.kind in "fc" else input
    return _sum(x, either("nansum", "axis", axis, "dim", dim), keepdim or keepdims, dtype=dtype)


def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims: bool = False) -> Tensor:  # noqa: A002
    """The mean over ``dim`` of the elements that are not NaN (NaN where every
    one is) of a floating point tensor."""
    if input.dtype.kind not in "fc" and dtype is None:
        raise TypeError(f"nanmean() takes a floating point tensor (or dtype=), got {input.dtype}")
    x = input if dtype is None else input.to(dtype)
    dim, keep = either("nanmean", "axis", axis, "dim", dim), keepdim or keepdims
    present = ~x.isnan()
    return nansum(x, dim, keep) / _sum(present, dim, keep).to(dt.real_dtype(x.dtype))


def _variables(fn: str, data: Tensor) -> Tensor:
    if data.ndim > 2:
        raise ValueError(f"{fn}() takes a vector or a matrix whose rows are the variables, got shape {data.shape}")
    x = data.reshape(1, -1) if data.ndim < 2 else data
    return x if x.dtype.kind in "fc" else x.double() if x.dtype.kind in "iu" else x.float()


def cov(input: Tensor, *, correction: int = 1) -> Tensor:  # noqa: A002 (PyTorch's name)
    """The covariance matrix of the variables in the rows of ``input`` (each
    column an observation), divided by ``N - correction``; a 0-d variance for a
    vector. Integers are taken as float64.

    >>> import tensorplay as tp
    >>> tp.cov(tp.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])).tolist()
    [[1.0, -1.0], [-1.0, 1.0]]
    """
    x = _variables("cov", input)
    n = x.shape[1]
    centred = x - x.mean(1, True)
    out = (centred @ centred.mT.conj()) / max(n - correction, 0)
    return out.reshape(()) if input.ndim < 2 else out


def corrcoef(input: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
    """Pearson's correlation coefficients of the variables in the rows of
    ``input``: ``cov`` over the outer product of the standard deviations, the
    real ones kept within [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = c.diagonal().abs().sqrt() if c.dtype.kind == "c" else c.diagonal().sqrt()  # a complex variance is real
    r = c / d[:, None] / d[None, :]
    return r if r.dtype.kind == "c" else r.clamp(-1.0, 1.0)


def trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1, axis: int | None = None) -> Tensor:
    """The integral of ``y`` along ``dim`` by the trapezoidal rule: with the
    sample points ``x`` (a tensor along that dimension, or broadcast to ``y``),
    else spaced ``dx`` apart (1 if neither).

    >>> import tensorplay as tp
    >>> tp.trapezoid(tp.tensor([1.0, 2.0, 3.0])).item(), tp.trapezoid(tp.tensor([1.0, 2.0, 3.0]), dx=0.5).item()
    (4.0, 2.0)
    """
    if y.ndim == 0:
        raise ValueError("trapezoid() needs samples along a dimension, got a 0-d tensor")
    d = y._dim(dim if axis is None else axis)
    n = y.shape[d]
    if x is not None and dx is not None:
        raise TypeError("trapezoid() takes x or dx, not both")
    if x is not None and not isinstance(x, Tensor):
        raise TypeError(f"trapezoid() takes x as a tensor of sample points (dx= for a spacing), got {type(x).__name__}")
    if n < 2:  # no interval: zeros, of the dtype the rule gives
        return _sum(y.narrow(d, 0, 0), d) / 2
    mids = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) / 2
    if x is None:
        return _sum(mids, d) * (1 if dx is None else dx)
    if x.ndim == 1:
        if x.shape[0] != n:
            raise ValueError(f"trapezoid() takes x of {n} points along dimension {d}, got {x.shape[0]}")
        steps = x.diff().reshape(tuple(-1 if k == d else 1 for k in range(y.ndim)))
    else:  # broadcast against y, leading dimensions of one added
        steps = x.reshape((1,) * (y.ndim - x.ndim) + x.shape).diff(dim=d)
    return _sum(mids * steps, d)


add_methods({"nanmean": nanmean, "nansum": nansum})
