"""Data types and the promotion rules of binary ops: the array API standard's
tables where it has them, PyTorch's rules where it leaves a pair unspecified
(mixed kinds, float16 and bfloat16, Python numbers with a tensor of a lower kind)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = [
    "DType", "bfloat16", "bool", "complex64", "complex128", "float16", "float32", "float64", "int8", "int16",
    "int32", "int64", "uint8", "uint16", "uint32", "uint64",
]  # fmt: skip

_builtin_bool = bool


class DType:
    """A tensor element type. Compare with ``tp.float32`` etc."""

    __slots__ = ("name", "np", "itemsize", "kind")

    def __init__(self, name: str, kind: str, np_type=None) -> None:
        self.name = name
        self.np = np.dtype(np_type or name)
        self.itemsize = self.np.itemsize
        # PyTorch's category: "b" (bool), "i" (integer, signed or not), "f" (real floating point) or "c" (complex)
        self.kind = kind

    @property
    def is_floating_point(self) -> _builtin_bool:
        """As PyTorch's: True for the real floating-point types (not the complex ones)."""
        return self.kind == "f"

    @property
    def is_complex(self) -> _builtin_bool:
        return self.kind == "c"

    @property
    def is_signed(self) -> _builtin_bool:
        """As PyTorch's ``dtype.is_signed``: False for bool and the unsigned integers."""
        # self.kind, not NumPy's: ml_dtypes' bfloat16 is of NumPy kind "V"
        return self.kind in "fc" or self.np.kind == "i"

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
# Two floats side by side, real part first (NumPy's and DLPack's layout too)
complex64 = DType("complex64", "c")
complex128 = DType("complex128", "c")

ALL = (
    bool, uint8, int8, int16, int32, int64, uint16, uint32, uint64, float16, bfloat16, float32, float64,
    complex64, complex128,
)  # fmt: skip
_BY_NP = {d.np: d for d in ALL}
_KIND_ORDER = {"b": 0, "i": 1, "f": 2, "c": 3}
_SIGNED = {1: int8, 2: int16, 4: int32, 8: int64}  # by item size
DEFAULT_FLOAT = float32
DEFAULT_INT = int64
DEFAULT_COMPLEX = complex64


def real_dtype(d: DType) -> DType:
    """The type of a complex type's real and imaginary parts; a real type itself."""
    return float64 if d is complex128 else float32 if d is complex64 else d


def complex_dtype(d: DType) -> DType:
    """The complex type holding a real floating-point type's values (complex64 for the 16-bit ones)."""
    return d if d.kind == "c" else complex128 if d is float64 else complex64


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
    """The result type of a binary op on two tensors.

    Within a kind, the array API standard's tables: the wider type; an unsigned
    type with a signed one gives a signed type of twice the unsigned width at
    least (uint64 with a signed type, which no integer type holds, is a
    TypeError, as in PyTorch); float64 with complex64 gives complex128. Across
    kinds, which the standard leaves open, PyTorch's ``promote_types``: the
    higher kind wins (bool, then integers, then floating point, then complex),
    and float16 with bfloat16 gives float32."""
    if a is b:
        return a
    if a.kind != b.kind:
        low, high = (a, b) if _KIND_ORDER[a.kind] < _KIND_ORDER[b.kind] else (b, a)
        if high.kind == "c" and low is float64:
            return complex128
        return high
    if a.kind == "c" or a.kind == "f":
        if a.itemsize == b.itemsize:  # float16 and bfloat16: neither holds the other
            return float32
        return a if a.itemsize > b.itemsize else b
    if a.is_signed == b.is_signed:
        return a if a.itemsize >= b.itemsize else b
    signed, unsigned = (a, b) if a.is_signed else (b, a)
    if unsigned.itemsize == 8:
        raise TypeError(
            f"cannot promote {a.name} and {b.name}: no integer type holds both (the array API standard leaves "
            "the pair unspecified and PyTorch refuses it); convert one operand with .to(dtype) first"
        )
    return _SIGNED[max(2 * unsigned.itemsize, signed.itemsize)]


def scalar_kind(v) -> str:
    if isinstance(v, (_builtin_bool, np.bool_)):
        return "b"
    if isinstance(v, (int, np.integer)):
        return "i"
    if isinstance(v, (float, np.floating)):
        return "f"
    if isinstance(v, (complex, np.complexfloating)):
        return "c"
    raise TypeError(f"expected a tensor or a Python number, got {type(v).__name__}")


def default_for_kind(kind: str) -> DType:
    """The dtype of new tensors made from data of a NumPy kind ("b", "i", "u", "f", "c")."""
    return bool if kind == "b" else DEFAULT_INT if kind in "iu" else DEFAULT_COMPLEX if kind == "c" else DEFAULT_FLOAT


def scalar_dtype(v) -> DType:
    """The dtype of a tensor made from the Python number ``v`` (float32 for floats, complex64 for complex)."""
    return default_for_kind(scalar_kind(v))


def can_store(result: DType, target: DType) -> _builtin_bool:
    """Whether an in-place op may write ``result`` values into a ``target`` tensor."""
    return _KIND_ORDER[result.kind] <= _KIND_ORDER[target.kind]


def promote_scalar(t: DType, v) -> DType:
    """The result type of a binary op on a tensor and a Python number: the
    tensor's unless the number is of a higher kind (PyTorch's rule: an int
    keeps an integer tensor's dtype, a float gives the default float dtype); a
    complex number with a floating-point tensor gives the complex type of its
    precision (the standard's rule), with a bool or integer tensor complex64."""
    k = scalar_kind(v)
    if _KIND_ORDER[k] <= _KIND_ORDER[t.kind]:
        return t
    if k == "c":
        return complex_dtype(t) if t.kind == "f" else DEFAULT_COMPLEX
    return DEFAULT_FLOAT if k == "f" else DEFAULT_INT
