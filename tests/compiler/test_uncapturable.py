"""Functions a CUDA graph cannot capture: generator functions are refused,
a function that reads a tensor's value on the host runs eagerly (one warning
naming the line), and the runtime stays usable."""

from __future__ import annotations

import inspect
import re
import warnings

import numpy as np
import pytest
from helpers import assert_close

import tensorplay as tp

GENERATOR = r"cannot compile generator function .*: a generator runs its body only as it is iterated"


def _doubles(x):
    yield x * 2.0
    yield x + 1.0


def test_a_generator_function_is_refused_when_compiled():
    # Issue 15, item 7: from the third call on, the same exhausted generator came back.
    with pytest.raises(TypeError, match=GENERATOR + r".* return a tuple or list"):
        tp.compile(_doubles)
    with pytest.raises(TypeError, match=GENERATOR):
        tp.compile(warmup=0)(_doubles)

    async def coroutine(x):
        return x

    with pytest.raises(TypeError, match=r"cannot compile coroutine function .*coroutine"):
        tp.compile(coroutine)


def test_a_function_that_returns_a_generator_is_refused_at_its_first_call():
    class Steps:
        def __call__(self, x):
            return (x * k for k in (1.0, 2.0))

    for warmup in (0, 1):
        f = tp.compile(Steps(), warmup=warmup)
        for _ in range(2):  # every call, and nothing is kept half-made
            with pytest.raises(TypeError, match=r"compiled Steps returned a generator, .* return a tuple or list"):
                f(tp.ones(2))
        assert f.graph(tp.ones(2)) is None
    assert [t.tolist() for t in Steps()(tp.ones(2))] == [[1.0, 1.0], [2.0, 2.0]]


def _branchy(x):
    if x.sum().item() > 100:  # reads the value on the host: a graph cannot capture it
        return x
    return x * 2.0


BRANCH_LINE = inspect.getsourcelines(_branchy)[1] + 1


def _no_capture_left():
    assert not tp.cuda.graphs.is_current_stream_capturing()
    assert not tp.cuda.capture_stream().is_capturing()


@pytest.mark.parametrize("warmup", [0, 1, 2])
def test_a_host_read_runs_the_signature_eagerly_with_one_warning(warmup):
    # Issue 15, item 14: after one call every call raised "...do it before capture_begin() or after capture_end()".
    f = tp.compile(_branchy, warmup=warmup)
    where = rf"test_uncapturable\.py:{BRANCH_LINE} \(if x\.sum\(\)\.item\(\) > 100:"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for k in range(6):  # the branch taken changes from call to call, as eagerly
            v = np.full(4, 50.0 if k % 2 else 1.0 + k, np.float32)
            x = tp.tensor(v)
            out = f(x)
            if k % 2:
                assert out is x
            else:
                assert_close(out, v.astype(np.float64) * 2.0)
    messages = [str(w.message) for w in seen]
    assert len(messages) == 1, messages
    assert seen[0].filename == __file__  # points at the call
    assert messages[0].startswith("compiled _branchy reads a tensor's value on the host")
    assert re.search(where, messages[0]), messages[0]
    assert "run eagerly from now on" in messages[0] and "capture_begin" not in messages[0]
    assert f.graph(tp.ones(4)) is None
    _no_capture_left()
    x = tp.tensor([1.0, 2.0])  # the runtime goes on: an eager op, a readback, a capture and replays
    assert (x + 1.0).tolist() == [2.0, 3.0]
    h = tp.compile(lambda t: t * 3.0, warmup=0)
    assert h(x).tolist() == [3.0, 6.0] and h(tp.ones(2)).tolist() == [3.0, 3.0] and h.graph(x) is not None


def test_a_host_read_with_autograd_recording_runs_eagerly_too():
    f = tp.compile(_branchy)
    for k in range(3):
        w = tp.full((3,), 1.0 + k).requires_grad_()
        with (
            pytest.warns(UserWarning, match="reads a tensor's value on the host")
            if k == 1
            else warnings.catch_warnings()
        ):
            out = f(w)
        out.sum().backward()
        assert w.grad.tolist() == [2.0] * 3
    _no_capture_left()


def test_other_errors_during_the_capture_propagate_and_the_next_call_captures_again():
    calls = []

    def fn(x):
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("only this once")
        return x + 1.0

    f = tp.compile(fn)
    assert f(tp.ones(2)).tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match="only this once"):
        f(tp.ones(2))
    _no_capture_left()
    assert f(tp.ones(2)).tolist() == [2.0, 2.0] and f.graph(tp.ones(2)) is not None
