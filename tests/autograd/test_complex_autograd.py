"""Gradients through complex tensors, PyTorch's convention: for z = a + ib and
a real loss L, the gradient is dL/da + i dL/db (a holomorphic f sends g back
as g * conj(f'(z)); a real input of a complex result gets a real gradient).

Each gradient is checked against central differences in float64 of NumPy's
own function (an independent reference), the real and the imaginary part of
every element perturbed apart, for the real loss L = sum(Re(w * f(z))) with
random complex weights w (real ones for a real result).
"""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp


def _complex(shape, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _real(shape, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def _weights(out: tp.Tensor, seed: int = 99) -> np.ndarray:
    return _complex(out.shape, seed) if out.dtype.is_complex else _real(out.shape, seed)


def _loss(out: tp.Tensor, w: np.ndarray) -> tp.Tensor:
    weighted = out * tp.tensor(w)
    return (tp.real(weighted) if weighted.dtype.is_complex else weighted).sum()


def _numeric(np_fn, arrays: list, w: np.ndarray, eps: float) -> list:
    """dL/da + i dL/db of every input by central differences (real inputs: dL/da)."""

    def loss(values) -> float:
        return float(np.real(np.asarray(np_fn(*values)) * w).sum())

    grads = []
    for i, a in enumerate(arrays):
        grad = np.zeros(a.shape, a.dtype)
        for j in np.ndindex(a.shape):
            for step in (1.0, 1j) if np.iscomplexobj(a) else (1.0,):
                up, down = [v.copy() for v in arrays], [v.copy() for v in arrays]
                up[i][j] += eps * step
                down[i][j] -= eps * step
                grad[j] += step * (loss(up) - loss(down)) / (2 * eps)
        grads.append(grad)
    return grads


def _check(fn, np_fn, *arrays, eps: float = 1e-6, rtol: float = 1e-6, atol: float = 1e-8) -> None:
    """The gradients of sum(Re(w * fn(...))) by autograd against central differences of ``np_fn``."""
    arrays = [np.array(a) for a in arrays]
    inputs = [tp.tensor(a).requires_grad_() for a in arrays]
    out = fn(*inputs)
    w = _weights(out)
    got = tp.autograd.grad(_loss(out, w), inputs, allow_unused=True)
    for i, (a, g, want) in enumerate(zip(arrays, got, _numeric(np_fn, arrays, w, eps), strict=True)):
        assert g is not None and g.dtype == inputs[i].dtype and g.shape == a.shape, f"input {i}"
        np.testing.assert_allclose(g.numpy(), want, rtol=rtol, atol=atol, err_msg=f"gradient of input {i}")


Z = _complex((2, 3), 1)
W = _complex((2, 3), 2)
R = _real((2, 3), 3)


# -- leaves and the engine ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [tp.complex64, tp.complex128], ids=str)
def test_complex_tensors_can_be_leaves(dtype):
    x = tp.tensor([1 + 2j, -3 + 0.5j], dtype=dtype).requires_grad_()
    assert x.requires_grad and x.is_leaf
    assert tp.zeros(3, dtype=dtype, requires_grad=True).requires_grad
    assert tp.tensor([1j], dtype=dtype, requires_grad=True).requires_grad
    (x.abs() ** 2).sum().backward()  # |z|^2 = a^2 + b^2: gradient 2a + 2ib = 2z
    assert x.grad.dtype == dtype
    np.testing.assert_allclose(x.grad.numpy(), [2 + 4j, -6 + 1j], rtol=1e-6)
    with pytest.raises(TypeError, match="^only floating point tensors can require gradients, got tensorplay.int64"):
        tp.tensor([1, 2]).requires_grad_()


def test_a_complex_output_needs_its_gradient_given():
    x = tp.tensor(Z).requires_grad_()
    y = (x * (2 - 1j)).sum()
    with pytest.raises(
        RuntimeError,
        match=r"^backward\(\): a gradient can only be implied for a real output, got tensorplay.complex128",
    ):
        y.backward()
    with pytest.raises(RuntimeError, match=r"^grad\(\): a gradient can only be implied for a real output"):
        tp.autograd.grad(y, x)
    y.backward(tp.tensor(1 + 1j, dtype=tp.complex128))  # L = Re(conj(1 + i) y): x.grad = (1 + i) conj(2 - i)
    np.testing.assert_allclose(x.grad.numpy(), np.full(Z.shape, (1 + 1j) * (2 + 1j)))


def test_a_real_leaf_of_a_complex_result_gets_a_real_gradient():
    _check(lambda r, z: r * z, lambda r, z: r * z, R, Z)
    _check(lambda r, z: z / r, lambda r, z: z / r, R, Z)
    _check(lambda r: r.to(tp.complex128) * (1 + 2j), lambda r: r * (1 + 2j), R)
    _check(lambda z: z.to(tp.float64), lambda z: z.real, Z)  # the real part; its gradient is real, as a complex


def test_complex64_gets_complex64_gradients():
    x = tp.tensor(Z.astype(np.complex64)).requires_grad_()
    w = _complex(Z.shape, 4)
    _loss(x.exp() * x, w).backward()
    assert x.grad.dtype == tp.complex64
    want = np.conj(w * np.exp(Z) * (1 + Z))  # g conj(f'(z)) with g = w
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5, atol=1e-5)


# -- elementwise ops -----------------------------------------------------------------------------

HOLOMORPHIC = {
    "neg": np.negative, "positive": np.positive, "square": np.square, "reciprocal": lambda z: 1 / z,
    "rsqrt": lambda z: 1 / np.sqrt(z), "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p,
    "log2": np.log2, "log10": np.log10, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
}  # fmt: skip


@pytest.mark.parametrize("op", sorted(HOLOMORPHIC))
def test_holomorphic_unary_ops(op):
    _check(lambda z: getattr(z, op)(), HOLOMORPHIC[op], Z)


def test_acosh_on_the_left_half_plane():
    # d acosh = 1 / (sqrt(z - 1) sqrt(z + 1)): sqrt(z^2 - 1) is off by a sign where Re(z) < 0
    _check(lambda z: z.acosh(), np.arccosh, np.array([-1.5 + 0.5j, -0.3 - 2.0j, 0.7 + 0.1j]))


@pytest.mark.parametrize(
    "fn, np_fn",
    [
        (lambda z: z.abs(), np.abs),
        (lambda z: z.sign(), lambda z: z / np.abs(z)),
        (tp.real, np.real),
        (tp.imag, np.imag),
        (lambda z: z.conj(), np.conj),
        (lambda z: z.abs() ** 2, lambda z: np.abs(z) ** 2),
    ],
    ids=["abs", "sign", "real", "imag", "conj", "abs squared"],
)
def test_ops_that_are_not_holomorphic(fn, np_fn):
    _check(fn, np_fn, Z)


def test_abs_and_sign_have_zero_gradients_at_zero():
    x = tp.tensor([0j, 3 + 4j]).requires_grad_()
    (g,) = tp.autograd.grad((x.abs() + tp.real(x.sign() * (1 - 1j))).sum(), x)
    assert np.isfinite(g.numpy()).all() and g.numpy()[0] == 0
    z = 3 + 4j  # |z|' = z / |z|; Re((1 - i) z / |z|)' = (conj(1 - i) - (z/|z|)^2 (1 - i)) / (2 |z|)
    want = z / 5 + ((1 + 1j) - (z / 5) ** 2 * (1 - 1j)) / 10
    np.testing.assert_allclose(g.numpy()[1], want, rtol=1e-6)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a + b,
        lambda a, b: a - b,
        lambda a, b: a * b,
        lambda a, b: a / b,
        lambda a, b: a**b,
        lambda a, b: a * (2 - 3j) - (1 + 1j) / b,
        lambda a, b: (0.5 + 2j) - a + b * 0.5,
    ],
    ids=["add", "sub", "mul", "div", "pow", "with numbers", "reflected"],
)
def test_binary_ops(fn):
    _check(fn, fn, Z, W)


