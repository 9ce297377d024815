"""tp.compile's fusion of what a stencil code writes: shifted slices of one
tensor read in one kernel, rolled reads (``tp.roll``, a periodic grid's
neighbours) in the same kernel, in-place updates of slices (and the
interleaved columns of a ``stack``) stored from the fused kernel, and
one-element ops (a copy of a scalar, a counter, a convergence test) after
full-size ones run by the kernel's first thread.

Each function runs eagerly and compiled (the second call captures and
replays); results are the eager ones bit for bit on the simulator and within
an FMA's rounding on a GPU. Random programs over a padded field and its
shifted views check that a write through one view never races with a read
through another (the fuser ends its kernel first), as eagerly.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.properties import hypothesis_settings
from hypothesis import given
from hypothesis import strategies as st

import tensorplay as tp
from tensorplay.kernels.fused import EPILOGUE_MAX
from tensorplay.runtime.backend import get as get_backend

SIM = tp.cuda.backend() == "sim"
GALLERY = Path(__file__).resolve().parents[2] / "examples" / "gallery"


def _names(compiled) -> list[str]:
    """The names of a compiled function's fused kernels, in the order made."""
    return [re.search(r"def (\w+)\(", text).group(1) for text in compiled.kernels()]


def _assert_as_eager(got, want) -> None:
    if SIM or np.asarray(got).dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _cg_step():
    """The conjugate-gradient iteration as a user writes it in tensor ops
    (the gallery's ``ops_step``: ``p`` padded with a zero edge, the stencil as
    five updates by shifted slices, its interior updated in place)."""
    sys.path.insert(0, str(GALLERY))
    try:
        import cg
    finally:
        sys.path.remove(str(GALLERY))
    return cg.ops_step


def _cg_state(n: int, seed: int = 0) -> list:
    b = np.random.default_rng(seed).standard_normal((n, n))
    p = np.zeros((n + 2, n + 2))
    p[1:-1, 1:-1] = b
    return [tp.zeros(n, n, dtype=tp.float64), tp.tensor(b), tp.tensor(p), tp.zeros(n, n, dtype=tp.float64),
            tp.tensor([float((b * b).sum())]), tp.empty(1, dtype=tp.bool)]  # fmt: skip


@pytest.mark.parametrize("wave", [64, 270_336])  # the simulator's threads at once, an H100's
@pytest.mark.parametrize("n", [9, 24])
def test_a_conjugate_gradient_step_of_tensor_ops_is_three_kernels_with_the_eager_iterates(n, wave, monkeypatch):
    """Three kernels. Where each point has a thread of its own (at most a wave
    of them), x's update is in the third, which reads p for p's update too
    (``compiler/_sinking.py``), else beside r's in the second; on a grid small
    enough (``fused.EPILOGUE_MAX`` points at most) the third, p's update and
    the convergence test, runs in the last block of the second, after its
    reduction (an epilogue)."""
    monkeypatch.setattr(get_backend(), "max_threads_per_launch", wave)
    eager, fused = _cg_state(n), _cg_state(n)
    ops_step = _cg_step()
    step = tp.compile(ops_step)
    for _ in range(4):  # the warm-up, the capture, then replays: each an iteration on both sides
        ops_step(*eager, 1e-30)
        step(*fused, 1e-30)
    assert step.graph(*fused, 1e-30) is not None
    moved = n * n <= wave
    second = "fused_mul_sub_sum_truediv" if moved else "fused_mul_add_sub_sum_truediv"  # x's add there or not
    if n * n <= EPILOGUE_MAX:  # a kernel's name lists each op once
        with_epilogue = "fused_mul_sub_sum_truediv_add_copy_gt" if moved else "fused_mul_add_sub_sum_truediv_copy_gt"
        assert _names(step) == ["fused_mul_sub_sum_truediv", with_epilogue]
    else:
        assert _names(step) == ["fused_mul_sub_sum_truediv", second, "fused_mul_add_copy_gt"]
    for got, want in zip(fused[:3], eager[:3], strict=True):  # x, r and p
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)  # sums in another order
    assert fused[5].item() and eager[5].item()


