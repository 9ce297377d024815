"""A fused kernel of ``tp.compile`` that computes a while node's flag as the last
work of the loop's body ends the pass itself (``kernels/conditional.pass_end``):
the body then has no end-of-pass kernel of its own. Each test compares the
loop's passes, its counter and its results with the same loop run on the host.
"""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp


def relax(u, it, go):
    """Halve u until it changes by no more than 1e-3: one fused kernel (a
    reduction, then the counter and the flag in its tail)."""
    r = (u * 0.5 - u).abs().max()
    u.mul_(0.5)
    it.add_(1)
    tp.gt(r, 1e-3, out=go)


def _host_relax(start: float, calls_a_pass: int = 1, cap: int | None = None) -> tuple[int, float]:
    """(passes, u) of the loop of ``relax`` run on the host, in float32."""
    host, passes = np.float32(start), 0
    while cap is None or passes < cap:
        for _ in range(calls_a_pass):
            change = abs(host * np.float32(0.5) - host)
            host = host * np.float32(0.5)
        passes += 1
        if not change > 1e-3:
            break
    return passes, float(host)


def _state(start: float = 1.0):
    return tp.full((256,), start), tp.zeros(1, dtype=tp.int32), tp.ones(1, dtype=tp.bool)


def _relax_loop(**options):
    """(graph, loop, u, it, go, compiled body): ``relax`` compiled, in ``g.while_(go, **options)``."""
    body = tp.compile(relax)
    u, it, go = _state()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(go, **options) as loop:
            body(u, it, go)
    return g, loop, u, it, go, body


def _replay_from(start: float, g, u, it, go) -> None:
    u.fill_(start)
    it.zero_()
    go.fill_(True)
    g.replay()


def _text(g: tp.cuda.CUDAGraph, tmp_path) -> str:
    return open(g.debug_dump(str(tmp_path / "g.dot"))).read()


def test_a_compiled_body_that_computes_the_flag_ends_the_pass_without_a_kernel_of_its_own(tmp_path):
    g, loop, u, it, go, body = _relax_loop()
    text = _text(g, tmp_path)
    assert "conditional.loop_pass" not in text and "conditional.loop_recheck" not in text
    assert any("end_pass(loop, " in source for source in body.kernels())
    for start in (1.0, 8.0):  # replays count from zero again
        _replay_from(start, g, u, it, go)
        passes, host = _host_relax(start)
        assert loop.iterations.item() == it.item() == passes
        assert not loop.hit_limit and not loop.cancelled
        np.testing.assert_array_equal(u.numpy(), np.full(256, host, np.float32))


def test_the_cap_stops_a_loop_whose_pass_a_fused_kernel_ends():
    g, loop, u, it, go, _ = _relax_loop(max_iters=4)
    g.replay()
    passes, host = _host_relax(1.0, cap=4)
    assert passes == 4 and loop.iterations.item() == it.item() == 4 and loop.hit_limit
    np.testing.assert_array_equal(u.numpy(), np.full(256, host, np.float32))


def test_work_after_the_fused_kernel_in_the_body_sets_the_loop_again_without_counting_twice(tmp_path):
    body = tp.compile(relax)
    u, it, go = _state()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(go) as loop:
            body(u, it, go)
            tp.logical_and(go, tp.lt(it, 3), out=go)  # eager: the flag changes after the fused kernel
    text = _text(g, tmp_path)
    assert "conditional.loop_recheck" in text and "conditional.loop_pass" not in text
    g.replay()
    assert _host_relax(1.0)[0] > 3
    assert loop.iterations.item() == it.item() == 3 and not loop.hit_limit
    np.testing.assert_array_equal(u.numpy(), np.full(256, 0.125, np.float32))


def test_two_compiled_calls_a_pass_count_it_once():
    body = tp.compile(relax)
    u, it, go = _state()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(go) as loop:
            body(u, it, go)
            body(u, it, go)  # the second call's kernel does not end the pass again
    g.replay()
    passes, host = _host_relax(1.0, calls_a_pass=2)
    assert loop.iterations.item() == passes and it.item() == 2 * passes
    np.testing.assert_array_equal(u.numpy(), np.full(256, host, np.float32))


@pytest.mark.parametrize("where", ["unrolled", "do-while", "flag not in the tail"])
def test_loops_the_fused_kernel_does_not_end_keep_their_end_of_pass_kernel(where, tmp_path):
    body = tp.compile(relax)
    u, it, go = _state()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        if where == "unrolled":
            with g.while_(go, unroll=2) as loop:
                body(u, it, go)
        elif where == "do-while":
            with g.while_(max_iters=5) as loop:
                body(u, it, go)
        else:
            other = tp.ones(1, dtype=tp.bool)
            with g.while_(other) as loop:
                body(u, it, go)
                other.copy_(go)  # the loop's flag is a copy, made by another kernel
    assert "end_pass(loop" not in "".join(body.kernels())
    if where != "unrolled":  # (the DOT view shows an unrolled body's copies as graphs)
        assert "conditional.loop_pass" in _text(g, tmp_path)
    g.replay()
    passes, host = _host_relax(1.0, cap=5 if where == "do-while" else None)
    assert loop.iterations.item() == it.item() == passes
    np.testing.assert_array_equal(u.numpy(), np.full(256, host, np.float32))


def test_the_hazard_check_passes_the_fused_kernel_that_ends_a_pass():
    tp.cuda.synchronize()
    with tp.cuda.sanitize(seed=5):
        g, loop, *_ = _relax_loop(max_iters=50)
        g.replay()
        tp.cuda.synchronize()
    assert loop.iterations.item() == _host_relax(1.0)[0]


def test_a_failed_capture_leaves_no_loop_for_a_later_kernel_to_end():
    from tensorplay.runtime.capture import capture_state

    body = tp.compile(relax)
    u, it, go = _state()
    g = tp.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="inside the body"):
        with tp.cuda.graph(g):
            with g.while_(go):
                body(u, it, go)
                raise RuntimeError("an error inside the body")
    assert capture_state.loops == {}
    body(u, it, go)  # eagerly, and then in a new capture: as before
    g, loop, u, it, go, _ = _relax_loop()
    _replay_from(1.0, g, u, it, go)
    passes, host = _host_relax(1.0)
    assert loop.iterations.item() == passes
    np.testing.assert_array_equal(u.numpy(), np.full(256, host, np.float32))


def test_a_second_look_at_the_flag_decides_whether_the_loop_hit_its_cap():
    body = tp.compile(relax)
    u, it, go = _state()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(go, max_iters=2) as loop:
            body(u, it, go)  # at the second pass its flag holds, at the cap: the fused kernel marks the cap hit
            tp.logical_and(go, tp.lt(it, 2), out=go)  # then the flag fails: the loop ended by its condition
    g.replay()
    assert loop.iterations.item() == it.item() == 2 and not loop.hit_limit
