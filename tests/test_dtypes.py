"""The integer widths beyond int32 and int64 (uint8, int8, int16, uint16, uint32,
uint64): PyTorch's promotion table, with the array API standard's rules for
uint16, uint32 and uint64 (bfloat16 included; its math is in
``test_bfloat16.py``), arithmetic that wraps as on the GPU,
against NumPy references computed on Python ints (any size) and reduced
explicitly with ``wrapped``. Reductions, casts and factories are in
``test_dtypes_conversions.py`` (two files, so that the GPU's test processes
share their kernels' compilation).

Interop (NumPy, DLPack, ``__cuda_array_interface__``) is in ``test_interop.py``
and ``test_dlpack_capsule.py``.
"""

from __future__ import annotations

import operator

import numpy as np
import pytest
from helpers import EVERY_DTYPE, NARROW_INT_DTYPES, as_ints, assert_close, full_range, wrapped

import tensorplay as tp

# Overflow wraps silently on the GPU: on the simulator it must not warn either.
pytestmark = pytest.mark.filterwarnings("error")

# -- promotion ----------------------------------------------------------------------

# PyTorch's promote_types (c10/core/ScalarType.cpp), written out: rows and
# columns u1 i1 i2 i4 i8 f2 f4 f8 b1 bf. uint16, uint32 and uint64, which PyTorch
# promotes only with themselves and floating point types, follow the array API
# standard's tables: the wider unsigned type, or a signed type twice as wide;
# uint64 with a signed type is refused (no integer type holds both).
_PYTORCH_TABLE = """
    u1 i1 i2 i4 i8 f2 f4 f8 b1 bf
u1  u1 i2 i2 i4 i8 f2 f4 f8 u1 bf
i1  i2 i1 i2 i4 i8 f2 f4 f8 i1 bf
i2  i2 i2 i2 i4 i8 f2 f4 f8 i2 bf
i4  i4 i4 i4 i4 i8 f2 f4 f8 i4 bf
i8  i8 i8 i8 i8 i8 f2 f4 f8 i8 bf
f2  f2 f2 f2 f2 f2 f2 f4 f8 f2 f4
f4  f4 f4 f4 f4 f4 f4 f4 f8 f4 f4
f8  f8 f8 f8 f8 f8 f8 f8 f8 f8 f8
b1  u1 i1 i2 i4 i8 f2 f4 f8 b1 bf
bf  bf bf bf bf bf f4 f4 f8 bf bf
"""
_CODES = {
    "u1": tp.uint8, "i1": tp.int8, "i2": tp.int16, "i4": tp.int32, "i8": tp.int64, "f2": tp.float16,
    "f4": tp.float32, "f8": tp.float64, "b1": tp.bool, "bf": tp.bfloat16, "u2": tp.uint16, "u4": tp.uint32,
    "u8": tp.uint64,
}  # fmt: skip


def _pytorch_promotion() -> dict:
    """(a, b) -> the promoted dtype, or None where tensorplay raises."""
    header, *rows = _PYTORCH_TABLE.strip().splitlines()
    columns = header.split()
    table = {}
    for row in rows:
        a, *results = row.split()
        for b, r in zip(columns, results, strict=True):
            table[_CODES[a], _CODES[b]] = _CODES[r]
    for u in ("u2", "u4", "u8"):
        for other in _CODES:
            x, y = _CODES[u], _CODES[other]
            if other in ("f2", "f4", "f8", "bf"):
                want = y
            elif other in ("b1", "u1", "u2", "u4", "u8"):
                want = x if x.itemsize >= y.itemsize else y
            else:  # a signed type
                want = None if u == "u8" else _CODES[f"i{max(2 * x.itemsize, y.itemsize)}"]
            table[x, y] = table[y, x] = want
    return table


PROMOTION = _pytorch_promotion()


@pytest.mark.parametrize("a", EVERY_DTYPE, ids=str)
def test_promotion_follows_pytorchs_table(a):
    mask = tp.tensor([True, False])
    for b in EVERY_DTYPE:
        want = PROMOTION[a, b]
        x, y = tp.ones(2, dtype=a), tp.zeros(2, dtype=b)
        if want is None:
            for op in (lambda x, y: tp.where(mask, x, y), operator.add, operator.eq, lambda x, y: tp.cat([x, y])):
                with pytest.raises(TypeError, match=f"^cannot promote {a.name} and {b.name}: no integer type"):
                    op(x, y)
            continue
        assert tp.where(mask, x, y).dtype == want, (a, b)
        assert tp.cat([x, y]).dtype == want, (a, b)
        if want is not tp.bool:  # (bool + bool counts: int64)
            assert (x + y).dtype == want, (a, b)
        assert (x < y).dtype == tp.bool


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_python_numbers_keep_an_integer_tensors_dtype_and_floats_give_float32(dtype):
    x = tp.tensor([1, 2, 3], dtype=dtype)
    assert (x + 1).dtype == dtype and (2 * x).dtype == dtype and (x + True).dtype == dtype
    assert (x + 0.5).dtype == tp.float32 and (0.5 * x).dtype == tp.float32
    assert_close(x + 0.5, [1.5, 2.5, 3.5])
    assert (tp.tensor([True]) + 1).dtype == tp.int64
    assert (tp.ones(1, dtype=tp.float16) + 1.5).dtype == tp.float16


