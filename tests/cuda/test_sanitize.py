"""Hazard checking (tp.cuda.sanitize): races that nothing orders are named, ordered work is left alone."""

from __future__ import annotations

import gc
import random
import re

import numpy as np
import pytest
from numba import cuda

import tensorplay as tp
from tensorplay.runtime import launch
from tensorplay.runtime.backend import get as get_backend
from tensorplay.runtime.backend.simgraph import random_order
from tensorplay.runtime.hazards import checker
from tensorplay.runtime.hazards.access import Access, meet
from tensorplay.runtime.hazards.timeline import Timeline
from tensorplay.runtime.hazards.written import written_parameters

HERE = "test_sanitize.py:"


@cuda.jit
def write_index(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = i


@cuda.jit
def everyone_writes_first(out):
    out[0] = cuda.grid(1)  # a race: every thread stores into one element


@cuda.jit
def running_order(order, count):
    slot = cuda.atomic.add(count, 0, 1)  # atomics are how threads share an element
    order[slot] = cuda.grid(1)


@cuda.jit
def fill_row(out, rows):
    t = cuda.grid(1)
    out[t % rows] = t + 1.0  # a row a thread where rows >= threads; else two threads fill one row


@cuda.jit
def fill_pair(out):
    t = cuda.grid(1)
    out[t : t + 2] = t + 1.0  # each thread two elements, the next thread's first among them


@cuda.jit
def shift_right(x):
    i = cuda.grid(1)
    if i + 1 < x.size:
        x[i + 1] = x[i]  # reads what the thread before writes


@cuda.jit
def scale_into(out, x, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i]


@tp.jit
def scaled(out, x, factor):
    i = tp.cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * factor


ALWAYS_ON = checker.enabled()  # TENSORPLAY_SANITIZE=1: the whole run is checked
off_by_default = pytest.mark.skipif(ALWAYS_ON, reason="TENSORPLAY_SANITIZE=1 keeps checking on")
sim_only = pytest.mark.skipif(tp.cuda.backend() != "sim", reason="what only the simulator sees")


@pytest.fixture
def checked():
    """Checking on, the device idle before and after (a test's streams may be left racing).
    No garbage collection inside: a graph of an earlier test, collected there, would
    give its pool back after a device-wide wait, which orders every stream (no race left to see)."""
    gc.collect()
    tp.cuda.synchronize()
    gc.disable()
    try:
        with tp.cuda.sanitize(seed=7):
            yield
            tp.cuda.synchronize()
    finally:
        gc.enable()


def _forked(main: tp.cuda.Stream) -> tp.cuda.Stream:
    side = tp.cuda.Stream()
    side.wait_stream(main)
    return side


# -- broken programs ------------------------------------------------------------------
def test_missing_wait_stream_names_both_kernels_their_lines_and_streams(checked):
    x, main = tp.ones(8), tp.cuda.current_stream()
    side = _forked(main)
    with tp.cuda.stream(side):
        y = x * 2
    with pytest.raises(tp.cuda.HazardError, match="^two operations touch the same memory with nothing ordering") as e:
        y + 1  # nothing makes the current stream wait for the side stream
    first, second = e.value.first, e.value.second
    assert "kernel elementwise.mul" in first and f"stream {side.handle:#x}" in first and "writes out" in first
    assert "kernel elementwise.add" in second and "the legacy default stream" in second and "reads x0" in second
    assert HERE in first and HERE in second
    assert "wait_stream" in str(e.value)


def test_reading_back_without_waiting_is_a_race(checked):
    x, side = tp.ones(4), _forked(tp.cuda.current_stream())
    with tp.cuda.stream(side):
        x.mul_(3.0)
    with pytest.raises(tp.cuda.HazardError, match="copy of 16 bytes to the host"):
        x.tolist()


def test_a_copy_and_a_fill_are_checked_too(checked):
    x, y = tp.ones(4), tp.zeros(4)
    side = _forked(tp.cuda.current_stream())
    with tp.cuda.stream(side):
        y.copy_(x)
    with pytest.raises(tp.cuda.HazardError) as e:
        y.zero_()
    assert "on stream" in e.value.first and "writes" in e.value.first
    assert "writes" in e.value.second


@sim_only  # (on the GPU Numba launches them itself)
def test_plain_numba_launches_on_two_streams(checked):
    out = tp.zeros(8, dtype=tp.int64)
    s1, s2 = _forked(tp.cuda.current_stream()), _forked(tp.cuda.current_stream())
    write_index[1, 8, s1](out)
    with pytest.raises(tp.cuda.HazardError, match="kernel write_index") as e:
        write_index[1, 8, s2](out)
    assert "writes out (int64[8])" in e.value.first and "writes out (int64[8])" in e.value.second


def test_forked_capture_without_its_join_edge_raises_at_capture_end(checked):
    x, g = tp.ones(4), tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.HazardError, match="in the graph captured on stream .* with nothing ordering") as e:
        with tp.cuda.graph(g):
            main = tp.cuda.current_stream()
            side = _forked(main)
            with tp.cuda.stream(side):
                y = x * 2
            z = y + 1  # reads y before the join below
            main.wait_stream(side)
    assert "kernel elementwise.mul" in e.value.first and "node " in e.value.first and HERE in e.value.first
    assert f"captured on stream {side.handle:#x}" in e.value.first
    assert "kernel elementwise.add" in e.value.second and "reads x0" in e.value.second
    assert "no path of edges" in str(e.value) and "the capture was discarded" in str(e.value)
    with tp.cuda.graph(g):  # discarded: the graph captures again
        z = x + 1
    g.replay()
    assert z.tolist() == [2.0] * 4


