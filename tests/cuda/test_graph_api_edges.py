"""Edges of the graph API a user drives by hand: conditional nodes nested,
captures that fail, the errors' sentences; results checked against the same
logic run on the host in NumPy."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import tensorplay as tp


def _host_countdown(start: int, cap: int | None) -> tuple[float, int]:
    """What a while loop adding n to a total, then counting n down to 0, leaves."""
    n, total, passes = start, np.float64(0.0), 0
    while n > 0 and (cap is None or passes < cap):
        total += n
        n -= 1
        passes += 1
    return float(total), passes


def _countdown(g, n, flag, total, max_iters):
    with g.while_(flag, max_iters=max_iters) as loop:
        total.add_(n)
        n.sub_(1)
        tp.gt(n, 0, out=flag)
    return loop


@pytest.mark.parametrize("update", [False, True])
def test_a_loop_of_a_discarded_capture_holds_no_memory_of_the_graph(update):
    """A body that raises discards the capture; the loop it opened holds
    nothing of it, so a graph held (capture with update=True) resets and the
    memory goes back, even while the user still holds the Loop."""
    n, flag, total = tp.tensor([3]), tp.tensor([True]), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    if update:
        with tp.cuda.graph(g):
            _countdown(g, n, flag, total, None)
    gc.collect()
    before = tp.cuda.memory_allocated()
    with pytest.raises(KeyError):
        with tp.cuda.graph(g, update=update):
            with g.while_(flag, max_iters=5) as loop:
                total.add_(n)
                raise KeyError("the body failed")
    assert loop.iterations is None  # nothing of a capture that made no graph
    if update:  # the graph held goes on as it was
        g.replay()
        assert total.item() == _host_countdown(3, None)[0]
        g.reset()  # the discarded loop holds none of the pool's memory
    else:
        del g  # with its cancel request, made for the loop
        gc.collect()
        assert tp.cuda.memory_allocated() == before


def test_loops_nested_three_deep_match_the_host():
    """A capped while around an if/else around a switch, and a do-while in an if."""

    @tp.jit
    def count_down(loop, m, acc):
        if tp.cuda.grid(1) == 0:
            acc[0] += m[0]
            m[0] -= 1
            tp.cuda.set_conditional(loop, np.uint32(1 if m[0] > 0 else 0))

    n, flag, odd, idx = tp.tensor([7]), tp.tensor([True]), tp.tensor([False]), tp.tensor([0])
    x, m, acc, some = tp.zeros(1, dtype=tp.float64), tp.tensor([0]), tp.zeros(1, dtype=tp.int64), tp.tensor([False])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag, max_iters=6) as outer:
            tp.eq(n % 2, 1, out=odd)
            with g.if_else(odd) as branch:
                idx.copy_(n % 3)
                with g.switch_(idx, 2) as cases:
                    x.add_(1.0)
                    cases.next()
                    x.add_(10.0)  # n % 3 == 2: no case
                branch.else_()
                x.mul_(2.0)
                m.copy_(n // 2)
                tp.gt(m, 0, out=some)
                with g.if_(some):
                    with g.while_(max_iters=2) as inner:
                        count_down[1, 1](inner, m, acc)
            n.sub_(1)
            tp.gt(n, 0, out=flag)
    g.replay()
    tp.cuda.synchronize()

    hn, hx, hacc, passes, inner_passes = 7, np.float64(0.0), 0, 0, None
    while True:
        passes += 1
        if hn % 2 == 1:
            i = hn % 3
            hx += 1.0 if i == 0 else 10.0 if i == 1 else 0.0
        else:
            hx *= 2.0
            hm = hn // 2
            if hm > 0:
                inner_passes = 0
                while True:
                    inner_passes += 1
                    hacc += hm
                    hm -= 1
                    if not (hm > 0) or inner_passes >= 2:
                        break
        hn -= 1
        if not (hn > 0) or passes >= 6:
            break
    assert x.item() == hx
    assert acc.item() == hacc
    assert (outer.iterations.item(), inner.iterations.item()) == (passes, inner_passes)
    assert outer.hit_limit == (hn > 0)


def test_an_if_node_inside_an_unrolled_loop_is_refused_with_its_article():
    flag = tp.tensor([True])
    g = tp.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=r"^an if node inside a while loop with unroll > 1"):
        with tp.cuda.graph(g):
            with g.while_(flag, max_iters=2, unroll=2):
                with g.if_(flag):
                    pass
    assert not tp.cuda.is_current_stream_capturing()


def test_a_picture_path_without_an_extension_gets_svg(tmp_path, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)  # no Graphviz: tensorplay's own drawing
    x = tp.ones(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        x.mul_(2)
    svg = g.draw(tmp_path / "graph")
    assert svg.startswith("<svg") and "elementwise.mul" in svg
    assert (tmp_path / "graph").read_text() == svg


@tp.jit
def _add_scalar(k, y):
    i = tp.cuda.grid(1)
    if i < y.size:
        y[i] += k


@pytest.mark.parametrize("value", [2**40, -(2**31) - 1])
def test_set_args_names_a_number_out_of_its_captured_type(value):
    y = tp.zeros(4)
    _add_scalar[1, 4](np.int32(1), y)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        _add_scalar[1, 4](np.int32(1), y)
    (node,) = g.nodes()
    message = rf"^argument 0 of _add_scalar was captured as a number \(int32\); got {value}, outside its range"
    with pytest.raises(OverflowError, match=message):
        node.set_args(value, y)
    node.set_args(np.int32(3), y)
    y.zero_()
    g.replay()
    np.testing.assert_array_equal(y.numpy(), np.full(4, 3.0))


def test_a_switch_of_more_cases_than_the_drivers_count_holds_is_refused():
    index = tp.tensor([0], dtype=tp.int32)
    for n in (0, 2**32, True, 2.0):
        g = tp.cuda.CUDAGraph()
        with pytest.raises(ValueError, match=r"^expected the number of switch cases as an int from 1 to 2\*\*32 - 1"):
            with tp.cuda.graph(g):
                g.switch_(index, n).__enter__()
        assert not tp.cuda.is_current_stream_capturing()
