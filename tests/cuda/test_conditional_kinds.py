"""If/else and switch nodes, and while loops with a cap and a pass counter,
checked against the same logic run on the host."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.runtime.backend import get as get_backend


def _no_capture_left():
    assert not tp.cuda.is_current_stream_capturing()
    assert not tp.cuda.capture_stream().is_capturing()
    assert tp.cuda.current_stream() is tp.cuda.default_stream()


def _still_usable():
    x = tp.ones(2)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        x.add_(1.0)
    g.replay()
    assert x.tolist() == [2.0, 2.0]


# -- if/else -----------------------------------------------------------------------------


def test_if_else_runs_one_body_chosen_at_replay():
    flag, x = tp.tensor([True]), tp.ones(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.if_else(flag) as branch:
            x.mul_(3.0)
            branch.else_()
            x.sub_(5.0)
        x.add_(1.0)
    expected = np.ones(4)
    for taken in (True, False, False, True):
        flag.fill_(taken)
        g.replay()
        expected = (expected * 3.0 if taken else expected - 5.0) + 1.0
        assert x.numpy().tolist() == expected.tolist()


def test_if_else_low_level_calls_and_one_node():
    flag, x = tp.tensor([False]), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        g.begin_capture_to_if_else_node(flag)
        x.fill_(1.0)
        g.begin_capture_to_next_conditional_body()
        x.fill_(2.0)
        g.end_capture_to_conditional_node()
    g.replay()
    assert x.item() == 2.0
    # the flag's kernel and one conditional node: no negation kernel, no second if node
    assert repr(g).endswith("2 nodes, pool=" + repr(g.pool_id) + ">")


# -- switch ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [tp.int32, tp.int64])
def test_switch_runs_the_case_of_the_index_and_none_outside(dtype):
    index, x = tp.zeros(1, dtype=dtype), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.switch_(index, 3) as cases:
            x.add_(1.0)
            cases.next()
            x.add_(10.0)
            cases.next()
            x.add_(100.0)
    values = [0, 1, 2, 3, -1, 7, 2, 0]
    if dtype is tp.int64:
        values += [2**32 + 1, -(2**32) + 1]  # outside [0, 3) though their low 32 bits are 1
    total = 0.0
    for v in values:
        index.fill_(v)
        g.replay()
        total += {0: 1.0, 1: 10.0, 2: 100.0}.get(v, 0.0)
        assert x.item() == total, v


def test_switch_of_one_case_and_a_user_kernel_reading_the_handle():
    index, x = tp.tensor([0]), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.switch_(index, 1) as cases:
            assert int(cases) == int(cases.conditional_handle) and cases.n == 1
            x.add_(1.0)
    g.replay()
    index.fill_(1)
    g.replay()
    assert x.item() == 1.0


@tp.jit
def _pick_case(handle, x, n):
    """Sets the switch's value from x[0] on the device: case x[0] mod n."""
    if tp.cuda.grid(1) == 0:
        tp.cuda.set_conditional(handle, np.uint32(int(x[0]) % n))


def test_a_switch_set_by_your_own_kernel_runs_the_case_it_chose():
    x, out = tp.tensor([0.0]), tp.zeros(3)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        case = g.conditional_handle()
        _pick_case[1, 1](case, x, 3)
        with g.switch_(case, 3) as cases:
            for i in range(3):
                out[i : i + 1].add_(1.0)
                if i < 2:
                    cases.next()
        x.add_(1.0)
    expect = np.zeros(3)
    for step in range(7):  # the host's model: case step % 3 runs
        g.replay()
        expect[step % 3] += 1
    np.testing.assert_array_equal(out.numpy(), expect)
    assert repr(case).startswith("<tensorplay.cuda.Handle handle=0x")


@tp.jit
def _set_if_positive(handle, x):
    if tp.cuda.grid(1) == 0 and x[0] > 0:
        tp.cuda.set_conditional(handle, np.uint32(1))


