"""Set functions (the standard's ``unique_values``, ``unique_counts``,
``unique_inverse``, ``unique_all``; PyTorch's ``unique``) against NumPy's
``unique`` with NaNs distinct; refused inside a capture unless given ``size=``,
whose fixed-size form is captured and runs in while bodies."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp

RNG = np.random.default_rng(21)


def data(shape, dtype) -> np.ndarray:
    a = RNG.integers(-3, 4, shape)
    if dtype is tp.bool:
        return a > 0
    if dtype.is_floating_point:
        a = a.astype(np.float64) / 2
        a.flat[0], a.flat[-1] = np.nan, -0.0
        a.flat[len(a.flat) // 2] = np.nan
    elif dtype.np.kind == "u":
        a = a + 3
    return a.astype(dtype.np)


def host(t: tp.Tensor) -> np.ndarray:
    return t.to(tp.float64).numpy() if t.dtype is tp.bfloat16 else t.numpy()


@pytest.mark.parametrize("dtype", [tp.float64, tp.float32, tp.bfloat16, tp.int8, tp.uint64, tp.bool], ids=str)
@pytest.mark.parametrize("shape", [(9,), (3, 5)], ids=str)
def test_unique_all_matches_numpy(dtype, shape):
    a = data(shape, dtype)
    ref = a.astype(np.float64) if dtype is tp.bfloat16 else a
    values, index, inverse, counts = np.unique(
        ref, return_index=True, return_inverse=True, return_counts=True, equal_nan=False
    )
    x = tp.tensor(a, dtype=dtype)
    found = tp.unique_all(x)
    assert found._fields == ("values", "indices", "inverse_indices", "counts")
    assert found.values.dtype is dtype
    np.testing.assert_array_equal(host(found.values), values)
    np.testing.assert_array_equal(found.indices.numpy(), index)
    np.testing.assert_array_equal(found.inverse_indices.numpy(), inverse.reshape(shape))
    np.testing.assert_array_equal(found.counts.numpy(), counts)
    assert all(t.dtype is tp.int64 for t in found[1:])
    np.testing.assert_array_equal(host(tp.unique_values(x)), values)
    v, c = tp.unique_counts(x)
    np.testing.assert_array_equal(c.numpy(), counts)
    v, i = tp.unique_inverse(x)
    assert tp.unique_inverse(x)._fields == ("values", "inverse_indices")
    np.testing.assert_array_equal(i.numpy(), inverse.reshape(shape))


def test_complex_values_are_unique_by_both_parts():
    a = np.array([1 + 2j, 1 - 1j, 0j, 1 + 2j, -0.0 + 0j, 2 + 0j, complex(np.nan, 1), 1 - 1j], dtype=np.complex128)
    values, index, inverse, counts = np.unique(
        a, return_index=True, return_inverse=True, return_counts=True, equal_nan=False
    )
    found = tp.unique_all(tp.tensor(a))
    assert found.values.dtype is tp.complex128
    np.testing.assert_array_equal(found.values.numpy(), values)
    np.testing.assert_array_equal(found.indices.numpy(), index)
    np.testing.assert_array_equal(found.inverse_indices.numpy(), inverse)
    np.testing.assert_array_equal(found.counts.numpy(), counts)


def test_unique_of_nothing():
    found = tp.unique_all(tp.zeros((0, 2)))
    assert [t.shape for t in found] == [(0,), (0,), (0, 2), (0,)]


def test_pytorchs_unique():
    a = np.array([[3, 1, 3], [2, 1, 1]])
    x = tp.tensor(a)
    values, inverse, counts = np.unique(a, return_inverse=True, return_counts=True)
    assert tp.unique(x).tolist() == values.tolist()
    assert x.unique().tolist() == values.tolist()
    v, i = tp.unique(x, return_inverse=True)
    assert i.tolist() == inverse.reshape(a.shape).tolist()
    v, c = tp.unique(x, return_counts=True)
    assert c.tolist() == counts.tolist()
    v, i, c = x.unique(sorted=True, return_inverse=True, return_counts=True)
    assert (v.tolist(), i.tolist(), c.tolist()) == (values.tolist(), inverse.reshape(a.shape).tolist(), counts.tolist())
    with pytest.raises(NotImplementedError, match=r"^unique\(\) over one dimension \(dim=0\) is not implemented"):
        tp.unique(x, dim=0)


@pytest.mark.parametrize("size", [0, 2, 4, 6])
def test_a_size_cuts_or_pads(size):
    a = np.array([5.0, 1.0, 5.0, 3.0, 1.0, 9.0])  # 4 unique values
    values, index, inverse, counts = np.unique(a, return_index=True, return_inverse=True, return_counts=True)
    pad = max(0, size - 4)
    found = tp.unique_all(tp.tensor(a), size=size, fill_value=-1.0)
    np.testing.assert_array_equal(found.values.numpy(), np.concatenate([values[:size], [-1.0] * pad]))
    np.testing.assert_array_equal(found.counts.numpy(), np.concatenate([counts[:size], [0] * pad]))
    np.testing.assert_array_equal(found.indices.numpy(), np.concatenate([index[:size], [0] * pad]))
    np.testing.assert_array_equal(found.inverse_indices.numpy(), inverse)  # past the end where cut off
    assert tp.unique_values(tp.tensor(a), size=6).tolist() == [1.0, 3.0, 5.0, 9.0, 1.0, 1.0]  # the smallest pads


def test_unique_inside_a_capture_needs_a_size():
    x = tp.tensor([3, 1, 3, 2])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with pytest.raises(tp.cuda.CaptureError, match=r"^unique_counts\(\) needs to read the number of unique"):
            tp.unique_counts(x)
        with pytest.raises(tp.cuda.CaptureError, match=r"^unique\(\) needs to read the number of unique values"):
            x.unique()
        values, counts = tp.unique_counts(x, size=4, fill_value=0)
        inverse = tp.unique_inverse(x, size=4).inverse_indices
    for a in ([3, 1, 3, 2], [7, 7, 7, 7], [4, 3, 2, 1]):
        x.copy_(tp.tensor(a))
        g.replay()
        v, i, c = np.unique(a, return_inverse=True, return_counts=True)
        pad = 4 - len(v)
        assert values.tolist() == v.tolist() + [0] * pad
        assert counts.tolist() == c.tolist() + [0] * pad
        assert inverse.tolist() == i.tolist()


def test_unique_with_a_size_runs_inside_a_while_body():
    x, n, flag = tp.tensor([4, 2, 4, 8, 2, 2]), tp.tensor([2]), tp.empty(1, dtype=tp.bool)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        tp.gt(n, 0, out=flag)
        with g.while_(flag):
            x.copy_(tp.unique_counts(x, size=6, fill_value=1).counts * 2)
            n.sub_(1)
            tp.gt(n, 0, out=flag)
    g.replay()
    want = np.array([4, 2, 4, 8, 2, 2])
    for _ in range(2):
        counts = np.unique(want, return_counts=True)[1]
        want = np.concatenate([counts, [0] * (6 - len(counts))]) * 2
    assert x.tolist() == want.tolist()
