"""Autograd fixes, each against an independent reference (the derivative worked
out by hand, or PyTorch's documented result given as numbers): gradients with
respect to an input computed from another input, the dtype of ``.grad``, grad
mode in decorated generators, and second derivatives through a saved output of
an ``autograd.Function``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import tensorplay as tp


def test_grad_of_an_input_counts_the_path_through_another_input():
    # y = (h*h).sum() + (x*5).sum() with h = 3x, i.e. y = 9x^2 + 5x:
    # dy/dh = 2h = 6x and dy/dx = 18x + 5, as torch.autograd.grad gives
    x = tp.tensor([1.0, 2.0]).requires_grad_()
    h = x * 3
    y = (h * h).sum() + (x * 5).sum()
    gh, gx = tp.autograd.grad(y, [h, x])
    np.testing.assert_allclose(gh.numpy(), [6.0, 12.0])
    np.testing.assert_allclose(gx.numpy(), [23.0, 41.0])


def test_grad_of_an_input_reached_only_through_another_input():
    x = tp.tensor([1.0, 2.0]).requires_grad_()
    h = x * 3
    gh, gx = tp.autograd.grad((h * h).sum(), [h, x])  # y = 9x^2
    np.testing.assert_allclose(gh.numpy(), [6.0, 12.0])
    np.testing.assert_allclose(gx.numpy(), [18.0, 36.0])


def _central(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of ``f`` (array -> array, summed) at ``x``, in float64."""
    out = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        out[i] = (np.sum(f(up)) - np.sum(f(down))) / (2 * eps)
    return out


def test_grad_through_an_intermediate_input_matches_finite_differences():
    def first(values: np.ndarray, create_graph: bool = False):
        x = tp.tensor(values).requires_grad_()
        h = x.exp()
        (_, gx) = tp.autograd.grad((h * x).sum(), [h, x], create_graph=create_graph)
        return x, gx

    values = np.array([0.3, -0.7])
    _, gx = first(values)
    np.testing.assert_allclose(gx.numpy(), _central(lambda v: v * np.exp(v), values), rtol=1e-6)
    x, gx = first(values, create_graph=True)
    (second,) = tp.autograd.grad(gx.sum(), x)
    np.testing.assert_allclose(second.numpy(), _central(lambda v: first(v)[1].numpy(), values), rtol=1e-6)


@pytest.mark.parametrize("gradient", [tp.float64, tp.int64])
def test_grad_keeps_the_dtype_of_a_float32_leaf(gradient):
    w = tp.ones(2).requires_grad_()
    w.sum().backward(tp.tensor(3, dtype=gradient))
    assert w.grad.dtype is tp.float32
    np.testing.assert_allclose(w.grad.numpy(), [3.0, 3.0])
    (w * 0.25).sum().backward()  # accumulates into the float32 .grad
    assert w.grad.dtype is tp.float32
    np.testing.assert_allclose(w.grad.numpy(), [3.25, 3.25])


def test_a_float64_gradient_of_a_leaf_output_keeps_its_dtype():
    w = tp.tensor([1.0, 2.0]).requires_grad_()
    w.backward(tp.tensor([0.5, 1.5], dtype=tp.float64))  # the root is the leaf itself
    assert w.grad.dtype is tp.float32
    np.testing.assert_allclose(w.grad.numpy(), [0.5, 1.5])


@pytest.mark.parametrize("decorator", [tp.no_grad, lambda: tp.set_grad_enabled(False)])
def test_no_grad_applies_inside_a_decorated_generator(decorator):
    w = tp.ones(2).requires_grad_()

    @decorator()
    def steps():
        received = yield (w * 2).requires_grad
        w.mul_(0.5)  # an in-place update of a leaf, allowed only with grad mode off
        yield received, tp.is_grad_enabled()
        return "done"

    gen = steps()
    assert next(gen) is False
    assert tp.is_grad_enabled()  # the mode is the generator's only, not its caller's
    assert gen.send("sent") == ("sent", False)
    with pytest.raises(StopIteration) as stop:
        next(gen)
    assert stop.value.value == "done"
    np.testing.assert_allclose(w.detach().numpy(), [0.5, 0.5])


def test_enable_grad_applies_inside_a_decorated_generator():
    @tp.enable_grad()
    def modes():
        yield tp.is_grad_enabled()

    with tp.no_grad():
        assert list(modes()) == [True]
        assert not tp.is_grad_enabled()


class _Exp(tp.autograd.Function):  # PyTorch's "Extending torch.autograd" example: saves its output
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


def test_second_derivative_through_a_saved_output():
    x = tp.tensor([0.5]).requires_grad_()
    (g,) = tp.autograd.grad((_Exp.apply(x) * x).sum(), x, create_graph=True)  # L = x e^x
    (h,) = tp.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.item(), 2.5 * math.exp(0.5), rtol=1e-6)  # (x + 2) e^x


def test_gradient_through_a_saved_output_matches_finite_differences():
    def first(values: np.ndarray, create_graph: bool = False):
        x = tp.tensor(values).requires_grad_()
        (g,) = tp.autograd.grad((_Exp.apply(x) * x * x).sum(), x, create_graph=create_graph)
        return x, g

    values = np.array([0.2, -0.4, 1.1])
    x, g = first(values, create_graph=True)
    (second,) = tp.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(second.numpy(), _central(lambda v: first(v)[1].numpy(), values), rtol=1e-6)


def test_saved_output_stays_detached_without_create_graph():
    x = tp.tensor([0.5]).requires_grad_()
    y = _Exp.apply(x)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [math.exp(0.5)], rtol=1e-6)


@pytest.mark.parametrize(
    "name, call",
    [
        ("addcdiv_", lambda w, a: w.addcdiv_(a, a)),
        ("addcmul_", lambda w, a: w.addcmul_(a, a)),
        ("lerp_", lambda w, a: w.lerp_(a, 0.5)),
        ("nan_to_num_", lambda w, a: w.nan_to_num_()),
    ],
)
def test_in_place_extras_are_refused_under_their_own_names(name, call):
    w, a = tp.ones(2).requires_grad_(), tp.ones(2)
    with pytest.raises(RuntimeError, match=rf"^{name}\(\) on a tensor that requires grad"):
        call(w, a)
    x, b = tp.ones(2), tp.ones(2).requires_grad_()
    if name != "nan_to_num_":
        with pytest.raises(RuntimeError, match=rf"^{name}\(\) would write a tensor that requires grad"):
            call(x, b)
