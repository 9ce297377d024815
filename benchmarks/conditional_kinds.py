"""If/else and switch nodes, and the cost of a while loop's cap: each node
kind repeated in one graph, replayed, time per node (or per pass): the median
of ``RUNS`` replays on every side (``common.wall_us``)."""

from __future__ import annotations

import contextlib
import statistics

import numpy as np

import tensorplay as tp
from benchmarks.common import wall_us
from benchmarks.conditional import _per_iteration_us, count_down, count_down_and_set
from benchmarks.targets import at_most, judge


def _per_node_us(graph, nodes: int) -> float:
    graph.replay()
    return wall_us(graph.replay, tp.cuda.synchronize, per=nodes)


def _graph(build, nodes: int):
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        for _ in range(nodes):
            build(g)
    return g


@tp.jit
def _case_from(handle, index):
    """The user's own kernel choosing a switch's case (here from a tensor, as the library's setter does)."""
    if tp.cuda.grid(1) == 0:
        tp.cuda.set_conditional(handle, np.uint32(index[0]))


def branches(rows: list, progress) -> None:
    """If/else as one node beside the two-if emulation (an if, a negation kernel,
    an if on the negation); a switch of 4 cases beside a single if node."""
    nodes = 100 if tp.cuda.backend() == "cuda" else 3
    x, flag, other, index = tp.zeros(1), tp.tensor([True]), tp.empty(1, dtype=tp.bool), tp.tensor([2])
    x.add_(1.0).sub_(1.0)
    tp.logical_not(flag, out=other)  # compile outside capture

    def if_else(g):
        with g.if_else(flag) as branch:
            x.add_(1.0)
            branch.else_()
            x.sub_(1.0)

    def two_ifs(g):
        with g.if_(flag):
            x.add_(1.0)
        tp.logical_not(flag, out=other)
        with g.if_(other):
            x.sub_(1.0)

    def switch(g):
        with g.switch_(index, 4) as cases:
            for case in range(4):
                if case:
                    cases.next()
                x.add_(float(case))

    def user_switch(g):  # the node's handle set by a kernel of the user's, which does work of its own
        handle = g.conditional_handle()
        _case_from[1, 1](handle, index)
        with g.switch_(handle, 4) as cases:
            for case in range(4):
                if case:
                    cases.next()
                x.add_(float(case))

    def single_if(g):
        with g.if_(flag):
            x.add_(2.0)

    builds = [("switch", switch), ("user switch", user_switch), ("if", single_if)]
    times = {name: _per_node_us(_graph(build, nodes), nodes) for name, build in builds}
    for taken in (True, False):
        flag.fill_(taken)
        times[f"if_else {taken}"] = _per_node_us(_graph(if_else, nodes), nodes)
        times[f"two_ifs {taken}"] = _per_node_us(_graph(two_ifs, nodes), nodes)
    for taken in (True, False):
        row = {
            "name": f"if/else node ({'then' if taken else 'else'} taken), replay GPU us per node "
            "(driver column: two if nodes and a negation kernel, as Warp and PyTorch emulate it)",
            "unit": "us",
            "lower_is_better": True,
            "tensorplay": times[f"if_else {taken}"],
            "driver": times[f"two_ifs {taken}"],
        }
        at_most(row, 1.0, of="driver", label="the emulation")
        rows.append(row)
    for name, what in (("switch", "switch node over 4 cases (case 2 taken), replay GPU us per node"),
                       ("user switch", "switch node over 4 cases set by the user's kernel (g.conditional_handle), "
                        "replay GPU us per node and kernel")):  # fmt: skip
        row = {
            "name": f"{what} (driver column: one if node and its flag kernel)",
            "unit": "us",
            "lower_is_better": True,
            "tensorplay": times[name],
            "driver": times["if"],
        }
        at_most(row, 1.1, of="driver", label="an if node")
        rows.append(row)
    progress.step("if/else and switch")


def loop_caps(rows: list, progress) -> None:
    """A while loop's cap: the flag loop's end-of-pass kernel counts and caps at
    no extra kernel; a do-while's cap adds one kernel per pass."""
    iters = 2000 if tp.cuda.backend() == "cuda" else 10
    n, flag = tp.zeros(1, dtype=tp.int32), tp.empty(1, dtype=tp.bool)
    count_down[1, 32](n, flag)
    graphs = {}
    for cap in (None, 10 * iters):
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            tp.gt(n, 0, out=flag)
            with g.while_(flag, max_iters=cap):
                count_down[1, 32](n, flag)
        graphs["flag", cap] = g
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            with g.while_(max_iters=cap) as loop:
                count_down_and_set[1, 32](n, loop)
        graphs["do-while", cap] = g
    for form in ("flag", "do-while"):
        capped, free = (_per_iteration_us(graphs[form, c], n, iters) for c in (10 * iters, None))
        row = {
            "name": f"while node ({form}, 1-kernel body) with max_iters, us per pass (driver column: no cap)",
            "unit": "us",
            "lower_is_better": True,
            "tensorplay": capped,
            "driver": free,
        }
        judge(row, capped - free <= 0.3, f"<= 0.3 us per pass more than no cap ({capped - free:+.2f} us here)")
        rows.append(row)
    progress.step("while caps")


