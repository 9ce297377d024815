"""The integer widths beyond int32 and int64 (uint8, int8, int16, uint16, uint32,
uint64): PyTorch's promotion table (bfloat16 included; its math is in
``test_bfloat16.py``), arithmetic that wraps as on the GPU,
reductions, casts and factories, against NumPy references computed on Python
ints (any size) and reduced explicitly with ``wrapped``.

Interop (NumPy, DLPack, ``__cuda_array_interface__``) is in ``test_interop.py``
and ``test_dlpack_capsule.py``.
"""

from __future__ import annotations

import operator
import re

import numpy as np
import pytest
from helpers import EVERY_DTYPE, NARROW_INT_DTYPES, assert_close, wrapped

import tensorplay as tp

# Overflow wraps silently on the GPU: on the simulator it must not warn either.
pytestmark = pytest.mark.filterwarnings("error")

# -- promotion ----------------------------------------------------------------------

# PyTorch's promote_types (c10/core/ScalarType.cpp), written out: rows and
# columns u1 i1 i2 i4 i8 f2 f4 f8 b1 bf. uint16, uint32 and uint64 promote only
# with themselves and with floating point types (PyTorch raises otherwise).
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
    """(a, b) -> the promoted dtype, or None where PyTorch raises."""
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
            table[x, y] = table[y, x] = x if x is y else y if other in ("f2", "f4", "f8", "bf") else None
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
                with pytest.raises(TypeError, match=f"^cannot promote {a.name} and {b.name}: as in PyTorch"):
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


def _full_range(dtype, n: int = 24, seed: int = 0) -> np.ndarray:
    """``n`` values of ``dtype``: its extremes, 0, 1, -1 (for signed types) and random ones."""
    info = np.iinfo(dtype.np)
    rng = np.random.default_rng(seed)
    edges = [info.min, info.max, 0, 1, info.max - 1] + ([-1, info.min + 1] if info.min else [2])
    drawn = [int(v) for v in rng.integers(info.min, info.max, size=n - len(edges), dtype=dtype.np, endpoint=True)]
    return np.array(edges + drawn, dtype=dtype.np)


def _py(a: np.ndarray) -> list:
    return [int(v) for v in a]


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
    a, b = _full_range(dtype, seed=1), _full_range(dtype, seed=2)[::-1].copy()
    if op in ("floordiv", "mod"):
        b[b == 0] = 3  # integer division by zero has no defined result
    got = fn(tp.tensor(a), tp.tensor(b))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.numpy(), wrapped([ref(x, y) for x, y in zip(_py(a), _py(b), strict=True)], dtype))


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_strided_broadcast_and_scalar_operands(dtype):
    a = _full_range(dtype, n=40, seed=3).reshape(4, 10)
    x = tp.tensor(a)
    col = tp.tensor(a[:, :1].copy())
    want = wrapped([[int(v) + int(c) for v in row] for row, c in zip(a, a[:, 0], strict=True)], dtype)
    np.testing.assert_array_equal((x + col).numpy(), want)  # a broadcast operand
    np.testing.assert_array_equal((x.t() * 3).numpy(), wrapped([[3 * int(v) for v in r] for r in a.T], dtype))
    np.testing.assert_array_equal((7 - x[:, ::3]).numpy(), wrapped([[7 - int(v) for v in r] for r in a[:, ::3]], dtype))


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_unary_ops_and_powers_wrap(dtype):
    a = _full_range(dtype, seed=4)
    x = tp.tensor(a)
    np.testing.assert_array_equal((-x).numpy(), wrapped([-v for v in _py(a)], dtype))
    np.testing.assert_array_equal(x.abs().numpy(), wrapped([abs(v) for v in _py(a)], dtype))
    np.testing.assert_array_equal((~x).numpy(), wrapped([~v for v in _py(a)], dtype))
    np.testing.assert_array_equal(x.relu().numpy(), wrapped([max(v, 0) for v in _py(a)], dtype))
    np.testing.assert_array_equal((x**3).numpy(), wrapped([v**3 for v in _py(a)], dtype))
    assert (-x).dtype == (~x).dtype == (x**3).dtype == dtype


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_in_place_ops_wrap_and_keep_the_dtype(dtype):
    a = _full_range(dtype, seed=5)
    x = tp.tensor(a)
    x.add_(1)
    x *= 3
    x -= tp.tensor(a)
    np.testing.assert_array_equal(x.numpy(), wrapped([(v + 1) * 3 - v for v in _py(a)], dtype))
    assert x.dtype == dtype
    with pytest.raises(TypeError, match=f"in-place '\\+' would store tensorplay.float32 results in a {dtype} tensor"):
        x += 0.5


