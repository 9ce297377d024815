"""tensorplay.optim: SGD and Adam against NumPy float64 reimplementations (hand-set
gradients, then training small models end to end), captured steps replayed
against eager steps, parameter groups, state dicts, misuse, and examples/train.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F
import tensorplay.optim as optim

RNG = np.random.default_rng(0)
SHAPES = [(2, 3), (3,)]
INITIAL = [RNG.uniform(-1, 1, s) for s in SHAPES]
GRADS = [[RNG.uniform(-1, 1, s) for s in SHAPES] for _ in range(6)]  # one list per step


class NumpySGD:
    """PyTorch's SGD in float64."""

    def __init__(self, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        self.lr, self.momentum, self.dampening = lr, momentum, dampening
        self.weight_decay, self.nesterov, self.buf = weight_decay, nesterov, {}

    def step(self, params, grads):
        for i, (p, g) in enumerate(zip(params, grads, strict=True)):
            g = g + self.weight_decay * p
            if self.momentum:
                if i not in self.buf:
                    self.buf[i] = g.copy()
                else:
                    self.buf[i] = self.momentum * self.buf[i] + (1 - self.dampening) * g
                g = g + self.momentum * self.buf[i] if self.nesterov else self.buf[i]
            p -= self.lr * g


class NumpyAdam:
    """PyTorch's Adam in float64."""

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.lr, (self.b1, self.b2), self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.t, self.m, self.v = 0, {}, {}

    def step(self, params, grads):
        self.t += 1
        for i, (p, g) in enumerate(zip(params, grads, strict=True)):
            g = g + self.weight_decay * p
            self.m[i] = self.b1 * self.m.get(i, 0.0) + (1 - self.b1) * g
            self.v[i] = self.b2 * self.v.get(i, 0.0) + (1 - self.b2) * g * g
            denom = np.sqrt(self.v[i]) / np.sqrt(1 - self.b2**self.t) + self.eps
            p -= self.lr / (1 - self.b1**self.t) * self.m[i] / denom


SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01),
    dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1),
]
ADAM_CASES = [dict(lr=0.01), dict(lr=0.05, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1)]
CASES = [(optim.SGD, NumpySGD, kw) for kw in SGD_CASES] + [(optim.Adam, NumpyAdam, kw) for kw in ADAM_CASES]
IDS = [f"{cls.__name__}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for cls, _, kw in CASES]


def _params(dtype=tp.float64):
    return [nn.Parameter(tp.tensor(a, dtype=dtype)) for a in INITIAL]


def _set_grads(params, grads):
    for p, g in zip(params, grads, strict=True):
        p.grad = tp.tensor(g, dtype=p.dtype)


# -- the update rules -------------------------------------------------------------------------


@pytest.mark.parametrize("cls, reference, options", CASES, ids=IDS)
def test_steps_match_numpy(cls, reference, options):
    params, want = _params(), [a.copy() for a in INITIAL]
    opt, ref = cls(params, **options), reference(**options)
    for grads in GRADS[:4]:
        _set_grads(params, grads)
        opt.step()
        ref.step(want, grads)
        for p, w in zip(params, want, strict=True):
            np.testing.assert_allclose(p.numpy(), w, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("cls", [optim.SGD, optim.Adam])
def test_float32_parameters_keep_their_dtype(cls):
    params = _params(tp.float32)
    opt, ref = cls(params, lr=0.1), (NumpySGD if cls is optim.SGD else NumpyAdam)(lr=0.1)
    want = [a.astype(np.float32).astype(np.float64) for a in INITIAL]
    for grads in GRADS[:2]:
        _set_grads(params, grads)
        opt.step()
        ref.step(want, [g.astype(np.float32) for g in grads])
    for p, w in zip(params, want, strict=True):
        assert p.dtype == tp.float32
        np.testing.assert_allclose(p.numpy(), w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cls", [optim.SGD, optim.Adam])
def test_parameters_without_gradients_are_skipped(cls):
    params = _params()
    opt = cls(params, lr=0.1)
    params[0].grad = tp.tensor(GRADS[0][0])
    opt.step()
    np.testing.assert_array_equal(params[1].numpy(), INITIAL[1])
    assert not (np.asarray(params[0].numpy()) == INITIAL[0]).all()
    assert params[1] not in opt.state


def test_adam_state_is_on_the_device():
    params = _params()
    opt = optim.Adam(params)
    _set_grads(params, GRADS[0])
    opt.step()
    opt.step()
    state = opt.state[params[0]]
    assert set(state) == {"step", "exp_avg", "exp_avg_sq"}
    assert isinstance(state["step"], tp.Tensor) and state["step"].shape == ()
    assert state["step"].dtype == tp.float64 and state["step"].item() == 2.0
    assert optim.Adam(_params(tp.float32)).defaults["betas"] == (0.9, 0.999)


def test_step_never_reads_back(monkeypatch):
    params = _params()
    opts = [optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1)]
    opts.append(optim.Adam(params, lr=0.1, weight_decay=0.1))
    _set_grads(params, GRADS[0])

    def refuse(self):
        raise AssertionError("step() read a tensor back to the host")

    monkeypatch.setattr(tp.Tensor, "_read", refuse)
    for opt in opts:
        opt.step()
        opt.step()


def test_closure_is_called_with_gradients_on():
    w = nn.Parameter(tp.tensor([2.0]))
    opt = optim.SGD([w], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    with tp.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 4.0 and w.tolist() == [1.0]


# -- groups, zero_grad --------------------------------------------------------------------------


def test_param_groups_take_their_own_options():
    a, b = _params()
    opt = optim.SGD([{"params": [a], "lr": 0.5}, {"params": b, "momentum": 0.9}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.5, 0.1]
    assert [g["momentum"] for g in opt.param_groups] == [0, 0.9]
    _set_grads([a, b], GRADS[0])
    opt.step()
    np.testing.assert_allclose(a.numpy(), INITIAL[0] - 0.5 * GRADS[0][0], rtol=1e-12)
    np.testing.assert_allclose(b.numpy(), INITIAL[1] - 0.1 * GRADS[0][1], rtol=1e-12)
    assert "SGD (\nParameter Group 0\n    dampening: 0" in repr(opt)


def test_optimizer_takes_module_parameters_and_a_generator():
    net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    opt = optim.Adam(net.parameters(), lr=0.01)
    assert len(opt.param_groups[0]["params"]) == 4


def test_zero_grad():
    params = _params()
    opt = optim.SGD(params, lr=0.1)
    _set_grads(params, GRADS[0])
    opt.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.numpy() == 0) for p in params)
    opt.zero_grad()
    assert all(p.grad is None for p in params)


def test_tensor_learning_rate():
    params = _params()
    lr = tp.tensor([0.1], dtype=tp.float64)
    opt = optim.SGD(params, lr=lr)
    _set_grads(params, GRADS[0])
    opt.step()
    lr.fill_(0.0)
    opt.step()
    np.testing.assert_allclose(params[0].numpy(), INITIAL[0] - 0.1 * GRADS[0][0], rtol=1e-12)


# -- state dict ---------------------------------------------------------------------------------


@pytest.mark.parametrize("cls, options", [(optim.SGD, dict(lr=0.1, momentum=0.9)), (optim.Adam, dict(lr=0.05))])
def test_state_dict_round_trip_continues_identically(cls, options):
    a_params, b_params = _params(), _params()
    a, b = cls(a_params, **options), cls(b_params, **options)
    for grads in GRADS[:2]:
        _set_grads(a_params, grads)
        a.step()
    _set_grads(b_params, GRADS[5])
    b.step()  # b has state of its own: loading writes into those tensors
    kept = {k: id(v) for k, v in b.state[b_params[0]].items()}
    sd = a.state_dict()
    assert sorted(sd["state"]) == [0, 1] and sd["param_groups"][0]["params"] == [0, 1]
    b.load_state_dict(sd)
    assert {k: id(v) for k, v in b.state[b_params[0]].items()} == kept
    for pa, pb in zip(a_params, b_params, strict=True):
        with tp.no_grad():
            pb.detach().copy_(pa)
    for opt, params in ((a, a_params), (b, b_params)):
        _set_grads(params, GRADS[2])
        opt.step()
    for pa, pb in zip(a_params, b_params, strict=True):
        np.testing.assert_array_equal(pa.numpy(), pb.numpy())


def test_load_state_dict_into_a_fresh_optimizer_copies_and_takes_options():
    params = _params()
    a = optim.SGD(params, lr=0.1, momentum=0.9)
    _set_grads(params, GRADS[0])
    a.step()
    b = optim.SGD(_params(), lr=0.5)
    b.load_state_dict(a.state_dict())
    assert b.param_groups[0]["lr"] == 0.1 and b.param_groups[0]["momentum"] == 0.9
    buf_a, buf_b = a.state[params[0]]["momentum_buffer"], next(iter(b.state.values()))["momentum_buffer"]
    assert buf_a.data_ptr() != buf_b.data_ptr()
    np.testing.assert_array_equal(buf_a.numpy(), buf_b.numpy())


def test_load_state_dict_errors():
    opt = optim.Adam(_params())
    sd = optim.Adam(_params()[:1]).state_dict()
    with pytest.raises(
        ValueError, match="^parameter group 0 has 1 parameters in the loaded state, 2 in this optimizer"
    ):
        opt.load_state_dict(sd)
    two_groups = optim.Adam([{"params": [p]} for p in _params()]).state_dict()
    with pytest.raises(ValueError, match="^the loaded state has 2 parameter groups, this optimizer has 1"):
        opt.load_state_dict(two_groups)
    with pytest.raises(ValueError, match="^expected a dict with 'state' and 'param_groups'"):
        opt.load_state_dict({"state": {}})
    other = _params()
    donor = optim.Adam(other[::-1])  # shapes in the other order
    _set_grads(other, GRADS[0])
    donor.step()
    message = "the loaded state 'exp_avg' of parameter 0 has shape (3,), expected shape (2, 3)"
    with pytest.raises(ValueError, match=re.escape(message)):
        opt.load_state_dict(donor.state_dict())
    bad = opt.state_dict()
    bad["state"][7] = {}
    with pytest.raises(ValueError, match="entry for parameter 7, which no group lists"):
        opt.load_state_dict(bad)


# -- misuse ----------------------------------------------------------------------------------


def test_constructor_errors():
    p = _params()
    with pytest.raises(ValueError, match=r"^expected lr in \[0, inf\), got -0.1"):
        optim.SGD(p, lr=-0.1)
    with pytest.raises(TypeError, match="^expected a number as lr, got str"):
        optim.SGD(p, lr="0.1")
    with pytest.raises(ValueError, match="one-element floating point tensor as lr, got shape \\(2,\\)"):
        optim.SGD(p, lr=tp.ones(2))
    with pytest.raises(ValueError, match="^Nesterov momentum needs momentum > 0 and dampening = 0"):
        optim.SGD(p, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match=r"^expected momentum in \[0, inf\), got -1"):
        optim.SGD(p, lr=0.1, momentum=-1)
    with pytest.raises(ValueError, match=r"^expected beta2 in \[0, 1\), got 1.0"):
        optim.Adam(p, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match=r"^expected betas as a pair \(beta1, beta2\), got 0.9"):
        optim.Adam(p, betas=0.9)
    with pytest.raises(ValueError, match=r"^expected eps in \[0, inf\)"):
        optim.Adam(p, eps=-1e-8)
    with pytest.raises(ValueError, match="^the optimizer got an empty parameter list"):
        optim.Adam([])
    with pytest.raises(TypeError, match="got a Tensor; pass \\[tensor\\]"):
        optim.Adam(p[0])
    with pytest.raises(TypeError, match="^an optimizer can only optimize Tensors, got ndarray"):
        optim.Adam([INITIAL[0]])
    with pytest.raises(TypeError, match="only optimize floating point tensors, got int64"):
        optim.Adam([tp.tensor([1, 2])])
    with pytest.raises(ValueError, match="^cannot optimize a tensor made by an op"):
        optim.Adam([p[0] * 2])
    with pytest.raises(ValueError, match="^a parameter group lists the same parameter twice"):
        optim.Adam([p[0], p[0]])
    with pytest.raises(ValueError, match="^some parameters appear in more than one parameter group"):
        optim.Adam([{"params": p}, {"params": p[:1]}])
    with pytest.raises(TypeError, match="fixed order .* got a set"):
        optim.Adam([{"params": set(p)}])
    with pytest.raises(ValueError, match="^a parameter group needs a 'params' entry"):
        optim.Adam([{"lr": 0.1}])


def test_base_class_needs_an_update_rule():
    opt = optim.Optimizer(_params(), {})
    with pytest.raises(NotImplementedError, match=r"Optimizer does not define _update_group\(group\)"):
        opt.step()


# -- CUDA graphs ------------------------------------------------------------------------------


@pytest.mark.parametrize("cls, reference, options", [CASES[2], CASES[3], CASES[5]], ids=[IDS[2], IDS[3], IDS[5]])
def test_captured_step_replays_like_eager_steps(cls, reference, options):
    eager, graphed = _params(), _params()
    eager_opt, graphed_opt = cls(eager, **options), cls(graphed, **options)
    for grads in GRADS[:2]:  # warm-up: the state exists before the capture
        for params, opt in ((eager, eager_opt), (graphed, graphed_opt)):
            _set_grads(params, grads)
            opt.step()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        graphed_opt.step()
    for grads in GRADS[2:]:
        for p, grad in zip(graphed, grads, strict=True):
            p.grad.copy_(grad)  # the captured step reads these static gradients
        g.replay()
        _set_grads(eager, grads)
        eager_opt.step()
    for pe, pg in zip(eager, graphed, strict=True):
        np.testing.assert_allclose(pg.numpy(), pe.numpy(), rtol=1e-13, atol=1e-15)
    if cls is optim.Adam:
        assert graphed_opt.state[graphed[0]]["step"].item() == 6.0


def test_captured_step_reads_a_tensor_learning_rate_at_each_replay():
    params = _params()
    lr = tp.tensor([0.1], dtype=tp.float64)
    opt = optim.Adam(params, lr=lr)
    _set_grads(params, GRADS[0])
    opt.step()
    ref, want = NumpyAdam(lr=0.1), [a.copy() for a in INITIAL]
    ref.step(want, GRADS[0])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        opt.step()
    for value in (0.05, 0.2):
        lr.fill_(value)
        g.replay()
        ref.lr = value
        ref.step(want, GRADS[0])
    for p, w in zip(params, want, strict=True):
        np.testing.assert_allclose(p.numpy(), w, rtol=1e-12)


# -- training end to end ---------------------------------------------------------------------


X = np.random.default_rng(1).uniform(-1, 1, (8, 2))
Y = np.sin(2 * X[:, :1]) + 0.5 * X[:, 1:]  # (8, 1)


def _mlp_numpy(params, x, y):
    """Loss and gradients of Linear(2, H) -> Tanh -> Linear(H, 1) under mean squared error."""
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1.T + b1)
    out = h @ w2.T + b2
    d_out = 2 * (out - y) / out.size
    dz = (d_out @ w2) * (1 - h * h)
    return np.mean((out - y) ** 2), [dz.T @ x, dz.sum(0), d_out.T @ h, d_out.sum(0)]


@pytest.mark.parametrize(
    "cls, reference, options, steps, threshold",
    [
        (optim.SGD, NumpySGD, dict(lr=0.5, momentum=0.5), 10, 0.05),
        (optim.Adam, NumpyAdam, dict(lr=0.1), 10, 0.25),
    ],
    ids=["SGD", "Adam"],
)
def test_training_an_mlp_matches_numpy(cls, reference, options, steps, threshold):
    tp.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1)).double()
    want = [p.numpy().copy() for p in net.parameters()]
    x, y = tp.tensor(X), tp.tensor(Y)
    opt, ref = cls(net.parameters(), **options), reference(**options)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        ref_loss, grads = _mlp_numpy(want, X, Y)
        ref.step(want, grads)
        losses.append(loss.item())
        np.testing.assert_allclose(losses[-1], ref_loss, rtol=1e-10)
    for p, w in zip(net.parameters(), want, strict=True):
        np.testing.assert_allclose(p.numpy(), w, rtol=1e-9, atol=1e-12)
    assert losses[-1] < threshold * losses[0]  # it learns (the fraction of the first loss left, for any seed)


