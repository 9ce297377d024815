"""Capture and reset, over and over: nothing may grow.

Each cycle captures one kind of graph (plain, two graphs sharing a pool, if,
while, a do-while driven by a kernel, a forked stream, a capture that survives
a refused nested capture_begin, captures that fail and are discarded, a graph
dropped without reset), replays it and checks its values, deletes its outputs
and resets it. After every cycle the bytes allocated and the allocator's
per-capture and per-pool tables (and, on the simulator, its conditional handles
and device buffers) must be as before the first; every few hundred cycles, and
at the end, the reserved bytes too (after ``empty_cache()``).

CI runs 150 cycles; ``TENSORPLAY_STRESS=full`` (``scripts/gpu-check``) runs the
10 000-cycle version, marked ``slow``.
"""

from __future__ import annotations

import weakref

import numpy as np
import pytest
from stress_support import FULL, Snapshot, assert_no_capture, table_sizes

import tensorplay as tp

N = 4


class Boom(Exception):
    """Raised by a capture body on purpose."""


@tp.jit
def count_down(n, handle):
    """The whole loop test of a do-while: n -= 1, go on while n > 0."""
    if tp.cuda.grid(1) == 0:
        n[0] -= 1
        tp.cuda.set_conditional(handle, np.uint32(1 if n[0] > 0 else 0))


class Cycles:
    """The cycle kinds, sharing the eager tensors they read."""

    def __init__(self) -> None:
        self.x = tp.tensor(np.array([1.0, -2.0, 3.0, 0.5], np.float32))
        self.n = tp.zeros(1, dtype=tp.int32)
        self.side = tp.cuda.Stream()
        self.pool = tp.cuda.graph_pool_handle()
        self.kinds = sorted(name for name in dir(self) if name.startswith("cycle_"))  # names: no cycle through self

    def check(self, t: tp.Tensor, expected) -> None:
        np.testing.assert_array_equal(t.numpy(), np.asarray(expected, np.float32))

    def cycle_plain(self, i: int) -> None:
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            y = self.x * 3.0 + 1.0
        g.replay()
        self.check(y, self.x.numpy() * 3.0 + 1.0)
        with pytest.raises(RuntimeError, match=r"reset\(\) while 1 tensor\(s\)"):
            g.reset()
        del y
        g.reset()

    def cycle_shared_pool(self, i: int) -> None:
        g1, g2 = tp.cuda.CUDAGraph(), tp.cuda.CUDAGraph()
        with tp.cuda.graph(g1, pool=self.pool):
            y = self.x * 2.0
        with tp.cuda.graph(g2, pool=self.pool):
            z = self.x + 1.0
        g1.replay()
        g2.replay()
        self.check(y, self.x.numpy() * 2.0)
        self.check(z, self.x.numpy() + 1.0)
        del y, z
        g1.reset()
        g2.reset()

    def cycle_if(self, i: int) -> None:
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            flag = tp.gt(self.x.max(), 2.0).reshape(1)
            y = self.x * 1.0
            with g.if_(flag):
                y.copy_(y * 2.0 + 1.0)
            del flag
        g.replay()
        self.check(y, self.x.numpy() * 2.0 + 1.0)
        del y
        g.reset()

    def cycle_while(self, i: int) -> None:
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            k = tp.zeros(1)
            flag = tp.lt(k, 2.0)
            y = self.x * 0.0
            with g.while_(flag):
                y.add_(self.x)
                k.add_(1.0)
                tp.lt(k, 2.0, out=flag)
            del k, flag
        g.replay()
        self.check(y, self.x.numpy() * 2.0)
        del y
        g.reset()

    def cycle_do_while_kernel(self, i: int) -> None:
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            y = self.x * 0.0
            with g.while_() as handle:
                y.add_(1.0)
                count_down[1, 1](self.n, handle)
        self.n.fill_(3)
        g.replay()
        self.check(y, [3.0] * N)
        del y
        g.reset()

    def cycle_fork_join(self, i: int) -> None:
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            cur = tp.cuda.current_stream()
            self.side.wait_stream(cur)
            with tp.cuda.stream(self.side):
                w = self.x * 2.0
            cur.wait_stream(self.side)
            z = w + self.x
        g.replay()
        self.check(w, self.x.numpy() * 2.0)
        self.check(z, self.x.numpy() * 3.0)
        with pytest.raises(RuntimeError, match=r"reset\(\) while 2 tensor\(s\)"):
            g.reset()  # w, made on the forked stream, is the graph's too
        del w, z
        g.reset()

    def cycle_refused_nested_capture(self, i: int) -> None:
        g, other = tp.cuda.CUDAGraph(), tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            t = self.x + 1.0
            with pytest.raises(tp.cuda.CaptureError, match="already capturing a graph"):
                if i % 2:
                    with tp.cuda.graph(other, pool=g):
                        pass
                else:
                    other.capture_begin()
            y = t * 2.0
            del t
        g.replay()
        self.check(y, (self.x.numpy() + 1.0) * 2.0)
        del y
        g.reset()

    def cycle_raising_bodies(self, i: int) -> None:
        g = tp.cuda.CUDAGraph()
        with pytest.raises(Boom):
            with tp.cuda.graph(g, pool=self.pool if i % 2 else None):
                y = self.x * 2.0
                flag = tp.gt(y.max(), 0.0).reshape(1)
                with g.if_(flag) if i % 4 < 2 else g.while_(flag):
                    y.add_(1.0)
                    raise Boom()
        with pytest.raises(tp.cuda.CaptureError, match="is capturing a graph"):
            with tp.cuda.graph(g):
                z = self.x * 2.0
                z.tolist()
        del y, flag, z
        with pytest.raises(RuntimeError, match="needs a captured graph"):
            g.replay()

    def cycle_graph_dropped_without_reset(self, i: int) -> None:
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            y = self.x - 1.0
        g.replay()
        ref = weakref.ref(g)
        del g  # its pool lives on for y, then goes back with it
        assert ref() is None, "a CUDAGraph outlived its last reference"
        self.check(y, self.x.numpy() - 1.0)
        del y


def run_cycles(count: int) -> None:
    cycles = Cycles()
    for kind in cycles.kinds:  # kernels loaded, first allocations made
        getattr(cycles, kind)(0)
    before = Snapshot.take()  # with empty_cache(): the baseline of assert_returned
    for kind in cycles.kinds:  # the eager blocks every kind caches (a while loop's counter) made again
        getattr(cycles, kind)(0)
    allocated, tables = tp.cuda.memory_allocated(), table_sizes()
    assert allocated == before.allocated
    for i in range(count):
        kind = cycles.kinds[i % len(cycles.kinds)]
        getattr(cycles, kind)(i)
        assert tp.cuda.memory_allocated() == allocated, f"cycle {i} ({kind}) left memory allocated"
        now = table_sizes()
        assert now == tables, f"cycle {i} ({kind}): tables (before, now): " + str(
            {k: (tables[k], v) for k, v in now.items() if v != tables[k]}
        )
        if i % 500 == 499:
            before.assert_returned(f"{i + 1} cycles")
    assert_no_capture()
    before.assert_returned(f"{count} cycles")


def test_capture_reset_cycles_leak_nothing():
    run_cycles(150)


@pytest.mark.slow
@pytest.mark.skipif(not FULL, reason="10 000 cycles: run with TENSORPLAY_STRESS=full (scripts/gpu-check does)")
def test_ten_thousand_capture_reset_cycles_leak_nothing():
    run_cycles(10_000)
