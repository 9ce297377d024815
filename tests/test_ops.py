"""Tensor ops against NumPy in float64: arithmetic, comparisons, logic, math,
reductions, clamp/where, matmul, cat/stack, broadcasting and type promotion.

Sizes stay tiny because the simulator runs one Python thread per CUDA thread;
the reductions still take the two-pass path there (see ``_reduce``).
"""

import operator
import re

import numpy as np
import pytest
from helpers import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, assert_close, random_array, random_tensor, reference

import tensorplay as tp

NUM_DTYPES = FLOAT_DTYPES + INT_DTYPES

ARITH = {
    "+": (operator.add, np.add),
    "-": (operator.sub, np.subtract),
    "*": (operator.mul, np.multiply),
    "/": (operator.truediv, np.true_divide),
    "//": (operator.floordiv, np.floor_divide),
    "%": (operator.mod, np.mod),
    "**": (operator.pow, np.power),
}
COMPARE = {
    "==": (operator.eq, np.equal),
    "!=": (operator.ne, np.not_equal),
    "<": (operator.lt, np.less),
    "<=": (operator.le, np.less_equal),
    ">": (operator.gt, np.greater),
    ">=": (operator.ge, np.greater_equal),
}
LOGIC = {"&": (operator.and_, np.bitwise_and), "|": (operator.or_, np.bitwise_or), "^": (operator.xor, np.bitwise_xor)}


def arith_operands(op, dtype, shape_a, shape_b, seed=0):
    """Operands in each op's valid domain (positive bases for float powers, no 0 divisors)."""
    if op == "**":
        if dtype.is_floating_point:
            return random_tensor(shape_a, dtype, seed, low=0.5, high=2.5), random_tensor(shape_b, dtype, seed + 1)
        base = random_tensor(shape_a, dtype, seed, low=-3, high=4)
        return base, random_tensor(shape_b, dtype, seed + 1, low=0, high=4)  # no negative integer powers
    return random_tensor(shape_a, dtype, seed), random_tensor(shape_b, dtype, seed + 1)


# -- arithmetic --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", NUM_DTYPES, ids=str)
@pytest.mark.parametrize("op", ARITH)
def test_arithmetic(op, dtype):
    fn, np_fn = ARITH[op]
    (x, a), (y, b) = arith_operands(op, dtype, (3, 4), (3, 4))
    out = fn(x, y)
    want_dtype = tp.float32 if op == "/" and not dtype.is_floating_point else dtype
    assert_close(out, reference(np_fn, a, b), dtype=want_dtype)


@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
@pytest.mark.parametrize(
    "shape_a, shape_b",
    [
        ((3, 1, 4), (2, 4)),
        ((4,), (3, 4)),
        ((3, 1), (1, 4)),
        ((), (2, 3)),
        ((2, 3), ()),
        ((1,), (2, 3)),
        ((2, 1, 3), (2, 3, 1)),
        ((2, 3, 1, 2, 1), (3, 2, 2)),
    ],
    ids=str,
)
def test_broadcasting(op, shape_a, shape_b):
    fn, np_fn = ARITH[op]
    (x, a), (y, b) = arith_operands(op, tp.float32, shape_a, shape_b, seed=3)
    assert_close(fn(x, y), reference(np_fn, a, b), dtype=tp.float32)
    assert_close(fn(y, x), reference(np_fn, b, a), dtype=tp.float32)


def _permuted(shape, order, seed):
    """A tensor of ``shape`` whose memory is laid out in ``order`` (no two
    dimensions mergeable), with its NumPy twin."""
    stored = tuple(shape[d] for d in order)
    a = random_array(stored, tp.float32, seed=seed)
    back = tuple(int(i) for i in np.argsort(order))
    return tp.tensor(a).permute(*back), a.transpose(back)


@pytest.mark.parametrize(
    "shape_a, shape_b, layout",
    [
        ((5, 40), (40,), "rows2"),  # a bias row; rows of 40 (two warps, four rows per block)
        ((70, 33), (70, 1), "rows2"),  # a column; more rows than the simulator's grid
        ((3, 4, 37), (4, 1), "rows3"),
        ((2, 3, 2, 64), (3, 1, 64), "rows4"),
        ((2, 3, 2, 1, 2, 32), (3, 1, 2, 1, 1), "rows5"),
        ((6, 5), (5,), "nd2"),  # rows too short for a warp
        ((3, 2, 5), (3, 1, 5), "nd3"),
    ],
    ids=str,
)
def test_broadcast_layouts(shape_a, shape_b, layout):
    """Each kernel layout of a broadcast op (rows of >= 32 items; per-element
    index below), both operand orders."""
    from tensorplay._ops import _ND_PLANS

    _ND_PLANS.clear()  # a cache: the plans made below name their kernels
    (x, a), (y, b) = random_tensor(shape_a, tp.float32, seed=1), random_tensor(shape_b, tp.float32, seed=2)
    assert_close(x * y, reference(np.multiply, a, b), dtype=tp.float32)
    assert_close(y - x, reference(np.subtract, b, a), dtype=tp.float32)
    assert {plan.launcher.name.rsplit("_", 1)[1] for plan in _ND_PLANS.values()} == {layout}


def test_few_long_rows_are_shared_between_blocks(monkeypatch):
    """With a launch limit of a few blocks' worth of threads (a GPU's wave, made
    small), two long rows are each walked by several blocks (gridDim.y)."""
    from tensorplay._ops import _ND_PLANS
    from tensorplay.runtime import launch
    from tensorplay.runtime.caches import BoundedCache

    launch.grid_1d(1)  # reads the backend's limits
    monkeypatch.setattr(launch, "_limits", [256, 256 * 8, 1 << 30])
    monkeypatch.setattr(launch, "_grids", BoundedCache("test.grids", 64))  # shapes of these limits stay here
    assert launch.grid_rows(2, 2100) == ((2, 3, 1), (256, 1, 1))
    _ND_PLANS.clear()  # plans keep their launch shapes
    try:
        (x, a), (c, b) = random_tensor((2, 2100), tp.float32, seed=6), random_tensor((2, 1), tp.float32, seed=7)
        assert_close(x * c, reference(np.multiply, a, b), dtype=tp.float32)
    finally:
        _ND_PLANS.clear()