def test_broadcast_operands_get_summed_gradients():
    row = _complex((3,), 5)
    _check(lambda z, r: z * r, lambda z, r: z * r, Z, row)
    _check(lambda z, r: r / (z * z + 1), lambda z, r: r / (z * z + 1), Z, row)


def test_pow_with_number_operands():
    _check(lambda z: z**2.5, lambda z: z**2.5, Z)
    _check(lambda z: z ** (1 + 2j), lambda z: z ** (1 + 2j), Z)
    _check(lambda z: (-2.0) ** z, lambda z: (-2.0 + 0j) ** z, Z)  # a negative base: its complex logarithm
    _check(lambda r, z: r**z, lambda r, z: (r + 0j) ** z, R, Z)


def test_pow_exponent_gradient_at_a_zero_base():
    a = tp.tensor([0j, 0j, 1 + 1j])
    b = tp.tensor([2 + 0j, 1j, 1 + 1j]).requires_grad_()
    (g,) = tp.autograd.grad(tp.real(a**b).sum(), b)
    got = g.numpy()
    assert got[0] == 0 and np.isnan(got[1])  # 0 for a real exponent >= 0, as for real tensors
    np.testing.assert_allclose(got[2], np.conj((1 + 1j) ** (1 + 1j) * np.log(1 + 1j)), rtol=1e-6)


