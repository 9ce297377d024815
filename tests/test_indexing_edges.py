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
