"""Outputs of a compiled function that are its arguments, views of them, or
tensors it closes over: the same tensors as eagerly, on every call."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close

import tensorplay as tp
from tensorplay.compiler import StaleOutputError


def _values(seed, shape=4):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)


def test_an_argument_returned_is_the_callers_tensor_on_every_call():
    # Issue 15, item 5: y.add_(10) changed x on the warm-up only; later y was the graph's copy.
    f = tp.compile(lambda x: x)
    for seed in range(4):
        v = _values(seed)
        x = tp.tensor(v)
        y = f(x)
        assert y is x
        y.add_(10.0)
        assert_close(x, v.astype(np.float64) + 10.0)


def test_a_view_of_an_argument_returned_is_that_view_of_the_callers_tensor():
    f = tp.compile(lambda x: x[1:3])
    for seed in range(4):
        v = _values(seed)
        x = tp.tensor(v)
        y = f(x)
        assert y.data_ptr() == x.data_ptr() + 4 and y.shape == (2,) and y.stride() == (1,)
        y.mul_(0.0)
        want = v.astype(np.float64)
        want[1:3] = 0.0
        assert_close(x, want)


def test_an_argument_changed_in_place_and_returned_with_a_new_result():
    f = tp.compile(lambda x: (x.mul_(2.0), x + 1.0))
    previous = None
    for seed in range(4):
        v = _values(seed)
        x = tp.tensor(v)
        same, fresh = f(x)
        assert same is x
        assert_close(x, v.astype(np.float64) * 2.0)
        assert_close(fresh, v.astype(np.float64) * 2.0 + 1.0)
        if seed >= 2:  # replays: the new result is the graph's memory and goes stale at the next call
            with pytest.raises(StaleOutputError):
                previous.numpy()
        previous = fresh


def test_a_view_of_a_transposed_argument_is_a_view_of_the_callers_tensor():
    f = tp.compile(lambda m: m[0])
    for seed in range(4):
        v = _values(seed, (3, 2))
        m = tp.tensor(v).t()  # shape (2, 3), strides (1, 2)
        row = f(m)
        assert row.stride() == (2,) and row.data_ptr() == m.data_ptr()
        row.fill_(5.0)
        want = v.astype(np.float64).T.copy()
        want[0] = 5.0
        assert_close(m, want)


def test_a_view_of_an_argument_with_gaps_runs_eagerly_with_a_warning():
    f = tp.compile(lambda x: x[1:])
    with pytest.warns(UserWarning, match=r"returns a view of argument 0 .* calls with these arguments run eagerly"):
        for seed in range(4):
            base = tp.tensor(_values(seed, 8))
            y = f(base[::2])
            assert y.data_ptr() == base.data_ptr() + 8 and y.stride() == (2,)
    assert f.graph(base[::2]) is None


def test_one_of_several_aliased_arguments_returned():
    f = tp.compile(lambda x, y: (y, x * 2.0))
    for seed in range(4):
        base = tp.tensor(_values(seed, 6))
        first, second = base[0:4], base[2:6]
        same, doubled = f(first, second)
        assert same is second
        assert_close(doubled, first.numpy().astype(np.float64) * 2.0)


def test_a_tensor_closed_over_is_returned_as_itself():
    w = tp.tensor([1.0, 2.0, 3.0, 4.0])
    f = tp.compile(lambda x: (x + w, w))
    outs = [f(tp.tensor(_values(seed))) for seed in range(4)]
    for _, closed in outs:
        assert closed is w  # never stale: the graph does not write it
        assert closed.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert_close(outs[-1][0], _values(3).astype(np.float64) + [1.0, 2.0, 3.0, 4.0])


def test_an_argument_returned_while_autograd_records_runs_eagerly_with_a_warning():
    f = tp.compile(lambda x: (x, (x * x).sum()))
    with pytest.warns(UserWarning, match=r"returns argument 0 or a view of it while autograd records the call"):
        for k in range(3):
            x = tp.full((3,), 1.0 + k).requires_grad_()
            same, total = f(x)
            assert same is x
            total.backward()
            assert x.grad.tolist() == [2.0 * (1.0 + k)] * 3
    assert f.graph(x) is None


def test_an_argument_returned_with_the_stale_check_off():
    f = tp.compile(lambda x: (x, x + 1.0))
    tp.compiler.config.check_stale_outputs = False
    try:
        for seed in range(3):
            x = tp.tensor(_values(seed))
            same, plus = f(x)
            assert same is x
            assert_close(plus, _values(seed).astype(np.float64) + 1.0)
    finally:
        tp.compiler.config.check_stale_outputs = True


def test_a_view_of_an_argument_whose_size_one_dimension_has_any_stride():
    f = tp.compile(lambda x: x[:, 1:])
    for seed in range(3):
        base = tp.tensor(_values(seed, 8))
        x = base[:4][None]  # contiguous, with stride 0 on its size-1 dimension
        assert x.stride() == (0, 1)
        y = f(x)
        assert y.data_ptr() == x.data_ptr() + 4
        y.fill_(0.0)
        assert base.tolist()[:4] == [base.tolist()[0], 0.0, 0.0, 0.0]
    assert f.graph(x) is not None
