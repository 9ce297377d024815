"""tp.compile's fusion pass: chains of elementwise ops (and a reduction that ends
them) run as one generated kernel, with the eager results.

Every test runs the same function eagerly and compiled (the second call of a
compiled function captures and replays) and compares: elementwise results bit
for bit on the simulator and within an FMA's rounding on a GPU (see
``_assert_as_eager``), reductions within float tolerance (their order of
additions differs). Random programs are in ``test_fusion_properties.py``, the
backward of compiled functions in ``test_fusion_autograd.py``.
"""

from __future__ import annotations

import importlib.util
import re
import threading

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler._groups import PARAM_BYTES
from tensorplay.runtime.launch import grid_1d


def _kernels_in(g) -> list[str]:
    """The kernel names of a graph's nodes, in order (from its DOT view)."""
    return re.findall(r"(fused_\w+|reduce\.\w+|elementwise\.\w+)", g.dot()) if tp.cuda.backend() == "sim" else []


def _eager_and_compiled(fn, *args, **options):
    """(eager result, compiled result, the compiled function) on copies of ``args``."""
    eager = fn(*[a.clone() for a in args])
    compiled = tp.compile(fn, **options)
    compiled(*[a.clone() for a in args])  # the warm-up
    result = compiled(*[a.clone() for a in args])  # captured and replayed
    return eager, result, compiled


def _assert_as_eager(got, want, rtol: float = 1e-6) -> None:
    """A fused result against the eager one: bit for bit on the simulator; on a
    GPU floats within rounding, as its compiler contracts a multiply and an add
    into one fused multiply-add (one rounding instead of two)."""
    if tp.cuda.backend() == "sim" or np.asarray(got).dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


def _values(out):
    return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]


def test_a_chain_and_its_reduction_are_one_kernel_with_the_eager_result():
    rng = np.random.default_rng(0)
    x, y = tp.tensor(rng.standard_normal(1000, np.float32)), tp.tensor(rng.standard_normal(1000, np.float32))

    def f(x, y):
        d = (x - y).abs()
        return d * 2 + 1, (d.exp() - x).tanh().max()

    eager, compiled, fn = _eager_and_compiled(f, x, y)
    _assert_as_eager(compiled[0].numpy(), eager[0].numpy())
    assert compiled[1].item() == eager[1].item()  # a max is exact in any order
    assert len(fn.kernels()) == 1
    if tp.cuda.backend() == "sim":  # one kernel: its last block finishes the reduction
        assert _kernels_in(fn.graph(x, y)) == ["fused_sub_abs_mul_add_exp_tanh_max"]


def test_six_ops_and_a_sum_make_one_kernel_node():
    x = tp.tensor(np.linspace(-2, 2, 4096, dtype=np.float32))
    f = tp.compile(lambda x: ((x * 3 - 1).abs().sqrt() + x).neg().clamp(-1.5, 1.5).sum())
    f(x)
    got = f(x).item()
    ref = np.clip(-(np.sqrt(np.abs(x.numpy().astype(np.float64) * 3 - 1)) + x.numpy()), -1.5, 1.5).sum()
    assert got == pytest.approx(ref, rel=1e-5)
    assert [node.kernel for node in f.graph(x).nodes()] == ["fused_mul_sub_abs_sqrt_add_neg_clamp_sum"]
    assert "captured, 1 nodes" in repr(f.graph(x))  # on both backends


@pytest.mark.parametrize("n", [3, 4, 5, 6, 7, 1029])
@pytest.mark.parametrize("offset", [0, 1])
def test_four_elements_a_load_and_the_rest_one_at_a_time(n, offset):
    """Aligned arrays go four elements a load and the last n % 4 one at a time:
    sizes on every residue mod 4, of arguments that are views one element in
    and not (a compiled call copies them into the graph's own inputs)."""
    rng = np.random.default_rng(n)
    xs, ys = rng.standard_normal(n + 1, np.float32), rng.standard_normal(n + 1, np.float32)
    x, y = tp.tensor(xs)[offset : offset + n], tp.tensor(ys)[offset : offset + n]

    def f(x, y):
        z = (x - y).abs() * 0.5 + y
        return z, z.sum()

    eager, compiled, fn = _eager_and_compiled(f, x, y)
    _assert_as_eager(compiled[0].numpy(), eager[0].numpy())
    x64, y64 = xs[offset : offset + n].astype(np.float64), ys[offset : offset + n].astype(np.float64)
    ref = np.abs(x64 - y64) * 0.5 + y64
    np.testing.assert_allclose(compiled[0].numpy(), ref, rtol=1e-6, atol=1e-6)
    assert compiled[1].item() == pytest.approx(ref.sum(), rel=1e-5, abs=1e-5)
    (text,) = fn.kernels()
    assert "load4(a0, i)" in text and "store4(o0, i," in text  # the vector loop, taken where aligned


