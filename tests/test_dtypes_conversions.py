"""The integer widths beyond int32 and int64: reductions (sums in int64),
casts between every pair of dtypes, factories and matrix products, against
NumPy references computed on Python ints and reduced explicitly with
``wrapped``. Promotion and arithmetic are in ``test_dtypes.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from helpers import EVERY_DTYPE, NARROW_INT_DTYPES, as_ints, full_range, wrapped

import tensorplay as tp

# Overflow wraps silently on the GPU: on the simulator it must not warn either.
pytestmark = pytest.mark.filterwarnings("error")

# -- reductions ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_sum_accumulates_in_int64(dtype):
    a = full_range(dtype, n=700, seed=8).reshape(2, 350)
    x = tp.tensor(a)
    total = x.sum()
    assert total.dtype == tp.int64 and x.sum(-1).dtype == tp.int64
    assert total.item() == int(wrapped([sum(as_ints(a.ravel()))], tp.int64)[0])  # uint64: modulo 2**64
    np.testing.assert_array_equal(x.sum(-1).numpy(), wrapped([sum(as_ints(r)) for r in a], tp.int64))
    np.testing.assert_array_equal(x.sum(0).numpy(), wrapped([sum(as_ints(c)) for c in a.T], tp.int64))
    long_row = tp.full((1, 1500), 100, dtype=dtype)  # the two-pass path: partials in int64
    assert long_row.sum(-1).tolist() == [100 * 1500]


def test_sum_and_mean_methods_take_pytorch_dtype():
    a = np.array([[100, -7, 3], [100, 90, 1]], dtype=np.int8)
    x = tp.tensor(a)
    got = x.sum(dtype=tp.float64)
    assert got.dtype is tp.float64 and got.item() == float(a.astype(np.float64).sum())
    by_row = x.sum(1, True, dtype=tp.int16)  # summed in 64 bits, then int16 (PyTorch's result)
    assert by_row.dtype is tp.int16 and by_row.tolist() == [[96], [191]]
    assert x.mean(dtype=tp.float64).item() == pytest.approx(a.astype(np.float64).mean(), rel=1e-15)
    halves = tp.tensor([60000.0, 60000.0], dtype=tp.float16)
    assert halves.sum(dtype=tp.float32).item() == 120000.0  # float16 itself would overflow
    w = tp.ones(3, requires_grad=True)
    w.sum(dtype=tp.float64).backward()
    assert w.grad.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_max_min_and_arg_keep_the_dtype(dtype):
    a = full_range(dtype, n=1400, seed=9).reshape(2, 700)  # the two-pass path too
    x = tp.tensor(a)
    for name, ref in (("amax", max), ("amin", min)):
        r = getattr(x, name)(-1)
        assert r.dtype == dtype
        assert r.tolist() == [ref(as_ints(row)) for row in a]
        assert getattr(x, name)().item() == ref(as_ints(a.ravel()))
    values, indices = x.max(1)
    assert values.tolist() == [max(as_ints(r)) for r in a] and indices.tolist() == [
        as_ints(r).index(max(as_ints(r))) for r in a
    ]
    assert x.argmin().item() == as_ints(a.ravel()).index(min(as_ints(a.ravel())))
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


OUT_OF_RANGE = [300.0, 300.7, -1.0, -1.5, -200.0, 255.9, 256.0, 1000.0, 32767.0, 32768.0, 40000.0, 65535.0]
OUT_OF_RANGE += [65536.0, 70000.0, -32769.0, -70000.0, 3e9, -3e9, 1e20, -1e20, float("inf"), float("-inf")]


def gpu_float_to_int(value: float, dtype) -> int:
    """The README's rule: towards zero, saturating at the bounds of the type,
    or for 8-bit types at those of its 16-bit sibling, keeping the low byte."""
    bits = max(dtype.itemsize * 8, 16)
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dtype.is_signed else (0, (1 << bits) - 1)
    kept = hi if value >= hi else lo if value <= lo else int(value)  # int() goes towards zero
    return int(wrapped([kept], dtype)[0])


@pytest.mark.parametrize("source", [tp.float16, tp.float32, tp.float64], ids=str)
@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES + (tp.int32, tp.int64), ids=str)
def test_out_of_range_floats_convert_as_the_readme_says(source, dtype):
    """README, "Where tensorplay differs from PyTorch": 8-bit types keep the low
    byte of a saturated 16-bit conversion (300.0 -> uint8 is 44), wider ones saturate."""
    with np.errstate(over="ignore"):  # 70000 and beyond are inf in float16
        host = np.array(OUT_OF_RANGE).astype(source.np)
    got = tp.tensor(host).to(dtype)
    assert got.tolist() == [gpu_float_to_int(float(v), dtype) for v in host]
    assert tp.tensor(host)[::2].to(dtype).tolist() == got.tolist()[::2]  # the strided kernels too


def test_the_readmes_conversion_examples_hold():
    """Each "`tp....` is N" of the README's bullet on floats converted to integers
    (values below, inside and above uint8's range)."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    bullet = re.search(r"^- a float converted to an integer type.*?(?=^- )", readme, flags=re.M | re.S).group(0)
    claims = re.findall(r"`(tp\.[^`]*)` is (-?\d+)", " ".join(bullet.split()))
    assert len(claims) >= 3, bullet
    for expression, value in claims:
        assert eval(expression, {"tp": tp}).tolist() == [int(value)], expression


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
    host = full_range(dtype, seed=10)
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
    a = full_range(dtype, n=12, seed=11).reshape(3, 4)
    b = full_range(dtype, n=8, seed=12).reshape(4, 2)
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
