"""Launches of one graph from several host threads at once, each on its own
stream: the driver runs an executable graph's launches one at a time (a second
waits for the first, whatever its stream), and a staged graph's launch sets
its parameters and launches under one lock; each test checks the exact result
against a count kept on the host, which an interleaved launch would miss.
The hazard check follows that order too: ``TENSORPLAY_SANITIZE=1`` runs these
tests under it, and one test runs the threads under it in any run."""

from __future__ import annotations

import itertools
import threading

import pytest

import tensorplay as tp

LAUNCHES = 150  # per thread: enough that two interleaved replays would lose an update


def _in_threads(work, count: int = 2, stream=None) -> None:
    """Run ``work(i)`` in ``count`` threads, each on a stream of its own (or all
    on ``stream``), started together; raise what any of them raised, or fail if
    one hangs."""
    start = threading.Barrier(count)
    errors: list = []

    def run(i: int) -> None:
        try:
            s = stream or tp.cuda.Stream()
            with tp.cuda.stream(s):
                start.wait()
                work(i)
            s.synchronize()
        except Exception as e:  # surfaced below, with the thread's number
            errors.append((i, e))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a launch never ended: a deadlock"
    assert errors == []
    tp.cuda.synchronize()


def _increment_graph(stages: int = 4):
    """A graph whose nodes read ``buf``, carry ``buf + 1`` through several
    temporaries and write it back: an increment that spans nodes, so that
    another launch's nodes run between them would lose one."""
    buf = tp.zeros(4, dtype=tp.float64)
    temps = [tp.zeros(4, dtype=tp.float64) for _ in range(stages)]
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        temps[0].copy_(buf + 1.0)
        for a, b in itertools.pairwise(temps):
            b.copy_(a * 1.0)
        buf.copy_(temps[-1])
    g.replay()  # warmed up
    buf.zero_()
    tp.cuda.synchronize()
    return g, buf


def test_replays_of_one_graph_from_two_threads_run_one_at_a_time():
    g, buf = _increment_graph()
    counts = [0, 0]

    def work(i: int) -> None:
        for _ in range(LAUNCHES):
            g.replay()
            counts[i] += 1

    _in_threads(work)
    assert buf.tolist() == [float(sum(counts))] * 4


def test_replays_of_a_graph_with_a_while_node_from_two_threads_run_one_at_a_time():
    # Each replay runs the loop three passes from a reset counter: a replay whose nodes ran
    # inside another's would reset its counter or its handle, and the passes would not add up.
    total, i, go = tp.zeros(1, dtype=tp.float64), tp.zeros(1, dtype=tp.float64), tp.ones(1, dtype=tp.bool)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        i.zero_()
        go.fill_(True)
        with g.while_(go, max_iters=10):
            i.add_(1.0)
            total.copy_(total + 1.0)
            tp.lt(i, 3.0, out=go)
    g.replay()
    total.zero_()
    tp.cuda.synchronize()
    counts = [0, 0]

    def work(k: int) -> None:
        for _ in range(LAUNCHES):
            g.replay()
            counts[k] += 1

    _in_threads(work)
    assert total.item() == 3.0 * sum(counts)
    assert g.hit_limits() == []


def test_stage_and_launch_from_two_threads_gives_each_launch_its_own_inputs():
    # Thread 0 stages ones, thread 1 stages 65536s into the same static input of a
    # graph that adds it to a total: the total's low and high parts count each
    # thread's launches, so a launch that ran the other thread's input shows.
    x, acc = tp.zeros(1, dtype=tp.float64), tp.zeros(1, dtype=tp.float64)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        acc.copy_(acc + x)
    inputs = [tp.full((1,), 1.0, dtype=tp.float64), tp.full((1,), 65536.0, dtype=tp.float64)]
    g.stage_and_launch([x], [tp.zeros(1, dtype=tp.float64)])  # builds the staged graph
    tp.cuda.synchronize()
    assert acc.item() == 0.0

    def work(i: int) -> None:
        for _ in range(LAUNCHES):
            g.stage_and_launch([x], [inputs[i]])

    _in_threads(work)
    total = int(acc.item())
    assert (total % 65536, total // 65536) == (LAUNCHES, LAUNCHES)


@pytest.mark.parametrize("one_stream", [True, False], ids=["one-stream", "a-stream-each"])
def test_replays_from_two_threads_under_the_hazard_check(one_stream):
    # The stream orders the replays for the check, or the order of one graph's launches does;
    # the simulator still runs each thread's in that thread. (Captured under the check: it
    # knows what the replays touch.)
    counts = [0, 0]
    with tp.cuda.sanitize(seed=11):
        g, buf = _increment_graph()

        def work(i: int) -> None:
            for _ in range(LAUNCHES // 3):
                g.replay()
                counts[i] += 1

        _in_threads(work, stream=tp.cuda.Stream() if one_stream else None)
    assert buf.tolist() == [float(sum(counts))] * 4
