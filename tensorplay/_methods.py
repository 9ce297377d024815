"""Tensor's math: its operators and methods, generated from the op table
(``kernels/elementwise.OPS``) plus the few written by hand (matmul, clamp,
where, copies and fills, conversions), and attached to ``Tensor`` at import.

A method goes to ``_ops`` for plain tensors and to ``_differentiable`` when an
operand requires grad: plain tensors pay one attribute test.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _differentiable as AG
from . import _dtype as dt
from . import _ops as OPS
from . import _reduce
from ._device import check_device, to_arguments
from ._differentiable import tracked as _tracked
from ._factories import arange, upload
from ._grad_mode import no_grad
from ._matmul import matmul as _matmul
from ._overlap import overlaps
from ._tape import needs_grad, refuse_in_place
from ._tensor import TENSOR_TYPES, Tensor, add_methods
from .kernels.elementwise import OPS as OP_TABLE
from .runtime.backend import get as get_backend
from .runtime.capture import capture_state
from .runtime.streams import current_stream

__all__ = ["ValuesIndices", "tensor_methods"]

_NUMBERS = {int, float, bool}


def _binary(op: str, name: str, reflected: bool = False):
    if reflected:

        def method(self, other):
            if self._ag is None:
                return OPS.binary(op, other, self)
            return AG.binary(op, other, self)
    else:

        def method(self, other):
            if self._ag is None and (other.__class__ in _NUMBERS or getattr(other, "_ag", None) is None):
                return OPS.binary(op, self, other)
            return AG.binary(op, self, other)

    method.__name__ = method.__qualname__ = name
    return method


def _inplace(op: str, name: str):
    def method(self, other):
        if self._ag is not None or _tracked(other):
            refuse_in_place(f"{name}()", self, other)
        return OPS.binary(op, self, other, out=self)

    method.__name__ = method.__qualname__ = name
    return method


def _unary(op: str, name: str):
    def method(self):
        if self._ag is None:
            return OPS.unary(op, self)
        return AG.unary(op, self)

    method.__name__ = method.__qualname__ = name
    return method


def _reduction(op: str):
    def method(self, dim=None, keepdim: bool = False):
        if self._ag is None:
            return _reduce.reduce(op, self, dim, keepdim)
        return AG.reduce(op, self, dim, keepdim)

    method.__name__ = op
    method.__doc__ = f"The {op} over ``dim`` (all dimensions if None)."
    return method


def _from_table() -> dict:
    """The methods and operators each op table entry declares."""
    methods: dict = {}
    for op in OP_TABLE.values():
        make = _unary if op.arity == 1 else _binary
        if op.method:
            methods.update(dict.fromkeys(op.methods, make(op.name, op.method)))  # aliases: the same method
        if op.symbol and op.arity == 1:
            methods[f"__{op.name}__"] = make(op.name, f"__{op.name}__")
        elif op.symbol:
            methods[f"__{op.name}__"] = make(op.name, f"__{op.name}__")
            if op.result != "bool":  # comparisons reflect through their mirror (a < b is b > a)
                methods[f"__r{op.name}__"] = _binary(op.name, f"__r{op.name}__", reflected=True)
        if op.inplace:
            methods[op.inplace] = methods[f"__i{op.name}__"] = _inplace(op.name, op.inplace)
    for name in ("__eq__", "__ne__"):
        methods[name] = _unequal_to_none(methods[name])
    return methods


def _unequal_to_none(method):
    """``method`` (``==`` or ``!=``), leaving a comparison with None or a string to
    Python (as PyTorch does): ``x == None`` is False, ``x != "a"`` True, ``x in
    [None, "auto"]`` works."""

    def compare(self, other):
        if other is None or isinstance(other, (str, bytes)):
            return NotImplemented
        return method(self, other)

    compare.__name__ = compare.__qualname__ = method.__name__
    return compare


class ValuesIndices(NamedTuple):
    """What ``x.max(dim)`` and ``x.min(dim)`` return, as PyTorch: the extreme
    values along ``dim`` and the index of the first of each (int64)."""

    values: Tensor
    indices: Tensor


def _first_index(x: Tensor, best: Tensor, dim: int, keepdim: bool) -> Tensor:
    """The index along ``dim`` of the first element of ``x`` equal to ``best``
    (its max or min along ``dim``, kept as a dimension of 1; the first NaN
    where one is, as the max and min take NaN)."""
    with no_grad():
        x, best = x.detach(), best.detach()
        n = x.shape[dim]
        hit = x == best
        if x.dtype.is_floating_point:
            hit = hit | ((x != x) & (best != best))
        place = [1] * x.ndim
        place[dim] = n
        positions = OPS.where(hit, arange(n).reshape(tuple(place)), n)
        return _reduce.reduce("min", positions, dim, keepdim)


def _extreme(op: str):
    reduction = _reduction(op)

    def method(self, dim=None, keepdim: bool = False):
        if dim is None:
            return reduction(self, None, keepdim)
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(
                f"{op}(dim) takes one dimension (an int) and returns (values, indices), got dim={dim!r}; "
                f"a{op}(dims) reduces over several"
            )
        values = reduction(self, dim, keepdim)
        if self.ndim == 0:
            self._dim(dim)  # only 0 or -1 names a 0-d tensor's dimension
            return ValuesIndices(values, OPS.fill(Tensor._empty((), dt.int64), 0))
        dim = self._dim(dim)
        best = values.detach() if keepdim else values.detach().unsqueeze(dim)
        indices = _first_index(self, best, dim, keepdim)
        if needs_grad(self) and self.numel():  # the gradient to the element indexed, as PyTorch's (not shared by ties)
            values = self.gather(dim, indices if keepdim else indices.unsqueeze(dim))
            values = values if keepdim else values.squeeze(dim)
        return ValuesIndices(values, indices)

    method.__name__ = op
    method.__doc__ = (
        f"The {op} of all elements (a 0-d tensor), or along one ``dim``: "
        f"``(values, indices)`` as PyTorch (``a{op}`` for several dims)."
    )
    return method


def _arg(op: str):
    def method(self, dim=None, keepdim: bool = False):
        if self.dtype.kind == "c":
            raise TypeError(f"arg{op}() is not defined for complex tensors (they have no order), got {self.dtype}")
        if dim is None:  # an index into the flattened tensor
            if self.numel() == 0:
                raise ValueError(f"arg{op}() of an empty tensor has no index to give; shape {self.shape}")
            flat = self.reshape(-1)
            index = _first_index(flat, _reduce.reduce(op, flat, 0, True), 0, False)
            return index.reshape((1,) * self.ndim if keepdim else ())
        if isinstance(dim, np.integer):  # a NumPy integer, as the reductions take one
            dim = int(dim)
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"arg{op}(dim) takes one dimension (an int) or None, got dim={dim!r}")
        if self.ndim == 0:
            self._dim(dim)
            return OPS.fill(Tensor._empty((), dt.int64), 0)
        dim = self._dim(dim)
        if self.shape[dim] == 0:
            raise ValueError(f"arg{op}() along an empty dimension has no index to give; shape {self.shape}, dim {dim}")
        return _first_index(self, _reduce.reduce(op, self, dim, True), dim, keepdim)

    method.__name__ = f"arg{op}"
    method.__doc__ = f"The index (int64) of the first {op} along ``dim``, or in the flattened tensor if None."
    return method


class TensorMath:
    """The methods written by hand (the rest come from the op table)."""

    amax, amin = _reduction("max"), _reduction("min")
    max, min = _extreme("max"), _extreme("min")  # noqa: A003 (PyTorch's names)
    argmax, argmin = _arg("max"), _arg("min")

    def __matmul__(self, other):
        if self._ag is None and not _tracked(other):
            return _matmul(self, other)
        return AG.matmul(self, other)

    def __rmatmul__(self, other):
        if self._ag is None:
            return _matmul(other, self)
        return AG.matmul(other, self)

    matmul = __matmul__

    def clamp(self, min=None, max=None):  # noqa: A002 (PyTorch's names)
        """Limit every element to ``[min, max]`` (either bound may be None)."""
        if self._ag is None and not _tracked(min) and not _tracked(max):
            return OPS.clamp(self, min, max)
        return AG.clamp(self, min, max)

    clip = clamp

    def where(self, condition, other):
        """``self`` where ``condition`` holds, ``other`` elsewhere."""
        if self._ag is None and not _tracked(other):
            return OPS.where(condition, self, other)
        return AG.where(condition, self, other)

    # -- copies and fills ---------------------------------------------------------
    def copy_(self, src):
        """Copy ``src`` (a tensor, broadcast and cast, or host data) into this tensor."""
        if self._ag is not None or _tracked(src):
            refuse_in_place("copy_()", self, src)
        if type(src) in TENSOR_TYPES:
            if (
                src.dtype is self.dtype and src.shape == self.shape and src._contig and self._contig
                and not overlaps(src, self)  # else copied first (cuMemcpy leaves overlapping copies undefined)
                and not capture_state.fusers  # (a copy kernel while tp.compile fuses)
            ):  # fmt: skip
                if self.numel():
                    nbytes = self.numel() * self.dtype.itemsize
                    get_backend().copy_dtod(self._ptr, src._ptr, nbytes, current_stream()._h)
                return self
            return OPS.copy(self, src)
        return upload(self, src)

    def fill_(self, value):
        if self._ag is not None:
            refuse_in_place("fill_()", self)
        return OPS.fill(self, value)

    def zero_(self):
        if self._ag is not None:
            refuse_in_place("zero_()", self)
        if self._contig and self.numel() and not capture_state.fusers:  # (a fill while tp.compile fuses)
            get_backend().memset(self._ptr, 0, self.numel() * self.dtype.itemsize, current_stream()._h)
            return self
        return self.fill_(0)

    def clone(self):
        if self._ag is not None:
            return AG.copy(self)
        return Tensor._empty(self.shape, self.dtype).copy_(self)  # a Tensor, also for a Parameter

    def contiguous(self):
        return self if self._contig else self.clone()

    def to(self, *args, dtype=None, device=None, non_blocking: bool = False, copy: bool = False):
        """This tensor as ``dtype`` (itself when already of that type, unless ``copy``),
        with PyTorch's forms: ``x.to(dtype)``, ``x.to(device)``, ``x.to(device, dtype)``,
        ``x.to(other)`` (its dtype), keywords ``dtype=``, ``device=`` and ``copy=``.
        The device is cuda:0, the one there is (any other is a sentence)."""
        dtype = to_arguments(args, dtype, device)  # non_blocking: every copy here is ordered on the stream
        if dtype is None:
            return self.clone() if copy else self
        dtype = dt.as_dtype(dtype)
        if dtype is self.dtype and not copy:
            return self
        if self._ag is not None:
            return AG.copy(self, dtype)
        return OPS.copy(Tensor._empty(self.shape, dtype), self)

    def float(self):
        return self.to(dt.float32)

    def double(self):
        return self.to(dt.float64)

    def half(self):
        return self.to(dt.float16)

    def bfloat16(self):
        return self.to(dt.bfloat16)

    def byte(self):
        return self.to(dt.uint8)

    def char(self):
        return self.to(dt.int8)

    def short(self):
        return self.to(dt.int16)

    def int(self):
        return self.to(dt.int32)

    def long(self):
        return self.to(dt.int64)

    def bool(self):
        return self.to(dt.bool)

    def type(self, dtype):
        return self.to(dtype)

    def cuda(self, device=None, non_blocking: bool = False):
        """The tensor itself: it is on cuda:0, the device there is (any other is a sentence)."""
        check_device(device)
        return self


def tensor_methods() -> dict:
    """Every method this module gives Tensor, by name."""
    methods = _from_table()
    methods.update({k: v for k, v in vars(TensorMath).items() if not k.startswith("__") or k.endswith("matmul__")})
    return methods


add_methods(tensor_methods())