def test_two_branches_writing_one_tensor_in_a_graph(checked):
    y, g = tp.zeros(4), tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.HazardError, match="writes") as e:
        with tp.cuda.graph(g):
            main = tp.cuda.current_stream()
            side = _forked(main)
            with tp.cuda.stream(side):
                y.fill_(1.0)
            y.fill_(2.0)
            main.wait_stream(side)
    assert "writes" in e.value.first and "writes" in e.value.second


def test_a_race_inside_a_conditional_body_names_the_body(checked):
    x, flag, g = tp.ones(4), tp.tensor([True]), tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.HazardError, match="then-body of the if node") as e:
        with tp.cuda.graph(g):
            with g.if_(flag):
                body = tp.cuda.current_stream()
                side = _forked(body)
                with tp.cuda.stream(side):
                    x.mul_(2.0)
                x.add_(1.0)
                body.wait_stream(side)
    assert "kernel elementwise.mul" in e.value.first and "kernel elementwise.add" in e.value.second


def test_a_body_is_where_its_conditional_node_is(checked):
    x, flag, g = tp.ones(4), tp.tensor([True]), tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.HazardError) as e:
        with tp.cuda.graph(g):
            main = tp.cuda.current_stream()
            side = _forked(main)
            with tp.cuda.stream(side):
                x.mul_(2.0)
            with g.if_(flag):  # nothing orders the side stream's write before the node
                x.add_(1.0)
            main.wait_stream(side)
    assert "kernel elementwise.mul" in e.value.first
    assert "then-body of the if node" in e.value.second and "kernel elementwise.add" in e.value.second


@pytest.mark.parametrize("unroll", [1, 2])
def test_a_race_inside_a_loop_body(checked, unroll):
    x, n, flag, g = tp.ones(4), tp.tensor([3]), tp.tensor([True]), tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.HazardError, match="loop body of the while node") as e:
        with tp.cuda.graph(g):
            with g.while_(flag, max_iters=5, unroll=unroll):
                body = tp.cuda.current_stream()
                side = _forked(body)
                with tp.cuda.stream(side):
                    x.mul_(2.0)
                x.add_(1.0)
                body.wait_stream(side)
                n.sub_(1)
                tp.gt(n, 0, out=flag)
    assert "kernel elementwise.mul" in e.value.first and "kernel elementwise.add" in e.value.second


@sim_only  # (on the GPU a replay is one driver call that the check does not stand in front of)
def test_a_replay_is_checked_against_eager_work(checked):
    x, g = tp.ones(4), tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        x.mul_(2.0)
    side = _forked(tp.cuda.current_stream())
    g.replay(side)
    with pytest.raises(tp.cuda.HazardError, match="replay of a CUDA graph") as e:
        x.add_(1.0)
    assert "of its kernel elementwise.mul" in e.value.first


