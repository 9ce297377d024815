"""Capture misuse, threads, forked streams and leaks: nothing corrupted, nothing
stuck, every refusal a sentence, and the runtime as healthy afterwards as before.

The whole file runs in one process on both backends (on the GPU too), so each
case also proves that the misuse before it left the process usable.
"""

from __future__ import annotations

import _thread
import contextlib
import copy
import gc
import pickle
import signal
import threading

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.runtime.memory import allocator


def _no_capture_left():
    assert not tp.cuda.graphs.is_current_stream_capturing()
    assert not tp.cuda.capture_stream().is_capturing()
    assert tp.cuda.current_stream() is tp.cuda.default_stream()


def _capture_tables() -> tuple:
    return (len(allocator._live_by_capture), len(allocator._routes), len(allocator._capture_pools))


# -- item 1: a failed capture_begin leaves the capture in progress intact ----------


def test_a_nested_capture_on_the_same_stream_is_refused_and_the_outer_one_keeps_its_pool():
    x = tp.ones(4)
    s = tp.cuda.Stream()
    g, inner = tp.cuda.CUDAGraph(), tp.cuda.CUDAGraph()
    with tp.cuda.stream(s):
        g.capture_begin()
        with pytest.raises(tp.cuda.CaptureError, match="is already capturing a graph \\(begun by this thread\\)"):
            inner.capture_begin()
        y = (x * 2) + 1  # x * 2 is a temporary of g's pool, freed during the capture
        g.capture_end()
    eager = tp.full((4,), 7.0)  # must not get the temporary's memory
    x.fill_(3.0)
    s.wait_stream(tp.cuda.current_stream())  # the fill comes first (s does not wait on its own)
    g.replay(s)
    s.synchronize()
    assert eager.tolist() == [7.0] * 4
    assert y.tolist() == [7.0] * 4
    with pytest.raises(RuntimeError, match="reset\\(\\) while 1 tensor"):
        g.reset()  # y is still tracked as the capture's
    del y
    g.reset()
    inner.capture_begin(stream=s)  # the refused graph can capture later
    inner.capture_end()
    _no_capture_left()


@pytest.mark.parametrize("where", ["side stream", "a stream of one's own", "an if body"])
def test_nested_graph_contexts_give_a_sentence_and_leave_the_runtime_usable(where):
    x = tp.ones(4)
    outer, inner = tp.cuda.CUDAGraph(), tp.cuda.CUDAGraph()
    said = r"graph\(\) inside a capture: .* already capturing a graph, and captures do not nest; .* g\.if_\(\)"
    with pytest.raises(tp.cuda.CaptureError, match=said):
        with tp.cuda.graph(outer):
            _ = x + 1
            body = outer.if_(tp.ones(1, dtype=tp.bool)) if where == "an if body" else contextlib.nullcontext()
            with body:
                own = tp.cuda.Stream() if where == "a stream of one's own" else None
                with tp.cuda.graph(inner, stream=own):
                    _ = x + 2
    _no_capture_left()
    with tp.cuda.graph(outer):
        y = x + 1
    outer.replay()
    assert y.tolist() == [2.0] * 4


def test_a_second_thread_cannot_begin_on_a_capturing_stream_and_breaks_nothing():
    x = tp.ones(4)
    s = tp.cuda.Stream()
    g = tp.cuda.CUDAGraph()
    errors: list = []

    def intrude():
        try:
            tp.cuda.CUDAGraph().capture_begin(stream=s, capture_error_mode="relaxed")
        except tp.cuda.CaptureError as e:
            errors.append(str(e))

    with tp.cuda.stream(s):
        g.capture_begin(capture_error_mode="thread_local")
        t = threading.Thread(target=intrude)
        t.start()
        t.join()
        y = (x * 3) + 1
        g.capture_end()
    assert len(errors) == 1 and "begun by another thread" in errors[0]
    eager = tp.full((4,), 7.0)
    s.wait_stream(tp.cuda.current_stream())  # x's fill comes first
    g.replay(s)
    s.synchronize()
    assert (eager.tolist(), y.tolist()) == ([7.0] * 4, [4.0] * 4)
    with pytest.raises(RuntimeError, match="reset\\(\\) while 1 tensor"):
        g.reset()


# -- item 2: streams forked from a capture allocate from its pool -------------------