def test_the_interior_updated_in_place_is_stored_through_its_strides():
    def smooth(p, q):
        inner = p[1:-1, 1:-1]
        inner.mul_(0.5).add_(q)
        inner.sub_(q * 0.25)

    p0, q0 = np.random.default_rng(2).standard_normal((6, 7)), np.random.default_rng(3).standard_normal((4, 5))
    eager, fused = tp.tensor(p0), tp.tensor(p0)
    smooth(eager, tp.tensor(q0))
    step = tp.compile(smooth)
    step(tp.tensor(p0), tp.tensor(q0))  # the warm-up
    step(fused, tp.tensor(q0))  # captured and replayed
    assert _names(step) == ["fused_mul_add_sub"]
    _assert_as_eager(fused.numpy(), eager.numpy())
    assert (fused.numpy()[0] == p0[0]).all() and (fused.numpy()[:, -1] == p0[:, -1]).all()  # the edge untouched


def test_a_slice_written_while_a_shifted_view_of_it_is_read_keeps_numpys_result():
    # each element's new value reads its neighbour's old one: fused, another
    # thread would have written it already, so the fuser ends the kernel first
    def shift(p, q):
        t = p[:, :-1] * 2.0 + q
        p[:, 1:].copy_(t)

    p0, q0 = np.arange(20.0).reshape(4, 5), np.ones((4, 4))
    fused = tp.tensor(p0)
    step = tp.compile(shift)
    step(tp.tensor(p0), tp.tensor(q0))
    step(fused, tp.tensor(q0))
    expected = p0.copy()
    expected[:, 1:] = p0[:, :-1] * 2.0 + q0
    np.testing.assert_array_equal(fused.numpy(), expected)


def test_one_element_ops_after_full_size_ones_run_on_one_thread_of_the_same_kernel():
    def advance(u, v, iters, go):
        u.mul_(0.5).add_(v)
        iters.add_(1)
        tp.lt(iters, 3, out=go)

    u, v = tp.ones(5, 7), tp.full((5, 7), 0.25)
    iters, go = tp.zeros(1, dtype=tp.int64), tp.empty(1, dtype=tp.bool)
    step = tp.compile(advance)
    for k in range(1, 5):
        step(u, v, iters, go)
        assert iters.item() == k and go.item() == (k < 3)
    assert _names(step) == ["fused_mul_add_lt"]
    expected = np.ones((5, 7), np.float32)
    for _ in range(4):
        expected = expected * np.float32(0.5) + np.float32(0.25)
    _assert_as_eager(u.numpy(), expected)


def test_full_size_ops_after_a_tail_they_do_not_touch_join_its_kernel():
    """A Runge-Kutta stage: the stage's time (one element, the tail), then its
    state (full size) from the step size the tail only reads: one kernel. A
    full-size op that reads what the tail writes, or writes what it reads,
    waits for it: the tail runs on the first thread after every element."""

    def stage(y, k, t, h):
        acc = k * 0.2
        t.add_(h * 0.5)  # the tail: t written, h read
        y.add_(acc * h)  # reads h: joins

    def reads_tail(y, k, t, h):
        acc = k * 0.2
        t.add_(h * 0.5)
        y.add_(acc * t)  # reads the t the tail writes: after it

    def writes_tail_input(y, k, t, h):
        acc = k * 0.2
        t.add_(y[0, 0:1] * 0.5)  # the tail reads y's first element
        y.add_(acc)  # and this writes it: into a buffer, copied back into y after the tail's kernel

    def writes_tail_output(y, k, t, h):
        acc = k * 0.2
        y[0, 0:1].copy_(h)  # the tail writes y's first element (and reads only h)
        y.copy_(acc)  # and this too: after the tail

    k0, y0 = np.random.default_rng(5).standard_normal((2, 4, 3))
    for fn, kernels in ((stage, ["fused_mul_add"]), (reads_tail, ["fused_mul_add", "fused_mul_add"]),
                        (writes_tail_input, ["fused_mul_add", "fused_copy"]),
                        (writes_tail_output, ["fused_mul_copy", "fused_copy"])):  # fmt: skip
        eager = [tp.tensor(y0), tp.tensor(k0), tp.tensor([1.0]), tp.tensor([0.1])]
        fn(*eager)
        step = tp.compile(fn)
        step(*[t.clone() for t in eager])  # the warm-up
        fused = [tp.tensor(y0), tp.tensor(k0), tp.tensor([1.0]), tp.tensor([0.1])]
        step(*fused)  # captured and replayed
        assert _names(step) == kernels, fn.__name__
        for got, want in zip(fused, eager, strict=True):
            _assert_as_eager(got.numpy(), want.numpy())


