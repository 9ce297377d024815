"""Data types and the promotion rules of binary ops (PyTorch's)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = [
    "DType", "bfloat16", "bool", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
]  # fmt: skip

_builtin_bool = bool


class DType:
    """A tensor element type. Compare with ``tp.float32`` etc."""

    __slots__ = ("name", "np", "itemsize", "kind")

    def __init__(self, name: str, kind: str, np_type=None) -> None:
        self.name = name
        self.np = np.dtype(np_type or name)
        self.itemsize = self.np.itemsize
        self.kind = kind  # PyTorch's category: "b" (bool), "i" (integer, signed or not) or "f"

    @property
    def is_floating_point(self) -> _builtin_bool:
        return self.kind == "f"

    @property
    def is_signed(self) -> _builtin_bool:
        """As PyTorch's ``dtype.is_signed``: False for bool and the unsigned integers."""
        return self.np.kind in "if"

    def __repr__(self) -> str:
        return f"tensorplay.{self.name}"

    def __reduce__(self):
        return self.name


bool = DType("bool", "b", np.bool_)  # noqa: A001
uint8 = DType("uint8", "i")
int8 = DType("int8", "i")
int16 = DType("int16", "i")
int32 = DType("int32", "i")
int64 = DType("int64", "i")
uint16 = DType("uint16", "i")
uint32 = DType("uint32", "i")
uint64 = DType("uint64", "i")
float16 = DType("float16", "f")
float32 = DType("float32", "f")
float64 = DType("float64", "f")
# On the host, ml_dtypes' bfloat16 (NumPy has none); kernels get its bits as uint16 (kernels/bfloat16.py)
bfloat16 = DType("bfloat16", "f", ml_dtypes.bfloat16)

ALL = (bool, uint8, int8, int16, int32, int64, uint16, uint32, uint64, float16, bfloat16, float32, float64)
_BY_NP = {d.np: d for d in ALL}
_KIND_ORDER = {"b": 0, "i": 1, "f": 2}
# PyTorch gives these "limited support": they promote only to floating point types
_UNPROMOTED = frozenset((uint16, uint32, uint64))
DEFAULT_FLOAT = float32
DEFAULT_INT = int64


def from_numpy_dtype(dt) -> DType:
    """The DType for a NumPy dtype; TypeError naming the supported ones otherwise."""
    d = _BY_NP.get(np.dtype(dt))
    if d is None:
        raise TypeError(f"expected one of {', '.join(x.name for x in ALL)}, got dtype {np.dtype(dt)}")
    return d


def as_dtype(dt) -> DType:
    """Accept a DType, a NumPy dtype or a name such as ``"float32"``."""
    if isinstance(dt, DType):
        return dt
    if dt is float:
        return float64
    if dt is int:
        return int64
    if dt is _builtin_bool:
        return bool
    try:
        return from_numpy_dtype(np.dtype(dt))
    except (TypeError, ValueError):
        raise TypeError(f"expected a dtype (one of {', '.join(x.name for x in ALL)}), got {dt!r}") from None


def promote(a: DType, b: DType) -> DType:
    """The result type of a binary op on two tensors, as PyTorch's ``promote_types``:
    floating point wins, then the wider type (float16 with bfloat16: float32); uint8 with a signed type gives a
    signed type of at least 16 bits; uint16, uint32 and uint64 promote only to
    floating point (TypeError otherwise, as PyTorch refuses)."""
    if a is b:
        return a
    if a.kind == "f" or b.kind == "f":
        if a.kind != b.kind:
            return a if a.kind == "f" else b
        if a.itemsize == b.itemsize:  # float16 and bfloat16: neither holds the other
            return float32
        return a if a.itemsize > b.itemsize else b
    if a in _UNPROMOTED or b in _UNPROMOTED:
        raise TypeError(
            f"cannot promote {a.name} and {b.name}: as in PyTorch, uint16, uint32 and uint64 promote only to "
            "floating point types; convert one operand with .to(dtype) first"
        )
    if a is bool or b is bool:
        return b if a is bool else a
    if a.is_signed == b.is_signed:  # (both signed: uint8 is the only other)
        return a if a.itemsize >= b.itemsize else b
    signed = a if a.is_signed else b
    return signed if signed.itemsize > 1 else int16


def scalar_kind(v) -> str:
    if isinstance(v, (_builtin_bool, np.bool_)):
        return "b"
    if isinstance(v, (int, np.integer)):
        return "i"
    if isinstance(v, (float, np.floating)):
        return "f"
    raise TypeError(f"expected a tensor or a Python number, got {type(v).__name__}")


def default_for_kind(kind: str) -> DType:
    """The dtype of new tensors made from data of a NumPy kind ("b", "i", "u", "f")."""
    return bool if kind == "b" else DEFAULT_INT if kind in "iu" else DEFAULT_FLOAT


def scalar_dtype(v) -> DType:
    """The dtype of a tensor made from the Python number ``v`` (float32 for floats)."""
    return default_for_kind(scalar_kind(v))


def can_store(result: DType, target: DType) -> _builtin_bool:
    """Whether an in-place op may write ``result`` values into a ``target`` tensor."""
    return _KIND_ORDER[result.kind] <= _KIND_ORDER[target.kind]


def promote_scalar(t: DType, v) -> DType:
    """The result type of a binary op on a tensor and a Python number: the
    tensor's unless the number is of a higher kind (PyTorch's rule: an int
    keeps an integer tensor's dtype, a float gives the default float dtype)."""
    k = scalar_kind(v)
    if _KIND_ORDER[k] <= _KIND_ORDER[t.kind]:
        return t
    return DEFAULT_FLOAT if k == "f" else DEFAULT_INT
