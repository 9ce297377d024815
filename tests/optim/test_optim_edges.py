"""Optimizer options given as NumPy scalars, as PyTorch takes them, stepped
on both paths (fused and tensor ops) against NumPy in float64."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.optim as optim

RNG = np.random.default_rng(7)
P0 = RNG.standard_normal(5)
GRADS = [RNG.standard_normal(5) for _ in range(3)]
f32 = np.float32


def _sgd(p, grads, lr, momentum, dampening, weight_decay):
    """PyTorch's SGD in float64."""
    p, buf = np.array(p, np.float64), None
    for g in grads:
        g = g + weight_decay * p
        buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
        p = p - lr * buf
    return p


def _adam(p, grads, lr, beta1, beta2, eps, weight_decay):
    """PyTorch's Adam in float64."""
    p, m, v = np.array(p, np.float64), 0.0, 0.0
    for t, g in enumerate(grads, start=1):
        g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        p = p - lr / (1 - beta1**t) * m / (np.sqrt(v) / np.sqrt(1 - beta2**t) + eps)
    return p


# (the float32 values, as float64 numbers: the NumPy scalars' exact values)
_CASES = {
    "sgd": (
        lambda ps, foreach: optim.SGD(
            ps, lr=f32(0.1), momentum=f32(0.9), dampening=f32(0.1), weight_decay=np.float64(0.01), foreach=foreach
        ),
        lambda: _sgd(P0, GRADS, float(f32(0.1)), float(f32(0.9)), float(f32(0.1)), 0.01),
    ),
    "adam": (
        lambda ps, foreach: optim.Adam(
            ps, lr=f32(0.1), betas=(f32(0.8), np.float64(0.9)), eps=f32(1e-6), weight_decay=f32(0.01), foreach=foreach
        ),
        lambda: _adam(P0, GRADS, float(f32(0.1)), float(f32(0.8)), 0.9, float(f32(1e-6)), float(f32(0.01))),
    ),
}


@pytest.mark.parametrize("foreach", [None, False])
@pytest.mark.parametrize("name", sorted(_CASES))
def test_numpy_scalar_options_step_as_python_numbers(name, foreach):
    make, reference = _CASES[name]
    p = nn.Parameter(tp.tensor(P0, dtype=tp.float64))
    opt = make([p], foreach)
    for g in GRADS:
        p.grad = tp.tensor(g, dtype=tp.float64)
        opt.step()
    np.testing.assert_allclose(p.numpy(), reference(), rtol=1e-13, atol=1e-15)


def test_numpy_scalar_options_are_kept_as_python_numbers():
    opt = optim.Adam([nn.Parameter(tp.ones(2))], lr=np.float32(0.5), betas=(np.float32(0.5), 0.9))
    group = opt.param_groups[0]
    assert type(group["lr"]) is float and group["lr"] == 0.5
    assert type(group["betas"][0]) is float and group["betas"] == (0.5, 0.9)
    opt.add_param_group({"params": [nn.Parameter(tp.ones(1))], "eps": np.float16(0.25)})
    assert type(opt.param_groups[1]["eps"]) is float and opt.param_groups[1]["eps"] == 0.25


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (np.float32(-0.1), ValueError, r"^expected lr in \[0, inf\), got -0\.1"),
        (np.bool_(True), TypeError, "^expected a number as lr, got bool"),
        ("0.1", TypeError, "^expected a number as lr, got str"),
    ],
)
def test_what_is_not_a_learning_rate_is_still_refused(value, error, message):
    with pytest.raises(error, match=message):
        optim.SGD([nn.Parameter(tp.ones(2))], lr=value)