# -- products, reductions, shapes -------------------------------------------------------------------


def test_matmul_and_linear():
    a, b = _complex((2, 2, 3), 6), _complex((3, 4), 7)
    _check(lambda a, b: a @ b, lambda a, b: a @ b, a, b)
    _check(lambda r, b: r @ b, lambda r, b: r @ b, _real((2, 3), 9), b)
    _check(tp.nn.functional.linear, lambda x, w, c: x @ w.T + c, Z, _complex((4, 3), 10), _complex((4,), 11))


@pytest.mark.parametrize(
    "fn, np_fn",
    [
        (lambda z: z.sum(), np.sum),
        (lambda z: z.sum(0), lambda z: z.sum(0)),
        (lambda z: z.mean(1, keepdim=True), lambda z: z.mean(1, keepdims=True)),
        (lambda z: tp.prod(z, axis=1), lambda z: np.prod(z, axis=1)),
        (lambda z: z[1:, ::2], lambda z: z[1:, ::2]),
        (lambda z: z[tp.tensor([1, 0, 1])], lambda z: z[[1, 0, 1]]),
        (lambda z: z[:1].expand(3, 3), lambda z: np.broadcast_to(z[:1], (3, 3))),
        (lambda z: z.transpose(0, 1).reshape(6), lambda z: z.T.reshape(6)),
        (lambda z: tp.cat([z, z * 2j], 0), lambda z: np.concatenate([z, z * 2j], 0)),
        (lambda z: tp.where(tp.tensor(Z.real > 0), z, 3 * z), lambda z: np.where(Z.real > 0, z, 3 * z)),
        (lambda z: tp.roll(z, 1, axis=1), lambda z: np.roll(z, 1, axis=1)),
        (lambda z: z.clone(), np.copy),
    ],
    ids=["sum", "sum0", "mean1", "prod", "slice", "take", "expand", "reshape", "cat", "where", "roll", "clone"],
)
def test_reductions_and_shapes(fn, np_fn):
    _check(fn, np_fn, Z)


# -- gradients of gradients, Functions, transforms ----------------------------------------------------


def test_gradients_of_gradients():
    # g(z) = grad of L(z); its own gradient (of Re(sum(conj(u) g))) against differences of g by autograd
    u = _complex(Z.shape, 12)

    def gradient(values: np.ndarray) -> np.ndarray:
        x = tp.tensor(values).requires_grad_()
        return tp.autograd.grad(_loss((x * x).exp() + x.abs() * x, W), x)[0].numpy()

    x = tp.tensor(Z).requires_grad_()
    (g,) = tp.autograd.grad(_loss((x * x).exp() + x.abs() * x, W), x, create_graph=True)
    assert g.requires_grad
    (gg,) = tp.autograd.grad(tp.real(g * tp.tensor(np.conj(u))).sum(), x)
    (want,) = _numeric(lambda v: np.conj(u) * gradient(v), [Z], np.ones(Z.shape), eps=1e-6)
    np.testing.assert_allclose(gg.numpy(), want, rtol=1e-5, atol=1e-7)


def test_a_function_with_complex_results():
    class Rotate(tp.autograd.Function):
        @staticmethod
        def forward(ctx, z):
            return z * 1j

        @staticmethod
        def backward(ctx, g):
            return g * -1j  # conj(i) g

    _check(lambda z: Rotate.apply(z).exp(), lambda z: np.exp(1j * z), Z)


def test_transforms_of_complex_leaves():
    _check(lambda z: tp.fft.fft(z, n=4).abs() ** 2, lambda z: np.abs(np.fft.fft(z, n=4)) ** 2, Z)
    _check(lambda z: tp.fft.irfft(z.exp()), lambda z: np.fft.irfft(np.exp(z)), Z)


def test_a_captured_complex_backward_replays():
    w = tp.tensor(W)
    x = tp.tensor(Z).requires_grad_()

    def step():
        x.grad = None
        (tp.real(w * x.exp())).sum().backward()
        return x.grad

    step()  # warm-up compiles the kernels
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        grad = step()
    with tp.no_grad():
        x.copy_(tp.tensor(2 * Z))
    g.replay()
    np.testing.assert_allclose(grad.numpy(), np.conj(W * np.exp(2 * Z)), rtol=1e-10)


