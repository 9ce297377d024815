"""Conditional graph nodes (if, while, nested), set from device flags."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.runtime.backend import get as get_backend


def _no_capture_left():
    assert not tp.cuda.graphs.is_current_stream_capturing()
    assert not tp.cuda.capture_stream().is_capturing()


@pytest.mark.parametrize("taken", [True, False])
def test_if_node_runs_its_body_only_when_the_flag_holds(taken):
    x = tp.ones(8)
    flag = tp.tensor([taken])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        g.begin_capture_to_if_node(flag)
        x.mul_(3.0)
        g.end_capture_to_conditional_node()
        x.add_(1.0)
    g.replay()
    assert x.numpy().tolist() == [4.0 if taken else 2.0] * 8
    flag.fill_(not taken)  # the flag is read at replay time, not capture time
    g.replay()
    expected = (4.0 + 1.0) if taken else (2.0 * 3.0 + 1.0)
    assert x.numpy().tolist() == [expected] * 8


def _countdown_graph(n, acc, flag):
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        tp.gt(n, 0, out=flag)
        with g.while_(flag):
            acc.add_(1.0)
            n.sub_(1)
            tp.gt(n, 0, out=flag)
    return g


@pytest.mark.parametrize("start", [5, 1, 0])
def test_while_counts_down_from_n(start):
    n, acc, flag = tp.tensor([start], dtype=tp.int32), tp.zeros(1), tp.empty(1, dtype=tp.bool)
    g = _countdown_graph(n, acc, flag)
    assert acc.item() == 0.0  # nothing ran during capture
    g.replay()
    assert (acc.item(), n.item()) == (float(start), 0)
    n.fill_(7)
    g.replay()
    assert (acc.item(), n.item()) == (float(start + 7), 0)


def test_if_inside_while_with_set_conditional_handle_for_current_node():
    # count k = 6 .. 1; add k to acc when k is even: 6 + 4 + 2
    k, acc = tp.tensor([6], dtype=tp.int64), tp.zeros(1, dtype=tp.int64)
    go = tp.tensor([True])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        g.begin_capture_to_while_node(go)
        even = (k % 2) == 0
        g.begin_capture_to_if_node(even)
        acc.add_(k)
        g.end_capture_to_conditional_node()
        k.sub_(1)
        g.set_conditional_handle_for_current_node(k > 0)
        g.end_capture_to_conditional_node()
    g.replay()
    assert (acc.item(), k.item()) == (12, 0)


def test_while_inside_while():
    i, j = tp.zeros(1, dtype=tp.int32), tp.zeros(1, dtype=tp.int32)
    acc = tp.zeros(1)
    outer, inner = tp.tensor([True]), tp.empty(1, dtype=tp.bool)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(outer):
            j.zero_()
            tp.lt(j, 4, out=inner)
            with g.while_(inner):
                acc.add_(1.0)
                j.add_(1)
                tp.lt(j, 4, out=inner)
            i.add_(1)
            tp.lt(i, 3, out=outer)
    g.replay()
    assert (acc.item(), i.item(), j.item()) == (12.0, 3, 4)


def test_convergence_loop_matches_a_host_loop():
    """x <- 0.5 x + 1 converges to 2; stop when |x - 2| <= tol (each element)."""
    rng = np.random.default_rng(0)
    x0 = rng.uniform(-50, 50, 6).astype(np.float64)
    tol = 1e-6
    # host reference, float64
    ref, iters = x0.copy(), 0
    while np.abs(ref - 2).max() > tol:
        ref = 0.5 * ref + 1
        iters += 1
    x = tp.tensor(x0)
    count = tp.zeros(1, dtype=tp.int32)
    flag = tp.empty(1, dtype=tp.bool)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        tp.gt((x - 2.0).abs().max(), tol, out=flag)
        with g.while_(flag):
            x.mul_(0.5)
            x.add_(1.0)
            count.add_(1)
            residual = (x - 2.0).abs().max()  # a temporary from the graph's pool
            tp.gt(residual, tol, out=flag)
    g.replay()
    assert count.item() == iters
    np.testing.assert_allclose(x.numpy(), ref, rtol=0, atol=1e-12)
    assert residual.item() <= tol


def test_logical_ops_into_an_existing_flag():
    a, b = tp.tensor([3.0]), tp.tensor([5.0])
    flag = tp.empty(1, dtype=tp.bool)
    tp.logical_and(tp.lt(a, b), tp.gt(b, 4.0), out=flag)
    assert flag.item() is True
    tp.logical_or(tp.gt(a, b), tp.logical_not(flag), out=flag)
    assert flag.item() is False


def test_misuse():
    g = tp.cuda.CUDAGraph()
    flag = tp.tensor([True])
    with pytest.raises(RuntimeError, match="needs a capture in progress"):
        g.begin_capture_to_while_node(flag)
    with pytest.raises(RuntimeError, match="without an open conditional node"):
        with tp.cuda.graph(g):
            g.end_capture_to_conditional_node()
    _no_capture_left()
    for bad, err, msg in [
        (tp.tensor([1.0]), TypeError, "bool tensor as predicate, got tensorplay.float32"),
        (tp.tensor([True, False]), ValueError, r"one-element predicate, got shape \(2,\)"),
        (np.array([True]), TypeError, "one-element bool device tensor"),
    ]:
        g = tp.cuda.CUDAGraph()
        with pytest.raises(err, match=msg):
            with tp.cuda.graph(g):
                g.begin_capture_to_if_node(bad)
        _no_capture_left()


@pytest.mark.parametrize("misuse", ["readback", "synchronize"])
def test_a_host_wait_inside_a_nested_body_is_refused_and_the_runtime_stays_usable(misuse):
    # Refused before it reaches the driver, so the capture can still be ended
    # (an invalidated one with an open body could not be).
    x, outer, inner = tp.ones(4), tp.tensor([True]), tp.tensor([True])
    g = tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.CaptureError, match="capturing"):
        with tp.cuda.graph(g):
            with g.while_(outer):
                with g.if_(inner):
                    x.add_(1.0)
                    x.numpy() if misuse == "readback" else tp.cuda.synchronize()
    _no_capture_left()
    g2 = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g2):
        with g2.if_(inner):
            x.add_(1.0)
    g2.replay()
    assert x.tolist() == [2.0] * 4


def test_unclosed_node_at_capture_end_discards_the_capture():
    x, stop = tp.ones(4), tp.tensor([False])
    g = tp.cuda.CUDAGraph()
    s = tp.cuda.Stream()
    with tp.cuda.stream(s):
        g.capture_begin()
        g.begin_capture_to_while_node(stop)
        x.add_(1.0)
        with pytest.raises(RuntimeError, match="1 conditional node.*still open"):
            g.capture_end()
    assert tp.cuda.current_stream() is tp.cuda.default_stream()
    assert not s.is_capturing()
    g2 = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g2):
        x.add_(1.0)
    g2.replay()
    assert x.numpy().tolist() == [2.0] * 4


def test_dot_shows_the_body(tmp_path):
    n, acc, flag = tp.tensor([2], dtype=tp.int32), tp.zeros(1), tp.empty(1, dtype=tp.bool)
    g = _countdown_graph(n, acc, flag)
    text = open(g.debug_dump(str(tmp_path / "w.dot"))).read()
    assert "conditional.loop_start" in text and "conditional.loop_pass" in text
    assert "elementwise.sub_as_flat" in text


@tp.jit
def count_down(n, handle):
    """One kernel is the whole loop test: n -= 1, go on while n > 0."""
    if tp.cuda.grid(1) == 0:
        n[0] -= 1
        tp.cuda.set_conditional(handle, np.uint32(1 if n[0] > 0 else 0))


@pytest.mark.parametrize("start, passes", [(5, 5), (1, 1), (0, 1)])  # a do-while runs at least once
def test_do_while_driven_by_a_custom_kernel(start, passes):
    n, acc = tp.tensor([start], dtype=tp.int32), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_() as handle:
            acc.add_(1.0)
            count_down[1, 1](n, handle)
    g.replay()
    assert acc.item() == passes
    n.fill_(3)
    g.replay()  # the condition starts over at every launch
    assert acc.item() == passes + 3


def test_do_while_nested_in_a_while_restarts_every_outer_pass():
    i, n, acc = tp.zeros(1, dtype=tp.int32), tp.zeros(1, dtype=tp.int32), tp.zeros(1)
    outer = tp.tensor([True])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(outer):
            n.fill_(4)
            with g.while_() as handle:
                acc.add_(1.0)
                count_down[1, 1](n, handle)
            i.add_(1)
            tp.lt(i, 3, out=outer)
    g.replay()
    assert (acc.item(), i.item()) == (12.0, 3)


def test_a_kernel_first_used_inside_a_body_compiles_without_breaking_the_capture():
    # Compiling and loading a kernel inside a global-mode capture invalidated
    # it on the H200 unless done in relaxed mode.
    @tp.jit
    def triple_first(x):
        if tp.cuda.grid(1) == 0:
            x[0] *= 3.0

    x, flag = tp.ones(1), tp.tensor([True])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag):
            triple_first[1, 32](x)
            tp.lt(x, 50.0, out=flag)
    g.replay()
    assert x.item() == 81.0


_INVALIDATE_IN_A_BODY = """
import os
import tensorplay as tp
from tensorplay.runtime.backend import get
flag, x = tp.tensor([True]), tp.ones(4)
g = tp.cuda.CUDAGraph()
try:
    with tp.cuda.graph(g):
        with g.while_(flag):
            x.add_(1.0)
            get().synchronize()  # past the host-wait pre-check, straight to the driver
