"""The array API standard's data type functions: ``astype``, ``can_cast``,
``finfo``, ``iinfo``, ``isdtype`` and ``result_type``.

They answer from ``_dtype.promote``, the promotion every op uses: the
standard's tables within a kind, PyTorch's rules across kinds (which the
standard leaves open). float16 and bfloat16, which the standard does not
name, count as real floating-point types.

Examples
--------
>>> import tensorplay as tp
>>> tp.result_type(tp.uint8, tp.int8), tp.can_cast(tp.float64, tp.float32), tp.isdtype(tp.int16, "integral")
(tensorplay.int16, False, True)
>>> tp.finfo(tp.complex64).dtype, tp.iinfo(tp.int8).max
(tensorplay.float32, 127)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from . import _dtype as dt
from ._device import check_device
from ._tensor import Tensor

__all__ = ["astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type"]

# The standard's dtype kinds, as tests on a DType
KINDS = {
    "bool": lambda d: d is dt.bool,
    "signed integer": lambda d: d.kind == "i" and d.is_signed,
    "unsigned integer": lambda d: d.kind == "i" and not d.is_signed,
    "integral": lambda d: d.kind == "i",
    "real floating": lambda d: d.kind == "f",
    "complex floating": lambda d: d.kind == "c",
    "numeric": lambda d: d.kind in "ifc",
}


def astype(x: Tensor, dtype, /, *, copy: bool = True, device=None) -> Tensor:
    """``x`` converted to ``dtype`` (a new tensor, or ``x`` itself when it has
    that dtype and ``copy=False``); differentiable between floating-point types.
    A complex tensor converts to a complex type or to bool only: cast its
    ``real`` or ``imag`` part to get real numbers (the standard's rule).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.astype(tp.tensor([1.7, -2.5]), tp.int32).tolist()
    [1, -2]
    """
    check_device(device)
    if not isinstance(x, Tensor):
        raise TypeError(f"astype() expects a tensor, got {type(x).__name__}")
    dtype = dt.as_dtype(dtype)
    if x.dtype.kind == "c" and dtype.kind not in "cb":
        raise TypeError(
            f"astype() does not cast {x.dtype.name} to {dtype.name}: which part to keep is yours to say "
            "(the array API standard's rule); cast tp.real(x) or tp.imag(x) instead"
        )
    if dtype is x.dtype and not copy:
        return x
    return x.to(dtype, copy=True)


def can_cast(from_, to, /) -> bool:
    """Whether promotion takes ``from_`` (a dtype or a tensor) to ``to``: a cast
    that loses nothing (``result_type(from_, to)`` is ``to``)."""
    source = from_.dtype if isinstance(from_, Tensor) else dt.as_dtype(from_)
    to = dt.as_dtype(to)
    try:
        return dt.promote(source, to) is to
    except TypeError:  # uint64 and a signed type: nothing holds both
        return False


def result_type(*arrays_and_dtypes) -> dt.DType:
    """The dtype an op on these tensors, dtypes and Python numbers gives: the
    tensors and dtypes promote together, then each number joins as ops take
    numbers (a float with an integer type gives float32, PyTorch's rule)."""
    dtypes, numbers = [], []
    for a in arrays_and_dtypes:
        if isinstance(a, Tensor):
            dtypes.append(a.dtype)
        elif isinstance(a, (bool, int, float, complex)):
            numbers.append(a)
        else:
            dtypes.append(dt.as_dtype(a))
    if not dtypes:
        raise ValueError(f"result_type() needs at least one tensor or dtype, got only {arrays_and_dtypes}")
    result = functools.reduce(dt.promote, dtypes)
    for number in numbers:
        result = dt.promote_scalar(result, number)
    return result


def isdtype(dtype, kind) -> bool:
    """Whether ``dtype`` is ``kind``: a dtype, one of the standard's kind names
    ("bool", "signed integer", "unsigned integer", "integral", "real floating",
    "complex floating", "numeric") or a tuple of them."""
    if isinstance(dtype, Tensor):
        raise TypeError("isdtype() expects a dtype, got Tensor; pass x.dtype")
    dtype = dt.as_dtype(dtype)
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        return kind_test(kind)(dtype)
    return dtype is dt.as_dtype(kind)


def kind_test(kind: str):
    """The test of the standard's dtype kind ``kind``; ValueError naming the kinds otherwise."""
    test = KINDS.get(kind) if isinstance(kind, str) else None
    if test is None:
        names = ", ".join(repr(k) for k in KINDS)
        raise ValueError(f"expected a dtype kind (one of {names}), got {kind!r}")
    return test


@dataclass(frozen=True)
class FloatInfo:
    """What ``finfo`` says of a floating-point type (of a complex type's parts)."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: dt.DType

    @property
    def tiny(self) -> float:
        """PyTorch's name for ``smallest_normal``."""
        return self.smallest_normal


@dataclass(frozen=True)
class IntInfo:
    """What ``iinfo`` says of an integer type."""

    bits: int
    max: int
    min: int
    dtype: dt.DType


def finfo(type, /) -> FloatInfo:  # noqa: A002 (the standard's name)
    """Machine limits of a floating-point or complex dtype (or a tensor's): a
    complex type's are those of its real and imaginary parts."""
    dtype = dt.real_dtype(_dtype_of(type))
    if dtype.kind != "f":
        raise TypeError(f"finfo() expects a floating-point or complex dtype, got {dtype!r}; use iinfo for integers")
    info = ml_dtypes.finfo(dtype.np) if dtype is dt.bfloat16 else np.finfo(dtype.np)
    return FloatInfo(
        int(info.bits), float(info.eps), float(info.max), float(info.min), float(info.smallest_normal), dtype
    )


def iinfo(type, /) -> IntInfo:  # noqa: A002 (the standard's name)
    """Machine limits of an integer dtype (or a tensor's)."""
    dtype = _dtype_of(type)
    if dtype.kind != "i":
        raise TypeError(f"iinfo() expects an integer dtype, got {dtype!r}; use finfo for floating-point types")
    info = np.iinfo(dtype.np)
    return IntInfo(int(info.bits), int(info.max), int(info.min), dtype)


def _dtype_of(x) -> dt.DType:
    return x.dtype if isinstance(x, Tensor) else dt.as_dtype(x)