@pytest.mark.parametrize(
    "shape, order",
    [((33, 40), (1, 0)), ((2, 3, 4, 5, 6, 32), (5, 4, 3, 2, 1, 0)), ((2, 3, 4, 5, 6, 3), (5, 4, 3, 2, 1, 0))],
    ids=str,
)
def test_elementwise_on_permuted_layouts(shape, order):
    """Operands whose dimensions cannot be merged, up to six of them (rows and per-element kernels)."""
    x, a = _permuted(shape, order, seed=3)
    y, b = _permuted(shape, tuple(reversed(order)), seed=4)
    assert_close(x + y, reference(np.add, a, b), dtype=tp.float32)
    assert_close(x.exp(), reference(np.exp, a), dtype=tp.float32)


def test_elementwise_writes_strided_outputs_and_one_dimensional_strides():
    z = tp.zeros(8, 64)
    z[:, ::2].add_(tp.ones(32))  # rows of a strided output
    expected = np.zeros((8, 64))
    expected[:, ::2] += 1
    assert_close(z, expected, dtype=tp.float32)
    x, a = random_tensor((90,), tp.float32, seed=5)
    assert_close(x[::3] * 2.0 + x[1::3], reference(lambda p, q: p * 2.0 + q, a[::3], a[1::3]), dtype=tp.float32)
    zt = tp.zeros(40, 33)
    zt.t().copy_(tp.ones(33, 40) * 3.0)  # rows read contiguously, written across the output's memory
    assert_close(zt, np.full((40, 33), 3.0), dtype=tp.float32)


@pytest.mark.parametrize("dtype", [tp.float32, tp.float16, tp.int64, tp.bool], ids=str)
def test_transposed_copies_and_unary_ops_go_through_tiles(dtype):
    """2-D operands stored column-major into row-major outputs: whole and partial
    32 x 32 tiles, a slice of a transpose, a conversion and a unary op (small:
    each tile costs the simulator two barriers of 256 Python threads)."""
    from tensorplay._ops import _ND_PLANS

    _ND_PLANS.clear()
    x, a = random_tensor((40, 33), dtype, seed=8)
    assert_close(x.t().contiguous(), a.T, dtype=dtype)
    assert_close(x.t()[1:33, 2:36].contiguous(), a.T[1:33, 2:36], dtype=dtype)
    assert_close(x.t().to(tp.float64), a.T.astype(np.float64), dtype=tp.float64)
    if dtype.is_floating_point:
        assert_close(x.t().exp(), reference(np.exp, a.T), dtype=dtype)
    assert {plan.launcher.name.split("_")[-2] for plan in _ND_PLANS.values()} == {"transpose"}


def test_seven_unmergeable_dimensions_are_refused_with_advice():
    x = tp.zeros(*([2] * 7)).permute(6, 5, 4, 3, 2, 1, 0)
    with pytest.raises(ValueError, match="up to 6 non-mergeable dimensions.*contiguous"):
        x + x.contiguous()


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "//", "%"])
@pytest.mark.parametrize(
    "dtype, scalar, want",
    [
        (tp.float32, 2, tp.float32),
        (tp.float32, -1.5, tp.float32),
        (tp.float64, 1.5, tp.float64),
        (tp.float16, 3, tp.float16),
        (tp.float16, 0.75, tp.float16),
        (tp.int64, 3, tp.int64),
        (tp.int32, -2, tp.int32),
        (tp.int32, 1.5, tp.float32),
        (tp.int64, -2.5, tp.float32),
        (tp.int64, True, tp.int64),
        (tp.float32, np.float64(0.5), tp.float32),
        (tp.int32, np.int64(2), tp.int32),
    ],
    ids=str,
)
def test_python_scalars_on_either_side(op, dtype, scalar, want):
    fn, np_fn = ARITH[op]
    x, a = random_tensor((2, 5), dtype, seed=4)
    if op == "/" and not want.is_floating_point:
        want = tp.float32
    assert_close(fn(x, scalar), reference(np_fn, a, scalar), dtype=want)
    assert_close(fn(scalar, x), reference(np_fn, scalar, a), dtype=want)


def test_host_data_operands_promote_python_data_like_numbers_and_arrays_by_their_dtype():
    x = tp.tensor([1, 2], dtype=tp.int32)
    assert_close(x + [0.5, 0.25], [1.5, 2.25], dtype=tp.float32)  # Python data: like a Python float
    assert_close([3, 4] - x, [2, 2], dtype=tp.int32)
    assert_close(x * np.array([0.5, 1.5]), [0.5, 3.0], dtype=tp.float64)  # an array: its dtype, as NumPy's
    assert_close(
        tp.tensor([1.0, 2.0], dtype=tp.float16) * np.array([2.0, 0.5], np.float16), [2.0, 1.0], dtype=tp.float16
    )
    assert_close(x < np.array([[1.5], [2.5]]), [[True, False], [True, True]], dtype=tp.bool)
    with pytest.raises(TypeError, match="expected numbers, nested lists of numbers or an array, got list"):
        x + ["a", "b"]
    z = x + [1j, 2j]  # complex Python data: as a Python complex number, complex64
    assert z.dtype == tp.complex64
    np.testing.assert_array_equal(z.numpy(), [1 + 1j, 2 + 2j])
    assert (x + np.array([1j, 2j])).dtype == tp.complex128