def test_a_one_element_op_writing_what_the_full_size_ops_read_waits_for_them():
    # scale is read by every thread: the op that changes it cannot run beside them
    def rescale(u, scale):
        u.mul_(scale)
        scale.mul_(2.0)

    u, scale = tp.ones(64), tp.tensor([1.5])
    step = tp.compile(rescale)
    for k in range(3):
        step(u, scale)
        assert scale.item() == 1.5 * 2 ** (k + 1)
    np.testing.assert_array_equal(u.numpy(), np.full(64, 1.5 * 3.0 * 6.0, np.float32))
    assert [n.kernel for n in step.graph(u, scale).nodes()] == ["fused_mul", "fused_mul"]  # one text, two launches


def test_rolled_neighbours_on_a_periodic_grid_are_read_in_the_chains_kernel():
    def energy(spins, field):
        near = tp.roll(spins, 1, 1) + tp.roll(spins, -1, 1) + tp.roll(spins, 1, 2) + tp.roll(spins, -1, 2)
        return (spins * (near + field)).sum(dim=(1, 2)), tp.roll(spins, (2, -3), (0, 2))

    s0 = np.where(np.random.default_rng(5).random((3, 6, 8)) < 0.5, -1.0, 1.0)
    spins, field = tp.tensor(s0), tp.tensor([0.5])
    step = tp.compile(energy)
    step(spins, field)
    got, moved = step(spins, field)
    assert _names(step) == ["fused_add_mul_sum"]
    near = np.roll(s0, 1, 1) + np.roll(s0, -1, 1) + np.roll(s0, 1, 2) + np.roll(s0, -1, 2)
    np.testing.assert_allclose(got.numpy(), (s0 * (near + 0.5)).sum(axis=(1, 2)), rtol=1e-12)
    np.testing.assert_array_equal(moved.numpy(), np.roll(s0, (2, -3), (0, 2)))


def test_a_roll_of_what_the_chain_wrote_ends_the_chain_first():
    def smooth(u):
        v = u * 2.0
        return (tp.roll(v, 1, 0) + v) * 0.5

    u0 = np.arange(12.0).reshape(4, 3)
    step = tp.compile(smooth)
    step(tp.tensor(u0))
    got = step(tp.tensor(u0))
    np.testing.assert_array_equal(got.numpy(), (np.roll(u0 * 2, 1, 0) + u0 * 2) * 0.5)
    assert len(_names(step)) == 2  # another thread's element of v is read: v is stored first


def _sweep(spins, colours, beta):
    """An Ising sweep without its draws: each colour's sites flipped where the
    acceptance passes a fixed threshold, the spins read rolled, then stored."""
    for colour in (0, 1):
        near = tp.roll(spins, 1, 1) + tp.roll(spins, -1, 1) + tp.roll(spins, 1, 2) + tp.roll(spins, -1, 2)
        flip = tp.logical_and(tp.exp(-2.0 * beta * spins * near) > 0.4, colours[colour])
        spins.copy_(tp.where(flip, -spins, spins))
    return spins.sum(dim=(1, 2))