def test_work_on_a_forked_stream_allocates_from_the_graph_pool():
    x = tp.ones(4)
    side = tp.cuda.Stream()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        main = tp.cuda.current_stream()
        side.wait_stream(main)
        with tp.cuda.stream(side):
            y = (x * 2) + 1  # x * 2: a temporary freed on the forked stream
        main.wait_stream(side)
    with tp.cuda.stream(side):
        eager = tp.full((4,), 42.0)  # would reuse the temporary if it were ordinary memory
    side.synchronize()
    x.fill_(5.0)
    for _ in range(3):
        g.replay()
    tp.cuda.synchronize()
    assert eager.tolist() == [42.0] * 4
    assert y.tolist() == [11.0] * 4
    with pytest.raises(RuntimeError, match="reset\\(\\) while 1 tensor"):
        g.reset()  # y, made on the forked stream, belongs to the capture
    del y
    g.reset()


# -- item 6: one thread's graph() leaves another thread's global capture alone ---------


def test_a_capture_in_another_thread_leaves_a_global_capture_intact():
    x, z = tp.ones(4), tp.full((4,), 2.0)
    g = tp.cuda.CUDAGraph()
    began, done = threading.Event(), threading.Event()
    result: dict = {}

    def other():
        try:
            began.wait()
            g2 = tp.cuda.CUDAGraph()
            with tp.cuda.graph(g2):
                w = z * 10
            result["graph"], result["out"] = g2, w
        except Exception as e:  # reported below
            result["error"] = e
        finally:
            done.set()

    t = threading.Thread(target=other)
    t.start()
    with tp.cuda.graph(g):  # global mode
        y = x + 1
        began.set()
        done.wait()
        y.mul_(3)
    t.join()
    assert "error" not in result, result.get("error")
    g.replay()
    result["graph"].replay()
    tp.cuda.synchronize()
    assert y.tolist() == [6.0] * 4
    assert result["out"].tolist() == [20.0] * 4


# -- item 7: graphs are neither copied nor pickled --------------------------------------


def test_a_graph_refuses_copy_deepcopy_and_pickle():
    x = tp.ones(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x + 1
    for attempt in (copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match="a CUDAGraph cannot be copied"):
            attempt(g)
    with pytest.raises(TypeError, match="a CUDAGraph cannot be pickled"):
        pickle.dumps(g)
    with pytest.raises(RuntimeError, match="reset\\(\\) while 1 tensor"):
        g.reset()
    del y
    g.reset()


# -- item 8: memory comes back when the last reference goes -----------------------------


def test_a_first_compile_keeps_no_tensor_alive():
    @tp.jit
    def add_one(x):  # a kernel this process has never compiled
        i = tp.cuda.grid(1)
        if i < x.size:
            x[i] += 1.0

    base = tp.cuda.memory_allocated()
    gc.disable()
    try:

        def run():
            t = tp.ones(64) * 2.0  # a temporary and a result, alive while the kernel compiles
            add_one[2, 32](t)
            return t.sum().item()

        assert run() == 64 * 3.0
        assert tp.cuda.memory_allocated() == base
    finally:
        gc.enable()


# -- item 9: threads capturing in thread_local mode do not refuse each other ----------------


def test_two_threads_capture_thread_local_while_the_other_works_eagerly():
    errors: list = []
    barrier = threading.Barrier(2)

    def work(seed: float) -> None:
        try:
            s = tp.cuda.Stream()
            for _ in range(5):
                x = tp.full((4,), seed)  # eager, on the legacy default stream
                assert x.tolist() == [seed] * 4
                g = tp.cuda.CUDAGraph()
                with tp.cuda.graph(g, stream=s, capture_error_mode="thread_local"):
                    barrier.wait(timeout=30)  # both threads capture at once
                    y = x * 2 + 1
                g.replay(s)
                s.synchronize()
                assert y.tolist() == [seed * 2 + 1] * 4
                del y
                g.reset()
        except Exception as e:  # reported below with the thread's seed
            errors.append((seed, repr(e)))
            barrier.abort()

    threads = [threading.Thread(target=work, args=(float(k),)) for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_thread_waiting_during_another_threads_global_capture_is_told_what_to_do():
    x = tp.ones(4)
    began, done = threading.Event(), threading.Event()
    said: list = []

    def other():
        began.wait()
        try:
            x.tolist()
        except tp.cuda.CaptureError as e:
            said.append(str(e))
        done.set()

    t = threading.Thread(target=other)
    t.start()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x + 1
        began.set()
        done.wait()
    t.join()
    assert len(said) == 1
    assert "another thread captures a graph" in said[0] and "capture_error_mode='thread_local'" in said[0]
    g.replay()
    assert y.tolist() == [2.0] * 4


# -- item 11: a runaway while loop can be interrupted and stopped ---------------------------


@contextlib.contextmanager
def _interrupting_every(seconds: float):
    """Ctrl-C in the main thread every ``seconds`` until the block ends: one
    that lands in a destructor or a weakref callback (a tensor freed by the
    simulated loop) is printed and dropped by Python, and the loop would run on.
    Python's own Ctrl-C handler is put in place for the block: a process started
    with SIGINT ignored (a shell's background job) would drop every interrupt."""
    done, lock = threading.Event(), threading.Lock()
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)

    def interrupt():
        while not done.wait(seconds):
            with lock:
                if not done.is_set():
                    _thread.interrupt_main()

    thread = threading.Thread(target=interrupt, daemon=True)
    thread.start()
    try:
        yield
    finally:
        with lock:
            done.set()
        thread.join()
        signal.signal(signal.SIGINT, handler)


def test_a_wait_on_a_loop_that_never_ends_can_be_interrupted_and_the_loop_stopped():
    flag, n = tp.tensor([True]), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag):
            n.add_(1)  # never clears the flag
    s = tp.cuda.Stream()
    with _interrupting_every(0.5), pytest.raises(KeyboardInterrupt):
        g.replay(s)  # the simulator runs the loop here,
        s.synchronize()  # the GPU waits for it here
    stopper = tp.cuda.Stream()  # a stream of its own: its host copy runs beside the loop
    with tp.cuda.stream(stopper):
        flag.copy_([False])
    tp.cuda.synchronize()
    assert n.item() > 0
    flag.fill_(True)
    n.zero_()
    with tp.cuda.graph(g2 := tp.cuda.CUDAGraph()):
        with g2.while_(flag):
            n.add_(1)
            tp.lt(n, 3, out=flag)
    g2.replay()
    assert n.item() == 3.0