def test_power_with_scalars():
    x, a = random_tensor((2, 5), tp.float32, seed=5, low=0.5, high=2.0)
    assert_close(x**2, a.astype(np.float64) ** 2, dtype=tp.float32)
    assert_close(x**0.5, np.sqrt(a.astype(np.float64)), dtype=tp.float32)
    assert_close(x**-1.5, a.astype(np.float64) ** -1.5, dtype=tp.float32)
    assert_close(2**x, 2.0 ** a.astype(np.float64), dtype=tp.float32)
    n, b = random_tensor((2, 5), tp.int64, seed=6, low=-4, high=5)
    assert_close(n**3, b**3, dtype=tp.int64)
    assert_close(n**2.0, b.astype(np.float64) ** 2, dtype=tp.float32)
    assert_close(3 ** (n.clamp(min=0)), 3 ** np.maximum(b, 0), dtype=tp.int64)


def test_neg_and_abs():
    for dtype in NUM_DTYPES:
        x, a = random_tensor((3, 4), dtype, seed=7)
        assert_close(-x, -a.astype(np.float64), dtype=dtype)
        assert_close(x.neg(), -a.astype(np.float64), dtype=dtype)
        assert_close(abs(x), np.abs(a.astype(np.float64)), dtype=dtype)
        assert_close(x.t().abs(), np.abs(a.T.astype(np.float64)), dtype=dtype)
    for _ in range(2):  # refused every time: no plan is kept for a refused op
        with pytest.raises(TypeError, match="neg is not defined for bool tensors"):
            -tp.tensor([True])
        with pytest.raises(TypeError, match="abs is not defined for bool tensors"):
            abs(tp.tensor([True]))
        with pytest.raises(TypeError, match="'~' needs a bool or integer tensor, got tensorplay.float32"):
            ~tp.ones(2)
    assert (~tp.tensor([True, False])).tolist() == [False, True]  # bool: logical not
    assert (~tp.tensor([True, False])).tolist() == [False, True]
    assert (~tp.tensor([5], dtype=tp.int32)).tolist() == [-6]  # int: bitwise