def _lattices(seed: int):
    rng = np.random.default_rng(seed)
    s0 = np.where(rng.random((3, 6, 8)) < 0.5, -1.0, 1.0)
    checker = (np.arange(6)[:, None] + np.arange(8)[None, :]) % 2
    colours = tp.tensor(np.stack([checker == 0, checker == 1])[:, None])
    return s0, colours, tp.tensor(1.0 / np.array([1.5, 2.3, 3.0])[:, None, None])


def test_a_store_into_what_the_chain_reads_rolled_goes_to_a_buffer_until_a_store_ends_it():
    """The first colour's flips conflict with the rolled reads of the spins: they
    go to a buffer, which the second colour reads rolled and whose flips end the
    renaming, stored into the spins (with their magnetisation). Two kernels, where
    storing each colour apart took four; ``-2.0 * beta`` (a value a lattice) joins
    the neighbours' kernel after them."""
    s0, colours, beta = _lattices(7)
    eager = tp.tensor(s0)
    want = _sweep(eager, colours, beta)
    step = tp.compile(_sweep)
    step(tp.tensor(s0), colours, beta)  # the warm-up
    spins = tp.tensor(s0)
    got = step(spins, colours, beta)  # captured and replayed
    assert _names(step) == ["fused_add_mul_exp_gt_and_neg_where", "fused_add_mul_exp_gt_and_neg_where_sum"]
    np.testing.assert_array_equal(spins.numpy(), eager.numpy())
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert not np.array_equal(spins.numpy(), s0)  # sites flipped


def test_a_renamed_tensor_is_copied_back_before_anything_else_touches_it():
    """Where no store ends the renaming, the buffer goes back into the tensor
    before the function ends, before an op that touches part of it, before a
    kernel the fuser does not make (a float16 cast, here) and before a
    reduction it cannot fuse; reshaped whole, it is read from the buffer."""

    def ends_renamed(spins, colours, beta):
        near = tp.roll(spins, 1, 1) + tp.roll(spins, -1, 1)
        spins.copy_(spins * near * 0.5)  # renamed; nothing ends it

    def touches_part(spins, colours, beta):
        ends_renamed(spins, colours, beta)
        spins[1].add_(1.0)  # part of it: copied back first
        return spins * 2.0

    def eager_cast(spins, colours, beta):
        ends_renamed(spins, colours, beta)
        return spins.half().float() + spins.reshape(3, 48).sum(dim=1).reshape(3, 1, 1)

    def unfused_reduction(spins, colours, beta):
        ends_renamed(spins, colours, beta)
        return spins.prod(dim=1), spins.reshape(3, 48) * beta.reshape(3, 1)  # whole, in another shape

    for fn in (ends_renamed, touches_part, eager_cast, unfused_reduction):
        s0, colours, beta = _lattices(8)
        eager = tp.tensor(s0)
        want = fn(eager, colours, beta)
        step = tp.compile(fn)
        step(tp.tensor(s0), colours, beta)
        spins = tp.tensor(s0)
        got = step(spins, colours, beta)
        assert _names(step)[:2] == ["fused_add_mul", "fused_copy"], fn.__name__  # the buffer, then back
        _assert_as_eager(spins.numpy(), eager.numpy())
        for a, b in zip(_values(got), _values(want), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12)


def _values(out) -> list:
    return [] if out is None else [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]