# -- item 13: failed captures and capture/reset cycles leave nothing behind ---------------


def test_failed_captures_leave_no_tokens_routes_or_pools():
    x = tp.ones(4)
    gc.collect()
    tp.cuda.empty_cache()
    tables, reserved = _capture_tables(), tp.cuda.memory_reserved()
    busy = tp.cuda.Stream()
    blocker = tp.cuda.CUDAGraph()
    blocker.capture_begin(stream=busy)
    for _ in range(100):
        with pytest.raises(tp.cuda.CaptureError, match="already capturing"):
            tp.cuda.CUDAGraph().capture_begin(stream=busy)
    blocker.capture_end()
    blocker.reset()
    for _ in range(100):
        with pytest.raises(ValueError, match="body"):
            with tp.cuda.graph(tp.cuda.CUDAGraph()):
                t = x * 2
                raise ValueError("body")
    del t  # the last body's tensor: its memory goes back with it
    gc.collect()
    assert _capture_tables() == tables
    assert tp.cuda.memory_reserved() == reserved
    _no_capture_left()


def test_capture_and_reset_cycles_of_a_conditional_graph_return_their_memory():
    x, flag = tp.ones(4), tp.tensor([True])
    reserved = tp.cuda.memory_reserved()
    conditions = _sim_conditions()
    for _ in range(30):
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            with g.if_(flag):
                y = x * 2 + 1
        g.replay()
        assert y.tolist() == [3.0] * 4
        del y
        g.reset()
    assert tp.cuda.memory_reserved() == reserved
    assert _sim_conditions() == conditions


def _sim_conditions() -> int:
    if tp.cuda.backend() != "sim":
        return 0
    from tensorplay.runtime.backend import sim

    return len(sim._CONDITIONS)


def test_a_graph_collected_while_its_output_lives_gives_the_memory_back_later():
    x = tp.ones(4)
    tp.cuda.empty_cache()
    reserved = tp.cuda.memory_reserved()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x * 2 + 1
    g.replay()
    del g  # no reset: the output outlives its graph
    gc.collect()
    assert y.tolist() == [3.0] * 4
    del y
    assert tp.cuda.memory_reserved() == reserved


# -- item 14: errors that are sentences ---------------------------------------------------


def test_querying_an_event_recorded_in_a_capture_is_refused_and_the_capture_survives():
    x = tp.ones(4)
    flag = tp.tensor([True])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x + 1
        e = tp.cuda.Event()
        e.record()
        for wait in (e.query, e.synchronize):
            with pytest.raises(tp.cuda.CaptureError, match="event recorded during a graph capture"):
                wait()
        with g.if_(flag):
            y.add_(1)
            inner = tp.cuda.Event()
            inner.record()
            with pytest.raises(tp.cuda.CaptureError, match="event recorded during a graph capture"):
                inner.query()
            y.add_(1)
    g.replay()
    assert y.tolist() == [4.0] * 4
    with pytest.raises(tp.cuda.CaptureError, match="record an event after replay\\(\\)"):
        e.query()
    e.record()  # recorded again outside the capture: an ordinary event
    e.synchronize()
    assert e.query()
    _no_capture_left()


