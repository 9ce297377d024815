"""Array functions at their edges, each against NumPy (or PyTorch's documented
answer where NumPy has none): integer and complex closeness, 0-d tensors taken
along dimension 0 as PyTorch takes them, NumPy integers as axes and sizes, the
standard deviation of half floats, and clear sentences for bad arguments."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp

# -- isclose / allclose ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b",
    [(2**62, -(2**62)), (-(2**63), 2**63 - 1), (0, -(2**63)), (-(2**63), 0), (-3, 3), (100000, 100001), (7, 7)],
)
def test_isclose_of_int64_does_not_wrap_around(a, b):
    # a - b and abs(-2**63) overflow int64; the distance is taken without wrapping
    got = tp.isclose(tp.tensor(np.array([a])), tp.tensor(np.array([b])))
    assert got.tolist() == np.isclose(np.array([a]), np.array([b])).tolist()


def test_isclose_of_complex_tensors_compares_both_parts():
    a = np.array([1 + 1j, 2.5 + 0j, 1 + 1j, complex(np.inf, 1), 1j])
    b = np.array([1 + 2j, 2 + 0j, 1 + 1j, complex(np.inf, 1), 1.0000001j])
    assert tp.isclose(tp.tensor(a), tp.tensor(b)).tolist() == np.isclose(a, b).tolist()
    assert tp.isclose(tp.tensor(a.astype(np.complex64)), tp.tensor([1.0] * 5)).tolist() == np.isclose(a, 1.0).tolist()
    assert tp.allclose(tp.tensor(np.array([1 + 1j])), tp.tensor(np.array([1 - 1j]))) is False


# -- 0-d tensors along dimension 0 (or -1), as PyTorch takes them ------------------------------------


@pytest.mark.parametrize("axis", [0, -1])
def test_roll_and_squeeze_of_a_0d_tensor_along_its_dimension(axis):
    x = tp.tensor(5)
    assert tp.roll(x, 3, axis=axis).tolist() == 5
    assert tp.squeeze(x, axis=axis).shape == ()
    with pytest.raises(IndexError, match="dimension 1 is out of range for a tensor of 0 dimensions"):
        tp.roll(x, 1, axis=1)
    with pytest.raises(IndexError, match="dimension 1 is out of range for a tensor of 0 dimensions"):
        tp.squeeze(x, axis=1)


def test_quantile_and_median_of_a_0d_tensor_along_its_dimension():
    x = tp.tensor(2.0)
    assert tp.quantile(x, 0.5, dim=0).item() == 2.0
    assert tp.quantile(x, [0.5, 1.0], dim=-1, keepdim=True).tolist() == [2.0, 2.0]
    assert tp.median(x, 0, keepdim=True).values.shape == ()  # PyTorch's: 0-d in, 0-d out
    assert tp.median(x, axis=0, keepdims=True).shape == ()


def test_quantile_takes_a_0d_numpy_array_as_one_quantile():
    host = np.arange(6.0).reshape(2, 3)
    got = tp.quantile(tp.tensor(host), np.array(0.25), dim=1)
    assert got.shape == np.quantile(host, np.array(0.25), axis=1).shape
    np.testing.assert_allclose(got.numpy(), np.quantile(host, 0.25, axis=1), rtol=1e-6)
    got = tp.quantile(tp.tensor(host), np.array([0.5, 0.1]), dim=1)
    np.testing.assert_allclose(got.numpy(), np.quantile(host, [0.5, 0.1], axis=1), rtol=1e-6)


# -- NumPy integers as axes, shifts and sizes ---------------------------------------------------------


def test_numpy_integers_are_taken_as_axes_shifts_and_sizes():
    host = np.arange(12.0).reshape(3, 4)
    x, one, two = tp.tensor(host, dtype=tp.float64), np.int64(1), np.int32(2)
    assert tp.roll(x, one, axis=one).tolist() == np.roll(host, 1, axis=1).tolist()
    assert tp.roll(x, two).tolist() == np.roll(host, 2).tolist()
    assert tp.flip(x, axis=one).tolist() == np.flip(host, axis=1).tolist()
    assert tp.moveaxis(x, np.int64(0), one).shape == (4, 3)
    assert tp.squeeze(x[:1], axis=np.int64(0)).tolist() == host[0].tolist()
    assert tp.tile(x, two).tolist() == np.tile(host, 2).tolist()
    assert [t.shape for t in tp.split(x, two, dim=1)] == [(3, 2), (3, 2)]
    assert tp.argmax(x, axis=np.int64(0)).tolist() == np.argmax(host, axis=0).tolist()
    assert tp.argmin(x, axis=one, keepdims=True).tolist() == np.argmin(host, axis=1, keepdims=True).tolist()
    np.testing.assert_allclose(tp.linalg.vector_norm(x, axis=one).numpy(), np.linalg.norm(host, axis=1))
    assert tp.unique_values(tp.tensor([3, 1, 3]), size=two).tolist() == [1, 3]
    assert [t.tolist() for t in tp.nonzero(tp.tensor([0, 4, 5]), size=two)] == [[1, 2]]


# -- half floats --------------------------------------------------------------------------------


@pytest.mark.parametrize("correction", [0, 1])
def test_std_of_float16_is_not_lost_to_the_variance_overflowing(correction):
    host = np.array([60000.0, 0.0], dtype=np.float16)  # std ~30000 fits float16, its variance does not
    expected = np.std(host.astype(np.float64), ddof=correction)
    got = tp.std(tp.tensor(host), correction=correction)
    assert got.dtype is tp.float16
    np.testing.assert_allclose(got.item(), expected, rtol=1e-3)
    np.testing.assert_allclose(tp.tensor(host).std(correction=correction).item(), expected, rtol=1e-3)


# -- sentences for bad arguments -----------------------------------------------------------------------


def test_trapezoid_and_diff_say_what_they_take():
    with pytest.raises(ValueError, match=r"^trapezoid\(\) needs samples along a dimension, got a 0-d tensor$"):
        tp.trapezoid(tp.tensor(1.0))
    with pytest.raises(TypeError, match=r"^trapezoid\(\) takes x as a tensor of sample points .*got float$"):
        tp.trapezoid(tp.tensor([1.0, 2.0]), 2.0)
    with pytest.raises(TypeError, match=r"^diff\(\) takes prepend= as a tensor \(as PyTorch's\), got float$"):
        tp.diff(tp.tensor([1.0, 2.0]), prepend=0.0)
    got = tp.diff(tp.tensor([1.0, 2.0]), prepend=tp.tensor([0.0]), append=tp.tensor([9.0]))  # still works
    assert got.tolist() == np.diff([1.0, 2.0], prepend=0.0, append=9.0).tolist()


def test_argmax_method_takes_a_numpy_integer_dimension():
    x = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    for axis in (np.int64(0), np.int32(1)):
        assert tp.tensor(x).argmax(axis).tolist() == np.argmax(x, axis=int(axis)).tolist()
        assert tp.tensor(x).argmin(axis).tolist() == np.argmin(x, axis=int(axis)).tolist()


@pytest.mark.parametrize("args", [(0, float("inf")), (float("nan"),), (0.0, 1.0, float("inf"))])
def test_arange_of_an_infinite_or_nan_bound_says_so(args):
    with pytest.raises(ValueError, match="arange expects finite start, end and step"):
        tp.arange(*args)
    assert tp.arange(3).tolist() == [0, 1, 2]
