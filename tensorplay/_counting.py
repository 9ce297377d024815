"""Counting and membership: ``bincount``, ``histc``, ``histogram`` and ``isin``.

The counts are ``index_add_`` of ones (or weights) at each element's bin, so
equal bins add up on the device. ``bincount``'s length, and the range of
``histc`` and ``histogram`` when none is given, come from the data, which
they read on the host once (as PyTorch's do): those calls are refused inside
a capture, with a sentence that says what to pass instead.
"""

from __future__ import annotations

import math

import numpy as np

from . import _dtype as dt
from ._creation_functions import linspace
from ._data_type_functions import result_type
from ._factories import ones, tensor, zeros
from ._functions import where
from ._indexing_functions import take
from ._ops import stack
from ._searching_functions import searchsorted
from ._sorting_functions import sort
from ._tensor import Tensor, add_methods
from .runtime.backend import CaptureError
from .runtime.streams import is_current_stream_capturing

__all__ = ["bincount", "histc", "histogram", "isin"]


_INSTEAD = {
    "bincount": "index_add_ ones into a tensor of the length you need",
    "histc": "pass min and max",
    "histogram": "pass range=(low, high) or the bin edges",
}


def _read_in_capture(fn: str, what: str) -> None:
    if is_current_stream_capturing():
        raise CaptureError(  # as nonzero's and unique's refusals: one except serves them all
            f"{fn}() reads {what} from the device to size its result, which a capture cannot do; "
            f"call it before the capture, or {_INSTEAD[fn]}"
        )


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:  # noqa: A002
    """How many times each value 0, 1, ..., max occurs in a 1-d tensor of
    non-negative integers (the sums of ``weights`` at them if given), at least
    ``minlength`` long: int64 counts, or the weights' dtype (float64 for integers).

    >>> import tensorplay as tp
    >>> tp.bincount(tp.tensor([0, 1, 1, 3])).tolist()
    [1, 2, 0, 1]
    """
    if input.ndim != 1 or input.dtype.kind not in "iub":
        raise ValueError(f"bincount() counts a 1-d tensor of integers, got {input.dtype} of shape {input.shape}")
    if weights is not None and weights.shape != input.shape:
        raise ValueError(f"bincount() takes weights of the input's shape {input.shape}, got {weights.shape}")
    values = input.to(dt.int64) if input.dtype is dt.bool else input  # NumPy's: False and True count as 0 and 1
    if minlength < 0:
        raise ValueError(f"bincount() takes minlength >= 0, got {minlength}")
    length = minlength
    if input.numel():
        _read_in_capture("bincount", "the largest value")
        low, high = (int(v) for v in stack([values.min(), values.max()]).tolist())
        if low < 0:
            raise ValueError(f"bincount() counts non-negative integers, got {low}")
        length = max(minlength, high + 1)
    if weights is None:
        return zeros(length, dtype=dt.int64).index_add_(0, values, ones(values.shape, dtype=dt.int64))
    dtype = weights.dtype if weights.dtype.kind in "fc" else dt.float64
    return zeros(length, dtype=dtype).index_add_(0, values, weights.to(dtype))


def _bin_counts(x: Tensor, index: Tensor, inside: Tensor, bins: int, weights) -> Tensor:
    """Counts (or weights) of the flat ``x`` in ``bins`` bins, each element at
    ``index`` where ``inside``, left out elsewhere."""
    amount = inside.to(x.dtype) if weights is None else where(inside, weights.reshape(-1).to(x.dtype), 0)
    return zeros(bins, dtype=x.dtype).index_add_(0, where(inside, index, 0), amount)


