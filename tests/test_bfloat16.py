"""bfloat16: stored as its bits, computed in float32, rounded to the nearest
(ties to even) on every store. The reference is ml_dtypes' own conversion
applied to NumPy float64 results (an implementation independent of the
kernels' bit arithmetic)."""

from __future__ import annotations

import re

import ml_dtypes
import numba.cuda
import numpy as np
import pytest

import tensorplay as tp
from tensorplay._dlpack import from_capsule

pytestmark = pytest.mark.filterwarnings("error")

BF16 = np.dtype(ml_dtypes.bfloat16)
ULP = 2.0**-7  # bfloat16's spacing relative to a value, at most (7 stored mantissa bits)


def _bits(a) -> np.ndarray:
    return np.asarray(a).view(np.uint16)


def _rounded(values) -> np.ndarray:
    """float64 values rounded once to bfloat16, by ml_dtypes."""
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float64).astype(BF16)


def _edge_values() -> np.ndarray:
    """float32 values that exercise the rounding: ties either way, values just
    around them, subnormals, the largest finite values, overflow, zeros, infinities."""
    ties = np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 2**-126 * (1 + 2**-8), 255.5, 256.5, 3.0 + 2**-7])
    nudged = np.concatenate([np.nextafter(ties.astype(np.float32), np.float32(np.inf)),
                             np.nextafter(ties.astype(np.float32), np.float32(-np.inf))])  # fmt: skip
    special = [0.0, -0.0, np.inf, -np.inf, 3.3895e38, 3.3961e38, 3.4e38, 1e-40, -1e-45, 1e-38, 65504.0]
    rng = np.random.default_rng(0)
    spread = rng.standard_normal(200) * 10.0 ** rng.integers(-30, 30, 200)
    return np.concatenate([ties, nudged, special, spread]).astype(np.float32)


def test_conversions_round_to_nearest_even_as_ml_dtypes():
    values = _edge_values()
    x = tp.tensor(values)
    got = x.to(tp.bfloat16)
    assert got.dtype == tp.bfloat16 and got.numpy().dtype == BF16
    np.testing.assert_array_equal(_bits(got.numpy()), _bits(values.astype(BF16)))
    back = got.to(tp.float32).numpy()  # exact: a bfloat16 is the upper half of a float32
    np.testing.assert_array_equal(back, values.astype(BF16).astype(np.float32))
    assert got.to(tp.float64).numpy().tolist() == back.astype(np.float64).tolist()


def test_nan_stays_nan_and_keeps_its_sign():
    x = tp.tensor([np.nan, -np.nan, 1.0]).to(tp.bfloat16)
    bits = _bits(x.numpy())
    assert np.isnan(x.numpy().astype(np.float32)[:2]).all()
    assert bits[0] >> 15 == 0 and bits[1] >> 15 == 1
    assert (x != x).tolist() == [True, True, False]


@pytest.mark.parametrize("source", [tp.float16, tp.float64, tp.int32, tp.uint8, tp.bool], ids=str)
def test_conversions_from_and_to_other_dtypes(source):
    values = [0, 1, 3, 100, 127] if source is not tp.bool else [0, 1, 1, 0, 1]
    x = tp.tensor(values, dtype=source)
    b = x.to(tp.bfloat16)
    assert b.tolist() == [float(v) for v in values]
    assert b.to(source).tolist() == x.tolist()
    wide = tp.tensor([257, 70000, -3], dtype=tp.int32).to(tp.bfloat16)
    assert wide.tolist() == _rounded([257, 70000, -3]).tolist() == [256.0, 70144.0, -3.0]


def _operands(n: int = 40, seed: int = 1):
    rng = np.random.default_rng(seed)
    a = _rounded(rng.uniform(-8, 8, n))
    b = _rounded(rng.uniform(0.25, 8, n) * rng.choice([-1, 1], n))
    return a, b


