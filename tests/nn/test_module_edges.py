"""Module, optimizer and functional fixes, each against an independent
reference: worked-out numbers, NumPy in float64, or PyTorch's documented
behaviour written out as numbers and orders.

A bfloat16 tensor learning rate in the fused step; re-assigned children and
parameters keeping their place; float16 layer norm; ``train()`` calling the
children's ``train``; a submodule under two names in the state dict; softmax
over an empty dimension; ``del seq[a:b]``.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F
import tensorplay.optim as optim

# -- a bfloat16 tensor lr in the fused step -----------------------------------------------------

_BF16_LR = 0.10009765625  # 0.1 rounded to bfloat16 (8 significant bits): 205 / 2048


@pytest.mark.parametrize("foreach", [None, False])
def test_sgd_with_a_bfloat16_tensor_lr_steps_by_its_value(foreach):
    p = nn.Parameter(tp.tensor([1.0, -2.0]))
    opt = optim.SGD([p], lr=tp.tensor([0.1], dtype=tp.bfloat16), foreach=foreach)
    p.grad = tp.tensor([1.0, 1.0])
    opt.step()
    assert_close(p, [1.0 - _BF16_LR, -2.0 - _BF16_LR], rtol=1e-6, atol=0)


def _adam_reference(p, grads, lr, beta1=0.9, beta2=0.999, eps=1e-8):
    """Adam's steps in float64 (PyTorch's documented algorithm)."""
    p, m, v = np.array(p, np.float64), 0.0, 0.0
    for t, g in enumerate(grads, start=1):
        g = np.asarray(g, np.float64)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        p = p - lr / (1 - beta1**t) * m / (np.sqrt(v) / np.sqrt(1 - beta2**t) + eps)
    return p


@pytest.mark.parametrize("foreach", [None, False])
def test_adam_with_a_bfloat16_tensor_lr_steps_by_its_value(foreach):
    p = nn.Parameter(tp.tensor([1.0, -2.0, 3.0]))
    opt = optim.Adam([p], lr=tp.tensor([0.1], dtype=tp.bfloat16), foreach=foreach)
    grads = [[0.5, 1.0 + k, -2.0] for k in range(3)]
    for g in grads:
        p.grad = tp.tensor(g)
        opt.step()
    assert_close(p, _adam_reference([1.0, -2.0, 3.0], grads, _BF16_LR), rtol=1e-5, atol=1e-6)


# -- re-assignment keeps the place --------------------------------------------------------------


def test_replacing_a_sequential_child_by_setattr_keeps_its_place():
    seq = nn.Sequential(nn.Linear(1, 1), nn.ReLU(), nn.Linear(1, 1))
    with tp.no_grad():
        seq[0].weight.fill_(1.0)
        seq[0].bias.fill_(0.0)
        seq[2].weight.fill_(1.0)
        seq[2].bias.fill_(-5.0)
    setattr(seq, "1", nn.ReLU())
    assert list(seq._modules) == ["0", "1", "2"]
    assert seq(tp.tensor([[2.0]])).tolist() == [[-3.0]]  # relu(2) - 5, the layers in their order


class _TwoLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.out = nn.Linear(2, 1)
        self.register_buffer("first", tp.zeros(1))
        self.register_buffer("second", tp.zeros(1))


def test_reassigned_parameters_buffers_and_children_keep_their_order():
    net = _TwoLayers()
    net.fc.weight = nn.Parameter(tp.zeros(2, 2))
    net.fc = nn.Linear(2, 2)
    net.first = tp.ones(1)
    net.fc.weight = nn.Parameter(tp.ones(2, 2))
    assert list(net._modules) == ["fc", "out"]
    assert [k for k, _ in net.named_parameters()] == ["fc.weight", "fc.bias", "out.weight", "out.bias"]
    assert [k for k, _ in net.named_buffers()] == ["first", "second"]
    assert net.fc.weight.tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_a_parameter_assigned_over_a_child_leaves_the_child_registry():
    net = _TwoLayers()
    net.out = nn.Parameter(tp.ones(1))
    assert list(net._modules) == ["fc"]
    assert [k for k, _ in net.named_parameters()] == ["out", "fc.weight", "fc.bias"]


# -- layer norm of half inputs -------------------------------------------------------------------


def _layer_norm_reference(x: np.ndarray, g: np.ndarray, eps: float = 1e-5):
    """(layer norm over the last dimension, the gradient of sum(y * g) with
    respect to x), in float64 by the closed form."""
    x = x.astype(np.float64)
    centred = x - x.mean(-1, keepdims=True)
    inv_std = 1.0 / np.sqrt((centred**2).mean(-1, keepdims=True) + eps)
    y = centred * inv_std
    dx = inv_std * (g - g.mean(-1, keepdims=True) - y * (g * y).mean(-1, keepdims=True))
    return y, dx


_WIDE = np.array([[-300.0, -100.0, 0.0, 100.0, 300.0], [1000.0, 1010.0, 1030.0, 1060.0, 1100.0]])
_UPSTREAM = np.array([[0.5, -1.0, 2.0, 0.25, -0.75], [1.0, 0.0, -2.0, 1.5, 0.5]])


@pytest.mark.parametrize("dtype", [tp.float16, tp.bfloat16])
def test_half_layer_norm_normalises_deviations_past_float16_range(dtype):
    x = tp.tensor(_WIDE, dtype=dtype)
    want, _ = _layer_norm_reference(x.to(tp.float64).numpy(), _UPSTREAM)  # the half input's own values
    y = F.layer_norm(x, (5,))
    assert_close(y, want, rtol=1e-2, atol=1e-2, dtype=dtype)
    assert_close(nn.LayerNorm(5).to(dtype)(x), want, rtol=1e-2, atol=1e-2, dtype=dtype)


@pytest.mark.parametrize("dtype", [tp.float16, tp.bfloat16])
def test_half_layer_norm_gradients_match_the_float32_computation(dtype):
    x = tp.tensor(_WIDE, dtype=dtype).requires_grad_()
    ln = nn.LayerNorm(5).to(dtype)
    ln(x).backward(tp.tensor(_UPSTREAM, dtype=dtype))
    x32 = tp.tensor(x.to(tp.float64).numpy(), dtype=tp.float32).requires_grad_()
    ln32 = nn.LayerNorm(5)
    ln32(x32).backward(tp.tensor(_UPSTREAM, dtype=tp.float32))
    assert x.grad.dtype is dtype and ln.weight.grad.dtype is dtype
    scale = np.abs(x32.grad.numpy()).max()
    assert_close(x.grad, x32.grad.numpy(), rtol=2e-2, atol=2e-2 * scale)
    assert_close(ln.weight.grad, ln32.weight.grad.numpy(), rtol=2e-2, atol=2e-2)
    assert_close(ln.bias.grad, ln32.bias.grad.numpy(), rtol=2e-2, atol=2e-2)


def test_float64_layer_norm_gradient_matches_the_closed_form_and_finite_differences():
    x = tp.tensor(_WIDE).requires_grad_()
    F.layer_norm(x, (5,)).backward(tp.tensor(_UPSTREAM))
    _, dx = _layer_norm_reference(_WIDE, _UPSTREAM)
    assert_close(x.grad, dx, rtol=1e-9, atol=1e-12)
    h, numeric = 1e-3, np.zeros_like(_WIDE)
    for i in np.ndindex(_WIDE.shape):
        step = np.zeros_like(_WIDE)
        step[i] = h
        up = _layer_norm_reference(_WIDE + step, _UPSTREAM)[0]
        down = _layer_norm_reference(_WIDE - step, _UPSTREAM)[0]
        numeric[i] = ((up - down) * _UPSTREAM).sum() / (2 * h)
    assert_close(x.grad, numeric, rtol=1e-6, atol=1e-9)


# -- train() calls the children's train ------------------------------------------------------------


class _AlwaysEval(nn.Module):
    def train(self, mode=True):
        return super().train(False)  # a frozen part that stays in eval mode

    def forward(self, x):
        return x


def test_train_calls_each_childs_own_train():
    inner = nn.Sequential(nn.Linear(2, 2), _AlwaysEval())
    net = nn.Sequential(inner, nn.ReLU())
    net.eval()
    net.train()
    assert [m.training for m in net.modules()] == [True, True, True, False, True]


def test_train_refuses_a_non_bool_mode():
    with pytest.raises(TypeError, match=r"train\(\) expects a bool mode, got int"):
        nn.Linear(2, 2).train(1)


# -- a submodule under two names in the state dict ------------------------------------------------


class _Shared(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        shared = nn.Linear(2, 2)
        self.enc = shared
        self.dec = shared


def test_a_module_under_two_names_is_in_the_state_dict_under_both():
    net = _Shared()
    assert list(net.state_dict()) == ["enc.weight", "enc.bias", "dec.weight", "dec.bias"]
    assert list(net.state_dict(prefix="m.")) == ["m.enc.weight", "m.enc.bias", "m.dec.weight", "m.dec.bias"]
    assert [k for k, _ in net.named_parameters()] == ["enc.weight", "enc.bias"]  # parameters() still once each


def test_a_checkpoint_with_both_names_loads():
    net = _Shared()
    w, b = [[1.0, 2.0], [3.0, 4.0]], [5.0, 6.0]
    checkpoint = {
        "enc.weight": tp.tensor(w),
        "enc.bias": tp.tensor(b),
        "dec.weight": tp.tensor(w),
        "dec.bias": tp.tensor(b),
    }
    assert net.load_state_dict(checkpoint) == ([], [])
    assert net.dec.weight.tolist() == w and net.enc.bias.tolist() == b


def test_a_module_that_contains_itself_is_listed_once():
    net = nn.Linear(2, 2)
    net.__dict__["_modules"]["again"] = net  # registered past __setattr__, as a cycle can only be
    assert list(net.state_dict()) == ["weight", "bias"]


# -- softmax over an empty dimension ----------------------------------------------------------------


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
def test_softmax_over_an_empty_dimension_is_empty(fn):
    x = tp.ones(2, 0).requires_grad_()
    y = fn(x, 1)
    assert y.shape == (2, 0) and y.dtype is tp.float32
    y.sum().backward()
    assert x.grad.shape == (2, 0)
    assert fn(tp.ones(0, 3), -1).shape == (0, 3)
    with pytest.raises(IndexError, match="dimension 2 is out of range"):
        fn(tp.ones(2, 0), 2)


# -- del on a slice of a Sequential -----------------------------------------------------------------


def test_del_a_slice_of_a_sequential_removes_it_and_renumbers():
    relu, tanh, sigmoid, gelu = nn.ReLU(), nn.Tanh(), nn.Sigmoid(), nn.GELU()
    seq = nn.Sequential(relu, tanh, sigmoid, gelu)
    del seq[::2]
    assert list(seq._modules.items()) == [("0", tanh), ("1", gelu)]
    del seq[1:]
    assert list(seq._modules.items()) == [("0", tanh)]
    del seq[5:]
    assert len(seq) == 1
    with pytest.raises(TypeError, match="one at a time"):
        seq[0:1] = nn.ReLU()


@pytest.mark.parametrize("p", [np.float32(0.5), np.float16(0.25), np.float64(0.5), np.int64(0), 0.5])
def test_dropout_takes_numpy_probabilities(p):
    x = tp.ones(64)
    tp.manual_seed(1)
    a = tp.nn.functional.dropout(x, p)
    tp.manual_seed(1)
    b = tp.nn.Dropout(p)(x)
    assert a.tolist() == b.tolist()
    assert set(a.tolist()) <= {0.0, float(np.float32(1.0 / (1.0 - float(p))))}  # kept: scaled, in float32


@pytest.mark.parametrize(
    "p, error", [("0.5", TypeError), (True, TypeError), (1.5, ValueError), (float("nan"), ValueError)]
)
def test_dropout_refuses_what_is_not_a_probability(p, error):
    with pytest.raises(error, match="dropout probability"):
        tp.nn.functional.dropout(tp.ones(2), p)
    with pytest.raises(error, match="dropout probability"):
        tp.nn.Dropout(p)


def test_train_and_eval_of_a_module_holding_itself():
    m = nn.Sequential(nn.Linear(2, 2))
    m.add_module("loop", m)
    assert m.eval() is m and not any(x.training for x in m.modules())
    assert all(x.training for x in m.train().modules())