def test_float_division_and_modulo_signs():
    a = np.array([-7.5, -7.5, 7.5, 7.5, 6.0, -6.0], np.float64)
    b = np.array([2.0, -2.0, 2.0, -2.0, 4.0, 4.0], np.float64)
    x, y = tp.tensor(a), tp.tensor(b)
    assert_close(x // y, np.floor_divide(a, b))
    assert_close(x % y, np.mod(a, b))
    i, j = tp.tensor([-7, -7, 7, 7]), tp.tensor([2, -2, 2, -2])
    assert_close(i // j, [-4, 3, 3, -4], dtype=tp.int64)
    assert_close(i % j, [1, -1, 1, -1], dtype=tp.int64)


# -- type promotion ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "da, db, want",
    [
        (tp.int32, tp.float32, tp.float32),
        (tp.int64, tp.float16, tp.float16),
        (tp.int32, tp.int64, tp.int64),
        (tp.int32, tp.int32, tp.int32),
        (tp.float16, tp.float32, tp.float32),
        (tp.float32, tp.float64, tp.float64),
        (tp.float16, tp.float64, tp.float64),
        (tp.bool, tp.int32, tp.int32),
        (tp.bool, tp.float16, tp.float16),
        (tp.bool, tp.bool, tp.int64),  # arithmetic on bools counts them
    ],
    ids=str,
)
@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
def test_tensor_tensor_promotion(op, da, db, want):
    fn, np_fn = ARITH[op]
    x, a = random_tensor((2, 3), da, seed=8)
    y, b = random_tensor((3,), db, seed=9)
    if op == "/":  # no division by False; integer true division gives float32
        if da is tp.bool:
            a = np.ones_like(a)
            x = tp.tensor(a)
        if db is tp.bool:
            b = np.ones_like(b)
            y = tp.tensor(b)
        want = want if want.is_floating_point else tp.float32
    assert_close(fn(x, y), reference(np_fn, a, b), dtype=want)
    assert_close(fn(y, x), reference(np_fn, b, a), dtype=want)


def test_true_division_of_integers_gives_float32():
    x = tp.tensor([1, 2, -7], dtype=tp.int32)
    y = tp.tensor([2, 3, 2], dtype=tp.int32)
    assert_close(x / y, [0.5, 2 / 3, -3.5], dtype=tp.float32)
    assert_close(x / 4, [0.25, 0.5, -1.75], dtype=tp.float32)
    assert_close(1 / y, [0.5, 1 / 3, 0.5], dtype=tp.float32)
    assert_close(tp.tensor([True]) / tp.tensor([True]), [1.0], dtype=tp.float32)
    assert_close(x.div(y), [0.5, 2 / 3, -3.5], dtype=tp.float32)


# -- comparisons and logic --------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("op", COMPARE)
def test_comparisons(op, dtype):
    fn, np_fn = COMPARE[op]
    x, a = random_tensor((3, 4), dtype, seed=10)
    b = random_array((3, 4), dtype, seed=11)
    b[::2] = a[::2]  # ties
    y = tp.tensor(b)
    assert_close(fn(x, y), np_fn(a, b), dtype=tp.bool)
    assert_close(fn(x.t(), y.t()), np_fn(a.T, b.T), dtype=tp.bool)
    if dtype is not tp.bool:
        s = a.flat[3].item()
        assert_close(fn(x, s), np_fn(a, s), dtype=tp.bool)
        assert_close(fn(s, x), np_fn(s, a), dtype=tp.bool)


def test_comparisons_across_dtypes_and_methods():
    x = tp.tensor([1, 2, 3], dtype=tp.int32)
    y = tp.tensor([1.0, 2.5, 2.0], dtype=tp.float16)
    assert_close(x == y, [True, False, False], dtype=tp.bool)
    assert_close(x < y, [False, True, False], dtype=tp.bool)
    assert_close(x > 2.5, [False, False, True], dtype=tp.bool)
    assert_close(x.eq(1), [True, False, False])
    assert_close(x.ne(1), [False, True, True])
    assert_close(x.lt(2), [True, False, False])
    assert_close(x.le(2), [True, True, False])
    assert_close(x.gt(2), [False, False, True])
    assert_close(x.ge(2), [False, True, True])
    assert_close(tp.tensor([1.0, np.nan]) == tp.tensor([1.0, np.nan]), [True, False])
    assert_close(tp.tensor([1.0, np.nan]) != np.nan, [True, True])


@pytest.mark.parametrize("dtype", [tp.bool, *INT_DTYPES], ids=str)
@pytest.mark.parametrize("op", LOGIC)
def test_logical_and_bitwise_ops(op, dtype):
    fn, np_fn = LOGIC[op]
    x, a = random_tensor((3, 4), dtype, seed=12, low=-8, high=8)
    y, b = random_tensor((4,), dtype, seed=13, low=-8, high=8)
    assert_close(fn(x, y), np_fn(a, b), dtype=dtype)
    assert_close(fn(x.t()[::2], y[:3]), np_fn(a.T[::2], b[:3]), dtype=dtype)
    s = True if dtype is tp.bool else 6
    assert_close(fn(x, s), np_fn(a, s), dtype=dtype)
    assert_close(fn(s, x), np_fn(s, a), dtype=dtype)


@pytest.mark.parametrize("dtype", [tp.bool, *INT_DTYPES], ids=str)
def test_invert(dtype):
    x, a = random_tensor((3, 4), dtype, seed=14, low=-8, high=8)
    assert_close(~x, ~a, dtype=dtype)
    assert_close(~x[:, 1::2], ~a[:, 1::2], dtype=dtype)
    assert_close(x.logical_not(), np.logical_not(a), dtype=tp.bool)  # truth values, as PyTorch's


def test_logic_with_mixed_dtypes():
    assert_close(tp.tensor([True, False]) & tp.tensor([3, 3], dtype=tp.int32), [1, 0], dtype=tp.int32)
    assert_close(tp.tensor([5, 6], dtype=tp.int32) | tp.tensor([8, 1]), [13, 7], dtype=tp.int64)
    assert_close(tp.tensor([True, False]) | 2, [3, 2], dtype=tp.int64)


# -- in-place ops -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", NUM_DTYPES, ids=str)
def test_inplace_ops(dtype):
    x, a = random_tensor((3, 4), dtype, seed=15)
    a = a.astype(np.float64)
    y, b = random_tensor((4,), dtype, seed=16)
    ptr = x.data_ptr()
    assert x.add_(y) is x
    a += b
    assert x.sub_(2) is x
    a -= 2
    assert x.mul_(tp.tensor(3, dtype=dtype.np)) is x
    a *= 3
    x += y
    a += b
    x -= y[:1].unsqueeze(0).expand(3, 1)  # a (3, 1) operand with stride 0
    a -= b[0]
    x *= -1
    a *= -1
    if dtype.is_floating_point:
        assert x.div_(y) is x
        a /= b
        x /= 2
        a /= 2
    assert x.data_ptr() == ptr and x.dtype == dtype
    assert_close(x, a, atol={tp.float16: 0.05, tp.float32: 1e-5}.get(dtype))  # rounding after every step


def test_inplace_ops_with_mixed_dtypes():
    x, a = random_tensor((2, 3), tp.float16, seed=17)
    a = a.astype(np.float64)
    x.add_(tp.tensor([1, 2, 3]))
    a += [1, 2, 3]
    x.mul_(tp.tensor([0.5, 1.5, 2.5], dtype=tp.float64))
    a *= [0.5, 1.5, 2.5]
    x.div_(tp.tensor([True, True, True]))
    assert_close(x, a, dtype=tp.float16)
    n = tp.tensor([1, 2, 3], dtype=tp.int32)
    n.add_(tp.tensor([5, 5, 5]))  # int64 results fit an int32 tensor
    n.mul_(tp.tensor([True, False, True]))
    assert_close(n, [6, 0, 8], dtype=tp.int32)


@pytest.mark.parametrize("dtype", [tp.float32, tp.float16, tp.int32], ids=str)
def test_inplace_ops_on_operands_of_one_shape(dtype):
    """The in-place fast path (contiguous, one shape, or a number), its own
    operand included, and operands of another dtype that it hands on."""
    x, a = random_tensor((2, 5), dtype, seed=18)
    a = a.astype(np.float64)
    y, b = random_tensor((2, 5), dtype, seed=19)
    x.add_(y)
    a += b
    x.mul_(x)  # reads and writes the same elements
    a *= a
    x.sub_(3)
    a -= 3
    other = tp.ones((2, 5), dtype=tp.float64 if dtype is tp.float16 else tp.int64)
    if dtype is not tp.int32:
        x.add_(other)  # computed in the wider dtype, stored in x's
        a += 1
    assert x.dtype == dtype
    assert_close(x, a, atol={tp.float16: 0.1}.get(dtype), rtol={tp.float16: 1e-2}.get(dtype))


def test_numbers_out_of_a_dtypes_range_behave_as_on_the_general_path():
    """Contiguous operands take a fast path: it converts numbers as the general
    path (a strided view) does."""
    with np.errstate(over="ignore"):
        for x in (tp.ones(3), tp.ones(3, dtype=tp.float16)):
            assert np.isinf((x * 1e40).numpy()).all()
            assert np.isinf(x.clone().mul_(1e40).numpy()).all()
            assert np.isinf(x.clone()[::2].mul_(1e40).numpy()).all()
    for x in (tp.ones(3, dtype=tp.int32), tp.ones(4, dtype=tp.int32)[::2]):
        with pytest.raises(OverflowError, match="out of bounds for int32"):
            x.add_(2**31)
        with pytest.raises(OverflowError, match="out of bounds for int32"):
            x + 2**31


def test_writes_into_overlapping_views_read_the_old_values():
    """An op whose output overlaps an input it still reads gives NumPy's result
    (the input is copied first): shifted in-place adds, a broadcast column of the
    output itself, copies between overlapping views."""
    x, a = random_tensor((4, 40), tp.float32, seed=9)
    a = a.astype(np.float64)
    x[:, 1:] += x[:, :-1]
    a[:, 1:] += a[:, :-1].copy()
    x -= x[:, :1]
    a -= a[:, :1].copy()
    assert_close(x, a, dtype=tp.float32)
    y, b = random_tensor((100,), tp.float32, seed=10)
    b = b.astype(np.float64)
    y[1:].add_(y[:-1])  # contiguous, one shape: the fast path hands it on
    b[1:] += b[:-1].copy()
    y[2:].copy_(y[:-2])
    b[2:] = b[:-2].copy()
    assert_close(y, b, dtype=tp.float32)
    s, c = random_tensor((40, 40), tp.float32, seed=11)
    s.copy_(s.t())
    assert_close(s, c.T, dtype=tp.float32)


def test_inplace_errors():
    x = tp.zeros(3, 1)
    with pytest.raises(ValueError, match=re.escape("in-place '+' cannot write shape (3, 4) into shape (3, 1)")):
        x.add_(tp.ones(1, 4))
    with pytest.raises(ValueError, match=re.escape("in-place '*' cannot write shape (2, 3) into shape (3,)")):
        tp.zeros(3).mul_(tp.ones(2, 3))
    n = tp.tensor([1, 2, 3])
    with pytest.raises(TypeError, match="in-place '\\+' would store tensorplay.float32 results in a tensorplay.int64"):
        n.add_(1.5)
    with pytest.raises(TypeError, match="in-place '/' would store tensorplay.float32 results in a tensorplay.int64"):
        n.div_(2)
    with pytest.raises(TypeError, match="in-place '-' would store tensorplay.float64 results in a tensorplay.int32"):
        n.int().sub_(tp.tensor([1.0], dtype=tp.float64))
    assert n.tolist() == [1, 2, 3]


OVERLAP = re.escape(
    "cannot write into a tensor of shape (4,) and strides (0,): more than one of its elements refers to the "
    "same memory location (an expand()ed view); clone() it first and write into the copy"
)


@pytest.mark.parametrize(
    "write",
    [
        lambda e: e.add_(1),
        lambda e: e.sub_(tp.ones(4)),
        lambda e: e.mul_(tp.tensor([2.0])),
        lambda e: e.div_(e),
        lambda e: e.__iadd__(1.0),
        lambda e: tp.add(tp.ones(4), 1, out=e),
        lambda e: tp.exp(tp.ones(4), out=e),
        lambda e: e.copy_(tp.arange(4).float()),
        lambda e: e.copy_(tp.ones(4, dtype=tp.float64)),
        lambda e: e.copy_([1.0, 2.0, 3.0, 4.0]),
        lambda e: e.__setitem__(slice(None), tp.ones(4)),
    ],
)
def test_writes_into_an_expanded_view_are_refused(write):
    """One memory location behind several elements: each thread would write its
    own result there, the last one winning (PyTorch refuses these too)."""
    base = tp.ones(1)
    with pytest.raises(RuntimeError, match=f"^{OVERLAP}$"):
        write(base.expand(4))
    assert base.tolist() == [1.0]


def test_writes_into_an_expanded_view_name_its_layout():
    rows = tp.zeros(3, 1).expand(3, 5)
    with pytest.raises(RuntimeError, match=re.escape("tensor of shape (3, 5) and strides (1, 0): more than one")):
        rows.add_(1)
    with pytest.raises(RuntimeError, match="more than one of its elements refers to the same memory location"):
        rows.view(3, 5, 1).copy_(tp.ones(3, 5, 1))


def test_fills_of_an_expanded_view_and_writes_into_size_1_broadcasts_are_allowed():
    base = tp.ones(2, 1)
    e = base.expand(2, 3)
    e.fill_(3)  # one value for every element: no element's result is lost, as in PyTorch
    assert base.tolist() == [[3.0], [3.0]]
    e.zero_()
    e[1] = 5.0
    assert base.tolist() == [[0.0], [5.0]]
    one = tp.zeros(3)[:1].expand(1)  # a stride-0 dimension of size 1 has one element
    one.add_(2)
    wide = tp.zeros(3).unsqueeze(0).expand(1, 3)
    wide.add_(tp.arange(3).float())
    assert wide.tolist() == [[0.0, 1.0, 2.0]]


F32_TO_INT32 = [0, 2**31 - 1, -(2**31), 2**31 - 1, -(2**31), 300, -1, 2**31 - 1, 2]
F64_TO_INT32 = [-(2**31), 2**31 - 1, -(2**31), 2**31 - 1, -(2**31), 300, -1, 2**31 - 1, 2]
TO_INT64 = [-(2**63), 2**63 - 1, -(2**63), 2**63 - 1, -(2**63), 300, -1, 3 * 10**9, 2]


@pytest.mark.parametrize(
    "source, dtype, expected",
    [  # as measured on the H200 (float16 converts through float32, so 3e9 is inf there)
        (tp.float16, tp.int32, F32_TO_INT32),
        (tp.float16, tp.int64, TO_INT64[:7] + [2**63 - 1, 2]),
        (tp.float32, tp.int32, F32_TO_INT32),
        (tp.float32, tp.int64, TO_INT64),
        (tp.float64, tp.int32, F64_TO_INT32),
        (tp.float64, tp.int64, TO_INT64),
    ],
)
def test_float_to_int_of_nan_inf_and_huge_values_gives_the_gpus_values(source, dtype, expected):
    values = [float("nan"), float("inf"), float("-inf"), 1e20, -1e20, 300.7, -1.5, 3e9, 2.5]
    with np.errstate(over="ignore"):
        x = tp.tensor(np.array(values).astype(source.np))
    assert x.to(dtype).tolist() == expected
    assert x[::2].to(dtype).tolist() == expected[::2]  # the strided kernels too


# -- unary math ----------------------------------------------------------------------------

UNARY = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "tanh": np.tanh,
    "sigmoid": lambda a: 1.0 / (1.0 + np.exp(-a)),
    "relu": lambda a: np.maximum(a, 0),
    "sin": np.sin,
    "cos": np.cos,
}


