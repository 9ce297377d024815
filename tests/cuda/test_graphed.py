"""make_graphed_callables: forward and backward replayed as graphs, checked
against the same computation in NumPy float64."""

import numpy as np
import pytest

import tensorplay as tp

W = np.array([[0.5, -1.0], [2.0, 0.25], [-0.5, 1.5]])
B = np.array([0.1, -0.2])


def reference(x):
    """y = tanh(x @ W + B).sum(); its gradients for x, W, B."""
    z = x @ W + B
    t = np.tanh(z)
    dz = 1 - t * t
    return t.sum(), dz @ W.T, x.T @ dz, dz.sum(0)


class Layer:
    """A minimal module: parameters(), training and forward, as nn.Module has."""

    def __init__(self):
        self.w = tp.tensor(W).float().requires_grad_()
        self.b = tp.tensor(B).float().requires_grad_()
        self.training = True

    def parameters(self):
        return [self.w, self.b]

    def forward(self, x):
        return (x @ self.w + self.b).tanh().sum()

    def __call__(self, x):
        return self.forward(x)


def test_a_graphed_module_matches_eager_gradients_over_several_calls():
    layer = Layer()
    graphed = tp.cuda.make_graphed_callables(layer, (tp.zeros(4, 3).requires_grad_(),))
    rng = np.random.default_rng(0)
    for _ in range(3):
        layer.w.grad = layer.b.grad = None
        xv = rng.uniform(-1, 1, (4, 3))
        x = tp.tensor(xv).float().requires_grad_()
        y = graphed(x)
        y.backward()
        value, gx, gw, gb = reference(xv)
        np.testing.assert_allclose(y.item(), value, rtol=1e-5)
        np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(layer.w.grad.numpy(), gw, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(layer.b.grad.numpy(), gb, rtol=1e-5, atol=1e-6)


def test_parameter_gradients_accumulate_as_in_eager_mode():
    layer = Layer()
    graphed = tp.cuda.make_graphed_callables(layer, (tp.zeros(2, 3),))
    xs = [np.full((2, 3), 0.5), np.full((2, 3), -0.25)]
    for xv in xs:
        graphed(tp.tensor(xv).float()).backward()
    expected = sum(reference(xv)[2] for xv in xs)
    np.testing.assert_allclose(layer.w.grad.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_a_module_in_the_other_training_mode_runs_eagerly():
    layer = Layer()
    graphed = tp.cuda.make_graphed_callables(layer, (tp.zeros(2, 3),))
    layer.training = False
    y = graphed(tp.ones(2, 3))
    assert y.grad_fn.name == "SumBackward"  # recorded op by op, not the graphed Function
    layer.training = True
    assert graphed(tp.ones(2, 3)).grad_fn.name.startswith("Graphed_")


def test_two_callables_chained_and_functions_with_several_outputs():
    w = tp.tensor([1.0, -2.0, 0.5]).requires_grad_()

    class First:
        training = True

        def parameters(self):
            return [w]

        def forward(self, x):
            return x * w, x.exp()

        def __call__(self, x):
            return self.forward(x)

    first = First()

    def second(a, e):
        return (a * e).sum()

    f1, f2 = tp.cuda.make_graphed_callables(
        (first, second), ((tp.zeros(3).requires_grad_(),), (tp.zeros(3).requires_grad_(), tp.zeros(3).requires_grad_()))
    )
    xv = np.array([0.2, -0.4, 1.0])
    x = tp.tensor(xv).float().requires_grad_()
    a, e = f1(x)
    out = f2(a, e)
    out.backward()
    wv = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(out.item(), (xv * wv * np.exp(xv)).sum(), rtol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), xv * np.exp(xv), rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), wv * np.exp(xv) * (1 + xv), rtol=1e-5)


def test_outputs_live_in_the_graph_and_the_next_call_rewrites_them():
    f = tp.cuda.make_graphed_callables(lambda x: x * 2, (tp.zeros(2),))
    first = f(tp.tensor([1.0, 2.0]))
    kept = first.clone()
    second = f(tp.tensor([5.0, 6.0]))
    with pytest.raises(tp.compiler.StaleOutputError, match="is an output of graphed"):
        first.tolist()
    assert second.tolist() == [10.0, 12.0] and kept.tolist() == [2.0, 4.0]