@pytest.mark.parametrize(
    "name, fn, ref",
    [
        ("add", lambda x, y: x + y, np.add),
        ("sub", lambda x, y: x - y, np.subtract),
        ("mul", lambda x, y: x * y, np.multiply),
        ("div", lambda x, y: x / y, np.divide),
        ("maximum", tp.maximum, np.maximum),
        ("minimum", tp.minimum, np.minimum),
        ("pow", lambda x, y: x.abs() ** y, lambda a, b: np.abs(a) ** b),
    ],
)
def test_binary_ops_round_their_float32_results(name, fn, ref):
    a, b = _operands()
    got = fn(tp.tensor(a), tp.tensor(b))
    assert got.dtype == tp.bfloat16
    want = _rounded(ref(a.astype(np.float64), b.astype(np.float64)))
    # float32 math, then one rounding: within a unit in the last place of the direct rounding
    np.testing.assert_allclose(got.numpy().astype(np.float64), want.astype(np.float64), rtol=ULP, atol=0)
    if name in ("mul", "maximum", "minimum"):  # exact in float32: the roundings agree bit for bit
        np.testing.assert_array_equal(_bits(got.numpy()), _bits(want))


@pytest.mark.parametrize(
    "name, ref",
    [
        ("neg", np.negative),
        ("abs", np.abs),
        ("exp", np.exp),
        ("tanh", np.tanh),
        ("sin", np.sin),
        ("sigmoid", lambda v: 1 / (1 + np.exp(-v))),
        ("relu", lambda v: np.maximum(v, 0)),
    ],  # fmt: skip
)
def test_unary_ops(name, ref):
    a, _ = _operands(seed=2)
    x = tp.tensor(a)
    got = (-x) if name == "neg" else getattr(x, name)()
    assert got.dtype == tp.bfloat16
    want = _rounded(ref(a.astype(np.float64)))
    np.testing.assert_allclose(got.numpy().astype(np.float64), want.astype(np.float64), rtol=ULP, atol=1e-30)
    positive = tp.tensor(_rounded([0.25, 2.0, 9.0, 1e4]))
    np.testing.assert_allclose(positive.sqrt().numpy().astype(np.float64), [0.5, 2**0.5, 3.0, 100.0], rtol=ULP)
    np.testing.assert_allclose(positive.log().numpy().astype(np.float64), np.log([0.25, 2, 9, 1e4]), rtol=ULP)


def test_strided_and_broadcast_operands_and_scalars():
    a, _ = _operands(n=48, seed=3)
    m = tp.tensor(a.reshape(6, 8))
    col = tp.tensor(a[:6].reshape(6, 1).copy())
    want = _rounded(a.reshape(6, 8).astype(np.float64) + a[:6].reshape(6, 1).astype(np.float64))
    np.testing.assert_allclose((m + col).numpy().astype(np.float64), want.astype(np.float64), rtol=ULP)
    np.testing.assert_array_equal(_bits((m.t() * 2).numpy()), _bits(_rounded(a.reshape(6, 8).T.astype(np.float64) * 2)))
    scaled = m[:, ::3] * 0.1  # the number stays float32 (PyTorch's opmath), the result is rounded once
    np.testing.assert_allclose(
        scaled.numpy().astype(np.float64), _rounded(a.reshape(6, 8)[:, ::3] * np.float32(0.1)).astype(float), rtol=ULP
    )
    assert (m + 1).dtype == tp.bfloat16 and (m + 0.5).dtype == tp.bfloat16


def test_promotion_with_other_dtypes():
    x = tp.tensor([1.0, 2.0], dtype=tp.bfloat16)
    assert (x + tp.ones(2, dtype=tp.float16)).dtype == tp.float32  # neither holds the other
    assert (x + tp.ones(2)).dtype == tp.float32 and (x + tp.ones(2, dtype=tp.float64)).dtype == tp.float64
    assert (x + tp.ones(2, dtype=tp.int64)).dtype == tp.bfloat16
    assert (x + tp.ones(2, dtype=tp.uint32)).dtype == tp.bfloat16  # floating point takes uint32 too
    assert (x + tp.tensor([1.5, 0.25])).tolist() == [2.5, 2.25]  # decoded exactly into float32 math
    # an integer operand joins bfloat16 math rounded to bfloat16, as PyTorch converts it first
    assert (x + tp.tensor([256, 257], dtype=tp.int32)).tolist() == [256.0, 258.0]
    assert (tp.tensor([256.0], dtype=tp.bfloat16) == tp.tensor([257], dtype=tp.int32)).tolist() == [True]
    x += 1
    x *= tp.tensor([2, 3], dtype=tp.int8)
    assert x.tolist() == [4.0, 9.0] and x.dtype == tp.bfloat16