def _finite_range(fn: str, lo: float, hi: float, widen: float) -> tuple[float, float]:
    """``(lo, hi)`` checked as NumPy and PyTorch check a histogram's range, and
    widened by ``widen`` either side where it is one value."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"{fn}(): the range [{lo}, {hi}] is not finite (NaN or inf in the data, or given)")
    if lo > hi:
        raise ValueError(f"{fn}(): the range's low end {lo} is above its high end {hi}")
    return (lo - widen, hi + widen) if lo == hi else (lo, hi)


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002 (PyTorch's)
    """The histogram of ``input`` in ``bins`` equal bins from ``min`` to ``max``
    (the data's least and largest values when both are 0), elements outside
    left out and ``max`` itself in the last bin: PyTorch's ``histc``, counts of
    the input's floating point dtype.

    >>> import tensorplay as tp
    >>> tp.histc(tp.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3).tolist()
    [0.0, 2.0, 1.0, 0.0]
    """
    if input.dtype.kind != "f":
        raise TypeError(f"histc() takes a floating point tensor, got {input.dtype}")
    if bins < 1:
        raise ValueError(f"histc() takes bins >= 1, got {bins}")
    x = input.reshape(-1)
    lo, hi = float(min), float(max)
    if lo == hi and x.numel():
        _read_in_capture("histc", "the data's range")
        lo, hi = (float(v) for v in stack([x.min(), x.max()]).tolist())
    lo, hi = _finite_range("histc", lo, hi, 1)
    inside = (x >= lo) & (x <= hi)
    at = x if x.dtype.itemsize >= 4 else x.to(dt.float32)  # the positions in float32 at least, as PyTorch's
    position = ((where(inside, at, lo) - lo) * (bins / (hi - lo))).floor().to(dt.int64)
    return _bin_counts(x, position.clamp(0, bins - 1), inside, bins, None)


def histogram(input: Tensor, bins=10, *, range=None, weight: Tensor | None = None, density: bool = False):  # noqa: A002
    """``(hist, bin_edges)``: the histogram of ``input`` in ``bins`` equal bins
    over ``range`` (the data's when None) or between the edges of a 1-d tensor
    ``bins``, each bin holding its left edge and the last its right one too,
    as NumPy's and PyTorch's; ``weight`` adds weights, ``density`` makes the
    histogram integrate to 1. Counts are of the input's floating point dtype."""
    if input.dtype.kind != "f":
        raise TypeError(f"histogram() takes a floating point tensor, got {input.dtype}")
    x = input.reshape(-1)
    if isinstance(bins, Tensor):
        if bins.ndim != 1 or bins.shape[0] < 2:
            raise ValueError(f"histogram() takes bin edges as a 1-d tensor of 2 or more, got shape {bins.shape}")
        edges = bins.to(x.dtype)
    else:
        if isinstance(bins, (bool, np.bool_)) or not isinstance(bins, (int, np.integer)) or bins < 1:
            raise ValueError(f"histogram() takes bins as an int >= 1 or a tensor of edges, got {bins!r}")
        bins = int(bins)
        if range is None:
            _read_in_capture("histogram", "the data's range")
            lo, hi = (float(v) for v in stack([x.min(), x.max()]).tolist()) if x.numel() else (0.0, 1.0)
        else:
            lo, hi = (float(v) for v in range)
        lo, hi = _finite_range("histogram", lo, hi, 0.5)
        edges = linspace(lo, hi, bins + 1, dtype=x.dtype)
    n = edges.shape[0] - 1
    last = edges[n:]
    inside = (x >= edges[:1]) & (x <= last)
    index = where(x == last, n - 1, searchsorted(edges, x, side="right") - 1)
    hist = _bin_counts(x, index.clamp(0, n - 1), inside, n, weight)
    if density:
        hist = hist / (hist.sum() * (edges[1:] - edges[:-1]))
    return hist, edges


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """A bool tensor of ``elements``' shape: True where the element equals one
    of ``test_elements`` (False where ``invert``); NaN equals nothing.

    >>> import tensorplay as tp
    >>> tp.isin(tp.tensor([1, 2, 3, 4]), tp.tensor([4, 2])).tolist()
    [False, True, False, True]
    """
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin() takes a tensor as elements or test_elements")
    # a list is data of its own dtype; a number takes the tensor's, as in a binary op
    elements, test_elements = (tensor(v) if isinstance(v, (list, tuple)) else v for v in (elements, test_elements))
    dtype = result_type(elements, test_elements)
    e, t = (v.to(dtype) if isinstance(v, Tensor) else tensor(v, dtype=dtype) for v in (elements, test_elements))
    t = t.reshape(-1)
    if t.numel() == 0:
        found = zeros(e.shape, dtype=dt.bool)
    else:
        ordered = sort(t)
        at = searchsorted(ordered, e.reshape(-1)).clamp(0, t.numel() - 1)
        found = (take(ordered, at, axis=0) == e.reshape(-1)).reshape(e.shape)
    return ~found if invert else found


add_methods({"bincount": bincount, "histc": histc, "isin": isin})
