"""Stopping a running graph: ``CUDAGraph.cancel()`` from another thread, and
Ctrl-C (a real SIGINT) during a host wait, stop every while loop of the graph
at its next pass; the graph stays usable and its next replay runs normally."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import tensorplay as tp

RUNAWAY = 1e9  # a limit float32 counting by ones never reaches (it stops at 2**24)


@tp.jit
def count_up(n, limit, loop):
    if tp.cuda.grid(1) == 0:
        n[0] += 1.0
        tp.cuda.set_conditional(loop, np.uint32(1 if n[0] < limit[0] else 0))


def _capture(form: str):
    """A loop of ``form`` that adds 1 to ``n`` per pass until ``n >= limit``."""
    n, limit, flag, inner_flag = tp.zeros(1), tp.tensor([RUNAWAY]), tp.tensor([True]), tp.tensor([True])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        if form == "do-while":
            with g.while_() as loop:
                count_up[1, 1](n, limit, loop)
        elif form == "nested":  # the inner loop runs one pass per outer pass
            with g.while_(flag) as loop:
                inner_flag.fill_(True)
                with g.while_(inner_flag):
                    n.add_(1.0)
                    inner_flag.fill_(False)
                tp.lt(n, limit, out=flag)
        else:
            with g.while_(
                flag, max_iters=None if form == "flag" else 1 << 40, unroll=3 if form == "unrolled" else 1
            ) as loop:
                n.add_(1.0)
                tp.lt(n, limit, out=flag)
    return g, loop, n, limit, flag


@pytest.mark.parametrize("form", ["flag", "capped", "unrolled", "do-while", "nested"])
def test_cancel_from_another_thread_stops_a_runaway_loop_and_the_next_replay_runs_normally(form):
    g, loop, n, limit, flag = _capture(form)
    timer = threading.Timer(0.3, g.cancel)
    timer.start()
    g.replay()
    tp.cuda.synchronize()
    timer.join()
    assert loop in g.cancelled() and loop.cancelled and not loop.hit_limit and g.hit_limits() == []
    passes = loop.iterations.item()
    assert 0 < n.item() < RUNAWAY
    assert n.item() == passes or form == "nested"  # (there the cancel may stop the inner loop before its pass)

    n.zero_()
    flag.fill_(True)
    limit.fill_(3.0)
    g.replay()  # withdraws the cancel first
    assert n.item() == 3.0 and loop.iterations.item() == 3
    assert g.cancelled() == [] and not loop.cancelled


def test_a_cancel_reaches_only_replays_launched_before_it():
    g, loop, n, limit, flag = _capture("flag")
    limit.fill_(5.0)
    g.replay()
    tp.cuda.synchronize()
    g.cancel()  # nothing running: the next replay withdraws it
    n.zero_()
    flag.fill_(True)
    g.replay()
    assert n.item() == 5.0 and g.cancelled() == []


def test_cancel_is_refused_during_a_capture_and_a_graph_without_loops_has_nothing_to_stop():
    x = tp.ones(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x * 2
        with pytest.raises(RuntimeError, match=r"cancel\(\) during a capture"):
            g.cancel()
    g.cancel()
    g.replay()
    assert y.tolist() == [2.0] * 4 and g.cancelled() == []


def test_a_reset_graph_drops_its_loops_and_a_new_capture_is_not_cancelled():
    g, loop, n, limit, flag = _capture("flag")
    g.cancel()
    del n, limit, flag
    g.reset()
    assert g.cancelled() == []
    m, stop = tp.zeros(1), tp.tensor([True])
    with tp.cuda.graph(g):
        with g.while_(stop) as again:
            m.add_(1.0)
            tp.lt(m, 4.0, out=stop)
    g.replay()
    assert m.item() == 4.0 and again.iterations.item() == 4 and not again.cancelled


# -- Ctrl-C: a real SIGINT, sent to a child process, during each kind of host wait ---------

_CHILD = textwrap.dedent(
    """
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job starts with SIGINT ignored
    import tensorplay as tp

    flag, n, limit = tp.tensor([True]), tp.zeros(1), tp.tensor([1e9])
    big = tp.zeros(1 << 16)  # read back through pageable memory
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag) as loop:
            n.add_(1.0)
            tp.lt(n, limit, out=flag)
    waits = {
        "synchronize": tp.cuda.synchronize,
        "item": n.item,
        "numpy": big.numpy,
        "tolist": n.tolist,
        "event": lambda: tp.cuda.current_stream().record_event().synchronize(),
        "stream": lambda: tp.cuda.current_stream().synchronize(),
    }
    for name, wait in waits.items():
        n.zero_(); flag.fill_(True); limit.fill_(1e9)
        tp.cuda.synchronize()
        print("running", name, flush=True)
        try:
            g.replay()
            wait()
            print("not interrupted", name, flush=True)
            sys.exit(1)
        except KeyboardInterrupt:
            pass
        tp.cuda.synchronize()  # the loop has stopped: this returns
        print("stopped", name, g.cancelled() == [loop], 0 < n.item() < 1e9, flush=True)
    n.zero_(); flag.fill_(True); limit.fill_(3.0)
    g.replay()
    print("after", n.item(), loop.iterations.item(), g.cancelled() == [], flush=True)
    """
)


def test_ctrl_c_during_every_host_wait_interrupts_it_and_stops_the_loop():
    env = dict(os.environ)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines = []
    try:
        for line in child.stdout:
            lines.append(line.split())
            if lines[-1][0] == "running":
                threading.Event().wait(0.5)  # let the loop run a while, then Ctrl-C
                child.send_signal(signal.SIGINT)
        child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    err = child.stderr.read()
    assert child.returncode == 0, (lines, err)
    stopped = [line for line in lines if line[0] == "stopped"]
    assert [line[1] for line in stopped] == ["synchronize", "item", "numpy", "tolist", "event", "stream"], lines
    assert all(line[2:] == ["True", "True"] for line in stopped), lines
    assert lines[-1] == ["after", "3.0", "3", "True"], lines
