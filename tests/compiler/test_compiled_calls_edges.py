"""Compiled calls at the edges of what a graph follows: the state that a
decorated function, a ``functools.partial``, a bound method or a callable
object reads besides its arguments changes between calls, and each call
gives the eager result (NumPy, float64, as the reference)."""

import functools
import gc

import numpy as np
import pytest

import tensorplay as tp

SCALE = tp.tensor([1.0, 1.0, 1.0, 1.0])
SHIFT = 2.0
X = np.array([1.0, 2.0, 3.0, 4.0])


def _passthrough(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


@tp.no_grad()
def scaled_without_grad(x):
    return x * SCALE + SHIFT


@_passthrough
def scaled_wrapped(x):
    return x * SCALE + SHIFT


def scaled_by(x, k):
    return x * SCALE * k + SHIFT


class Scaler:
    def __init__(self) -> None:
        self.scale, self.shift = tp.tensor([1.0, 1.0, 1.0, 1.0]), 2.0

    def apply(self, x):
        return x * self.scale + self.shift

    __call__ = apply


def _reference(scale, shift):
    return X * np.asarray(scale, np.float64) + shift


@pytest.mark.parametrize(
    "fn",
    [scaled_without_grad, scaled_wrapped, functools.partial(scaled_by, k=1.0)],
    ids=["no_grad-decorated", "functools.wraps", "partial"],
)
def test_the_globals_of_a_wrapped_function_are_followed(fn):
    global SCALE, SHIFT
    SCALE, SHIFT = tp.tensor([1.0, 1.0, 1.0, 1.0]), 2.0
    f = tp.compile(fn)
    x = tp.tensor(X)
    for _ in range(3):  # warm-up, capture, replay
        np.testing.assert_allclose(f(x).numpy(), _reference(1.0, 2.0))
    SCALE = tp.tensor([2.0, 3.0, 4.0, 5.0])  # the old tensor is freed: its memory may go to another
    gc.collect()
    other = tp.full((4,), 99.0)
    for _ in range(3):
        np.testing.assert_allclose(f(x).numpy(), _reference([2.0, 3.0, 4.0, 5.0], 2.0))
        np.testing.assert_allclose(f(x).numpy(), fn(x).numpy())
    SHIFT = -1.0
    for _ in range(3):
        np.testing.assert_allclose(f(x).numpy(), _reference([2.0, 3.0, 4.0, 5.0], -1.0))
    assert other.tolist() == [99.0] * 4


@pytest.mark.parametrize("how", ["bound method", "callable object"])
def test_the_attributes_of_a_methods_object_are_followed(how):
    s = Scaler()
    f = tp.compile(s.apply if how == "bound method" else s)
    x = tp.tensor(X)
    for _ in range(3):
        np.testing.assert_allclose(f(x).numpy(), _reference(1.0, 2.0))
    s.scale = tp.tensor([3.0, 3.0, 3.0, 3.0])
    gc.collect()
    other = tp.full((4,), 99.0)
    for _ in range(3):
        np.testing.assert_allclose(f(x).numpy(), _reference(3.0, 2.0))
    s.shift = 0.5
    for _ in range(3):
        np.testing.assert_allclose(f(x).numpy(), _reference(3.0, 0.5))
        np.testing.assert_allclose(f(x).numpy(), s(x).numpy())
    assert other.tolist() == [99.0] * 4


def test_a_modules_forward_follows_eval_and_a_replaced_parameter():
    tp.manual_seed(0)
    m = tp.nn.Sequential(tp.nn.Linear(4, 3), tp.nn.Dropout(0.5))
    f = tp.compile(m.forward)
    x = tp.tensor(np.arange(8.0, dtype=np.float32).reshape(2, 4))
    with tp.no_grad():
        for _ in range(3):
            f(x)  # training: dropout on
        m.eval()
        w, b = m[0].weight.numpy().astype(np.float64), m[0].bias.numpy().astype(np.float64)
        for _ in range(3):
            np.testing.assert_allclose(f(x).numpy(), x.numpy() @ w.T + b, rtol=1e-5)
        m[0].weight = tp.nn.Parameter(tp.ones((3, 4)))
        for _ in range(3):
            np.testing.assert_allclose(f(x).numpy(), x.numpy() @ np.ones((4, 3)) + b, rtol=1e-5)
            np.testing.assert_allclose(f(x).numpy(), m(x).numpy(), rtol=1e-6)
