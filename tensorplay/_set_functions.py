"""Set functions of the array API standard (``unique_values``,
``unique_counts``, ``unique_inverse``, ``unique_all``) and PyTorch's ``unique``.

The flattened tensor is sorted (``_sorting_functions.sort_indices``, stable,
NaNs last), a running count of where the sorted values change
(``_scans.scan_rows``) numbers the runs of equal values, and one kernel
(``kernels/search.groups``) writes each run's value, first position, start and
end, and each element's run. NaNs are distinct (each its own run, as the
standard says), -0.0 and 0.0 are one value. The values come out in ascending
order (complex numbers by real part, then imaginary part).

The number of unique values decides the results' size: eagerly it is read on
the host; inside a graph capture that is refused, and ``size=`` (with
``fill_value=``) gives results of fixed size instead, as in JAX: the first
``size`` unique values, padded with ``fill_value`` (the smallest value by
default), counts and indices padded with 0; inverse indices of the values
cut off point past the end.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _dtype as dt
from . import _functions
from ._ops import binary, fill
from ._scans import scan_rows
from ._searching_functions import refuse_unsized
from ._sorting_functions import sort_indices, take_rows
from ._tensor import Tensor, add_methods
from .kernels import search as sk
from .runtime.launch import grid_1d, launch

__all__ = ["unique", "unique_all", "unique_counts", "unique_inverse", "unique_values"]


class UniqueAll(NamedTuple):
    """What ``unique_all`` returns."""

    values: Tensor
    indices: Tensor
    inverse_indices: Tensor
    counts: Tensor


class UniqueCounts(NamedTuple):
    """What ``unique_counts`` returns."""

    values: Tensor
    counts: Tensor


class UniqueInverse(NamedTuple):
    """What ``unique_inverse`` returns."""

    values: Tensor
    inverse_indices: Tensor


def _sorting_order(rows: Tensor) -> Tensor:
    """The positions that sort the (1, n) ``rows``; complex numbers by real
    part, then imaginary part (two stable sorts), which puts equal ones together."""
    if not rows.dtype.is_complex:
        return sort_indices(rows)
    by_imag = sort_indices(_functions.imag(rows))
    return take_rows(by_imag, sort_indices(take_rows(_functions.real(rows), by_imag)))


def _unique(fn: str, x: Tensor, size: int | None, fill_value) -> UniqueAll:
    """The unique values of the flattened ``x``, with all that goes with them."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}() expects a tensor, got {type(x).__name__}")
    if size is not None and (isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0):
        raise ValueError(f"{fn}() expects size= to be a non-negative int, got {size!r}")
    size = None if size is None else int(size)
    n = x.numel()
    rows = x.detach().reshape(1, n)
    order = _sorting_order(rows)
    ordered = take_rows(rows, order).reshape(n)
    changes = Tensor._empty((n,), dt.bool)
    if n:
        fill(changes.narrow(0, 0, 1), True)
        binary("ne", ordered.narrow(0, 1, n - 1), ordered.narrow(0, 0, n - 1), out=changes.narrow(0, 1, n - 1))
    runs = scan_rows(changes.reshape(1, n), "sum", dt.int64).reshape(n)
    if size is None:
        refuse_unsized(fn, "the number of unique values")
        size = int(runs[n - 1].item()) if n else 0
    values = Tensor._empty((size,), x.dtype)
    if size:
        fill(values, fill_value if fill_value is not None else ordered[0] if n else 0)
    first, starts, ends = (Tensor._empty((size,), dt.int64).zero_() for _ in range(3))
    inverse = Tensor._empty((n,), dt.int64)
    if n:
        args = [runs, order.reshape(n), ordered, values, first, starts, ends, inverse]
        launch(sk.groups, *grid_1d(n), args)
    return UniqueAll(values, first, inverse.reshape(x.shape), binary("sub", ends, starts))


def unique_all(x: Tensor, /, *, size: int | None = None, fill_value=None) -> UniqueAll:
    """The unique values of ``x`` (flattened), ascending, with the index of
    each one's first occurrence, the index of each element's value
    (``inverse_indices``, ``x``'s shape) and how often each occurs: a named
    tuple. NaNs are distinct. ``size=``: a fixed size (see the module docstring).

    Examples
    --------
    >>> import tensorplay as tp
    >>> found = tp.unique_all(tp.tensor([3, 1, 3]))
    >>> [t.tolist() for t in found]
    [[1, 3], [1, 0], [1, 0, 1], [1, 2]]
    """
    return _unique("unique_all", x, size, fill_value)


def unique_counts(x: Tensor, /, *, size: int | None = None, fill_value=None) -> UniqueCounts:
    """The unique values of ``x`` (flattened), ascending, and how often each occurs."""
    found = _unique("unique_counts", x, size, fill_value)
    return UniqueCounts(found.values, found.counts)


def unique_inverse(x: Tensor, /, *, size: int | None = None, fill_value=None) -> UniqueInverse:
    """The unique values of ``x`` (flattened), ascending, and the index of each element's value (``x``'s shape)."""
    found = _unique("unique_inverse", x, size, fill_value)
    return UniqueInverse(found.values, found.inverse_indices)


def unique_values(x: Tensor, /, *, size: int | None = None, fill_value=None) -> Tensor:
    """The unique values of ``x`` (flattened), ascending (NaNs distinct, last).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.unique_values(tp.tensor([[2, 1], [2, 5]])).tolist()
    [1, 2, 5]
    """
    return _unique("unique_values", x, size, fill_value).values


def unique(
    x: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None,  # noqa: A002
    *, size: int | None = None, fill_value=None,
):  # fmt: skip
    """PyTorch's ``unique``: the unique values (always sorted), and with
    ``return_inverse`` / ``return_counts`` a tuple adding those; ``size=`` as
    the standard's forms take it.

    Examples
    --------
    >>> import tensorplay as tp
    >>> values, counts = tp.unique(tp.tensor([2, 1, 2]), return_counts=True)
    >>> values.tolist(), counts.tolist()
    ([1, 2], [1, 2])
    """
    if dim is not None:
        raise NotImplementedError(
            f"unique() over one dimension (dim={dim}) is not implemented; leave dim out for the unique elements"
        )
    found = _unique("unique", x, size, fill_value)
    extra = ((found.inverse_indices,) if return_inverse else ()) + ((found.counts,) if return_counts else ())
    return (found.values, *extra) if extra else found.values


add_methods({"unique": unique})
