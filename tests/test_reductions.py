"""Reductions (sum, mean, max, min) against NumPy in float64, including the
two-pass path for few long rows (taken on the simulator too)."""

import re

import numpy as np
import pytest
from helpers import FLOAT_DTYPES, INT_DTYPES, assert_close, random_tensor

import tensorplay as tp
from tensorplay.kernels import reduce as rk

NUM_DTYPES = FLOAT_DTYPES + INT_DTYPES


REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}
# the method reducing over any dims: max(dim) and min(dim) give (values, indices), amax and amin the values
METHOD = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin"}


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize(
    "dim, keepdim",
    [(None, False), (None, True), (1, False), (-1, True), ((0, 2), False), ((-1, 0), True), ((0, 1, 2), False)],
    ids=str,
)
def test_reductions_over_dims(op, dim, keepdim):
    x, a = random_tensor((2, 3, 4), tp.float32, seed=32)
    want = REDUCE[op](a.astype(np.float64), axis=dim, keepdims=keepdim)
    out = getattr(x, METHOD[op])(dim, keepdim=keepdim)
    assert_close(out, want, atol=1e-5, dtype=tp.float32)


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize(
    "shape, dim, transpose",
    [((2, 600), -1, False), ((2, 600), 0, True), ((5, 120), None, False)],
    ids=["rows", "transposed", "all"],
)
def test_reductions_of_long_rows_take_the_two_pass_path(op, shape, dim, transpose, launched):
    x, a = random_tensor(shape, tp.float32, seed=33)
    if transpose:  # (600, 2) seen through a transpose, reduced over its long dimension
        x, a = x.t(), a.T
    want = REDUCE[op](a.astype(np.float64), axis=dim)
    assert_close(getattr(x, METHOD[op])(dim), want, atol=1e-4, dtype=tp.float32)
    if tp.cuda.backend() == "sim":  # 16 lanes of 16 items: 600 items per row need the chunked pass
        assert rk.chunks_kernel(op, "float32") in launched


@pytest.mark.parametrize(
    "dtype, op, want_dtype",
    [
        (tp.float64, "sum", tp.float64),
        (tp.float64, "mean", tp.float64),
        (tp.float64, "max", tp.float64),
        (tp.float64, "min", tp.float64),
        (tp.float16, "sum", tp.float16),
        (tp.float16, "mean", tp.float16),
        (tp.float16, "max", tp.float16),
        (tp.float16, "min", tp.float16),
        (tp.int32, "sum", tp.int64),
        (tp.int32, "max", tp.int32),
        (tp.int32, "min", tp.int32),
        (tp.int64, "sum", tp.int64),
        (tp.int64, "max", tp.int64),
        (tp.int64, "min", tp.int64),
        (tp.bool, "sum", tp.int64),
        (tp.bool, "max", tp.bool),
        (tp.bool, "min", tp.bool),
    ],
    ids=str,
)
def test_reduction_dtypes(dtype, op, want_dtype):
    low, high = (-3, 3) if dtype.is_floating_point else (-50, 50)
    x, a = random_tensor((5, 14), dtype, seed=34, low=low, high=high)
    wide = a.astype(np.float64)
    assert_close(getattr(x, op)(), REDUCE[op](wide), dtype=want_dtype)  # 70 items: two passes on the simulator
    assert_close(getattr(x[:3, :2], METHOD[op])(0), REDUCE[op](wide[:3, :2], axis=0), dtype=want_dtype)


def test_bool_reductions_see_both_values():
    x = tp.tensor([[False, False, True], [False, False, False]])
    assert_close(x.amax(1), [True, False])
    assert_close(x.max(1).indices, [2, 0], dtype=tp.int64)
    assert_close(x.min(), False)
    assert_close(tp.ones(3, dtype=tp.bool).min(), True)
    assert_close(x.sum(), 1, dtype=tp.int64)


def test_module_level_sum_and_mean():
    x, a = random_tensor((2, 3), tp.float64, seed=35)
    assert_close(tp.sum(x, 1), a.sum(1))
    assert_close(tp.mean(x, 0, keepdim=True), a.mean(0, keepdims=True))
    assert_close(x.amax(1), a.max(1))
    assert_close(x.amin(), a.min())