@sim_only  # (a replay: as above)
@pytest.mark.parametrize("with_loop", [False, True], ids=["one-launch", "loop"])
def test_a_staged_launch_is_checked_as_its_copies_and_replay(checked, with_loop):
    # stage_and_launch copies the inputs in (kernels in front of the graph) and replays it; a graph
    # holding a while node is not cloned, so its copies launch on the stream before it
    x, y, flag = tp.ones(4), tp.zeros(4), tp.tensor([False])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y.copy_(x * 2)
        if with_loop:
            with g.while_(flag, max_iters=1):
                y.add_(1)
    side = _forked(tp.cuda.current_stream())
    g.stage_and_launch([x], [tp.full((4,), 3.0)], side)
    with pytest.raises(tp.cuda.HazardError, match="stage_and_launch") as e:
        _ = y + 1  # reads y, which the staged replay writes on the side stream
    assert "stage_and_launch" in e.value.first and "writes" in e.value.first  # a node of the graph writing y
    assert f"at {y.data_ptr():#x}" in e.value.first
    tp.cuda.current_stream().wait_stream(side)
    new = tp.full((4,), 5.0)
    g.stage_and_launch([x], [new], side)
    with pytest.raises(tp.cuda.HazardError, match="stage_and_launch") as e:
        x.add_(1)  # writes x, which the staged copy writes on the side stream
    assert "stage_and_launch" in e.value.first and f"stream {side.handle:#x}" in e.value.first
    assert f"at {x.data_ptr():#x}" in e.value.first  # the copy into x, or the graph's read of it
    tp.cuda.current_stream().wait_stream(side)
    assert y.tolist() == [10.0] * 4


# -- a kernel node given new arguments (set_args) ----------------------------------------
@sim_only  # (a replay: as above)
def test_a_replay_is_checked_against_the_arguments_set_args_gave(checked):
    x, out, shared = tp.ones(8), tp.zeros(8), tp.zeros(8)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        scaled[1, 8](out, x, 2.0)
    (node,) = g.nodes()
    node.set_args(shared, x, 3.0)  # the node now writes shared
    side = _forked(tp.cuda.current_stream())
    with tp.cuda.stream(side):
        y = shared + 1  # reads shared
    with pytest.raises(tp.cuda.HazardError, match="replay of a CUDA graph") as e:
        g.replay()  # writes shared with nothing waiting for the side stream
    assert "kernel elementwise.add" in e.value.first and f"stream {side.handle:#x}" in e.value.first
    assert "writes out (float32[8]) of its kernel scaled" in e.value.second
    assert f"at {shared.data_ptr():#x}" in e.value.second
    tp.cuda.current_stream().wait_stream(side)
    assert y.tolist() == [1.0] * 8 and shared.tolist() == [3.0] * 8  # the read came first, this time


@sim_only
def test_set_args_is_followed_for_a_node_captured_on_empty_tensors(checked):
    x, shared = tp.ones(8), tp.zeros(8)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        scaled[1, 8](tp.zeros(0), tp.ones(0), 2.0)  # touches nothing as captured
    (node,) = g.nodes()
    node.set_args(shared, x, 3.0)
    side = _forked(tp.cuda.current_stream())
    with tp.cuda.stream(side):
        y = shared + 1
    with pytest.raises(tp.cuda.HazardError, match="replay of a CUDA graph"):
        g.replay()
    tp.cuda.current_stream().wait_stream(side)
    assert y.tolist() == [1.0] * 8


@sim_only
def test_a_replay_no_longer_touches_what_set_args_took_the_node_from(checked):
    x, out, elsewhere = tp.ones(8), tp.zeros(8), tp.zeros(8)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        scaled[1, 8](out, x, 2.0)
    (node,) = g.nodes()
    node.set_args(elsewhere, x, 3.0)
    side = _forked(tp.cuda.current_stream())
    with tp.cuda.stream(side):
        y = out + 1  # reads out, which the replay no longer writes
    g.replay()
    tp.cuda.current_stream().wait_stream(side)
    assert elsewhere.tolist() == [3.0] * 8 and out.tolist() == [0.0] * 8 and y.tolist() == [1.0] * 8


