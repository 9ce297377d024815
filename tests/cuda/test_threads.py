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
