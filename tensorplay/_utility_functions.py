"""Utility functions of the array API standard (``all``, ``any``, ``diff``),
with PyTorch's spellings (``dim``, ``keepdim``), and PyTorch's ``isclose`` and
``allclose`` (NumPy's rule: ``|a - b| <= atol + rtol * |b|``).

All are composed of comparisons, reductions and views, launch nothing that
reads device data on the host (except ``allclose``, which returns a Python
bool), and are captured into graphs; ``diff`` carries gradients.
"""

from __future__ import annotations

from . import _dtype as dt
from . import _reduce
from ._aliases import either
from ._manipulation_functions import concat
from ._ops import fill
from ._reduce import reduce_dims
from ._tensor import Tensor, add_methods

__all__ = ["all", "allclose", "any", "diff", "isclose"]


def _truth(op: str, x: Tensor, axis, keep: bool) -> Tensor:
    """Whether every (``op="min"``) or any (``"max"``) element along ``axis`` is nonzero."""
    dims = reduce_dims(x, axis)
    if 0 in [x.shape[d] for d in dims]:  # nothing to test: all() holds, any() does not
        shape = tuple(1 if i in dims else d for i, d in enumerate(x.shape) if keep or i not in dims)
        return fill(Tensor._empty(shape, dt.bool), op == "min")
    return _reduce.reduce(op, x if x.dtype is dt.bool else x != 0, dims, keep)


def all(x: Tensor, dim=None, keepdim: bool = False, *, axis=None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Whether every element along ``axis`` (all of them if None; PyTorch's
    ``dim`` too) is nonzero, as a bool tensor (NaN counts as nonzero; True
    over nothing).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.all(tp.tensor([[1, 0], [2, 3]]), axis=1).tolist(), tp.all(tp.zeros(0)).item()
    ([False, True], True)
    """
    return _truth("min", x, either("all", "axis", axis, "dim", dim), keepdims or keepdim)


def any(x: Tensor, dim=None, keepdim: bool = False, *, axis=None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Whether any element along ``axis`` (all of them if None; PyTorch's
    ``dim`` too) is nonzero, as a bool tensor (False over nothing)."""
    return _truth("max", x, either("any", "axis", axis, "dim", dim), keepdims or keepdim)


def diff(x: Tensor, /, n: int = 1, dim=None, prepend=None, append=None, *, axis: int = -1) -> Tensor:
    """The ``n``-th forward difference along ``axis`` (``out[i] = x[i + 1] - x[i]``,
    applied ``n`` times; ``!=`` for bools), after ``prepend`` and ``append`` are
    joined to ``x`` along it: the standard's ``diff(x, axis=, n=)`` and
    PyTorch's ``diff(x, n, dim, prepend, append)``.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.diff(tp.tensor([1, 4, 9, 16])).tolist(), tp.diff(tp.tensor([1, 4, 9, 16]), n=2).tolist()
    ([3, 5, 7], [2, 2])
    """
    axis = either("diff", "axis", axis, "dim", dim, -1)
    if x.ndim == 0:
        raise ValueError("diff() needs a tensor of at least one dimension, got a 0-d tensor")
    if n < 0:
        raise ValueError(f"diff() expects n >= 0, got {n}")
    axis = x._dim(axis)
    for name, part in (("prepend", prepend), ("append", append)):
        if part is not None and not isinstance(part, Tensor):
            raise TypeError(f"diff() takes {name}= as a tensor (as PyTorch's), got {type(part).__name__}")
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = concat(parts, axis=axis)
    for _ in range(n):
        m = max(x.shape[axis] - 1, 0)
        later, earlier = x.narrow(axis, min(1, x.shape[axis]), m), x.narrow(axis, 0, m)
        x = later != earlier if x.dtype is dt.bool else later - earlier
    return x


def isclose(a: Tensor, b: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """Where ``|a - b| <= atol + rtol * |b|`` (broadcast), as a bool tensor:
    infinities are close only to themselves, NaN to nothing unless
    ``equal_nan``. Integers are compared exactly (their distance in uint64,
    which cannot overflow).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.isclose(tp.tensor([1.0, 1.0, float("inf")]), tp.tensor([1.0 + 1e-7, 1.1, float("inf")])).tolist()
    [True, False, True]
    """
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"isclose() expects two tensors, got {type(a).__name__} and {type(b).__name__}")
    common = dt.promote(a.dtype, b.dtype) if dt.uint64 not in (a.dtype, b.dtype) else dt.float64
    if common.kind not in "fc":  # exact differences; bools and narrow types as int64
        a, b = a.to(dt.int64), b.to(dt.int64)
        # the larger less the smaller, in uint64: a - b in int64 wraps (2**62 - -2**62), and so does abs(-2**63)
        gap = (a.maximum(b).to(dt.uint64) - a.minimum(b).to(dt.uint64)).to(dt.float64)
        return (gap <= atol + rtol * b.to(dt.float64).abs()) | (a == b)
    a, b = a.to(common), b.to(common)
    b_size = b.abs()
    close = (a == b) | (((a - b).abs() <= atol + rtol * b_size) & (b_size < float("inf")))
    if equal_nan:
        close = close | ((a != a) & (b != b))
    return close


def allclose(a: Tensor, b: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether ``isclose(a, b, ...)`` holds everywhere, as a Python bool (so it
    waits for the device, and is refused while a graph is being captured)."""
    return bool(all(isclose(a, b, rtol, atol, equal_nan)).item())


add_methods({"all": all, "allclose": allclose, "any": any, "diff": diff, "isclose": isclose})