def test_reductions_of_empty_tensors():
    x = tp.zeros(0, 3)
    assert_close(x.sum(0), np.zeros(3), dtype=tp.float32)
    assert_close(x.sum(), 0.0)
    assert_close(x.sum(1), np.zeros(0))
    assert_close(x.mean(0), np.full(3, np.nan))
    assert_close(x.amax(1), np.zeros(0))
    assert_close(tp.zeros(0, 3, dtype=tp.int32).sum(0, keepdim=True), np.zeros((1, 3)), dtype=tp.int64)


def test_reductions_of_0d_tensors():
    x = tp.tensor(2.5)
    for op in ("sum", "mean", "max", "min"):
        assert_close(getattr(x, op)(), 2.5)
    assert_close(x.sum(0), 2.5)
    assert_close(x.amax(-1, keepdim=True), 2.5)
    values, indices = x.max(-1, keepdim=True)
    assert_close(values, 2.5)
    assert_close(indices, 0, dtype=tp.int64)


def test_reduction_errors():
    with pytest.raises(TypeError, match="mean\\(\\) needs a floating point tensor, got tensorplay.int64"):
        tp.tensor([1, 2]).mean()
    with pytest.raises(TypeError, match="mean\\(\\) needs a floating point tensor, got tensorplay.bool"):
        tp.tensor([True]).mean(0)
    with pytest.raises(ValueError, match=re.escape("max() of an empty dimension has no identity; shape (0, 3), dim 0")):
        tp.zeros(0, 3).max(0)
    with pytest.raises(ValueError, match=re.escape("min() of an empty dimension has no identity")):
        tp.zeros(2, 0).min()
    with pytest.raises(IndexError, match="dimension 2 is out of range for a tensor of 2 dimensions"):
        tp.zeros(2, 3).sum(2)
    with pytest.raises(ValueError, match=re.escape("dimension repeated in (1, -1)")):
        tp.zeros(2, 3).sum((1, -1))


def test_repeated_reductions_of_one_shape_in_different_layouts():
    # Plans are kept per (op, dtype, shape, strides, dim, keepdim): a second call
    # reuses one, and a tensor of the same shape in another layout gets its own.
    base, a = random_tensor((4, 6, 5), tp.float32, seed=40)
    other, b = random_tensor((5, 6, 4), tp.float32, seed=41)
    cases = [
        (base, a, (0, 2)),  # rows need a copy: dims 0 and 2 do not merge
        (other.permute(2, 1, 0), b.transpose(2, 1, 0), (0, 2)),  # same shape, other strides
        (base, a, -1),
        (base[:, 1:4], a[:, 1:4], 1),  # a strided view
    ]
    for _ in range(2):
        for x, host, dim in cases:
            assert_close(x.sum(dim), host.astype(np.float64).sum(axis=dim), atol=1e-5, dtype=tp.float32)
            want = host.astype(np.float64).max(axis=dim, keepdims=True)
            assert_close(x.amax(dim, keepdim=True), want, atol=0, dtype=tp.float32)


def test_reduction_errors_are_raised_every_time():
    x = tp.ones((2, 3), dtype=tp.int32)
    for _ in range(2):
        with pytest.raises(TypeError, match="floating point"):
            x.mean(1)
        with pytest.raises(IndexError, match="out of range"):
            x.sum(2)


@pytest.mark.parametrize("dtype", [tp.float32, tp.int32, tp.bool])
@pytest.mark.parametrize("dim, keepdim", [(None, False), (1, False), (-1, True), ((0, 1), False)], ids=str)
def test_any_and_all_as_numpy(dtype, dim, keepdim):
    a = np.array([[0, 1, 2], [0, 0, 0], [3, 4, 5]]).astype(dtype.name)
    x = tp.tensor(a)
    for op in ("any", "all"):
        out = getattr(x, op)(dim=dim, keepdim=keepdim)
        assert out.dtype is tp.bool
        np.testing.assert_array_equal(out.numpy(), getattr(np, op)(a, axis=dim, keepdims=keepdim))