def test_training_a_linear_model_with_cross_entropy():
    tp.manual_seed(2)
    fc = nn.Linear(2, 3)
    x = tp.tensor([[2.0, 0.0], [0.0, 2.0], [-2.0, -2.0]])
    labels = tp.tensor([0, 1, 2])
    opt = optim.SGD(fc.parameters(), lr=0.5, momentum=0.5)
    first = None
    for _ in range(15):
        opt.zero_grad()
        loss = F.cross_entropy(fc(x), labels)
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.1 < first
    assert fc(x).numpy().argmax(1).tolist() == [0, 1, 2]


def test_a_whole_training_step_captured_and_replayed():
    tp.manual_seed(0)
    eager = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1)).double()
    graphed = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1)).double()
    graphed.load_state_dict(eager.state_dict())
    x, y = tp.tensor(X), tp.tensor(Y)
    opts = [optim.Adam(m.parameters(), lr=0.05) for m in (eager, graphed)]

    def train_step(model, opt):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    train_step(graphed, opts[1])  # warm-up
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        static_loss = train_step(graphed, opts[1])
    eager_losses = [train_step(eager, opts[0]).item() for _ in range(4)]
    graphed_losses = []
    for _ in range(3):
        g.replay()
        graphed_losses.append(static_loss.item())
    np.testing.assert_allclose(graphed_losses, eager_losses[1:], rtol=1e-12)
    for pe, pg in zip(eager.parameters(), graphed.parameters(), strict=True):
        np.testing.assert_allclose(pg.numpy(), pe.numpy(), rtol=1e-12)


