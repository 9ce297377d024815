"""Outputs of compiled and graphed functions used after a later call overwrote
them: every use raises StaleOutputError, a clone survives, the check can be
turned off."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler import StaleOutputError

STALE = "is an output of compiled double, and a later call overwrote it"


def double(x):
    return x * 2


@pytest.fixture
def compiled():
    f = tp.compile(double)
    x = tp.tensor([1.0, 2.0, 3.0])
    f(x)  # the warm-up runs eagerly: its result is fresh memory, never stale
    return f, x


@pytest.mark.parametrize(
    "use",
    [
        lambda t: t.numpy(),
        lambda t: t.tolist(),
        lambda t: t + 1,
        lambda t: t[0],
        lambda t: t.sum(),
        lambda t: tp.add(t, 1),
        lambda t: tp.add(tp.ones(3), 1, out=t),
        lambda t: t.copy_(tp.ones(3)),
        lambda t: np.asarray(t),
        lambda t: t.__cuda_array_interface__,
        lambda t: t.data_ptr(),
    ],
    ids=["numpy", "tolist", "op", "index", "sum", "function", "out=", "copy_", "asarray", "interface", "data_ptr"],
)
def test_every_use_of_an_overwritten_output_raises(compiled, use):
    f, x = compiled
    old = f(x)  # captured
    kept = old.clone()
    new = f(tp.tensor([5.0, 6.0, 7.0]))  # a replay rewrites the memory old shows
    with pytest.raises(StaleOutputError, match=STALE) as info:
        use(old)
    assert ".clone() an output that must outlive the next call" in str(info.value)
    assert new.tolist() == [10.0, 12.0, 14.0] and kept.tolist() == [2.0, 4.0, 6.0]
    assert "stale output, shape (3,), float32" in repr(old)  # printing says what happened
    assert old.shape == (3,) and old.dtype == tp.float32  # what describes it still reads


def test_the_latest_output_stays_usable(compiled):
    f, x = compiled
    outs = [f(x) for _ in range(3)]
    assert outs[-1].tolist() == [2.0, 4.0, 6.0]
    for old in outs[:-1]:
        with pytest.raises(StaleOutputError):
            old.tolist()


def test_outputs_in_tuples_and_dicts_all_go_stale():
    f = tp.compile(lambda x: {"a": x + 1, "b": (x - 1, x * 3)})
    x = tp.ones(2)
    f(x)
    first = f(x)
    second = f(x)
    for t in (first["a"], *first["b"]):
        with pytest.raises(StaleOutputError):
            t.numpy()
    assert second["b"][1].tolist() == [3.0, 3.0]


def test_the_check_can_be_turned_off(compiled):
    f, x = compiled
    tp.compiler.config.check_stale_outputs = False
    try:
        old = f(x)
        f(tp.zeros(3))
        assert old.tolist() == [0.0, 0.0, 0.0]  # no error: the graph's memory, as rewritten
    finally:
        tp.compiler.config.check_stale_outputs = True


def test_graphed_callables_outputs_go_stale_at_the_next_forward():
    layer = tp.nn.Linear(3, 2)
    graphed = tp.cuda.make_graphed_callables(layer, (tp.zeros(4, 3),))
    first = graphed(tp.ones(4, 3))
    ref = first.numpy()
    second = graphed(tp.ones(4, 3))
    with pytest.raises(StaleOutputError, match="is an output of graphed Linear"):
        first.numpy()
    np.testing.assert_array_equal(second.numpy(), ref)