@pytest.mark.parametrize("default", [0, 1])
def test_a_handle_starts_each_replay_at_its_default(default):
    """The kernel sets the handle only when x > 0; otherwise the node sees the default, at every replay."""
    x, hits = tp.tensor([1.0]), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        flag = g.conditional_handle(default=default)
        _set_if_positive[1, 1](flag, x)
        with g.if_else(flag) as branch:
            hits.add_(1.0)
            branch.else_()
            hits.add_(100.0)
    g.replay()  # x > 0: then-body
    x.fill_(-1.0)
    g.replay()  # the kernel sets nothing: the default decides, not the last replay's 1
    assert hits.item() == (2.0 if default else 101.0)


def test_a_handle_inside_a_while_body_picks_a_case_per_pass():
    x, total, go = tp.tensor([0.0]), tp.zeros(1), tp.tensor([True])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(go, max_iters=5) as loop:
            case = g.conditional_handle()
            _pick_case[1, 1](case, x, 2)
            with g.switch_(case, 2) as cases:
                total.add_(1.0)
                cases.next()
                total.add_(10.0)
            x.add_(1.0)
    g.replay()
    assert loop.iterations.item() == 5 and loop.hit_limit
    assert total.item() == 1 + 10 + 1 + 10 + 1


@pytest.mark.parametrize(
    "misuse, err, msg",
    [
        ("twice", ValueError, "already belongs to a node"),
        ("level", ValueError, "another level of the capture"),
        ("while", TypeError, "while node takes a flag"),
        ("default", ValueError, "default as an int"),
    ],
)
def test_misused_handles_are_refused_and_no_capture_is_left(misuse, err, msg):
    x, flag = tp.zeros(1), tp.tensor([True])
    g = tp.cuda.CUDAGraph()
    g.capture_begin()
    with pytest.raises(err, match=msg + ".*the capture was discarded"):
        if misuse == "default":
            g.conditional_handle(default=-1)
        handle = g.conditional_handle()
        if misuse == "twice":
            g.begin_capture_to_if_node(handle)
            x.add_(1.0)
            g.end_capture_to_conditional_node()
            g.begin_capture_to_if_node(handle)
        elif misuse == "level":
            g.begin_capture_to_if_node(flag)
            g.begin_capture_to_switch_node(handle, 2)
        else:
            g.begin_capture_to_while_node(handle)
    _no_capture_left()
    _still_usable()


def test_a_handle_of_an_earlier_capture_is_refused():
    g, x = tp.cuda.CUDAGraph(), tp.zeros(1)
    with pytest.raises(KeyError):  # the capture's body fails: the capture is discarded
        with tp.cuda.graph(g):
            old = g.conditional_handle()
            raise KeyError("a failing body")
    with pytest.raises(ValueError, match="earlier capture"):
        with tp.cuda.graph(g):
            with g.if_(old):
                x.add_(1.0)
    _no_capture_left()
    _still_usable()


def test_a_handle_no_node_took_is_refused_at_capture_end():
    g, x = tp.cuda.CUDAGraph(), tp.zeros(1)
    with pytest.raises(ValueError, match="1 handle.*that no node took"):
        with tp.cuda.graph(g):
            g.conditional_handle()
            x.add_(1.0)
    _no_capture_left()
    with tp.cuda.graph(g):  # the graph was left empty: it captures again
        x.add_(1.0)
    g.replay()
    assert x.item() == 1.0
    _still_usable()


# -- while: cap and counter ----------------------------------------------------------------------


def test_a_capped_loop_stops_at_its_cap_and_says_so():
    flag, x = tp.tensor([True]), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag, max_iters=7) as loop:
            x.add_(1.0)  # the flag never turns false: a runaway loop without the cap
    g.replay()
    tp.cuda.synchronize()
    assert x.item() == 7.0
    assert loop.iterations.item() == 7 and loop.hit_limit
    assert g.hit_limits() == [loop]
    assert "max_iters=7" in repr(loop)


