"""Optimizer.load_state_dict: a tensor option (a graph-safe lr) is written in
place, so a captured step reads the loaded value; the loaded state is taken in
the form the optimizer keeps (Adam's step as a device tensor) or refused, with
a sentence, before anything changes."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.optim as optim

P0, G0 = np.array([1.0, -2.0, 0.5]), np.array([0.5, 0.25, -1.0])
SGD_MAKE = lambda ps, lr: optim.SGD(ps, lr=lr, momentum=0.9)  # noqa: E731
ADAM_MAKE = lambda ps, lr: optim.Adam(ps, lr=lr)  # noqa: E731


def _warm(make, lr=None):
    """A parameter, its optimizer (with a tensor lr of 1.0 unless ``lr``) after
    one eager step, and a graph of ``step()`` captured after it."""
    p = nn.Parameter(tp.tensor(P0))
    opt = make([p], tp.tensor([1.0], dtype=tp.float64) if lr is None else lr)
    p.grad = tp.tensor(G0)
    opt.step()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        opt.step()
    return p, opt, g


def _with_lr(state_dict, lr):
    groups = [{**group, "lr": lr} for group in state_dict["param_groups"]]
    return {"state": state_dict["state"], "param_groups": groups}


# -- item 6: a loaded option reaches the captured step -----------------------------------------


@pytest.mark.parametrize("make", [SGD_MAKE, ADAM_MAKE], ids=["SGD", "Adam"])
@pytest.mark.parametrize("loaded", [0.0, tp.tensor(0.0, dtype=tp.float32)], ids=["number", "tensor"])
def test_a_loaded_lr_is_written_into_the_tensor_a_captured_step_reads(make, loaded):
    p, opt, g = _warm(make)
    lr = opt.param_groups[0]["lr"]
    opt.load_state_dict(_with_lr(opt.state_dict(), loaded))
    assert opt.param_groups[0]["lr"] is lr and lr.tolist() == [0.0]
    before = p.numpy().copy()
    g.replay()
    np.testing.assert_array_equal(p.numpy(), before)  # lr 0: the replay does not move p


def test_a_loaded_lr_sets_the_step_size_of_later_replays():
    p, opt, g = _warm(lambda ps, lr: optim.SGD(ps, lr=lr))
    opt.load_state_dict(_with_lr(opt.state_dict(), 0.25))
    want = P0 - 1.0 * G0
    for _ in range(2):
        g.replay()
        want = want - 0.25 * G0
    np.testing.assert_allclose(p.numpy(), want, rtol=1e-15)


def test_loading_a_tensor_lr_into_a_number_lr_takes_a_copy():
    p = nn.Parameter(tp.tensor(P0))
    opt = optim.SGD([p], lr=0.5)
    donor_lr = tp.tensor([0.25], dtype=tp.float64)
    opt.load_state_dict(_with_lr(opt.state_dict(), donor_lr))
    taken = opt.param_groups[0]["lr"]
    assert isinstance(taken, tp.Tensor) and taken is not donor_lr and taken.tolist() == [0.25]
    donor_lr.fill_(9.0)
    p.grad = tp.tensor(G0)
    opt.step()
    np.testing.assert_allclose(p.numpy(), P0 - 0.25 * G0, rtol=1e-15)


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"lr": -1.0}, ValueError, r"expected lr in [0, inf), got -1.0"),
        ({"lr": tp.tensor([1.0, 2.0])}, ValueError, "expected a one-element floating point tensor as lr"),
        ({"momentum": "high"}, TypeError, "expected a number as momentum, got str"),
    ],
)
def test_a_bad_loaded_option_is_refused_and_nothing_changes(options, error, message):
    p, opt, g = _warm(SGD_MAKE)
    sd = opt.state_dict()
    bad = {
        "state": {0: {"momentum_buffer": tp.zeros(3, dtype=tp.float64)}},
        "param_groups": [{**sd["param_groups"][0]}],
    }
    bad["param_groups"][0].update(options)
    buf = opt.state[p]["momentum_buffer"].numpy().copy()
    with pytest.raises(error, match=f"^parameter group 0 of the loaded state: {re.escape(message)}"):
        opt.load_state_dict(bad)
    group = opt.param_groups[0]
    assert group["lr"].tolist() == [1.0] and group["momentum"] == 0.9
    np.testing.assert_array_equal(opt.state[p]["momentum_buffer"].numpy(), buf)


# -- item 15: the loaded state is taken as the optimizer keeps it, or refused --------------------


def _adam_after(steps, foreach=None):
    """A parameter and its Adam after ``steps`` eager steps with gradient G0."""
    p = nn.Parameter(tp.tensor(P0))
    opt = optim.Adam([p], lr=0.1, foreach=foreach)
    for _ in range(steps):
        p.grad = tp.tensor(G0)
        opt.step()
    return p, opt


@pytest.mark.parametrize("foreach", [None, False])
@pytest.mark.parametrize(
    "step", [3, 3.0, np.int64(3), tp.tensor(3, dtype=tp.int64)], ids=["int", "float", "np.int64", "int64-tensor"]
)
def test_adam_takes_a_loaded_step_number_as_its_step_tensor(step, foreach):
    ref_p, ref = _adam_after(3)
    sd = ref.state_dict()
    moments = {k: v.clone() for k, v in sd["state"][0].items() if k != "step"}
    p, opt = _adam_after(0, foreach)
    with tp.no_grad():
        p.copy_(ref_p)
    opt.load_state_dict({"state": {0: {"step": step, **moments}}, "param_groups": sd["param_groups"]})
    kept = opt.state[p]["step"]
    assert isinstance(kept, tp.Tensor) and kept.shape == () and kept.dtype is tp.float64
    for q, o in ((ref_p, ref), (p, opt)):
        q.grad = tp.tensor(G0)
        o.step()
    np.testing.assert_allclose(p.numpy(), ref_p.numpy(), rtol=1e-15)
    assert opt.state[p]["step"].item() == 4.0


def test_a_loaded_step_is_written_into_the_step_tensor_a_captured_step_reads():
    p, opt = _adam_after(1)
    step = opt.state[p]["step"]
    sd = opt.state_dict()
    sd = {"state": {0: {**sd["state"][0], "step": 10}}, "param_groups": sd["param_groups"]}
    opt.load_state_dict(sd)
    assert opt.state[p]["step"] is step and step.item() == 10.0


def _state(**entries):
    base = {"step": tp.tensor(2.0, dtype=tp.float64), "exp_avg": tp.zeros(3, dtype=tp.float64)}
    base["exp_avg_sq"] = tp.zeros(3, dtype=tp.float64)
    base.update(entries)
    return {k: v for k, v in base.items() if v is not None}


@pytest.mark.parametrize(
    "entries, error, message",
    [
        (_state(step="3"), TypeError, "the loaded state 'step' of parameter 0 is a str, expected a number or a"),
        (_state(step=-1), ValueError, "the loaded state 'step' of parameter 0 is -1, expected a whole number >= 0"),
        (_state(step=2.5), ValueError, "the loaded state 'step' of parameter 0 is 2.5, expected a whole number >= 0"),
        (_state(step=tp.tensor([2.0])), ValueError, "'step' of parameter 0 has shape (1,), expected shape ()"),
        (_state(step=tp.tensor(True)), TypeError, "'step' of parameter 0 has dtype bool, expected a number or"),
        (_state(exp_avg=0.0), TypeError, "'exp_avg' of parameter 0 is a float, expected a tensor of shape (3,)"),
        (_state(exp_avg=tp.zeros(3, dtype=tp.int32)), TypeError, "'exp_avg' of parameter 0 has dtype int32, expected"),
        (_state(exp_avg_sq=tp.zeros(2, 3)), ValueError, "'exp_avg_sq' of parameter 0 has shape (2, 3), expected"),
        (_state(exp_avg_sq=None), ValueError, "the loaded state of parameter 0 lacks 'exp_avg_sq'"),
        (_state(momentum_buffer=tp.zeros(3)), ValueError, "has 'momentum_buffer', which Adam does not keep"),
    ],
)
def test_a_bad_loaded_state_is_refused_at_load_and_nothing_changes(entries, error, message):
    ref_p, ref = _adam_after(2)
    p, opt = _adam_after(2)
    before = {k: v.numpy().copy() for k, v in opt.state[p].items()}
    with pytest.raises(error, match=re.escape(message)):
        opt.load_state_dict({"state": {0: entries}, "param_groups": opt.state_dict()["param_groups"]})
    for k, v in opt.state[p].items():
        np.testing.assert_array_equal(v.numpy(), before[k])
    for q, o in ((ref_p, ref), (p, opt)):  # still usable: steps on as if nothing happened
        q.grad = tp.tensor(G0)
        o.step()
    np.testing.assert_array_equal(p.numpy(), ref_p.numpy())


def test_loaded_moments_take_the_parameters_dtype_and_an_empty_entry_means_no_state():
    p = nn.Parameter(tp.tensor(P0, dtype=tp.float32))
    opt = optim.Adam([p], lr=0.1)
    entries = {"step": 1, "exp_avg": tp.tensor(G0), "exp_avg_sq": tp.tensor(G0 * G0)}  # float64 moments
    opt.load_state_dict({"state": {0: entries}, "param_groups": opt.state_dict()["param_groups"]})
    state = opt.state[p]
    assert state["exp_avg"].dtype is tp.float32 and state["step"].dtype is tp.float32
    np.testing.assert_array_equal(state["exp_avg_sq"].numpy(), (G0 * G0).astype(np.float32))
    opt.load_state_dict({"state": {0: {}}, "param_groups": opt.state_dict()["param_groups"]})
    assert p not in opt.state  # made again, from zeros, at the next step
    p.grad = tp.tensor(G0, dtype=tp.float32)
    opt.step()
    np.testing.assert_allclose(p.numpy(), P0 - 0.1 * np.sign(G0), rtol=1e-5)


def test_sgd_momentum_buffers_are_checked_too():
    p = nn.Parameter(tp.tensor(P0))
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    groups = opt.state_dict()["param_groups"]
    with pytest.raises(ValueError, match=re.escape("'momentum_buffer' of parameter 0 has shape (2,), expected")):
        opt.load_state_dict({"state": {0: {"momentum_buffer": tp.zeros(2)}}, "param_groups": groups})
    with pytest.raises(ValueError, match="has 'exp_avg', which SGD does not keep"):
        opt.load_state_dict({"state": {0: {"exp_avg": tp.zeros(3)}}, "param_groups": groups})
    assert p not in opt.state