@pytest.mark.parametrize("dtype", NUM_DTYPES, ids=str)
@pytest.mark.parametrize("op", UNARY)
def test_unary_math(op, dtype):
    low = 0.5 if op in ("log", "sqrt") else -3.0
    x, a = random_tensor((3, 4), dtype, seed=18, low=low, high=3.0)
    want = reference(UNARY[op], a) if op == "relu" else UNARY[op](a.astype(np.float64))
    out_dtype = dtype if dtype.is_floating_point or op == "relu" else tp.float32
    for _ in range(2):  # the second call takes the plan the first one made
        assert_close(getattr(x, op)(), want, dtype=out_dtype)
        assert_close(getattr(x.t(), op)(), want.T, dtype=out_dtype)  # non-contiguous input


def test_module_level_math_functions():
    x, a = random_tensor((2, 3), tp.float32, seed=19, low=0.5, high=3.0)
    a = a.astype(np.float64)
    for name in ("exp", "log", "sqrt", "tanh", "sigmoid", "relu"):
        assert_close(getattr(tp, name)(x), UNARY[name](a))
    y, b = random_tensor((3,), tp.float32, seed=20)
    assert_close(tp.maximum(x, y), np.maximum(a, b))
    assert_close(tp.minimum(x, 1.5), np.minimum(a, 1.5))