def test_mixed_widths_compute_in_the_promoted_type():
    u, s = tp.tensor([200, 255, 0], dtype=tp.uint8), tp.tensor([-1, -128, 127], dtype=tp.int8)
    assert (u + s).dtype == tp.int16 and (u + s).tolist() == [199, 127, 127]
    assert (u * s).tolist() == [-200, -32640, 0]  # in int16: no wrap at 8 bits
    assert (u > s).tolist() == [True, True, False]  # 200 > -1: compared as numbers, not as bytes
    assert (u & s).tolist() == [200, 128, 0]  # int8 -1 sign-extends to 16 bits
    assert (s + tp.tensor([1000, 1000, 1000], dtype=tp.int16)).tolist() == [999, 872, 1127]


# -- arithmetic, against Python ints reduced into the dtype ---------------------------------


BINARY = {
    "add": (operator.add, lambda a, b: a + b),
    "sub": (operator.sub, lambda a, b: a - b),
    "mul": (operator.mul, lambda a, b: a * b),
    "floordiv": (operator.floordiv, lambda a, b: a // b),  # Python's floor, as torch.floor_divide
    "mod": (operator.mod, lambda a, b: a % b),  # the divisor's sign, as torch.remainder
    "and": (operator.and_, lambda a, b: a & b),
    "or": (operator.or_, lambda a, b: a | b),
    "xor": (operator.xor, lambda a, b: a ^ b),
    "maximum": (tp.maximum, max),
    "minimum": (tp.minimum, min),
}


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_binary_ops_wrap_as_twos_complement(dtype, op):
    fn, ref = BINARY[op]
    a, b = full_range(dtype, seed=1), full_range(dtype, seed=2)[::-1].copy()
    if op in ("floordiv", "mod"):
        b[b == 0] = 3  # integer division by zero has no defined result
    got = fn(tp.tensor(a), tp.tensor(b))
    assert got.dtype == dtype
    np.testing.assert_array_equal(
        got.numpy(), wrapped([ref(x, y) for x, y in zip(as_ints(a), as_ints(b), strict=True)], dtype)
    )


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_strided_broadcast_and_scalar_operands(dtype):
    a = full_range(dtype, n=40, seed=3).reshape(4, 10)
    x = tp.tensor(a)
    col = tp.tensor(a[:, :1].copy())
    want = wrapped([[int(v) + int(c) for v in row] for row, c in zip(a, a[:, 0], strict=True)], dtype)
    np.testing.assert_array_equal((x + col).numpy(), want)  # a broadcast operand
    np.testing.assert_array_equal((x.t() * 3).numpy(), wrapped([[3 * int(v) for v in r] for r in a.T], dtype))
    np.testing.assert_array_equal((7 - x[:, ::3]).numpy(), wrapped([[7 - int(v) for v in r] for r in a[:, ::3]], dtype))


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_unary_ops_and_powers_wrap(dtype):
    a = full_range(dtype, seed=4)
    x = tp.tensor(a)
    np.testing.assert_array_equal((-x).numpy(), wrapped([-v for v in as_ints(a)], dtype))
    np.testing.assert_array_equal(x.abs().numpy(), wrapped([abs(v) for v in as_ints(a)], dtype))
    np.testing.assert_array_equal((~x).numpy(), wrapped([~v for v in as_ints(a)], dtype))
    np.testing.assert_array_equal(x.relu().numpy(), wrapped([max(v, 0) for v in as_ints(a)], dtype))
    np.testing.assert_array_equal((x**3).numpy(), wrapped([v**3 for v in as_ints(a)], dtype))
    assert (-x).dtype == (~x).dtype == (x**3).dtype == dtype


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_in_place_ops_wrap_and_keep_the_dtype(dtype):
    a = full_range(dtype, seed=5)
    x = tp.tensor(a)
    x.add_(1)
    x *= 3
    x -= tp.tensor(a)
    np.testing.assert_array_equal(x.numpy(), wrapped([(v + 1) * 3 - v for v in as_ints(a)], dtype))
    assert x.dtype == dtype
    with pytest.raises(TypeError, match=f"in-place '\\+' would store tensorplay.float32 results in a {dtype} tensor"):
        x += 0.5


def test_in_place_ops_store_a_wider_result_into_a_narrow_tensor():
    x = tp.tensor([250, 3], dtype=tp.uint8)
    x += tp.tensor([10, -5], dtype=tp.int8)  # computed in int16, stored as uint8 (as PyTorch)
    assert x.tolist() == [4, 254] and x.dtype == tp.uint8


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_comparisons(dtype):
    a, b = full_range(dtype, seed=6), full_range(dtype, seed=7)
    x, y = tp.tensor(a), tp.tensor(b)
    for op in (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne):
        np.testing.assert_array_equal(op(x, y).numpy(), [op(p, q) for p, q in zip(as_ints(a), as_ints(b), strict=True)])
    np.testing.assert_array_equal((x > 1).numpy(), [v > 1 for v in as_ints(a)])


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_true_division_and_float_math_of_integers_give_float32(dtype):
    a = np.array([1, 2, 3, 7, 100, 5], dtype=dtype.np)
    x = tp.tensor(a)
    assert_close(x / tp.tensor(a[::-1].copy()), a / a[::-1].astype(np.float64), dtype=tp.float32)
    assert_close(x / 4, a / 4.0, dtype=tp.float32)
    wide = a.astype(np.float64)
    for name, ref in (("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("sin", np.sin), ("cos", np.cos),
                      ("tanh", np.tanh), ("sigmoid", lambda v: 1 / (1 + np.exp(-v)))):  # fmt: skip
        # float32 math throughout: neither NumPy's float16 exp of an int8 nor a negated unsigned
        with np.errstate(over="ignore"):
            want = ref(wide).astype(np.float32)  # exp(100) is inf in float32
        assert_close(getattr(x, name)(), want, dtype=tp.float32)
