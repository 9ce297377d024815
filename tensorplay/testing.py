"""``tp.testing.assert_close``: PyTorch's, for tensors, NumPy arrays and numbers.

The values are read back to the host and compared there in float64 (integers
exactly), so it waits for the device and is refused while a graph is being
captured: it is for tests.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import _dtype as dt
from ._tensor import Tensor

__all__ = ["assert_close"]

# PyTorch's default (rtol, atol) per dtype; (0, 0) for the others: integers and bools compare exactly
TOLERANCES = {
    dt.float16: (1e-3, 1e-5),
    dt.bfloat16: (1.6e-2, 1e-5),
    dt.float32: (1.3e-6, 1e-5),
    dt.float64: (1e-7, 1e-7),
}


def assert_close(
    actual,
    expected,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    check_dtype: bool = True,
    msg=None,
) -> None:
    """Assert that ``actual`` and ``expected`` have one shape (and dtype, with
    ``check_dtype``) and that ``|actual - expected| <= atol + rtol * |expected|``
    everywhere, as ``torch.testing.assert_close``.

    Without ``rtol`` and ``atol``, PyTorch's defaults for the dtypes (the
    larger of the two's): float16 (1e-3, 1e-5), bfloat16 (1.6e-2, 1e-5),
    float32 (1.3e-6, 1e-5), float64 (1e-7, 1e-7), exact for integers and
    bools. The AssertionError names the mismatched count and the largest
    absolute and relative differences with their index; ``msg`` (a string, or
    a function of that message) replaces it.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.testing.assert_close(tp.tensor([1.0, 2.0]), tp.tensor([1.0, 2.0 + 1e-6]))
    >>> tp.testing.assert_close(tp.tensor([1.0, 2.0]), tp.tensor([1.0, 2.5]))
    Traceback (most recent call last):
    ...
    AssertionError: Tensor-likes are not close!
    <BLANKLINE>
    Mismatched elements: 1 / 2 (50.0%)
    Greatest absolute difference: 0.5 at index (1,) (up to 1e-05 allowed)
    Greatest relative difference: 0.2 at index (1,) (up to 1.3e-06 allowed)
    """
    if (rtol is None) != (atol is None):
        raise ValueError(
            f"assert_close takes both rtol and atol, or neither (for the dtype's defaults), got rtol={rtol} "
            f"and atol={atol}"
        )
    if _is_number(actual) and _is_number(expected):
        _numbers(actual, expected, rtol, atol, equal_nan, msg)
        return
    (a, a_dtype), (e, e_dtype) = _host(actual), _host(expected)
    if a.shape != e.shape:
        _fail(f"The values for attribute 'shape' do not match: {a.shape} != {e.shape}.", msg)
    if check_dtype and a_dtype is not None and e_dtype is not None and a_dtype is not e_dtype:
        _fail(f"The values for attribute 'dtype' do not match: {a_dtype!r} != {e_dtype!r}.", msg)
    if rtol is None:
        rtol, atol = (max(t) for t in zip(*[TOLERANCES.get(d, (0.0, 0.0)) for d in (a_dtype, e_dtype)], strict=True))
    exact = a.dtype.kind in "biu" and e.dtype.kind in "biu"
    if exact:
        a, e = a.astype(np.int64) if a.dtype != np.uint64 else a, e.astype(np.int64) if e.dtype != np.uint64 else e
        matches = a == e if rtol == 0 and atol == 0 else np.isclose(a, e, rtol, atol)
    else:
        a, e = a.astype(np.float64), e.astype(np.float64)
        matches = np.isclose(a, e, rtol, atol, equal_nan)
    if not matches.all():
        _fail(_mismatch(a, e, matches, rtol, atol), msg)


def _is_number(x) -> bool:
    return isinstance(x, numbers.Number) and not isinstance(x, np.ndarray)


def _host(x) -> tuple[np.ndarray, dt.DType | None]:
    """``x`` as a host array, and its dtype when it has one (a tensor's or an array's)."""
    if isinstance(x, Tensor):
        return x.numpy(), x.dtype
    if isinstance(x, np.ndarray):
        try:
            return x, dt.from_numpy_dtype(x.dtype)
        except TypeError:
            return x, None
    return np.asarray(x), None


def _fail(message: str, msg) -> None:
    if msg is not None:
        message = msg(message) if callable(msg) else msg
    raise AssertionError(message)


def _mismatch(a: np.ndarray, e: np.ndarray, matches: np.ndarray, rtol: float, atol: float) -> str:
    """PyTorch's message: the mismatched count, the largest differences and where they are."""
    total = matches.size
    wrong = total - int(matches.sum())
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        abs_diff = np.abs(a - e) if a.dtype.kind == "f" else np.abs(a.astype(object) - e.astype(object))
        abs_diff = np.where(matches, 0, abs_diff).reshape(-1)
        rel_diff = np.where(
            matches.reshape(-1), 0.0, abs_diff.astype(np.float64) / np.abs(e.astype(np.float64)).reshape(-1)
        )
    abs_at, rel_at = _argmax(abs_diff), _argmax(rel_diff)
    equality = rtol == 0 and atol == 0
    lines = [
        f"Tensor-likes are not {'equal' if equality else 'close'}!",
        "",
        f"Mismatched elements: {wrong} / {total} ({wrong / total:.1%})",
        _difference("absolute", _item(abs_diff[abs_at]), _index(abs_at, matches.shape), atol, equality),
        _difference("relative", _item(rel_diff[rel_at]), _index(rel_at, matches.shape), rtol, equality),
    ]
    return "\n".join(lines)


def _argmax(v: np.ndarray) -> int:
    """The first position of the largest value, NaN counting as largest (as ``torch.max``)."""
    nan = np.isnan(v.astype(np.float64))
    return int(np.argmax(nan)) if nan.any() else int(np.argmax(v))


def _index(flat: int, shape: tuple) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape))


def _item(v):
    return v.item() if hasattr(v, "item") else v


def _difference(kind: str, diff, index: tuple | None, tol: float, equality: bool) -> str:
    if index is None:
        line = f"{kind.title()} difference: {diff}"
    else:
        line = f"Greatest {kind} difference: {diff} at index {index}"
    return line if equality else f"{line} (up to {tol} allowed)"


def _numbers(actual, expected, rtol, atol, equal_nan: bool, msg) -> None:
    """Two Python numbers: float64's tolerances when either is a float, else exact."""
    floats = isinstance(actual, float) or isinstance(expected, float)
    if rtol is None:
        rtol, atol = TOLERANCES[dt.float64] if floats else (0.0, 0.0)
    if np.isclose(actual, expected, rtol, atol, equal_nan):
        return
    diff = abs(actual - expected)
    relative = float("inf") if expected == 0 else diff / abs(expected)
    equality = rtol == 0 and atol == 0
    lines = [
        f"Scalars are not {'equal' if equality else 'close'}!",
        "",
        f"Expected {expected} but got {actual}.",
        _difference("absolute", diff, None, atol, equality),
        _difference("relative", relative, None, rtol, equality),
    ]
    _fail("\n".join(lines), msg)
