"""The elementwise functions at the standard's special values (2024.12: signed
zeros, NaN, infinities, ties), against NumPy computed in the same dtype.

A result matches when both are NaN, or when both are equal with the same sign
bit where it matters (zeros and infinities), or, for a finite nonzero value,
when they agree within a few roundings. The sign of a NaN is compared only
where the standard defines it (``copysign``, ``signbit``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import tensorplay as tp

NEG_NAN = -np.float64(np.nan)  # a NaN with its sign bit set
VALUES = [np.nan, NEG_NAN, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, 2.5, 3.0, 1e-30, -1e-30]
RTOL = {"float32": 4e-7, "float64": 1e-15}


def _floor_divide(a, b):
    """NumPy's, but where an operand is infinite ``floor(a / b)``, as the standard
    prefers (NumPy, as Python, gives NaN for inf // 2 and -1 for -5 // inf)."""
    out = np.floor_divide(a, b)
    infinite = np.isinf(a) | np.isinf(b)
    out[infinite] = np.floor(a[infinite] / b[infinite])
    return out


UNARY = {
    "abs": np.abs, "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh,
    "atan": np.arctan, "atanh": np.arctanh, "ceil": np.ceil, "conj": np.conj, "cos": np.cos, "cosh": np.cosh,
    "exp": np.exp, "expm1": np.expm1, "floor": np.floor, "log": np.log, "log1p": np.log1p, "log2": np.log2,
    "log10": np.log10, "negative": np.negative, "positive": np.positive, "real": np.real,
    "reciprocal": np.reciprocal, "round": np.round, "sign": np.sign, "sin": np.sin, "sinh": np.sinh,
    "square": np.square, "sqrt": np.sqrt, "tan": np.tan, "tanh": np.tanh, "trunc": np.trunc,
    "isfinite": np.isfinite, "isinf": np.isinf, "isnan": np.isnan, "signbit": np.signbit,
    "logical_not": np.logical_not,
}  # fmt: skip
BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide, "atan2": np.arctan2,
    "copysign": np.copysign, "hypot": np.hypot, "logaddexp": np.logaddexp, "nextafter": np.nextafter,
    "pow": np.power, "floor_divide": _floor_divide, "remainder": np.remainder, "maximum": np.maximum,
    "minimum": np.minimum, "equal": np.equal, "not_equal": np.not_equal, "less": np.less,
    "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}  # fmt: skip
NAN_SIGN = {"copysign", "signbit"}  # the standard gives the sign of their NaNs


def _assert_matches(got: np.ndarray, want: np.ndarray, rtol: float, nan_sign: bool, where) -> None:
    assert got.dtype == want.dtype, f"dtype {got.dtype}, expected {want.dtype}"
    if want.dtype == np.bool_:
        bad = got != want
    else:
        g, w = got.astype(np.float64), want.astype(np.float64)
        nan = np.isnan(w)
        exact = ~nan & ((w == 0) | np.isinf(w))
        bad = np.isnan(g) != nan
        bad |= exact & ((g != w) | (np.signbit(g) != np.signbit(w)))
        near = ~nan & ~exact
        with np.errstate(invalid="ignore"):  # (inf - inf where g is infinite and w is not)
            bad |= near & ~(np.abs(g - w) <= rtol * np.abs(w))
        if nan_sign:
            bad |= nan & (np.signbit(g) != np.signbit(w))
    if bad.any():
        rows = [f"  {where(i)}: got {got.flat[i]!r}, NumPy {want.flat[i]!r}" for i in np.flatnonzero(bad)[:12]]
        raise AssertionError(f"{int(bad.sum())} results differ from NumPy's:\n" + "\n".join(rows))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_cases_as_numpy(name, dtype):
    a = np.array(VALUES, dtype=dtype)
    with np.errstate(all="ignore"):
        want = UNARY[name](a)
    got = getattr(tp, name)(tp.tensor(a)).numpy()
    _assert_matches(got, want, RTOL[dtype], name in NAN_SIGN, lambda i: f"{name}({a[i]!r})")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_special_cases_as_numpy(name, dtype):
    values = np.array(VALUES, dtype=dtype)
    a, b = np.repeat(values, len(values)), np.tile(values, len(values))  # every pair
    with np.errstate(all="ignore"):
        want = BINARY[name](a, b)
    got = getattr(tp, name)(tp.tensor(a), tp.tensor(b)).numpy()
    _assert_matches(got, want, RTOL[dtype], name in NAN_SIGN, lambda i: f"{name}({a[i]!r}, {b[i]!r})")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_round_takes_ties_to_even_and_keeps_large_values(dtype):
    big = 2.0**52 if dtype == "float64" else 2.0**23
    a = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.4, big + 1, -big - 1, big / 2 + 0.5], dtype=dtype)
    _assert_matches(tp.round(tp.tensor(a)).numpy(), np.round(a), 0.0, False, lambda i: f"round({a[i]!r})")


def test_special_functions_at_their_special_values():
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, -1.0, -2.0, 1.0, 2.0])
    t = tp.tensor(x)
    lgamma = [  # C99's: +inf at the poles and at both infinities
        np.inf,
        np.inf,
        np.nan,
        np.inf,
        np.inf,
        np.inf,
        np.inf,
        0.0,
        0.0,
    ]
    erf = [math.erf(v) if not math.isnan(v) else v for v in x]
    erfc = [math.erfc(v) if not math.isnan(v) else v for v in x]
    _assert_matches(tp.lgamma(t).numpy(), np.array(lgamma), 1e-15, False, lambda i: f"lgamma({x[i]!r})")
    _assert_matches(tp.erf(t).numpy(), np.array(erf), 1e-15, False, lambda i: f"erf({x[i]!r})")
    _assert_matches(tp.erfc(t).numpy(), np.array(erfc), 1e-15, False, lambda i: f"erfc({x[i]!r})")


def test_clip_with_nan_and_infinite_bounds():
    x = np.array([np.nan, -np.inf, np.inf, -0.0, 1.0, 5.0])
    got = tp.clip(tp.tensor(x), -np.inf, 2.0).numpy()
    np.testing.assert_array_equal(got, np.clip(x, -np.inf, 2.0))
    got = tp.clip(tp.tensor(x), np.nan, 2.0).numpy()
    np.testing.assert_array_equal(got, np.clip(x, np.nan, 2.0))