def test_in_place_ops_store_a_wider_result_into_a_narrow_tensor():
    x = tp.tensor([250, 3], dtype=tp.uint8)
    x += tp.tensor([10, -5], dtype=tp.int8)  # computed in int16, stored as uint8 (as PyTorch)
    assert x.tolist() == [4, 254] and x.dtype == tp.uint8


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_comparisons(dtype):
    a, b = _full_range(dtype, seed=6), _full_range(dtype, seed=7)
    x, y = tp.tensor(a), tp.tensor(b)
    for op in (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne):
        np.testing.assert_array_equal(op(x, y).numpy(), [op(p, q) for p, q in zip(_py(a), _py(b), strict=True)])
    np.testing.assert_array_equal((x > 1).numpy(), [v > 1 for v in _py(a)])


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


# -- reductions ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_sum_accumulates_in_int64(dtype):
    a = _full_range(dtype, n=700, seed=8).reshape(2, 350)
    x = tp.tensor(a)
    total = x.sum()
    assert total.dtype == tp.int64 and x.sum(-1).dtype == tp.int64
    assert total.item() == int(wrapped([sum(_py(a.ravel()))], tp.int64)[0])  # uint64: modulo 2**64
    np.testing.assert_array_equal(x.sum(-1).numpy(), wrapped([sum(_py(r)) for r in a], tp.int64))
    np.testing.assert_array_equal(x.sum(0).numpy(), wrapped([sum(_py(c)) for c in a.T], tp.int64))
    long_row = tp.full((1, 1500), 100, dtype=dtype)  # the two-pass path: partials in int64
    assert long_row.sum(-1).tolist() == [100 * 1500]


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_max_min_and_arg_keep_the_dtype(dtype):
    a = _full_range(dtype, n=1400, seed=9).reshape(2, 700)  # the two-pass path too
    x = tp.tensor(a)
    for name, ref in (("amax", max), ("amin", min)):
        r = getattr(x, name)(-1)
        assert r.dtype == dtype
        assert r.tolist() == [ref(_py(row)) for row in a]
        assert getattr(x, name)().item() == ref(_py(a.ravel()))
    values, indices = x.max(1)
    assert values.tolist() == [max(_py(r)) for r in a] and indices.tolist() == [_py(r).index(max(_py(r))) for r in a]
    assert x.argmin().item() == _py(a.ravel()).index(min(_py(a.ravel())))
    assert x.any().item() and not tp.zeros(3, dtype=dtype).any().item() and not x.all().item()
    with pytest.raises(TypeError, match=f"mean\\(\\) needs a floating point tensor, got {dtype}"):
        x.mean()


# -- casts and factories ------------------------------------------------------------------


@pytest.mark.parametrize("src", EVERY_DTYPE, ids=str)
def test_casts_between_every_pair_of_dtypes(src):
    values = [0, 1, 2, 100, 127] if src is not tp.bool else [0, 1, 1, 0, 1]
    if src.kind != "b" and src.is_signed:
        values += [-1, -100]
    if src.kind == "i":  # values that wrap in narrower types
        info = np.iinfo(src.np)
        values += [v for v in (255, 256, 300, -300, 70000, -70000, 2**40 + 5, -(2**40)) if info.min <= v <= info.max]
    x = tp.tensor(values, dtype=src)
    for dst in EVERY_DTYPE:
        y = x.to(dst)
        assert y.dtype == dst
        if dst is tp.bool:
            want = [v != 0 for v in values]
        elif dst.kind == "f":
            with np.errstate(over="ignore"):  # 70000 is inf in float16
                want = np.array(values, dtype=np.float64).astype(dst.np).tolist()  # exact, then one rounding
        elif src.kind == "f" and not dst.is_signed:
            want = [max(v, 0) for v in values]  # the GPU's conversion saturates (PyTorch's uint8 wraps: 255)
        else:
            want = wrapped(values, dst).tolist()
        assert y.tolist() == want, (src, dst)


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_floats_convert_towards_zero(dtype):
    values = [0.0, 2.7, 99.5, 127.9] + ([-2.7, -99.5] if dtype.is_signed else [])
    got = tp.tensor(values).to(dtype)
    assert got.tolist() == [int(v) for v in values]