def test_unused_inputs_need_allow_unused_input():
    def uses_one(x, y):
        return (x * 2).sum()

    args = (tp.zeros(2).requires_grad_(), tp.zeros(2).requires_grad_())
    with pytest.raises(
        RuntimeError, match="argument 1 requires grad but the outputs do not use it.*allow_unused_input=True"
    ):
        tp.cuda.make_graphed_callables(uses_one, args)
    f = tp.cuda.make_graphed_callables(uses_one, args, allow_unused_input=True)
    x, y = tp.ones(2).requires_grad_(), tp.ones(2).requires_grad_()
    f(x, y).backward()
    assert x.grad.tolist() == [2.0, 2.0] and y.grad is None


def test_a_tensor_that_requires_grad_hidden_in_a_closure_is_refused():
    w = tp.ones(2).requires_grad_()
    with pytest.raises(ValueError, match="uses a tensor that requires grad but is neither one of its arguments"):
        tp.cuda.make_graphed_callables(lambda x: (x * w).sum(), (tp.ones(2),))
    assert (tp.ones(2) * 3).tolist() == [3.0, 3.0]


def test_errors_say_what_was_expected():
    x = tp.ones(2)
    with pytest.raises(ValueError, match="sample arguments 0 and 1 are the same tensor"):
        tp.cuda.make_graphed_callables(lambda a, b: a * b, (x, x))
    with pytest.raises(TypeError, match="expected tensors as sample arguments, got float at position 0"):
        tp.cuda.make_graphed_callables(lambda x: x, (1.0,))
    with pytest.raises(ValueError, match=r"one tuple of sample arguments per callable \(2\), got 1"):
        tp.cuda.make_graphed_callables((lambda x: x, lambda x: x), ((tp.ones(1),),))
    with pytest.raises(TypeError, match="must return a tensor or a tuple of tensors to be graphed, got float"):
        tp.cuda.make_graphed_callables(lambda x: 1.0, (tp.ones(1),))
    f = tp.cuda.make_graphed_callables(lambda x: x + 1, (tp.ones(2),))
    with pytest.raises(ValueError, match=r"captured for shape \(2,\) and tensorplay.float32; got \(3,\)"):
        f(tp.ones(3))
    with pytest.raises(TypeError, match="takes 1 tensor arguments, as captured; got 2"):
        f(tp.ones(2), tp.ones(2))
    assert f(tp.tensor([1.0, 2.0])).tolist() == [2.0, 3.0]  # still usable


def test_a_second_call_before_the_first_backward_is_an_error_not_wrong_gradients():
    layer = Layer()
    graphed = tp.cuda.make_graphed_callables(layer, (tp.zeros(2, 3),))
    loss1 = graphed(tp.ones(2, 3)).sum()
    y2 = graphed(tp.ones(2, 3) * 2)
    with pytest.raises(RuntimeError, match="called again before the backward of an earlier call"):
        (loss1 + y2.sum()).backward()
    layer.w.grad = layer.b.grad = None
    graphed(tp.ones(2, 3)).backward()  # one call, its backward: fine
    np.testing.assert_allclose(layer.w.grad.numpy(), reference(np.ones((2, 3)))[2], rtol=1e-5, atol=1e-6)


def test_an_argument_that_requires_grad_needs_a_sample_that_did():
    f = tp.cuda.make_graphed_callables(lambda x: x * 2, (tp.zeros(2),))
    with pytest.raises(ValueError, match="argument 0 of graphed .* requires grad but its sample did not"):
        f(tp.ones(2).requires_grad_())