# -- the example script ------------------------------------------------------------------------


def test_train_example_replays_the_eager_losses():
    root = Path(__file__).resolve().parents[2]
    script = root / "examples" / "train.py"
    path = os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])  # this tree's package, installed or not
    env = dict(os.environ, TENSORPLAY_BACKEND=tp.cuda.backend(), PYTHONPATH=path)

    def losses(*args):
        out = subprocess.run(
            [sys.executable, str(script), "--steps", "4", *args], capture_output=True, text=True, env=env
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return [float(line.split()[-1]) for line in out.stdout.splitlines() if line.startswith("step")]

    graphed, eager = losses(), losses("--eager")
    assert graphed == eager and len(eager) == 4
    assert eager[-1] < 0.5 * eager[0]


def test_zero_dimensional_parameters_and_a_tensor_learning_rate():
    p = nn.Parameter(tp.tensor(1.5))
    opt = optim.Adam([p], lr=0.1)
    (p * p).backward()
    opt.step()  # Adam's first step moves by lr against the gradient's sign
    assert abs(p.item() - 1.4) < 1e-6
    q = nn.Parameter(tp.tensor(1.5))
    sgd = optim.SGD([q], lr=tp.tensor([0.1]))
    (q * q).backward()
    sgd.step()
    assert abs(q.item() - 1.2) < 1e-6 and q.shape == ()


@pytest.mark.parametrize("make", [lambda ps: optim.Adam(ps, lr=0.1), lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9)])
def test_capturing_a_first_step_is_refused_and_the_capture_discarded(make):
    p = nn.Parameter(tp.ones(2))
    opt = make([p])
    p.grad = tp.ones(2)
    g = tp.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=r"step\(\) is being captured before its state exists.*eager step"):
        with tp.cuda.graph(g):
            opt.step()
    opt.step()  # the warm-up
    with tp.cuda.graph(g):
        opt.step()
    g.replay()
    assert p.tolist()[0] < 0.9
