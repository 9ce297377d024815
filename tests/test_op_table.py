"""The op table (``kernels/op_table.py``, ``kernels/elementwise.OPS``): every name an entry declares
exists and computes that entry's op, and every backward it declares matches
finite differences."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.gradcheck import check_gradients

import tensorplay as tp
from tensorplay.kernels.elementwise import OPS

# NumPy's float64 twin of each entry, the independent reference
REFERENCE = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh,
    "sin": np.sin, "cos": np.cos, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0),
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.divide, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum, "eq": np.equal, "ne": np.not_equal, "lt": np.less,
    "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "pos": np.positive, "square": np.square, "sign": np.sign, "reciprocal": np.reciprocal,
    "rsqrt": lambda x: 1 / np.sqrt(x), "conj": np.conj, "real": np.real, "floor": np.floor, "ceil": np.ceil,
    "trunc": np.trunc, "round": np.round, "expm1": np.expm1, "log1p": np.log1p, "log2": np.log2,
    "log10": np.log10, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
    "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "erf": np.vectorize(math.erf), "erfc": np.vectorize(math.erfc), "lgamma": np.vectorize(math.lgamma),
    "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "signbit": np.signbit,
    "logical_not": np.logical_not, "floordiv": np.floor_divide, "mod": np.remainder, "fmod": np.fmod,
    "atan2": np.arctan2,
    "hypot": np.hypot, "logaddexp": np.logaddexp, "copysign": np.copysign, "nextafter": np.nextafter,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}  # fmt: skip
POSITIVE = {"log", "log2", "log10", "sqrt", "rsqrt", "pow", "lgamma", "digamma"}  # defined for positive operands
UNIT = {"asin", "acos", "atanh"}  # defined on (-1, 1)

X = np.array([0.3, 1.7, 2.2, 0.9])
Y = np.array([1.1, 0.4, 2.5, 0.9])


def _operands(op):
    n = OPS[op].arity
    if op in UNIT:
        return [(X - 1) / 2]
    if op == "acosh":
        return [X + 1]
    if op in ("mod", "fmod"):  # no quotient near an integer, where the remainder jumps
        return [X + 0.05, Y]
    return [X, Y][:n] if op in POSITIVE else [X - 1.0, Y - 1.2][:n]


@pytest.mark.parametrize("op", sorted(o for o in OPS if OPS[o].function and o in REFERENCE))
def test_each_entrys_function_and_method_compute_its_op(op):
    entry = OPS[op]
    arrays = _operands(op)
    expected = REFERENCE[op](*arrays)
    tensors = [tp.tensor(a) for a in arrays]
    results = [getattr(tp, entry.function)(*tensors)]
    if entry.method:
        results.append(getattr(tensors[0], entry.method)(*tensors[1:]))
    for got in results:
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op", sorted(o for o in OPS if OPS[o].symbol and OPS[o].arity == 2 and o in REFERENCE))
def test_each_entrys_operator_and_its_reflection(op):
    entry = OPS[op]
    a, b = _operands(op)
    expected = REFERENCE[op](a, b)
    dunder = f"__{op}__"
    np.testing.assert_allclose(getattr(tp.tensor(a), dunder)(tp.tensor(b)).numpy(), expected, rtol=1e-12)
    if entry.result != "bool":  # 2.0 <op> tensor
        reflected = getattr(tp.tensor(b), f"__r{op}__")(float(a[0]))
        np.testing.assert_allclose(reflected.numpy(), REFERENCE[op](a[0], b), rtol=1e-12)


# (the complex-only ones, imag: tests/autograd/test_complex_autograd.py)
@pytest.mark.parametrize("op", sorted(o for o in OPS if OPS[o].backward is not None and "f" in OPS[o].kinds))
def test_each_declared_backward_matches_finite_differences(op):
    entry = OPS[op]
    name = entry.method if not entry.symbol else f"__{op}__"  # an operator, or a method only (relu's backward)
    fn = getattr(tp, entry.function) if entry.function else lambda *t: getattr(t[0], name)(*t[1:])
    check_gradients(fn, *_operands(op))


def test_sin_and_cos_come_from_the_table():
    x = tp.tensor([0.0, math.pi / 2]).requires_grad_()
    assert tp.sin(x).tolist() == pytest.approx([0.0, 1.0], abs=1e-7)
    assert x.cos().tolist() == pytest.approx([1.0, 0.0], abs=1e-7)
    tp.sin(x).sum().backward()
    assert x.grad.tolist() == pytest.approx([1.0, 0.0], abs=1e-7)
    assert tp.sin(x).grad_fn.name == "SinBackward"
    assert {"sin", "cos"} <= set(tp.__all__)


def test_an_entry_is_all_it_takes(monkeypatch):
    """A new entry gives a kernel, a method, a tp. function and a backward:
    the mechanism docs/internals.md describes, run on a made-up op."""
    from tensorplay import _elementwise_functions, _methods
    from tensorplay.kernels import elementwise as ew
    from tensorplay.kernels import op_table

    cube = op_table._unary("cube", lambda x: x * x * x, backward=lambda g, x, out: (g * 3 * x * x,))
    monkeypatch.setitem(ew.OPS, "cube", cube)
    methods, functions = _methods._from_table(), _elementwise_functions._from_table()
    x = tp.tensor([1.0, 2.0]).requires_grad_()
    y = methods["cube"](x)
    assert y.tolist() == [1.0, 8.0] and functions["cube"](x).tolist() == [1.0, 8.0]
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 12.0]