except tp.cuda.CaptureError as e:
    print("CaptureError:", e, flush=True)
os._exit(0)  # a GPU process is left unable to synchronize: skip the teardown
"""


def test_an_invalidation_inside_a_body_does_not_crash_the_process():
    # On the H200 ending such a capture crashed the interpreter; in a child
    # process, so that the GPU one left behind does not matter.
    proc = subprocess.run([sys.executable, "-c", _INVALIDATE_IN_A_BODY], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "CaptureError: the capture on stream" in proc.stdout and "restart Python" in proc.stdout, proc.stdout


@pytest.mark.skipif(tp.cuda.backend() != "sim", reason="leaves the GPU process unable to synchronize")
def test_an_invalidation_inside_a_body_is_a_clear_error_not_a_crash():
    flag, x = tp.tensor([True]), tp.ones(4)
    g = tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.CaptureError, match="inside the body of a conditional node.*restart Python"):
        with tp.cuda.graph(g):
            with g.while_(flag):
                x.add_(1.0)
                get_backend().synchronize()  # past the host-wait pre-check, straight to the driver
    assert not tp.cuda.is_current_stream_capturing()
    g2 = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g2):  # a fresh side stream
        x.add_(1.0)
    g2.replay()
    assert x.tolist() == [2.0] * 4


def test_a_while_node_keeps_its_flag_alive_after_the_caller_drops_it():
    # The flag is read at every replay: dropped by the caller, it must not be freed and its memory reused.
    x = tp.zeros(1)

    def capture():
        go = tp.ones(1, dtype=tp.bool)
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            with g.while_(go, max_iters=3):
                x.add_(1.0)
        return g

    g = capture()
    junk = tp.zeros(64, dtype=tp.bool)  # would take the flag's memory were it freed
    g.replay()
    assert x.item() == 3.0 and not junk.any().item()


def test_the_with_forms_name_themselves_in_their_errors():
    g, flag, index = tp.cuda.CUDAGraph(), tp.tensor([True]), tp.tensor([0], dtype=tp.int32)
    for opening in (lambda: g.while_(flag), lambda: g.if_(flag), lambda: g.if_else(flag), lambda: g.switch_(index, 2)):
        with pytest.raises(
            RuntimeError, match=r"^g\.\w+\(\) needs a capture in progress: use it inside `with tp\.cuda\.graph"
        ):
            with opening():
                pass
    with pytest.raises(
        RuntimeError, match=r"^cases\.next\(\) on a switch node already capturing the last of its 2 cases"
    ):
        with tp.cuda.graph(g):
            with g.switch_(index, 2) as cases:
                cases.next()
                cases.next()
    _no_capture_left()
    with pytest.raises(
        RuntimeError, match=r"if_else\(\.\.\.\)` block with 1 of .* never opened; open each with branch\.else_\(\)"
    ):
        with tp.cuda.graph(g):
            with g.if_else(flag):
                pass
    _no_capture_left()
    assert (tp.ones(2) + 1).tolist() == [2.0, 2.0]


def test_a_node_opened_on_a_graph_that_is_not_the_one_capturing_says_so():
    g, other, flag = tp.cuda.CUDAGraph(), tp.cuda.CUDAGraph(), tp.tensor([True])
    with pytest.raises(RuntimeError, match=r"on a graph that is not capturing, while another graph is"):
        with tp.cuda.graph(g):
            with other.if_(flag):
                pass
    _no_capture_left()


# -- nodes among forked streams, compiled functions and errors -------------------------------------


def test_a_node_opened_on_a_forked_stream_follows_that_streams_work():
    x, flag, y = tp.tensor([1.0]), tp.tensor([False]), tp.zeros(1)
    side = tp.cuda.Stream()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        main = tp.cuda.current_stream()
        side.wait_stream(main)
        with tp.cuda.stream(side):
            tp.gt(x, 0.0, out=flag)  # the flag is written on the forked stream
            with g.if_(flag):
                y.add_(1.0)
            y.add_(10.0)  # after the node, on the same stream
        main.wait_stream(side)
    edges = get_backend().graph_edges(g._graph)  # the flag's kernel, the node's setter, the node, the add: a chain
    assert len({a for a, _ in edges} - {b for _, b in edges}) == 1, edges  # one root: no setter racing the flag
    g.replay()
    tp.cuda.synchronize()
    assert y.item() == 11.0
    _no_capture_left()


def test_a_flag_given_to_set_conditional_handle_is_kept_alive_by_the_graph():
    import gc

    flag, n = tp.tensor([True]), tp.zeros(1)
    g = tp.cuda.CUDAGraph()

    def capture():
        stop = tp.tensor([False])  # the caller's only reference ends with this function
        with tp.cuda.graph(g):
            with g.while_(flag, max_iters=10) as loop:
                n.add_(1.0)
                g.set_conditional_handle_for_current_node(stop)
        return loop

    loop = capture()
    gc.collect()
    others = [tp.ones(1, dtype=tp.bool) for _ in range(8)]  # would take the flag's memory if it were freed
    g.replay()
    assert loop.iterations.item() == 1 and n.item() == 1.0 and not loop.hit_limit
    del others


def test_nodes_opened_inside_a_compiled_function_capture_their_bodies():
    flag, x, y = tp.tensor([False]), tp.ones(4), tp.zeros(4)
    g = tp.cuda.CUDAGraph()

    @tp.compile
    def step(x, y, flag):
        with g.if_(flag):
            y.add_(x * 3.0)
        x.add_(1.0)

    with tp.cuda.graph(g):
        step(x, y, flag)
    assert y.tolist() == [0.0] * 4 and x.tolist() == [1.0] * 4  # nothing ran while capturing
    flag.fill_(True)
    g.replay()
    assert y.tolist() == [3.0] * 4 and x.tolist() == [2.0] * 4
    flag.fill_(False)
    g.replay()
    assert y.tolist() == [3.0] * 4 and x.tolist() == [3.0] * 4

    a, pick = tp.zeros(2), tp.tensor([True])
    g2 = tp.cuda.CUDAGraph()

    @tp.compile
    def branchy(a, pick):
        with g2.if_else(pick) as branch:
            a.add_(a + 1.0)
            branch.else_()
            a.sub_(a + 1.0)

    with tp.cuda.graph(g2):
        branchy(a, pick)
    assert a.tolist() == [0.0, 0.0]
    g2.replay()
    assert a.tolist() == [1.0, 1.0]
    pick.fill_(False)
    g2.replay()
    assert a.tolist() == [-1.0, -1.0]
    _no_capture_left()


def test_a_handle_set_after_a_fused_pass_end_still_obeys_the_cap():
    @tp.compile
    def step(x, flag, limit):
        x.add_(1.0)
        tp.lt(x.sum(), limit, out=flag)  # a fused kernel whose tail computes the flag: it ends the pass

    x, flag, limit, keep = tp.zeros(4), tp.tensor([True]), tp.tensor([1e6]), tp.tensor([True])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag, max_iters=5) as loop:
            step(x, flag, limit)
            tp.lt(x.sum(), 40.0, out=keep)  # holds for 10 passes
            g.set_conditional_handle_for_current_node(keep)
    g.replay()
    assert loop.iterations.item() == 5 and loop.hit_limit and x.tolist() == [5.0] * 4
    keep_going = tp.tensor([True])
    g2 = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g2):
        with g2.while_(flag, max_iters=3) as loop2:
            step(x, flag, limit)
            g2.set_conditional_handle_for_current_node(keep_going)
    x.zero_()
    g2.replay()
    assert loop2.iterations.item() == 3 and loop2.hit_limit


def test_a_node_body_that_raises_discards_the_capture_and_says_so():
    flag, n = tp.tensor([True]), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    g.capture_begin()
    with pytest.raises(ValueError, match="^a bad input$"):  # the error as raised
        with g.while_(flag, max_iters=3):
            n.add_(1.0)
            raise ValueError("a bad input")
    _no_capture_left()
    n.add_(1.0)  # eager again
    assert n.item() == 1.0
    with pytest.raises(RuntimeError, match="discarded, as the body of g.while_\\(\\) raised ValueError"):
        g.capture_end()
    with tp.cuda.graph(g):  # the graph captures again
        n.add_(1.0)
    g.replay()
    assert n.item() == 2.0


def test_a_branch_acts_only_on_its_own_open_node():
    fa, fb, x, y = tp.tensor([True]), tp.tensor([True]), tp.zeros(1), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="branch.else_\\(\\) of a node that is closed"):
        with tp.cuda.graph(g):
            with g.if_else(fa) as a:
                x.add_(1.0)
                a.else_()
                x.sub_(1.0)
            with g.if_else(fb) as b:
                y.add_(1.0)
                a.else_()
                b.else_()
    _no_capture_left()
    with pytest.raises(RuntimeError, match="ends while a node opened inside it is still open"):
        with tp.cuda.graph(g):
            with g.if_(fa):
                g.begin_capture_to_if_node(fb)
    _no_capture_left()
    assert x.item() == 0.0 and y.item() == 0.0