def test_the_columns_of_a_stack_are_stored_by_the_chain_that_computes_them():
    # Van der Pol's right-hand side for many trajectories at once: two interleaved columns, one kernel
    def rhs(y, p):
        x, v = y[:, 0], y[:, 1]
        return tp.stack([v, p[:, 0] * (1.0 - x * x) * v - x], dim=1)

    rng = np.random.default_rng(6)
    y0, p0 = rng.standard_normal((50, 2)), rng.random((50, 1)) + 0.5
    step = tp.compile(rhs)
    step(tp.tensor(y0), tp.tensor(p0))
    got = step(tp.tensor(y0), tp.tensor(p0))
    assert _names(step) == ["fused_mul_sub"]  # (1 - x * x) first; the copies are stores
    x, v = y0[:, 0], y0[:, 1]
    _assert_as_eager(got.numpy(), np.stack([v, p0[:, 0] * (1.0 - x * x) * v - x], axis=1))


def test_uniform_draws_join_the_chain_and_draw_the_eager_numbers_at_every_pass():
    # a Metropolis-like step: draws, a test, a masked update and a count, one kernel a pass of a while loop
    def sweep(x, accepted, passes, go):
        flip = tp.rand(*x.shape, dtype=tp.float64) < 0.3
        x.copy_(tp.where(flip, -x, x))
        accepted.add_(flip.sum())
        passes.add_(1)
        tp.lt(passes, 3, out=go)

    def state():
        return [tp.ones(6, 9, dtype=tp.float64), tp.zeros(1, dtype=tp.int64), tp.zeros(1, dtype=tp.int64),
                tp.ones(1, dtype=tp.bool)]  # fmt: skip

    eager = state()
    tp.manual_seed(11)
    for _ in range(3):
        sweep(*eager)
    step, fused = tp.compile(sweep), state()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(fused[3]):
            step(*fused)
    assert _names(step) == ["fused_lt_neg_where_sum_add"]
    tp.manual_seed(11)
    g.replay()
    for got, want in zip(fused, eager, strict=True):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert 0 < fused[1].item() < 3 * 54


def test_a_reduction_along_rows_after_a_counter_runs_the_counter_on_the_first_thread():
    # an Ising sweep's end: the flip, the sweep count and the test, then each replica's magnetisation
    def finish(spins, sweep, go):
        spins.mul_(-1.0)
        sweep.add_(1)
        tp.lt(sweep, 3, out=go)
        return spins.sum(dim=(1, 2))

    s0 = np.where(np.random.default_rng(10).random((3, 4, 6)) < 0.7, 1.0, -1.0)
    spins, sweep, go = tp.tensor(s0), tp.zeros(1, dtype=tp.int64), tp.ones(1, dtype=tp.bool)
    step = tp.compile(finish)
    for k in range(1, 4):
        got = step(spins, sweep, go)
        assert sweep.item() == k and go.item() == (k < 3)
        np.testing.assert_array_equal(got.numpy(), (s0 * (-1.0) ** k).sum(axis=(1, 2)))
    assert _names(step) == ["fused_mul_sum_add_lt"]


# -- random programs over a padded field ---------------------------------------------------------

H, W = 5, 9  # the interior; 45 elements, more than three per thread of the simulator's blocks
VIEWS = tuple((dy, dx) for dy in range(3) for dx in range(3))  # p[dy:dy + H, dx:dx + W]
KINDS = ("read", "update", "combine", "roll", "pair", "draw", "rows", "reduce", "count", "flag", "note", "whole")


@st.composite
def _programs(draw):
    """Steps ``(kind, view, pick, scalar)``: a view of ``p`` by its index in
    ``VIEWS``, a full-size value by its index (modulo the values made so far)."""
    steps = []
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(KINDS))
        steps.append((kind, draw(st.integers(0, len(VIEWS) - 1)), draw(st.integers(0, 9)),
                      draw(st.sampled_from((0.5, -1.5, 2.0)))))  # fmt: skip
    return steps