def test_the_printed_kernel_is_plain_numba_that_runs_by_itself(tmp_path):
    x, y = tp.tensor(np.arange(300, dtype=np.float32)), tp.full((300,), 7.0)
    f = tp.compile(lambda x, y: (x - y).abs() * 0.5)
    f(x, y)
    expected = f(x, y).numpy()
    (source,) = f.kernels()
    path = tmp_path / "pasted.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("pasted", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = tp.jit(module.fused_sub_abs_mul)
    out = tp.empty(300)
    # parameters: n, the inputs, the scalars, the outputs (see tensorplay/kernels/fused.py)
    kernel[2, 256](np.int64(300), x, y, np.float32(0.5), out)
    np.testing.assert_array_equal(out.numpy(), expected)


def test_in_place_updates_and_out_arguments_are_seen_by_later_ops():
    x, y = tp.tensor(np.arange(64, dtype=np.float32)), tp.tensor(np.ones(64, np.float32))
    out = tp.empty(64)

    def f(x, y, out):
        x.add_(y)  # later reads of x see the new values
        tp.mul(x, 2, out=out)
        y.copy_(out - x)
        return (x + y + out).max()

    eager = [t.clone() for t in (x, y, out)]
    expected = f(*eager).item()
    g = tp.cuda.CUDAGraph()
    compiled = tp.compile(f)
    with tp.cuda.graph(g):  # called inside a capture: it works on these very tensors
        got = compiled(x, y, out)
    g.replay()
    assert got.item() == expected
    for a, b in zip((x, y, out), eager, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_views_of_written_memory_end_the_chain_and_keep_eager_results():
    # shifted slices of a tensor the chain writes: a fused kernel would read what other threads write
    base = tp.tensor(np.arange(32, dtype=np.float32))

    def f(x):
        y = x * 2
        z = y[1:] + y[:-1]  # not the same element: the chain ends before it
        x[1:].add_(x[:-1])  # overlapping in-place: eager copies the operand first
        w = z * x[1:]
        return w, x.sum()

    eager, compiled, _ = _eager_and_compiled(f, base)
    _assert_as_eager(compiled[0].numpy(), eager[0].numpy())
    assert compiled[1].item() == pytest.approx(eager[1].item())


def test_one_element_tensors_broadcast_and_a_written_one_is_not_read_by_other_threads():
    x, s = tp.tensor(np.arange(16, dtype=np.float32)), tp.full((1,), 3.0)

    def f(x, s):
        y = x * s + s  # s is read by every thread at [0]
        s.add_(1)  # written: the chain over x ends first, the one-element op is its own
        return y - s, s * 2

    eager, compiled, _ = _eager_and_compiled(f, x, s)
    for a, b in zip(_values(compiled), _values(eager), strict=True):
        _assert_as_eager(a, b)


def test_one_element_ops_before_a_chain_are_its_head_in_the_same_kernel():
    # a Runge-Kutta attempt's start: the step size from the time and its bound, then the stages read it
    rng = np.random.default_rng(14)
    y, k = tp.tensor(rng.standard_normal(300)), tp.tensor(rng.standard_normal(300))
    t, h_abs, flag = tp.tensor([0.9]), tp.tensor([0.25]), tp.zeros(1, dtype=tp.bool)

    def attempt(y, k, t, h_abs, flag):
        t_new = tp.minimum(t + h_abs, 1.0)
        h = t_new - t
        y_new = y + h * k
        change = (y_new - y).abs().max()
        tp.logical_and(change > 0.01, t_new < 1.0, out=flag)  # the tail reads the head's t_new
        return y_new, t_new

    eager_flag = flag.clone()
    eager = attempt(y, k, t, h_abs, eager_flag)
    compiled = tp.compile(attempt)
    compiled(y, k, t, h_abs, flag.clone())
    got = compiled(y, k, t, h_abs, flag)
    (name, text), *others = _names(compiled)
    assert not others and name.startswith("fused_add_minimum_sub_mul") and "e0[0] = h" in text
    for a, b in zip((*_values(got), flag.numpy()), (*_values(eager), eager_flag.numpy()), strict=True):
        _assert_as_eager(a, b)
    np.testing.assert_allclose(got[1].numpy(), [1.0])  # stored by the head's first thread: it is returned


def test_a_head_is_left_where_the_chain_writes_what_it_reads_or_writes():
    x = tp.tensor(np.arange(16.0))

    def rewrites_what_the_head_read(x, buf):
        first = buf[0:1] * 2.0  # every thread would read buf[0] while the chain stores over it
        buf.copy_(x * first)
        return buf

    def reads_a_head_result_through_another_view(x, pair):
        pair[1:2].copy_(pair[0:1] + 1.0)  # the head's result, then all of pair read at [i]
        return x[:2] * pair

    def a_tail_writes_what_the_head_read(x, t):
        scale = t * 2.0
        total = (x * scale).sum()
        t.copy_(total)  # after the reduction: every block has read t by then
        return total

    cases = [
        (rewrites_what_the_head_read, tp.tensor(np.full(16, 3.0))),
        (reads_a_head_result_through_another_view, tp.tensor([5.0, 0.0])),
        (a_tail_writes_what_the_head_read, tp.tensor([0.5])),
    ]
    for fn, second in cases:
        eager, compiled, _ = _eager_and_compiled(fn, x, second)
        _assert_as_eager(compiled.numpy(), eager.numpy())


def test_ops_over_fewer_elements_before_a_chain_that_broadcasts_them_are_its_first_steps():
    # the Ising sweep's acceptance: -2.0 * beta over the temperatures, then the lattices' chain reads it
    rng = np.random.default_rng(15)
    spins, near = tp.tensor(rng.standard_normal((3, 6, 5))), tp.tensor(rng.standard_normal((3, 6, 5)))
    beta, row = tp.tensor(rng.uniform(0.3, 0.6, (3, 1, 1))), tp.tensor(rng.standard_normal(5))

    def accept(spins, near, beta, row):
        twice = -2.0 * beta
        kept = twice + 1.0  # returned: stored by one element of each lattice
        return tp.exp(twice * spins * near), kept

    def scaled(spins, near, beta, row):
        scale = row * 0.5 + 1.0  # over the last dimension
        return spins * scale, scale

    def into_a_column(spins, near, beta, row):
        column = near[0, :, 1:2]  # a strided view, (6, 1), stored by the first element of each row
        column.copy_(near[1, :, :1] * 0.5 + 1.0)  # read through strides too
        return spins * column, near

    cases = ((accept, "fused_mul_add_exp"), (scaled, "fused_mul_add"), (into_a_column, "fused_mul_add"))
    for fn, kernel in cases:
        eager, compiled, compiled_fn = _eager_and_compiled(fn, spins, near, beta, row)
        (name, text), *others = _names(compiled_fn)
        assert not others and name == kernel, (name, others)
        assert " == 0:" in text  # its small result stored by the first element along the broadcast dimensions
        for a, b in zip(_values(compiled), _values(eager), strict=True):
            _assert_as_eager(a, b)


def test_ops_over_fewer_elements_after_a_chains_ops_join_it_as_steps():
    # the Ising sweep as written: the neighbours' sums, then -2.0 * beta (a value a lattice), then the flips
    rng = np.random.default_rng(17)
    spins, beta = tp.tensor(rng.standard_normal((3, 6, 5))), tp.tensor(rng.uniform(0.3, 0.6, (3, 1, 1)))

    def accept(spins, beta):
        near = tp.roll(spins, 1, 1) + tp.roll(spins, -1, 2)
        twice = -2.0 * beta
        kept = twice + 1.0  # returned: stored by the first element of each lattice
        return tp.exp(twice * spins * near), kept

    def updates_what_the_chain_read(spins, beta):
        near = spins * beta
        beta.mul_(2.0)  # every thread of the chain reads beta: the first ones must not store it meanwhile
        return near + beta, beta

    eager, compiled, compiled_fn = _eager_and_compiled(accept, spins, beta)
    (name, text), *others = _names(compiled_fn)
    assert not others and name == "fused_add_mul_exp", (name, others)
    assert " == 0:" in text  # the small result stored by the first element along the broadcast dimensions
    for a, b in zip(_values(compiled), _values(eager), strict=True):
        _assert_as_eager(a, b)
    eager, compiled, compiled_fn = _eager_and_compiled(updates_what_the_chain_read, spins, beta)
    assert len(_names(compiled_fn)) > 1
    for a, b in zip(_values(compiled), _values(eager), strict=True):
        _assert_as_eager(a, b)


def test_ops_over_fewer_elements_stay_apart_where_they_update_what_they_read_or_are_read_rolled():
    rng = np.random.default_rng(16)
    x = tp.tensor(rng.standard_normal((4, 6)))

    def updates_in_place(x, col):
        col.mul_(2.0)  # every thread of the wider kernel would read col while the first ones store it
        return x * col

    def read_rolled(x, col):
        return x + tp.roll(col, 1, 0) * 2.0

    def results_of_two_shapes(x, col):
        a = col * 2.0
        b = a.reshape(1, 4) + 1.0
        return x + a, b

    for fn in (updates_in_place, read_rolled, results_of_two_shapes):
        col = tp.tensor(rng.standard_normal((4, 1)))
        eager, compiled, compiled_fn = _eager_and_compiled(fn, x, col)
        assert len(_names(compiled_fn)) == 2, fn.__name__  # the small ops' kernel, then the chain's
        for a, b in zip(_values(compiled), _values(eager), strict=True):
            _assert_as_eager(a, b)


def test_broadcast_and_strided_operands_join_the_chain_and_float16_runs_eagerly():
    rng = np.random.default_rng(2)
    x, row = tp.tensor(rng.standard_normal((6, 50), np.float32)), tp.tensor(rng.standard_normal(50, np.float32))
    col, h = tp.tensor(rng.standard_normal((6, 1), np.float32)), tp.ones(6, 50, dtype=tp.float16)
    t = tp.tensor(rng.standard_normal((50, 6), np.float32))

    def f(x, row, col, t, h):
        y = ((x + row) * col - t.t()).abs()  # a row, a column and a transposed view, read in place
        return y, (y * 2 + row).max(), (h * 3).float() + x

    expected = f(x, row, col, t, h)
    compiled = tp.compile(f)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):  # inside a capture the views themselves are read (no staged copies)
        got = compiled(x, row, col, t, h)
    g.replay()
    for a, b in zip(_values(got), _values(expected), strict=True):
        _assert_as_eager(a, b)
    # one kernel for the chain and its reduction; float16's multiply and cast run as eagerly
    assert [name for name, _ in _names(compiled)] == ["fused_add_mul_sub_abs_max", "fused_add"]