def test_set_args_that_make_two_unordered_nodes_meet_is_refused(checked):
    x, a, b = tp.ones(4), tp.zeros(4), tp.zeros(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        main = tp.cuda.current_stream()
        side = _forked(main)
        with tp.cuda.stream(side):
            scaled[1, 4](a, x, 2.0)  # two branches, each writing a tensor of its own
        scaled[1, 4](b, x, 3.0)
        main.wait_stream(side)
    (node,) = g.nodes()  # the capture's stream's kernel: the side stream's is not listed
    with pytest.raises(tp.cuda.HazardError, match="in the graph captured on stream .* with nothing ordering") as e:
        node.set_args(a, x, 3.0)
    assert "kernel scaled on node " in e.value.first and "kernel scaled on node " in e.value.second
    assert e.value.first.split(",")[0] != e.value.second.split(",")[0]  # two nodes named
    assert "writes out" in e.value.first and "writes out" in e.value.second
    assert "set_args() gave one of them arguments" in str(e.value) and "the node keeps its arguments" in str(e.value)
    g.replay()
    assert a.tolist() == [2.0] * 4 and b.tolist() == [3.0] * 4


def test_set_args_in_a_correct_program_is_not_reported(checked):
    x, a, b, c = tp.ones(4), tp.zeros(4), tp.zeros(4), tp.zeros(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        main = tp.cuda.current_stream()
        side = _forked(main)
        with tp.cuda.stream(side):
            scaled[1, 4](a, x, 2.0)
        scaled[1, 4](b, x, 3.0)
        main.wait_stream(side)
        total = a + b  # after the join: reads both
    node = g.nodes()[0]
    node.set_args(c, x, 4.0)  # a tensor of its own: nothing else in the graph touches c
    g.replay()
    side = _forked(tp.cuda.current_stream())  # ordered after the replay
    with tp.cuda.stream(side):
        from_c = c * 2
    tp.cuda.current_stream().wait_stream(side)
    assert c.tolist() == [4.0] * 4 and from_c.tolist() == [8.0] * 4 and total.tolist() == [2.0] * 4
    node.set_args(b, x, 5.0)  # back to the tensor it was captured with
    g.replay()
    assert total.tolist() == [7.0] * 4


# -- correct programs -------------------------------------------------------------------
def test_fork_and_join_with_wait_stream_events_and_host_waits(checked):
    x, main = tp.ones(8), tp.cuda.current_stream()
    side = _forked(main)
    with tp.cuda.stream(side):
        y = x * 2
    main.wait_stream(side)
    z = y + 1
    side.wait_event(main.record_event())  # after z's read of y
    with tp.cuda.stream(side):
        y.mul_(3.0)
        done = side.record_event()
    main.wait_event(done)
    assert z.tolist() == [3.0] * 8 and y.tolist() == [6.0] * 8
    with tp.cuda.stream(_forked(main)) as s:
        y.add_(1.0)
    s.synchronize()  # the host waited: later work on any stream comes after
    assert y.tolist() == [7.0] * 8
    with tp.cuda.stream(_forked(main)):
        y.add_(1.0)
    tp.cuda.synchronize()
    y.add_(1.0)
    assert y.tolist() == [9.0] * 8


def test_two_streams_may_read_one_tensor_and_write_disjoint_views(checked):
    x, out = tp.arange(8).float(), tp.zeros(8)
    main = tp.cuda.current_stream()
    s1, s2 = _forked(main), _forked(main)
    with tp.cuda.stream(s1):
        out[:4].copy_(x[:4] * 2)
        even = x[::2] + 0
    with tp.cuda.stream(s2):
        out[4:].copy_(x[4:] * 3)
        odd = x[1::2] + 0
    main.wait_stream(s1)
    main.wait_stream(s2)
    assert out.tolist() == [0, 2, 4, 6, 12, 15, 18, 21]
    assert even.tolist() == [0, 2, 4, 6] and odd.tolist() == [1, 3, 5, 7]


def test_interleaved_strided_views_do_not_meet():
    a = Access(0, 28, True, "even", (0, (4,), (8,), 4))  # bytes 0-3, 8-11, 16-19, 24-27
    b = Access(4, 32, True, "odd", (4, (4,), (8,), 4))
    c = Access(8, 12, False, "one element")
    assert not meet(a, b) and meet(a, c) and not meet(b, c)


def test_a_graph_with_proper_edges_and_conditional_bodies(checked):
    x, flag, n, keep_going = tp.ones(4), tp.tensor([False]), tp.tensor([3]), tp.tensor([True])
    total, g = tp.zeros(4), tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        main = tp.cuda.current_stream()
        side = _forked(main)
        with tp.cuda.stream(side):
            a = x * 2  # both branches read x
        b = x + 1
        main.wait_stream(side)
        c = a + b
        with g.if_else(flag) as branch:  # the two bodies write one tensor: only one runs
            total.copy_(c)
            branch.else_()
            total.copy_(c * 2)
        with g.while_(keep_going, max_iters=10):
            total.add_(1.0)
            n.sub_(1)
            tp.gt(n, 0, out=keep_going)
    g.replay()
    assert total.tolist() == [11.0] * 4  # the else-body (8), then three passes


def test_an_unrolled_loop_and_a_switch(checked):
    n, flag, total, index = tp.tensor([4]), tp.tensor([True]), tp.zeros(1), tp.tensor([1])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag, max_iters=10, unroll=2):
            total.add_(1.0)
            n.sub_(1)
            tp.gt(n, 0, out=flag)
        with g.switch_(index, 2) as cases:
            total.add_(10.0)
            cases.next()
            total.add_(100.0)
    g.replay()
    assert total.item() == 104.0


def test_graph_edges_name_nodes_as_captured_node_does():
    x, g = tp.ones(4), tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x * 2
        z = y + 1
    first, second = (launch[0] for launch in g._launches)
    assert (first, second) in get_backend().graph_edges(g._graph)
    g.replay()
    assert z.tolist() == [3.0] * 4


# -- what a kernel writes -------------------------------------------------------------------
def test_written_parameters_read_from_the_kernel_code():
    assert written_parameters(scale_into) == (("out", "x", "a"), frozenset({"out"}))
    assert written_parameters(everyone_writes_first)[1] == {"out"}

    def atomics(hist, values):
        cuda.atomic.add(hist, values[0], 1)

    assert written_parameters(atomics)[1] == {"hist"}
    assert written_parameters(lambda a, b: a * b) == (("a", "b"), frozenset())

    def through_views(out, rows, flat, pair_a, pair_b, x):
        row = out[0]  # a row of a 2-d array: a view
        row[1] = x[0]
        for r in rows:
            r[0] = 1.0
        f = flat.reshape(flat.size)
        f[0] = 2.0
        for a in (pair_a, pair_b):
            a[0] = 3.0
        v = x[1]  # an element: read only
        return v

    assert written_parameters(through_views)[1] == {"out", "rows", "flat", "pair_a", "pair_b"}


# -- off by default, and free when off ----------------------------------------------------------
@off_by_default
def test_off_by_default_nothing_is_wrapped_or_called(monkeypatch):
    calls = []
    monkeypatch.setattr(launch, "kernel_launched", lambda *a: calls.append(a))
    monkeypatch.setattr(Timeline, "issue", lambda *a: calls.append(a))
    dev = get_backend()
    x, side = tp.ones(4), _forked(tp.cuda.current_stream())
    with tp.cuda.stream(side):
        y = x * 2
    (y + 1).tolist()  # a race nobody checks
    assert calls == []
    assert not set(checker._WRAPPERS) & set(vars(dev))
    with tp.cuda.sanitize(seed=1):
        assert {"copy_dtod", "read", "stream_wait_event", "end_capture"} <= set(vars(dev))
        (x * 2).tolist()
    assert len(calls) >= 2  # a kernel and a readback, while it was on
    assert not set(checker._WRAPPERS) & set(vars(dev))


@off_by_default
def test_a_call_set_on_the_backend_object_is_checked_and_put_back(monkeypatch):
    # A profiler's wrapper, or a patch an earlier test left behind (pytest's
    # monkeypatch.setattr undoes an instance's method by setting it there):
    # checking wraps it too, and leaves it as it was.
    dev = get_backend()
    own = []

    def stream_wait_event(stream, event):
        own.append(event)
        return type(dev).stream_wait_event(dev, stream, event)

    monkeypatch.setitem(vars(dev), "stream_wait_event", stream_wait_event)
    x, side = tp.ones(4), tp.cuda.Stream()
    with tp.cuda.sanitize(seed=2):
        side.wait_stream(tp.cuda.current_stream())
        with tp.cuda.stream(side):
            y = x * 2
        tp.cuda.current_stream().wait_stream(side)
        assert (y + 1).tolist() == [3.0] * 4  # ordered through the wrapped wait: no HazardError
        assert vars(dev)["stream_wait_event"] is not stream_wait_event
    assert len(own) == 2
    assert vars(dev)["stream_wait_event"] is stream_wait_event


@off_by_default
def test_sanitize_nests_and_says_whether_it_is_on():
    assert not checker.enabled()
    with tp.cuda.sanitize(seed=3):
        with tp.cuda.sanitize():
            assert checker.enabled()
        assert checker.enabled()
    assert not checker.enabled()


def test_environment_variables(monkeypatch):
    monkeypatch.setenv("TENSORPLAY_SANITIZE_SEED", "1234")
    assert checker._environment_seed() == 1234
    monkeypatch.setenv("TENSORPLAY_SANITIZE_SEED", "soon")
    with pytest.raises(ValueError, match="^TENSORPLAY_SANITIZE_SEED must be an integer, got 'soon'"):
        checker._environment_seed()
    monkeypatch.setenv("TENSORPLAY_SANITIZE", "maybe")
    with pytest.raises(ValueError, match="^TENSORPLAY_SANITIZE must be 1 or 0, got 'maybe'"):
        checker.enable_from_environment()
    monkeypatch.setenv("TENSORPLAY_SANITIZE", "0")
    checker.enable_from_environment()
    assert checker.enabled() == ALWAYS_ON


# -- the simulator's orders -------------------------------------------------------------------
def test_random_orders_respect_every_edge_and_follow_the_seed():
    deps = [(), (0,), (0,), (), (1, 2, 3), ()]
    orders = set()
    for seed in range(20):
        order = random_order(deps, random.Random(seed))
        assert sorted(order) == list(range(6))
        assert all(order.index(d) < order.index(i) for i, ds in enumerate(deps) for d in ds)
        assert order == random_order(deps, random.Random(seed))
        orders.add(tuple(order))
    assert len(orders) > 1


def test_a_fresh_seed_is_printed_and_kept_for_child_processes(capsys, monkeypatch):
    monkeypatch.delenv("TENSORPLAY_SANITIZE_SEED", raising=False)
    seed = checker._environment_seed()
    assert checker._environment_seed() == seed  # kept in TENSORPLAY_SANITIZE_SEED
    if tp.cuda.backend() == "sim":
        assert capsys.readouterr().err.count(f"TENSORPLAY_SANITIZE_SEED={seed}") == 1


@sim_only
def test_the_threads_of_a_launch_run_in_an_order_drawn_from_the_seed():
    orders = []
    for seed in (0, 1, 0):
        order, count = tp.zeros(16, dtype=tp.int64), tp.zeros(1, dtype=tp.int64)
        with tp.cuda.sanitize(seed=seed):
            running_order[2, 8, tp.cuda.current_stream()](order, count)
        orders.append(order.tolist())
        assert sorted(orders[-1]) == list(range(16))
    if not ALWAYS_ON:  # (nested in an outer check, the outer seed goes on)
        assert orders[0] == orders[2] != orders[1]
    assert orders[0] != list(range(16)) or orders[1] != list(range(16))


@sim_only
def test_a_racing_kernel_names_both_threads(checked):
    out = tp.zeros(1, dtype=tp.int64)
    with pytest.raises(tp.cuda.HazardError, match="^two threads of one launch of kernel everyone_writes_first") as e:
        everyone_writes_first[2, 8, tp.cuda.current_stream()](out)
    assert e.value.first.startswith("thread (") and " of block (" in e.value.first
    assert "writes element (0,) of out (int64[1])" in e.value.second
    x = tp.arange(8).float()
    with pytest.raises(tp.cuda.HazardError, match="reads element") as e:
        shift_right[1, 8, tp.cuda.current_stream()](x)
    ordered = tp.zeros(16, dtype=tp.int64)
    write_index[2, 8, tp.cuda.current_stream()](ordered)
    np.testing.assert_array_equal(ordered.numpy(), np.arange(16))


@sim_only
def test_stores_to_rows_and_slices_are_watched_element_by_element(checked):
    out = tp.zeros(2, 3)
    with pytest.raises(tp.cuda.HazardError, match="^two threads of one launch of kernel fill_row") as e:
        fill_row[1, 4, tp.cuda.current_stream()](out, 2)
    assert re.search(r"writes element \([01], 0\) of out \(float32\[2, 3\]\)$", e.value.second)  # a row's first
    with pytest.raises(tp.cuda.HazardError, match="writes element") as e:
        fill_pair[1, 4, tp.cuda.current_stream()](tp.zeros(5))
    own = tp.zeros(4, 3)
    fill_row[1, 4, tp.cuda.current_stream()](own, 4)  # a row each: no race
    np.testing.assert_array_equal(own.numpy(), np.repeat(np.arange(1.0, 5.0)[:, None], 3, axis=1))


def test_the_checker_passes_a_backends_keywords_on(monkeypatch):
    """The driver's ``conditional_end`` takes ``overlap=``, which its own
    ``conditional_repeat`` passes: under checking, the wrapped call and the
    backend's own method both take it on (a keyword lost there left the
    capture of every unrolled loop open on the GPU)."""
    dev = get_backend()
    given = []
    monkeypatch.setattr(type(dev), "conditional_end", lambda self, body_stream, **kw: given.append(kw), raising=False)
    stream = tp.cuda.current_stream()._h
    with tp.cuda.sanitize(seed=1):
        dev.conditional_end(stream, overlap=False)
        checker._own_method(dev, "conditional_end")(stream, overlap=True)
    assert given == [{"overlap": False}, {"overlap": True}]


def test_a_view_that_repeats_elements_and_skips_others_touches_only_its_elements():
    from tensorplay.runtime.hazards.access import array_access

    x = tp.arange(4).float()
    v = x[::3].unsqueeze(1).expand(2, 2)  # x[0], x[0], x[3], x[3]: its span is as long as its elements
    assert not meet(array_access(v._karray, False, "v"), array_access(x[1:3]._karray, True, "x[1:3]"))
    assert meet(array_access(v._karray, False, "v"), array_access(x[3:]._karray, True, "x[3:]"))


@sim_only  # (replays: as above)
def test_replays_of_one_graph_on_two_unordered_streams_run_one_after_another_but_two_graphs_race(checked):
    # The driver runs an executable graph's launches one at a time, each after the one made
    # before it, whatever their streams: what follows the second on its stream follows both.
    x, g, h = tp.ones(4), tp.cuda.CUDAGraph(), tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        x.mul_(2.0)
    with tp.cuda.graph(h):
        x.add_(1.0)
    main = tp.cuda.current_stream()
    a, b = _forked(main), _forked(main)
    g.replay(a)
    g.replay(b)
    with tp.cuda.stream(b):
        x.sub_(1.0)
    main.wait_stream(b)
    a.wait_stream(main)
    b.wait_stream(main)
    h.replay(b)
    with pytest.raises(tp.cuda.HazardError, match="^two operations touch the same memory with nothing") as e:
        g.replay(a)  # after g's last launch, not after h's
    assert e.value.first.startswith(f"replay of a CUDA graph on stream {b.handle:#x}")
    assert "of its kernel elementwise.add" in e.value.first
    assert e.value.second.startswith(f"replay of a CUDA graph on stream {a.handle:#x}")
    assert "of its kernel elementwise.mul" in e.value.second


@sim_only  # (a replay: as above)
def test_staged_launches_on_two_unordered_streams_run_one_after_another_but_not_after_replays(checked):
    # A staged graph holding the copies and a clone of the graph is an executable graph of its own:
    # its launches run one after another, but not after the graph's own replays.
    x, y = tp.ones(4), tp.zeros(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y.copy_(x * 2)
    main = tp.cuda.current_stream()
    a, b = _forked(main), _forked(main)
    g.stage_and_launch([x], [tp.full((4,), 3.0)], a)
    g.stage_and_launch([x], [tp.full((4,), 5.0)], b)
    c = _forked(main)
    with pytest.raises(tp.cuda.HazardError, match="^two operations touch the same memory with nothing") as e:
        g.replay(c)
    assert e.value.first.startswith(f"replay of a CUDA graph by stage_and_launch on stream {a.handle:#x}")
    assert e.value.second.startswith(f"replay of a CUDA graph on stream {c.handle:#x}")
    main.wait_stream(b)
    assert y.tolist() == [10.0] * 4
