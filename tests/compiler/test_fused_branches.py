"""A fused kernel of ``tp.compile`` whose tail computes a one-element bool flag
sets the handle of an if or if/else node opened on that flag right after it
(``kernels/conditional.set_branch``): the node then has no kernel of its own
before it. And a while node whose pass a fused kernel ended sets its handle
again at the pass's end only where work after that kernel may write its flag.
Each test compares the graph's results with the same steps run on the host.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import tensorplay as tp

SETTER, RECHECK = "conditional.set_from_flag", "conditional.loop_recheck"


def total_over(x, total, over):
    """One fused kernel: a sum of 2x, then the running total and its test in the tail."""
    total.add_((x * 2.0).sum())
    tp.gt(total, 10.0, out=over)


def _text(g: tp.cuda.CUDAGraph, tmp_path) -> str:
    return open(g.debug_dump(str(tmp_path / "g.dot"))).read()


def _branch_graph(between=None, second_if: bool = False, body=None):
    """(graph, x, total, over, out): ``total_over`` compiled, then ``if_else(over)``
    writing 1 or 2 into ``out`` (and, with ``second_if``, an ``if_(over)`` adding 10)."""
    body = body or tp.compile(total_over)
    x, total, over, out = tp.ones(64), tp.zeros(1), tp.zeros(1, dtype=tp.bool), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        body(x, total, over)
        if between is not None:
            between(x)
        with g.if_else(over) as choice:
            out.fill_(1.0)
            choice.else_()
            out.fill_(2.0)
        if second_if:
            with g.if_(over):
                out.add_(10.0)
    return g, x, total, over, out


@pytest.mark.parametrize("start", [-200.0, 0.0])  # the else body, then the then body
def test_an_if_else_on_the_flag_the_compiled_kernel_computed_last_has_no_kernel_of_its_own(start, tmp_path):
    g, x, total, over, out = _branch_graph()
    assert SETTER not in _text(g, tmp_path)
    for replay in range(3):  # the handle follows the flag at every replay
        total.fill_(start + 30.0 * replay)
        g.replay()
        host = start + 30.0 * replay + 128.0
        assert total.item() == host and over.item() == (host > 10.0)
        assert out.item() == (1.0 if host > 10.0 else 2.0)


def test_the_kernel_takes_a_handle_only_where_a_node_opens_on_its_flag():
    body = tp.compile(total_over)
    x, total, over = tp.ones(64), tp.zeros(1), tp.zeros(1, dtype=tp.bool)
    with tp.cuda.graph(tp.cuda.CUDAGraph()):
        body(x, total, over)  # no node on the flag: the kernel as compiled outside captures
    assert len(body.kernels()) == 1 and "branch" not in body.kernels()[0]
    _branch_graph(body=body)  # a node on it: its node's kernel sets the handle; eagerly, still the same kernel
    body(x, total, over)
    assert total.item() == 128.0 and over.item()


def test_work_between_the_kernel_and_the_node_leaves_the_node_its_own_kernel(tmp_path):
    g, x, total, over, out = _branch_graph(between=lambda x: x.mul_(2.0))
    assert SETTER in _text(g, tmp_path)
    total.fill_(-200.0)
    g.replay()  # x doubles after each sum: 128, then 256
    assert (total.item(), over.item(), out.item()) == (-72.0, False, 2.0)
    g.replay()
    assert (total.item(), over.item(), out.item()) == (184.0, True, 1.0)


def test_a_second_node_on_the_same_flag_sets_its_handle_with_a_kernel(tmp_path):
    g, x, total, over, out = _branch_graph(second_if=True)
    assert _text(g, tmp_path).count(SETTER) == 1
    for start, expected in ((-200.0, 2.0), (0.0, 11.0)):
        total.fill_(start)
        g.replay()
        assert out.item() == expected


def attempt(y, goal, step, accepted, go):
    """A step toward ``goal`` is accepted when it moves no more than 1; the loop goes on until y is there."""
    target = tp.minimum(y + step, goal)
    tp.le((target - y).abs().max(), 1.0, out=accepted)
    tp.logical_not(tp.logical_and(accepted, (goal - target).abs().max() == 0.0), out=go)


def accept(y, goal, step, counts):
    y.copy_(tp.minimum(y + step, goal))
    step.mul_(1.5)
    counts[0:1].add_(1)


def reject(step, counts):
    step.mul_(0.5)
    counts[1:2].add_(1)


def _host_steps(goal: float, step: float) -> tuple[float, int, int]:
    y, accepted, rejected = 0.0, 0, 0
    while True:
        target = min(y + step, goal)
        if abs(target - y) <= 1.0:
            y, step, accepted = target, step * 1.5, accepted + 1
            if y == goal:
                return y, accepted, rejected
        else:
            step, rejected = step * 0.5, rejected + 1


def _stepper(else_body=None):
    """A while node whose body is the compiled ``attempt``, then an if/else node
    of ``accept`` and ``reject`` (or ``else_body(state)``): Dormand-Prince's shape."""
    fns = [tp.compile(fn) for fn in (attempt, accept, reject)]
    y, goal, step = tp.zeros(32, dtype=tp.float64), tp.full((32,), 7.0, dtype=tp.float64), tp.zeros(1, dtype=tp.float64)
    accepted, go, counts = tp.zeros(1, dtype=tp.bool), tp.zeros(1, dtype=tp.bool), tp.zeros(2, dtype=tp.int64)
    state = (y, goal, step, accepted, go, counts)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        go.fill_(True)
        with g.while_(go, max_iters=1000) as loop:
            fns[0](y, goal, step, accepted, go)
            with g.if_else(accepted) as choice:
                fns[1](y, goal, step, counts)
                choice.else_()
                fns[2](step, counts) if else_body is None else else_body(state)
    return g, loop, state


