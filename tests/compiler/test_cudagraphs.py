"""tp.compile(fn, backend="cudagraphs"): warm up, capture once per signature, replay."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from helpers import assert_close

import tensorplay as tp
from tensorplay.compiler import compile as tp_compile
from tensorplay.compiler import list_backends


def _rand(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(-2.0, 2.0, shape).astype(dtype)


def _counted(fn):
    """``fn`` and a list that grows each time its Python body runs."""
    runs = []

    def wrapped(*args, **kwargs):
        runs.append(1)
        return fn(*args, **kwargs)

    return wrapped, runs


def test_warm_up_then_one_capture_then_replays():
    fn, runs = _counted(lambda x, y: (x * y + 1.0, (x - y).sum()))
    f = tp_compile(fn, backend="cudagraphs")
    for seed in range(5):
        a, b = _rand(12, seed), _rand(12, seed + 100)
        prod, total = f(tp.tensor(a), tp.tensor(b))
        assert_close(prod, a.astype(np.float64) * b + 1)
        np.testing.assert_allclose(total.item(), (a.astype(np.float64) - b).sum(), rtol=1e-5)
    assert len(runs) == 2  # one eager warm-up, one capture; the rest are replays
    assert f.graph(tp.tensor(a), tp.tensor(b)) is not None


@pytest.mark.parametrize("warmup", [0, 2])
def test_warmup_calls(warmup):
    fn, runs = _counted(lambda x: x.exp())
    f = tp_compile(fn, warmup=warmup)
    x = tp.tensor(_rand(6))
    for i in range(warmup + 3):
        assert (f.graph(x) is not None) == (i > warmup)
        assert_close(f(x), np.exp(x.numpy().astype(np.float64)))
    assert len(runs) == warmup + 1


def test_outputs_are_overwritten_by_the_next_call_clone_keeps_them():
    f = tp_compile(lambda x: x * 2.0)
    f(tp.ones(4))
    first = f(tp.ones(4))
    kept = first.clone()
    second = f(tp.full((4,), 5.0))
    assert second.data_ptr() == f(tp.full((4,), 5.0)).data_ptr()  # the graph's static output, each call
    with pytest.raises(tp.compiler.StaleOutputError):  # tests/compiler/test_stale_outputs.py has the rest
        first.tolist()
    assert kept.tolist() == [2.0] * 4


def test_each_signature_gets_its_own_graph():
    fn, runs = _counted(lambda x: x + 1)
    f = tp_compile(fn, warmup=0)
    args = [tp.ones(4), tp.ones(5), tp.ones(4, dtype=tp.int64), tp.ones((2, 3)), tp.ones((3, 2)).t()]
    for _ in range(2):
        for x in args:
            np.testing.assert_array_equal(f(x).numpy(), x.numpy() + 1)
    assert len(runs) == len(args)  # one capture each, shapes, dtypes and strides told apart
    graphs = [f.graph(x) for x in args]
    assert len({id(g) for g in graphs}) == len(args)
    t = tp.tensor(_rand((3, 2), 3)).t()  # a transposed input: copied by copy_ at each replay
    assert_close(f(t), t.numpy() + 1)


def test_other_arguments_are_baked_into_the_capture():
    fn, runs = _counted(lambda x, scale, shift=0.0: x * scale + shift)
    f = tp_compile(fn, warmup=0)
    x = tp.tensor(_rand(5))
    for scale, shift in [(2.0, 0.0), (3.0, 1.0), (2.0, 0.0), (3.0, 1.0)]:
        assert_close(f(x, scale, shift=shift), x.numpy() * scale + shift)
    assert len(runs) == 2
    f(x, 2, shift=0.0)
    assert len(runs) == 3  # an int is not the float 2.0: another signature
    f(x, 2.0, shift=float("nan")), f(x, 2.0, shift=float("nan"))
    assert len(runs) == 4  # NaN != NaN, yet one signature
    with pytest.raises(TypeError, match="argument 1 is a ndarray, which is not hashable"):
        f(x, np.ones(2))
    with pytest.raises(TypeError, match="argument 'shift' is a set, which is not hashable"):
        f(x, 2.0, shift={1})


def test_nested_arguments_and_outputs():
    def fn(pair, extra, *, opts):
        a, b = pair
        out = {"sum": a + b, "parts": [a * opts["k"], extra.sum()], "label": opts["name"]}
        return out, None

    f = tp_compile(fn, warmup=1)
    for seed in range(3):
        a, b, c = _rand(4, seed), _rand(4, seed + 1), _rand((2, 2), seed + 2)
        out, none = f((tp.tensor(a), tp.tensor(b)), tp.tensor(c), opts={"k": 3.0, "name": "n"})
        assert none is None and out["label"] == "n"
        assert_close(out["sum"], a.astype(np.float64) + b)
        assert_close(out["parts"][0], a.astype(np.float64) * 3)
        np.testing.assert_allclose(out["parts"][1].item(), c.astype(np.float64).sum(), rtol=1e-5)


def test_a_function_of_no_tensors():
    f = tp_compile(lambda: tp.ones(4) * 2, warmup=0)
    for _ in range(2):
        assert f().tolist() == [2.0] * 4
    assert f.graph() is not None


def test_decorator_forms_and_reset():
    @tp_compile
    def f(x):
        return x - 1

    @tp_compile(backend="cudagraphs", warmup=0)
    def g(x):
        return x + 1

    x = tp.ones(3)
    assert f(x).tolist() == [0.0] * 3 and g(x).tolist() == [2.0] * 3
    assert f.__name__ == "f" and "cudagraphs, 1 graph(s)" in repr(g)
    g.reset()
    assert g.graph(x) is None
    assert g(x).tolist() == [2.0] * 3 and g.graph(x) is not None


def test_graphs_are_freed_with_the_compiled_function():
    f = tp_compile(lambda x: x * 3.0, warmup=0)
    x = tp.ones(8)
    f(x)
    ref = weakref.ref(f.graph(x))
    del f
    gc.collect()
    assert ref() is None


def test_unknown_backend_and_bad_arguments():
    assert list_backends() == ["cudagraphs"]
    with pytest.raises(ValueError, match="unknown compiler backend 'inductor'; the known backends are 'cudagraphs'"):
        tp_compile(lambda x: x, backend="inductor")
    with pytest.raises(TypeError, match="expected a callable to compile, got int"):
        tp_compile(3)
    with pytest.raises(ValueError, match="expected warmup to be a number of calls \\(0 or more\\), got -1"):
        tp_compile(lambda x: x, warmup=-1)


def _requires_grad(x):
    try:
        return x.requires_grad_()
    except AttributeError:
        pytest.skip("autograd is not there yet")


def test_inputs_that_require_grad_capture_the_forward_and_the_backward():
    fn, runs = _counted(lambda x: (x * x).sum())
    f = tp_compile(fn, warmup=0)
    w = _requires_grad(tp.ones(3))
    for _ in range(3):
        out = f(w)
        assert out.item() == 3.0
        out.backward()
    assert len(runs) == 1  # captured once (the backward by autograd, not by running fn), then replayed
    assert out.grad_fn.name.startswith("Graphed_")
    assert w.grad.tolist() == [6.0] * 3
    forward, backward = f.graph(w), f.graph(w, backward=True)
    assert forward is not None and backward is not None
    with tp.autograd.no_grad():
        f(w), f(w)
        assert len(runs) == 2  # no grad: a signature of its own, captured once, with no backward
        assert f.graph(w) not in (None, forward) and f.graph(w, backward=True) is None
    assert f.graph(tp.ones(3)) is None  # which arguments require grad is part of the signature too


@pytest.mark.parametrize("warmup", [0, 1])
def test_a_tensor_that_requires_grad_reached_through_a_closure_keeps_the_signature_eager(warmup):
    # a graphed backward would give w no gradient: autograd records each call instead
    w = _requires_grad(tp.ones(3))
    fn, runs = _counted(lambda x: (x * w).sum())
    f = tp_compile(fn, warmup=warmup)
    x = tp.full((3,), 2.0)
    for _ in range(3):
        out = f(x)
        assert out.item() == 6.0
        out.backward()
    assert len(runs) == 3 + (warmup == 0)  # with no warm-up, its capture finds it out
    assert f.graph(x) is None and w.grad.tolist() == [6.0] * 3


def test_grad_mode_is_part_of_the_signature():
    w = tp.tensor([1.0, 2.0]).requires_grad_()
    f = tp_compile(lambda x: (x * w).sum())
    x = tp.ones(2)
    with tp.no_grad():
        f(x)
        f(x)  # captured without autograd
    y = f(x)
    assert y.requires_grad
    y.backward()
    assert w.grad.tolist() == [1.0, 1.0]


def test_zero_and_negative_zero_are_two_signatures():
    f = tp_compile(lambda x, c: 1.0 / (x * c))
    x = tp.ones(2)
    for _ in range(3):
        assert f(x, 0.0).tolist() == [float("inf")] * 2
    for _ in range(3):
        assert f(x, -0.0).tolist() == [float("-inf")] * 2


def test_past_the_signature_limit_new_signatures_run_eagerly_with_one_warning(monkeypatch):
    from tensorplay.compiler.backends import cudagraphs

    monkeypatch.setattr(cudagraphs, "SIGNATURE_LIMIT", 2)
    f = tp_compile(lambda x: x + 1, warmup=0)
    f(tp.ones(1)), f(tp.ones(2))
    with pytest.warns(UserWarning, match="has seen 2 argument signatures.* new ones now run eagerly"):
        assert f(tp.ones(3)).tolist() == [2.0] * 3
    assert f(tp.ones(4)).tolist() == [2.0] * 4 and f.graph(tp.ones(4)) is None
    assert f.graph(tp.ones(1)) is not None
    f.reset()
    assert f(tp.ones(3)).tolist() == [2.0] * 3 and f.graph(tp.ones(3)) is not None


def _bump_then_read(x, y):
    """Writes its first argument, then reads its second: aliasing shows."""
    x.add_(1.0)
    return x + y


def test_one_tensor_given_twice_is_staged_once():
    # Issue 11, item 5: f(a, a) gave 4, then 3, 3 (two private copies of a).
    fn, runs = _counted(_bump_then_read)
    f = tp_compile(fn)
    for _ in range(4):
        a, ref = tp.ones(1), tp.ones(1)
        assert f(a, a).tolist() == _bump_then_read(ref, ref).tolist() == [4.0]
    assert len(runs) == 2 and f.graph(a, a) is not None  # warm-up, capture; then replays
    a, b = tp.ones(1), tp.ones(1)
    assert f.graph(a, b) is None  # distinct tensors are another signature
    for _ in range(3):
        a, b = tp.ones(1), tp.ones(1)
        assert f(a, b).tolist() == [3.0]
    a = tp.ones(1)
    assert f(a, a).tolist() == [4.0] and len(runs) == 4


def test_overlapping_views_of_one_tensor_share_memory_as_in_eager_mode():
    fn, runs = _counted(lambda x, y: (x.mul_(2.0), y * 1.0 + x.sum())[1])
    f = tp_compile(fn)
    for seed in range(4):
        data = _rand(8, seed)
        base, ref = tp.tensor(data), tp.tensor(data)
        out = f(base[0:5], base[3:8])
        expected = fn(ref[0:5], ref[3:8])
        np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-6)
    assert len(runs) == 2 + 4 and f.graph(base[0:5], base[3:8]) is not None
    assert f.graph(base[0:5], base[2:7]) is None  # another overlap, another signature
    g = tp_compile(_bump_then_read)
    for seed in range(3):  # a tensor and its transpose: strides and offsets kept in the shared copy
        data = _rand((3, 3), seed)
        m, ref = tp.tensor(data), tp.tensor(data)
        np.testing.assert_allclose(g(m, m.t()).numpy(), _bump_then_read(ref, ref.t()).numpy(), rtol=1e-6)
        rows, ref = tp.tensor(_rand((4, 3), seed)), tp.tensor(_rand((4, 3), seed))
        out = g(rows[1:3], rows[::2])  # strided, and overlapping through row 2 only
        np.testing.assert_allclose(out.numpy(), _bump_then_read(ref[1:3], ref[::2]).numpy(), rtol=1e-6)
    assert g.graph(m, m.t()) is not None and g.graph(rows[1:3], rows[::2]) is not None


def test_views_that_share_no_bytes_are_staged_as_distinct_tensors():
    f = tp_compile(_bump_then_read)
    for _ in range(3):
        base = tp.ones(8)
        assert f(base[:4], base[4:]).tolist() == [3.0] * 4
    assert f.graph(base[:4], base[4:]) is f.graph(tp.ones(4), tp.ones(4))  # one signature


def test_memory_shared_by_other_dtypes_or_across_storages():
    f = tp_compile(_bump_then_read)
    for _ in range(3):  # the same bytes through another Storage (DLPack): seen as shared
        a = tp.ones(2)
        assert f(a, tp.from_dlpack(a)).tolist() == [4.0] * 2
    assert f.graph(a, tp.from_dlpack(a)) is not None
    a = tp.ones(2)
    bits = tp.Tensor._make(a._storage, a._ptr, a.shape, a._strides, tp.int32)  # float32 bits as int32
    with pytest.warns(
        UserWarning, match="got tensor arguments of different dtypes over the same memory, .* run eagerly"
    ):
        for _ in range(3):
            f(a, bits)
    assert f.graph(a, bits) is None


def test_a_compiled_module_follows_train_and_eval_and_replaced_parameters():
    tp.manual_seed(0)
    model = tp.nn.Sequential(tp.nn.Linear(4, 4), tp.nn.Dropout(0.5))
    compiled, x = tp.compile(model), tp.ones(8, 4)
    for _ in range(3):  # warm-up, capture, replay: in training, dropout zeroes about half
        compiled(x).sum().backward()
    model.eval()  # dropout off: the same as the eager module, with grad and without
    for _ in range(3):
        np.testing.assert_allclose(compiled(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
    with tp.no_grad():
        for _ in range(3):
            np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-6)
        linear = model[0]
        linear.weight = tp.nn.Parameter(tp.zeros(4, 4))  # a new parameter: its values, not the old one's
        for _ in range(3):
            np.testing.assert_allclose(compiled(x).numpy(), np.broadcast_to(linear.bias.numpy(), (8, 4)), rtol=1e-6)
    model.train()
    out = compiled(x).detach().numpy()
    assert (out == 0).any()  # dropout again
