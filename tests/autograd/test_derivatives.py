"""Every differentiable op's gradient against finite differences (float64)."""

import numpy as np
import pytest
from helpers.gradcheck import check_gradients

import tensorplay as tp

A = np.array([[0.5, -1.2, 2.0], [1.5, 0.7, -0.3]])
B = np.array([[1.1, 0.4, -0.8], [-0.6, 2.2, 0.9]])
ROW = np.array([0.3, -0.7, 1.9])
POS = np.abs(A) + 0.5


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a + b,
        lambda a, b: a - b,
        lambda a, b: a * b,
        lambda a, b: a / b,
        lambda a, b: tp.maximum(a, b),
        lambda a, b: tp.minimum(a, b),
        lambda a, b: a * 3.0 - 2.0 / b,
        lambda a, b: 1.5 - a + b * 0.5,
    ],
    ids=["add", "sub", "mul", "div", "maximum", "minimum", "with numbers", "reflected"],
)
def test_binary_ops(fn):
    check_gradients(fn, A, B)


@pytest.mark.parametrize(
    "fn",
    [lambda a, r: a + r, lambda a, r: a * r, lambda a, r: r / (a * a + 1), lambda a, r: a - r.reshape(1, 3)],
    ids=["add row", "mul row", "row over", "sub 1x3"],
)
def test_broadcast_operands_get_summed_gradients(fn):
    check_gradients(fn, A, ROW)


@pytest.mark.parametrize("op", ["neg", "abs", "exp", "tanh", "sigmoid", "relu", "sin", "cos"])
def test_unary_ops(op):
    check_gradients(lambda a: getattr(a, op)(), A)


@pytest.mark.parametrize("op", ["log", "sqrt"])
def test_unary_ops_on_positive_inputs(op):
    check_gradients(lambda a: getattr(a, op)(), POS)


def test_pow_in_base_and_exponent():
    check_gradients(lambda a, b: a**b, POS, B)
    check_gradients(lambda a: a**3 + 2.0**a, A)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: a.sum(),
        lambda a: a.sum(0),
        lambda a: a.sum(-1, keepdim=True),
        lambda a: a.mean(),
        lambda a: a.mean(1),
        lambda a: a.max(),
        lambda a: a.min(0).values,
        lambda a: a.amax(1, keepdim=True),
        lambda a: a.sum((0, 1)),
    ],
    ids=["sum", "sum0", "sum-1k", "mean", "mean1", "max", "min0", "max1k", "sum01"],
)
def test_reductions(fn):
    check_gradients(fn, A)


def test_max_shares_the_gradient_between_ties():
    x = tp.tensor([1.0, 3.0, 3.0, 2.0]).requires_grad_()
    x.max().backward()
    assert x.grad.tolist() == [0.0, 0.5, 0.5, 0.0]


@pytest.mark.parametrize(
    "shapes",
    [((2, 3), (3, 2)), ((3,), (3, 2)), ((2, 3), (3,)), ((3,), (3,)), ((2, 2, 3), (3, 2)), ((1, 2, 3), (2, 3, 2))],
    ids=["mm", "vec-mat", "mat-vec", "dot", "batched-broadcast", "batch-1"],
)
def test_matmul(shapes):
    rng = np.random.default_rng(1)
    a, b = (rng.uniform(-1, 1, s) for s in shapes)
    check_gradients(lambda x, y: x @ y, a, b)


def test_clamp_where_and_tensor_bounds():
    check_gradients(lambda a: a.clamp(-0.5, 1.0), A)
    check_gradients(lambda a: a.clamp(min=0.0), A)
    check_gradients(lambda a, lo: a.clamp(lo, 1.8), A, ROW)
    cond = tp.tensor(A > 0)
    check_gradients(lambda a, b: tp.where(cond, a, b), A, B)
    check_gradients(lambda a, r: tp.where(cond, a * 2, r), A, ROW)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: a.view(3, 2) * tp.tensor([1.0, 2.0]).double(),
        lambda a: a.reshape(-1)[1:5],
        lambda a: a.t() @ a,
        lambda a: a.T.contiguous() * 2,
        lambda a: a.permute(1, 0)[2],
        lambda a: a.unsqueeze(0).expand(4, 2, 3).sum(0),
        lambda a: a[:, 1:].squeeze() * a[0, 0],
        lambda a: a.narrow(1, 1, 2) ** 2,
        lambda a: a[1, ::2] + a[0, None, :2],
        lambda a: a.flatten().clone().to(tp.float64, copy=True) * 3,
        lambda a: a.transpose(0, 1).reshape(2, 3),
    ],
    ids=[
        "view",
        "reshape-slice",
        "t-mm",
        "T",
        "permute-index",
        "expand",
        "squeeze",
        "narrow",
        "index",
        "copies",
        "transpose-reshape",
    ],
)
def test_views_and_copies(fn):
    check_gradients(fn, A)


def test_cat_and_stack():
    check_gradients(lambda a, b: tp.cat([a, b * 2, a], 1), A, B)
    check_gradients(lambda a, b: tp.stack([a, b], 1), A, B)
    check_gradients(lambda a, r: tp.cat([a, r.unsqueeze(0)]), A, ROW)


def test_a_composite_softmax_cross_entropy():
    target = tp.tensor(np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))

    def loss(z):
        shifted = z - z.amax(1, keepdim=True).detach()
        logp = shifted - shifted.exp().sum(1, keepdim=True).log()
        return -(logp * target).sum(1).mean()

    check_gradients(loss, A)


def test_float32_inputs_get_float32_gradients():
    x = tp.tensor([1.0, 2.0]).requires_grad_()
    w = tp.tensor(np.array([0.5, 0.25])).requires_grad_()
    (x * w).sum().backward()
    assert x.grad.dtype is tp.float32 and w.grad.dtype is tp.float64
    np.testing.assert_allclose(x.grad.numpy(), [0.5, 0.25])
    np.testing.assert_allclose(w.grad.numpy(), [1.0, 2.0])
