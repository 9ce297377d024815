"""Random programs, compiled (fused) against eager: hypothesis draws straight-line
chains of elementwise ops over inputs of mixed dtypes (bool, int32, int64,
float32, float64) and broadcast shapes, with scalars, comparisons, ``where``,
``clamp``, in-place ops and ``out=`` (into an argument too, so the caller must
see the write), ending in a reduction along a dimension or over all of them;
and float programs whose gradients the compiled function's fused backward
gives.

Elementwise results must be the eager ones bit for bit on the simulator (the
same ops in the same order, each rounded to its tensor's dtype) and within an
FMA's rounding on a GPU; float sums and means within tolerance (the fused
reduction adds in another order); max, min, indices and integers exactly.
Shapes stay small for the simulator; ``TENSORPLAY_STRESS=full`` draws more
programs, at random (``tests/helpers/properties.py``).
"""

from __future__ import annotations

import numpy as np
from helpers.properties import hypothesis_settings
from hypothesis import given
from hypothesis import strategies as st

import tensorplay as tp

SIM = tp.cuda.backend() == "sim"

# (4, 50): 200 elements, more than three per thread of the simulator's 64, so
# fused loops take their four-at-a-time path; (2, 3, 8): three dimensions.
SHAPES = ((4, 50), (2, 3, 8))
SCALARS = (-1.5, 0.0, 2.0, 3, True)
BINARY = ("add", "sub", "mul", "maximum", "minimum", "gt", "lt", "le", "ge", "eq", "ne", "and", "or", "xor")
BITWISE = ("and", "or", "xor")
UNARY = ("abs", "neg", "tanh", "exp", "relu", "sigmoid", "sqrt")
IN_PLACE = ("add_", "sub_", "mul_")
REDUCTIONS = ("sum", "mean", "max", "min", "amax")


def _inputs(shape: tuple, seed: int) -> list:
    """Full-size tensors of every fusable dtype, a row and a column that
    broadcast against them, and a one-element tensor."""
    rng = np.random.default_rng(seed)
    full = [
        rng.standard_normal(shape).astype(np.float32),
        rng.standard_normal(shape),
        rng.integers(-5, 6, shape).astype(np.int32),
        rng.random(shape) > 0.5,
    ]
    row = rng.standard_normal(shape[-1:]).astype(np.float32)
    col = rng.integers(-5, 6, shape[:-1] + (1,)).astype(np.int64)
    one = rng.standard_normal(1)
    return [tp.tensor(a) for a in (*full, row, col, one)]


@st.composite
def _programs(draw):
    """(shape, steps, reduction, more): steps pick their operands by index
    (modulo the values made so far), so that any draw is a program; ``more``
    are reductions of the latest values (``(op, k, along)``: of the k-th
    latest, along the reduction's dimensions or over every element)."""
    shape = draw(st.sampled_from(SHAPES))
    steps = []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(("binary", "scalar", "unary", "where", "clamp", "in_place", "out")))
        op = draw(st.sampled_from({"unary": UNARY, "in_place": IN_PLACE}.get(kind, BINARY)))
        picks = tuple(draw(st.integers(0, 99)) for _ in range(3))
        scalars = (draw(st.sampled_from(SCALARS)), draw(st.sampled_from((*SCALARS, None))))
        steps.append((kind, op, picks, scalars))
    op = draw(st.sampled_from((None, *REDUCTIONS)))
    reduction = op and (op, draw(st.sampled_from((None, -1, 0, 1, "last two"))), draw(st.booleans()))
    more = draw(
        st.lists(st.tuples(st.sampled_from(REDUCTIONS), st.integers(0, 2), st.booleans()), min_size=1, max_size=3)
    )
    return shape, steps, reduction, tuple(more)


def _as_bool(x):
    return x if x.dtype is tp.bool else x > 0


def _bitwise_operand(x):
    """Bitwise ops take bools and integers: a float is compared first."""
    return x > 0 if x.dtype.kind == "f" else x


def _may_update(x, y) -> bool:
    """Whether ``x.add_(y)`` (sub_, mul_) is allowed: its result keeps ``x``'s
    shape and casts into ``x``'s dtype (no float into an integer, nothing but
    bools into a bool)."""
    if x is y or x.shape != np.broadcast_shapes(x.shape, y.shape) or x.dtype is tp.bool:
        return False
    return x.dtype.kind == "f" or y.dtype.kind != "f"


