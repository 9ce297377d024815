"""Tensor methods and operators, each a thin call into ``_ops``."""

from __future__ import annotations

import importlib

from . import _dtype as dt
from .runtime.backend import get as get_backend
from .runtime.streams import current_stream


class _Lazy:
    """A module that imports ``Tensor`` (so not at import time here): bound on
    first use, then a plain global."""

    def __init__(self, module: str, name: str) -> None:
        self._module, self._name = module, name

    def __getattr__(self, attr: str):
        module = importlib.import_module(self._module, __package__)
        globals()[self._name] = module
        return getattr(module, attr)


OPS = _Lazy("._ops", "OPS")
MATMUL = _Lazy("._matmul", "MATMUL")
AG = _Lazy(".autograd._derivatives", "AG")  # ops on tensors that require grad


def _tracked(x) -> bool:
    """Whether ``x`` is a tensor with autograd state (then the op goes through ``AG``)."""
    return getattr(x, "_ag", None) is not None


def _binary(op: str, reflected: bool = False):
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

    method.__name__ = f"__{'r' if reflected else ''}{op}__"
    return method


_NUMBERS = {int, float, bool}


def _inplace(op: str):
    def method(self, other):
        if self._ag is not None or _tracked(other):
            AG.refuse_in_place(f"{op}_()", self, other)
        return OPS.binary(op, self, other, out=self)

    method.__name__ = f"{op}_"
    return method


def _unary(op: str):
    def method(self):
        if self._ag is None:
            return OPS.unary(op, self)
        return AG.unary(op, self)

    method.__name__ = op
    return method


def _reduction(op: str):
    def method(self, dim=None, keepdim: bool = False):
        if self._ag is None:
            return OPS.reduce(op, self, dim, keepdim)
        return AG.reduce(op, self, dim, keepdim)

    method.__name__ = op
    method.__doc__ = f"The {op} over ``dim`` (all dimensions if None)."
    return method


TENSOR_TYPES: set = set()  # Tensor and its subclasses: ``type(x) in TENSOR_TYPES`` is the fast paths' test


class TensorMath:
    """Operators and math methods of ``Tensor``."""

    __slots__ = ()

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        TENSOR_TYPES.add(cls)  # Tensor, and nn.Parameter, which takes the same fast paths

    __add__, __radd__ = _binary("add"), _binary("add", True)
    __sub__, __rsub__ = _binary("sub"), _binary("sub", True)
    __mul__, __rmul__ = _binary("mul"), _binary("mul", True)
    __truediv__, __rtruediv__ = _binary("truediv"), _binary("truediv", True)
    __floordiv__, __rfloordiv__ = _binary("floordiv"), _binary("floordiv", True)
    __mod__, __rmod__ = _binary("mod"), _binary("mod", True)
    __pow__, __rpow__ = _binary("pow"), _binary("pow", True)
    __and__, __rand__ = _binary("and"), _binary("and", True)
    __or__, __ror__ = _binary("or"), _binary("or", True)
    __xor__, __rxor__ = _binary("xor"), _binary("xor", True)
    __eq__, __ne__ = _binary("eq"), _binary("ne")
    __lt__, __le__ = _binary("lt"), _binary("le")
    __gt__, __ge__ = _binary("gt"), _binary("ge")
    __hash__ = object.__hash__
    __iadd__ = add_ = _inplace("add")
    __isub__ = sub_ = _inplace("sub")
    __imul__ = mul_ = _inplace("mul")
    __itruediv__ = div_ = _inplace("truediv")

    add, sub, mul = _binary("add"), _binary("sub"), _binary("mul")
    div = _binary("truediv")
    maximum, minimum = _binary("maximum"), _binary("minimum")
    eq, ne, lt, le, gt, ge = (_binary(o) for o in ("eq", "ne", "lt", "le", "gt", "ge"))

    __neg__ = neg = _unary("neg")
    __abs__ = abs = _unary("abs")
    __invert__ = logical_not = _unary("invert")
    exp, log, sqrt, tanh = _unary("exp"), _unary("log"), _unary("sqrt"), _unary("tanh")
    sin, cos, sigmoid, relu = _unary("sin"), _unary("cos"), _unary("sigmoid"), _unary("relu")

    sum, mean = _reduction("sum"), _reduction("mean")
    max, min = _reduction("max"), _reduction("min")  # noqa: A003 (PyTorch's names)
    amax, amin = max, min  # noqa: A003

    def __matmul__(self, other):
        if self._ag is None and not _tracked(other):
            return MATMUL.matmul(self, other)
        return AG.matmul(self, other)

    def __rmatmul__(self, other):
        if self._ag is None:
            return MATMUL.matmul(other, self)
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
            AG.refuse_in_place("copy_()", self, src)
        if type(src) in TENSOR_TYPES:
            if (
                src.dtype is self.dtype and src.shape == self.shape and src._contig and self._contig
                and (src._storage is not self._storage or not OPS.overlaps(src, self))  # else copied first
            ):  # fmt: skip
                if self.numel():
                    nbytes = self.numel() * self.dtype.itemsize
                    get_backend().copy_dtod(self._ptr, src._ptr, nbytes, current_stream()._h)
                return self
            return OPS.copy(self, src)
        from ._factories import upload

        return upload(self, src)

    def fill_(self, value):
        if self._ag is not None:
            AG.refuse_in_place("fill_()", self)
        return OPS.fill(self, value)

    def zero_(self):
        if self._ag is not None:
            AG.refuse_in_place("zero_()", self)
        if self._contig and self.numel():
            get_backend().memset(self._ptr, 0, self.numel() * self.dtype.itemsize, current_stream()._h)
            return self
        return self.fill_(0)

    def clone(self):
        if self._ag is not None:
            return AG.copy(self)
        return OPS.Tensor._empty(self.shape, self.dtype).copy_(self)  # a Tensor, also for a Parameter

    def contiguous(self):
        return self if self._contig else self.clone()

    def to(self, dtype, copy: bool = False):
        """This tensor as ``dtype`` (itself when already of that type, unless ``copy``)."""
        if isinstance(dtype, str) and dtype in ("cuda", "cuda:0"):
            return self.clone() if copy else self
        dtype = dt.as_dtype(dtype)
        if dtype is self.dtype and not copy:
            return self
        if self._ag is not None:
            return AG.copy(self, dtype)
        return OPS.copy(OPS.Tensor._empty(self.shape, dtype), self)

    def float(self):
        return self.to(dt.float32)

    def double(self):
        return self.to(dt.float64)

    def half(self):
        return self.to(dt.float16)

    def int(self):
        return self.to(dt.int32)

    def long(self):
        return self.to(dt.int64)

    def bool(self):
        return self.to(dt.bool)

    def type(self, dtype):
        return self.to(dtype)

    def cuda(self):
        return self