def test_the_truth_of_many_elements_names_the_reductions_that_exist():
    x = tp.ones(3)
    with pytest.raises(ValueError, match=r"ambiguous; reduce it first, with t.any\(\) or t.all\(\)"):
        bool(x)
    assert bool(x.any()) and bool(x.all())


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_along_a_dim_return_values_and_first_indices(op, dim, keepdim):
    # Ties everywhere (values from a small set): the index is the first one, as PyTorch.
    a = np.random.default_rng(80).integers(0, 3, size=(4, 6)).astype(np.float32)
    x = tp.tensor(a)
    values, indices = getattr(x, op)(dim, keepdim=keepdim)
    pick = np.argmax if op == "max" else np.argmin  # NumPy's also take the first
    want = pick(a, axis=dim)
    if keepdim:
        want = np.expand_dims(want, dim)
    assert_close(indices, want, dtype=tp.int64)
    assert_close(values, getattr(a, op)(axis=dim, keepdims=keepdim))
    result = getattr(tp, op)(x, dim, keepdim)
    assert result.values.tolist() == values.tolist() and result.indices.tolist() == indices.tolist()


def test_argmax_argmin_of_all_and_along_dims_and_nan():
    a = np.array([[1.0, 7.0, 7.0], [9.0, -2.0, 9.0]], np.float32)
    x = tp.tensor(a)
    assert_close(x.argmax(), 3, dtype=tp.int64)  # the flattened index, as PyTorch
    assert_close(tp.argmin(x), 4, dtype=tp.int64)
    assert_close(x.argmax(1), [1, 0], dtype=tp.int64)
    assert_close(x.argmin(0, keepdim=True), [[0, 1, 0]], dtype=tp.int64)
    assert x.argmax(keepdim=True).shape == (1, 1)
    n = tp.tensor([1.0, float("nan"), 3.0, float("nan")])
    assert_close(n.argmax(), 1, dtype=tp.int64)  # NaN is the extreme, as the max and min take it
    assert_close(n.argmin(), 1, dtype=tp.int64)
    assert_close(tp.tensor([[2, 5, 5]], dtype=tp.int32).argmax(1), [1], dtype=tp.int64)
    assert_close(tp.tensor(4.0).argmax(0), 0, dtype=tp.int64)


def test_the_values_of_max_along_a_dim_carry_gradients():
    x = tp.tensor([[1.0, 3.0], [4.0, 2.0]], requires_grad=True)
    values, indices = x.max(1)
    values.sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0], [1.0, 0.0]]
    assert indices.tolist() == [1, 0] and not indices.requires_grad


def test_max_along_dims_errors():
    x = tp.zeros(2, 3)
    with pytest.raises(TypeError, match=re.escape("max(dim) takes one dimension (an int) and returns (values,")):
        x.max((0, 1))
    assert x.amax((0, 1)).shape == ()
    with pytest.raises(TypeError, match=re.escape("argmin(dim) takes one dimension (an int) or None")):
        x.argmin((0,))
    with pytest.raises(ValueError, match=re.escape("argmax() along an empty dimension has no index to give; shape")):
        tp.zeros(0, 3).argmax(0)
    with pytest.raises(ValueError, match=re.escape("argmin() of an empty tensor has no index to give; shape (0,)")):
        tp.argmin(tp.zeros(0))
    assert tp.zeros(0, 3).argmax(1).shape == np.zeros((0, 3)).argmax(1).shape  # along a dimension that is not empty
    with pytest.raises(IndexError, match="dimension 2 is out of range"):
        x.max(2)


def test_any_all_and_their_functions():
    x = tp.tensor([[0, 2], [0, 0]])
    assert_close(tp.any(x, 1), [True, False])
    assert_close(tp.all(x), False)
    assert_close(tp.amax(x, 0), [0, 2], dtype=tp.int64)
    assert_close(tp.amin(x), 0, dtype=tp.int64)
