"""The activations and layers PyTorch users reach for (GELU, SiLU, Softplus,
LayerNorm, Embedding, pad) against float64 NumPy, their gradients against
finite differences, and a layer captured in a graph."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.gradcheck import check_gradients

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F

X = np.array([[-3.0, -1.2, -0.1, 0.0], [0.4, 1.5, 2.7, 25.0]])
_erf = np.vectorize(math.erf)


def test_activations_match_their_formulas_in_float64():
    x = tp.tensor(X)
    np.testing.assert_allclose(F.gelu(x).numpy(), 0.5 * X * (1 + _erf(X / math.sqrt(2))), rtol=1e-12)
    tanh_form = 0.5 * X * (1 + np.tanh(math.sqrt(2 / math.pi) * (X + 0.044715 * X**3)))
    np.testing.assert_allclose(F.gelu(x, approximate="tanh").numpy(), tanh_form, rtol=1e-12)
    np.testing.assert_allclose(F.silu(x).numpy(), X / (1 + np.exp(-X)), rtol=1e-12)
    np.testing.assert_allclose(F.softplus(x).numpy(), np.where(X > 20, X, np.log1p(np.exp(X))), rtol=1e-12)
    np.testing.assert_allclose(
        F.softplus(x, beta=2.0, threshold=5.0).numpy(), np.where(2 * X > 5, X, np.log1p(np.exp(2 * X)) / 2), rtol=1e-12
    )
    for module, fn in ((nn.GELU(), F.gelu), (nn.SiLU(), F.silu), (nn.Softplus(), F.softplus)):
        np.testing.assert_array_equal(module(x).numpy(), fn(x).numpy())


@pytest.mark.parametrize(
    "fn", [F.gelu, lambda x: F.gelu(x, "tanh"), F.silu, F.softplus], ids=["gelu", "tanh", "silu", "softplus"]
)
def test_activation_gradients(fn):
    check_gradients(fn, X[:, :3])


def test_layer_norm_matches_numpy_and_its_gradients_hold():
    rng = np.random.default_rng(0)
    x, w, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    mean = x.mean(axis=(1, 2), keepdims=True)
    ref = (x - mean) / np.sqrt(x.var(axis=(1, 2), keepdims=True) + 1e-5) * w + b
    got = F.layer_norm(tp.tensor(x), (3, 4), tp.tensor(w), tp.tensor(b))
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-10, atol=1e-12)
    check_gradients(lambda x, w, b: F.layer_norm(x, 3, w, b), x[0, :2, :3], w[0, :3], b[0, :3], rtol=1e-4, atol=1e-6)
    layer = nn.LayerNorm(4)
    assert [n for n, _ in layer.named_parameters()] == ["weight", "bias"]
    np.testing.assert_allclose(
        layer(tp.tensor(x)).numpy(),
        (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5),
        rtol=1e-5,
    )


def test_layer_norm_refuses_a_shape_it_cannot_normalise():
    with pytest.raises(ValueError, match=r"last dimensions are normalized_shape \(3,\), got shape \(2, 4\)"):
        F.layer_norm(tp.zeros(2, 4), 3)
    with pytest.raises(ValueError, match=r"weight of shape \(4,\), got \(3,\)"):
        F.layer_norm(tp.zeros(2, 4), 4, tp.ones(3))


def test_embedding_takes_rows_and_adds_gradients_into_them():
    table = np.arange(12.0).reshape(4, 3)
    idx = np.array([[3, 0], [3, 1]])
    weight = tp.tensor(table).requires_grad_()
    out = F.embedding(tp.tensor(idx), weight)
    np.testing.assert_array_equal(out.numpy(), table[idx])
    out.sum().backward()
    np.testing.assert_array_equal(weight.grad.numpy(), np.bincount(idx.ravel(), minlength=4)[:, None] * np.ones(3))
    layer = nn.Embedding(5, 2)
    assert layer(tp.tensor([4, 0])).shape == (2, 2)
    with pytest.raises(TypeError, match="integer index tensor"):
        F.embedding(tp.tensor([0.5]), weight)


def test_pad_is_in_nn_functional():
    np.testing.assert_array_equal(
        F.pad(tp.tensor([[1.0, 2.0]]), (1, 2)).numpy(), np.pad([[1.0, 2.0]], ((0, 0), (1, 2)))
    )


def test_a_small_transformer_block_is_captured_and_replayed():
    rng = np.random.default_rng(1)
    emb, norm = nn.Embedding(8, 4), nn.LayerNorm(4)
    idx = tp.tensor([1, 5, 2])
    g = tp.cuda.CUDAGraph()
    with tp.no_grad():
        out = F.gelu(norm(emb(idx)))  # compiled outside the capture
        with tp.cuda.graph(g):
            out = F.gelu(norm(emb(idx)))
        table = emb.weight.numpy().astype(np.float64)
        for new in ([0, 7, 3], [4, 4, 6]):
            idx.copy_(tp.tensor(new))
            g.replay()
            rows = table[new]
            normed = (rows - rows.mean(-1, keepdims=True)) / np.sqrt(rows.var(-1, keepdims=True) + 1e-5)
            np.testing.assert_allclose(
                out.numpy(), 0.5 * normed * (1 + _erf(normed / math.sqrt(2))), rtol=1e-4, atol=1e-5
            )
    del rng
