"""One compiled function called from several threads at once: each call gets
its own result, and an output goes stale only when that thread calls again."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler import StaleOutputError

THREADS, CALLS = 8, 20


def _affine(x, y):
    return x * y + 1.0, (x - y).sum()


def _reference(a, b):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return a64 * b64 + 1.0, (a64 - b64).sum()


def _in_threads(work, n=THREADS):
    """Run ``work(index)`` in ``n`` threads started together; return what each raised."""
    start, errors = threading.Barrier(n), []

    def run(i):
        try:
            start.wait()
            work(i)
        except BaseException as e:  # reported by the test, with the thread's index
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_calls_from_eight_threads_each_return_their_own_result():
    # Issue 15, item 3: 11 to 40 of 160 calls returned another thread's values.
    f = tp.compile(_affine)
    a, b = np.ones(4, np.float32), np.full(4, 2.0, np.float32)
    f(tp.tensor(a), tp.tensor(b))  # the warm-up
    f(tp.tensor(a), tp.tensor(b))  # the capture
    wrong, done = [], []

    def work(i):
        rng = np.random.default_rng(i)
        for call in range(CALLS):
            a, b = rng.uniform(-2, 2, (2, 4)).astype(np.float32)
            prod, total = f(tp.tensor(a), tp.tensor(b))
            time.sleep(0)  # let the other threads call in between
            want_prod, want_total = _reference(a, b)
            got_prod, got_total = prod.numpy(), total.item()
            if not (np.allclose(got_prod, want_prod, rtol=1e-5) and np.isclose(got_total, want_total, rtol=1e-5)):
                wrong.append((i, call, got_prod.tolist(), want_prod.tolist()))
            done.append(1)

    assert _in_threads(work) == []
    assert wrong == [] and len(done) == THREADS * CALLS
    assert f.graph(tp.tensor(a), tp.tensor(b)) is not None  # every call replayed the one graph


def test_in_place_changes_reach_each_threads_own_arguments():
    f = tp.compile(lambda x: x.add_(1.0) * 2.0)
    f(tp.zeros(3)), f(tp.zeros(3))
    wrong = []

    def work(i):
        for call in range(CALLS // 2):
            x = tp.full((3,), float(100 * i + call))
            out = f(x)
            time.sleep(0)
            base = 100 * i + call
            if x.tolist() != [base + 1.0] * 3 or out.tolist() != [2.0 * (base + 1)] * 3:
                wrong.append((i, call, x.tolist(), out.tolist()))

    assert _in_threads(work) == [] and wrong == []


def test_an_output_goes_stale_only_at_its_own_threads_next_call():
    f = tp.compile(lambda x: x * 2.0)
    f(tp.ones(2))
    mine = f(tp.ones(2))  # captured by this thread
    theirs, graphs = [], []

    def other_thread():
        for v in (5.0, 7.0):
            out = f(tp.full((2,), v))  # the first call captures this thread's own graph
            theirs.append(out.tolist())
        graphs.append(f.graph(tp.ones(2)))

    other = threading.Thread(target=other_thread)
    other.start()
    other.join()
    assert theirs == [[10.0, 10.0], [14.0, 14.0]]
    assert mine.tolist() == [2.0, 2.0]  # the other thread's calls left it alone
    assert graphs[0] is not None and graphs[0] is not f.graph(tp.ones(2))
    newer = f(tp.full((2,), 4.0))
    with pytest.raises(StaleOutputError, match="is an output of compiled .*<lambda>, and a later call overwrote it"):
        mine.tolist()  # this thread's next call
    assert newer.tolist() == [8.0, 8.0]


def test_a_thread_reads_back_while_another_captures():
    # the capture is thread_local: a global one would refuse every other thread's readback meanwhile
    f = tp.compile(lambda x: x + 1.0, warmup=0)
    ready, captured, read = threading.Event(), threading.Event(), []

    def slow(x):
        ready.set()
        captured.wait(5)  # hold the capture open while the other thread reads
        return x * 3.0

    g = tp.compile(slow, warmup=0)
    worker = threading.Thread(target=lambda: read.append(g(tp.ones(2)).tolist()))
    worker.start()
    ready.wait(5)
    try:
        assert f(tp.full((2,), 2.0)).tolist() == [3.0, 3.0]  # a capture and a readback of this thread's own
        assert (tp.ones(2) * 5.0).tolist() == [5.0, 5.0]
    finally:
        captured.set()
        worker.join()
    assert read == [[3.0, 3.0]]