def test_a_chain_over_many_arrays_is_split_into_kernels_the_driver_takes():
    xs = [tp.full((64,), float(k)) for k in range(100)]  # 5.6 KB of array parameters

    def total(*xs):
        out = xs[0] * 1
        for x in xs[1:]:
            out = out + x
        return out

    eager, compiled, fn = _eager_and_compiled(total, *xs)
    _assert_as_eager(compiled.numpy(), eager.numpy())
    assert len(fn.kernels()) == 2
    for source in fn.kernels():  # each kernel's parameters within the driver's 4 KiB: 56 bytes an array, 8 a number
        params = re.search(r"def \w+\((.*?)\):", source, re.S)[1].split(",")
        assert 56 * len(params) <= PARAM_BYTES


def test_a_chain_longer_than_a_kernel_takes_is_split_where_the_limit_says():
    from tensorplay.compiler._groups import MAX_STEPS

    rng = np.random.default_rng(5)
    x = tp.tensor(rng.standard_normal(300, np.float32))

    def long_chain(x):  # no scalars: only the ops' limit splits it
        out = x
        for k in range(MAX_STEPS):
            out = (out * x).sin() if k % 2 else out - x
        return out

    eager, compiled, fn = _eager_and_compiled(long_chain, x)
    _assert_as_eager(compiled.numpy(), eager.numpy(), rtol=1e-5)
    steps = sum(2 if k % 2 else 1 for k in range(MAX_STEPS))
    assert len(fn.kernels()) == -(-steps // MAX_STEPS)  # whole kernels of MAX_STEPS ops, the rest in the last


def test_a_chain_of_many_scalars_is_split_before_its_parameters_outgrow_the_driver():
    from tensorplay.compiler._groups import MAX_STEPS

    x = tp.tensor(np.linspace(-3, 3, 300, dtype=np.float32))
    clamps = MAX_STEPS - 16  # two scalars each, 8 bytes a scalar (3840 bytes): past the parameters' limit
    assert clamps + 1 < MAX_STEPS  # and not the ops'

    def narrowing(x):
        out = x * 1.0
        for k in range(clamps):
            out = out.clamp(-3.0 + k * 0.01, 3.0 - k * 0.01)
        return out

    eager, compiled, fn = _eager_and_compiled(narrowing, x)
    _assert_as_eager(compiled.numpy(), eager.numpy())
    scalars = [len(re.findall(r"\bs\d+\b", re.search(r"def \w+\((.*?)\):", k, re.S)[1])) for k in fn.kernels()]
    assert len(scalars) == 2 and 8 * max(scalars) < PARAM_BYTES and sum(scalars) == 1 + 2 * clamps


@pytest.mark.parametrize("dim", [-1, (1, 2), 2])
def test_a_reduction_along_the_last_dimensions_is_the_chains_epilogue(dim):
    rng = np.random.default_rng(3)
    x, y = tp.tensor(rng.standard_normal((5, 7, 9), np.float32)), tp.tensor(rng.standard_normal((5, 7, 9), np.float32))

    def f(x, y):
        d = (x * y - 1).abs()
        return d.sum(dim=dim, keepdim=True), d.amax(dim=dim)

    expected = f(x.double(), y.double())
    compiled = tp.compile(f)
    compiled(x, y)
    got = compiled(x, y)
    for a, b in zip(got, expected, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5)
    names = [name for name, _ in _names(compiled)]
    assert names == ["fused_mul_sub_abs_sum_max"]  # both along the same rows: one kernel, d never stored


def test_fuse_false_keeps_one_kernel_per_op():
    x = tp.ones(64)
    f = tp.compile(lambda x: (x * 2 + 1).exp(), fuse=False)
    f(x)
    np.testing.assert_array_equal(f(x).numpy(), np.exp(np.ones(64, np.float32) * 2 + 1))
    assert f.kernels() == []
    if tp.cuda.backend() == "sim":
        assert len(_kernels_in(f.graph(x))) == 3


def test_a_compiled_body_inside_a_while_loop_counts_like_the_host_loop():
    def relax(u, it, go):
        r = (u * 0.5 - u).abs().max()
        u.mul_(0.5)
        it.add_(1)
        tp.logical_and(tp.gt(r, 1e-3), tp.lt(it, 100), out=go)

    body = tp.compile(relax)
    u, it, go = tp.full((256,), 1.0), tp.zeros(1, dtype=tp.int32), tp.ones(1, dtype=tp.bool)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(go):
            body(u, it, go)
    g.replay()
    host, passes = np.float32(1.0), 0
    while True:  # the same loop on the host, in float32
        change = abs(host * np.float32(0.5) - host)
        host, passes = host * np.float32(0.5), passes + 1
        if not (change > 1e-3 and passes < 100):
            break
    assert it.item() == passes
    np.testing.assert_array_equal(u.numpy(), np.full(256, host, np.float32))


def test_one_element_ops_after_a_reduction_are_its_tail_in_the_same_kernel():
    # the heat demo's loop body after its sweep: change, copy, counter, convergence test
    def relax(u, v, iters, go):
        change = (v - u).abs().max()
        u.copy_(v)
        iters.add_(1)
        tp.logical_and(tp.gt(change, 0.25), tp.lt(iters, 3), out=go)
        return change

    rng = np.random.default_rng(1)
    u0, v0 = rng.standard_normal((40, 50)).astype(np.float32), rng.standard_normal((40, 50)).astype(np.float32)
    u, v, iters, go = tp.tensor(u0), tp.tensor(v0), tp.zeros(1, dtype=tp.int64), tp.empty(1, dtype=tp.bool)
    compiled = tp.compile(relax)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        change = compiled(u, v, iters, go)
    assert [name for name, _ in _names(compiled)] == ["fused_sub_abs_max_add_gt_lt_and"]
    for k in range(1, 4):  # every replay: its ticket was left at zero by the last
        u.copy_(tp.tensor(u0 * k))
        g.replay()
        expected = np.abs(v0.astype(np.float64) - u0 * k).max()
        assert change.item() == pytest.approx(expected, rel=1e-6)
        np.testing.assert_array_equal(u.numpy(), v0)
        assert iters.item() == k and go.item() == (expected > 0.25 and k < 3)


def test_several_full_reductions_of_a_chain_and_their_tail_are_one_kernel():
    # a solver's step: two dot products, a norm and a bound of one update, then scalar algebra on them
    def step(x, y, ratio, bound, go):
        d = x - y
        dd = (d * d).sum()
        dy = (d * y).sum()
        worst = d.abs().max()
        least = (x * 2.0).min()
        tp.div(dd, dy, out=ratio)
        tp.maximum(worst, least, out=bound)
        tp.gt(ratio, 0.5, out=go)
        return dd, dy, worst, least

    rng = np.random.default_rng(4)
    x, y = (tp.tensor(rng.standard_normal((30, 70))) for _ in range(2))
    outs = [tp.empty(1, dtype=tp.float64), tp.empty(1, dtype=tp.float64), tp.empty(1, dtype=tp.bool)]
    eager_outs = [t.clone() for t in outs]
    eager = step(x, y, *eager_outs)
    compiled = tp.compile(step)
    compiled(x, y, *[t.clone() for t in outs])  # the warm-up
    got = compiled(x, y, *outs)  # captured and replayed
    assert [name for name, _ in _names(compiled)] == ["fused_sub_mul_abs_sum_max_min_truediv_maximum_gt"]
    for a, b in zip((*got, *outs), (*eager, *eager_outs), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)  # sums in another order
    assert got[2].item() == np.abs(x.numpy() - y.numpy()).max() and got[3].item() == (x.numpy() * 2).min()


@pytest.mark.parametrize("keepdim", [False, True])
def test_a_reduction_over_a_middle_dimension_is_the_chains_epilogue(keepdim):
    # an N-body step's pulls: the pair terms summed over partners, never stored
    def pulls(x, w):
        d = x[None, :, :] - x[:, None, :]
        return (d * w[:, :, None]).sum(dim=1, keepdim=keepdim)

    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((12, 3)), rng.random((12, 12))
    compiled = tp.compile(pulls)
    compiled(tp.tensor(x), tp.tensor(w))
    got = compiled(tp.tensor(x), tp.tensor(w))
    assert [name for name, _ in _names(compiled)] == ["fused_sub_mul_sum"]
    d = x[None, :, :] - x[:, None, :]
    np.testing.assert_allclose(got.numpy(), (d * w[:, :, None]).sum(axis=1, keepdims=keepdim), rtol=1e-12)


def test_an_n_body_steps_three_pulls_are_reductions_of_one_kernel():
    # the pulls by coordinate: the pair terms of a row of partners summed three ways, nothing n x n stored
    def pulls(x, m, eps2):
        dx, dy, dz = (x[c][None, :] - x[c][:, None] for c in range(3))
        r2 = dx * dx + dy * dy + dz * dz + eps2
        w = tp.where(r2 > eps2, m[None, :] / (r2 * r2.sqrt()), 0.0)
        return (dx * w).sum(dim=1), (dy * w).sum(dim=1), (dz * w).mean(dim=1, keepdim=True)

    rng = np.random.default_rng(10)
    x, m = rng.standard_normal((3, 40)), rng.random(40)
    compiled = tp.compile(pulls)
    compiled(tp.tensor(x), tp.tensor(m), 0.01)
    got = compiled(tp.tensor(x), tp.tensor(m), 0.01)
    (name, text), *others = _names(compiled)
    assert not others and name.endswith("_sum_mean") and "o0[" not in text  # the pair terms died unstored
    d = x[:, None, :] - x[:, :, None]
    r2 = (d * d).sum(axis=0) + 0.01
    w = np.where(r2 > 0.01, m[None, :] / (r2 * np.sqrt(r2)), 0.0)
    want = (d * w).sum(axis=2)
    for c in range(3):
        np.testing.assert_allclose(got[c].numpy().ravel(), want[c] / (40 if c == 2 else 1), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("shape, dim", [((50, 3), 1), ((6, 3, 4), 1), ((7, 16), -1), ((7, 17), -1)])
def test_short_rows_are_a_threads_each_and_long_ones_a_blocks(shape, dim):
    # rows of up to 16 elements: a thread sums each; a block would leave most of its lanes idle
    compiled = tp.compile(lambda x: ((x * x).sum(dim=dim), (x - 1.0).amin(dim=dim)))
    x = np.random.default_rng(11).standard_normal(shape)
    compiled(tp.tensor(x))
    got = compiled(tp.tensor(x))
    (name, text), *others = _names(compiled)
    assert not others and ("cuda.shared" in text) == (shape[dim] > 16)
    np.testing.assert_allclose(got[0].numpy(), (x * x).sum(axis=dim), rtol=1e-12)
    np.testing.assert_array_equal(got[1].numpy(), (x - 1.0).min(axis=dim))


@pytest.mark.parametrize("layout", ["last dimensions", "middle dimension", "leading dimension"])
def test_a_few_long_rows_are_shared_by_blocks_whose_partials_the_last_one_combines(monkeypatch, layout):
    # a block a row would be four blocks for the whole chain: on a GPU's wave of threads, blocks share
    # each row instead, and the last block to finish combines each row's partials
    from tensorplay.runtime.backend import get as get_backend

    monkeypatch.setattr(get_backend(), "max_threads_per_launch", 270_336)  # an H100's 132 SMs of 2048 threads
    from tensorplay.kernels.fused import BLOCK

    long = 16 * BLOCK + 40  # rows of over 16 blocks' worth
    shape, dim = {
        "last dimensions": ((4, 32, long // 32 + 1), (1, 2)),
        "middle dimension": ((3, long, 2), 1),  # the row's elements two apart
        "leading dimension": ((long, 4), 0),  # four apart
    }[layout]

    def f(x):
        y = x * 2.0
        return y.sum(dim=dim), y.amax(dim=dim)

    compiled = tp.compile(f)
    rng = np.random.default_rng(13)
    for _ in range(3):  # the ticket is back at zero for each replay
        x = rng.standard_normal(shape)
        got = compiled(tp.tensor(x))
        np.testing.assert_allclose(got[0].numpy(), (2 * x).sum(axis=dim), rtol=1e-12)
        np.testing.assert_array_equal(got[1].numpy(), (2 * x).max(axis=dim))
    (name, text), *others = _names(compiled)
    assert not others and name == "fused_mul_sum_max" and "partials1[row * " in text


@pytest.mark.parametrize("rows", [1, 2, 4, 9])
def test_the_last_block_combines_the_rows_partials_in_groups_of_its_threads(monkeypatch, rows):
    # on a GPU the last block's 256 threads take a row a group: 256 for one row, 128 each for two, 64
    # for four, 32 for eight and more (then eight rows a pass); the simulator's blocks of 32 are one
    # group, so here they are made 128 threads: groups of 128, 64, 32, and 32 over two passes
    from tensorplay.kernels import fused
    from tensorplay.runtime.backend import get as get_backend

    monkeypatch.setattr(get_backend(), "max_threads_per_launch", 270_336)
    monkeypatch.setattr(fused, "BLOCK", 128)
    x = np.random.default_rng(14).standard_normal((rows, 16 * 128 + 3))

    def f(x):
        return (x + 1.0).sum(dim=1), (x * 3.0).amin(dim=1)

    compiled = tp.compile(f)
    compiled(tp.tensor(x))
    got = compiled(tp.tensor(x))
    (name, text), *others = _names(compiled)
    assert not others and "lane = t % width" in text  # the rows that blocks share
    np.testing.assert_allclose(got[0].numpy(), (x + 1.0).sum(axis=1), rtol=1e-12)
    np.testing.assert_array_equal(got[1].numpy(), (3.0 * x).min(axis=1))


def test_small_ops_after_shared_rows_run_in_the_last_block(monkeypatch):
    """An Ising sweep's end: the magnetisation of each lattice (rows shared by
    blocks), the sweep count (the chain's tail), then the moments of each
    (four elements) and a histogram (four by eight), each reading what the
    stage before stored, and the loop's test: one kernel, its last block
    running the tail and the two small groups in turn (epilogues)."""
    from tensorplay.kernels.fused import BLOCK
    from tensorplay.runtime.backend import get as get_backend

    monkeypatch.setattr(get_backend(), "max_threads_per_launch", 270_336)  # an H100's: a few long rows shared

    def finish(spins, sweep, moments, bins, numbers, go):
        spins.mul_(-1.0)
        sweep.add_(1)
        a = spins.sum(dim=(1, 2)).abs() / spins[0].numel()
        moments[:, 0].add_(a)
        moments[:, 1].add_(a * a)
        here = sweep % 8  # this sweep's bin
        bins.add_(a[:, None] * (numbers == here).double())
        tp.lt(sweep, 3, out=go)

    rng = np.random.default_rng(18)
    s0 = np.where(rng.random((4, 16 * BLOCK // 32 + 1, 32)) < 0.7, 1.0, -1.0)

    def state():
        return [tp.tensor(s0), tp.zeros(1, dtype=tp.int64), tp.zeros(4, 2, dtype=tp.float64),
                tp.zeros(4, 8, dtype=tp.float64), tp.arange(8, dtype=tp.int64), tp.ones(1, dtype=tp.bool)]  # fmt: skip

    eager = state()
    while eager[5].item():
        finish(*eager)
    fused = state()
    step = tp.compile(finish)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(fused[5]):
            step(*fused)
    g.replay()
    (name, text), *others = _names(step)
    assert not others and text.count("while ep < ") == 2, (name, others)  # the two small groups
    for got, want in zip(fused, eager, strict=True):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    assert fused[1].item() == 3


def test_small_ops_after_a_full_reduction_run_in_its_last_block_unless_they_reduce_or_draw():
    x0 = np.random.default_rng(19).standard_normal(3000)

    def stats(x, weights, acc):
        total = (x * 2.0).sum()
        acc.add_(weights * total)  # four elements, after the sum: the last block's
        return acc * 0.5

    def small_sum(x, weights, acc):
        total = (x * 2.0).sum()
        return (weights * total).sum()  # a reduction of its own: a kernel of its own

    def small_draws(x, weights, acc):
        total = (x * 2.0).sum()
        return tp.rand(4, dtype=tp.float64) * total  # the draws: a kernel of their own

    for fn, kernels in ((stats, 1), (small_sum, 2), (small_draws, 2)):
        args = tp.tensor(x0), tp.tensor([1.0, 2.0, 3.0, 4.0]), tp.zeros(4, dtype=tp.float64)
        tp.manual_seed(5)
        eager, compiled, compiled_fn = _eager_and_compiled(fn, *args)
        assert len(_names(compiled_fn)) == kernels, fn.__name__
        if fn is not small_draws:  # (their numbers are another kernel's)
            np.testing.assert_allclose(_values(compiled)[0], _values(eager)[0], rtol=1e-12)


def test_reductions_along_other_rows_or_everything_are_kernels_of_their_own():
    def f(x):
        y = x * 2.0
        return y.sum(dim=1), y.amax(dim=1), y.sum(dim=(0, 1)), y.sum()

    x = np.random.default_rng(12).standard_normal((4, 5, 6))
    compiled = tp.compile(f)
    compiled(tp.tensor(x))
    got = compiled(tp.tensor(x))
    want = (2 * x).sum(axis=1), (2 * x).max(axis=1), (2 * x).sum(axis=(0, 1)), (2 * x).sum()
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-12)
    assert [name for name, _ in _names(compiled)] == ["fused_mul_sum_max"]  # the two along the same rows


def test_a_reduction_over_leading_dimensions_of_wide_rows_stays_with_the_eager_kernel():
    # a block's threads would read elements a row apart: the eager kernel reads the columns side by side
    compiled = tp.compile(lambda x: (x * 2.0).sum(dim=0))
    x = np.random.default_rng(9).standard_normal((6, 40))
    compiled(tp.tensor(x))
    got = compiled(tp.tensor(x))
    assert [name for name, _ in _names(compiled)] == ["fused_mul"]
    np.testing.assert_allclose(got.numpy(), (x * 2.0).sum(axis=0), rtol=1e-12)


def _names(compiled) -> list[tuple[str, str]]:
    """(name, source) of a compiled function's fused kernels."""
    return [(re.search(r"def (\w+)\(", text).group(1), text) for text in compiled.kernels()]


@pytest.mark.parametrize("fuse", [True, False])
def test_in_place_changes_reach_the_callers_tensors_at_every_call(fuse):
    @tp.jit
    def bump(x):  # a kernel of one's own may write any array it is given
        i = tp.cuda.grid(1)
        if i < x.size:
            x[i] += 1.0

    def f(u, v, w):
        u.copy_(v)
        v.mul_(2)
        bump[1, 64](w)
        return (u + v).sum()

    compiled = tp.compile(f, fuse=fuse)
    for k in range(3):  # warm-up, capture, replay
        u, v, w = tp.zeros(64), tp.full((64,), float(k)), tp.ones(64)
        eager = [t.clone() for t in (u, v, w)]
        expected = f(*eager).item()
        assert compiled(u, v, w).item() == expected
        for got, want in zip((u, v, w), eager, strict=True):
            np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_aliased_arguments_changed_in_place_behave_as_eagerly():
    def f(a, b):
        a.add_(1)
        return b * 2

    compiled = tp.compile(f)
    for _ in range(3):
        x = tp.ones(8)
        eager_x = x.clone()
        expected = f(eager_x, eager_x).numpy()
        np.testing.assert_array_equal(compiled(x, x).numpy(), expected)
        np.testing.assert_array_equal(x.numpy(), eager_x.numpy())


def test_compiled_functions_traced_by_two_threads_at_once_leave_no_fuser_behind():
    # The main thread's trace ends while another thread's is still open; then the
    # main thread's eager ops must run at once (a fusion pass left behind for it
    # would hold them back, and a later capture would lose them).
    main_in, other_in, main_out = threading.Event(), threading.Event(), threading.Event()

    def main_body(x):
        main_in.set()
        assert other_in.wait(60)
        return x * 2

    def other_body(x):
        assert main_in.wait(60)
        other_in.set()
        assert main_out.wait(60)
        return x + 1

    def capture(fn, x):
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g, capture_error_mode="thread_local"):
            out = tp.compile(fn)(x)
        g.replay()
        return out

    results = {}
    other = threading.Thread(target=lambda: results.update(other=capture(other_body, tp.ones(4)).tolist()))
    other.start()
    got = capture(main_body, tp.ones(4)).tolist()
    main_out.set()
    other.join(60)
    assert got == [2.0] * 4 and results["other"] == [2.0] * 4
    assert (tp.ones(4) * 3).tolist() == [3.0] * 4  # eager, at once
    g = tp.cuda.CUDAGraph()
    x = tp.ones(4)
    with tp.cuda.graph(g):
        y = x * 5 + 1
    g.replay()
    assert y.tolist() == [6.0] * 4


def _a_thread_each(n: int) -> bool:
    """Whether grid_1d gives each of ``n`` elements a thread of its own."""
    (blocks, _, _), (threads, _, _) = grid_1d(n)
    return blocks * threads >= n


# the simulator's grids stop at 64 threads, so 300 elements loop there; a GPU's give 300 a thread each,
# and loop only past a thread for every four elements: 4M here (too slow for the simulator)
@pytest.mark.parametrize("n", [50, 300] + ([1 << 22] if tp.cuda.backend() == "cuda" else []))
def test_a_grid_with_a_thread_for_every_element_has_no_loop_over_several(n):
    # where every element has a thread the kernel leaves out the loops that take four a thread
    # (registers it would not use); elsewhere it keeps them
    def f(x, y):
        return x * 2.0 + y

    compiled = tp.compile(f)
    rng = np.random.default_rng(15)
    for _ in range(2):  # the first call runs eagerly, the second fused
        x, y = rng.standard_normal(n), rng.standard_normal(n)
        got = compiled(tp.tensor(x), tp.tensor(y))
        np.testing.assert_allclose(got.numpy(), 2.0 * x + y, rtol=1e-15)
    (_, text), *others = _names(compiled)
    loops = not _a_thread_each(n)
    assert loops == (n > 64 if tp.cuda.backend() == "sim" else n > 1 << 20)
    assert not others and ("4 elements at a time" in text) == loops and ("load4" in text) == loops


# a thread's elements past its last group of four: none, one, two or three of them (the simulator's
# grids have 64 threads, so 256 elements are one group a thread)
@pytest.mark.parametrize("rows", [16, 17, 20, 24, 25, 28])
def test_the_last_elements_of_a_strided_chain_are_loaded_together_and_each_counted_once(rows):
    # a stencil-like chain over views of a padded field, stored into one and summed: every element
    # stored and summed once, where the last ones a thread takes are loaded together, one group
    def f(p, out):
        inner = p[1:-1, 1:-1]
        out.copy_(inner * 4.0 - p[:-2, 1:-1] - p[2:, 1:-1])
        return (inner * out).sum()

    compiled = tp.compile(f)
    rng = np.random.default_rng(rows)
    for _ in range(2):  # the first call runs eagerly, the second fused
        field = rng.standard_normal((rows + 2, 18))
        out = tp.zeros(rows, 16, dtype=tp.float64)
        total = compiled(tp.tensor(field), out)
        inner = field[1:-1, 1:-1]
        want = inner * 4.0 - field[:-2, 1:-1] - field[2:, 1:-1]
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-14)
        np.testing.assert_allclose(total.item(), float((inner * want).sum()), rtol=1e-12)
    ((_, text),) = _names(compiled)
    assert "the last elements, loaded together" in text and "while i < n:" not in text
