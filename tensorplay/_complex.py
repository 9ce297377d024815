"""Complex tensors seen as their parts: the real and imaginary parts of a
complex64 (complex128) tensor are float32 (float64) tensors over the same
memory, every other element (the parts sit side by side, real first). Copies
and fills of complex tensors go through these views with the real kernels
(``_ops.copy``, ``_ops.fill``).

Examples
--------
>>> import tensorplay as tp
>>> from tensorplay._complex import imag_part
>>> x = tp.tensor([1 + 2j, 3 - 4j])
>>> imag_part(x).tolist(), complex(x[1])
([2.0, -4.0], (3-4j))
"""

from __future__ import annotations

from . import _dtype as dt
from ._tensor import Tensor, add_methods

__all__ = ["from_parts", "imag_part", "real_part"]


def real_part(t: Tensor) -> Tensor:
    """The real parts of the complex tensor ``t``: a real tensor over its memory."""
    return _part(t, 0)


def imag_part(t: Tensor) -> Tensor:
    """The imaginary parts of the complex tensor ``t``: a real tensor over its memory."""
    return _part(t, 1)


def from_parts(real: Tensor, imag: Tensor, dtype: dt.DType) -> Tensor:
    """A new complex tensor of ``dtype`` whose parts are ``real`` and ``imag`` (one shape)."""
    out = Tensor._empty(real.shape, dtype)
    real_part(out).copy_(real)
    imag_part(out).copy_(imag)
    return out


def _part(t: Tensor, which: int) -> Tensor:
    part = dt.real_dtype(t.dtype)
    strides = tuple(2 * s for s in t._strides)  # in elements of the part's type
    return Tensor._make(t._storage, t._ptr + which * part.itemsize, t.shape, strides, part)


def _complex_value(self: Tensor) -> complex:
    """``complex(x)`` of a one-element tensor."""
    return complex(self.item())


add_methods({"__complex__": _complex_value})
