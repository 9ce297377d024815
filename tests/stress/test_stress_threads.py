"""Threads that capture while others work or capture, checked value by value.

A ``thread_local`` capture leaves other threads free to launch, allocate and
read back; a ``global`` capture in one thread must survive another thread
entering ``with tp.cuda.graph(...)``, whatever that thread is then told.
"""

from __future__ import annotations

import threading
import traceback

import numpy as np
import pytest
from stress_support import FULL, Snapshot, assert_no_capture

import tensorplay as tp
from tensorplay.runtime.backend import get as get_backend

N = 4
TIMEOUT = 120  # seconds a thread waits for the other before the test fails instead of hanging


class Threads:
    """Run ``target(index)`` in ``n`` threads; failures are collected and
    reported with their tracebacks, and a failing thread breaks the barrier so
    that the others stop waiting for it."""

    def __init__(self, n: int) -> None:
        self.barrier = threading.Barrier(n, timeout=TIMEOUT)
        self.n = n
        self.failures: list[str] = []

    def run(self, target) -> None:
        def guarded(index: int) -> None:
            try:
                target(index)
            except threading.BrokenBarrierError:
                if not self.failures:
                    self.failures.append(f"thread {index}: {traceback.format_exc()}")
            except BaseException:
                self.failures.insert(0, f"thread {index}: {traceback.format_exc()}")
                self.barrier.abort()

        threads = [threading.Thread(target=guarded, args=(i,), daemon=True) for i in range(self.n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT * 4)
        assert not any(t.is_alive() for t in threads), "a thread is still running (hung)"
        assert not self.failures, "\n".join(self.failures)


def test_two_threads_capture_thread_local_while_the_other_works():
    """Round by round: thread 0 captures while thread 1 works eagerly, then the
    other way round, then both capture at once; each capture is interrupted in
    its middle until the other thread has done its part."""
    rounds = 60 if FULL else 6
    before = Snapshot.take()
    threads = Threads(2)

    def worker(me: int) -> None:
        x_host = np.arange(N, dtype=np.float64) + 10 * me
        x = tp.tensor(x_host.astype(np.float32))
        e = tp.tensor(x_host.astype(np.float32))
        e_ref = x_host.copy()
        _ = (x * 2.0 + 1.0).tolist()  # the kernels are loaded before any capture
        for r in range(rounds):
            phase = r % 3  # 0: thread 0 captures, 1: thread 1 captures, 2: both
            threads.barrier.wait()
            if phase == 2 or phase == me:
                g = tp.cuda.CUDAGraph()
                with tp.cuda.graph(g, capture_error_mode="thread_local"):
                    assert tp.cuda.is_current_stream_capturing()
                    t = x * float(r + 1)
                    threads.barrier.wait()  # the other thread works, or captures, from here
                    y = t + float(me)
                    del t
                    threads.barrier.wait()
                assert_no_capture(other_threads=False)
                x_host[0] += 1.0
                x.copy_(tp.tensor(x_host.astype(np.float32)))  # a new input for the replay
                g.replay()
                np.testing.assert_array_equal(y.numpy(), x_host * (r + 1) + me, err_msg=f"round {r}")
                del y
                g.reset()
            else:
                threads.barrier.wait()
                for _ in range(3):  # launches, allocations and readbacks on the legacy default stream
                    e.add_(1.0)
                    e_ref += 1.0
                    f = e * 2.0
                    np.testing.assert_array_equal(f.numpy(), e_ref * 2.0, err_msg=f"round {r}")
                threads.barrier.wait()
            np.testing.assert_array_equal(e.numpy(), e_ref, err_msg=f"round {r}")

    threads.run(worker)
    assert_no_capture()
    before.assert_returned("the threads' captures")


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_a_capture_begun_in_another_thread_leaves_a_global_capture_intact(mode):
    """Thread A captures in 'global' mode; while it is in its body, thread B
    enters ``with tp.cuda.graph(...)`` (capture mode ``mode``). B may capture or
    be told why not (a CaptureError); A's capture must finish and replay right."""
    x = tp.tensor(np.arange(1, N + 1, dtype=np.float32))
    x2 = tp.tensor(np.full(N, 5.0, np.float32))
    _ = (x * 2.0 + 1.0).tolist(), (x2 * 3.0).tolist()  # kernels loaded before the captures
    before = Snapshot.take()
    a_inside, b_done, a_done = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def thread_a() -> None:
        g = tp.cuda.CUDAGraph()
        try:
            with tp.cuda.graph(g):
                y = x * 2.0
                a_inside.set()
                assert b_done.wait(TIMEOUT), "thread B did not finish"
                z = y + 1.0
                del y
        finally:
            a_inside.set()
            a_done.set()
        g.replay()
        seen["a"] = z.tolist()
        del z
        g.reset()

    def thread_b() -> None:
        assert a_inside.wait(TIMEOUT)
        g = tp.cuda.CUDAGraph()
        try:
            with tp.cuda.graph(g, capture_error_mode=mode):
                w = x2 * 3.0
        except tp.cuda.CaptureError as e:  # told why not, with a sentence
            seen["b refused"] = str(e)
        finally:
            b_done.set()
        assert a_done.wait(TIMEOUT)
        if "b refused" not in seen:
            g.replay()
            seen["b"] = w.tolist()
            del w
            g.reset()

    threads = Threads(2)
    threads.run(lambda i: (thread_a, thread_b)[i]())
    assert seen["a"] == [3.0, 5.0, 7.0, 9.0]
    if "b refused" in seen:
        assert "capturing" in seen["b refused"], seen["b refused"]
    else:
        assert seen["b"] == [15.0] * N
    assert_no_capture()
    g = tp.cuda.CUDAGraph()  # the runtime is as usable as before
    with tp.cuda.graph(g):
        v = x * 2.0
    g.replay()
    assert v.tolist() == [2.0, 4.0, 6.0, 8.0]
    del v
    g.reset()
    before.assert_returned("the two captures")


@pytest.mark.parametrize("mode", ["global", "thread_local"])
def test_a_capture_begin_refused_in_another_thread_leaves_the_capture_whole(mode):
    """Thread B calls capture_begin on the stream thread A is capturing on: B is
    told so, and A's capture keeps its pool (temporaries made after the refusal
    never reach an eager tensor) and its tracking (reset() refuses while its
    output lives)."""
    x = tp.tensor(np.arange(1, N + 1, dtype=np.float32))
    _ = ((x + 1.0) * 2.0 - 1.0).tolist()
    before = Snapshot.take()
    s = tp.cuda.Stream()
    b_may_try, b_done = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def thread_a() -> None:
        g = tp.cuda.CUDAGraph()
        try:
            with tp.cuda.graph(g, stream=s, capture_error_mode=mode):
                t = x + 1.0
                seen["A capturing"] = True
                b_may_try.set()
                assert b_done.wait(TIMEOUT), "thread B did not finish"
                u = t * 2.0  # temporaries after the refusal: from this graph's pool still
                del t
                y = u - 1.0
                del u
        finally:
            b_may_try.set()  # B must not wait for a capture that failed
        with pytest.raises(RuntimeError, match=r"reset\(\) while 1 tensor\(s\)"):
            g.reset()
        e = tp.tensor(np.full(N, 7.0, np.float32))  # may take any block the capture gave back
        f = e * 1.0
        g.replay()
        seen["y"], seen["e"], seen["f"] = y.tolist(), e.tolist(), f.tolist()
        del y, e, f
        g.reset()

    def thread_b() -> None:
        assert b_may_try.wait(TIMEOUT)
        if not seen.get("A capturing"):
            return  # A failed: its error is the one reported
        try:
            other = tp.cuda.CUDAGraph()
            with pytest.raises(tp.cuda.CaptureError, match=r"already capturing a graph \(begun by another thread\)"):
                other.capture_begin(stream=s)
        finally:
            b_done.set()

    Threads(2).run(lambda i: (thread_a, thread_b)[i]())
    assert seen == {"A capturing": True, "y": [3.0, 5.0, 7.0, 9.0], "e": [7.0] * N, "f": [7.0] * N}
    assert_no_capture()
    before.assert_returned("the capture")


@pytest.mark.parametrize("a_does", ["enters graph()", "resets a graph"])
def test_a_device_wide_wait_in_one_thread_leaves_a_capture_begun_meanwhile_whole(monkeypatch, a_does):
    """The schedule the two-thread test above hits only by chance, made certain:
    thread A is held inside a device-wide wait that the runtime makes when no
    capture is in progress (on entering ``with tp.cuda.graph(...)``, or in
    ``reset()`` giving a dead pool's memory back), and thread B begins a
    capture meanwhile. B's capture must not be broken by A's wait; A's capture
    may succeed or be refused in a sentence, A's reset must succeed."""
    x = tp.tensor(np.arange(1, N + 1, dtype=np.float32))
    _ = (x * 3.0).tolist(), (x * 5.0).tolist()
    old = None
    if a_does == "resets a graph":
        old = tp.cuda.CUDAGraph()
        with tp.cuda.graph(old):
            t = x * 2.0  # a temporary: its block stays cached in the pool, for reset() to give back
            y = t + 1.0
            del t
        del y
    dev = get_backend()
    real_synchronize = dev.synchronize
    a_held, b_began, a_past_wait = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def held_synchronize() -> None:
        if threading.current_thread().name == "A":  # descheduled here, as a thread can be
            a_held.set()
            b_began.wait(2)
            try:
                real_synchronize()
            finally:
                a_past_wait.set()
        else:
            real_synchronize()

    monkeypatch.setitem(vars(dev), "synchronize", held_synchronize)

    def capture(name: str, factor: float, inside) -> None:
        g = tp.cuda.CUDAGraph()
        try:
            with tp.cuda.graph(g, capture_error_mode="thread_local"):
                inside()
                y = x * factor
        except tp.cuda.CaptureError as e:
            seen[name] = e
            return
        finally:  # never leave the other thread waiting
            b_began.set()
            a_past_wait.set()
        g.replay()
        seen[name] = y.tolist()
        del y
        g.reset()

    def thread_a() -> None:
        if old is None:
            capture("A", 3.0, a_past_wait.set)
            return
        try:
            old.reset()
            seen["A"] = "reset"
        except Exception as e:
            seen["A"] = e
        finally:
            b_began.set()
            a_past_wait.set()

    def thread_b() -> None:
        a_held.wait(2)
        capture("B", 5.0, lambda: (b_began.set(), a_past_wait.wait(2)))

    ta, tb = threading.Thread(target=thread_a, name="A"), threading.Thread(target=thread_b, name="B")
    ta.start()
    tb.start()
    ta.join(TIMEOUT)
    tb.join(TIMEOUT)
    assert seen.get("B") == [5.0, 10.0, 15.0, 20.0], f"thread B's capture was broken: {seen.get('B')!r}"
    a = seen.get("A")
    if old is not None:
        assert a == "reset", f"thread A's reset() failed: {a!r}"
    elif isinstance(a, Exception):
        assert not str(a).startswith("cu"), f"thread A got the driver's error, not a sentence: {a}"
    else:
        assert a == [3.0, 6.0, 9.0, 12.0], a
    assert_no_capture()


def test_a_thread_resetting_graphs_and_one_beginning_captures_never_wait_for_each_other_for_ever():
    """A reset gives a dead pool's memory back under the allocator's pool lock
    and the capture lock; a capture's begin takes the capture lock and then the
    pool lock. Taken in opposite orders, the two threads deadlocked within
    seconds. Both must finish, with the values of their graphs."""
    x = tp.tensor(np.arange(1, N + 1, dtype=np.float32))
    rounds = 1000 if FULL else 200
    failures: list[str] = []
    last: dict[str, object] = {}

    def resets() -> None:
        for _ in range(rounds):
            g = tp.cuda.CUDAGraph()
            with tp.cuda.graph(g):
                t = x * 2.0  # a temporary: its block stays cached in the pool, for reset() to give back
                y = t + 1.0
                del t
            g.replay()
            assert y.tolist() == [3.0, 5.0, 7.0, 9.0]
            del y
            g.reset()

    def captures() -> None:  # no read-back here: the other thread's global capture refuses it
        for _ in range(rounds):
            g = tp.cuda.CUDAGraph()
            try:
                with tp.cuda.graph(g, capture_error_mode="thread_local"):
                    y = x * 3.0
            except tp.cuda.CaptureError:  # begun inside the other thread's device-wide wait: told so
                continue
            g.replay()
            if "captures" in last:  # the graph before this one: reset too, with its output gone
                previous = last.pop("captures")[0]
                previous.reset()
            last["captures"] = g, y
            del y

    def guarded(work) -> None:
        try:
            work()
        except Exception:
            failures.append(traceback.format_exc())

    threads = [threading.Thread(target=guarded, args=(work,), daemon=True) for work in (resets, captures)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert not any(t.is_alive() for t in threads), "the two threads wait for each other for ever (a deadlock)"
    assert not failures, "\n".join(failures)
    g, y = last.pop("captures")
    assert y.tolist() == [3.0, 6.0, 9.0, 12.0]
    del y
    g.reset()
    assert_no_capture()
