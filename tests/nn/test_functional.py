"""tensorplay.nn.functional: values against NumPy float64, gradients against
finite differences (float64, through the primitives' derivatives), and the
sentences bad inputs get."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import assert_close
from helpers.gradcheck import check_gradients

import tensorplay as tp
import tensorplay.nn.functional as F

RNG = np.random.default_rng(0)
X = RNG.uniform(-2, 2, (3, 4))
X3 = RNG.uniform(-2, 2, (2, 3, 2))
W = RNG.uniform(-1, 1, (2, 4))
B = RNG.uniform(-1, 1, (2,))
LABELS = np.array([3, 0, 1])
LABELS3 = np.array([[2, 0], [1, 1]])  # for X3: batch 2, 3 classes in dimension 1, 2 positions


def np_softmax(x, dim):
    e = np.exp(x - x.max(dim, keepdims=True))
    return e / e.sum(dim, keepdims=True)


def np_log_softmax(x, dim):
    s = x - x.max(dim, keepdims=True)
    return s - np.log(np.exp(s).sum(dim, keepdims=True))


def np_cross_entropy(x, labels, reduction="mean"):
    logp = np_log_softmax(x, 1 if x.ndim >= 2 else 0)
    if x.ndim == 1:
        nll = -logp[labels]
    else:
        picked = np.take_along_axis(logp, np.expand_dims(labels, 1), axis=1)
        nll = -np.squeeze(picked, 1)
    return {"mean": np.mean(nll), "sum": np.sum(nll), "none": nll}[reduction]


def reduce_np(v, reduction):
    return {"mean": v.mean(), "sum": v.sum(), "none": v}[reduction]


# -- values -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [tp.float32, tp.float64], ids=str)
@pytest.mark.parametrize(
    "fn, reference",
    [
        (F.relu, lambda x: np.maximum(x, 0)),
        (F.tanh, np.tanh),
        (F.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    ],
    ids=["relu", "tanh", "sigmoid"],
)
def test_elementwise_activations(fn, reference, dtype):
    out = fn(tp.tensor(X, dtype=dtype))
    assert out.dtype == dtype
    assert_close(out, reference(X), rtol=1e-6 if dtype == tp.float32 else 1e-12, atol=1e-7)


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("x", [X, X[0], np.stack([X, X + 1])], ids=["2-D", "1-D", "3-D"])
def test_linear(x, with_bias):
    bias = tp.tensor(B) if with_bias else None
    want = x @ W.T + (B if with_bias else 0)
    assert_close(F.linear(tp.tensor(x), tp.tensor(W), bias), want)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_and_log_softmax(dim):
    assert_close(F.softmax(tp.tensor(X), dim), np_softmax(X, dim))
    assert_close(F.log_softmax(tp.tensor(X), dim), np_log_softmax(X, dim))
    assert_close(F.softmax(tp.tensor(X3), dim), np_softmax(X3, dim))


def test_softmax_is_stable_for_large_inputs():
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -1003.0]], dtype=np.float32)
    assert_close(F.softmax(tp.tensor(x), 1), np_softmax(x.astype(np.float64), 1), rtol=1e-5, atol=1e-7)
    out = F.log_softmax(tp.tensor(x), 1)
    assert np.all(np.isfinite(out.numpy()))
    assert_close(out, np_log_softmax(x.astype(np.float64), 1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(reduction):
    target = X * 0.5 - 0.25
    want = reduce_np((X - target) ** 2, reduction)
    assert_close(F.mse_loss(tp.tensor(X), tp.tensor(target), reduction=reduction), want)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(
    "x, labels", [(X, LABELS), (X3, LABELS3), (X[0], np.array(2))], ids=["(N, C)", "(N, C, d)", "(C,)"]
)
def test_cross_entropy(x, labels, reduction):
    out = F.cross_entropy(tp.tensor(x), tp.tensor(labels), reduction=reduction)
    assert_close(out, np_cross_entropy(x, labels, reduction))


def test_cross_entropy_takes_int32_targets_and_float32_logits():
    out = F.cross_entropy(tp.tensor(X, dtype=tp.float32), tp.tensor(LABELS, dtype=tp.int32))
    assert out.dtype == tp.float32 and out.shape == ()
    assert_close(out, np_cross_entropy(X, LABELS), rtol=1e-5, atol=1e-6)


# -- gradients (finite differences, float64) ---------------------------------------------------


@pytest.mark.parametrize("fn", [F.relu, F.tanh, F.sigmoid], ids=["relu", "tanh", "sigmoid"])
def test_activation_gradients(fn):
    check_gradients(fn, X[:2, :3])


def test_linear_gradients():
    check_gradients(F.linear, X[:2, :3], W[:, :3], B)
    check_gradients(lambda x, w: F.linear(x, w), X[:2, :3], W[:, :3])
    check_gradients(F.linear, X3, W[:, :2], B)  # (2, 3, 2) input: rows of every leading index
    check_gradients(F.linear, X[0, :3], W[:, :3], B)  # 1-D input


def test_linear_is_one_node_whose_weight_gradient_is_dense_in_the_weights_layout():
    x, w, b = (tp.tensor(a).requires_grad_() for a in (X, W, B))
    out = F.linear(x, w, b)
    assert out.grad_fn.name == "AddmmBackward" and F.linear(x, w).grad_fn.name == "MmBackward"
    assert all(node is None for node in out.grad_fn.next_functions)  # straight to the leaves
    (out * out).sum().backward()
    assert w.grad.is_contiguous() and w.grad.shape == w.shape
    g = 2 * (X @ W.T + B)
    assert_close(w.grad, g.T @ X)
    assert_close(b.grad, g.sum(0))
    assert_close(x.grad, g @ W)


def test_linear_gradients_of_gradients_match_the_ops_it_is_made_of():
    def second(f):
        x, w, b = (tp.tensor(a).requires_grad_() for a in (X, W, B))
        (gx,) = tp.autograd.grad((f(x, w, b) ** 2).sum(), x, create_graph=True)
        return tp.autograd.grad((gx * gx).sum(), (x, w, b))

    for got, want in zip(second(F.linear), second(lambda x, w, b: x @ w.t() + b), strict=True):
        assert_close(got, want)


def test_mse_loss_is_one_node_and_gives_the_target_its_gradient_only_when_it_needs_one():
    x, y = tp.tensor(X).requires_grad_(), tp.tensor(X[::-1].copy())
    loss = F.mse_loss(x, y)
    assert loss.grad_fn.name == "MseLossBackward"
    loss.backward()
    assert_close(x.grad, 2 * (X - X[::-1]) / X.size)
    assert y.grad is None


@pytest.mark.parametrize("dim", [0, -1])
def test_softmax_gradients(dim):
    check_gradients(lambda x: F.softmax(x, dim), X[:2, :3])
    check_gradients(lambda x: F.log_softmax(x, dim), X[:2, :3])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_gradients(reduction):
    check_gradients(lambda a, b: F.mse_loss(a, b, reduction), X[:2, :3], W[:, :3])


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_gradients(reduction):
    labels = tp.tensor(LABELS[:2] % 3)
    check_gradients(lambda x: F.cross_entropy(x, labels, reduction), X[:2, :3])
    check_gradients(lambda x: F.cross_entropy(x, tp.tensor(LABELS3[:1])), X3[:1])


def test_cross_entropy_gradient_is_softmax_minus_one_hot():
    x = tp.tensor(X).requires_grad_()
    F.cross_entropy(x, tp.tensor(LABELS), reduction="sum").backward()
    one_hot = np.eye(4)[LABELS]
    assert_close(x.grad, np_softmax(X, 1) - one_hot)


# -- errors ---------------------------------------------------------------------------------


def test_linear_errors():
    w = tp.tensor(W)
    message = "linear expects input of shape (*, 4) for a weight of shape (2, 4), got input of shape (3, 2)"
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        F.linear(tp.ones(3, 2, dtype=tp.float64), w)
    with pytest.raises(ValueError, match=r"got input of shape \(\)"):
        F.linear(tp.tensor(1.0), w)
    with pytest.raises(ValueError, match=r"weight of shape \(out_features, in_features\), got shape \(4,\)"):
        F.linear(tp.ones(4), tp.ones(4))
    with pytest.raises(
        ValueError, match=r"bias of shape \(2,\) for a weight of shape \(2, 4\), got bias of shape \(4,\)"
    ):
        F.linear(tp.tensor(X), w, tp.ones(4, dtype=tp.float64))
    with pytest.raises(TypeError, match="^linear expects a Tensor as input, got list"):
        F.linear([1.0], w)
    with pytest.raises(TypeError, match="^linear expects a Tensor as bias, got float"):
        F.linear(tp.tensor(X), w, 1.0)


def test_mse_loss_errors():
    message = "mse_loss expects input and target of the same shape, got input (3, 1) and target (3,)"
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        F.mse_loss(tp.ones(3, 1), tp.ones(3))
    with pytest.raises(ValueError, match="^mse_loss expects reduction 'mean', 'sum' or 'none', got 'max'"):
        F.mse_loss(tp.ones(3), tp.ones(3), reduction="max")
    with pytest.raises(TypeError, match="^mse_loss expects a floating point tensor as input, got int64"):
        F.mse_loss(tp.tensor([1, 2]), tp.tensor([1, 2]))
    with pytest.raises(TypeError, match="^mse_loss expects a Tensor as target, got list"):
        F.mse_loss(tp.ones(2), [1.0, 2.0])


def test_cross_entropy_errors():
    logits = tp.tensor(X)
    message = "cross_entropy expects target of integer class indices (int64), got float32 (class probabilities"
    with pytest.raises(TypeError, match="^" + re.escape(message)):
        F.cross_entropy(logits, tp.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(TypeError, match="got bool$"):
        F.cross_entropy(logits, tp.tensor([True, False, True]))
    message = "cross_entropy expects target of shape (3,) for input of shape (3, 4) (classes in dimension 1), got"
    with pytest.raises(ValueError, match="^" + re.escape(message + " target of shape (3, 1)")):
        F.cross_entropy(logits, tp.tensor([[0], [1], [2]]))
    with pytest.raises(ValueError, match=r"target of shape \(\) for input of shape \(4,\) \(classes in dimension 0\)"):
        F.cross_entropy(tp.tensor(X[0]), tp.tensor([1]))
    with pytest.raises(ValueError, match="^cross_entropy expects input with a class dimension, got a 0-d tensor"):
        F.cross_entropy(tp.tensor(1.0), tp.tensor(0))
    with pytest.raises(ValueError, match="^cross_entropy expects reduction 'mean', 'sum' or 'none', got 'all'"):
        F.cross_entropy(logits, tp.tensor(LABELS), reduction="all")
    with pytest.raises(TypeError, match="^cross_entropy expects a floating point tensor as input, got int64"):
        F.cross_entropy(tp.tensor([[1, 2]]), tp.tensor([0]))


def test_softmax_errors():
    with pytest.raises(TypeError, match="^softmax expects a floating point tensor as input, got int64"):
        F.softmax(tp.tensor([1, 2]), 0)
    with pytest.raises(IndexError, match="dimension 2 is out of range"):
        F.log_softmax(tp.tensor(X), 2)
    with pytest.raises(TypeError, match="^relu expects a Tensor as input, got ndarray"):
        F.relu(X)


def test_cross_entropy_can_be_captured_after_a_warm_up():
    logits = tp.tensor(X)
    labels = tp.tensor(LABELS)
    F.cross_entropy(logits, labels)  # copies the class indices 0..3 to the device once
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        loss = F.cross_entropy(logits, labels)
    x2 = X[::-1].copy()
    logits.copy_(x2)
    g.replay()
    assert_close(loss, np_cross_entropy(x2, LABELS))
