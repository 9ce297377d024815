"""What a compiled function reads besides its arguments, followed as eagerly: tensors
and numbers it closes over or names as globals, a module's tensor attributes and
which parameters require grad; and arguments that are its own earlier outputs."""

import numpy as np
import pytest

import tensorplay as tp


def _calls(fn, compiled, make_args, n=5):
    """Each call's result, eager beside compiled (fresh arguments each call)."""
    return [(fn(*make_args()).tolist(), compiled(*make_args()).tolist()) for _ in range(n)]


def halve_then_add(s):
    s.mul_(0.5)  # changes the argument in place
    return s + 1


def test_an_output_passed_back_in_and_changed_in_place():
    cstep = tp.compile(halve_then_add)
    s_e, s_c = tp.tensor([8.0]), tp.tensor([8.0])
    for _ in range(5):
        s_e = halve_then_add(s_e)
        s_c = cstep(s_c)  # the previous call's output, now stale, as the argument
        assert s_c.tolist() == s_e.tolist()
    assert s_e.tolist() == [2.1875]  # 8 -> 5 -> 3.5 -> 2.75 -> 2.375 -> 2.1875


counter = tp.zeros(4)
scale = 1.0


def count_and_double(x):
    counter.add_(1)  # a global tensor, changed in place
    return x * 2


def scaled(x):
    return x * scale  # a global number


def test_a_global_tensor_rebound_is_followed_and_the_old_memory_never_reused():
    global counter
    cstep = tp.compile(count_and_double)
    x = tp.ones(4)
    for _ in range(3):
        cstep(x)
    assert counter.tolist() == [3.0] * 4
    old = counter
    counter = tp.zeros(4)  # rebound: the graphs captured used the old tensor
    del old
    victim = tp.full((4,), 7.0)  # may take the old tensor's memory, were it freed
    for _ in range(3):
        assert cstep(x).tolist() == [2.0] * 4
    assert counter.tolist() == [3.0] * 4, "the calls update the tensor the global names now"
    assert victim.tolist() == [7.0] * 4


def test_a_global_number_that_changes_is_followed():
    global scale
    cf = tp.compile(scaled)
    results = []
    for s in (1.0, 2.0, 2.0, 3.0, -0.0, 0.0):
        scale = s
        results.append(cf(tp.ones(2)).tolist())
    assert results == [[1.0] * 2, [2.0] * 2, [2.0] * 2, [3.0] * 2, [-0.0] * 2, [0.0] * 2]
    assert [np.copysign(1, r[0]) for r in results[-2:]] == [-1, 1]
    scale = 1.0


def test_a_closed_over_tensor_and_number():
    total, k = tp.zeros(2), 2.0

    def step(x):
        total.add_(x * k)
        return total * 1

    cf = tp.compile(step)
    for _ in range(3):
        cf(tp.ones(2))
    assert total.tolist() == [6.0] * 2
    k = 10.0  # noqa: F841 (the closure reads it)
    for _ in range(2):
        out = cf(tp.ones(2))
    assert out.tolist() == [26.0] * 2


class Averager(tp.nn.Module):
    def __init__(self):
        super().__init__()
        self.avg = tp.zeros(2)

    def forward(self, x):
        self.avg = self.avg * 0.5 + x  # a plain tensor attribute, replaced each call
        return self.avg * 1


def test_a_modules_tensor_attribute_replaced_each_call():
    eager, compiled = Averager(), Averager()
    cm = tp.compile(compiled)
    for _ in range(6):
        assert cm(tp.ones(2)).tolist() == eager(tp.ones(2)).tolist()


def test_a_parameter_frozen_and_unfrozen_gets_its_eager_gradient():
    tp.manual_seed(0)
    m = tp.nn.Linear(2, 1)
    m.bias.requires_grad_(False)
    cm = tp.compile(m)
    x = tp.ones(3, 2)

    def grads(module_call):
        m.zero_grad()
        module_call(x).sum().backward()
        return [None if p.grad is None else p.grad.tolist() for p in (m.weight, m.bias)]

    for _ in range(3):
        assert grads(cm) == grads(m)
    m.bias.requires_grad_(True)
    for _ in range(2):
        assert grads(cm) == grads(m) == [[[3.0, 3.0]], [3.0]]
    m.weight.requires_grad_(False)
    for _ in range(2):
        assert grads(cm) == grads(m) == [None, [3.0]]


@pytest.mark.parametrize("zero", [np.float32, np.float16, np.float64])
def test_numpy_zero_and_negative_zero_are_two_signatures(zero):
    cf = tp.compile(lambda x, s: x / s)
    x = tp.ones(2)
    for s in (zero(0.0), zero(0.0), zero(-0.0), zero(-0.0), zero(0.0)):
        with np.errstate(divide="ignore"):
            assert cf(x, s).tolist() == (x.numpy() / np.float64(s)).tolist()


w = tp.ones(3)


def add_in_place_then_w(x):
    x.add_(1)
    return x + w  # w is read directly; a caller may pass w itself as x


def test_an_argument_over_a_global_tensors_memory_runs_eagerly():
    cf = tp.compile(add_in_place_then_w)
    with pytest.warns(UserWarning, match="over the memory of a tensor it reads besides its arguments") as said:
        for _ in range(3):
            w.fill_(1.0)
            out = cf(w)
            assert out.tolist() == [4.0] * 3 and w.tolist() == [2.0] * 3
    assert len(said) == 1  # said once
    x = tp.ones(3)  # another tensor: graphs as usual
    w.fill_(1.0)
    assert [cf(x).tolist() for _ in range(3)] == [[3.0] * 3, [4.0] * 3, [5.0] * 3]


@tp.compile
def shifted_by_later_global(x):
    return [x + later for _ in range(1)][0]  # read inside a comprehension, bound after the decoration


def test_a_global_bound_after_the_decoration_is_followed():
    global later
    for value in (1.0, 1.0, 5.0, 5.0):
        later = tp.full((2,), value)
        assert shifted_by_later_global(tp.zeros(2)).tolist() == [value] * 2


limit = None  # bound to a tensor only later


def capped(x):
    return x if limit is None else tp.minimum(x, limit)


def test_a_global_that_was_none_when_compiled_is_followed():
    global limit
    cf = tp.compile(capped)
    x = tp.full((3,), 5.0)
    assert [cf(x).tolist() for _ in range(2)] == [[5.0] * 3] * 2
    for cap in (2.0, 2.0, 3.0):
        limit = tp.full((3,), cap)
        assert cf(x).tolist() == [cap] * 3
    limit = None


def test_a_closure_filled_after_the_function_is_followed():
    def make():
        def f(x):
            return x + later_cell

        compiled = tp.compile(f)
        later_cell = tp.ones(2)
        return compiled, lambda v: later_cell.fill_(v)

    cf, fill = make()
    for v in (1.0, 1.0, 4.0):
        fill(v)
        assert cf(tp.zeros(2)).tolist() == [v] * 2


def test_a_state_that_changes_at_every_call_is_said_once():
    step = 0

    def f(x):
        return x * step

    cf = tp.compile(f)
    with pytest.warns(UserWarning, match="keep changing between calls") as said:
        for step in range(12):  # noqa: B007 (f reads it)
            assert cf(tp.ones(2)).tolist() == [float(step)] * 2
    assert len(said) == 1
