"""Utility functions (``all``, ``any``, ``diff``), ``isclose``/``allclose`` and
``tp.testing.assert_close`` against NumPy in float64 and PyTorch's documented
behaviour; capture and replay."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import assert_close
from helpers.gradcheck import check_gradients

import tensorplay as tp

RNG = np.random.default_rng(11)
A = RNG.uniform(-2, 2, (2, 3, 4))


def t(a):
    return tp.tensor(np.asarray(a, dtype=np.float64))


# -- all and any ------------------------------------------------------------------------------


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)], ids=str)
@pytest.mark.parametrize("name", ["all", "any"])
def test_all_and_any(name, axis, keepdims):
    a = np.where(A > 1.0, 0.0, A)  # some zeros
    a[0, 0, :] = 0.0
    a[1, 2, 1] = np.nan  # NaN is true
    want = getattr(np, name)(a, axis=axis, keepdims=keepdims)
    fn = getattr(tp, name)
    for got in (fn(t(a), axis=axis, keepdims=keepdims), fn(t(a), axis, keepdims), fn(t(a), dim=axis, keepdim=keepdims)):
        assert got.dtype is tp.bool
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("dtype", [tp.int32, tp.bool, tp.uint8], ids=str)
def test_all_and_any_of_integers_and_bools(dtype):
    a = (np.arange(12).reshape(3, 4) % 3).astype(dtype.np)
    for name in ("all", "any"):
        np.testing.assert_array_equal(getattr(tp, name)(tp.tensor(a), axis=1).numpy(), getattr(np, name)(a, axis=1))


@pytest.mark.parametrize("shape, axis", [((0,), None), ((2, 0), 1), ((0, 3), 0), ((2, 0), None)], ids=str)
def test_all_and_any_of_nothing(shape, axis):
    a = np.zeros(shape)
    for name in ("all", "any"):
        np.testing.assert_array_equal(getattr(tp, name)(t(a), axis=axis).numpy(), getattr(np, name)(a, axis=axis))


# -- diff -----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 3])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_diff(n, axis):
    want = np.diff(A, n=n, axis=axis)
    assert_close(tp.diff(t(A), axis=axis, n=n), want)
    assert_close(tp.diff(t(A), n, axis), want)  # PyTorch's diff(input, n, dim)
    assert_close(t(A).diff(n, dim=axis), want)


def test_diff_with_prepend_and_append():
    before, after = RNG.uniform(size=(2, 3, 1)), RNG.uniform(size=(2, 3, 2))
    want = np.diff(A, n=2, axis=-1, prepend=before, append=after)
    assert_close(tp.diff(t(A), n=2, prepend=t(before), append=t(after)), want)
    row = RNG.uniform(size=(1, 3, 4))
    assert_close(tp.diff(t(A), axis=0, prepend=t(row)), np.diff(A, axis=0, prepend=row))


def test_diff_of_bools_and_integers():
    b = np.array([True, True, False, True])
    np.testing.assert_array_equal(tp.diff(tp.tensor(b)).numpy(), np.diff(b))
    i = np.array([[1, 4, 9], [2, 2, 0]], dtype=np.int32)
    out = tp.diff(tp.tensor(i), n=2)
    assert out.dtype is tp.int32
    np.testing.assert_array_equal(out.numpy(), np.diff(i, n=2))


def test_diff_refuses_a_negative_order():
    with pytest.raises(ValueError, match=r"diff\(\) expects n >= 0, got -1"):
        tp.diff(t(A), n=-1)


# -- isclose and allclose ------------------------------------------------------------------------

SPECIAL = np.array([0.0, 1.0, 1.0 + 1e-6, np.inf, -np.inf, np.inf, np.nan, np.nan, 1e-9, 5.0])
OTHER = np.array([1e-9, 1.0, 1.0, np.inf, np.inf, 1.0, np.nan, 1.0, 0.0, 5.1])


@pytest.mark.parametrize("equal_nan", [False, True])
@pytest.mark.parametrize("rtol, atol", [(1e-5, 1e-8), (0.0, 0.0), (0.05, 0.0), (0.0, 0.2)], ids=str)
def test_isclose_as_numpy(rtol, atol, equal_nan):
    want = np.isclose(SPECIAL, OTHER, rtol=rtol, atol=atol, equal_nan=equal_nan)
    got = tp.isclose(t(SPECIAL), t(OTHER), rtol=rtol, atol=atol, equal_nan=equal_nan)
    assert got.dtype is tp.bool
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(t(SPECIAL).isclose(t(OTHER), rtol, atol, equal_nan).numpy(), want)
    np.testing.assert_array_equal(tp.isclose(t(OTHER), t(SPECIAL), rtol, atol, equal_nan).numpy(),
                                  np.isclose(OTHER, SPECIAL, rtol, atol, equal_nan))  # fmt: skip


def test_isclose_broadcasts_and_takes_integers():
    a, b = np.array([[1, 2, 3]]), np.array([[1], [3]])
    np.testing.assert_array_equal(tp.isclose(tp.tensor(a), tp.tensor(b)).numpy(), np.isclose(a, b))
    assert tp.isclose(tp.tensor([2**53 + 1]), tp.tensor([2**53]), rtol=0, atol=0).tolist() == [False]


def test_allclose_gives_a_python_bool():
    assert tp.allclose(t(A), t(A + 1e-9)) is True
    assert tp.allclose(t(A), t(A + 1e-3)) is False
    assert tp.allclose(t([np.nan]), t([np.nan]), equal_nan=True) is True
    assert t(A).allclose(t(A + 1e-3), atol=1e-2) is True


# -- tp.testing.assert_close -------------------------------------------------------------------------


def test_assert_close_passes_within_pytorchs_default_tolerances():
    x = np.array([1.0, 2.0, 3.0])
    tp.testing.assert_close(t(x).float(), t(x + 5e-6).float())  # float32: atol 1e-5
    tp.testing.assert_close(t(x).half(), t(x * (1 + 5e-4)).half())  # float16: rtol 1e-3
    tp.testing.assert_close(t(x), x + 5e-8)  # float64: 1e-7; a NumPy array as expected
    tp.testing.assert_close(tp.tensor([1, 2]), tp.tensor([1, 2]))
    tp.testing.assert_close(t([np.nan, 1.0]), t([np.nan, 1.0]), equal_nan=True)
    tp.testing.assert_close(2.0, 2.0)


def test_assert_close_names_the_largest_difference_and_its_index():
    x = np.zeros((2, 3))
    y = x.copy()
    y[1, 2], y[0, 1] = 0.5, 1e-3
    message = (
        "Tensor-likes are not close!\n\n"
        "Mismatched elements: 2 / 6 (33.3%)\n"
        "Greatest absolute difference: 0.5 at index (1, 2) (up to 1e-07 allowed)\n"
        "Greatest relative difference: inf at index (0, 1) (up to 1e-07 allowed)"
    )
    with pytest.raises(AssertionError, match=re.escape(message)):
        tp.testing.assert_close(t(y), t(x))


def test_assert_close_checks_shapes_dtypes_and_nans():
    with pytest.raises(AssertionError, match=r"The values for attribute 'shape' do not match: \(3,\) != \(2,\)"):
        tp.testing.assert_close(t([1.0, 2.0, 3.0]), t([1.0, 2.0]))
    message = "The values for attribute 'dtype' do not match: tensorplay.float32 != tensorplay.float64"
    with pytest.raises(AssertionError, match=message):
        tp.testing.assert_close(t([1.0]).float(), t([1.0]))
    tp.testing.assert_close(t([1.0]).float(), t([1.0]), check_dtype=False)
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 2"):
        tp.testing.assert_close(t([np.nan, 1.0]), t([np.nan, 1.0]))
    with pytest.raises(AssertionError, match=r"^Tensor-likes are not equal!\n\nMismatched elements: 1 / 1 \(100.0%\)"):
        tp.testing.assert_close(tp.tensor(3), tp.tensor(2))
    with pytest.raises(
        AssertionError, match=r"^Scalars are not close!\n\nExpected 2.0 but got 3.0.\nAbsolute difference"
    ):
        tp.testing.assert_close(3.0, 2.0)


def test_assert_close_takes_tolerances_and_a_message():
    tp.testing.assert_close(t([1.0]), t([1.1]), rtol=0.2, atol=0)
    with pytest.raises(AssertionError, match="^custom$"):
        tp.testing.assert_close(t([1.0]), t([1.1]), msg="custom")
    with pytest.raises(ValueError, match="assert_close takes both rtol and atol, or neither"):
        tp.testing.assert_close(t([1.0]), t([1.0]), rtol=0.1)


# -- gradients and graphs ---------------------------------------------------------------------


def test_diff_gradient():
    check_gradients(lambda x: tp.diff(x, n=2, axis=1, append=x[:, :1] * 2), RNG.uniform(size=(2, 4)))


def test_utilities_are_captured_and_replayed():
    x, y = t(A), t(A)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        every = tp.all(x > 0, axis=1)
        some = tp.any(x > 1.5)
        differences = tp.diff(x, n=2, axis=-1)
        close = tp.isclose(x, y, atol=0.1)
    b = RNG.uniform(-2, 2, A.shape)
    x.copy_(b)
    g.replay()
    np.testing.assert_array_equal(every.numpy(), np.all(b > 0, axis=1))
    assert some.item() == np.any(b > 1.5)
    assert_close(differences, np.diff(b, n=2, axis=-1))
    np.testing.assert_array_equal(close.numpy(), np.isclose(b, A, atol=0.1, rtol=1e-5))
