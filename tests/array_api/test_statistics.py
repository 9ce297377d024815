"""Statistical functions (the array API's ``axis=``/``keepdims=``/``correction=``
and PyTorch's ``dim``/``keepdim`` forms of one implementation) against NumPy
in float64; gradients against finite differences; capture and replay."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close
from helpers.gradcheck import check_gradients

import tensorplay as tp

RNG = np.random.default_rng(5)
A = RNG.uniform(-2, 2, (2, 3, 4))
G = RNG.uniform(0.5, 2, (2, 3))  # for finite differences: an evaluation per element and sign

AXES = [None, 0, -1, (0, 2), (2, 0, 1), ()]


def t(a):
    return tp.tensor(np.asarray(a, dtype=np.float64))


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("name", ["sum", "prod", "mean", "max", "min"])
def test_reductions_in_both_spellings(name, axis, keepdims):
    want = getattr(np, name)(A, axis=axis, keepdims=keepdims)
    fn = getattr(tp, name)
    assert_close(fn(t(A), axis=axis, keepdims=keepdims), want)
    if name not in ("max", "min") or not isinstance(axis, int):  # max(x, dim) is PyTorch's (values, indices)
        assert_close(fn(t(A), axis, keepdims), want)  # PyTorch's positional dim, keepdim
        assert_close(fn(t(A), dim=axis, keepdim=keepdims), want)


def test_max_and_min_with_one_pytorch_dim_give_values_and_indices():
    values, indices = tp.max(t(A), 1)
    assert_close(values, A.max(1))
    np.testing.assert_array_equal(indices.numpy(), A.argmax(1))
    values, indices = tp.min(t(A), dim=-1, keepdim=True)
    assert_close(values, A.min(-1, keepdims=True))
    np.testing.assert_array_equal(indices.numpy(), A.argmin(-1)[..., None])
    assert_close(tp.max(t(A), axis=1), A.max(1))  # the standard's: the values alone


def test_max_and_min_of_two_tensors_are_elementwise():
    b = RNG.uniform(-2, 2, A.shape)
    assert_close(tp.max(t(A), t(b)), np.maximum(A, b))
    assert_close(tp.min(t(A), t(b)), np.minimum(A, b))


def test_both_spellings_at_once_must_agree():
    with pytest.raises(TypeError, match=r"sum\(\) got axis=0 and dim=1, two spellings of one argument"):
        tp.sum(t(A), dim=1, axis=0)


@pytest.mark.parametrize(
    "dtype, want",
    [(tp.int8, tp.int64), (tp.int32, tp.int64), (tp.uint8, tp.uint64), (tp.uint32, tp.uint64), (tp.bool, tp.int64),
     (tp.float32, tp.float32), (tp.float16, tp.float16)],
    ids=str,
)  # fmt: skip
@pytest.mark.parametrize("name", ["sum", "prod"])
def test_sum_and_prod_accumulate_integers_in_64_bits(name, dtype, want):
    a = (np.arange(1, 13).reshape(3, 4) % 5 + 1).astype(dtype.np)
    out = getattr(tp, name)(tp.tensor(a), axis=1)
    assert out.dtype is want
    ref = getattr(np, name)(a.astype(np.float64), axis=1)
    assert_close(out, ref, rtol=2e-3 if dtype is tp.float16 else 0, atol=0)


def test_sum_and_prod_take_a_dtype():
    a = np.array([[100, 120], [3, 4]], dtype=np.int8)
    out = tp.sum(tp.tensor(a), axis=0, dtype=tp.float64)
    assert out.dtype is tp.float64
    assert_close(out, a.astype(np.float64).sum(0))
    out = tp.prod(tp.tensor(a), dtype=tp.int16)
    assert out.dtype is tp.int16
    assert out.item() == np.prod(a, dtype=np.int16)  # wraps in int16, as NumPy
    out = tp.mean(t(A).float(), dtype=tp.float64)
    assert out.dtype is tp.float64


def test_sum_and_mean_of_complex_tensors():
    a = RNG.uniform(-2, 2, (2, 3)) + 1j * RNG.uniform(-2, 2, (2, 3))
    for name in ("sum", "mean"):
        out = getattr(tp, name)(tp.tensor(a).t(), axis=0, keepdims=True)
        assert out.dtype is tp.complex128
        np.testing.assert_allclose(out.numpy(), getattr(np, name)(a.T, axis=0, keepdims=True), rtol=1e-12)
    with pytest.raises(TypeError, match=r"max\(\) is not defined for complex tensors"):
        tp.max(tp.tensor(a), axis=0)


def test_prod_of_integers_wraps_as_int64():
    a = np.full(5, 2**20, dtype=np.int64)
    assert tp.prod(tp.tensor(a)).item() == int(np.prod(a))


@pytest.mark.parametrize("correction", [0, 1, 1.5])
@pytest.mark.parametrize("axis", [None, 1, (0, 2)], ids=str)
@pytest.mark.parametrize("name", ["var", "std"])
def test_var_and_std_with_a_correction(name, axis, correction):
    want = getattr(np, name)(A, axis=axis, ddof=correction)
    assert_close(getattr(tp, name)(t(A), axis=axis, correction=correction), want)
    keep = getattr(np, name)(A, axis=axis, ddof=correction, keepdims=True)
    assert_close(getattr(tp, name)(t(A), dim=axis, correction=correction, keepdim=True), keep)


def test_var_and_std_functions_default_to_the_standards_correction_and_methods_to_pytorchs():
    assert_close(tp.var(t(A)), np.var(A))  # correction 0
    assert_close(t(A).var(), np.var(A, ddof=1))  # PyTorch's unbiased default
    assert_close(t(A).var(1, unbiased=False), np.var(A, 1))
    assert_close(t(A).std(-1, keepdim=True), np.std(A, -1, ddof=1, keepdims=True))
    assert_close(t(A).std(correction=0), np.std(A))


def test_var_is_nan_when_the_correction_leaves_no_degrees_of_freedom():
    assert np.isnan(tp.var(t(A), axis=0, correction=2).numpy()).all()
    assert np.isnan(tp.std(t([3.0]), correction=1).item())


def test_var_refuses_integers():
    with pytest.raises(TypeError, match=r"var\(\) needs a floating point tensor, got tensorplay.int64"):
        tp.var(tp.tensor([1, 2, 3]))


@pytest.mark.parametrize("dim", [None, 0, -1, (0, 2)], ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp(dim, keepdim):
    a = A * 300  # exp() of these overflows: the max is subtracted first
    with np.errstate(over="ignore"):
        m = a.max(axis=dim, keepdims=True)
        want = np.log(np.exp(a - m).sum(axis=dim, keepdims=True)) + m
    if not keepdim:
        want = want.squeeze(axis=dim) if dim is not None else want.reshape(())
    assert_close(tp.logsumexp(t(a), dim, keepdim=keepdim), want)
    assert_close(t(a).logsumexp(dim, keepdim), want)
    assert_close(tp.logsumexp(t(a), axis=dim, keepdims=keepdim), want)


def test_logsumexp_of_infinities():
    a = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [-np.inf, 0.0]])
    assert_close(tp.logsumexp(t(a), 1), [-np.inf, np.inf, 0.0])


@pytest.mark.parametrize("shape, dim", [((7,), None), ((2, 3, 4), None), ((2, 3, 4), 1), ((2, 4), -1)], ids=str)
def test_median_is_pytorchs_lower_median(shape, dim):
    a = RNG.permutation(np.arange(float(np.prod(shape)))).reshape(shape)
    if dim is None:
        flat = np.sort(a.reshape(-1))
        assert_close(tp.median(t(a)), flat[(flat.size - 1) // 2])
        return
    srt = np.sort(a, axis=dim)
    k = (a.shape[dim] - 1) // 2
    values, indices = tp.median(t(a), dim)
    assert_close(values, np.take(srt, k, axis=dim))
    np.testing.assert_array_equal(np.take_along_axis(a, np.expand_dims(indices.numpy(), dim), dim).squeeze(dim),
                                  np.take(srt, k, axis=dim))  # fmt: skip
    values, indices = t(a).median(dim, keepdim=True)
    assert values.shape == indices.shape == tuple(1 if i == dim % a.ndim else s for i, s in enumerate(a.shape))


def test_median_propagates_nan():
    a = np.array([[1.0, np.nan, 3.0], [3.0, 1.0, 2.0]])
    values, _ = tp.median(t(a), 1)
    assert_close(values, [np.nan, 2.0])
    assert np.isnan(tp.median(t(a)).item())


@pytest.mark.parametrize("q", [0.0, 0.25, 0.5, 0.9, 1.0, [0.1, 0.5, 0.75]], ids=str)
@pytest.mark.parametrize("dim, keepdim", [(None, False), (1, False), (-1, True), (0, True)], ids=str)
def test_quantile_interpolates_linearly(q, dim, keepdim):
    want = np.quantile(A, q, axis=dim, keepdims=keepdim)
    assert_close(tp.quantile(t(A), q, dim, keepdim=keepdim), want)
    if isinstance(q, list):
        assert_close(tp.quantile(t(A), t(q), dim=dim, keepdim=keepdim), want)
    assert_close(t(A).quantile(q, dim, keepdim), want)


def test_quantile_refuses_q_outside_zero_to_one():
    with pytest.raises(ValueError, match=r"quantile\(\) expects q in \[0, 1\], got 1.5"):
        tp.quantile(t(A), 1.5)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: tp.sum(x, axis=0),
        lambda x: tp.mean(x, axis=1, keepdims=True),
        lambda x: tp.prod(x, axis=1),
        lambda x: tp.prod(x * tp.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])),  # zeros: one and several
        lambda x: tp.prod(x * tp.tensor([[1.0, 0.0, 1.0], [1.0, 1.0, 1.0]]), axis=1),
        lambda x: tp.var(x, axis=1, correction=1),
        lambda x: tp.std(x),
        lambda x: tp.logsumexp(x, 1),
        lambda x: tp.max(x, axis=1),
        lambda x: tp.quantile(x, 0.3, dim=1),
        lambda x: tp.median(x, 1).values,
        lambda x: tp.median(x),
    ],
    ids=["sum", "mean", "prod", "prod_zeros", "prod_one_zero", "var", "std", "logsumexp", "max", "quantile",
         "median_dim", "median"],
)  # fmt: skip
def test_gradients(fn):
    check_gradients(fn, G)


def test_statistics_are_captured_and_replayed():
    x = t(A)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        total = tp.sum(x, axis=(0, 2))
        product = tp.prod(x, axis=-1)
        spread = tp.std(x, axis=1, correction=1)
        lse = tp.logsumexp(x, 0)
        q = tp.quantile(x, 0.25, dim=2)
        med = tp.median(x)
    b = RNG.uniform(-2, 2, A.shape)
    x.copy_(b)
    g.replay()
    assert_close(total, b.sum((0, 2)))
    assert_close(product, b.prod(-1))
    assert_close(spread, b.std(1, ddof=1))
    assert_close(lse, np.log(np.exp(b).sum(0)))
    assert_close(q, np.quantile(b, 0.25, axis=2))
    assert_close(med, np.sort(b.reshape(-1))[(b.size - 1) // 2])
