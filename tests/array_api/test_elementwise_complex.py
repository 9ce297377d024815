"""The elementwise functions on complex64 and complex128 tensors, where the
array API standard defines them, against NumPy (complex128 reference): values,
dtype rules (``abs``, ``real`` and ``imag`` give the parts' type), mixed real
and complex operands and Python complex numbers, the special cases of division
and ``sign``, and capture and replay.
"""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp

Z = np.array([1 + 2j, -3 + 0.5j, 0.25 - 1j, -0.5 - 0.75j, 2 + 0j, 0 - 1.5j])
W = np.array([0.5 - 1j, 2 + 2j, -1 + 0.25j, 1.5 + 0j, -0.75 - 2j, 0 + 1j])
RTOL = {"complex64": 2e-6, "complex128": 1e-13}

UNARY = {
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "log2": np.log2, "log10": np.log10,
    "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "conj": np.conj,
    "negative": np.negative, "positive": np.positive, "square": np.square, "sign": np.sign,
    "reciprocal": np.reciprocal, "rsqrt": lambda z: 1 / np.sqrt(z), "round": np.round,
}  # fmt: skip
REAL_PARTS = {"abs": np.abs, "real": np.real, "imag": np.imag}
BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide, "pow": np.power}


def _close(got: tp.Tensor, want, dtype) -> None:
    assert got.dtype == dtype, f"dtype {got.dtype}, expected {dtype}"
    rtol = RTOL.get(dtype.name) or RTOL["complex64" if dtype is tp.float32 else "complex128"]
    np.testing.assert_allclose(got.numpy(), want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", [tp.complex64, tp.complex128], ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_each_unary_function_of_complex_tensors_as_numpy(name, dtype):
    z = Z.astype(dtype.np)
    _close(getattr(tp, name)(tp.tensor(z)), UNARY[name](z.astype(np.complex128)), dtype)


@pytest.mark.parametrize("dtype", [tp.complex64, tp.complex128], ids=str)
@pytest.mark.parametrize("name", sorted(REAL_PARTS))
def test_abs_real_and_imag_give_the_parts_dtype(name, dtype):
    z = Z.astype(dtype.np)
    part = tp.float32 if dtype is tp.complex64 else tp.float64
    _close(getattr(tp, name)(tp.tensor(z)), REAL_PARTS[name](z.astype(np.complex128)), part)


def test_real_and_conj_of_real_tensors_are_their_values_and_imag_is_refused():
    a = np.array([1.5, -2.0, 0.0])
    _close(tp.real(tp.tensor(a)), a, tp.float64)
    _close(tp.conj(tp.tensor(a)), a, tp.float64)
    with pytest.raises(TypeError, match="imag needs a complex tensor, got tensorplay.float64"):
        tp.imag(tp.tensor(a))


@pytest.mark.parametrize("dtype", [tp.complex64, tp.complex128], ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_each_binary_function_of_complex_tensors_as_numpy(name, dtype, request):
    if name == "pow" and tp.cuda.backend() == "cuda":  # known: Numba's complex pow on the GPU, to be replaced
        request.applymarker(
            pytest.mark.xfail(
                strict=True, reason="on the H200 complex pow differs from NumPy's at some values (417a36f)"
            )
        )
    z, w = Z.astype(dtype.np), W.astype(dtype.np)
    fn, twin = getattr(tp, name), BINARY[name]
    _close(fn(tp.tensor(z), tp.tensor(w)), twin(z.astype(np.complex128), w.astype(np.complex128)), dtype)
    column = z.reshape(-1, 1)  # broadcast: (6, 1) with (6,)
    _close(fn(tp.tensor(column), tp.tensor(w)), twin(column.astype(np.complex128), w.astype(np.complex128)), dtype)
    _close(fn(tp.tensor(z), 2.5), twin(z.astype(np.complex128), 2.5), dtype)  # a real number
    _close(fn(tp.tensor(z), 1 - 2j), twin(z.astype(np.complex128), 1 - 2j), dtype)  # a complex one
    _close(fn(0.5 + 1j, tp.tensor(w)), twin(0.5 + 1j, w.astype(np.complex128)), dtype)


def test_complex_and_real_operands_promote_as_the_standard_says():
    z64, x32, x64 = tp.tensor(Z.astype(np.complex64)), tp.tensor(W.real.astype(np.float32)), tp.tensor(W.real)
    _close(z64 * x32, Z.astype(np.complex64) * W.real.astype(np.float32), tp.complex64)
    _close(z64 + x64, Z.astype(np.complex64) + W.real, tp.complex128)  # float64 with complex64: complex128
    _close(x32 * 1j, W.real.astype(np.float32) * 1j, tp.complex64)
    _close(tp.exp(x32 * 1j), np.exp(W.real * 1j), tp.complex64)
    ints = tp.tensor(np.array([1, -2, 3], dtype=np.int32))
    _close(ints + 0.5j, np.array([1, -2, 3]) + 0.5j, tp.complex64)


def test_equality_tests_and_predicates_of_complex_tensors():
    z = np.array([1 + 2j, np.nan + 1j, 1 + np.inf * 1j, -np.inf + 0j, 0j, 1 + 2j])
    w = np.array([1 + 2j, np.nan + 1j, 1 + np.inf * 1j, 0j, -0.0 + 0j, 1 - 2j])
    x, y = tp.tensor(z), tp.tensor(w)
    for name, twin in (("equal", np.equal), ("not_equal", np.not_equal)):
        np.testing.assert_array_equal(getattr(tp, name)(x, y).numpy(), twin(z, w))
    for name, twin in (("isnan", np.isnan), ("isinf", np.isinf), ("isfinite", np.isfinite)):
        got = getattr(tp, name)(x)
        assert got.dtype == tp.bool
        np.testing.assert_array_equal(got.numpy(), twin(z))


SPECIAL = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan]


def _special_grid() -> np.ndarray:
    return np.array([complex(re, im) for re in SPECIAL for im in SPECIAL])


def _same_values(got: np.ndarray, want: np.ndarray) -> None:
    """Equal parts, NaN where NumPy has NaN, and the same sign on zeros and infinities."""
    for part in (np.real, np.imag):
        g, w = part(got), part(want)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        finite = ~np.isnan(w)
        np.testing.assert_allclose(g[finite], w[finite], rtol=1e-15)
        exact = finite & ((w == 0) | np.isinf(w))
        np.testing.assert_array_equal(np.signbit(g[exact]), np.signbit(w[exact]))


def test_complex_division_by_zero_and_special_values_as_numpy(request):
    if tp.cuda.backend() == "cuda":  # known: signed zeros of complex division on the GPU, to be fixed
        request.applymarker(
            pytest.mark.xfail(strict=True, reason="on the H200 complex division gives +-1.9e-17 where NumPy gives -0.0")
        )
    grid = _special_grid()
    a, b = np.repeat(grid, len(grid)), np.tile(grid, len(grid))
    with np.errstate(all="ignore"):
        want = a / b
    _same_values(tp.divide(tp.tensor(a), tp.tensor(b)).numpy(), want)


def test_complex_sign_at_special_values_as_the_standard_says():
    grid = np.concatenate([_special_grid(), [3 - 4j, 1e-300 + 1e-300j, 1e300 - 1e300j]])
    with np.errstate(all="ignore"):
        want = np.sign(grid)
    # the standard: a NaN part gives NaN + NaN j (NumPy gives inf + NaN j the unit along its infinite part)
    nan_part = np.isnan(grid.real) | np.isnan(grid.imag)
    want[nan_part] = complex(np.nan, np.nan)
    _same_values(tp.sign(tp.tensor(grid)).numpy(), want)


def test_complex_expm1_at_the_standards_special_values():
    inf, nan = np.inf, np.nan
    cases = [  # (x, the standard's expm1(x)); where it leaves a sign unspecified, either
        (complex(0.0, 0.0), 0j), (complex(-0.0, 0.0), 0j), (complex(2.0, inf), complex(nan, nan)),
        (complex(2.0, nan), complex(nan, nan)), (complex(inf, 0.0), complex(inf, 0.0)),
        (complex(-inf, 2.0), complex(-1.0, 0.0)), (complex(inf, 2.0), complex(-inf, inf)),  # +0 cis(2) - 1, inf cis(2)
        (complex(-inf, inf), complex(-1.0, 0.0)), (complex(inf, inf), complex(inf, nan)),
        (complex(-inf, nan), complex(-1.0, 0.0)), (complex(inf, nan), complex(inf, nan)),
        (complex(nan, 0.0), complex(nan, 0.0)), (complex(nan, 1.0), complex(nan, nan)),
        (complex(nan, nan), complex(nan, nan)),
    ]  # fmt: skip
    got = tp.expm1(tp.tensor(np.array([x for x, _ in cases]))).numpy()
    _same_values(got, np.array([want for _, want in cases]))


REAL_TENSORS = "bool or integer or floating-point tensors, got tensorplay.complex64"


def test_complex_tanh_at_an_infinite_real_part_is_one_with_the_imaginary_parts_sign_on_its_zero():
    z = np.array([complex(np.inf, 1e154), complex(np.inf, -2.0), complex(-np.inf, 3.0), complex(np.inf, 0.0)])
    _same_values(tp.tanh(tp.tensor(z)).numpy(), np.array([1 + 0j, complex(1, -0.0), -1 + 0j, 1 + 0j]))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda z: z < z, f"'<' needs {REAL_TENSORS}"),
        (lambda z: tp.maximum(z, z), f"maximum needs {REAL_TENSORS}"),
        (lambda z: tp.floor(z), "floor needs an integer or floating-point tensor, got tensorplay.complex64"),
        (lambda z: tp.atan2(z, z), f"atan2 needs {REAL_TENSORS}"),
        (lambda z: z // 2, f"'//' needs {REAL_TENSORS}"),
    ],
)  # fmt: skip
def test_functions_the_standard_leaves_to_real_numbers_refuse_complex_ones(call, message):
    with pytest.raises(TypeError, match=message):
        call(tp.tensor(Z.astype(np.complex64)))


def test_complex_ops_are_captured_and_replay_on_new_values():
    z = tp.tensor(Z.astype(np.complex64))
    w = tp.tensor(W.astype(np.complex64))

    def ops():
        return tp.exp(z) * w, tp.abs(z / w), tp.sign(z) + 1j, tp.real(z) * tp.imag(w)

    ops()  # warm-up: kernels built outside the capture
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        outs = ops()
    z2, w2 = (Z[::-1] * 0.5j).astype(np.complex64), (W[::-1] + 1).astype(np.complex64)
    z.copy_(tp.tensor(z2))
    w.copy_(tp.tensor(w2))
    g.replay()
    tp.cuda.synchronize()
    a, b = z2.astype(np.complex128), w2.astype(np.complex128)
    for got, want in zip(outs, (np.exp(a) * b, np.abs(a / b), np.sign(a) + 1j, a.real * b.imag), strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-6, atol=2e-6)
