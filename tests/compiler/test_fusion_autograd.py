"""tp.compile and autograd: a compiled function whose call autograd records has
its forward and its backward captured as graphs, each fused, and gives the
eager gradients (bit for bit on the simulator where the ops run in the same
order; within an FMA's rounding on a GPU).

Each test makes fresh leaves per call, so that gradients are compared as one
backward gives them (accumulated over calls, ``.grad`` adds the graphed
backward's sum where eager adds each contribution in turn: the same values,
rounded in another order).
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F
from tensorplay._matmul import _bias_gemm

SIM = tp.cuda.backend() == "sim"


def _assert_as_eager(got, want) -> None:
    """Bit for bit on the simulator; on a GPU within rounding (NVVM contracts a
    multiply and an add into one fused multiply-add)."""
    if SIM:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _leaves(values, requires) -> list:
    return [tp.tensor(v).requires_grad_(r) for v, r in zip(values, requires, strict=True)]


def _backward_of(fn, values, requires):
    """``fn``'s result on fresh leaves, after its backward; and the leaves' gradients."""
    leaves = _leaves(values, requires)
    out = fn(*leaves)
    out.backward()
    return out, [t.grad.numpy() if t.grad is not None else None for t in leaves]


def _kernels(g) -> list[str]:
    """The kernel nodes of a captured graph, by name (on both backends)."""
    return [node.kernel for node in g.nodes()]


def test_a_chain_and_its_backward_are_one_kernel_each_with_the_eager_gradients():
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(256).astype(np.float32) for _ in range(2)]

    def f(x, y):  # seven elementwise ops and a sum
        return ((x * y + 1).tanh() * x - y).abs().relu().sum()

    compiled = tp.compile(f)
    for _ in range(3):  # warm-up (eager), capture, replay
        eager, eager_grads = _backward_of(f, values, (True, True))
        got, grads = _backward_of(compiled, values, (True, True))
        np.testing.assert_allclose(got.item(), eager.item(), rtol=1e-5)  # a fused sum adds in its own order
        for a, b in zip(grads, eager_grads, strict=True):
            _assert_as_eager(a, b)
    assert got.grad_fn.name.startswith("Graphed_") and got.grad_fn.name.endswith("fBackward")  # one node
    x, y = _leaves(values, (True, True))
    assert _kernels(compiled.graph(x, y)) == ["fused_mul_add_tanh_sub_abs_relu_sum"]
    (backward,) = _kernels(compiled.graph(x, y, backward=True))
    assert backward.startswith("fused_") and len(compiled.kernels()) == 2


def test_broadcast_operands_mixed_dtypes_where_and_clamp_get_their_gradients():
    rng = np.random.default_rng(1)
    values = [
        rng.standard_normal((6, 10)).astype(np.float32),
        rng.standard_normal(10),  # float64: the products promote
        rng.integers(-3, 4, (6, 1)),  # int64, needs no gradient
    ]

    def f(x, row, col):
        y = (x * row - 0.5).clamp(-1.0, 1.0)
        z = tp.where(y > 0, y.exp(), (x + col).abs())
        return (z * x).amax() + (z - row).sum(-1).sum()

    compiled = tp.compile(f)
    for _ in range(3):
        eager, eager_grads = _backward_of(f, values, (True, True, False))
        got, grads = _backward_of(compiled, values, (True, True, False))
        np.testing.assert_allclose(got.item(), eager.item(), rtol=1e-6)
        assert grads[2] is None
        for a, b in zip(grads[:2], eager_grads[:2], strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)  # the row's is summed over the rows
    assert compiled.graph(*_leaves(values, (True, True, False)), backward=True) is not None


def test_a_compiled_module_fuses_its_parameters_backward():
    def make():
        tp.manual_seed(0)
        return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))

    eager_model, model = make(), make()
    compiled = tp.compile(model)
    rng = np.random.default_rng(2)
    for _ in range(3):
        x, target = (tp.tensor(rng.standard_normal(shape).astype(np.float32)) for shape in ((4, 5), (4, 3)))
        for m, call in ((eager_model, eager_model), (model, compiled)):
            m.zero_grad()
            F.mse_loss(call(x), target).backward()
        for a, b in zip(model.parameters(), eager_model.parameters(), strict=True):
            _assert_as_eager(a.grad.numpy(), b.grad.numpy())
    fused = [name for name in _kernels(compiled.graph(x)) if name.startswith("fused_")]
    # the matmuls (a GPU may split K) stay as they are; where cuBLASLt adds the biases in the products'
    # epilogues (the GPU), no add is left to fuse
    layer = model[0]
    in_product = _bias_gemm(x, layer.weight, layer.bias) is not None
    assert fused == (["fused_tanh"] if in_product else ["fused_add_tanh", "fused_add"])
    assert "fused_mul_sub" in _kernels(compiled.graph(x, backward=True))  # tanh's backward: g * (1 - y * y)
    assert repr(compiled).startswith("<tensorplay compiled Sequential (cudagraphs")


def test_in_place_changes_and_outputs_that_need_no_gradient_are_as_eager():
    def f(x, counter, scale=2.0):
        counter.add_(1)  # an argument that needs no gradient, changed in place
        y = x * scale
        return {"loss": (y * y).sum(), "positive": y > 0, "count": counter * 1.0}

    compiled = tp.compile(f)
    counter, eager_counter = tp.zeros(1), tp.zeros(1)
    for k in range(1, 4):
        results = []
        for fn, c in ((f, eager_counter), (compiled, counter)):
            x = tp.tensor(np.linspace(-1, 1, 8, dtype=np.float32)).requires_grad_()
            out = fn(x, c, scale=3.0)
            out["loss"].backward()
            results.append((x.grad.numpy(), {key: t.requires_grad for key, t in out.items()}))
        assert counter.item() == k and out["count"].item() == k
        assert results[1][1] == results[0][1] == {"loss": True, "positive": False, "count": False}
        _assert_as_eager(results[1][0], results[0][0])
    assert compiled.graph(x, counter, scale=3.0, backward=True) is not None


def test_fuse_false_graphs_the_backward_with_one_kernel_per_op():
    values = [np.linspace(-2, 2, 64, dtype=np.float32)]

    def f(x):
        return (x.exp() * x + 1).sum()

    compiled = tp.compile(f, fuse=False)
    for _ in range(3):
        eager, eager_grads = _backward_of(f, values, (True,))
        got, grads = _backward_of(compiled, values, (True,))
        _assert_as_eager(grads[0], eager_grads[0])
    (x,) = _leaves(values, (True,))
    assert compiled.kernels() == [] and len(_kernels(compiled.graph(x, backward=True))) > 1


def test_a_second_call_before_the_backward_and_a_gradient_of_the_gradient_are_refused():
    compiled = tp.compile(lambda x: (x * x).sum())
    x = tp.ones(4).requires_grad_()
    compiled(x).backward()  # the warm-up, eager
    first = compiled(x)  # captured and replayed
    compiled(x)  # its graphs now hold this call's activations
    with pytest.raises(
        RuntimeError, match="^compiled .*<lambda> was called again before the backward of an earlier call"
    ):
        first.backward()
    y = compiled(x)
    with pytest.raises(RuntimeError, match="cannot differentiate again; compute gradients of gradients"):
        tp.autograd.grad(y, x, create_graph=True)
    y.backward()  # still usable
    assert x.grad.tolist() == [4.0] * 4


def test_aliased_arguments_that_require_grad_run_eagerly_with_the_eager_gradients():
    compiled = tp.compile(lambda a, b: (a * b).sum())
    for _ in range(3):
        x = tp.tensor([1.0, 2.0]).requires_grad_()
        compiled(x, x).backward()
        assert x.grad.tolist() == [2.0, 4.0]
    assert compiled.graph(x, x) is None


def test_graphs_of_a_compiled_backward_are_freed_with_the_function():
    compiled = tp.compile(lambda x: (x.exp() * x).sum())
    x = tp.ones(32).requires_grad_()
    compiled(x).backward()  # the warm-up
    x.grad = None
    gc.collect()  # what earlier tests left to the collector goes now, not while this one measures
    tp.cuda.synchronize()
    tp.cuda.empty_cache()
    before = tp.cuda.memory_allocated()
    for _ in range(2):  # capture, replay
        compiled(x).backward()
        x.grad = None
    assert tp.cuda.memory_allocated() > before
    compiled.reset()
    tp.cuda.empty_cache()
    assert tp.cuda.memory_allocated() == before  # no reference cycle holds them: no gc.collect() needed
