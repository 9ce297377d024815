"""Gradients kept apart from other memory, each against an independent reference (the
derivative worked out by hand, or PyTorch's documented behaviour given as
numbers): ``zero_grad(set_to_none=False)`` after a ``create_graph=True``
backward takes the gradient out of its graph, and a gradient that a custom
``autograd.Function`` returns on memory it keeps (a saved tensor) is copied
before it becomes a ``.grad``, so that later accumulation cannot write it.
"""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.optim as optim


def _second_order_grad(w):
    """``.grad`` of ``w`` from ``(w * w * w).sum()`` with ``create_graph=True``:
    ``3 w^2``, itself recorded (it requires grad)."""
    (w * w * w).sum().backward(create_graph=True)
    assert w.grad.requires_grad
    return w.grad


@pytest.mark.parametrize("owner", ["optimizer", "module"])
def test_zero_grad_keeping_memory_detaches_a_create_graph_gradient(owner):
    # PyTorch's zero_grad(set_to_none=False) detaches a gradient that has a
    # grad_fn before zeroing it: the zeros no longer require grad, the memory stays
    module = nn.Module()
    module.w = nn.Parameter(tp.tensor([1.0, 2.0], dtype=tp.float64))
    w = module.w
    grad = _second_order_grad(w)
    np.testing.assert_allclose(grad.numpy(), 3 * np.array([1.0, 2.0]) ** 2)
    if owner == "optimizer":
        optim.SGD([w], lr=0.1).zero_grad(set_to_none=False)
    else:
        module.zero_grad(set_to_none=False)
    assert w.grad is grad
    assert not w.grad.requires_grad and w.grad.grad_fn is None
    np.testing.assert_array_equal(w.grad.numpy(), [0.0, 0.0])


def test_backward_after_zero_grad_adds_into_the_same_gradient_memory():
    # the next plain backward accumulates in place (d/dw of 5w is 5), as it
    # does for any gradient that exists before the pass
    w = nn.Parameter(tp.tensor([1.0, 2.0], dtype=tp.float64))
    _second_order_grad(w)
    opt = optim.SGD([w], lr=0.1)
    opt.zero_grad(set_to_none=False)
    grad = w.grad
    (w * 5).sum().backward()
    assert w.grad is grad
    np.testing.assert_allclose(w.grad.numpy(), [5.0, 5.0])
    opt.step()
    np.testing.assert_allclose(w.numpy(), [1.0 - 0.5, 2.0 - 0.5])


class _ReturnsSaved(tp.autograd.Function):
    """``x * w`` whose backward returns the saved ``w`` itself as the gradient
    of ``x`` (right for an output gradient of ones, as ``.sum()`` gives)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        return w, None


class _ReturnsAttribute(tp.autograd.Function):
    """``x * k`` with ``k`` kept on ``ctx`` (in a tuple) and returned as the gradient."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.kept = (k,)
        return x * k

    @staticmethod
    def backward(ctx, g):
        return ctx.kept[0], None


class _ReturnsArgument(tp.autograd.Function):
    """``x + 2 y`` whose backward returns its argument ``y`` as the gradient of
    ``x`` (right where ``y`` is ones)."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.y = y
        return x + y * 2

    @staticmethod
    def backward(ctx, g):
        return ctx.y, None


@pytest.mark.parametrize("fn", [_ReturnsSaved, _ReturnsAttribute, _ReturnsArgument])
def test_a_function_gradient_on_kept_memory_is_copied_before_it_accumulates(fn):
    # PyTorch copies a new gradient that something else references: the leaf's
    # .grad is its own memory, so the second backward adds into it and leaves
    # the Function's tensor alone (by hand: x.grad = 2 * kept, kept unchanged)
    kept_values = [1.0, 1.0] if fn is _ReturnsArgument else [5.0, 6.0]
    kept = tp.tensor(kept_values, dtype=tp.float64)
    x = tp.tensor([1.0, 1.0], dtype=tp.float64).requires_grad_()
    fn.apply(x, kept).sum().backward()
    assert x.grad.data_ptr() != kept.data_ptr()
    fn.apply(x, kept).sum().backward()
    np.testing.assert_allclose(kept.numpy(), kept_values)
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.array(kept_values))


def test_a_function_gradient_it_makes_is_not_copied_again():
    # a fresh gradient (g * w) is adopted as it is: the first .grad is that tensor's memory
    made = []

    class Scale(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(w)
            return x * w

        @staticmethod
        def backward(ctx, g):
            (w,) = ctx.saved_tensors
            made.append(g * w)
            return made[-1], None

    w = tp.tensor([2.0, 3.0], dtype=tp.float64)
    x = tp.tensor([1.0, 1.0], dtype=tp.float64).requires_grad_()
    Scale.apply(x, w).sum().backward()
    assert x.grad.data_ptr() == made[0].data_ptr()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 3.0])
