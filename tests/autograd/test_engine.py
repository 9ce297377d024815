"""backward(), grad(), grad mode, Function, and the errors of autograd."""

import numpy as np
import pytest

import tensorplay as tp


def leaf(values, dtype=tp.float32):
    return tp.tensor(values, dtype=dtype).requires_grad_()


def test_gradients_accumulate_across_backward_calls_until_cleared():
    x = leaf([1.0, 2.0])
    (x * 3).sum().backward()
    (x * x).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]
    x.grad = None
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_a_tensor_used_twice_gets_both_contributions():
    x = leaf([2.0])
    y = x * x + x  # dy/dx = 2x + 1
    y.backward()
    assert x.grad.tolist() == [5.0]


def test_two_leaves_never_share_one_gradient_tensor():
    a, b = leaf([1.0, 1.0]), leaf([1.0, 1.0])
    (a + b).sum().backward()
    assert a.grad.data_ptr() != b.grad.data_ptr()
    with tp.no_grad():
        a.grad.add_(1.0)
    assert b.grad.tolist() == [1.0, 1.0]


def test_leaf_gradients_are_dense_and_do_not_alias_the_given_gradient():
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    g = tp.ones(2, 2)
    (x * 1).backward(g)
    assert x.grad.is_contiguous() and x.grad.data_ptr() != g.data_ptr()
    y = leaf([1.0, 2.0, 3.0])
    y.sum().backward()  # the gradient of a sum is a broadcast view
    assert y.grad.is_contiguous() and y.grad.tolist() == [1.0, 1.0, 1.0]


def test_backward_with_an_explicit_gradient_and_through_non_leaves():
    x = leaf([1.0, 2.0, 3.0])
    y = x * 2
    y.retain_grad()
    z = y * y
    z.backward(tp.tensor([1.0, 0.5, 0.0]))
    assert y.grad.tolist() == [4.0, 4.0, 0.0]  # dz/dy * g = 2y g
    assert x.grad.tolist() == [8.0, 8.0, 0.0]
    assert not y.is_leaf and x.is_leaf and z.grad_fn.name == "MulBackward"


def test_grad_returns_gradients_without_touching_dot_grad():
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    gx, gw = tp.autograd.grad((x * w).sum(), [x, w])
    assert gx.tolist() == [3.0, 4.0] and gw.tolist() == [1.0, 2.0]
    assert x.grad is None and w.grad is None


def test_grad_of_a_non_leaf_input():
    x = leaf([1.0, 2.0])
    h = x * 3
    (gh,) = tp.autograd.grad((h * h).sum(), h)
    assert gh.tolist() == [6.0, 12.0]


def test_second_derivatives_with_create_graph():
    x = leaf(np.array([0.5, -1.0]), tp.float64)
    (g,) = tp.autograd.grad((x**3).sum(), x, create_graph=True)  # 3x^2
    (h,) = tp.autograd.grad(g.sum(), x)  # 6x
    np.testing.assert_allclose(g.detach().numpy(), [0.75, 3.0])
    np.testing.assert_allclose(h.numpy(), [3.0, -6.0])
    y = leaf(np.array([0.3]), tp.float64)
    (gt,) = tp.autograd.grad(y.tanh().sum(), y, create_graph=True)
    (ht,) = tp.autograd.grad(gt.sum(), y)
    t = np.tanh(0.3)
    np.testing.assert_allclose(ht.numpy(), [-2 * t * (1 - t * t)])


def test_no_grad_and_set_grad_enabled_stop_recording():
    x = leaf([1.0])
    with tp.no_grad():
        y = x * 2
        with tp.enable_grad():
            z = x * 2
    assert not y.requires_grad and y.grad_fn is None and z.requires_grad
    with tp.set_grad_enabled(False):
        assert not tp.is_grad_enabled() and not (x + 1).requires_grad
    assert tp.is_grad_enabled()

    @tp.no_grad()
    def infer(t):
        return t * 3

    assert not infer(x).requires_grad


def test_grad_mode_is_per_thread():
    import threading

    seen = []
    with tp.no_grad():
        t = threading.Thread(target=lambda: seen.append(tp.is_grad_enabled()))
        t.start()
        t.join()
    assert seen == [True]