def _run(g, state, first_step: float = 4.0) -> tuple[float, int, int]:
    y, goal, step, accepted, go, counts = state
    y.zero_()
    step.fill_(first_step)
    counts.zero_()
    g.replay()
    assert np.all(y.numpy() == y.numpy()[0])
    return float(y.numpy()[0]), *counts.numpy().tolist()


def test_an_adaptive_stepper_as_ops_has_no_kernels_beyond_its_compiled_ones(tmp_path):
    g, loop, state = _stepper()
    text = _text(g, tmp_path)
    assert SETTER not in text and RECHECK not in text and "conditional.loop_pass" not in text
    for first_step in (4.0, 0.25):
        y, accepted, rejected = _run(g, state, first_step)
        assert (y, accepted, rejected) == _host_steps(7.0, first_step)
        assert rejected > 0 and loop.iterations.item() == accepted + rejected


def test_a_body_that_writes_the_loops_flag_makes_the_loop_look_at_it_again(tmp_path):
    def reject_and_stop(state):  # the first rejection ends the loop
        y, goal, step, accepted, go, counts = state
        counts[1:2].add_(1)
        go.fill_(False)

    g, loop, state = _stepper(reject_and_stop)
    assert RECHECK in _text(g, tmp_path)
    y, accepted, rejected = _run(g, state, 4.0)
    assert (accepted, rejected) == (0, 1) and y == 0.0 and loop.iterations.item() == 1


def test_a_kernel_launched_numbas_way_in_a_body_makes_the_loop_look_at_its_flag_again(tmp_path):
    @cuda.jit
    def halve(step):
        step[0] *= 0.5

    def reject_numbas_way(state):
        y, goal, step, accepted, go, counts = state
        halve[1, 1, tp.cuda.current_stream()](step)  # tensorplay does not see what it touches
        counts[1:2].add_(1)

    g, loop, state = _stepper(reject_numbas_way)
    assert RECHECK in _text(g, tmp_path)
    assert _run(g, state, 4.0) == _host_steps(7.0, 4.0)


def test_the_hazard_check_passes_the_kernels_that_set_the_handles():
    g, loop, state = _stepper()
    tp.cuda.synchronize()
    with tp.cuda.sanitize(seed=3):
        result = _run(g, state, 4.0)
        tp.cuda.synchronize()
    assert result == _host_steps(7.0, 4.0)


def pick_case(x, index):
    """The switch's index in the tail: the sum of x, minus 10, as an int32."""
    index.copy_(((x * 1.0).sum() - 10.0).int().reshape(1))


@pytest.mark.parametrize("total", [10.0, 12.0, 15.0, 3.0])  # cases 0 and 2, then none: 5 and -7 are out of range
def test_a_switch_on_the_index_the_compiled_kernel_computed_last_has_no_kernel_of_its_own(total, tmp_path):
    body = tp.compile(pick_case)
    x, index, out = tp.zeros(8), tp.zeros(1, dtype=tp.int32), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        body(x, index)
        with g.switch_(index, 3) as cases:
            out.fill_(100.0)
            cases.next()
            out.fill_(101.0)
            cases.next()
            out.fill_(102.0)
    assert "conditional.set_from_index" not in _text(g, tmp_path)
    x.fill_(total / 8)
    out.fill_(-1.0)
    g.replay()
    case = int(total) - 10
    assert index.item() == case and out.item() == (100.0 + case if 0 <= case < 3 else -1.0)


def test_the_graphs_node_list_gives_the_kernel_the_node_runs():
    # set_args packs a node's arguments for the kernel g.nodes() names: after the swap, the variant's
    g, *_ = _branch_graph()
    fused_nodes = [n for n in g.nodes() if n.kernel.startswith("fused_")]
    assert len(fused_nodes) == 1
    assert "set_handle(node, " in fused_nodes[0]._launcher.kernel.tp_recipe[2][1]
