"""Random sequences of graph work, checked after every step against a NumPy model.

The steps: eager tensors made, changed and deleted; captures (into a fresh pool,
a shared ``graph_pool_handle()`` or another graph's pool) of bodies that
compute, write an eager tensor in place, fork a second stream and join it,
branch (if node), loop (while node), or try a second capture on the capturing
stream, which must fail and leave the first intact; captures whose body raises,
which must be discarded; replays on the current or another stream; deletes of
outputs; ``reset()`` (refused while an output lives); graphs dropped without
``reset()``.

The model holds what every live tensor must hold, in float64. Eager tensors
keep their values until an eager op or a replay writes them; a graph's outputs
hold the values of its last replay (unknown before the first). Graphs sharing a
pool are replayed in any order here, so replaying one leaves unknown the outputs
of the graphs captured after it into that pool (they may lie in its
temporaries), and nothing else: an eager tensor or another pool's output that
changes is a bug. After every step no capture may be left in progress; at the
end, with everything deleted and every graph reset, memory and the allocator's
tables are back where they started.

Values are small multiples of powers of two, which float32 holds exactly unless
halvings pile up; the comparison allows for that (1e-6), not for a wrong value.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test
from stress_support import Snapshot, assert_no_capture, hypothesis_settings

import tensorplay as tp

N = 4  # elements per tensor: the simulator runs one Python thread per CUDA thread
MAX_EAGER = 6
MAX_GRAPHS = 4
SCALES = (2.0, -1.0, 0.5, -2.0)
SHIFTS = (1.0, -3.0, 0.0, 2.5)
THRESHOLDS = (0.5, -1.5, 2.0)


class Boom(Exception):
    """Raised by a capture body on purpose."""


class Slot:
    """A tensor and the float64 values it must hold (None while unknown)."""

    __slots__ = ("tensor", "value")

    def __init__(self, tensor: tp.Tensor, value: np.ndarray | None) -> None:
        self.tensor, self.value = tensor, value


def _set(out: dict[str, Slot], name: str, value) -> None:
    """The model of an output after a replay (if the output is still alive)."""
    if name in out:
        out[name].value = np.asarray(value, np.float64)


class Recorded:
    """A captured graph as the model sees it."""

    def __init__(self, graph, pool, order: int, outputs: dict[str, Slot], replay: Callable) -> None:
        self.graph = graph  # None once dropped without reset()
        self.pool = pool  # the model's key for its memory pool
        self.order = order  # capture order, for graphs that share the pool
        self.outputs = outputs
        self.replay = replay  # replay(outputs): update the model as a replay does


# -- capture bodies: issue the work, return the outputs and the model of a replay --
def body_compute(g, x: Slot, side, k: int):
    a, b = SCALES[k % 4], SHIFTS[k % 4]
    t = x.tensor * a
    y = t + b
    del t  # a temporary: its block goes back to the graph's pool

    def replay(out):
        _set(out, "y", x.value * a + b)

    return {"y": y}, replay


def body_in_place(g, x: Slot, side, k: int):
    c = SHIFTS[k % 4]
    x.tensor.add_(c)
    y = x.tensor * 2.0

    def replay(out):
        x.value = x.value + c
        _set(out, "y", x.value * 2.0)

    return {"y": y}, replay


def body_fork_join(g, x: Slot, side, k: int):
    a = SCALES[k % 4]
    cur = tp.cuda.current_stream()
    side.wait_stream(cur)  # side joins the capture
    with tp.cuda.stream(side):
        w = x.tensor * a
        u = w + 1.0
        v = u * 2.0
        del u
    cur.wait_stream(side)  # and is joined back
    z = v - x.tensor
    del v

    def replay(out):
        _set(out, "w", x.value * a)
        _set(out, "z", (x.value * a + 1.0) * 2.0 - x.value)

    return {"w": w, "z": z}, replay


def body_if(g, x: Slot, side, k: int):
    t, c = THRESHOLDS[k % 3], SCALES[k % 4]
    flag = tp.empty(1, dtype=tp.bool)
    tp.gt(x.tensor.max(), t, out=flag)
    y = x.tensor * 1.0
    with g.if_(flag):
        y.copy_(y * c + 1.0)  # a temporary allocated inside the body

    def replay(out):
        taken = x.value.astype(np.float32).max() > t  # as the device compares, in float32
        _set(out, "y", x.value * c + 1.0 if taken else x.value.copy())

    return {"y": y}, replay


def body_while(g, x: Slot, side, k: int):
    passes, writes_x = k % 4, k % 2 == 1
    counter = tp.zeros(1)
    flag = tp.empty(1, dtype=tp.bool)
    tp.lt(counter, passes, out=flag)
    y = x.tensor * 0.0
    with g.while_(flag):
        y.add_(x.tensor)
        if writes_x:
            x.tensor.sub_(0.5)
        counter.add_(1.0)
        tp.lt(counter, passes, out=flag)

    def replay(out):
        acc = np.zeros(N)
        for _ in range(passes):
            acc = acc + x.value
            if writes_x:
                x.value = x.value - 0.5
        _set(out, "y", acc)

    return {"y": y}, replay


def body_refused_nested(g, x: Slot, side, k: int):
    """A second capture begun on the capturing stream fails; this one goes on."""
    t = x.tensor + 1.0
    other = tp.cuda.CUDAGraph()
    pool = g if k % 2 else None  # the failing capture asks for this graph's own pool, or a fresh one
    with pytest.raises(tp.cuda.CaptureError, match="is already capturing a graph"):
        if k % 3 == 0:
            with tp.cuda.graph(other, pool=pool):  # this thread's side stream: the one capturing
                pass
        elif k % 3 == 1:
            other.capture_begin(pool=pool, stream=tp.cuda.current_stream())
        else:
            other.capture_begin(pool=pool)
    with pytest.raises(RuntimeError, match="needs a captured graph"):
        other.replay()
    u = t * 3.0  # temporaries after the failure must still come from this graph's pool
    del t
    y = u - 2.0
    del u

    def replay(out):
        _set(out, "y", (x.value + 1.0) * 3.0 - 2.0)

    return {"y": y}, replay


BODIES = (body_compute, body_in_place, body_fork_join, body_if, body_while, body_refused_nested)


class GraphMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.side = tp.cuda.Stream()
        self.handles = (tp.cuda.graph_pool_handle(), tp.cuda.graph_pool_handle())
        self.eager: dict[int, Slot] = {}
        self.records: list[Recorded] = []
        self.names = 0
        self.captures = 0
        self.snapshot = Snapshot.take(collect=False)  # the test collected before the first example

    # -- helpers -----------------------------------------------------------------
    def _pick(self, items: list, i: int):
        return items[i % len(items)]

    def _new_eager(self, tensor: tp.Tensor, value: np.ndarray) -> None:
        self.names += 1
        self.eager[self.names] = Slot(tensor, np.asarray(value, np.float64))

    def _add_record(self, g, pool_key, outputs: dict[str, tp.Tensor], replay: Callable) -> None:
        """Note a graph just captured, once its capture is seen to be over and
        every one of its outputs tracked (reset() is refused, naming them all)."""
        assert_no_capture()
        with pytest.raises(RuntimeError, match="already holds a capture"):
            g.capture_begin()
        n = len(outputs)
        with pytest.raises(RuntimeError, match=rf"reset\(\) while {n} tensor\(s\) allocated during the capture"):
            g.reset()
        self.captures += 1
        slots = {name: Slot(t, None) for name, t in outputs.items()}
        self.records.append(Recorded(g, pool_key, self.captures, slots, replay))

    def _replayable(self) -> list[Recorded]:
        return [r for r in self.records if r.graph is not None]

    def _known_outputs(self) -> list[Slot]:
        return [s for r in self.records for s in r.outputs.values() if s.value is not None]

    def _pool(self, choice: int, i: int):
        """(pool= argument, the model's key of that pool)."""
        if choice in (1, 2):
            handle = self.handles[choice - 1]
            return handle, ("shared", choice)
        graphs = self._replayable()
        if choice == 3 and graphs:
            r = self._pick(graphs, i)
            return r.graph, r.pool
        return None, object()

    # -- eager work ----------------------------------------------------------------
    @precondition(lambda self: len(self.eager) < MAX_EAGER)
    @rule(values=st.lists(st.integers(-4, 4), min_size=N, max_size=N))
    def make_eager(self, values):
        a = np.array(values, np.float32)
        self._new_eager(tp.tensor(a), a)

    @precondition(lambda self: self.eager)
    @rule(
        op=st.sampled_from(["axpb", "add_", "mul_", "fill_", "copy_ from an output", "from an output"]),
        on=st.sampled_from(["current", "side", "capture"]),
        i=st.integers(0, 99),
        j=st.integers(0, 99),
        k=st.integers(0, 3),
    )
    def eager_op(self, op, on, i, j, k):
        """An op on the current stream, the side stream or this thread's capture
        stream (whose cached blocks a capture that lost its pool would reuse)."""
        if on == "current":
            self._eager_op(op, i, j, k)
            return
        s = self.side if on == "side" else tp.cuda.capture_stream()
        s.wait_stream(tp.cuda.current_stream())
        with tp.cuda.stream(s):
            self._eager_op(op, i, j, k)
        s.synchronize()

    def _eager_op(self, op, i, j, k):
        x = self._pick(list(self.eager.values()), i)
        outputs = self._known_outputs()
        if op == "axpb" and len(self.eager) < MAX_EAGER:
            self._new_eager(x.tensor * SCALES[k] + SHIFTS[k], x.value * SCALES[k] + SHIFTS[k])
        elif op == "add_":
            x.tensor.add_(SHIFTS[k])
            x.value = x.value + SHIFTS[k]
        elif op == "mul_":
            x.tensor.mul_(-1.0 if k % 2 else 0.5)
            x.value = x.value * (-1.0 if k % 2 else 0.5)
        elif op == "fill_":
            x.tensor.fill_(SHIFTS[k])
            x.value = np.full(N, SHIFTS[k])
        elif op == "copy_ from an output" and outputs:
            o = self._pick(outputs, j)
            x.tensor.copy_(o.tensor)
            x.value = o.value.copy()
        elif op == "from an output" and outputs and len(self.eager) < MAX_EAGER:
            o = self._pick(outputs, j)
            self._new_eager(o.tensor + SHIFTS[k], o.value + SHIFTS[k])

    @precondition(lambda self: self.eager)
    @rule(i=st.integers(0, 99))
    def delete_eager(self, i):
        del self.eager[self._pick(sorted(self.eager), i)]  # graphs that read it keep it alive

    # -- graphs --------------------------------------------------------------------
    @precondition(lambda self: self.eager and len(self.records) < MAX_GRAPHS)
    @rule(
        body=st.sampled_from(BODIES),
        pool=st.integers(0, 3),
        i=st.integers(0, 99),
        j=st.integers(0, 99),
        k=st.integers(0, 11),
    )
    def capture(self, body, pool, i, j, k):
        x = self._pick(list(self.eager.values()), i)
        pool_arg, pool_key = self._pool(pool, j)
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g, pool=pool_arg):
            outputs, replay = body(g, x, self.side, k)
        self._add_record(g, pool_key, outputs, replay)

    @precondition(lambda self: self.eager)
    @rule(
        where=st.sampled_from(["body", "if body", "while body", "host readback"]),
        pool=st.integers(0, 3),
        i=st.integers(0, 99),
        j=st.integers(0, 99),
        again=st.booleans(),
    )
    def capture_that_fails(self, where, pool, i, j, again):
        """The capture is discarded; the graph, the stream and the pool stay usable."""
        x = self._pick(list(self.eager.values()), i)
        pool_arg, pool_key = self._pool(pool, j)
        g = tp.cuda.CUDAGraph()
        expected = (tp.cuda.CaptureError, "is capturing a graph") if where == "host readback" else (Boom, "^boom$")
        with pytest.raises(expected[0], match=expected[1]):
            with tp.cuda.graph(g, pool=pool_arg):
                y = x.tensor * 2.0
                flag = tp.gt(y.max(), 0.0).reshape(1)
                if where == "host readback":
                    y.tolist()
                elif where == "body":
                    raise Boom("boom")
                with g.if_(flag) if where == "if body" else g.while_(flag):
                    y.add_(1.0)
                    raise Boom("boom")
        del y, flag
        assert_no_capture()
        with pytest.raises(RuntimeError, match="needs a captured graph"):
            g.replay()
        if again and len(self.records) < MAX_GRAPHS:  # the same CUDAGraph captures again
            with tp.cuda.graph(g, pool=pool_arg):
                outputs, replay = body_compute(g, x, self.side, j)
            self._add_record(g, pool_key, outputs, replay)

    @precondition(lambda self: any(r.graph is not None for r in self.records))
    @rule(i=st.integers(0, 99), on_side=st.booleans())
    def replay(self, i, on_side):
        r = self._pick(self._replayable(), i)
        if on_side:
            cur = tp.cuda.current_stream()
            self.side.wait_stream(cur)
            r.graph.replay(self.side)
            cur.wait_stream(self.side)
        else:
            r.graph.replay()
        r.replay(r.outputs)
        for q in self.records:  # graphs captured later into this pool may use its temporaries
            if q.pool == r.pool and q.order > r.order:
                for s in q.outputs.values():
                    s.value = None

    @precondition(lambda self: any(r.outputs for r in self.records))
    @rule(i=st.integers(0, 99), j=st.integers(0, 99))
    def delete_output(self, i, j):
        r = self._pick([r for r in self.records if r.outputs], i)
        del r.outputs[self._pick(sorted(r.outputs), j)]
        if r.graph is None and not r.outputs:
            self.records.remove(r)

    @precondition(lambda self: any(r.graph is not None for r in self.records))
    @rule(i=st.integers(0, 99))
    def reset(self, i):
        r = self._pick(self._replayable(), i)
        if r.outputs:  # refused, and the graph stays as it was
            n = len(r.outputs)
            with pytest.raises(RuntimeError, match=rf"reset\(\) while {n} tensor\(s\) allocated during the capture"):
                r.graph.reset()
            return
        r.graph.reset()
        with pytest.raises(RuntimeError, match="needs a captured graph"):
            r.graph.replay()
        self.records.remove(r)

    @precondition(lambda self: any(r.graph is not None for r in self.records))
    @rule(i=st.integers(0, 99))
    def drop_graph(self, i):
        """The CUDAGraph goes without reset(); its outputs stay valid."""
        r = self._pick(self._replayable(), i)
        r.graph = None
        if not r.outputs:
            self.records.remove(r)

    # -- checks ----------------------------------------------------------------------
    @invariant()
    def every_tensor_holds_its_value(self):
        assert_no_capture()
        slots = [(f"eager tensor {n}", s) for n, s in self.eager.items()]
        for r in self.records:
            slots += [(f"output {name} of capture {r.order}", s) for name, s in r.outputs.items()]
        for what, s in slots:
            if s.value is not None:
                np.testing.assert_allclose(s.tensor.numpy().astype(np.float64), s.value, 1e-6, 1e-6, err_msg=what)

    def _delete_everything(self) -> None:
        self.eager.clear()
        for r in self.records:
            r.outputs.clear()
        for r in self.records:
            if r.graph is not None:
                r.graph.reset()
        self.records.clear()

    def teardown(self):
        self._delete_everything()  # in a call of its own: no loop variable keeps a graph alive here
        assert_no_capture()
        self.snapshot.assert_returned("the sequence, with everything deleted and every graph reset")


def test_random_sequences_of_capture_replay_reset_and_delete():
    gc.collect()  # earlier tests' garbage, freed now rather than in the middle of an example
    run_state_machine_as_test(GraphMachine, settings=hypothesis_settings(examples=(200, 1000), steps=(25, 50)))
