"""Data types and the promotion rules of binary ops (PyTorch's)."""

from __future__ import annotations

import numpy as np

__all__ = ["DType", "bool", "float16", "float32", "float64", "int32", "int64"]

_builtin_bool = bool


class DType:
    """A tensor element type. Compare with ``tp.float32`` etc."""

    __slots__ = ("name", "np", "itemsize", "kind", "rank")

    def __init__(self, name: str, kind: str, rank: int) -> None:
        self.name = name
        self.np = np.dtype(name if name != "bool" else np.bool_)
        self.itemsize = self.np.itemsize
        self.kind = kind  # "b", "i" or "f"
        self.rank = rank  # order within a kind

    @property
    def is_floating_point(self) -> _builtin_bool:
        return self.kind == "f"

    def __repr__(self) -> str:
        return f"tensorplay.{self.name}"

    def __reduce__(self):
        return self.name


bool = DType("bool", "b", 0)  # noqa: A001
int32 = DType("int32", "i", 0)
int64 = DType("int64", "i", 1)
float16 = DType("float16", "f", 0)
float32 = DType("float32", "f", 1)
float64 = DType("float64", "f", 2)

ALL = (bool, int32, int64, float16, float32, float64)
_BY_NP = {d.np: d for d in ALL}
_KIND_ORDER = {"b": 0, "i": 1, "f": 2}
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
    """The result type of a binary op on two tensors."""
    if a is b:
        return a
    ka, kb = _KIND_ORDER[a.kind], _KIND_ORDER[b.kind]
    if ka != kb:
        return a if ka > kb else b
    return a if a.rank >= b.rank else b


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
    """The result type of a binary op on a tensor and a Python number."""
    k = scalar_kind(v)
    if _KIND_ORDER[k] <= _KIND_ORDER[t.kind]:
        return t
    return DEFAULT_FLOAT if k == "f" else DEFAULT_INT