def test_detach_shares_memory_outside_the_graph():
    x = leaf([1.0, 2.0])
    d = (x * 2).detach()
    assert not d.requires_grad and d.grad_fn is None
    assert (x * 2).detach_().grad_fn is None


def test_comparisons_and_integer_results_do_not_require_grad():
    x = leaf([1.0, -2.0])
    assert not (x > 0).requires_grad and not (x // 1).requires_grad
    assert (x * (x > 0)).requires_grad


def test_repr_shows_the_autograd_state():
    x = leaf([1.0])
    assert repr(x) == "tensor([1.], requires_grad=True)"
    assert repr(x * 2) == "tensor([2.], grad_fn=<MulBackward>)"


class Cube(tp.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x * x * scale

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * x * g * ctx.scale, None


def test_a_function_with_its_own_backward():
    x = leaf([1.0, 2.0])
    y = Cube.apply(x, 2.0)
    assert y.grad_fn.name == "CubeBackward"
    (y.sum() + x.sum()).backward()
    assert x.grad.tolist() == [7.0, 25.0]


def test_a_function_with_two_outputs_gets_zeros_for_the_unused_one():
    class Split(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2 + gb * 3

    x = leaf([1.0])
    a, b = Split.apply(x)
    a.sum().backward()
    assert x.grad.tolist() == [2.0]


def test_function_errors_name_the_function():
    class TooMany(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g, g

    class WrongShape(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.sum()

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(ValueError, match="TooMany.backward returned 2 gradients; forward takes 1"):
        TooMany.apply(leaf([1.0])).sum().backward()
    with pytest.raises(ValueError, match=r"WrongShape.backward returned a gradient of shape \(\) for .* \(2,\)"):
        WrongShape.apply(leaf([1.0, 2.0])).backward()


def test_backward_twice_needs_retain_graph():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]
    with pytest.raises(RuntimeError, match="already run backward.*retain_graph=True"):
        y.backward()


def test_errors_of_backward_and_grad():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="only be implied for a one-element output, got shape \\(2,\\)"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="does not require grad and has no grad_fn"):
        tp.ones(2).sum().backward()
    with pytest.raises(ValueError, match=r"gradient of shape \(3,\) given for an output of shape \(2,\)"):
        (x * 2).backward(tp.ones(3))
    unused = leaf([1.0])
    with pytest.raises(RuntimeError, match="input 1 was not used.*allow_unused=True"):
        tp.autograd.grad((x * 2).sum(), [x, unused])
    assert tp.autograd.grad((x * 2).sum(), [x, unused], allow_unused=True)[1] is None
    with pytest.raises(TypeError, match="only floating point tensors can require gradients, got tensorplay.int64"):
        tp.tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError, match="only be turned off on a leaf"):
        (x * 2).requires_grad_(False)
    with pytest.raises(ValueError, match=r"got shape \(3,\) .* for shape \(2,\)"):
        x.grad = tp.ones(3)


def test_in_place_ops_that_would_lose_a_gradient_are_refused_and_change_nothing():
    w = leaf([1.0, 2.0])
    for op in (lambda: w.add_(1.0), lambda: w.mul_(2.0), lambda: w.zero_(), lambda: w.fill_(3.0),
               lambda: w.copy_(tp.ones(2))):  # fmt: skip
        with pytest.raises(RuntimeError, match="requires grad is not recorded by autograd; update a leaf inside"):
            op()
    with pytest.raises(RuntimeError, match="write it out of place"):
        h = w * 2
        h += 1
    plain = tp.zeros(2)
    with pytest.raises(RuntimeError, match="into one that does not"):
        plain[0] = w[0]
    with pytest.raises(RuntimeError, match="out="):
        tp.add(w, 1.0, out=plain)
    assert w.tolist() == [1.0, 2.0] and plain.tolist() == [0.0, 0.0]
    with tp.no_grad():
        w.sub_(tp.tensor([0.5, 0.5]))
        plain[0] = w[0]
    assert w.tolist() == [0.5, 1.5] and plain.tolist() == [0.5, 0.0] and w.requires_grad


def test_forward_and_backward_are_captured_in_a_graph_and_replayed():
    w = leaf([0.5, -1.0, 2.0])
    x = tp.tensor([1.0, 2.0, 3.0])

    def step():
        w.grad = None
        loss = ((x * w).tanh() * x).sum()
        loss.backward()
        return loss

    step()  # warm-up compiles the kernels
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        loss = step()
        grad = w.grad
    x.copy_(tp.tensor([2.0, 1.0, -1.0]))
    g.replay()
    xv, wv = np.array([2.0, 1.0, -1.0]), np.array([0.5, -1.0, 2.0])
    t = np.tanh(xv * wv)
    np.testing.assert_allclose(loss.item(), (t * xv).sum(), rtol=1e-5)
    np.testing.assert_allclose(grad.numpy(), (1 - t * t) * xv * xv, rtol=1e-5)


def test_existing_gradients_grow_in_place_so_captured_backwards_accumulate():
    p = tp.ones(4).requires_grad_()
    x = tp.tensor([1.0, 2.0, 3.0, 4.0])
    (p * x).sum().backward()
    grad = p.grad
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        (p * x).sum().backward()
    assert p.grad is grad  # the capture added into the gradient's own memory
    unrelated = tp.full((4,), 7.0)
    g.replay()
    g.replay()
    assert p.grad.tolist() == [3.0, 6.0, 9.0, 12.0]  # the eager pass and two replays (a capture runs nothing)
    assert unrelated.tolist() == [7.0] * 4


def test_results_are_freed_without_the_cycle_collector():
    import gc

    w, x = tp.ones(64).requires_grad_(), tp.ones(64)
    base = tp.cuda.memory_allocated()
    gc.disable()
    try:
        for _ in range(3):
            y = ((x * w).exp() / (w + 1)).tanh().sum()
            del y
        assert tp.cuda.memory_allocated() == base
    finally:
        gc.enable()


def test_grad_runs_only_the_nodes_that_lead_to_its_inputs():
    x = tp.tensor([1.0, 2.0]).requires_grad_()
    h = x * x
    y, z = (h * 3).sum(), (h * 2).sum()
    assert tp.autograd.grad(y, h)[0].tolist() == [3.0, 3.0]
    z.backward()  # h's own node was not run (nor freed) by grad()
    assert x.grad.tolist() == [4.0, 8.0]


def test_create_graph_records_even_under_no_grad():
    x = tp.tensor([1.0, 2.0]).requires_grad_()
    y = (x**3).sum()
    with tp.no_grad():
        (g,) = tp.autograd.grad(y, x, create_graph=True)
    assert g.requires_grad
    assert tp.autograd.grad(g.sum(), x)[0].tolist() == [6.0, 12.0]


def test_gradients_of_second_order_through_a_dropped_result():
    x = tp.tensor(np.array([0.2, -0.4])).requires_grad_()
    (g,) = tp.autograd.grad(x.exp().sum(), x, create_graph=True)  # exp's result is gone; its node rebuilds it
    (h,) = tp.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), np.exp([0.2, -0.4]))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the simulator's NumPy scalars meet 0 ** -1 and 0 * inf