# -- tp.linalg ------------------------------------------------------------------------------------------

A = _complex((2, 3, 3), 13) + 3 * np.eye(3)


def _mh(x):
    return x.transpose(-1, -2).conj() if isinstance(x, tp.Tensor) else np.conj(np.swapaxes(x, -1, -2))


def _hermitian(p):
    return p + _mh(p)


def test_solve_inv_and_solve_triangular():
    b, v = _complex((3, 2), 14), _complex((3,), 15)
    _check(tp.linalg.solve, np.linalg.solve, A, b)
    _check(tp.linalg.solve, lambda a, v: np.linalg.solve(a, v[:, None])[..., 0], A, v)
    _check(tp.linalg.inv, np.linalg.inv, A)
    _check(
        lambda a, b: tp.linalg.solve_triangular(a, b, upper=True), lambda a, b: np.linalg.solve(np.triu(a), b), A[0], b
    )


def test_det_and_slogdet():
    _check(tp.linalg.det, np.linalg.det, A)
    _check(lambda a: tp.linalg.slogdet(a).logabsdet, lambda a: np.linalg.slogdet(a)[1], A)
    _check(lambda a: tp.linalg.slogdet(a).sign, lambda a: np.linalg.slogdet(a)[0], A)  # its phase moves too
    _check(lambda a: tp.linalg.slogdet(a)[0] * tp.linalg.slogdet(a)[1], lambda a: np.prod(np.linalg.slogdet(a), 0), A)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(upper):
    # a Hermitian input through P: A = P + P^H (the factorisation reads one triangle)
    p = 0.3 * _complex((2, 3, 3), 16) + 2 * np.eye(3)

    def reference(p):
        factor = np.linalg.cholesky(_hermitian(p))
        return _mh(factor) if upper else factor

    _check(lambda p: tp.linalg.cholesky(_hermitian(p), upper=upper), reference, p)


def test_eigh_through_losses_the_phases_leave_alone():
    p = _complex((2, 3, 3), 17)
    _check(lambda p: tp.linalg.eigvalsh(_hermitian(p)), lambda p: np.linalg.eigvalsh(_hermitian(p)), p)
    _check(
        lambda p: tp.linalg.eigh(_hermitian(p)).eigenvectors.abs() ** 2,
        lambda p: np.abs(np.linalg.eigh(_hermitian(p))[1]) ** 2,
        p,
    )


@pytest.mark.parametrize("shape", [(4, 2), (2, 4)], ids=str)
def test_svd_and_qr_through_losses_the_phases_leave_alone(shape):
    a = _complex(shape, 18)
    k = min(shape)

    def svd(a):  # U Vh (a phase of a column of U cancels that of the row of Vh), and |U|^2
        u, s, vh = tp.linalg.svd(a, full_matrices=False) if isinstance(a, tp.Tensor) else np.linalg.svd(a, False)
        return (u @ vh) * 2 + (u.abs() ** 2 if isinstance(u, tp.Tensor) else np.abs(u) ** 2)[:k, :k].sum()

    def qr(a):  # Q diag(R): a column's phase cancels that of its row of R
        q, r = tp.linalg.qr(a) if isinstance(a, tp.Tensor) else np.linalg.qr(a)
        diagonal = tp.diagonal(r[:k, :k]) if isinstance(r, tp.Tensor) else np.diagonal(r[:k, :k])
        return q * diagonal + 0.5 * (r.abs() ** 2 if isinstance(r, tp.Tensor) else np.abs(r) ** 2).sum()

    _check(svd, svd, a, rtol=1e-5, atol=1e-7)
    _check(tp.linalg.svdvals, lambda a: np.linalg.svd(a, compute_uv=False), a)
    _check(qr, qr, a, rtol=1e-5, atol=1e-7)


def test_norms_and_composites():
    a = _complex((3, 2), 19)
    _check(lambda a: tp.linalg.vector_norm(a, 3), lambda a: np.sum(np.abs(a) ** 3) ** (1 / 3), a)
    _check(lambda a: tp.linalg.matrix_norm(a, "nuc"), lambda a: np.linalg.norm(a, "nuc"), a)
    _check(lambda a: tp.linalg.matrix_norm(a, 2), lambda a: np.linalg.norm(a, 2), a)
    _check(tp.linalg.pinv, np.linalg.pinv, a, rtol=1e-5)
    _check(lambda a: tp.linalg.matrix_power(a, 3), lambda a: np.linalg.matrix_power(a, 3), A[0])