def test_nan_propagation():
    x = tp.tensor([1.0, np.nan, -2.0])
    assert_close(x.relu(), [1.0, np.nan, 0.0])
    assert_close(x.clamp(-1.0, 0.5), [0.5, np.nan, -1.0])
    assert_close(tp.maximum(x, tp.tensor([2.0, 0.0, np.nan])), [2.0, np.nan, np.nan])
    assert_close(tp.minimum(x, 0.0), [0.0, np.nan, -2.0])
    assert np.isnan(x.max().item()) and np.isnan(x.min().item())


# -- clamp and where -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", NUM_DTYPES, ids=str)
def test_clamp(dtype):
    x, a = random_tensor((3, 4), dtype, seed=21)
    a = a.astype(np.float64)
    assert_close(x.clamp(-1, 2), np.clip(a, -1, 2), dtype=dtype)
    assert_close(x.clamp(min=0), np.maximum(a, 0), dtype=dtype)
    assert_close(x.clamp(max=1), np.minimum(a, 1), dtype=dtype)
    assert_close(tp.clamp(x.t(), -2, 1), np.clip(a.T, -2, 1), dtype=dtype)
    assert_close(x.clip(-1, 1), np.clip(a, -1, 1), dtype=dtype)
    lo, hi = tp.tensor([-2, -1, 0, 1], dtype=dtype.np), tp.tensor([[0], [1], [2]], dtype=dtype.np)
    assert_close(x.clamp(lo, hi), np.clip(a, [-2, -1, 0, 1], [[0], [1], [2]]), dtype=dtype)
    assert_close(x.clamp(min=lo), np.maximum(a, [-2, -1, 0, 1]), dtype=dtype)


def test_clamp_promotes_like_maximum_and_minimum():
    x = tp.tensor([-3, 0, 1, 3])
    assert_close(x.clamp(-0.5, 2.5), [-0.5, 0.0, 1.0, 2.5], dtype=tp.float32)
    assert_close(x.clamp(min=-0.5), [-0.5, 0.0, 1.0, 3.0], dtype=tp.float32)
    assert_close(x.clamp(max=2.5), [-3.0, 0.0, 1.0, 2.5], dtype=tp.float32)
    assert_close(x.clamp(0, tp.tensor([2.0], dtype=tp.float64)), [0.0, 0.0, 1.0, 2.0], dtype=tp.float64)
    assert_close(tp.tensor([0.25]).clamp(tp.zeros(2, 1), 1), [[0.25], [0.25]], dtype=tp.float32)
    with pytest.raises(ValueError, match="clamp\\(\\) needs min, max or both"):
        x.clamp()


def test_clamp_with_min_above_max_gives_max():
    x = tp.tensor([-1.0, 0.5, 3.0])
    assert_close(x.clamp(2.0, 1.0), [1.0, 1.0, 1.0])
    assert_close(tp.tensor([0, 5]).clamp(4, 2), [2, 2], dtype=tp.int64)


def test_where_tensor_branches():
    c = tp.tensor(random_array((3, 1), tp.bool, seed=22))
    cond = c.numpy()
    x, a = random_tensor((1, 4), tp.float32, seed=23)
    y, b = random_tensor((4,), tp.float32, seed=24)
    assert_close(tp.where(c, x, y), np.where(cond, a, b), dtype=tp.float32)
    assert_close(x.where(c, y), np.where(cond, a, b), dtype=tp.float32)
    i, d = random_tensor((3, 4), tp.int32, seed=25)
    h, e = random_tensor((3, 4), tp.float16, seed=26)
    assert_close(tp.where(c, i, h), np.where(cond, d, e), dtype=tp.float16)
    full_cond = tp.tensor(random_array((4, 3), tp.bool, seed=27)).t()  # non-contiguous everything
    assert_close(tp.where(full_cond, i.t().contiguous().t(), h), np.where(full_cond.numpy(), d, e))


