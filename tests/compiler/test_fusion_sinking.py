"""Steps that move into the next kernel (``compiler/_sinking.py``): a kernel with
a full reduction ends where an op reads what its tail computed from it, and
the steps of that kernel which neither the reduction nor the tail needs run
first in the next kernel, where the op reads what they read. Every value must
stay the eager one: random programs of in-place updates, over separate
tensors and over overlapping views of one, before and after a reduction and
the scalar computed from it, compiled against eager."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers.properties import hypothesis_settings
from hypothesis import given
from hypothesis import strategies as st

import tensorplay as tp
from tensorplay.runtime.backend import get as get_backend

SHAPE = (4, 50)  # 200 elements: more than three a thread of the simulator's 64, the loops' every path
SLOTS = 6  # four tensors, and two views of a fifth that overlap (its rows 0-3 and 1-4)
KINDS = ("axpy", "scale_add", "mul", "fresh")


@pytest.fixture(autouse=True, scope="module")
def _an_h100s_wave():
    """Steps move only where the next kernel gives each element a thread (at
    most a wave of them): the simulator's wave, 64 threads, is raised to an
    H100's, 132 multiprocessors of 2048 threads, as the GPU runs these sizes."""
    device = get_backend()
    threads, device.max_threads_per_launch = device.max_threads_per_launch, max(device.max_threads_per_launch, 270_336)
    try:
        yield
    finally:
        device.max_threads_per_launch = threads


def _kernel_params(compiled) -> list[list[str]]:
    """The parameters of each fused kernel of ``compiled``, in launch order."""
    return [re.search(r"def \w+\((.*)\):", text).group(1).split(", ") for text in compiled.kernels()]


def cg_like(x, r, p, ap, rr, alpha):
    """CG's updates after ``alpha``: x and r, the sum r·r, then p from it."""
    inner = p[1:-1, 1:-1]
    x.add_(alpha * inner)
    r.sub_(alpha * ap)
    rr_new = (r * r).sum()
    inner.mul_(rr_new / rr).add_(r)
    rr.copy_(rr_new)


def _cg_like_kernels() -> tuple[list[str], list[str]]:
    """The parameters of ``cg_like``'s two kernels, once its compiled values
    are checked against eager ones: over more elements than the last block of
    the sum's kernel takes after it (``fused.EPILOGUE_MAX``)."""
    rng, shape = np.random.default_rng(3), (16, 50)
    start = [rng.standard_normal(shape), rng.standard_normal(shape), rng.standard_normal((18, 52))]
    start += [rng.standard_normal(shape), np.array([2.5]), np.array([0.3])]
    eager = [tp.tensor(a) for a in start]
    cg_like(*eager)
    compiled = tp.compile(cg_like)
    for _ in range(2):  # the first call runs eagerly, the second fused
        fused = [tp.tensor(a) for a in start]
        compiled(*fused)
        for got, want in zip(fused, eager, strict=True):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-13)
    return _kernel_params(compiled)


def test_an_update_that_the_sum_does_not_need_runs_in_the_next_kernel_with_the_eager_values():
    summing, updating = _cg_like_kernels()
    # the sum's kernel reads r and Ap (and no longer x or p); the next reads x, r and p and stores x and p
    assert [a for a in summing if a[0] in "ac"] == ["a0", "a1"]
    assert [a for a in updating if a[0] in "aco"] == ["a0", "a1", "c0", "o0", "o1"]


def test_nothing_moves_onto_threads_of_several_elements(monkeypatch):
    # over a wave of threads, each takes several elements: x's update stays beside r's
    monkeypatch.setattr(get_backend(), "max_threads_per_launch", 64)
    summing, updating = _cg_like_kernels()
    assert [a for a in summing if a[0] in "aco"] == ["a0", "a1", "a2", "c0", "o0", "o1"]  # x, r, Ap, p in; x, r out
    assert [a for a in updating if a[0] in "aco"] == ["a0", "c0", "o0"]  # r and p in, p out


def reads_what_the_sum_changes(a, b, c):
    a.add_(0.5 * b)  # nothing after needs it, but it reads b before b changes
    b.mul_(c)
    beta = (b * c).sum() / 1000.0
    c.add_(beta * b)  # reads b too


def reads_a_temporary_of_the_sum(a, b, c):
    t = b * c  # the sum's value, read by the update too: the update stays
    a.add_(t)
    beta = t.sum() / 1000.0
    c.add_(beta * b)


@pytest.mark.parametrize("fn", [reads_what_the_sum_changes, reads_a_temporary_of_the_sum])
def test_an_update_that_would_read_other_values_in_the_next_kernel_stays(fn):
    rng = np.random.default_rng(4)
    start = [rng.standard_normal((16, 50)) for _ in range(3)]
    eager = [tp.tensor(v) for v in start]
    fn(*eager)
    compiled = tp.compile(fn)
    for _ in range(2):
        fused = [tp.tensor(v) for v in start]
        compiled(*fused)
        for got, want in zip(fused, eager, strict=True):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-13)
    _, updating = _kernel_params(compiled)
    assert [a for a in updating if a[0] in "aco"] == ["a0", "a1", "o0"]  # b and c in, c out: a's update stayed


def _op(second: bool):
    return st.tuples(
        st.sampled_from(KINDS), st.integers(0, SLOTS - 1), st.integers(0, SLOTS - 1), st.sampled_from((0, 1, 2))
    ).map(lambda t: (*t, second))


@st.composite
def _programs(draw):
    """(updates before the sum, the sum's two slots, updates after it)."""
    first = draw(st.lists(_op(False), min_size=1, max_size=4))
    summed = (draw(st.integers(0, SLOTS - 1)), draw(st.integers(0, SLOTS - 1)))
    second = draw(st.lists(_op(True), min_size=1, max_size=3))
    second[0] = (*second[0][:3], 2, True)  # the first op after the sum reads the scalar from it: it ends the kernel
    return first, summed, second


def _program(a, b, c, d, big, w, plan):
    """Run ``plan`` over the slots (a, b, c, d, and rows 0-3 and 1-4 of ``big``);
    a scale is 0.5, the one-element ``w``, or after the sum the scalar from it."""
    slots = [a, b, c, d, big[:4], big[1:]]
    first, (k, m), second = plan
    beta = None
    for ops in (first, second):
        for kind, i, j, scale, after in ops:
            s = (0.5, w, beta if after else w)[scale]
            if kind == "axpy":
                slots[i].add_(s * slots[j])
            elif kind == "scale_add":
                slots[i].mul_(s).add_(slots[j])
            elif kind == "mul":
                slots[i].mul_(slots[j] * 0.25)
            else:  # a temporary's value into the slot
                slots[i].copy_(slots[j] * 0.5 + s)
        if beta is None:
            beta = (slots[k] * slots[m]).sum() / 1000.0  # a reduction, and a scalar from it: the tail


@given(_programs())
@hypothesis_settings((40, 300))
def test_random_updates_around_a_sum_equal_eager(plan):
    rng = np.random.default_rng(len(str(plan)))
    start = [rng.uniform(-1, 1, SHAPE) for _ in range(4)] + [rng.uniform(-1, 1, (5, 50)), np.array([0.75])]

    def state():
        return [tp.tensor(a) for a in start]

    eager = state()
    _program(*eager, plan)
    compiled = tp.compile(lambda *args: _program(*args, plan))
    for _ in range(2):  # the first call runs eagerly, the second fused
        fused = state()
        compiled(*fused)
        for got, want in zip(fused, eager, strict=True):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)