def _run(program, *inputs):
    """The program on ``inputs`` (which it may change in place): its last value
    and the reduction's result(s), then those of the reductions of other
    values after it, each over every element or, where ``more`` says so and
    the reduction has dimensions, along the reduction's (several full
    reductions of a chain share its kernel, and so do several along the same rows)."""
    _, steps, reduction, more = program
    values = list(inputs)
    for kind, op, (i, j, k), (s, t) in steps:
        x, y, z = (values[p % len(values)] for p in (i, j, k))
        if kind == "unary":
            x = x.int() if x.dtype is tp.bool else x
            values.append(getattr(tp, op)(x.abs() if op == "sqrt" else x))
        elif kind == "where":
            values.append(tp.where(_as_bool(z), x, y if t is None else t))
        elif kind == "clamp":
            lo, hi = (s, t) if t is None else sorted((_number(s), _number(t)))
            values.append(x.clamp(_number(lo), hi))
        elif kind == "in_place":
            if _may_update(x, y):
                getattr(x, op)(y)  # inputs are the call's copies: changed in place, as the caller's are
            else:
                values.append(getattr(tp, op[:-1])(x, y))
        elif op in BITWISE:
            values.append(_bitwise(op, _bitwise_operand(x), int(s) if kind == "scalar" else _bitwise_operand(y)))
        elif kind == "scalar":
            values.append(getattr(tp, op)(x, s))
        elif kind == "out":
            target = values[0]  # the float32 argument: the caller must see what is written into it
            if target.shape != np.broadcast_shapes(x.shape, y.shape):
                target = tp.empty(np.broadcast_shapes(x.shape, y.shape), dtype=tp.float64)
            values.append(getattr(tp, op)(x, y, out=target))
        else:
            values.append(getattr(tp, op)(x, y))
    last = values[-1]
    dim, keepdim = (reduction[1], reduction[2]) if reduction else (None, False)
    result = ()
    if reduction:
        result = _reduced(last, reduction[0], dim, keepdim)
        result = result if isinstance(result, tuple) else (result,)  # max(dim): values and indices
    others = tuple(
        _reduced(values[-1 - k % len(values)], more_op, dim if along else None, keepdim, values_only=True)
        for more_op, k, along in more
    )
    return last, *result, *others


def _reduced(x, op: str, dim, keepdim: bool, values_only: bool = False):
    """``op`` of ``x`` over every element (``dim`` None) or along ``dim`` (a
    mean of integers or bools in float64); ``values_only``: max and min as
    amax and amin, which give no indices."""
    x = x.double() if op == "mean" and x.dtype.kind != "f" else x
    if dim is None:
        return getattr(x, op)()
    dim = _dims(x, dim)
    if op in ("max", "min") and (isinstance(dim, tuple) or values_only):  # max(dim) takes one dimension
        op = "amax" if op == "max" else "amin"
    return getattr(x, op)(dim=dim, keepdim=keepdim)


def _dims(x, dim):
    """``dim`` of a drawn reduction as ``x`` takes it: ``"last two"`` its last
    two dimensions (its only one if it has one); a dimension it lacks wraps
    around (the last value may be a row: 1 of a row is its 0)."""
    return tuple(range(max(x.ndim - 2, 0), x.ndim)) if dim == "last two" else dim % x.ndim


def _number(s):
    """A scalar as a bound: bools as integers."""
    return int(s) if isinstance(s, bool) else s


def _bitwise(op: str, x, y):
    return {"and": lambda: x & y, "or": lambda: x | y, "xor": lambda: x ^ y}[op]()