@pytest.mark.parametrize("start", [0, 1, 5, 6, 9])
def test_a_capped_loop_that_ends_by_itself_counts_its_passes(start):
    n, flag, acc = tp.tensor([start]), tp.tensor([start > 0]), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag, max_iters=6) as loop:
            acc.add_(n)
            n.sub_(1)
            tp.gt(n, 0, out=flag)
    g.replay()
    passes = min(start, 6)
    assert loop.iterations.item() == passes
    assert loop.hit_limit == (start > 6)
    assert acc.item() == sum(range(start, start - passes, -1))
    assert g.hit_limits() == ([loop] if start > 6 else [])


def test_the_counter_restarts_at_every_replay_and_a_zero_cap_runs_nothing():
    flag, x = tp.tensor([True]), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag, max_iters=0) as never:
            x.add_(1.0)
        with g.while_(flag, max_iters=3) as three:
            x.add_(10.0)
    for replays in (1, 2):
        g.replay()
        assert x.item() == 30.0 * replays
        assert never.iterations.item() == 0 and never.hit_limit
        assert three.iterations.item() == 3 and three.hit_limit
    flag.fill_(False)
    g.replay()
    assert (never.hit_limit, three.hit_limit, three.iterations.item()) == (False, False, 0)


def test_an_uncapped_loop_counts_too():
    n, flag = tp.tensor([4]), tp.tensor([True])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag) as loop:
            n.sub_(1)
            tp.gt(n, 0, out=flag)
    g.replay()
    assert loop.iterations.item() == 4 and not loop.hit_limit and loop.max_iters is None


@tp.jit
def always_again(x, loop):
    if tp.cuda.grid(1) == 0:
        x[0] += 1.0
        tp.cuda.set_conditional(loop, np.uint32(1))


def test_a_capped_do_while_stops_whatever_its_kernel_sets():
    x = tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(max_iters=5) as loop:
            always_again[1, 1](x, loop)  # the loop object goes where a handle does
    g.replay()
    assert x.item() == 5.0 and loop.iterations.item() == 5 and loop.hit_limit


@tp.jit
def count_down(n, loop):
    if tp.cuda.grid(1) == 0:
        n[0] -= 1
        tp.cuda.set_conditional(loop, np.uint32(1 if n[0] > 0 else 0))


def test_an_uncapped_do_while_counts_its_passes_too():
    g = tp.cuda.CUDAGraph()
    n = tp.tensor([3], dtype=tp.int32)
    with tp.cuda.graph(g):
        with g.while_() as loop:
            count_down[1, 1](n, loop)
    g.replay()
    assert n.item() == 0
    assert loop.iterations.item() == 3 and not loop.hit_limit and g.hit_limits() == []
    assert not loop.cancelled and g.cancelled() == []


def test_reset_lets_go_of_the_loop_counters_but_not_of_one_you_hold():
    flag, x = tp.tensor([True]), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag, max_iters=2) as loop:
            x.add_(1.0)
    g.replay()
    iterations = loop.iterations
    with pytest.raises(RuntimeError, match=r"reset\(\) while 1 tensor"):
        g.reset()  # the counter is in the graph's pool, as every tensor of the capture
    assert iterations.item() == 2 and loop.iterations.item() == 2  # nothing changed
    del iterations
    g.reset()
    assert loop.iterations is None


# -- nested combinations, against the host ----------------------------------------------------------


def test_switch_inside_a_while_loop():
    """Each pass runs the case i % 3 for i = 0, 1, ...: the host does the same."""
    i, flag, index, acc = tp.zeros(1, dtype=tp.int64), tp.tensor([True]), tp.zeros(1, dtype=tp.int64), tp.zeros(3)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag, max_iters=50) as loop:
            index.copy_(i % 3)
            with g.switch_(index, 3) as cases:
                acc[0:1].add_(1.0)
                cases.next()
                acc[1:2].add_(i)
                cases.next()
                acc[2:3].sub_(1.0)
            i.add_(1)
            tp.lt(i, 10, out=flag)
    g.replay()
    host = np.zeros(3)
    for k in range(10):
        host[k % 3] += {0: 1.0, 1: k, 2: -1.0}[k % 3]
    assert acc.numpy().tolist() == host.tolist()
    assert loop.iterations.item() == 10 and not loop.hit_limit


