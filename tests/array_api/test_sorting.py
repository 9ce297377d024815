"""Sorting functions (the standard's ``sort``/``argsort``, PyTorch's
``(values, indices)`` forms and ``topk``) against NumPy's stable sort, on
every real dtype, along any axis, with ties and NaNs; gradients against finite
differences; capture and replay, in a while body too."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from helpers.gradcheck import check_gradients

import tensorplay as tp

RNG = np.random.default_rng(11)
DTYPES = [tp.float32, tp.float64, tp.float16, tp.bfloat16, tp.int8, tp.int32, tp.int64, tp.uint8, tp.uint64, tp.bool]


def data(shape, dtype, nan: bool = True) -> np.ndarray:
    """Few distinct values (many ties), NaNs among the floats."""
    a = RNG.integers(0, 6, shape)
    if dtype is tp.bool:
        return a % 2 == 0
    if dtype.is_floating_point:
        a = a.astype(np.float64) - 2.5
        if nan and a.size > 2:
            a.flat[RNG.choice(a.size, max(1, a.size // 8), replace=False)] = np.nan
    return a.astype(dtype.np)


def ref_argsort(a: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """NumPy's stable argsort; descending: stable too, NaNs first (the largest)."""
    if a.dtype.kind == "f" or str(a.dtype) == "bfloat16":
        a = a.astype(np.float64)
    if not descending:
        return np.argsort(a, axis=axis, kind="stable")
    n = a.shape[axis]
    flipped = np.flip(a, axis)
    return n - 1 - np.flip(np.argsort(flipped, axis=axis, kind="stable"), axis)


def as_host(t: tp.Tensor) -> np.ndarray:
    return t.to(tp.float64).numpy() if t.dtype is tp.bfloat16 else t.numpy()


CASES = [(d, shape, axis) for d in DTYPES for shape, axis in [((3, 5), -1), ((2, 37), 1), ((2, 3, 4), 1)]]
CASES += [(d, (70, 2), 0) for d in (tp.float64, tp.int32, tp.bfloat16)]  # a tile wider than the simulator's blocks


@pytest.mark.parametrize("dtype, shape, axis", CASES, ids=str)
def test_sort_and_argsort_match_numpys_stable_sort(dtype, shape, axis):
    a = data(shape, dtype)
    x = tp.tensor(a, dtype=dtype)
    host = a.astype(np.float64) if dtype is tp.bfloat16 else a
    for descending in (False, True):
        want = ref_argsort(host, axis, descending)
        got = tp.argsort(x, axis=axis, descending=descending)
        assert got.dtype is tp.int64 and got.shape == a.shape
        np.testing.assert_array_equal(got.numpy(), want)
        values = tp.sort(x, axis=axis, descending=descending)
        assert values.dtype is dtype
        np.testing.assert_array_equal(as_host(values), np.take_along_axis(host, want, axis))


@pytest.mark.parametrize("n", [1, 2, 31, 32, 33, 100])
def test_rows_of_every_length_around_a_tile(n):
    a = RNG.standard_normal((2, n))
    np.testing.assert_array_equal(tp.argsort(tp.tensor(a)).numpy(), np.argsort(a, kind="stable"))
    np.testing.assert_array_equal(tp.sort(tp.tensor(a)).numpy(), np.sort(a, kind="stable"))


def test_rows_longer_than_a_tile_take_the_radix_sort():
    # 1100 items a row: longer than a tile on either backend, three rows: a pass by row too
    a = data((3, 1100), tp.float32)
    a[0, :4] = [-0.0, 0.0, -0.0, np.inf]
    x = tp.tensor(a)
    for descending in (False, True):
        want = ref_argsort(a, -1, descending)
        np.testing.assert_array_equal(tp.argsort(x, descending=descending).numpy(), want)
        values, index = tp.sort(x, -1, descending)  # the values written by the last pass, bit for bit
        np.testing.assert_array_equal(index.numpy(), want)
        np.testing.assert_array_equal(np.signbit(values.numpy()), np.signbit(np.take_along_axis(a, want, -1)))
        np.testing.assert_array_equal(values.numpy(), np.take_along_axis(a, want, -1))


def test_the_radix_sort_carries_int64_positions_past_2_to_the_31_items(monkeypatch):
    monkeypatch.setattr(importlib.import_module("tensorplay._sorting_functions"), "NARROW_POSITIONS", 0)
    a = RNG.integers(-300, 300, (2, 1100)).astype(np.int16)
    np.testing.assert_array_equal(tp.argsort(tp.tensor(a)).numpy(), np.argsort(a, kind="stable"))
    np.testing.assert_array_equal(tp.sort(tp.tensor(a)).numpy(), np.sort(a))


def test_extreme_values_and_signed_zeros_sort_as_numpy():
    a = np.array([np.inf, -0.0, 0.0, -np.inf, np.nan, 1e308, -1e308, 0.0, np.nan, -0.0])
    np.testing.assert_array_equal(tp.argsort(tp.tensor(a)).numpy(), np.argsort(a, kind="stable"))
    ints = np.array([np.iinfo(np.int64).max, np.iinfo(np.int64).min, 0, -1, 1], dtype=np.int64)
    np.testing.assert_array_equal(tp.sort(tp.tensor(ints)).numpy(), np.sort(ints))
    big = np.array([2**64 - 1, 0, 2**63, 2**63 - 1], dtype=np.uint64)
    np.testing.assert_array_equal(tp.sort(tp.tensor(big), descending=True).numpy(), np.sort(big)[::-1])