def test_modules_with_hooks_are_refused_before_anything_runs():
    # Issue 11, item 16: a hook was graphed over and silently stopped running.
    nn = tp.nn
    cases = [
        (lambda net: net.register_forward_hook(lambda m, a, out: None), "Sequential carries a forward hook"),
        (lambda net: net[0].register_forward_pre_hook(lambda m, a: None),
         "submodule '0' of Sequential carries a forward pre-hook"),
    ]  # fmt: skip
    for register, message in cases:
        net = nn.Sequential(nn.Linear(3, 2), nn.Tanh())
        handle = register(net)
        before = net[0].weight.detach().clone()
        with pytest.raises(ValueError, match=f"^make_graphed_callables: {message}, which a replay would not run"):
            tp.cuda.make_graphed_callables(net, (tp.zeros(4, 3),))
        assert net.forward.__func__ is nn.Sequential.forward  # left as it was
        assert net[0].weight.grad is None and np.array_equal(net[0].weight.detach().numpy(), before.numpy())
        handle.remove()
        graphed = tp.cuda.make_graphed_callables(net, (tp.zeros(4, 3),))
        x = tp.tensor(np.full((4, 3), 0.5)).float()
        np.testing.assert_allclose(graphed(x).numpy(), net[1](net[0](x)).numpy(), rtol=1e-6)


def test_buffers_that_require_grad_are_refused():
    nn = tp.nn
    net = nn.Sequential(nn.Linear(3, 2))
    net[0].register_buffer("scale", tp.ones(2).requires_grad_())
    with pytest.raises(
        ValueError, match="^make_graphed_callables: buffer 'scale' of submodule '0' of Sequential requires"
    ):
        tp.cuda.make_graphed_callables(net, (tp.zeros(4, 3),))
    net[0].scale.requires_grad_(False)
    tp.cuda.make_graphed_callables(net, (tp.zeros(4, 3),))  # a plain buffer is fine


def test_keyword_and_host_arguments_get_a_sentence():
    # Issue 11, item 14: "forward() got an unexpected keyword argument", and a
    # NumPy array reported as "captured for shape (4, 3) ... got (4, 3) float32".
    layer = tp.nn.Linear(3, 2)
    graphed = tp.cuda.make_graphed_callables(layer, (tp.zeros(4, 3),))
    with pytest.raises(TypeError, match=r"^graphed Linear takes its 1 tensor arguments by position, as captured; got "
                       r"keyword argument\(s\) 'x': pass them positionally"):  # fmt: skip
        graphed(x=tp.ones(4, 3))
    host = np.ones((4, 3), np.float32)
    with pytest.raises(TypeError, match=r"^argument 0 of graphed Linear is a NumPy array; graphed callables take "
                       r"tensorplay Tensors, as captured: copy it to the device with tp.tensor\(...\)"):  # fmt: skip
        graphed(host)
    f = tp.cuda.make_graphed_callables(lambda x: x * 2, (tp.zeros(2),))
    with pytest.raises(TypeError, match="^argument 0 of graphed .*<lambda> is a list; graphed callables take"):
        f([1.0, 2.0])
    with pytest.raises(
        ValueError, match=r"captured for shape \(2,\) and tensorplay.float32; got \(2,\) and tensorplay"
    ):
        f(tp.ones(2, dtype=tp.float64))
    with tp.no_grad():
        expected = tp.nn.functional.linear(tp.tensor(host), layer.weight, layer.bias).numpy()
    np.testing.assert_allclose(graphed(tp.tensor(host)).detach().numpy(), expected, rtol=1e-6)
    layer.eval()  # the other mode runs eagerly, keywords and all
    np.testing.assert_allclose(graphed(x=tp.ones(4, 3)).numpy(), graphed(tp.ones(4, 3)).numpy())


def test_graphed_callables_check_their_options_and_name_the_unused_argument():
    with pytest.raises(ValueError, match="num_warmup_iters to be a number of runs .* got -1"):
        tp.cuda.make_graphed_callables(lambda a: a * 2, (tp.ones(2),), num_warmup_iters=-1)
    samples = (tp.randn(3, requires_grad=True), tp.randn(3, requires_grad=True))
    with pytest.raises(
        RuntimeError, match=r"argument 1 requires grad but the outputs do not use it; pass allow_unused_input=True"
    ):
        tp.cuda.make_graphed_callables(lambda a, b: a * 2, samples)
    graphed = tp.cuda.make_graphed_callables(lambda a, b: a * 2, samples, allow_unused_input=True)
    assert graphed(tp.ones(3), tp.ones(3)).tolist() == [2.0, 2.0, 2.0]