def test_if_else_inside_a_switch_and_a_capped_while_inside_an_if():
    index, flag, inner, x = tp.tensor([1]), tp.tensor([True]), tp.tensor([True]), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.switch_(index, 2) as cases:
            x.add_(1000.0)
            cases.next()
            with g.if_else(flag) as branch:
                x.add_(1.0)
                branch.else_()
                x.sub_(1.0)
        with g.if_(flag):
            with g.while_(inner, max_iters=4) as loop:
                x.mul_(2.0)
    cases_host = {0: lambda v, f: v + 1000.0, 1: lambda v, f: v + 1.0 if f else v - 1.0}
    host, ran = 0.0, False
    for k, f in [(1, True), (1, False), (0, True), (2, False), (1, True)]:
        index.fill_(k)
        flag.fill_(f)
        g.replay()
        host = cases_host.get(k, lambda v, f: v)(host, f)
        if f:
            host *= 2.0**4
        assert x.item() == host, (k, f)
        ran = ran or f
        assert loop.hit_limit == ran  # its last run hit the cap; a replay that skips it leaves its counter


def test_dot_labels_the_bodies():
    if tp.cuda.backend() != "sim":
        pytest.skip("the driver writes its own DOT labels")
    flag, index, x = tp.tensor([True]), tp.tensor([0]), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.if_else(flag) as branch:
            x.add_(1.0)
            branch.else_()
            x.sub_(1.0)
        with g.switch_(index, 2) as cases:
            x.add_(2.0)
            cases.next()
            x.add_(3.0)
    text = g.dot()
    for label in ("if/else", ": then", ": else", "switch", ": case 0", ": case 1"):
        assert label in text


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, arg, extra, err, msg",
    [
        ("switch", lambda: tp.tensor([1.0]), 2, TypeError, "int32 or int64 tensor"),
        ("switch", lambda: tp.tensor([1, 2]), 2, ValueError, r"one-element.*\(2,\)"),
        ("switch", lambda: np.array([1]), 2, TypeError, "device tensor"),
        ("switch", lambda: tp.tensor([1]), 0, ValueError, "from 1 to 2\\*\\*32 - 1"),
        ("if_else", lambda: tp.tensor([1]), None, TypeError, "bool tensor"),
        ("while", lambda: tp.tensor([True]), -1, ValueError, "max_iters"),
        ("while", lambda: tp.tensor([True]), 2.5, ValueError, "max_iters"),
    ],
)
def test_bad_node_arguments_are_refused_and_no_capture_is_left(kind, arg, extra, err, msg):
    x, pred = tp.zeros(1), arg()
    g = tp.cuda.CUDAGraph()
    g.capture_begin()
    x.add_(1.0)
    with pytest.raises(err, match=msg + ".*the capture was discarded"):
        if kind == "switch":
            g.begin_capture_to_switch_node(pred, extra)
        elif kind == "if_else":
            g.begin_capture_to_if_else_node(pred)
        else:
            g.begin_capture_to_while_node(pred, max_iters=extra)
    _no_capture_left()
    _still_usable()


