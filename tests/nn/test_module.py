"""tensorplay.nn: Module bookkeeping, hooks, state dicts, Parameter, Linear,
Sequential, activations and losses as modules (values against NumPy float64)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import assert_close

import tensorplay as tp
import tensorplay.nn as nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.act = nn.Tanh()
        self.scale = nn.Parameter(tp.ones(2))
        self.register_buffer("count", tp.zeros(1))
        self.register_buffer("scratch", tp.zeros(2), persistent=False)

    def forward(self, x):
        return self.act(self.fc(x)) * self.scale


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = Block()
        self.head = nn.Linear(2, 1, bias=False)

    def forward(self, x):
        return self.head(self.body(x))


def _linear_numpy(fc: nn.Linear, x: np.ndarray) -> np.ndarray:
    w = fc.weight.numpy().astype(np.float64)
    out = x.astype(np.float64) @ w.T
    return out if fc.bias is None else out + fc.bias.numpy()


# -- Parameter -------------------------------------------------------------------------


def test_parameter_shares_memory_and_requires_grad():
    t = tp.tensor([1.0, 2.0])
    p = nn.Parameter(t)
    assert isinstance(p, tp.Tensor) and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf and p.data_ptr() == t.data_ptr()
    t.fill_(5.0)
    assert p.tolist() == [5.0, 5.0]
    assert not nn.Parameter(t, requires_grad=False).requires_grad
    assert repr(p).startswith("Parameter containing:\ntensor([5., 5.]")


def test_parameter_rejects_non_tensors():
    with pytest.raises(TypeError, match="^Parameter expects a Tensor, got list"):
        nn.Parameter([1.0, 2.0])


def test_parameter_of_a_computed_tensor_is_a_new_leaf():
    x = tp.ones(2).requires_grad_()
    p = nn.Parameter(x * 2)
    assert p.is_leaf and p.grad_fn is None and p.requires_grad


# -- registration and walking ---------------------------------------------------------------


def test_named_parameters_use_dotted_names_through_submodules():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["body.scale", "body.fc.weight", "body.fc.bias", "head.weight"]
    assert [p.shape for p in net.parameters()] == [(2,), (2, 3), (2,), (1, 2)]
    assert [n for n, _ in net.named_parameters(recurse=False)] == []
    assert [n for n, _ in net.body.named_parameters(prefix="b", recurse=False)] == ["b.scale"]


def test_buffers_and_modules():
    net = Net()
    assert [n for n, _ in net.named_buffers()] == ["body.count", "body.scratch"]
    assert len(list(net.buffers())) == 2
    assert [n for n, _ in net.named_modules()] == ["", "body", "body.fc", "body.act", "head"]
    assert [n for n, _ in net.named_children()] == ["body", "head"]
    assert list(net.children()) == [net.body, net.head]
    assert list(net.modules())[0] is net
    assert net.get_submodule("body.fc") is net.body.fc
    with pytest.raises(AttributeError, match="Block has no submodule 'nope'"):
        net.get_submodule("body.nope")


def test_shared_parameters_and_modules_are_listed_once():
    fc = nn.Linear(2, 2)
    seq = nn.Sequential(fc, nn.ReLU(), fc)
    assert len(list(seq.parameters())) == 2
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias"]
    assert len(list(seq.modules())) == 3  # the Sequential, fc, ReLU


def test_setattr_registers_and_reassigns():
    m = nn.Module()
    m.w = nn.Parameter(tp.zeros(2))
    m.sub = nn.ReLU()
    m.plain = tp.zeros(3)  # a plain tensor is a plain attribute, as in PyTorch
    assert list(m._parameters) == ["w"] and list(m._modules) == ["sub"]
    assert "plain" not in m._buffers and "plain" in m.__dict__
    m.w = None
    assert m.w is None and list(m.parameters()) == []
    m.sub = nn.Tanh()
    assert isinstance(m.sub, nn.Tanh)
    m.sub = nn.Parameter(tp.ones(1))  # a name moves between kinds
    assert "sub" not in m._modules and m._parameters["sub"] is m.sub
    del m.sub
    assert not hasattr(m, "sub")
    assert "w" in dir(m)


def test_setattr_errors():
    m = nn.Module()
    m.w = nn.Parameter(tp.zeros(2))
    with pytest.raises(
        TypeError, match=r"cannot assign a Tensor as parameter 'w' \(tp.nn.Parameter or None expected\)"
    ):
        m.w = tp.zeros(2)
    m.sub = nn.ReLU()
    with pytest.raises(TypeError, match="cannot assign a int as child module 'sub'"):
        m.sub = 3
    m.register_buffer("b", tp.zeros(1))
    with pytest.raises(TypeError, match="cannot assign a float as buffer 'b'"):
        m.b = 1.0
    m.b = tp.ones(1)
    assert m.b.tolist() == [1.0]
    with pytest.raises(AttributeError, match="'Module' object has no attribute 'missing'"):
        m.missing  # noqa: B018


def test_assigning_before_init_explains():
    class Forgot(nn.Module):
        def __init__(self) -> None:
            self.fc = nn.Linear(1, 1)

    with pytest.raises(AttributeError, match=r"before Module.__init__\(\) is called; call super\(\).__init__\(\)"):
        Forgot()


def test_register_errors():
    m = nn.Module()
    m.x = 1
    with pytest.raises(KeyError, match="attribute 'x' already exists"):
        m.register_buffer("x", tp.zeros(1))
    with pytest.raises(KeyError, match="contain no '.'"):
        m.register_parameter("a.b", None)
    with pytest.raises(TypeError, match="parameter name should be a str, got int"):
        m.register_parameter(1, None)
    with pytest.raises(TypeError, match=r"cannot register a Tensor as parameter 'p' \(tp.nn.Parameter or None"):
        m.register_parameter("p", tp.zeros(1))
    with pytest.raises(TypeError, match="cannot register a list as buffer 'q'"):
        m.register_buffer("q", [1.0])
    with pytest.raises(TypeError, match="expected a Module, got int"):
        m.add_module("c", 3)
    with pytest.raises(KeyError, match="attribute 'forward' already exists"):
        m.add_module("forward", nn.ReLU())


def test_forward_must_be_defined():
    with pytest.raises(NotImplementedError, match=r"^Module has no forward\(\); define forward"):
        nn.Module()(tp.ones(1))


# -- modes and gradients ------------------------------------------------------------------


def test_train_and_eval_reach_every_submodule():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(TypeError, match="train\\(\\) expects a bool mode, got str"):
        net.train("no")


def test_zero_grad_sets_to_none_or_zeros():
    net = Net()
    net(tp.ones(4, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.numpy() == 0) for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_requires_grad_and_apply():
    net = Net()
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    seen = []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Linear", "Tanh", "Block", "Linear", "Net"]


def test_to_double_casts_floating_parameters_and_buffers():
    tp.manual_seed(1)
    net = Net()
    before = net.body.fc.weight.numpy()
    net.double()
    assert {p.dtype for p in net.parameters()} == {tp.float64}
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in net.parameters())
    assert net.body.count.dtype == tp.float64
    np.testing.assert_array_equal(net.body.fc.weight.numpy(), before.astype(np.float64))
    assert net(tp.ones(2, 3, dtype=tp.float64)).dtype == tp.float64
    with pytest.raises(TypeError, match="floating point dtype, got int32"):
        net.to(tp.int32)


def test_to_keeps_tied_parameters_tied_and_takes_pytorchs_device_forms():
    a, b = nn.Linear(3, 3), nn.Linear(3, 3)
    b.weight = a.weight
    net = nn.Sequential(a, b)
    assert len(list(net.parameters())) == 3
    net.double()
    assert net[0].weight is net[1].weight and len(list(net.parameters())) == 3
    assert net.to("cuda") is net and net.to("cuda", tp.float32) is net and net[1].weight.dtype == tp.float32
    assert net[0].weight is net[1].weight
    with pytest.raises(ValueError, match="got device='cpu'"):
        net.to("cpu")


# -- hooks -------------------------------------------------------------------------------


def test_hooks_run_around_forward_and_can_replace_values():
    relu = nn.ReLU()
    calls = []
    pre = relu.register_forward_pre_hook(lambda m, args: calls.append("pre") or (args[0] * 2,))
    post = relu.register_forward_hook(lambda m, args, out: calls.append("post") or out + 1)
    out = relu(tp.tensor([-1.0, 1.5]))
    assert calls == ["pre", "post"] and out.tolist() == [1.0, 4.0]
    pre.remove()
    post.remove()
    pre.remove()  # a second remove is harmless
    assert relu(tp.tensor([-1.0, 1.5])).tolist() == [0.0, 1.5]


def test_hook_results_of_none_keep_values_and_single_values_become_args():
    lin = nn.Linear(2, 1)
    seen = []
    lin.register_forward_hook(lambda m, args, out: seen.append((args[0].shape, out.shape)))
    lin.register_forward_pre_hook(lambda m, args: tp.ones(3, 2))  # not a tuple: becomes (value,)
    assert lin(tp.ones(5, 2)).shape == (3, 1)
    assert seen == [((3, 2), (3, 1))]


def test_hook_handle_as_context_manager():
    relu = nn.ReLU()
    with relu.register_forward_hook(lambda m, args, out: out * 0):
        assert relu(tp.ones(2)).tolist() == [0.0, 0.0]
    assert relu(tp.ones(2)).tolist() == [1.0, 1.0]


# -- state dict ----------------------------------------------------------------------------


def test_state_dict_names_and_sharing():
    net = Net()
    sd = net.state_dict()
    assert list(sd) == ["body.scale", "body.count", "body.fc.weight", "body.fc.bias", "head.weight"]
    assert sd["head.weight"].data_ptr() == net.head.weight.data_ptr()
    assert not sd["head.weight"].requires_grad  # detached
    assert net.state_dict(keep_vars=True)["head.weight"] is net.head.weight
    assert list(net.state_dict(prefix="m."))[0] == "m.body.scale"


def test_load_state_dict_copies_into_the_same_tensors():
    tp.manual_seed(0)
    src, dst = Net(), Net()
    weight = dst.head.weight
    snapshot = {k: v.numpy() for k, v in src.state_dict().items()}
    assert dst.load_state_dict(src.state_dict()) == ([], [])
    assert dst.head.weight is weight  # same object: a captured graph sees the new values
    for k, v in dst.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), snapshot[k])
    x = tp.tensor(np.linspace(-1, 1, 6).reshape(2, 3).astype(np.float32))
    assert_close(dst(x), src(x).numpy())


def test_load_state_dict_accepts_numpy_values():
    fc = nn.Linear(2, 1)
    fc.load_state_dict({"weight": np.array([[1.0, 2.0]]), "bias": np.array([0.5])})
    assert fc(tp.tensor([[1.0, 1.0]])).tolist() == [[3.5]]


def test_load_state_dict_reports_missing_and_unexpected_keys():
    net = Net()
    sd = net.state_dict()
    del sd["head.weight"]
    sd["body.extra"] = tp.zeros(1)
    with pytest.raises(RuntimeError, match="Error\\(s\\) in loading state_dict for Net") as info:
        net.load_state_dict(sd)
    assert 'Unexpected key(s) in state_dict: "body.extra".' in str(info.value)
    assert 'Missing key(s) in state_dict: "head.weight".' in str(info.value)
    result = net.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["head.weight"] and result.unexpected_keys == ["body.extra"]


def test_load_state_dict_shape_mismatch_prints_both_shapes_and_copies_nothing():
    fc = nn.Linear(3, 2)
    before = fc.bias.numpy()
    bad = {"weight": tp.zeros(3, 2), "bias": tp.zeros(2)}
    message = r"size mismatch for weight: copying a value of shape \(3, 2\) .* current model is \(2, 3\)"
    with pytest.raises(RuntimeError, match=message):
        fc.load_state_dict(bad)
    with pytest.raises(RuntimeError, match="size mismatch"):
        fc.load_state_dict(bad, strict=False)
    np.testing.assert_array_equal(fc.bias.numpy(), before)
    with pytest.raises(TypeError, match="expected a dict of tensors, got list"):
        fc.load_state_dict([1])


def test_non_persistent_buffers_stay_out_of_the_state_dict():
    m = nn.Module()
    m.register_buffer("kept", tp.zeros(1))
    m.register_buffer("dropped", tp.zeros(1), persistent=False)
    m.register_buffer("none", None)
    assert list(m.state_dict()) == ["kept"]
    assert [n for n, _ in m.named_buffers()] == ["kept", "dropped"]


def test_load_state_dict_during_a_graph_reads_new_values():
    fc = nn.Linear(2, 1)
    x = tp.tensor([[1.0, 2.0]])
    fc(x)  # warm up
    g = tp.cuda.CUDAGraph()
    with tp.no_grad(), tp.cuda.graph(g):
        y = fc(x)
    fc.load_state_dict({"weight": np.array([[3.0, -1.0]]), "bias": np.array([0.25])})
    g.replay()
    assert y.tolist() == [[1.25]]


# -- repr ------------------------------------------------------------------------------------


def test_repr_nests_children():
    text = repr(Net())
    assert text == (
        "Net(\n"
        "  (body): Block(\n"
        "    (fc): Linear(in_features=3, out_features=2, bias=True)\n"
        "    (act): Tanh()\n"
        "  )\n"
        "  (head): Linear(in_features=2, out_features=1, bias=False)\n"
        ")"
    )
    assert repr(nn.MSELoss(reduction="sum")) == "MSELoss(reduction='sum')"
    assert repr(nn.Softmax(dim=1)) == "Softmax(dim=1)"


# -- Linear ----------------------------------------------------------------------------------


def test_linear_init_is_pytorch_default_and_seeded():
    tp.manual_seed(3)
    a = nn.Linear(4, 5)
    tp.manual_seed(3)
    b = nn.Linear(4, 5)
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())
    np.testing.assert_array_equal(a.bias.numpy(), b.bias.numpy())
    for p in a.parameters():
        assert p.dtype == tp.float32 and np.all(np.abs(p.numpy()) <= 0.5)  # 1/sqrt(4)
    assert np.std(a.weight.numpy()) > 0.05  # not constant
    c = nn.Linear(4, 5)
    assert not np.array_equal(a.weight.numpy(), c.weight.numpy())


def test_linear_reset_parameters_keeps_the_objects():
    fc = nn.Linear(2, 3)
    w, before = fc.weight, fc.weight.numpy()
    fc.reset_parameters()
    assert fc.weight is w and not np.array_equal(w.numpy(), before)


@pytest.mark.parametrize("shape", [(4, 3), (3,), (2, 2, 3)], ids=str)
@pytest.mark.parametrize("bias", [True, False])
def test_linear_forward_matches_numpy(shape, bias):
    fc = nn.Linear(3, 2, bias=bias)
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    out = fc(tp.tensor(x))
    assert_close(out, _linear_numpy(fc, x), rtol=1e-5, atol=1e-6)
    assert (fc.bias is None) is not bias


def test_linear_float64():
    fc = nn.Linear(2, 2, dtype=tp.float64)
    assert fc.weight.dtype == tp.float64
    x = np.array([[0.5, -1.0]])
    assert_close(fc(tp.tensor(x)), _linear_numpy(fc, x))


def test_linear_errors():
    fc = nn.Linear(3, 2)
    message = "linear expects input of shape (*, 3) for a weight of shape (2, 3), got input of shape (4, 2)"
    with pytest.raises(ValueError, match=re.escape(message)):
        fc(tp.ones(4, 2))
    with pytest.raises(ValueError, match="in_features to be a non-negative int, got -1"):
        nn.Linear(-1, 2)
    with pytest.raises(ValueError, match="out_features to be a non-negative int, got 2.0"):
        nn.Linear(2, 2.0)
    with pytest.raises(TypeError, match="Linear expects a floating point dtype, got int64"):
        nn.Linear(2, 2, dtype=tp.int64)


# -- Sequential ------------------------------------------------------------------------------


def test_sequential_indexing_len_iteration():
    layers = [nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)]
    seq = nn.Sequential(*layers)
    assert len(seq) == 3 and list(seq) == layers
    assert seq[0] is layers[0] and seq[-1] is layers[2]
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and list(head) == layers[:2]
    assert [n for n, _ in head.named_children()] == ["0", "1"]
    with pytest.raises(IndexError, match="index 3 is out of range for a Sequential of 3 modules"):
        seq[3]
    with pytest.raises(TypeError, match="Sequential indices must be ints or slices, got str"):
        seq["0"]


def test_sequential_forward_chains_and_edits():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    x = np.array([[0.5, -0.5], [1.0, 2.0]], dtype=np.float32)
    assert_close(seq(tp.tensor(x)), np.maximum(_linear_numpy(seq[0], x), 0), rtol=1e-5, atol=1e-6)
    seq.append(nn.Linear(3, 1))
    assert seq(tp.tensor(x)).shape == (2, 1)
    seq[1] = nn.Tanh()
    assert isinstance(seq[1], nn.Tanh)
    del seq[1]
    assert [n for n, _ in seq.named_children()] == ["0", "1"] and isinstance(seq[1], nn.Linear)
    seq.append(nn.Sigmoid())
    assert len(seq) == 3 and isinstance(seq[2], nn.Sigmoid)


def test_sequential_from_ordered_dict_and_errors():
    seq = nn.Sequential({"fc": nn.Linear(1, 1), "act": nn.Sigmoid()})
    assert [n for n, _ in seq.named_parameters()] == ["fc.weight", "fc.bias"]
    with pytest.raises(TypeError, match="Sequential expects Modules, got function for entry '1'"):
        nn.Sequential(nn.ReLU(), lambda x: x)


# -- activations and losses as modules ---------------------------------------------------------


X = np.array([[-1.5, 0.2, 3.0], [0.7, -0.1, 1.1]], dtype=np.float32)


@pytest.mark.parametrize(
    "module, reference",
    [
        (nn.ReLU(), lambda x: np.maximum(x, 0)),
        (nn.Tanh(), np.tanh),
        (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
        (nn.Softmax(dim=1), lambda x: np.exp(x) / np.exp(x).sum(1, keepdims=True)),
        (nn.LogSoftmax(dim=0), lambda x: x - np.log(np.exp(x).sum(0, keepdims=True))),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, nn.Module) else "",
)
def test_activation_modules(module, reference):
    assert_close(module(tp.tensor(X)), reference(X.astype(np.float64)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_loss_modules(reduction):
    target = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, -1.0]], dtype=np.float32)
    sq = (X.astype(np.float64) - target) ** 2
    want = {"mean": sq.mean(), "sum": sq.sum(), "none": sq}[reduction]
    assert_close(nn.MSELoss(reduction)(tp.tensor(X), tp.tensor(target)), want, rtol=1e-5, atol=1e-6)
    labels = np.array([2, 0])
    logp = X - np.log(np.exp(X.astype(np.float64)).sum(1, keepdims=True))
    nll = -logp[np.arange(2), labels]
    want = {"mean": nll.mean(), "sum": nll.sum(), "none": nll}[reduction]
    got = nn.CrossEntropyLoss(reduction=reduction)(tp.tensor(X), tp.tensor(labels))
    assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_loss_module_rejects_unknown_reduction():
    with pytest.raises(ValueError, match="^MSELoss expects reduction 'mean', 'sum' or 'none', got 'avg'"):
        nn.MSELoss(reduction="avg")
    with pytest.raises(ValueError, match="^CrossEntropyLoss expects reduction"):
        nn.CrossEntropyLoss(reduction=None)


def test_copies_of_a_parameter_are_plain_tensors():
    p = nn.Parameter(tp.ones(2), requires_grad=False)
    for copy in (p.clone(), p.to(tp.float64), p.contiguous().double()):
        assert type(copy) is tp.Tensor
    assert type(p.contiguous()) is nn.Parameter  # contiguous already: itself
