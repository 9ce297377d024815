"""CUDAGraph.stage_and_launch: copy fresh inputs into static inputs and replay, in one launch."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from helpers import spin

import tensorplay as tp
from tensorplay.cuda import stage
from tensorplay.kernels import gather
from tensorplay.runtime.backend import get as get_backend

SIM = tp.cuda.backend() == "sim"


def _rand(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).uniform(-2.0, 2.0, shape).astype(dtype)


def _affine_graph(x, w):
    """``y = x * 2 + 1`` and ``s = w.sum()`` captured: static inputs ``x``, ``w``."""
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x * 2.0 + 1.0
        s = w.sum()
    return g, y, s


def _plan(g):
    (plan,) = g._stager.plans()
    return plan


def _is_gather(dispatcher) -> bool:
    fn = getattr(dispatcher, "py_func", None) or getattr(dispatcher, "fn", None)
    return getattr(fn, "__module__", "") == gather.__name__


def _no_capture_left():
    assert not tp.cuda.graphs.is_current_stream_capturing()
    assert not tp.cuda.capture_stream().is_capturing()


def test_fresh_inputs_each_call_match_numpy():
    x, w = tp.zeros(20), tp.zeros((3, 4), dtype=tp.float64)
    g, y, s = _affine_graph(x, w)
    for seed in range(4):
        a, b = _rand(20, seed=seed), _rand((3, 4), np.float64, seed=10 + seed)
        g.stage_and_launch([x, w], [tp.tensor(a), tp.tensor(b)])
        np.testing.assert_allclose(y.numpy(), a.astype(np.float64) * 2 + 1, rtol=1e-6)
        np.testing.assert_allclose(s.item(), b.sum(), rtol=1e-12)
        np.testing.assert_array_equal(x.numpy(), a)  # the static input holds the input
    assert len(g._stager.plans()) == 1  # one plan for the tuple of static inputs
    assert _plan(g).staged.single_launch


def test_copies_and_replay_are_one_graph_launch(monkeypatch):
    if not SIM:
        pytest.skip("counts the simulator's host calls")
    x, w = tp.zeros(8), tp.zeros(4)
    g, y, _ = _affine_graph(x, w)
    g.stage_and_launch([x, w], [tp.ones(8), tp.ones(4)])  # builds the staged graph
    dev = get_backend()
    calls, inside = [], []
    real_launch, real_kernel = type(dev).graph_launch, type(_plan(g).staged._heads[0].launcher).__call__

    def graph_launch(self, *args):
        calls.append("graph")
        inside.append(True)
        try:
            return real_launch(self, *args)
        finally:
            inside.pop()

    def kernel(self, *args, **kwargs):
        calls.append("kernel in graph" if inside else "kernel")
        return real_kernel(self, *args, **kwargs)

    monkeypatch.setattr(type(dev), "graph_launch", graph_launch)
    monkeypatch.setattr(type(_plan(g).staged._heads[0].launcher), "__call__", kernel)
    a, b = tp.tensor(_rand(8)), tp.tensor(_rand(4, seed=1))
    g.stage_and_launch([x, w], [a, b])
    assert calls == ["graph", "kernel in graph"]  # the copies run inside the one launch
    np.testing.assert_allclose(y.numpy(), a.numpy().astype(np.float64) * 2 + 1, rtol=1e-6)


@pytest.mark.parametrize("dtype", [tp.float16, tp.bool, tp.int64, tp.int32])
@pytest.mark.parametrize("n, offset", [(7, 0), (13, 1), (19, 3)])
def test_gather_copies_any_size_and_alignment(dtype, n, offset):
    # Views at element offsets give every alignment mod 8 on both sides: byte
    # heads and tails around 8-byte words, or bytes only when they differ.
    npd = dtype.np
    base = tp.zeros(n + 4, dtype=dtype)
    static = base[offset : offset + n]
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        out = static.to(tp.float64) * 1.0
    for seed, shift in enumerate((0, 1, 2)):
        data = _rand(n + 3, seed=seed) > 0 if npd == np.bool_ else (_rand(n + 3, seed=seed) * 10).astype(npd)
        src = tp.tensor(data)[shift : shift + n]
        g.stage_and_launch([static], [src])
        np.testing.assert_array_equal(static.numpy(), data[shift : shift + n])
        np.testing.assert_array_equal(out.numpy(), data[shift : shift + n].astype(np.float64))
    assert base.numpy()[:offset].tolist() == [0] * offset  # nothing written around the static input
    assert base.numpy()[offset + n :].tolist() == [0] * (4 - offset)


def test_other_layouts_fall_back_to_copy_semantics():
    x, w = tp.zeros((3, 4)), tp.zeros((3, 4), dtype=tp.float64)
    g, y, s = _affine_graph(x, w)
    a, row = _rand((4, 3)), _rand(4, seed=5)
    cases = [
        (tp.tensor(a).t(), a.T),  # not contiguous
        (tp.tensor(a.T.astype(np.float64)), a.T),  # another dtype: cast
        (tp.tensor(row), np.broadcast_to(row, (3, 4))),  # a shape that broadcasts
        (np.arange(12, dtype=np.int32).reshape(3, 4), np.arange(12).reshape(3, 4)),  # host data
        (1.5, np.full((3, 4), 1.5)),  # a number
    ]
    for value, expected in cases:
        b = _rand((4,), np.float64, seed=3)
        g.stage_and_launch([x, w], [value, tp.tensor(b)])  # w's row broadcasts too
        np.testing.assert_allclose(y.numpy(), np.asarray(expected, np.float32).astype(np.float64) * 2 + 1, rtol=1e-6)
        np.testing.assert_allclose(s.item(), 3 * b.sum(), rtol=1e-12)


def test_an_input_that_is_its_static_input_is_not_copied(launched):
    x, w = tp.zeros(6), tp.zeros(6)
    g, y, s = _affine_graph(x, w)
    x.copy_(np.arange(6, dtype=np.float32))
    g.stage_and_launch([x, w], [x, w])
    assert y.numpy().tolist() == [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]
    assert not any(_is_gather(k) for k in launched)
    g.stage_and_launch([x, w], [x[:], tp.ones(6)])  # the same view, another object: skipped too
    assert y.numpy().tolist() == [1.0, 3.0, 5.0, 7.0, 9.0, 11.0] and s.item() == 6.0


def test_inputs_that_alias_static_inputs_copy_in_order():
    a, b = tp.zeros(5), tp.zeros(5)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        out = a * 10 + b
    a.copy_(np.arange(5, dtype=np.float32))
    b.copy_(np.full(5, 7, np.float32))
    g.stage_and_launch([a, b], [b, a])  # a = b, then b = the new a: both 7, as two copy_ calls give
    assert a.numpy().tolist() == [7.0] * 5 and b.numpy().tolist() == [7.0] * 5
    assert out.numpy().tolist() == [77.0] * 5
    a.copy_(np.arange(5, dtype=np.float32))
    g.stage_and_launch([a, b], [tp.ones(5), a[:]])  # b reads a after a was overwritten
    assert b.numpy().tolist() == [1.0] * 5


def test_imports_of_static_inputs_copy_in_order_as_the_tensors_themselves_do():
    """An import (DLPack) of a static input's memory is seen as that memory, not
    as a tensor of its own: the copies go in order, as in the test above."""
    a, b = tp.zeros(5), tp.zeros(5)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        out = a * 10 + b
    for _ in range(2):  # the second call takes the plan's inline path
        a.copy_(np.arange(5, dtype=np.float32))
        b.copy_(np.full(5, 7, np.float32))
        g.stage_and_launch([a, b], [tp.from_dlpack(b), tp.from_dlpack(a)])
        assert a.numpy().tolist() == [7.0] * 5 and b.numpy().tolist() == [7.0] * 5
        assert out.numpy().tolist() == [77.0] * 5
    a.copy_(np.arange(5, dtype=np.float32))
    g.stage_and_launch([a, b], [tp.from_dlpack(a), tp.from_dlpack(a)])  # a is its own: b takes it unchanged
    assert a.numpy().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0] == b.numpy().tolist()


def test_overlapping_static_inputs_copy_in_order():
    buf = tp.zeros(8)
    lo, hi = buf[:5], buf[3:]
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        out = buf * 1.0
    g.stage_and_launch([lo, hi], [tp.ones(5), tp.full((5,), 2.0)])
    assert out.numpy().tolist() == [1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0]
    assert _plan(g).nslots == 0  # no pair goes through the gather kernel


def test_copies_never_race_replays_in_flight():
    # On a GPU the staged launches queue behind a long kernel; each takes its
    # own source addresses (kernel node parameters are copied at the call),
    # its input is freed at once, and the next op on the stream reuses that
    # memory, which stream order keeps until the queued copy has read it.
    x, acc, busy = tp.zeros(16), tp.zeros(16), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        acc.add_(x)
    data = [_rand(16, seed=seed) for seed in range(6)]
    inputs = [tp.tensor(a) for a in data]  # uploaded before the device is kept busy
    spin[1, 1](busy, 10 if SIM else 5_000_000)
    while inputs:
        g.stage_and_launch([x], [inputs.pop(0)])
        tp.empty(16).fill_(1e6)  # the freed input's memory, overwritten after the copy
    np.testing.assert_allclose(acc.numpy(), np.sum(data, axis=0, dtype=np.float64), rtol=1e-5)


def test_graph_with_a_while_node_launches_the_copies_just_before_it():
    n, acc, flag = tp.tensor([0], dtype=tp.int32), tp.zeros(1), tp.empty(1, dtype=tp.bool)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        tp.gt(n, 0, out=flag)
        with g.while_(flag):
            acc.add_(1.0)
            n.sub_(1)
            tp.gt(n, 0, out=flag)
    for start in (3, 1, 4):
        g.stage_and_launch([n], [tp.tensor([start], dtype=tp.int32)])
        assert n.item() == 0
    assert acc.item() == 8.0
    assert not _plan(g).staged.single_launch  # the driver clones no graph with a conditional node


def test_a_graph_with_no_nodes_still_gets_the_copies():
    x = tp.zeros(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        pass
    g.stage_and_launch([x], [tp.full((4,), 3.0)])
    assert x.tolist() == [3.0] * 4


def test_more_pairs_than_one_gather_kernel_takes(monkeypatch):
    monkeypatch.setattr(stage, "MAX_PAIRS", 2)
    xs = [tp.zeros(3) for _ in range(5)]
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        total = xs[0] * 1.0
        for x in xs[1:]:
            total = total + x
    for seed in range(2):
        data = [_rand(3, seed=seed * 10 + i) for i in range(5)]
        g.stage_and_launch(xs, [tp.tensor(d) for d in data])
        np.testing.assert_allclose(total.numpy(), np.sum(data, axis=0, dtype=np.float64), rtol=1e-5)
    assert len(_plan(g).chunks) == 3


def test_replay_is_unchanged_and_plans_follow_their_static_inputs():
    x, w = tp.zeros(4), tp.zeros(4)
    g, y, _ = _affine_graph(x, w)
    g.stage_and_launch([x, w], [tp.ones(4), tp.ones(4)])
    x.fill_(3.0)
    g.replay()  # reads the static inputs as they are
    assert y.numpy().tolist() == [7.0] * 4
    x2 = tp.zeros(4)
    g.stage_and_launch([x2, w], [tp.ones(4), tp.ones(4)])  # another tuple: another plan
    assert len(g._stager.plans()) == 2
    del x2
    gc.collect()
    assert len(g._stager.plans()) == 1  # a plan goes with its static inputs
    del y, _
    stager = g._stager
    g.reset()
    assert not stager.plans()  # their staged graphs freed with the graph


def test_plans_hold_no_static_input_alive():
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        inp = tp.empty(4)  # allocated by the capture (no node): reset() refuses while it lives
        out = inp + 1.0
    g.stage_and_launch([inp], [tp.full((4,), 2.0)])
    assert out.numpy().tolist() == [3.0] * 4
    with pytest.raises(RuntimeError, match="reset\\(\\) while 2 tensor"):
        g.reset()
    del inp, out
    gc.collect()
    g.reset()


def test_a_plan_whose_static_input_dies_during_another_capture_leaves_that_capture_whole():
    # Its staged executable graph is destroyed once the capture ends: cuGraphExecDestroy
    # during a global capture invalidates it (seen on the H200, a garbage collection
    # inside tp.compile's capture freeing another test's plan).
    statics = [tp.zeros(4), tp.ones(2)]
    g, y, _ = _affine_graph(*statics)
    g.stage_and_launch(statics, [tp.ones(4), tp.ones(2)])
    assert len(g._stager.plans()) == 1
    h = tp.cuda.CUDAGraph()
    a = tp.full((4,), 3.0)
    with tp.cuda.graph(h):
        b = a + 1
        statics.clear()  # the plan's static inputs die: the plan goes
        gc.collect()
        c = b * 2
    assert not g._stager.plans()
    h.replay()
    assert c.tolist() == [8.0] * 4
    g.replay()  # the graph itself is untouched
    assert y.tolist() == [3.0] * 4


def test_errors_say_what_to_do_and_copy_nothing():
    x, w = tp.zeros(4), tp.zeros(4)
    g, y, _ = _affine_graph(x, w)
    x.fill_(5.0)
    bad = [
        (ValueError, "got 1 inputs for 2 static inputs; pass one input per static input", [x, w], [tp.ones(4)]),
        (ValueError, r"input 1 of shape \(5,\) cannot be copied into static input 1 of shape \(4,\)", [x, w],
         [tp.ones(4), tp.ones(5)]),
        (ValueError, r"input 1 of shape \(2, 3\) cannot be copied", [x, w], [tp.ones(4), np.ones((2, 3))]),
        (TypeError, "expected a Tensor as static input 1, got list", [x, [1.0] * 4], [tp.ones(4), tp.ones(4)]),
        (TypeError, "expected a Tensor or host data .* as input 1, got object", [x, w], [tp.ones(4), object()]),
        (TypeError, "expected a Tensor or numeric host data as input 1, got host data of dtype <U1", [x, w],
         [tp.ones(4), ["a"] * 4]),
        (TypeError, "expected a list or tuple of static input tensors, got Tensor", x, [tp.ones(4)]),
        (TypeError, "expected a list or tuple of inputs, got Tensor", [x], tp.ones(4)),
        (TypeError, "expected stream=None or a tensorplay.cuda.Stream, got int", [x, w], [tp.ones(4)] * 2, 0),
    ]  # fmt: skip
    for cls, message, statics, inputs, *stream in bad:
        with pytest.raises(cls, match=message):
            g.stage_and_launch(statics, inputs, *stream)
        assert x.numpy().tolist() == [5.0] * 4  # the good first pair was not copied
    g.stage_and_launch([x, w], [tp.ones(4), tp.ones(4)])  # and it works after each error
    assert y.numpy().tolist() == [3.0] * 4


def test_static_inputs_that_require_grad_take_host_data_as_they_take_tensors():
    # Issue 11, item 3: the first static input was written, then the copy into
    # the second (which requires grad) raised. The copies are not autograd's,
    # whichever way they go (the gather kernel's never were).
    x, w = tp.zeros(4), tp.zeros(4).requires_grad_()
    g, y, s = _affine_graph(x, w)
    g.stage_and_launch([x, w], [np.full(4, 2.0, np.float32), np.arange(4, dtype=np.float64)])
    assert x.tolist() == [2.0] * 4 and w.detach().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert y.tolist() == [5.0] * 4 and s.item() == 6.0
    g.stage_and_launch([x, w], [tp.ones(4), tp.full((8,), 3.0)[::2]])  # another layout: copy_
    assert w.detach().tolist() == [3.0] * 4 and s.item() == 12.0
    g.stage_and_launch([x, w], [tp.full((8,), 4.0)[::2].requires_grad_(), tp.ones(4)])  # a source that does
    assert y.tolist() == [9.0] * 4 and w.requires_grad


def test_host_data_refused_by_a_capture_elsewhere_copies_nothing():
    x, w = tp.zeros(4), tp.zeros(4)
    g, y, _ = _affine_graph(x, w)
    g.stage_and_launch([x, w], [tp.ones(4), tp.ones(4)])  # the plan is built before the other capture
    x.fill_(5.0)
    strided, host = tp.full((8,), 2.0)[::2], np.ones(4, np.float32)
    s, side = tp.cuda.Stream(), tp.cuda.Stream()
    s.wait_stream(tp.cuda.current_stream())
    other = tp.cuda.CUDAGraph()
    with tp.cuda.stream(side):
        other.capture_begin()  # global mode: no host copies anywhere until it ends
        z = tp.ones(1) + 1.0
    try:
        with pytest.raises(tp.cuda.CaptureError, match=r"^stage_and_launch\(\) with host data .* is not allowed while"):
            g.stage_and_launch([x, w], [strided, host], stream=s)  # input 0 alone would be copied
    finally:
        with tp.cuda.stream(side):
            other.capture_end()
    s.synchronize()
    assert x.tolist() == [5.0] * 4  # the check came before the copy of input 0
    other.replay()
    assert z.item() == 2.0
    g.stage_and_launch([x, w], [strided, host])
    assert y.tolist() == [5.0] * 4


def test_a_static_input_whose_elements_share_memory_is_refused_before_any_copy():
    x, e = tp.zeros(4), tp.ones(1).expand(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        out = x + e
    x.fill_(5.0)
    with pytest.raises(ValueError, match=r"^static input 1 of shape \(4,\) and strides \(0,\) has elements that share"):
        g.stage_and_launch([x, e], [np.ones(4, np.float32), tp.zeros(4)])
    assert x.tolist() == [5.0] * 4
    g.stage_and_launch([x], [np.ones(4, np.float32)])
    assert out.tolist() == [2.0] * 4


def test_needs_a_captured_graph():
    g = tp.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="needs a captured graph; capture one first"):
        g.stage_and_launch([], [])
    x = tp.zeros(2)
    with tp.cuda.graph(g):
        x.add_(1.0)
    g.stage_and_launch([x], [tp.ones(2)])
    assert x.numpy().tolist() == [2.0, 2.0]
    g.reset()
    with pytest.raises(RuntimeError, match=r"needs a captured graph; capture one first \(after reset\(\)"):
        g.stage_and_launch([x], [tp.ones(2)])


def test_refused_during_a_capture_and_the_runtime_stays_usable():
    x = tp.zeros(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x + 1.0
    other = tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.CaptureError, match="stage_and_launch\\(\\) is not allowed on stream 0x[0-9a-f]+ while"):
        with tp.cuda.graph(other):
            g.stage_and_launch([x], [tp.ones(4)])
    _no_capture_left()
    own = tp.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="while this CUDAGraph is capturing; call capture_end\\(\\) first"):
        with tp.cuda.graph(own):
            own.stage_and_launch([x], [tp.ones(4)])
    _no_capture_left()
    s, fresh = tp.cuda.Stream(), tp.ones(4)
    s.wait_stream(tp.cuda.current_stream())
    with tp.cuda.stream(s):
        other.capture_begin()
        y.add_(1.0)
    try:
        with pytest.raises(tp.cuda.CaptureError, match=r"^stage_and_launch\(\) on the legacy default stream is not"):
            g.stage_and_launch([x], [fresh], stream=tp.cuda.default_stream())
    finally:  # a failed check must not leave the capture open for the tests after it
        with tp.cuda.stream(s):
            other.capture_end()
    g.stage_and_launch([x], [tp.full((4,), 2.0)])
    assert y.numpy().tolist() == [3.0] * 4


def test_on_an_explicit_stream():
    x, w = tp.zeros(4), tp.zeros(4)
    g, y, _ = _affine_graph(x, w)
    s = tp.cuda.Stream()
    a = tp.tensor(_rand(4))
    s.wait_stream(tp.cuda.current_stream())
    g.stage_and_launch([x, w], [a, a[::1]], stream=s)
    g.stage_and_launch([x, w], [a, np.zeros(4, np.float32)], stream=s)  # a host copy on s
    s.synchronize()
    np.testing.assert_allclose(y.numpy(), a.numpy().astype(np.float64) * 2 + 1, rtol=1e-6)