def test_pytorch_forms_give_values_and_indices():
    a = data((3, 6), tp.float32)
    x = tp.tensor(a)
    want = ref_argsort(a, 1, True)
    for found in (tp.sort(x, 1, True), x.sort(descending=True), x.sort(-1, True, stable=True)):
        values, indices = found
        assert found.values is values and found.indices is indices
        np.testing.assert_array_equal(indices.numpy(), want)
        np.testing.assert_array_equal(values.numpy(), np.take_along_axis(a, want, 1))
    np.testing.assert_array_equal(x.argsort(0).numpy(), ref_argsort(a, 0, False))
    np.testing.assert_array_equal(tp.argsort(x, 0, True).numpy(), ref_argsort(a, 0, True))
    assert isinstance(tp.sort(x), tp.Tensor)  # the standard's: the values alone


def test_a_0d_tensor_sorts_to_itself():
    values, indices = tp.tensor(2.5).sort()
    assert values.shape == () and values.item() == 2.5 and indices.item() == 0


def test_empty_tensors_sort_to_empty_tensors():
    assert tp.sort(tp.zeros((0, 3))).shape == (0, 3)
    assert tp.argsort(tp.zeros((2, 0)), axis=1).shape == (2, 0)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [0, -1])
def test_topk_matches_the_first_k_of_a_stable_sort(largest, dim):
    a = data((5, 40), tp.float64) if dim == -1 else data((40, 5), tp.float64)
    k = 3
    want = np.take(ref_argsort(a, dim, largest), np.arange(k), axis=dim)
    values, indices = tp.topk(tp.tensor(a), k, dim=dim, largest=largest)
    np.testing.assert_array_equal(indices.numpy(), want)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(a, want, dim))
    values, indices = tp.tensor(a).topk(k, dim, largest)
    np.testing.assert_array_equal(indices.numpy(), want)


def test_bad_arguments_are_sentences():
    with pytest.raises(ValueError, match=r"^topk\(\) expects k between 0 and 4 \(the size of dimension -1\), got 5$"):
        tp.topk(tp.ones(4), 5)
    with pytest.raises(TypeError, match=r"^sort\(\) needs a real-valued tensor \(complex numbers have no order\)"):
        tp.sort(tp.ones(3, dtype=tp.complex64))
    with pytest.raises(TypeError, match=r"^sort\(\) got axis=0 and dim=1, two spellings of one argument"):
        tp.sort(tp.ones((2, 2)), dim=1, axis=0)
    with pytest.raises(IndexError, match="dimension 2 is out of range for a tensor of 2 dimensions"):
        tp.argsort(tp.ones((2, 2)), axis=2)


def test_gradients_go_back_to_where_each_value_came_from():
    a = RNG.standard_normal((2, 3))
    check_gradients(lambda x: tp.sort(x, axis=0), a)
    check_gradients(lambda x: tp.sort(x, descending=True), a)
    check_gradients(lambda x: tp.topk(x, 2, dim=1).values, a)


def test_gradient_of_a_gradient_passes_through_the_gather():
    a = RNG.standard_normal(5)
    x = tp.tensor(a).requires_grad_()
    w = tp.tensor(np.arange(5.0)).requires_grad_()
    (g,) = tp.autograd.grad((tp.sort(x) * w).sum(), [x], create_graph=True)
    order = np.argsort(a, kind="stable")
    want = np.empty(5)
    want[order] = np.arange(5.0)  # each weight goes back to where its value came from
    np.testing.assert_allclose(g.numpy(), want)
    c = RNG.standard_normal(5)
    (gw,) = tp.autograd.grad((g * tp.tensor(c)).sum(), [w])
    np.testing.assert_allclose(gw.numpy(), c[order])


def test_sort_is_captured_and_replays_on_new_data():
    x = tp.tensor(data((3, 40), tp.float32))
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        values, indices = x.sort(dim=1, descending=True)
        top = tp.topk(x, 4).indices
    for _ in range(2):
        a = data((3, 40), tp.float32)
        x.copy_(tp.tensor(a))
        g.replay()
        want = ref_argsort(a, 1, True)
        np.testing.assert_array_equal(indices.numpy(), want)
        np.testing.assert_array_equal(values.numpy(), np.take_along_axis(a, want, 1))
        np.testing.assert_array_equal(top.numpy(), want[:, :4])


def test_sort_runs_inside_a_while_body():
    a = data((50,), tp.float64, nan=False)
    x, n, flag = tp.tensor(a), tp.tensor([3]), tp.empty(1, dtype=tp.bool)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        tp.gt(n, 0, out=flag)
        with g.while_(flag):
            x.copy_(-tp.sort(x, descending=True) + 1.0)
            n.sub_(1)
            tp.gt(n, 0, out=flag)
    g.replay()
    want = a
    for _ in range(3):
        want = -np.sort(want)[::-1] + 1.0
    np.testing.assert_array_equal(x.numpy(), want)