def unrolled(rows: list, progress) -> None:
    """``while_(flag, unroll=k)``: a 2-kernel body (the work, then a kernel that
    counts down and writes the flag) per pass, against the same two kernels
    unrolled in a straight-line graph."""
    iters = 2000 if tp.cuda.backend() == "cuda" else 16
    x, n, flag = tp.zeros(1), tp.zeros(1, dtype=tp.int32), tp.empty(1, dtype=tp.bool)
    count_down[1, 32](n, flag)
    flat = tp.cuda.CUDAGraph()
    with tp.cuda.graph(flat):
        for _ in range(100):
            x.add_(1.0)
            count_down[1, 32](n, flag)
    reference = _per_iteration_us(flat, n, 100)
    for k in (1, 2, 4, 8):
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            tp.gt(n, 0, out=flag)
            with g.while_(flag, unroll=k):
                x.add_(1.0)
                count_down[1, 32](n, flag)
        row = {
            "name": f"while node with unroll={k}, 2-kernel body writing its flag, us/iter "
            "(driver column: the same two kernels unrolled in a graph)",
            "unit": "us",
            "lower_is_better": True,
            "tensorplay": _per_iteration_us(g, n, iters),
            "driver": reference,
        }
        at_most(row, 1.3, of="driver", label="unrolled")
        rows.append(row)
        del g
    progress.step("unrolled loops")


@contextlib.contextmanager
def _pass_kernel_without_cancel():
    """Captures in the block end a flag loop's pass with the kernel as it was
    before cancelling existed: the same work, without reading the cancel request."""
    from tensorplay.kernels import conditional as ck
    from tensorplay.runtime.backend import get as get_backend

    setter = get_backend().conditional_setter()

    def end_pass_unchecked(handle, flag, counter, cancel, max_iters):
        if tp.cuda.grid(1) == 0:
            passes = counter[0] + 1
            counter[0] = passes
            go = flag[0] != 0
            if go and passes >= max_iters:
                go = False
                counter[1] = 1
            setter(handle, np.uint32(1 if go else 0))

    today, unchecked = ck.loop_pass, ck._one_thread_kernel("loop_pass_unchecked", end_pass_unchecked)
    ck.loop_pass = lambda: unchecked
    try:
        yield
    finally:
        ck.loop_pass = today


def cancel_check(rows: list, progress) -> None:
    """What a loop's readiness to be cancelled costs a pass: the flag loop's
    end-of-pass kernel reads the graph's cancel request; beside it, the same
    loop whose end-of-pass kernel does not (the kernel before cancelling),
    sampled alike, in alternation."""
    iters = 5000 if tp.cuda.backend() == "cuda" else 10
    n, flag = tp.zeros(1, dtype=tp.int32), tp.empty(1, dtype=tp.bool)
    count_down[1, 32](n, flag)
    graphs = {}
    for checked in (True, False):
        with contextlib.nullcontext() if checked else _pass_kernel_without_cancel():
            g = tp.cuda.CUDAGraph()
            with tp.cuda.graph(g):
                tp.gt(n, 0, out=flag)
                with g.while_(flag):
                    count_down[1, 32](n, flag)
        graphs[checked] = g
    samples = {True: [], False: []}
    for _ in range(15 if tp.cuda.backend() == "cuda" else 2):
        for checked in (True, False):
            samples[checked].append(_per_iteration_us(graphs[checked], n, iters, runs=1))
    checked, unchecked = statistics.median(samples[True]), statistics.median(samples[False])
    row = {
        "name": "while node (flag, 1-kernel body) cancellable (its pass reads the cancel request), us per pass "
        "(driver column: the same pass without the read)",
        "unit": "us",
        "lower_is_better": True,
        "tensorplay": checked,
        "driver": unchecked,
    }
    judge(row, checked - unchecked <= 0.1, f"<= 0.1 us per pass more ({checked - unchecked:+.3f} us here)")
    rows.append(row)
    progress.step("while cancel check")


SECTIONS = [(branches, 1), (loop_caps, 1), (unrolled, 1), (cancel_check, 1)]
