"""Several host threads issuing work at once, each on its own stream."""

from __future__ import annotations

import threading

import pytest

import tensorplay as tp


def test_threads_with_their_own_streams():
    errors: list = []

    def work(seed: int) -> None:
        try:
            s = tp.cuda.Stream()
            with tp.cuda.stream(s):
                for _ in range(20):
                    a = tp.full((8,), float(seed))
                    b = a * 2.0 + 1.0
                    s.synchronize()
                    assert b.tolist() == [seed * 2.0 + 1.0] * 8
        except Exception as e:  # surfaced below, with the thread's seed
            errors.append((seed, e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert tp.cuda.current_stream() is tp.cuda.default_stream()  # this thread's stream is untouched


def test_a_graph_released_while_another_thread_begins_a_global_capture_does_not_break_it():
    """A graph's executable is destroyed only where no capture is in progress,
    and the check and the destroy are one step under the capture lock: on the
    H200 a destroy that ran just after another thread began a global capture
    broke that capture (cuGraphExecDestroy refused with 900, the capture
    invalidated). Here the release holds on until the other thread has tried
    to begin: the begin must wait for it, and both graphs come out right."""
    from tensorplay.runtime.capture import capture_state, release_after_captures

    x = tp.tensor([1.0, 2.0, 3.0])
    releasing, begin_tried = threading.Event(), threading.Event()
    order: list[str] = []

    def release() -> None:
        releasing.set()
        begin_tried.wait(5)
        order.append("released while no capture" if not capture_state.active else "released during a capture")

    def capture() -> None:
        releasing.wait(5)
        g = tp.cuda.CUDAGraph()
        threading.Timer(0.2, begin_tried.set).start()  # the begin below blocks while the release runs
        with tp.cuda.graph(g):
            order.append("capture begun")
            y = x * 2.0
        g.replay()
        order.append(str(y.tolist()))

    other = threading.Thread(target=capture)
    other.start()
    release_after_captures(release)
    other.join(10)
    assert order == ["released while no capture", "capture begun", "[2.0, 4.0, 6.0]"]


def test_a_device_wide_wait_while_another_thread_ends_its_capture_leaves_that_capture_whole(monkeypatch):
    """A capture counts as in progress until the driver has ended it: on the
    H200 a pool released by one thread (which waits for the whole device where
    no capture is in progress) broke another thread's capture that was ending,
    because the capture was marked ended before the driver's end. Here the end
    holds on until the other thread has tried its wait, which must be skipped."""
    from tensorplay.runtime.backend import get as get_backend
    from tensorplay.runtime.capture import wait_for_device_unless_capturing

    backend = get_backend()
    real_end = backend.end_capture
    ending, waited = threading.Event(), threading.Event()

    def end_capture(stream):
        ending.set()
        waited.wait(5)
        return real_end(stream)

    monkeypatch.setitem(vars(backend), "end_capture", end_capture)
    x = tp.tensor([1.0, 2.0, 3.0])
    x * 2.0  # the kernel is loaded before the capture
    results: list = []

    def capture() -> None:
        try:
            g = tp.cuda.CUDAGraph()
            with tp.cuda.graph(g, capture_error_mode="thread_local"):
                y = x * 2.0
            g.replay()
            results.append(y.tolist())
        except Exception as e:  # surfaced below
            results.append(e)
            ending.set()

    other = threading.Thread(target=capture)
    other.start()
    assert ending.wait(5)
    ran = wait_for_device_unless_capturing(backend.synchronize)
    waited.set()
    other.join(10)
    assert (ran, results) == (False, [[2.0, 4.0, 6.0]])


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_capture_end_on_another_thread_is_refused_and_the_capture_stays_open_for_its_own(mode):
    """A capture_begin() on the legacy default stream makes the side stream this
    thread's current stream until capture_end(), which sets it back: that is
    thread-local, so an end on another thread set the ending thread's stream
    instead and left the capturing thread's eager work on the side stream (and
    the driver ends a 'global' or 'thread_local' capture only on its own thread).
    The other thread is refused, with neither thread's stream touched, and the
    capturing thread ends the capture as usual."""
    x = tp.tensor([1.0, 2.0, 3.0])
    x * 2.0  # the kernel is loaded before the capture
    g = tp.cuda.CUDAGraph()
    began, refused = threading.Event(), threading.Event()
    seen: list = []

    def capture() -> None:
        try:
            g.capture_begin(capture_error_mode=mode)
            y = x * 2.0
            began.set()
            refused.wait(5)
            y = y + 1.0  # still captured
            g.capture_end()
            seen.append(tp.cuda.current_stream() is tp.cuda.default_stream())
            g.replay()
            seen.append(y.tolist())
        except Exception as e:  # surfaced below
            seen.append(e)
            began.set()

    other = threading.Thread(target=capture, name="capturer")
    other.start()
    assert began.wait(5)
    mine = tp.cuda.Stream()
    try:
        with tp.cuda.stream(mine):
            with pytest.raises(
                tp.cuda.CaptureError,
                match=r"^capture_end\(\) on thread 'MainThread', but thread 'capturer' began the capture on "
                r"stream 0x[0-9a-f]+, .*; call capture_end\(\) on that thread \(this capture is still open\)$",
            ):
                g.capture_end()
            assert tp.cuda.current_stream() is mine
    finally:
        refused.set()
        other.join(10)
    assert seen == [True, [3.0, 5.0, 7.0]]


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_the_backend_refuses_to_end_a_capture_on_another_thread_unless_relaxed_and_the_capture_ends(mode):
    """The driver ends a 'relaxed' capture on any thread; a 'global' or
    'thread_local' one, on another thread than the one that began it, it
    refuses to end (``CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD``), and the
    capture is over all the same: its own thread has nothing left to end
    (seen on an H100, driver 580). The simulator answers alike."""
    from tensorplay.runtime.backend import get as get_backend

    dev, s = get_backend(), tp.cuda.Stream()
    begun, tried = threading.Event(), threading.Event()
    seen: list = []

    def capture() -> None:
        try:
            dev.begin_capture(s._h, mode)
            begun.set()
            tried.wait(5)
            dev.end_capture(s._h)
        except tp.cuda.CudaError as e:
            seen.append(e.code)
        except Exception as e:  # surfaced below
            seen.append(e)
        begun.set()

    other = threading.Thread(target=capture, name="capturer")
    other.start()
    assert begun.wait(5)
    try:
        if mode == "relaxed":
            dev.graph_destroy(dev.end_capture(s._h))
        else:
            with pytest.raises(
                tp.cuda.CaptureError,
                match="^cuStreamEndCapture failed: CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD: the capture was begun "
                "on another thread",
            ):
                dev.end_capture(s._h)
        assert dev.capture_status(s._h) == "none"
    finally:
        tried.set()
        other.join(10)
    assert seen == ["CUDA_ERROR_ILLEGAL_STATE"]  # its own thread's end: no capture on the stream any more
    tp.cuda.synchronize()  # no capture is left in progress


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_a_capturing_graph_collected_on_another_thread_is_left_to_its_own_thread_which_ends_it_at_its_next_capture(
    mode,
):
    """A graph collected in the middle of its capture on another thread than
    the capture's (its last reference dropped there, or Python's cyclic
    collector running there) aborted the capture in ``__del__`` on that thread:
    it set the collecting thread's current stream back instead of the
    capturing thread's, and asked the driver to end a 'global' or
    'thread_local' capture off its thread (refused: the bookkeeping said ended,
    the driver's capture stayed open). Now the collecting thread is left as it
    was, and the capturing thread, whose current stream is still the capture's,
    ends and discards that capture itself when it next begins one."""
    x = tp.tensor([1.0, 2.0, 3.0])
    x * 2.0  # the kernels are loaded before the captures
    x + 1.0
    graphs: list = []
    handed, collected = threading.Event(), threading.Event()
    seen: list = []

    def capture() -> None:
        try:
            g = tp.cuda.CUDAGraph()
            g.capture_begin(capture_error_mode=mode)
            _ = x * 2.0
            graphs.append(g)
            del g
            handed.set()
            collected.wait(5)
            seen.append(tp.cuda.current_stream().is_capturing())  # the capture is still this thread's, open
            g2 = tp.cuda.CUDAGraph()
            with tp.cuda.graph(g2):  # ends the collected graph's capture first
                y = x + 1.0
            g2.replay()
            seen.append(y.tolist())
            seen.append(tp.cuda.current_stream() is tp.cuda.default_stream())
        except Exception as e:  # surfaced below
            seen.append(e)
            handed.set()

    other = threading.Thread(target=capture, name="capturer")
    other.start()
    assert handed.wait(5)
    mine = tp.cuda.Stream()
    try:
        with tp.cuda.stream(mine):
            graphs.clear()  # the last reference: the graph is collected on this thread
            assert tp.cuda.current_stream() is mine
    finally:
        collected.set()
        other.join(10)
    assert seen == [True, [2.0, 3.0, 4.0], True]
    tp.cuda.synchronize()  # no capture is left in progress


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_a_capture_collected_after_its_thread_exited_is_ended_on_the_collecting_thread_leaving_its_stream(mode):
    """Where the capturing thread has exited (its current stream went with it),
    the collecting thread ends the capture, which the driver ends on any thread
    (refusing the call in 'global' and 'thread_local' mode, but ending it), and
    keeps its own current stream."""
    x = tp.tensor([1.0, 2.0, 3.0])
    x * 2.0
    graphs: list = []

    def capture() -> None:
        g = tp.cuda.CUDAGraph()
        g.capture_begin(capture_error_mode=mode)
        _ = x * 2.0
        graphs.append(g)

    other = threading.Thread(target=capture, name="capturer")
    other.start()
    other.join(10)
    assert len(graphs) == 1 and not other.is_alive()
    side = graphs[0]._stream
    mine = tp.cuda.Stream()
    with tp.cuda.stream(mine):
        graphs.clear()
        assert tp.cuda.current_stream() is mine
    assert not side.is_capturing()
    tp.cuda.synchronize()  # no capture is left in progress
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):  # and a new one begins
        y = x + 1.0
    g.replay()
    assert y.tolist() == [2.0, 3.0, 4.0]


_FOREIGN_CALLS = {
    "g.if_()": lambda g, cases, flag, index: g.if_(flag).__enter__(),
    "g.if_else()": lambda g, cases, flag, index: g.if_else(flag).__enter__(),
    "g.switch_()": lambda g, cases, flag, index: g.switch_(index, 2).__enter__(),
    "g.while_()": lambda g, cases, flag, index: g.while_(flag).__enter__(),
    "begin_capture_to_if_node()": lambda g, cases, flag, index: g.begin_capture_to_if_node(flag),
    "begin_capture_to_while_node()": lambda g, cases, flag, index: g.begin_capture_to_while_node(flag),
    "conditional_handle()": lambda g, cases, flag, index: g.conditional_handle(),
    "cases.next()": lambda g, cases, flag, index: cases.next(),
    "begin_capture_to_next_conditional_body()": lambda g, cases, flag, index: (
        g.begin_capture_to_next_conditional_body()
    ),
    "end_capture_to_conditional_node()": lambda g, cases, flag, index: g.end_capture_to_conditional_node(),
    "set_conditional_handle_for_current_node()": lambda g, cases, flag, index: (
        g.set_conditional_handle_for_current_node(flag)
    ),
}


@pytest.mark.parametrize("call", list(_FOREIGN_CALLS))
def test_conditional_node_calls_on_another_thread_are_refused_and_the_capture_goes_on(call):
    """Opening, moving and closing a conditional node makes a body's stream, or
    the stream below, the calling thread's current stream, and captures kernels
    on the capture's streams: on another thread than the capture's it set that
    thread's stream and left the capturing thread's work outside the node (a
    refused check discarded the capture from there too). They are refused, as
    capture_end() is, before anything changes; the capturing thread goes on."""
    import re

    x, index, flag = tp.zeros(1), tp.tensor([1]), tp.tensor([True])
    x.add_(1.0)
    g = tp.cuda.CUDAGraph()
    opened, tried = threading.Event(), threading.Event()
    handed: list = []
    seen: list = []

    def capture() -> None:
        try:
            g.capture_begin()
            with g.switch_(index, 2) as cases:
                _ = x.add_(1.0)
                handed.append(cases)
                opened.set()
                tried.wait(5)
                cases.next()
                _ = x.add_(10.0)
            g.capture_end()
            seen.append(tp.cuda.current_stream() is tp.cuda.default_stream())
            g.replay()
            seen.append(x.item())
        except Exception as e:  # surfaced below
            seen.append(e)
            opened.set()

    other = threading.Thread(target=capture, name="capturer")
    other.start()
    assert opened.wait(5)
    mine = tp.cuda.Stream()
    try:
        with tp.cuda.stream(mine):
            with pytest.raises(
                tp.cuda.CaptureError,
                match=f"^{re.escape(call)} on thread 'MainThread', but thread 'capturer' began the capture on "
                rf"stream 0x[0-9a-f]+, .*; call {re.escape(call)} on that thread \(this capture is still open\)$",
            ):
                _FOREIGN_CALLS[call](g, handed[0], flag, index)
            assert tp.cuda.current_stream() is mine
    finally:
        tried.set()
        other.join(10)
    assert seen == [True, 11.0]