def test_byte_char_short_and_dtype_names():
    x = tp.tensor([1, -1])
    assert (x.byte().dtype, x.char().dtype, x.short().dtype) == (tp.uint8, tp.int8, tp.int16)
    assert x.byte().tolist() == [1, 255]
    for d in NARROW_INT_DTYPES:
        assert tp.zeros(1, dtype=d.name).dtype is d and tp.zeros(1, dtype=d.np).dtype is d
        assert tp.zeros(1, dtype=d.np.type).dtype is d and repr(d) == f"tensorplay.{d.name}"
    assert [d.is_signed for d in NARROW_INT_DTYPES] == [False, True, True, False, False, False]
    assert not tp.bool.is_signed and tp.float16.is_signed


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_factories(dtype):
    info = np.iinfo(dtype.np)
    assert tp.zeros(2, 3, dtype=dtype).tolist() == [[0] * 3] * 2 and tp.zeros(2, dtype=dtype).dtype == dtype
    assert tp.ones(3, dtype=dtype).tolist() == [1, 1, 1]
    assert tp.full((2,), info.max, dtype=dtype).tolist() == [info.max] * 2
    assert tp.full((2,), info.min, dtype=dtype).tolist() == [info.min] * 2
    assert tp.empty(4, dtype=dtype).dtype == dtype
    assert tp.ones_like(tp.zeros(2, dtype=dtype)).dtype == dtype
    assert tp.arange(5, dtype=dtype).tolist() == [0, 1, 2, 3, 4]
    assert tp.arange(2, 11, 3, dtype=dtype).tolist() == [2, 5, 8]
    assert tp.arange(300, dtype=dtype).numpy().tolist() == wrapped(list(range(300)), dtype).tolist()  # wraps
    t = tp.tensor([[info.min, info.max]], dtype=dtype)
    assert t.dtype == dtype and t.tolist() == [[info.min, info.max]]
    host = _full_range(dtype, seed=10)
    for made in (tp.tensor(host), tp.from_numpy(host), tp.as_tensor(host)):
        assert made.dtype == dtype and made.numpy().dtype == host.dtype
        np.testing.assert_array_equal(made.numpy(), host)
    for bad in (info.max + 1, info.min - 1):
        message = f"fill value {bad} is out of range for {dtype} ({info.min} to {info.max})"
        with pytest.raises(OverflowError, match=re.escape(message)):
            tp.full((2,), bad, dtype=dtype)


def test_fill_and_copy_from_host_into_narrow_tensors():
    x = tp.zeros(3, dtype=tp.int16)
    x.fill_(-7)
    assert x.tolist() == [-7] * 3
    x[1:] = [300, -300]
    x.copy_(np.array([1, 2, 3], dtype=np.uint8))
    assert x.tolist() == [1, 2, 3] and x.dtype == tp.int16
    assert "dtype=tensorplay.uint16" in repr(tp.ones(2, dtype=tp.uint16))


@pytest.mark.parametrize("dtype", [tp.uint8, tp.int8, tp.uint64], ids=str)
def test_matmul_sums_in_64_bits_and_wraps_on_store(dtype):
    a = _full_range(dtype, n=12, seed=11).reshape(3, 4)
    b = _full_range(dtype, n=8, seed=12).reshape(4, 2)
    got = tp.tensor(a) @ tp.tensor(b)
    want = [[sum(int(p) * int(q) for p, q in zip(row, col, strict=True)) for col in b.T] for row in a]
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.numpy(), wrapped(want, dtype))


def test_a_compiled_function_runs_narrow_dtypes_eagerly():
    @tp.compile
    def f(x, y):
        return (x + y) * 2

    x, y = tp.tensor([100, 200], dtype=tp.uint8), tp.tensor([100, 100], dtype=tp.uint8)
    assert f(x, y).tolist() == [144, 88]  # (200 * 2) % 256, (300 % 256) * 2
    assert f.kernels() == []  # nothing fused: they are outside the fusable dtypes