def test_pow_at_zero_bases_and_exponents():
    x = tp.tensor([0.0, 4.0]).requires_grad_()
    (x**0).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]
    b = tp.tensor([2.0, 3.0]).requires_grad_()
    (0.0**b).sum().backward()
    assert b.grad.tolist() == [0.0, 0.0]
    a, e = tp.tensor([0.0, 2.0]).requires_grad_(), tp.tensor([2.0, -1.0]).requires_grad_()
    (a**e).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [0.0, -0.25])
    np.testing.assert_allclose(e.grad.numpy(), [0.0, 0.5 * np.log(2.0)], rtol=1e-6)


def test_a_function_returning_its_input_in_a_tuple_leaves_the_input_a_leaf():
    class Two(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x, x * 2

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 + 2 * g2

    x = leaf([1.0, 2.0])
    a, b = Two.apply(x)
    assert x.is_leaf and a.grad_fn.name == "TwoBackward"
    (a.sum() + b.sum()).backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_a_function_gradient_is_cast_to_its_argument_dtype():
    class Double(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return (g * 2).double()

    x = leaf([1.0])
    Double.apply(x).sum().backward()
    assert x.grad.dtype is tp.float32 and x.grad.tolist() == [2.0]


def test_set_grad_enabled_as_a_decorator_and_numbers_given_as_gradients():
    @tp.set_grad_enabled(False)
    def infer(t):
        return t * 2

    assert tp.is_grad_enabled()
    x = leaf([1.0])
    assert not infer(x).requires_grad and (x * 2).requires_grad
    with pytest.raises(TypeError, match="backward\\(\\): expected tensors as outputs and gradients, got float"):
        (x * 2).sum().backward(1.0)


def test_deepcopy_copies_memory_and_a_tensor_pickles_as_its_values_not_its_memory():
    import copy
    import pickle

    net = tp.nn.Linear(2, 2)
    net.weight.grad = tp.ones(2, 2)
    twin = copy.deepcopy(net)
    assert twin.weight.data_ptr() != net.weight.data_ptr() and isinstance(twin.weight, tp.nn.Parameter)
    assert twin.weight.requires_grad and twin.weight.tolist() == net.weight.tolist()
    assert twin.weight.grad.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    with tp.no_grad():
        twin.weight.fill_(5.0)
    assert net.weight.tolist() != [[5.0, 5.0], [5.0, 5.0]]
    x = tp.ones(2)
    assert pickle.loads(pickle.dumps(x)).tolist() == [1.0, 1.0]  # tests/test_pickling.py
    with pytest.raises(TypeError, match="device memory cannot be pickled"):
        pickle.dumps(x._storage)  # the memory itself: only through its tensor


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_has_second_derivatives(reduction):
    # loss of (x², t): its gradient in x is 2(x² - t)·2x / n, whose own gradients are checked against the formulas
    xv, tv = np.array([1.0, 2.0, 3.0]), np.array([0.5, 1.0, -1.0])
    x, t = tp.tensor(xv, requires_grad=True), tp.tensor(tv, requires_grad=True)
    loss = tp.nn.functional.mse_loss(x * x, t, reduction=reduction)
    n = 3 if reduction == "mean" else 1
    (g,) = tp.autograd.grad(loss.sum(), x, create_graph=True)
    np.testing.assert_allclose(g.numpy(), 4 * xv * (xv**2 - tv) / n)
    g.sum().backward()  # d/dx of 4x(x² - t)/n is (12x² - 4t)/n; d/dt is -4x/n
    np.testing.assert_allclose(x.grad.numpy(), (12 * xv**2 - 4 * tv) / n)
    np.testing.assert_allclose(t.grad.numpy(), -4 * xv / n)


def test_digamma_has_gradients_and_lgamma_second_ones():
    from scipy.special import polygamma

    xv = np.array([1.3, 2.0, 4.5, 0.2, -0.5, -2.7, 30.0, 1e-3])
    x = tp.tensor(xv, requires_grad=True)
    tp.digamma(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), polygamma(1, xv), rtol=1e-9)
    x = tp.tensor(xv, requires_grad=True)
    (g,) = tp.autograd.grad(tp.lgamma(x).sum(), x, create_graph=True)  # digamma
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), polygamma(1, xv), rtol=1e-9)


def test_max_and_min_send_the_gradient_to_a_nan_as_pytorch():
    for reduce in (lambda x: x.max(), lambda x: x.amin(0), lambda x: x.max(0).values, lambda x: tp.max(x)):
        x = tp.tensor([1.0, float("nan"), 2.0], requires_grad=True)
        reduce(x).backward()
        assert x.grad.tolist() == [0.0, 1.0, 0.0]
    x = tp.tensor([1.0, 3.0, 3.0], requires_grad=True)
    x.max().backward()
    assert x.grad.tolist() == [0.0, 0.5, 0.5]  # ties share it


def test_a_comparison_into_a_bool_out_takes_inputs_that_require_grad():
    x, flag = tp.tensor([0.2, 0.9], requires_grad=True), tp.empty(2, dtype=tp.bool)
    tp.gt(x, 0.5, out=flag)
    tp.isnan(x, out=flag)
    assert flag.tolist() == [False, False]
    with pytest.raises(RuntimeError, match="would write a tensor that requires grad into one that does not"):
        tp.add(x, 1.0, out=tp.empty(2))