def test_comparisons_and_where():
    a, b = _operands(seed=4)
    x, y = tp.tensor(a), tp.tensor(b)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    for got, want in ((x < y, af < bf), (x >= y, af >= bf), (x == x, af == af), (x > 0.5, af > 0.5)):
        assert got.dtype == tp.bool
        np.testing.assert_array_equal(got.numpy(), want)
    picked = tp.where(x > y, x, y)
    assert picked.dtype == tp.bfloat16
    np.testing.assert_array_equal(_bits(picked.numpy()), _bits(np.maximum(a, b)))
    assert x.clamp(-1, 1).numpy().astype(float).tolist() == np.clip(af, -1, 1).tolist()
    assert x.bool().tolist() == (af != 0).tolist()


def test_sums_accumulate_in_float32():
    ones = tp.ones(1000, dtype=tp.bfloat16)
    assert ones.sum().item() == 1000.0  # a bfloat16 accumulator would stop at 256
    long_rows = tp.ones((2, 3000), dtype=tp.bfloat16)  # the two-pass path
    assert long_rows.sum(-1).tolist() == [3008.0, 3008.0]  # 3000 rounded to bfloat16
    assert long_rows.sum(-1).dtype == tp.bfloat16 and long_rows.mean(-1).tolist() == [1.0, 1.0]
    a, _ = _operands(n=700, seed=5)
    x = tp.tensor(a.reshape(2, 350))
    want = _rounded(a.reshape(2, 350).astype(np.float64).sum(-1))
    np.testing.assert_allclose(x.sum(-1).numpy().astype(float), want.astype(float), rtol=2 * ULP)


def test_max_min_and_arg():
    a, _ = _operands(n=1400, seed=6)
    x = tp.tensor(a.reshape(2, 700))
    af = a.reshape(2, 700).astype(np.float64)
    assert x.amax(-1).dtype == tp.bfloat16
    assert x.amax(-1).numpy().astype(float).tolist() == af.max(-1).tolist()
    assert x.amin().item() == af.min()
    values, indices = x.max(1)
    assert indices.tolist() == af.argmax(1).tolist() and values.numpy().astype(float).tolist() == af.max(1).tolist()
    assert x.argmin().item() == af.argmin()


def test_matmul_sums_in_float32_and_rounds_once():
    rng = np.random.default_rng(7)
    a, b = _rounded(rng.uniform(-1, 1, (5, 40))), _rounded(rng.uniform(-1, 1, (40, 3)))
    got = tp.tensor(a) @ tp.tensor(b)
    assert got.dtype == tp.bfloat16
    want = _rounded(a.astype(np.float64) @ b.astype(np.float64))
    np.testing.assert_allclose(got.numpy().astype(float), want.astype(float), rtol=2 * ULP, atol=1e-2)


def test_factories_random_draws_and_names():
    assert tp.zeros(2, 3, dtype=tp.bfloat16).tolist() == [[0.0] * 3] * 2
    assert tp.ones(2, dtype="bfloat16").tolist() == [1.0, 1.0] and tp.zeros(1, dtype=BF16).dtype == tp.bfloat16
    assert tp.full((2,), 1 + 2**-8, dtype=tp.bfloat16).tolist() == [1.0, 1.0]  # a tie: to even
    assert tp.full((1,), 1e39, dtype=tp.bfloat16).tolist() == [np.inf]
    assert tp.arange(0, 2, 0.5, dtype=tp.bfloat16).tolist() == [0.0, 0.5, 1.0, 1.5]
    assert tp.arange(300, dtype=tp.bfloat16)[-3:].tolist() == _rounded([297, 298, 299]).tolist()
    assert tp.tensor([1.0, 2.0]).bfloat16().dtype == tp.bfloat16
    assert repr(tp.ones(2, dtype=tp.bfloat16)) == "tensor([1., 1.], dtype=tensorplay.bfloat16)"
    assert tp.bfloat16.is_floating_point and tp.bfloat16.itemsize == 2
    tp.manual_seed(0)
    u = tp.rand(4000, dtype=tp.bfloat16).numpy().astype(np.float64)
    assert u.min() >= 0.0 and u.max() < 1.0 and 0.45 < u.mean() < 0.55
    n = tp.randn(4000, dtype=tp.bfloat16)
    assert n.dtype == tp.bfloat16 and abs(float(n.float().mean().item())) < 0.1


