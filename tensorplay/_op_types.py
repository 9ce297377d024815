"""The dtype rules of the elementwise ops: from an op table entry
(``kernels/op_table.py``) and its operands' dtypes, the output dtype, the
dtype it computes in, the kernel's cast and the scalar type, and the sentence
for operands an entry does not take. ``_ops`` launches what these decide."""

from __future__ import annotations

import numpy as np

from . import _dtype as dt
from .kernels import elementwise as ew

__all__ = ["binary_types", "cast_for", "check_kinds", "result_dtype", "unary_types"]


def cast_for(compute: dt.DType) -> tuple[str, type]:
    """Kernel cast and scalar type: float16 and bfloat16 math run in float32."""
    if compute is dt.float16:
        return "float32", np.float32
    if compute is dt.bfloat16:
        return "bfloat16", np.float32
    return "none", compute.np.type


def kind(dtype: dt.DType) -> str:
    """A dtype's letter in an op table entry's ``kinds``."""
    if dtype.kind == "f":
        return "h" if dtype in (dt.float16, dt.bfloat16) else "f"
    return "u" if dtype.np.kind == "u" else dtype.kind


def in_words(kinds: str) -> str:
    """An entry's ``kinds`` as a reader says them ("bool or integer")."""
    words = ["bool"] if "b" in kinds else []
    words += ["integer"] if "i" in kinds or "u" in kinds else []
    words += ["floating-point" if "h" in kinds else "float32 or float64"] if "f" in kinds else []
    return " or ".join(words + (["complex"] if "c" in kinds else []))


def check_kinds(entry: ew.Op, dtype: dt.DType) -> None:
    """TypeError, in a sentence, when ``entry`` does not take ``dtype`` operands."""
    if kind(dtype) in entry.kinds:
        return
    name = entry.function or entry.name
    if dtype is dt.bool and "i" in entry.kinds and "f" in entry.kinds:  # arithmetic: on numbers only
        raise TypeError(f"{name} is not defined for bool tensors")
    label = f"'{entry.symbol}'" if entry.symbol and not entry.symbol.isalpha() else name
    words = in_words(entry.kinds)
    needs = f"{'an' if words[0] in 'aeiou' else 'a'} {words} tensor" if entry.arity == 1 else f"{words} tensors"
    raise TypeError(f"{label} needs {needs}, got {dtype}")


def result_dtype(op: str, a_dtype: dt.DType, b_dtype: dt.DType | None) -> tuple[dt.DType, dt.DType]:
    """(output dtype, compute dtype) of a binary op."""
    common = a_dtype if b_dtype is None else dt.promote(a_dtype, b_dtype)
    entry = ew.OPS[op]
    check_kinds(entry, common)
    if entry.result == "bool":
        return dt.bool, common
    if entry.result == "logical":
        return common, common
    if entry.result in ("float", "divide"):
        out = common if common.kind in "fc" else dt.DEFAULT_FLOAT
        return out, out
    if common is dt.bool:
        common = dt.int64  # arithmetic on bools counts them, as in NumPy's sum
    return common, common


def binary_types(op: str, compute_in: dt.DType) -> tuple[str, dt.DType, str, type]:
    """(the entry that computes it, output dtype, kernel cast, scalar type) of ``op`` on operands
    promoted to ``compute_in`` (the logical ops of bools are their bitwise ops)."""
    instead = ew.OPS[op].instead
    computed_by = instead[1] if instead and kind(compute_in) in instead[0] else op
    out_dtype, compute = result_dtype(op, compute_in, None)
    cast, scalar_type = cast_for(compute)
    if compute_in is dt.bool and compute is dt.int64:
        cast = "int64"  # True + True is 2 (a bool + bool kernel would give True)
    elif compute_in.kind not in "fc" and ew.OPS[op].result == "float":
        cast = "float32"  # integers are converted first, as for the unary ones (PyTorch's atan2, hypot...)
    elif cast == "bfloat16" and out_dtype is not dt.bfloat16:
        cast = "bfloat16_in"  # a comparison: bool results
    if compute.kind == "c":  # a real number goes in as a real scalar (a complex one is made a tensor: _operand)
        scalar_type = dt.real_dtype(compute).np.type
    return computed_by, out_dtype, cast, scalar_type


def unary_types(op: str, dtype: dt.DType) -> tuple[str, dt.DType, str]:
    """(the entry that computes it, output dtype, kernel cast) of unary ``op`` on ``dtype``."""
    entry = ew.OPS[op]
    check_kinds(entry, dtype)
    if entry.instead and kind(dtype) in entry.instead[0]:
        op, entry = entry.instead[1], ew.OPS[entry.instead[1]]  # floor of an integer is itself, ...
    if entry.result == "float" and dtype.kind not in "fc":
        # integers are converted first, as in PyTorch (NumPy's exp of an int8 is float16)
        return op, dt.DEFAULT_FLOAT, "float32"
    out_dtype = dt.bool if entry.result == "bool" else dt.real_dtype(dtype) if entry.result == "real" else dtype
    cast, _ = cast_for(dtype)
    if cast == "bfloat16" and out_dtype is not dt.bfloat16:
        cast = "bfloat16_in"  # a test: bool results
    return op, out_dtype, cast