def test_a_body_past_the_last_and_bodies_left_unopened_are_refused():
    flag, x, index = tp.tensor([True]), tp.zeros(1), tp.tensor([0])
    g = tp.cuda.CUDAGraph()
    g.capture_begin()
    g.begin_capture_to_if_else_node(flag)
    g.begin_capture_to_next_conditional_body()
    with pytest.raises(RuntimeError, match="already capturing its else-body"):
        g.begin_capture_to_next_conditional_body()
    _no_capture_left()
    g = tp.cuda.CUDAGraph()
    g.capture_begin()
    g.begin_capture_to_switch_node(index, 3)
    x.add_(1.0)
    g.begin_capture_to_next_conditional_body()
    with pytest.raises(RuntimeError, match="1 of the switch node's 3 bodies never opened"):
        g.end_capture_to_conditional_node()
    _no_capture_left()
    g = tp.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="only body"):
        with tp.cuda.graph(g):
            with g.if_(flag):
                g.begin_capture_to_next_conditional_body()
    _no_capture_left()
    with pytest.raises(RuntimeError, match="without an open conditional node"):
        g.begin_capture_to_next_conditional_body()
    _still_usable()


@pytest.mark.parametrize("kind", ["if_else", "switch"])
def test_an_older_driver_is_named(monkeypatch, kind):
    if tp.cuda.backend() != "sim":
        pytest.skip("the simulator pretends an older driver")
    monkeypatch.setattr(get_backend(), "pretend_driver_version", 12040)
    flag, index = tp.tensor([True]), tp.tensor([0])
    g = tp.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=r"need a CUDA 12\.8 or newer driver \(this one is 12\.4\)"):
        with tp.cuda.graph(g):
            if kind == "if_else":
                g.begin_capture_to_if_else_node(flag)
            else:
                g.begin_capture_to_switch_node(index, 2)
    _no_capture_left()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):  # if and while nodes need only 12.4
        with g.while_(~flag):
            pass


# -- unrolled loops ------------------------------------------------------------------------------


@pytest.mark.parametrize("unroll", [2, 3, 4, 8])
def test_an_unrolled_loop_ends_on_every_residue_with_exact_counts(unroll):
    """Loops of 0 to 2k + 1 passes: every residue mod k, ending mid-pass or at its end."""
    n, flag, acc, x = tp.zeros(1, dtype=tp.int64), tp.empty(1, dtype=tp.bool), tp.zeros(1), tp.zeros(3)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        tp.gt(n, 0, out=flag)
        with g.while_(flag, unroll=unroll) as loop:
            acc.add_(n)
            x.mul_(0.5).add_(1.0)
            n.sub_(1)
            tp.gt(n, 0, out=flag)
    for start in range(2 * unroll + 2):
        n.fill_(start)
        acc.zero_()
        x.zero_()
        g.replay()
        host_x = 0.0
        for _ in range(start):
            host_x = host_x * 0.5 + 1.0
        assert loop.iterations.item() == start and not loop.hit_limit, start
        assert acc.item() == start * (start + 1) // 2, start
        assert x.numpy().tolist() == [np.float32(host_x)] * 3, start
        assert n.item() == 0


@pytest.mark.parametrize("cap", [0, 1, 3, 4, 5, 9])
def test_an_unrolled_loop_keeps_its_cap(cap):
    flag, x = tp.tensor([True]), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag, max_iters=cap, unroll=4) as loop:
            x.add_(1.0)
    for replay in (1, 2):
        g.replay()
        assert x.item() == cap * replay and loop.iterations.item() == cap and loop.hit_limit


def test_unroll_is_refused_where_it_cannot_work():
    flag = tp.tensor([True])
    for kwargs, msg in [
        ({"unroll": 0}, "unroll as an int from 1 to 8"),
        ({"unroll": 9}, "unroll as an int from 1 to 8"),
        ({"pred": None, "unroll": 2}, "unroll needs a flag"),
    ]:
        g = tp.cuda.CUDAGraph()
        with pytest.raises(ValueError, match=msg):
            with tp.cuda.graph(g):
                with g.while_(**{"pred": flag, **kwargs}):
                    pass
        _no_capture_left()
    g = tp.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="inside a while loop with unroll > 1.*the capture was discarded"):
        with tp.cuda.graph(g):
            with g.while_(flag, unroll=2):
                with g.if_(flag):
                    pass
    _no_capture_left()
    _still_usable()
