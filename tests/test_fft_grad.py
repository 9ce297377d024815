"""Gradients of ``tp.fft``'s transforms, PyTorch's convention (for a complex
tensor z = a + ib and a real loss L, the gradient is dL/da + i dL/db), checked
against finite differences of the NumPy transforms in float64.

Every transform is linear over the reals, so a difference quotient with a
step of one is exact: the reference gradient of L = Re(sum(conj(g) f(z)))
(the loss whose gradient ``grad_outputs=g`` asks for) at element k is
L(e_k) + i L(i e_k), with ``f`` numpy.fft's function.

Complex leaves: ``requires_grad_()`` takes real tensors only (``_tensor.py``);
the tests give a complex input its autograd state directly.
"""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
from tensorplay._tape import Meta


def _data(shape, kind: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if kind == "c" else x


def _leaf(a: np.ndarray) -> tp.Tensor:
    """A tensor of ``a`` that requires grad (a complex one too)."""
    t = tp.tensor(a)
    if np.iscomplexobj(a):
        t._ag = Meta(True)
        return t
    return t.requires_grad_()


def _reference_gradient(f, a: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The gradient of Re(sum(conj(g) f(x))) at ``a``: exact differences of the linear ``f``."""

    def loss(x):
        return float(np.real(np.sum(np.conj(g) * f(x))))

    out = np.zeros(a.shape, complex if np.iscomplexobj(a) else float)
    for k in np.ndindex(a.shape):
        e = np.zeros(a.shape)
        e[k] = 1.0
        out[k] = loss(e) + (1j * loss(1j * e) if np.iscomplexobj(a) else 0.0)
    return out


# (function, input kind, shape, keyword arguments)
CASES = [
    ("fft", "c", (3, 5), {}),
    ("fft", "c", (3, 5), {"n": 8, "axis": 0, "norm": "ortho"}),
    ("fft", "r", (2, 6), {"n": 4, "norm": "forward"}),  # real input, cut: the real part, padded back
    ("ifft", "c", (4, 3), {"n": 5, "axis": 0}),
    ("fftn", "c", (3, 4, 2), {"s": (2, 5), "axes": (2, 0)}),
    ("ifftn", "c", (2, 3, 2, 2), {"norm": "ortho"}),
    ("fft2", "c", (3, 4), {}),
    ("rfft", "r", (2, 7), {}),
    ("rfft", "r", (3, 6), {"n": 9, "axis": 0, "norm": "ortho"}),
    ("rfftn", "r", (4, 3, 4), {"axes": (2, 0), "s": (5, 6)}),
    ("rfft2", "r", (4, 6), {"norm": "forward"}),
    ("irfft", "c", (2, 5), {}),  # n = 8: entries 1..3 stand for two
    ("irfft", "c", (2, 5), {"n": 9, "norm": "ortho"}),  # odd n: entries 1..4
    ("irfft", "c", (4, 3), {"n": 3, "axis": 0}),  # cut
    ("irfftn", "c", (3, 4, 3), {"s": (3, 4, 5)}),
    ("irfft2", "c", (4, 4), {"s": (3, 7), "norm": "forward"}),
    ("hfft", "c", (2, 4), {}),
    ("hfft", "c", (3, 4), {"n": 5, "axis": 0, "norm": "ortho"}),
    ("ihfft", "r", (2, 7), {}),
    ("ihfft", "r", (6, 2), {"n": 4, "axis": 0, "norm": "forward"}),
]


def _numpy(name: str, kwargs: dict):
    np_name = {"fft2": "fftn", "ifft2": "ifftn", "rfft2": "rfftn", "irfft2": "irfftn"}.get(name, name)
    kw = dict(kwargs)
    if name.endswith("2"):
        kw.setdefault("axes", (-2, -1))
    elif np_name.endswith("n") and "s" in kw and "axes" not in kw:
        kw["axes"] = None  # filled in per input below
    fn = getattr(np.fft, np_name)

    def f(x):
        k = dict(kw)
        if k.get("axes", 0) is None:
            k["axes"] = tuple(range(x.ndim - len(k["s"]), x.ndim))
        return fn(x, **k)

    return f


@pytest.mark.parametrize("name, kind, shape, kwargs", CASES, ids=[f"{c[0]}-{c[1]}{c[2]}-{c[3]}" for c in CASES])
def test_gradient_against_finite_differences(name, kind, shape, kwargs):
    a = _data(shape, kind, seed=1)
    x = _leaf(a)
    y = getattr(tp.fft, name)(x, **kwargs)
    assert y.requires_grad and y.grad_fn is not None
    g = _data(y.shape, "c" if y.dtype.kind == "c" else "r", seed=2)
    (got,) = tp.autograd.grad(y, x, grad_outputs=tp.tensor(g))
    assert got.dtype == x.dtype and got.shape == x.shape
    np.testing.assert_allclose(got.numpy(), _reference_gradient(_numpy(name, kwargs), a, g), rtol=1e-10, atol=1e-10)


def test_a_real_loss_backward_through_transforms_and_real_parts():
    # x -> rfft -> ifft -> real parts weighted, squared: .backward() into x.grad
    a, w = _data((3, 6), "r", seed=3), _data((3, 4), "r", seed=4)
    x = tp.tensor(a).requires_grad_()
    z = tp.fft.rfft(x)
    loss = (tp.real(z) * tp.tensor(w)).sum() + (tp.real(tp.fft.ifft(z, norm="ortho")) ** 2).sum()
    loss.backward()

    def objective(v):
        zz = np.fft.rfft(v)
        return (zz.real * w).sum() + (np.fft.ifft(zz, norm="ortho").real ** 2).sum()

    numeric = np.zeros_like(a)
    for k in np.ndindex(a.shape):
        e = np.zeros_like(a)
        e[k] = 1e-6
        numeric[k] = (objective(a + e) - objective(a - e)) / 2e-6
    np.testing.assert_allclose(x.grad.numpy(), numeric, rtol=1e-6, atol=1e-7)


def test_gradients_of_gradients():
    # With create_graph the backward of a transform is recorded: its own backward is the transform.
    a = _data((2, 6), "r", seed=5)
    x = _leaf(a)
    y = tp.fft.fft(x, n=8, norm="ortho")
    gy = _leaf(_data((2, 8), "c", seed=6))
    (gx,) = tp.autograd.grad(y, x, grad_outputs=gy, create_graph=True)
    assert gx.requires_grad and gx.dtype == tp.float64
    v = _data((2, 6), "r", seed=7)
    (ggy,) = tp.autograd.grad((gx * tp.tensor(v)).sum(), gy)
    # gx = Re(A^H gy) for A = fft(., n=8, ortho): the gradient of sum(v gx) in gy is A v
    np.testing.assert_allclose(ggy.numpy(), np.fft.fft(v, n=8, norm="ortho"), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [tp.float32, tp.float16], ids=str)
def test_a_low_precision_input_gets_its_own_type_of_gradient(dtype):
    a = _data((2, 8), "r", seed=8)
    x = tp.tensor(a).to(dtype).requires_grad_()
    y = tp.fft.rfft(x, norm="forward")
    assert y.dtype == tp.complex64
    g = _data(y.shape, "c", seed=9)
    (got,) = tp.autograd.grad(y, x, grad_outputs=tp.tensor(g.astype(np.complex64)))
    assert got.dtype == dtype
    want = _reference_gradient(lambda v: np.fft.rfft(v, norm="forward"), a, g)
    tol = 1e-5 if dtype is tp.float32 else 2e-3
    np.testing.assert_allclose(got.numpy().astype(np.float64), want, rtol=tol, atol=tol)


def test_no_gradient_is_recorded_without_grad_mode():
    x = tp.tensor(_data((4,), "r", seed=10)).requires_grad_()
    with tp.no_grad():
        y = tp.fft.rfft(x)
    assert not y.requires_grad and y.grad_fn is None
    assert not tp.fft.fft(tp.ones(4)).requires_grad