def _run(steps, p, q, total, count, flag):
    """The program: full-size values from shifted views of ``p`` and ``q``;
    in-place updates of views of ``p``, and of ``q`` whole from itself rolled
    (stored into a buffer, ``compiler/_renaming.py``) or in part; sums into
    the one-element ``total``; a counter and a flag. Returns its last
    full-size value."""
    values = [q]
    for kind, k, pick, s in steps:
        dy, dx = VIEWS[k]
        view, value = p[dy : dy + H, dx : dx + W], values[-1 - pick % len(values)]  # the latest values first
        if kind == "read":
            values.append(view * s + value)
        elif kind == "update":
            view.add_(value) if pick % 2 == 0 else view.mul_(s)
        elif kind == "combine":
            values.append(tp.maximum(values[k % len(values)], value) - total)
        elif kind == "roll":  # of a value, or of the field's interior (a view)
            source = view if pick % 2 else value
            values.append(tp.roll(source, k - 4, k % 2) * s)
        elif kind == "draw":  # uniform numbers, as a Monte Carlo step draws them
            values.append(tp.where(tp.rand(H, W, dtype=tp.float64) < 0.5, value, view * s))
        elif kind == "pair":  # two values side by side (interleaved), read back through the same views
            pair = tp.stack([value, view * s], dim=-1)
            values.append(pair[..., 1] - pair[..., 0] if pick % 2 else pair[..., k % 2] * pair[..., 1 - k % 2])
        elif kind == "rows":  # a reduction along each row (after a counter and a flag, it may share their kernel)
            values.append(value - value.sum(dim=1, keepdim=True) * s)
        elif kind == "reduce":
            total.copy_(value.sum() * s)
        elif kind == "count":
            count.add_(1)
        elif kind == "flag":
            tp.logical_and(tp.gt(total, s), tp.lt(count, pick % 4), out=flag)
        elif kind == "whole":  # q (values[0]) stored whole, from itself rolled; or part of it updated
            if pick % 3 == 2:
                q[pick % H].add_(s)
            else:
                q.copy_(tp.roll(q, k - 4, pick % 2) * s + value)
        else:  # a note of an element of the field, through a one-element view
            total.copy_(view[pick % H, k].reshape(1) + total)
    return values[-1]


@hypothesis_settings(examples=(60, 120), steps=(1, 1))
@given(steps=_programs())
def test_random_stencil_programs_equal_eager(steps):
    rng = np.random.default_rng(len(steps))
    p0, q0 = rng.standard_normal((H + 2, W + 2)), rng.standard_normal((H, W))

    def state():
        one = [tp.tensor([0.25]), tp.zeros(1, dtype=tp.int64), tp.empty(1, dtype=tp.bool)]
        return [tp.tensor(p0), tp.tensor(q0), *one]

    eager = state()
    tp.manual_seed(7)
    want = _run(steps, *eager)
    fn = tp.compile(lambda *xs: _run(steps, *xs))
    fn(*state())  # the warm-up
    fused = state()
    tp.manual_seed(7)  # the replay draws what the eager run drew
    got = fn(*fused)  # captured and replayed
    if any(step[0] == "rows" for step in steps):  # a sum along each row, added in another order
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    else:
        _assert_as_eager(got.numpy(), want.numpy())
    for a, b in zip(fused[:4], eager[:4], strict=True):  # p, q, total, count: every write reached them
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)  # sums in another order
    if any(step[0] == "flag" for step in steps):
        assert fused[4].item() == eager[4].item()


# -- lines of a field: rows and columns that cross ------------------------------------------------


