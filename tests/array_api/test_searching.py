"""Searching functions (the standard's ``argmax``/``argmin``,
``count_nonzero``, ``searchsorted``, ``nonzero``; PyTorch's forms) against
NumPy; ``nonzero`` refused inside a capture unless given ``size=``, whose
fixed-size form is captured and runs in while bodies."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp

RNG = np.random.default_rng(8)


# -- argmax, argmin, count_nonzero ---------------------------------------------------------------


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_and_argmin_take_the_standards_arguments(name, axis, keepdims):
    a = RNG.integers(0, 4, (3, 5)).astype(np.float64)  # ties: the first is taken
    a[1, 2] = np.nan
    want = getattr(np, name)(a, axis=axis, keepdims=keepdims)
    fn = getattr(tp, name)
    for got in (fn(tp.tensor(a), axis=axis, keepdims=keepdims), fn(tp.tensor(a), axis, keepdims)):
        assert got.dtype is tp.int64
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 0, (0, 2), -1])
def test_count_nonzero(axis, keepdims):
    a = RNG.integers(0, 3, (2, 3, 4)) * RNG.integers(0, 2, (2, 3, 4))
    for dtype in (tp.float32, tp.int8, tp.bool):
        got = tp.count_nonzero(tp.tensor(a, dtype=dtype), axis=axis, keepdims=keepdims)
        assert got.dtype is tp.int64
        np.testing.assert_array_equal(got.numpy(), np.count_nonzero(a, axis=axis, keepdims=keepdims))
    np.testing.assert_array_equal(tp.tensor(a).count_nonzero(1).numpy(), np.count_nonzero(a, axis=1))


def test_where_with_the_condition_alone_is_nonzero_and_one_value_is_refused():
    a = RNG.integers(0, 3, (3, 4)) * (RNG.random((3, 4)) < 0.5)
    got = tp.where(tp.tensor(a) > 0)  # NumPy's and PyTorch's one-argument form
    for g, w in zip(got, np.where(a > 0), strict=True):
        np.testing.assert_array_equal(g.numpy(), w)
    np.testing.assert_array_equal(tp.where(tp.tensor(a) > 0, tp.tensor(a), -1.0).numpy(), np.where(a > 0, a, -1.0))
    for args in ((1.0,), (None, 1.0)):
        with pytest.raises(TypeError, match="condition alone .* or with both a and b"):
            tp.where(tp.tensor(a) > 0, *args)


# -- searchsorted ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [tp.float64, tp.float32, tp.float16, tp.bfloat16, tp.int32, tp.uint8, tp.int64])
@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_matches_numpy(side, dtype):
    seq = np.sort(RNG.integers(0, 20, 37)).astype(dtype.np)
    values = np.arange(-1, 22).reshape(23, 1).astype(dtype.np)
    got = tp.searchsorted(tp.tensor(seq, dtype=dtype), tp.tensor(values, dtype=dtype), side=side)
    assert got.dtype is tp.int64 and got.shape == (23, 1)
    want = np.searchsorted(seq.astype(np.float64), values.astype(np.float64), side=side)
    np.testing.assert_array_equal(got.numpy(), want)


def test_searchsorted_with_a_sorter_and_nans():
    x1 = np.array([3.0, np.nan, 1.0, 2.0, 2.0, -np.inf])
    sorter = np.argsort(x1, kind="stable")
    x2 = np.array([np.nan, 2.0, 0.0, np.inf, -np.inf, 5.0])
    for side in ("left", "right"):
        got = tp.searchsorted(tp.tensor(x1), tp.tensor(x2), side=side, sorter=tp.tensor(sorter))
        np.testing.assert_array_equal(got.numpy(), np.searchsorted(x1, x2, side=side, sorter=sorter))


def test_searchsorted_in_pytorchs_forms():
    seq = np.array([[1, 3, 5, 7, 9], [2, 4, 6, 8, 10]])
    values = np.array([[3, 6, 9], [3, 6, 9]])
    x1, x2 = tp.tensor(seq), tp.tensor(values)
    want = np.stack([np.searchsorted(s, v, side="right") for s, v in zip(seq, values, strict=True)])
    np.testing.assert_array_equal(tp.searchsorted(x1, x2, right=True).numpy(), want)
    got = tp.searchsorted(x1, x2, side="right", out_int32=True)
    assert got.dtype is tp.int32 and got.tolist() == want.tolist()
    assert tp.searchsorted(tp.tensor([1.0, 2.0, 3.0]), 2.5).item() == 2  # a number as the value
    assert tp.searchsorted(tp.tensor([1, 2, 3]), tp.tensor([1.5, 2.0])).tolist() == [1, 1]  # promoted to compare


def test_searchsorted_bad_arguments_are_sentences():
    seq = tp.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match=r"^searchsorted\(\) expects side='left' or 'right', got 'middle'$"):
        tp.searchsorted(seq, seq, side="middle")
    with pytest.raises(ValueError, match=r"^searchsorted\(\) got side='left' and right=True, which disagree"):
        tp.searchsorted(seq, seq, side="left", right=True)
    with pytest.raises(ValueError, match=r"^searchsorted\(\) expects values of shape \(2, \.\.\.\) for sorted"):
        tp.searchsorted(tp.ones((2, 3)), tp.ones((3, 1)))
    with pytest.raises(ValueError, match=r"^searchsorted\(\) expects a sorter of the sequence's shape \(2,\), got"):
        tp.searchsorted(seq, seq, sorter=tp.tensor([0]))


def test_searchsorted_is_captured():
    seq = tp.tensor(np.arange(10.0))
    values = tp.tensor(RNG.uniform(-1, 11, 7))
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        out = tp.searchsorted(seq, values, side="right")
    for _ in range(2):
        v = RNG.uniform(-1, 11, 7)
        values.copy_(tp.tensor(v))
        g.replay()
        np.testing.assert_array_equal(out.numpy(), np.searchsorted(np.arange(10.0), v, side="right"))


# -- nonzero -----------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 5), (40,)], ids=str)
def test_nonzero_matches_numpy(shape):
    a = RNG.integers(0, 3, shape) * (RNG.random(shape) < 0.5)
    for dtype in (tp.float64, tp.int8, tp.bool, tp.bfloat16):
        got = tp.nonzero(tp.tensor(a, dtype=dtype))
        want = np.nonzero(a)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g.dtype is tp.int64
            np.testing.assert_array_equal(g.numpy(), w)
    np.testing.assert_array_equal(tp.tensor(a).nonzero().numpy(), np.argwhere(a))  # PyTorch's method: (n, ndim)
    np.testing.assert_array_equal(tp.argwhere(tp.tensor(a)).numpy(), np.argwhere(a))
    np.testing.assert_array_equal(tp.nonzero(tp.tensor(a), as_tuple=False).numpy(), np.argwhere(a))


def test_nonzero_of_nothing_and_of_a_0d_tensor():
    assert [t.shape for t in tp.nonzero(tp.zeros((2, 3)))] == [(0,), (0,)]
    assert [t.shape for t in tp.nonzero(tp.zeros((0, 3)))] == [(0,), (0,)]
    with pytest.raises(ValueError, match=r"^nonzero\(\) needs a tensor of at least one dimension, got a 0-d"):
        tp.nonzero(tp.tensor(1.0))


@pytest.mark.parametrize("size", [0, 3, 6, 10])
def test_nonzero_with_a_size_cuts_or_pads(size):
    a = np.array([[0, 1, 2], [3, 0, 0], [0, 0, 4], [5, 6, 0]])
    rows, cols = np.nonzero(a)  # 6 of them
    got = tp.nonzero(tp.tensor(a), size=size, fill_value=-1)
    pad = max(0, size - len(rows))
    np.testing.assert_array_equal(got[0].numpy(), np.concatenate([rows[:size], [-1] * pad]))
    np.testing.assert_array_equal(got[1].numpy(), np.concatenate([cols[:size], [-1] * pad]))
    assert tp.nonzero(tp.tensor(a), size=8)[0].tolist()[6:] == [0, 0]  # fill_value is 0 by default


def test_nonzero_inside_a_capture_needs_a_size():
    x = tp.tensor([0.0, 1.0, 2.0])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with pytest.raises(tp.cuda.CaptureError, match=r"^nonzero\(\) needs to read the number of nonzero"):
            tp.nonzero(x)
        with pytest.raises(tp.cuda.CaptureError, match=r"pass size= \(and fill_value=\) for a result of fixed size"):
            x.nonzero()
        (index,) = tp.nonzero(x, size=3, fill_value=-1)
    for a in ([0.0, 1.0, 2.0], [4.0, 0.0, 0.0], [1.0, 1.0, 1.0]):
        x.copy_(tp.tensor(a))
        g.replay()
        found = np.nonzero(a)[0].tolist()
        assert index.tolist() == found + [-1] * (3 - len(found))


def test_nonzero_with_a_size_runs_inside_a_while_body():
    x, n, flag = tp.tensor([0, 3, 0, 2, 5, 0]), tp.tensor([2]), tp.empty(1, dtype=tp.bool)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        tp.gt(n, 0, out=flag)
        with g.while_(flag):
            (where,) = tp.nonzero(x, size=6, fill_value=0)
            x.copy_(where)
            n.sub_(1)
            tp.gt(n, 0, out=flag)
    g.replay()
    assert x.tolist() == [0, 1, 2, 0, 0, 0]  # [1, 3, 4, 0, 0, 0], then the places of its nonzeros