@pytest.mark.parametrize(
    "a, b, want",
    [
        ("x", 0.0, tp.float32),
        (2.5, "x", tp.float32),
        ("n", 1, tp.int32),
        ("n", 1.5, tp.float32),
        (1.0, 0.0, tp.float32),
        (1, 0, tp.int64),
        (1, 0.5, tp.float32),
        (True, False, tp.bool),
        ("x64", 7, tp.float64),
    ],
    ids=str,
)
def test_where_scalar_branches(a, b, want):
    cond_host = random_array((2, 3), tp.bool, seed=28)
    tensors = {
        "x": random_tensor((2, 3), tp.float32, seed=29),
        "n": random_tensor((2, 3), tp.int32, seed=30),
        "x64": random_tensor((3,), tp.float64, seed=31),
    }
    args = [tensors[v][0] if isinstance(v, str) else v for v in (a, b)]
    hosts = [tensors[v][1] if isinstance(v, str) else v for v in (a, b)]
    assert_close(tp.where(tp.tensor(cond_host), *args), np.where(cond_host, *hosts), dtype=want)


def test_where_needs_a_bool_condition():
    with pytest.raises(TypeError, match="where\\(\\) expects a bool tensor as its condition, got tensorplay.float32"):
        tp.where(tp.ones(2), 1.0, 0.0)
    with pytest.raises(TypeError, match="where\\(\\) expects a bool tensor as its condition, got list"):
        tp.where([True, False], 1.0, 0.0)


# -- cat and stack ---------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_cat(dim):
    sizes = [(1, 3), (2, 3), (3, 3)] if dim % 2 == 0 else [(2, 1), (2, 2), (2, 3)]
    dtypes = (tp.int32, tp.float16, tp.int64)
    pairs = [random_tensor(size, dtypes[k], seed=43 + k) for k, size in enumerate(sizes)]
    tensors = [t for t, _ in pairs]
    tensors[2] = tensors[2].t().contiguous().t()  # non-contiguous input
    out = tp.cat(tensors, dim)
    assert_close(out, np.concatenate([h.astype(np.float64) for _, h in pairs], axis=dim), dtype=tp.float16)


def test_cat_edge_cases():
    x, a = random_tensor((2, 3), tp.float32, seed=46)
    assert_close(tp.cat([x]), a)
    assert_close(tp.cat((tp.zeros(0, 3), x, tp.zeros(0, 3))), a)
    assert_close(tp.cat([x[:, :1], x[:, 2:]], dim=1), a[:, [0, 2]])
    assert_close(tp.cat([tp.tensor([True]), tp.tensor([False])]), [True, False], dtype=tp.bool)


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_stack(dim):
    pairs = [random_tensor((2, 3), dt, seed=47 + k) for k, dt in enumerate((tp.float32, tp.int64))]
    tensors = [pairs[0][0].t().t(), pairs[1][0][:, :]]
    out = tp.stack(tensors, dim=dim)
    assert_close(out, np.stack([h.astype(np.float64) for _, h in pairs], axis=dim), dtype=tp.float32)


def test_cat_and_stack_errors():
    message = "cat() needs equal shapes except in dimension {}, got (2, 3) and {}"
    with pytest.raises(ValueError, match=re.escape(message.format(0, "(2, 4)"))):
        tp.cat([tp.zeros(2, 3), tp.zeros(2, 4)])
    with pytest.raises(ValueError, match=re.escape(message.format(1, "(3,)"))):
        tp.cat([tp.zeros(2, 3), tp.zeros(3)], dim=1)
    with pytest.raises(TypeError, match="cat\\(\\) expects a non-empty sequence of tensors"):
        tp.cat([])
    with pytest.raises(TypeError, match="stack\\(\\) expects a non-empty sequence of tensors"):
        tp.stack([tp.zeros(2), [1.0, 2.0]])
    with pytest.raises(ValueError, match=re.escape("stack() needs tensors of equal shape, got [(2,), (3,)]")):
        tp.stack([tp.zeros(2), tp.zeros(3)])


# -- layouts: non-contiguous, empty and 0-d operands --------------------------------------


def test_non_contiguous_operands():
    x, a = random_tensor((4, 6), tp.float32, seed=49)
    y, b = random_tensor((6, 4), tp.float32, seed=50)
    a, b = a.astype(np.float64), b.astype(np.float64)
    assert_close(x.t() + y, a.T + b)
    assert_close(x[:, ::2] * y[::2].t(), a[:, ::2] * b[::2].T)
    assert_close(x[1::2, 1:5:3] - 1.5, a[1::2, 1:5:3] - 1.5)
    assert_close(x.t()[::2] / y[1::2, :], a.T[::2] / b[1::2, :])
    assert_close(x[:, 0:1].expand(4, 6) * x, a[:, 0:1] * a)
    assert_close((x.t() > y).t(), (a.T > b).T)
    z = tp.arange(2 * 3 * 2 * 3 * 2 * 3).view(2, 3, 2, 3, 2, 3)  # sliced: six dimensions that cannot merge
    h = np.arange(z.numel()).reshape(z.shape)
    assert_close(z[:, ::2, :, ::2, :, ::2] * 2, h[:, ::2, :, ::2, :, ::2] * 2)


def test_operator_output_writes_non_contiguous_destination():
    x, a = random_tensor((3, 4), tp.float64, seed=51)
    y, b = random_tensor((4, 3), tp.float64, seed=52)
    v = x.t()
    v += y
    assert_close(x, a + b.T)


def test_empty_operands():
    e, f = tp.zeros(0, 3), tp.ones(0, 3, dtype=tp.int32)
    for out, shape, dtype in [
        (e + f, (0, 3), tp.float32),
        (e * tp.ones(3), (0, 3), tp.float32),
        (e > 0, (0, 3), tp.bool),
        (f / 2, (0, 3), tp.float32),
        (e.exp(), (0, 3), tp.float32),
        (-f, (0, 3), tp.int32),
        (tp.where(e > 0, e, 1.0), (0, 3), tp.float32),
        (tp.zeros(4, 0) + tp.zeros(1, 1), (4, 0), tp.float32),
        (e.t().clone(), (3, 0), tp.float32),
    ]:
        assert out.shape == shape and out.dtype == dtype
        assert out.numpy().shape == shape
    e.add_(1.0)
    e.fill_(2.0)
    assert e.tolist() == []