def _assert_equal_values(got, want, exact: bool) -> None:
    """``exact``: bit for bit (NaN where NaN); else within float rounding."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if exact or got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@hypothesis_settings(examples=(30, 60), steps=(1, 1))  # on a GPU each example compiles kernels
@given(program=_programs())
def test_random_programs_of_mixed_dtypes_equal_eager(program):
    _check_against_eager(program)


@hypothesis_settings(examples=(12, 30), steps=(1, 1))
@given(program=_programs())
def test_random_programs_reducing_a_few_long_rows_equal_eager(program):
    # rows long enough, and few enough for a GPU's wave of threads, that blocks share each one
    # (the simulator's device is given an H100's threads a launch so that it decides as one would)
    from tensorplay.kernels.fused import BLOCK
    from tensorplay.runtime.backend import get as get_backend

    device = get_backend()
    threads, device.max_threads_per_launch = device.max_threads_per_launch, max(device.max_threads_per_launch, 270_336)
    try:
        _check_against_eager(((2, 16 * BLOCK + 8), *program[1:]))
    finally:
        device.max_threads_per_launch = threads


def _check_against_eager(program):
    shape, _, reduction, more = program
    inputs = _inputs(shape, len(program[1]))
    fn = tp.compile(lambda *xs: _run(program, *xs))
    eager_args = [t.clone() for t in inputs]
    eager = _run(program, *eager_args)
    fn(*[t.clone() for t in inputs])  # the warm-up
    args = [t.clone() for t in inputs]
    got = fn(*args)  # captured and replayed
    assert fn.graph(*args) is not None
    exact_elementwise = SIM  # on a GPU a multiply and an add may contract into one FMA
    _assert_equal_values(got[0].numpy(), eager[0].numpy(), exact_elementwise)
    ops = {op for op, _, _ in more} | ({reduction[0]} if reduction else set())
    exact_reduction = not {"sum", "mean"} & ops
    for a, b in zip(got[1:], eager[1:], strict=True):
        _assert_equal_values(a.numpy(), b.numpy(), exact_reduction and exact_elementwise)
    for a, b in zip(args, eager_args, strict=True):  # in-place and out= writes reached the caller's tensors
        _assert_equal_values(a.numpy(), b.numpy(), exact_elementwise)


# -- gradients ---------------------------------------------------------------------------------

GRAD_SHAPES = ((3, 20), (2, 3, 4))
GRAD_BINARY = ("add", "sub", "mul", "maximum", "minimum")
GRAD_UNARY = ("abs", "neg", "tanh", "exp", "relu", "sigmoid")


def _grad_inputs(shape: tuple, seed: int) -> list:
    """Float leaves that require grad (full-size float32, a float64 row, a
    one-element float32) and operands that do not (a float32 column, a bool mask)."""
    rng = np.random.default_rng(seed)
    return [
        tp.tensor(rng.standard_normal(shape).astype(np.float32)).requires_grad_(),
        tp.tensor(rng.standard_normal(shape[-1:])).requires_grad_(),
        tp.tensor(rng.standard_normal(1).astype(np.float32)).requires_grad_(),
        tp.tensor(rng.standard_normal(shape[:-1] + (1,)).astype(np.float32)),
        tp.tensor(rng.random(shape) > 0.5),
    ]


@st.composite
def _grad_programs(draw):
    """(shape, steps, reduction) of a float program (see ``_run_grad``)."""
    shape = draw(st.sampled_from(GRAD_SHAPES))
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(("binary", "scalar", "unary", "where", "clamp")))
        op = draw(st.sampled_from(GRAD_UNARY if kind == "unary" else GRAD_BINARY))
        picks = tuple(draw(st.integers(0, 99)) for _ in range(3))
        steps.append((kind, op, picks, draw(st.sampled_from((-0.5, 0.0, 2.0, 3)))))
    op = draw(st.sampled_from(REDUCTIONS))
    return shape, steps, (op, draw(st.sampled_from((None, -1, 0, "last two"))), draw(st.booleans()))


def _run_grad(program, *inputs):
    """The program on ``inputs``, reduced to one value (its backward starts there)."""
    _, steps, (op, dim, keepdim) = program
    values = list(inputs[:4])  # the mask is only a condition
    for kind, name, (i, j, k), s in steps:
        x, y = values[i % len(values)], values[j % len(values)]
        if kind == "unary":
            values.append(getattr(tp, name)(x))
        elif kind == "where":
            cond = inputs[4] if k % 2 else values[k % len(values)] > s
            values.append(tp.where(cond, x, y))
        elif kind == "clamp":
            values.append(x.clamp(s - 1, s + 1))
        elif kind == "scalar":
            values.append(getattr(tp, name)(x, s))
        else:
            values.append(getattr(tp, name)(x, y))
    last = values[-1]
    if dim is None:
        return getattr(last, op)()
    dim = _dims(last, dim)
    if op in ("max", "min"):  # values only: amax/amin take any dimensions
        op = "amax" if op == "max" else "amin"
    return getattr(last, op)(dim=dim, keepdim=keepdim).sum()


def _value_and_grads(fn, program, inputs):
    """``fn``'s value and the gradients of the leaves, on fresh copies of ``inputs``."""
    leaves = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    out = fn(*leaves)
    if out.requires_grad:
        out.backward()
    return out, [t.grad for t in leaves if t.requires_grad]


@hypothesis_settings(examples=(20, 40), steps=(1, 1))
@given(program=_grad_programs())
def test_random_float_programs_get_the_eager_gradients(program):
    inputs = _grad_inputs(program[0], len(program[1]))
    fn = tp.compile(lambda *xs: _run_grad(program, *xs))
    eager, eager_grads = _value_and_grads(lambda *xs: _run_grad(program, *xs), program, inputs)
    _value_and_grads(fn, program, inputs)  # the warm-up
    got, grads = _value_and_grads(fn, program, inputs)  # captured (forward and backward), replayed
    assert got.requires_grad == eager.requires_grad
    np.testing.assert_allclose(got.item(), eager.item(), rtol=1e-5, atol=1e-6)
    for a, b in zip(grads, eager_grads, strict=True):
        assert (a is None) == (b is None)
        if a is not None:  # within rounding: a broadcast leaf's gradient is a sum, fused or not
            _assert_equal_values(a.numpy(), b.numpy(), exact=False)
    if eager.requires_grad:
        assert fn.graph(*inputs, backward=True) is not None