def test_a_row_and_a_column_crossing_at_their_first_elements_are_stored_by_one_kernel():
    """A lattice-Boltzmann solver's ghost ring: the row and the column of one
    corner share only their first element, which one thread stores (in the
    order written); crossing at other indices, two threads would: two kernels."""

    def corner(p, q, at):
        p[0, 0:5].copy_(q[1, 1:6])  # the top row
        p[0:5, at].copy_(q[1:6, 2] * 2.0)  # a column from the top row down: it stores over the row's element at
        p[1:6, 6].add_(p[0:5, at])  # the column's value, as the kernel holds it
        p[1:6, 5].sub_(p[0, 0:5])  # the row's, but the column stored over one element: after both are stored

    q0 = np.random.default_rng(4).standard_normal((7, 7))
    for at, kernels in ((0, ["fused_mul_add", "fused_sub"]), (2, ["fused_mul", "fused_add", "fused_sub"])):
        eager, fused, q = tp.zeros(7, 7), tp.zeros(7, 7), tp.tensor(q0)
        corner(eager, q, at)
        step = tp.compile(corner)
        step(tp.zeros(7, 7), q, at)  # the warm-up
        step(fused, q, at)  # captured and replayed
        assert _names(step) == kernels, at
        _assert_as_eager(fused.numpy(), eager.numpy())

    def again(p, q):
        p[0, 0:5].copy_(q[1, 1:6])
        p[0:5, 0].copy_(q[1:6, 2])
        p[0, 0:5].copy_(q[2, 1:6])  # the row again: the corner is its value, stored last

    eager, fused, q = tp.zeros(7, 7), tp.zeros(7, 7), tp.tensor(q0)
    again(eager, q)
    step = tp.compile(again)
    step(tp.zeros(7, 7), q)
    step(fused, q)
    assert _names(step) == ["fused_copy"] and fused[0, 0].item() == np.float32(q0[2, 1])
    _assert_as_eager(fused.numpy(), eager.numpy())


M, L = 7, 4  # lines of L elements of an M x M field: rows p[r, o:o + L] and columns p[o:o + L, c]
LINES = tuple((axis, k, o) for axis in (0, 1) for k in range(M) for o in range(M - L + 1))


@st.composite
def _line_programs(draw):
    line = st.integers(0, len(LINES) - 1)
    return [
        (
            draw(st.sampled_from(("copy", "add", "value", "store"))),
            draw(line),
            draw(line),
            draw(st.sampled_from((0.5, -1.5))),
        )  # fmt: skip
        for _ in range(draw(st.integers(1, 8)))
    ]


def _lines(steps, p):
    def at(k):
        axis, i, o = LINES[k]
        return p[i, o : o + L] if axis == 0 else p[o : o + L, i]

    values = [tp.ones(L)]
    for kind, dst, src, s in steps:
        if kind == "copy":
            at(dst).copy_(at(src) * s)
        elif kind == "add":
            at(dst).add_(at(src))
        elif kind == "value":
            values.append(at(src) * s + values[-1])
        else:
            at(dst).copy_(values[-1])
    return values[-1]


@hypothesis_settings(examples=(60, 120), steps=(1, 1))
@given(steps=_line_programs())
def test_random_programs_over_crossing_rows_and_columns_equal_eager(steps):
    p0 = np.random.default_rng(len(steps)).standard_normal((M, M))
    eager = tp.tensor(p0)
    want = _lines(steps, eager)
    fn = tp.compile(lambda p: _lines(steps, p))
    fn(tp.tensor(p0))  # the warm-up
    fused = tp.tensor(p0)
    got = fn(fused)  # captured and replayed
    _assert_as_eager(got.numpy(), want.numpy())
    _assert_as_eager(fused.numpy(), eager.numpy())


@hypothesis_settings(examples=(300, 600), steps=(1, 1))
@given(n=st.integers(1, 12), sa=st.integers(1, 13), sb=st.integers(1, 13), a=st.integers(0, 60),
       b=st.integers(0, 60))  # fmt: skip
def test_which_elements_two_lines_share_is_what_counting_them_gives(n, sa, sb, a, b):
    """``sharing`` solves for the shared elements of two lines of n elements;
    here they are counted one by one."""
    from tensorplay.compiler._views import sharing

    first = {a + k * sa: k for k in range(n)}
    kinds = {"same" if first[b + j * sb] == j else "other" for j in range(n) if b + j * sb in first}
    want = "other" if "other" in kinds else "same" if kinds else "none"
    assert sharing((8 * a, (sa,), 8), (8 * b, (sb,), 8), (n,)) == want