def test_host_data_round_trips():
    host = _edge_values().astype(BF16)
    for t in (tp.tensor(host), tp.from_numpy(host), tp.as_tensor(host)):
        assert t.dtype == tp.bfloat16
        np.testing.assert_array_equal(_bits(t.numpy()), _bits(host))
    from_list = tp.tensor([[1.0, 1 + 2**-8]], dtype=tp.bfloat16)
    assert from_list.tolist() == [[1.0, 1.0]] and isinstance(from_list[0, 0].item(), float)
    y = tp.zeros(3, dtype=tp.bfloat16)
    y[1:] = [2.5, 3.0]
    y.copy_(np.array([1.0, 2.0, 4.0], dtype=np.float32))
    assert y.tolist() == [1.0, 2.0, 4.0]


def test_dlpack_carries_the_bfloat16_code_and_the_interface_refuses():
    x = tp.tensor([1.5, -2.0, 3.0], dtype=tp.bfloat16)
    y = tp.from_dlpack(x.__dlpack__(max_version=(1, 0)))
    assert y.dtype == tp.bfloat16 and y.data_ptr() == x.data_ptr() and y.tolist() == [1.5, -2.0, 3.0]
    view = from_capsule(x.__dlpack__())  # kDLBfloat, 16 bits, read back as ml_dtypes' bfloat16
    assert view.dtype == BF16
    view.release()
    message = "the CUDA Array Interface has no type string for tensorplay.bfloat16 (as PyTorch's has none)"
    with pytest.raises(TypeError, match=re.escape(message)):
        _ = x.__cuda_array_interface__


def test_own_kernels_see_the_bits_and_plain_numba_launches_are_refused():
    @tp.jit
    def bump(x):
        i = tp.cuda.grid(1)
        if i < x.size:
            x[i] += 1  # one step of the last mantissa bit

    @numba.cuda.jit
    def plain(x):
        pass

    t = tp.ones(2, dtype=tp.bfloat16)
    bump[1, 32](t)
    assert t.tolist() == [1 + 2**-7] * 2
    if tp.cuda.backend() == "sim":  # on the GPU Numba reads the tensor through DLPack: its own rules
        with pytest.raises(TypeError, match="no type string for tensorplay.bfloat16"):
            plain[1, 32](t)


def test_gradients_flow_through_bfloat16():
    x = tp.tensor([1.0, -2.0, 3.0], dtype=tp.bfloat16, requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.dtype == tp.bfloat16 and x.grad.tolist() == [2.0, -4.0, 6.0]


def test_a_compiled_function_runs_bfloat16_eagerly():
    @tp.compile
    def f(x):
        return (x + 1) * 2

    x = tp.tensor([1.0, 255.0], dtype=tp.bfloat16)
    assert f(x).tolist() == [4.0, 512.0] and f.kernels() == []


@pytest.mark.parametrize("other", ["float16", "float32", "float64"])
def test_mixed_in_place_ops_and_out_store_values_not_bits(other):
    # a bfloat16 target of another dtype's results, and another dtype's target of bfloat16 results
    a = np.linspace(-3.0, 3.0, 13).astype(np.float32)
    b = np.linspace(0.25, 2.0, 13).astype(other)
    for method, ref in [("add_", np.add), ("sub_", np.subtract), ("mul_", np.multiply), ("div_", np.divide)]:
        x = tp.tensor(a).to(tp.bfloat16)
        getattr(x, method)(tp.tensor(b))
        want = _rounded(ref(_rounded(a).astype(np.float64), b.astype(np.float64)))
        np.testing.assert_array_equal(x.float().numpy(), want, err_msg=method)
    out = tp.empty(13, dtype=tp.bfloat16)
    tp.add(tp.tensor(a), tp.tensor(b), out=out)
    np.testing.assert_array_equal(out.float().numpy(), _rounded(a.astype(np.float64) + b.astype(np.float64)))
    tp.exp(tp.tensor(b), out=out)
    np.testing.assert_allclose(out.float().numpy(), _rounded(np.exp(b.astype(np.float64))), rtol=2**-7)
    wide = tp.empty(13, dtype=getattr(tp, other))
    tp.mul(tp.tensor(a).to(tp.bfloat16), tp.tensor(a).to(tp.bfloat16), out=wide)
    np.testing.assert_array_equal(wide.numpy(), (_rounded(_rounded(a) * _rounded(a))).astype(other))
