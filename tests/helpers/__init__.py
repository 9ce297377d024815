"""Helpers shared by the test tree: NumPy references and seeded random data.

Tests compare tensorplay results with NumPy computed in float64 (an independent
reference), so results are checked against what the math says rather than
against another float32 implementation.

``assert_close(tensor, expected, rtol=None, atol=None, dtype=None)``
    ``tensor.numpy()`` and ``expected`` compared in float64 (shapes must match);
    tolerances default to ``tolerance(tensor.dtype)``; exact for ints and bools.
``tolerance(dtype) -> (rtol, atol)``
    Default tolerances of one rounding to ``dtype`` after float32-or-better math.
``random_array(shape, dtype, seed=0, low=-3.0, high=3.0, min_abs=0.1)``
    Seeded, never zero: floats in ``[low, high)`` with ``|x| >= min_abs``, ints
    in ``[low, high)`` without 0, bools with both values (two or more elements).
``random_tensor(shape, dtype, seed=0, **kw) -> (Tensor, ndarray)``
    ``random_array`` and its device copy.
``np_dtype(dtype) -> numpy.dtype``
    The NumPy dtype of a tensorplay dtype, a NumPy dtype or a name.
``wrapped(values, dtype) -> ndarray``
    Python ints (any size) reduced into an integer ``dtype`` as two's
    complement stores do: the reference for integer overflow.
``FLOAT_DTYPES``, ``INT_DTYPES``, ``ALL_DTYPES``
    tensorplay dtypes, for ``pytest.mark.parametrize``; ``NARROW_INT_DTYPES``
    the other integer widths (uint8, int8, int16, uint16, uint32, uint64) and
    ``EVERY_DTYPE`` all of them, bfloat16 too.
"""

from __future__ import annotations

import numpy as np

import tensorplay as tp
from tensorplay.kernels.timing import hold

__all__ = [
    "ALL_DTYPES",
    "EVERY_DTYPE",
    "FLOAT_DTYPES",
    "INT_DTYPES",
    "NARROW_INT_DTYPES",
    "as_ints",
    "assert_close",
    "full_range",
    "np_dtype",
    "random_array",
    "random_tensor",
    "reference",
    "spin",
    "tolerance",
    "wrapped",
]

FLOAT_DTYPES = (tp.float32, tp.float64, tp.float16)
INT_DTYPES = (tp.int32, tp.int64)
ALL_DTYPES = (*FLOAT_DTYPES, *INT_DTYPES, tp.bool)
NARROW_INT_DTYPES = (tp.uint8, tp.int8, tp.int16, tp.uint16, tp.uint32, tp.uint64)
EVERY_DTYPE = (*ALL_DTYPES, *NARROW_INT_DTYPES, tp.bfloat16)

_TOLERANCE = {"float16": (2e-3, 1e-3), "bfloat16": (8e-3, 1e-3), "float32": (1e-5, 1e-6), "float64": (1e-12, 1e-12)}


def np_dtype(dtype) -> np.dtype:
    """The NumPy dtype of a tensorplay dtype, a NumPy dtype or a name."""
    return dtype.np if isinstance(dtype, tp.DType) else np.dtype(dtype)


def tolerance(dtype) -> tuple[float, float]:
    """``(rtol, atol)`` for results of ``dtype``: (0, 0) for ints and bools."""
    return _TOLERANCE.get(np_dtype(dtype).name, (0.0, 0.0))


def assert_close(actual, expected, rtol: float | None = None, atol: float | None = None, dtype=None) -> None:
    """Assert that tensor ``actual`` holds ``expected`` (compared in float64).

    ``expected`` is anything ``np.asarray`` takes; its shape must equal the
    tensor's. ``dtype``, when given, must be the tensor's dtype. NaNs compare
    equal to NaNs.
    """
    assert isinstance(actual, tp.Tensor), f"expected a Tensor, got {type(actual).__name__}"
    if dtype is not None:
        assert actual.dtype == dtype, f"dtype {actual.dtype}, expected {dtype}"
    got = actual.numpy()
    want = np.asarray(expected)
    assert got.shape == want.shape, f"shape {got.shape}, expected {want.shape}"
    default_rtol, default_atol = tolerance(actual.dtype)
    np.testing.assert_allclose(
        got.astype(np.float64),
        want.astype(np.float64),
        rtol=default_rtol if rtol is None else rtol,
        atol=default_atol if atol is None else atol,
        equal_nan=True,
    )


def random_array(shape, dtype, seed: int = 0, low: float = -3.0, high: float = 3.0, min_abs: float = 0.1):
    """Seeded random data of ``dtype`` that is never zero (see the module docstring)."""
    rng = np.random.default_rng(seed)
    npd = np_dtype(dtype)
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if npd.kind == "b":
        out = rng.random(shape) < 0.5
        if out.size >= 2:
            out.flat[0], out.flat[1] = True, False
        return out
    if npd.kind in "iu":
        values = np.array([v for v in range(int(low), int(high)) if v != 0])
        return rng.choice(values, size=shape).astype(npd)
    out = rng.uniform(low, high, shape)
    small = np.abs(out) < min_abs
    while small.any():  # redraw near-zero values (never divide by ~0)
        out[small] = rng.uniform(low, high, int(small.sum()))
        small = np.abs(out) < min_abs
    return out.astype(npd)


def random_tensor(shape, dtype, seed: int = 0, **kwargs):
    """``(tensor, array)``: ``random_array(shape, dtype, seed, **kwargs)`` and its device copy."""
    host = random_array(shape, dtype, seed, **kwargs)
    return tp.tensor(host), host


def _exact(x) -> bool:
    return isinstance(x, (bool, int, np.integer, np.bool_)) or (isinstance(x, np.ndarray) and x.dtype.kind in "biu")


def wrapped(values, dtype) -> np.ndarray:
    """``values`` (Python ints of any size, nested lists or an object array)
    reduced modulo 2**bits into the integer ``dtype``, as a two's complement
    store keeps the low bits."""
    npd = np_dtype(dtype)
    bits = npd.itemsize * 8
    low = -(1 << (bits - 1)) if npd.kind == "i" else 0
    wrap = np.frompyfunc(lambda v: (int(v) - low) % (1 << bits) + low, 1, 1)
    return np.asarray(wrap(np.asarray(values, dtype=object)), dtype=object).astype(npd)


def reference(np_fn, *operands):
    """``np_fn`` on int64 copies when every operand is integral, else on float64 copies."""
    wide = np.int64 if all(_exact(x) for x in operands) else np.float64
    return np_fn(*[np.asarray(x).astype(wide) for x in operands])


# A kernel that keeps the device busy for ``n`` steps (for ordering tests): the
# library's own (the matmul autotuner's), launched as a tensorplay kernel.
spin = tp.jit(hold.py_func)


def full_range(dtype, n: int = 24, seed: int = 0) -> np.ndarray:
    """``n`` values of ``dtype``: its extremes, 0, 1, -1 (for signed types) and random ones."""
    info = np.iinfo(dtype.np)
    rng = np.random.default_rng(seed)
    edges = [info.min, info.max, 0, 1, info.max - 1] + ([-1, info.min + 1] if info.min else [2])
    drawn = [int(v) for v in rng.integers(info.min, info.max, size=n - len(edges), dtype=dtype.np, endpoint=True)]
    return np.array(edges + drawn, dtype=dtype.np)


def as_ints(a: np.ndarray) -> list:
    return [int(v) for v in a]