def test_0d_operands():
    x, y = tp.tensor(1.5), tp.tensor(-2.0, dtype=tp.float64)
    assert_close(x + y, -0.5, dtype=tp.float64)
    assert_close(x * tp.tensor([1.0, 2.0, 3.0]), [1.5, 3.0, 4.5], dtype=tp.float32)
    assert_close(x > y, True, dtype=tp.bool)
    assert_close(x.exp(), np.exp(1.5))
    assert_close(-y, 2.0)
    assert_close(tp.where(tp.tensor(False), x, y), -2.0, dtype=tp.float64)
    assert_close(x.clamp(0, 1), 1.0)
    assert (x + 1).shape == () and (2 * x).item() == 3.0
    assert_close(tp.tensor(7) // tp.tensor(2), 3, dtype=tp.int64)
    assert_close(tp.stack([x, x + 1]), [1.5, 2.5])


# -- errors ----------------------------------------------------------------------------------


def test_shape_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=re.escape("shapes (2, 3), (4,) cannot be broadcast together")):
        tp.zeros(2, 3) + tp.zeros(4)
    with pytest.raises(ValueError, match=re.escape("shapes (3, 1, 4), (2, 3) cannot be broadcast together")):
        tp.zeros(3, 1, 4) * tp.zeros(2, 3)
    with pytest.raises(ValueError, match=re.escape("shapes (2,), (3,) cannot be broadcast together")):
        tp.zeros(2).lt(tp.zeros(3))
    with pytest.raises(ValueError, match=re.escape("shapes (2,), (2,), (3,) cannot be broadcast together")):
        tp.where(tp.zeros(2, dtype=tp.bool), tp.zeros(2), tp.zeros(3))


@pytest.mark.parametrize("other", ["a", None, object()], ids=lambda v: type(v).__name__)
def test_foreign_operands(other):
    x = tp.ones(2)
    message = f"expected a tensor or a Python number, got {type(other).__name__}"
    with pytest.raises(TypeError, match=message):
        x + other
    with pytest.raises(TypeError, match=message):
        other * x
    with pytest.raises(TypeError, match=message):
        x.add_(other)


@pytest.mark.parametrize("op", LOGIC)
def test_logical_ops_reject_floats(op):
    fn, _ = LOGIC[op]
    with pytest.raises(TypeError, match=f"'{re.escape(op)}' needs bool or integer tensors, got tensorplay.float32"):
        fn(tp.ones(2), tp.ones(2, dtype=tp.bool))
    with pytest.raises(TypeError, match=f"'{re.escape(op)}' needs bool or integer tensors, got tensorplay.float32"):
        fn(tp.ones(2, dtype=tp.int32), 1.5)
    with pytest.raises(TypeError, match="'~' needs a bool or integer tensor, got tensorplay.float16"):
        ~tp.ones(2, dtype=tp.float16)


def test_strided_ops_reuse_a_layout_with_other_pointers_and_scalars():
    # Plans are kept per layout (shapes, strides, dtypes): the data pointers
    # and the scalars still come from each call.
    x, a = random_tensor((5, 4), tp.float32, seed=60)
    r, b = random_tensor((4,), tp.float32, seed=61)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    for _ in range(2):
        assert_close(x[1:] + r, a64[1:] + b64)  # the same layout twice ...
        assert_close(x[:-1] + r, a64[:-1] + b64)  # ... at another offset
        for k in (2.0, 3.0):
            assert_close(x.t() * k, a64.T * k)
        assert_close(x.t().contiguous(), a64.T)


@pytest.mark.parametrize("dtype", [tp.float32, tp.float64])
def test_math_at_the_edges_gives_inf_and_nan_as_numpy_does(dtype):
    values = np.array([0.0, -1.0, 1000.0, -1000.0, np.inf])
    x = tp.tensor(values, dtype=dtype)
    with np.errstate(all="ignore"):
        for op, ref in [("log", np.log), ("sqrt", np.sqrt), ("exp", np.exp), ("sin", np.sin), ("cos", np.cos),
                        ("tanh", np.tanh), ("sigmoid", lambda v: 1 / (1 + np.exp(-v)))]:  # fmt: skip
            expected = ref(values.astype(np.float32 if dtype is tp.float32 else np.float64))
            np.testing.assert_allclose(getattr(x, op)().numpy(), expected, rtol=1e-6, err_msg=op)


@pytest.mark.parametrize("n", [16, 17, 1])
@pytest.mark.parametrize("offset", [0, 1, 4])
def test_flat_ops_on_aligned_and_unaligned_operands_of_any_count(n, offset):
    # Aligned arrays of a multiple of four elements take the kernel that moves groups of four with no bounds
    # check, the others the general one; on the simulator a vector load at an unaligned address faults as on
    # the GPU, so a wrong choice fails here.
    base = np.arange(n + offset, dtype=np.float32)
    x = tp.tensor(base)[offset:]
    y = tp.tensor(base * 3)[offset:]
    want_x, want_y = base[offset:].astype(np.float64), (base * 3)[offset:].astype(np.float64)
    np.testing.assert_allclose((x + y).numpy(), want_x + want_y)
    np.testing.assert_allclose((x * 2.0).numpy(), want_x * 2)
    np.testing.assert_allclose((-x).numpy(), -want_x)
    out = tp.empty(n + 1)[1:]  # an unaligned output
    tp.mul(x, y, out=out)
    np.testing.assert_allclose(out.numpy(), want_x * want_y)
    x += y
    np.testing.assert_allclose(x.numpy(), want_x + want_y)
