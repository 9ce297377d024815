"""Containers of tensors in and out of a compiled function: tuples, lists,
dicts (ordered and default), namedtuples, nested. Outputs in any of them go
stale as a plain tuple's do; tensors in any of them are arguments keyed by
shape and dtype; a signature limit warning names what differs."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from helpers import assert_close

import tensorplay as tp
from tensorplay.compiler import StaleOutputError

Pair = collections.namedtuple("Pair", "a b")
Point = collections.namedtuple("Point", ["x", "y"])


def _counted(fn):
    runs = []

    def wrapped(*args, **kwargs):
        runs.append(1)
        return fn(*args, **kwargs)

    return wrapped, runs


def _values(seed):
    return np.random.default_rng(seed).uniform(-2, 2, 3).astype(np.float32)


RESULTS = {
    "namedtuple": lambda x: Pair(x * 2.0, x + 1.0),
    "nested": lambda x: {"p": [Pair(x * 2.0, (x + 1.0,))]},
    "ordered": lambda x: collections.OrderedDict(a=x * 2.0, b=x + 1.0),
    "default": lambda x: collections.defaultdict(list, a=x * 2.0, b=x + 1.0),
    "tuple": lambda x: (x * 2.0, x + 1.0),
}


def _parts(out):
    """The two tensors of a RESULTS value, in order, and its container types from the outside in."""
    if isinstance(out, dict) and "p" in out:
        inner = out["p"][0]
        return [inner.a, inner.b[0]], [type(out), type(out["p"]), type(inner), type(inner.b)]
    if isinstance(out, dict):
        return [out["a"], out["b"]], [type(out)]
    return list(out), [type(out)]


@pytest.mark.parametrize("kind", list(RESULTS))
def test_outputs_in_every_container_go_stale_as_a_tuples_do(kind):
    # Issue 15, item 4: a namedtuple's outputs were never stale; o2.a silently held call 3's values.
    fn = RESULTS[kind]
    f = tp.compile(fn)
    f(tp.tensor(_values(0)))
    o2 = f(tp.tensor(_values(1)))
    o3 = f(tp.tensor(_values(2)))
    parts2, types2 = _parts(o2)
    parts3, types3 = _parts(o3)
    assert types2 == types3 == _parts(fn(tp.ones(3)))[1]  # the same containers as eagerly
    for t in parts2:
        with pytest.raises(StaleOutputError, match="a later call overwrote it"):
            t.numpy()
    v = _values(2).astype(np.float64)
    assert_close(parts3[0], v * 2.0)
    assert_close(parts3[1], v + 1.0)
    if kind == "default":
        assert o3.default_factory is list and o3["missing"] == []


def test_other_objects_returned_run_eagerly_with_a_warning():
    class Box:
        def __init__(self, t):
            self.t = t

    f = tp.compile(lambda x: Box(x * 2.0))
    outs = []
    with pytest.warns(UserWarning, match=r"returns a Box, which its graph cannot hand out afresh at each call"):
        for seed in range(4):
            outs.append(f(tp.tensor(_values(seed))))
    for seed, out in enumerate(outs):  # each call's own, never overwritten
        assert_close(out.t, _values(seed).astype(np.float64) * 2.0)
    assert f.graph(tp.ones(3)) is None


def test_tensors_in_a_namedtuple_argument_are_keyed_by_shape_and_dtype():
    # Issue 15, item 13: every call was a new signature holding its tensors, until the limit.
    fn, runs = _counted(lambda p, scale: (p.a * scale + p.b, Pair(p.b.sum(), None)))
    f = tp.compile(fn)
    for seed in range(40):
        a, b = _values(seed), _values(seed + 100)
        out, pair = f(Pair(tp.tensor(a), tp.tensor(b)), 3.0)
        assert_close(out, a.astype(np.float64) * 3.0 + b)
        np.testing.assert_allclose(pair.a.item(), b.astype(np.float64).sum(), rtol=1e-5)
        assert pair.b is None and type(pair) is Pair
    assert len(runs) == 2  # a warm-up and a capture; 38 replays of one graph
    g = f.graph(Pair(tp.ones(3), tp.ones(3)), 3.0)
    assert g is not None and f.graph(Pair(tp.ones(4), tp.ones(4)), 3.0) is None
    assert f.graph(Point(tp.ones(3), tp.ones(3)), 3.0) is None  # another namedtuple type: another signature


def test_tensors_in_ordered_dicts_and_nested_namedtuples_are_staged_and_written_back():
    def bump(state):
        state["inner"].x.add_(1.0)
        return state["inner"].x + state["inner"].y

    f = tp.compile(bump)
    for seed in range(4):
        x, y = _values(seed), _values(seed + 10)
        tx = tp.tensor(x)
        out = f(collections.OrderedDict(inner=Point(tx, tp.tensor(y))))
        assert_close(tx, x.astype(np.float64) + 1.0)  # the in-place change reached the caller's tensor
        assert_close(out, x.astype(np.float64) + 1.0 + y)
    assert f.graph(collections.OrderedDict(inner=Point(tp.ones(3), tp.ones(3)))) is not None


def _limit(monkeypatch, n):
    from tensorplay.compiler.backends import cudagraphs

    monkeypatch.setattr(cudagraphs, "SIGNATURE_LIMIT", n)


def test_the_signature_limit_warning_names_the_shapes_that_differ(monkeypatch):
    _limit(monkeypatch, 2)
    f = tp.compile(lambda x, k: x * k, warmup=0)
    f(tp.ones(1), 2.0), f(tp.ones(2), 2.0)
    with pytest.warns(UserWarning, match=r"has seen 2 argument signatures, which differ in the shape of argument 0 "
                      r"\(\(1,\), \(2,\), \(3,\)\)"):  # fmt: skip
        assert f(tp.ones(3), 2.0).tolist() == [2.0] * 3


def test_the_signature_limit_warning_names_the_values_that_differ(monkeypatch):
    _limit(monkeypatch, 2)
    f = tp.compile(lambda x, k: x * k, warmup=0)
    f(tp.ones(2), 1.0), f(tp.ones(2), 2.0)
    with pytest.warns(
        UserWarning, match=r"differ in the value of argument 1 \(1\.0, 2\.0, 3\.0\).*pass argument 1 as a tensor"
    ):
        assert f(tp.ones(2), 3.0).tolist() == [3.0] * 2


def test_the_signature_limit_warning_names_objects_compared_by_identity(monkeypatch):
    class Holder:  # hashed by identity: every new one is a new signature
        def __init__(self, t):
            self.t = t

    _limit(monkeypatch, 2)
    f = tp.compile(lambda h: h.t + 1.0, warmup=0)
    f(Holder(tp.ones(2))), f(Holder(tp.ones(2)))
    identity = r"the value of argument 0 \(an instance of Holder, compared by identity.*the tensors of argument 0 in a"
    with pytest.warns(UserWarning, match=identity):
        assert f(Holder(tp.ones(2))).tolist() == [2.0] * 2
