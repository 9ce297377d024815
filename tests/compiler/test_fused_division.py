"""Division-like ops in fused kernels where a divisor is zero: the GPU's
results (IEEE for floats: inf, -inf or NaN; 0 for an integer ``//`` or ``%``,
as Numba compiles them for CUDA), the same fused as eager, checked against
NumPy, which gives those too. Bool operands made in the chain (comparisons)
are the case where the simulator once ran plain Python and raised
ZeroDivisionError at replay."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import tensorplay as tp

OPS = {"/": operator.truediv, "//": operator.floordiv, "%": operator.mod}
X = [7.0, -7.0, 0.0, 3.0, 2.0]
Y = [0.0, 2.0, 0.0, -2.0, 5.0]  # divisors: zero for 7, and for 0 (0 / 0)


def _eager_and_compiled(fn, *args):
    eager = fn(*args)
    compiled = tp.compile(fn)
    compiled(*args)  # the warm-up
    return eager, compiled(*args), compiled  # captured, fused and replayed


def _reference(op, x: np.ndarray, y: np.ndarray, dtype) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(OPS[op](x, y)).astype(dtype)


@pytest.mark.parametrize("op", list(OPS))
def test_bools_made_in_the_chain_divide_as_the_gpu_divides(op):
    a, b = tp.tensor([1.0, 2.0, 3.0, 4.0]), tp.tensor([2.0, 1.0, 1.0, 5.0])  # a < b: True, False, False, True

    def f(a, b):
        return OPS[op](a < b, b > a)

    eager, compiled, fn = _eager_and_compiled(f, a, b)
    m = a.numpy() < b.numpy()
    want = _reference(op, m, m, eager.numpy().dtype)
    np.testing.assert_array_equal(eager.numpy(), want)
    np.testing.assert_array_equal(compiled.numpy(), want)
    assert len(fn.kernels()) == 1


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", [tp.float32, tp.int64, tp.int32])
def test_division_by_zero_in_a_fused_chain_gives_the_eager_result(op, dtype):
    x, y = tp.tensor(X).to(dtype), tp.tensor(Y).to(dtype)

    def f(x, y):
        return OPS[op](x + 0, y * 1)  # values of the chain, not loads

    eager, compiled, fn = _eager_and_compiled(f, x, y)
    want = _reference(op, x.numpy(), y.numpy(), eager.numpy().dtype)
    np.testing.assert_array_equal(eager.numpy(), want)
    np.testing.assert_array_equal(compiled.numpy(), want)
    assert len(fn.kernels()) == 1


@pytest.mark.parametrize("op", list(OPS))
def test_a_bool_divisor_in_a_fused_reduction_and_its_tail(op):
    a, b = tp.tensor([1.0, 2.0, 3.0, 4.0]), tp.tensor([2.0, 1.0, 1.0, 5.0])

    def f(a, b):
        total = OPS[op](a, a < b).sum()  # a / False is inf
        return total, OPS[op](total > 0, total < 0)  # a tail op of two bools: True / False

    eager, compiled, _ = _eager_and_compiled(f, a, b)
    with np.errstate(all="ignore"):
        m = a.numpy() < b.numpy()
        want_total = OPS[op](a.numpy(), m).astype(np.float32).sum()
        want_tail = OPS[op](np.bool_(want_total > 0), np.bool_(want_total < 0))
    for got in (eager, compiled):
        np.testing.assert_array_equal(got[0].numpy(), want_total)
        np.testing.assert_array_equal(got[1].numpy(), want_tail)
