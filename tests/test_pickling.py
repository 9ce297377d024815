"""Tensors pickled as their values; tp.save and tp.load (tensorplay/_pickling.py)."""

from __future__ import annotations

import copy
import io
import pickle

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn

DTYPES = ["bool", "uint8", "int32", "int64", "uint64", "float16", "bfloat16", "float32", "float64", "complex128"]


@pytest.mark.parametrize("name", DTYPES)
def test_a_tensor_pickles_as_its_values_into_new_memory(name):
    dtype = getattr(tp, name)
    values = np.arange(12).reshape(3, 4) % 5 * (1 + 1j if name == "complex128" else 1)
    x = tp.tensor(values, dtype=dtype)
    before = x.numpy()
    y = pickle.loads(pickle.dumps(x))
    assert type(y) is tp.Tensor and y.dtype == dtype and y.shape == (3, 4)
    np.testing.assert_array_equal(y.numpy(), before)
    y.fill_(0)  # its own memory
    np.testing.assert_array_equal(x.numpy(), before)


def test_views_zero_size_and_0d_tensors_pickle_as_their_elements():
    base = tp.arange(12.0).reshape(3, 4)
    view = base.t()[1:, ::2]  # strided, not contiguous
    expected = np.arange(12.0).reshape(3, 4).T[1:, ::2]
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(view)).numpy(), expected)
    assert pickle.loads(pickle.dumps(tp.zeros(0, 3))).shape == (0, 3)
    assert pickle.loads(pickle.dumps(tp.tensor(2.5))).item() == 2.5


def test_a_parameter_and_requires_grad_survive_a_round_trip_and_the_gradient_is_left_behind():
    p = nn.Parameter(tp.tensor([1.0, 2.0]))
    (p * p).sum().backward()
    q = pickle.loads(pickle.dumps(p))
    assert type(q) is nn.Parameter and q.requires_grad and q.is_leaf and q.grad is None
    frozen = pickle.loads(pickle.dumps(tp.tensor([1.0]).requires_grad_(False)))
    assert not frozen.requires_grad


def test_a_state_dict_saved_and_loaded_restores_the_model(tmp_path):
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x = tp.tensor(np.linspace(-1, 1, 6).reshape(2, 3))
    expected = model(x).numpy()
    path = tmp_path / "model.tp"
    tp.save(model.state_dict(), path)
    other = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    other.load_state_dict(tp.load(path))
    np.testing.assert_array_equal(other(x).numpy(), expected)


def test_load_refuses_what_is_not_weights_unless_asked():
    f = io.BytesIO()
    tp.save({"w": tp.ones(2), "when": np.float64(1.0)}, f)  # a NumPy scalar: a global NumPy names
    f.seek(0)
    with pytest.raises(pickle.UnpicklingError, match=r"^tp\.load\(weights_only=True\) refuses numpy"):
        tp.load(f)
    f.seek(0)
    loaded = tp.load(f, weights_only=False)
    assert loaded["w"].tolist() == [1.0, 1.0] and loaded["when"] == 1.0


def test_copy_copy_still_shares_memory_and_deepcopy_does_not():
    x = tp.tensor([1.0, 2.0])
    shallow, deep = copy.copy(x), copy.deepcopy(x)
    x.add_(1.0)
    assert shallow.tolist() == [2.0, 3.0] and deep.tolist() == [1.0, 2.0]


def test_pickling_during_a_capture_is_refused_and_the_capture_goes_on():
    x = tp.ones(4)
    x + 1.0  # the kernel is loaded before the capture
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x + 1.0
        with pytest.raises(tp.cuda.CaptureError):
            pickle.dumps(y)
    g.replay()
    assert y.tolist() == [2.0] * 4