@pytest.mark.parametrize(
    "call",
    [
        lambda g, s: g.replay(stream=s),
        lambda g, s: tp.cuda.Event().record(s),
        lambda g, s: tp.cuda.Event().wait(s),
        lambda g, s: tp.cuda.Stream().wait_stream(s),
        lambda g, s: tp.cuda.CUDAGraph().capture_begin(stream=s),
        lambda g, s: tp.cuda.graph(tp.cuda.CUDAGraph(), stream=s).__enter__(),
    ],
)
def test_a_stream_argument_that_is_not_a_stream_is_a_type_error(call):
    x = tp.ones(2)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x + 1
    with pytest.raises(TypeError, match="expected .*tensorplay.cuda.Stream.*, got str"):
        call(g, "side")
    _no_capture_left()
    g.replay()
    assert y.tolist() == [2.0, 2.0]


def test_replaying_a_graph_inside_a_capture_is_refused_and_the_capture_survives():
    x = tp.ones(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x + 1
    outer = tp.cuda.CUDAGraph()
    with tp.cuda.graph(outer):
        with pytest.raises(tp.cuda.CaptureError, match="a graph cannot be launched into another capture"):
            g.replay()
        z = x * 5
    outer.replay()
    g.replay()
    assert (y.tolist(), z.tolist()) == ([2.0] * 4, [5.0] * 4)


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_a_device_wide_synchronize_inside_a_capture_is_refused_in_every_mode(mode):
    x = tp.ones(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g, capture_error_mode=mode):
        with pytest.raises(tp.cuda.CaptureError, match="waits for the whole device, which breaks a graph capture"):
            tp.cuda.synchronize()
        y = x + 1
    g.replay()
    assert y.tolist() == [2.0] * 4


# -- a graph freed while another captures ----------------------------------------------------------


@pytest.mark.parametrize("how", ["reset", "collected"])
@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_a_graph_freed_during_another_capture_leaves_that_capture_intact(how, mode):
    # cuGraphExecDestroy inside a capture invalidates it on the H200: a graph
    # that Python collects mid-capture (or a reset() there) is freed once it ends.
    x = tp.ones(4)
    old = tp.cuda.CUDAGraph()
    with tp.cuda.graph(old):
        y = x + 1
    del y
    cycle = [old]
    cycle.append(cycle)  # collected only by the cycle collector, at a time of its choosing
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g, capture_error_mode=mode):
        if how == "reset":
            old.reset()
        del old, cycle
        gc.collect()
        z = x * 3
    g.replay()
    assert z.tolist() == [3.0] * 4
    _no_capture_left()


# -- item 15: capture_begin() on the default stream captures on the side stream ------------------


def test_capture_begin_on_the_default_stream_captures_on_the_side_stream():
    x = tp.ones(4)
    g = tp.cuda.CUDAGraph()
    assert tp.cuda.current_stream() is tp.cuda.default_stream()
    g.capture_begin()
    assert tp.cuda.current_stream() is tp.cuda.capture_stream()
    assert tp.cuda.graphs.is_current_stream_capturing()
    y = x * 3
    g.capture_end()
    assert tp.cuda.current_stream() is tp.cuda.default_stream()
    x.fill_(2.0)
    g.replay()
    assert y.tolist() == [6.0] * 4
    with pytest.raises(tp.cuda.CaptureError, match="the legacy default stream cannot capture"):
        tp.cuda.CUDAGraph().capture_begin(stream=tp.cuda.default_stream())
    _no_capture_left()


def test_an_instantiation_the_driver_refuses_is_its_error_and_leaves_the_graph_empty(monkeypatch):
    from tensorplay.runtime.backend import CudaError
    from tensorplay.runtime.backend import get as get_backend

    def refused(*_):
        raise CudaError("cuGraphInstantiate failed", "cuGraphInstantiate", "CUDA_ERROR_OUT_OF_MEMORY")

    x = tp.ones(4)
    g = tp.cuda.CUDAGraph()
    monkeypatch.setitem(vars(get_backend()), "graph_instantiate", refused)
    with pytest.raises(CudaError, match="cuGraphInstantiate failed"):  # not reset()'s refusal: y is alive
        with tp.cuda.graph(g):
            y = x * 2
    pool = y._storage.block.pool
    monkeypatch.undo()
    with pytest.raises(RuntimeError, match="needs a captured graph"):
        g.replay()
    del y
    gc.collect()
    assert pool not in allocator._pool_users and not allocator.pool_reserved(pool)  # the pool went back
    with tp.cuda.graph(g):
        y = x * 3
    g.replay()
    assert y.tolist() == [3.0] * 4
    _no_capture_left()


def test_every_case_above_left_the_process_healthy():
    x = tp.arange(8).float()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = (x * 2).sum()
    g.replay()
    tp.cuda.synchronize()
    assert y.item() == 56.0
    np.testing.assert_array_equal(x.numpy(), np.arange(8, dtype=np.float32))
    _no_capture_left()
