"""Edges of indexing and of the manipulation functions against NumPy: host
indices out of range in the per-element indexing functions, 0-d tensors
along dimension 0 (as PyTorch takes it), and the sentences that replace raw
errors."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close

import tensorplay as tp

X = np.arange(6, dtype=np.float64).reshape(2, 3)


def t(a):
    return tp.tensor(np.asarray(a, dtype=np.float64))


# -- host indices are checked, as NumPy (the module's contract) --------------------------------


@pytest.mark.parametrize("index", [[[3], [0]], np.array([[0], [-4]])])
def test_gather_refuses_host_indices_out_of_range(index):
    with pytest.raises(IndexError, match=r"out of range for dimension 1 of size 3"):
        tp.gather(t(X), 1, index)


def test_take_along_axis_refuses_host_indices_out_of_range_as_numpy():
    with pytest.raises(IndexError):
        np.take_along_axis(X, np.array([[3], [0]]), axis=1)
    with pytest.raises(IndexError, match=r"index 3 is out of range for dimension 1 of size 3"):
        tp.take_along_axis(t(X), np.array([[3], [0]]), axis=1)


@pytest.mark.parametrize("fn", ["scatter", "scatter_add"])
def test_scatter_refuses_host_indices_out_of_range(fn):
    x = t(X)
    src = t(np.ones((2, 1)))
    with pytest.raises(IndexError, match=r"index 3 is out of range for dimension 1 of size 3"):
        getattr(tp, fn)(x, 1, [[3], [0]], src)
    with pytest.raises(IndexError, match=r"index -4 is out of range for dimension 1 of size 3"):
        getattr(x, fn + "_")(1, [[0], [-4]], src)
    assert_close(x, X)  # nothing written


def test_host_indices_in_range_still_work():
    index = np.array([[2, -1], [0, -3]])
    assert_close(tp.gather(t(X), 1, index), np.take_along_axis(X, index, axis=1))
    assert_close(tp.take_along_axis(t(X), index, axis=1), np.take_along_axis(X, index, axis=1))
    want = X.copy()
    want[0, 2], want[1, 0] = 7.0, 7.0
    assert_close(tp.scatter(t(X), 1, [[2], [-3]], 7.0), want)


# -- 0-d tensors along dimension 0 ---------------------------------------------------------------


def test_flip_of_a_0d_tensor_along_dimension_0():
    assert_close(tp.flip(t(5.0), axis=0), np.array(5.0))
    assert_close(tp.flip(t(5.0), axis=(-1,)), np.array(5.0))


def test_repeat_of_a_0d_tensor_along_axis_0():
    assert_close(tp.repeat(t(5.0), 3, axis=0), np.repeat(np.array(5.0), 3, axis=0))


def test_repeat_takes_a_0d_numpy_count():
    x = np.array([1.0, 2.0, 3.0])
    assert_close(tp.repeat(t(x), np.array(2)), np.repeat(x, np.array(2)))


def test_take_along_axis_of_a_0d_tensor():
    assert_close(tp.take_along_axis(t(5.0), tp.tensor(0), axis=0), np.array(5.0))


def test_index_add_of_a_0d_tensor():
    assert_close(tp.index_add(t(5.0), 0, tp.tensor([0, 0]), t([1.0, 2.0])), np.array(8.0))
    x = t(5.0)
    x.index_add_(0, tp.tensor([0]), t([2.0]))
    assert_close(x, np.array(7.0))


@pytest.mark.parametrize("fn", [lambda x: tp.split(x, 1), lambda x: tp.chunk(x, 1)])
def test_split_and_chunk_refuse_a_0d_tensor_with_a_sentence(fn):
    with pytest.raises(ValueError, match=r"^(split|chunk)\(\) cuts a dimension: a 0-d tensor has none"):
        fn(t(5.0))


@pytest.mark.parametrize("fn", [tp.hsplit, tp.vsplit])
def test_split_into_no_sections_is_a_sentence(fn):
    with pytest.raises(ValueError, match=r"^tensor_split\(\) takes at least 1 section, got 0"):
        fn(t(np.zeros((2, 2))), 0)


# -- the standard's default ------------------------------------------------------------------------


def test_expand_dims_inserts_at_axis_0_by_default():
    assert_close(tp.expand_dims(t(X)), np.expand_dims(X, 0))


def test_roll_refuses_a_shift_that_is_not_an_integer_with_a_sentence():
    x = tp.arange(5)
    with pytest.raises(TypeError, match=r"^roll\(\) expects the shift as an int or a tuple of ints, got 1\.5$"):
        tp.roll(x, 1.5)
    with pytest.raises(TypeError, match=r"got \(1, 0\.5\)$"):
        tp.roll(x.reshape(1, 5), (1, 0.5), axis=(0, 1))
    assert tp.roll(x, np.array([2])).tolist() == np.roll(np.arange(5), 2).tolist()
    assert tp.roll(x, np.int64(-1)).tolist() == np.roll(np.arange(5), -1).tolist()


def test_narrow_names_the_start_it_was_given():
    with pytest.raises(IndexError, match=r"^narrow\(0, -6, 1\) is out of range for size 5$"):
        tp.narrow(tp.arange(5), 0, -6, 1)
    assert tp.narrow(tp.arange(5), 0, -2, 2).tolist() == [3, 4]


def test_a_uint64_index_past_int64s_range_is_past_the_end_not_from_it():
    """A device index is clamped on read and skipped on write when out of range
    (documented): 2**64 - 1 as uint64 wrapped to -1 and read the last element as
    an index from the end, and wrote it."""
    x = tp.arange(5.0)
    index = tp.tensor(np.array([2**64 - 1, 1], np.uint64))
    assert x[index].tolist() == [4.0, 1.0]  # clamped to the last, as 5 would be
    y = tp.zeros(5)
    y[index] = 7.0
    assert y.tolist() == [0.0, 7.0, 0.0, 0.0, 0.0]  # skipped, as 5 would be
    assert x[tp.tensor([-1, 9, -9])].tolist() == [4.0, 4.0, 0.0]
