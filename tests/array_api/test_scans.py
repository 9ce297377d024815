"""Running sums and products (the standard's ``cumulative_sum`` and
``cumulative_prod``, PyTorch's ``cumsum`` and ``cumprod``) against NumPy, with
the standard's dtypes; rows longer than a chunk (the carries) and than many
chunks (a scan of the partials); gradients against finite differences, zeros
included; capture and replay, in a while body too."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close
from helpers.gradcheck import check_gradients

import tensorplay as tp
from tensorplay import _scans

RNG = np.random.default_rng(3)


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("name, ref", [("cumulative_sum", np.cumsum), ("cumulative_prod", np.cumprod)])
def test_running_sums_and_products_along_any_axis(name, ref, axis):
    a = RNG.uniform(0.5, 1.5, (3, 4, 5))
    assert_close(getattr(tp, name)(tp.tensor(a), axis=axis), ref(a, axis=axis))


@pytest.mark.parametrize("n", [1, 31, 32, 33, 100, 300])
def test_rows_longer_than_a_chunk_carry_the_totals_before_them(n):
    a = RNG.integers(-5, 6, (2, n))
    assert_close(tp.cumsum(tp.tensor(a), 1), np.cumsum(a, 1))
    b = RNG.uniform(-1, 1, (n, 3))
    assert_close(tp.cumsum(tp.tensor(b), 0), np.cumsum(b, 0), rtol=1e-9, atol=1e-12)


def test_a_scan_of_many_chunks_scans_its_partials_again():
    a = RNG.integers(-9, 10, 1100)  # more chunks than a block has lanes on the simulator (16 of 32 items)
    assert_close(tp.cumulative_sum(tp.tensor(a)), np.cumsum(a))
    rows = tp.tensor(a.reshape(1, -1))
    assert_close(_scans.scan_rows(rows, "sum", tp.int64, reverse=True), np.cumsum(a[::-1])[::-1].reshape(1, -1))


@pytest.mark.parametrize("items, claim_early", [(2, False), (2, True), (5, True)])
def test_the_chained_kernels_variants_give_the_running_sum(items, claim_early):
    # benchmarks/scan_variants.py times these: fewer blocks than tiles, so each block takes several in turn
    from benchmarks.scan_variants import variant_call

    a = RNG.integers(-9, 10, 300).astype(np.float32)  # 6 to 10 tiles of the simulator's 16 lanes
    x, out = tp.tensor(a.reshape(1, -1)), tp.empty((1, a.size))
    variant_call(x, out, items, 2, claim_early)()
    assert_close(out, np.cumsum(a).reshape(1, -1))


@pytest.mark.parametrize(
    "dtype, want",
    [(tp.int8, tp.int64), (tp.int32, tp.int64), (tp.uint8, tp.uint64), (tp.uint32, tp.uint64), (tp.bool, tp.int64),
     (tp.uint64, tp.uint64), (tp.float32, tp.float32), (tp.float16, tp.float16), (tp.bfloat16, tp.bfloat16)],
    ids=str,
)  # fmt: skip
@pytest.mark.parametrize("name, ref", [("cumulative_sum", np.cumsum), ("cumulative_prod", np.cumprod)])
def test_dtypes_follow_the_standard(name, ref, dtype, want):
    a = (np.arange(12).reshape(3, 4) % 3 + 1).astype(np.float64)
    if dtype is tp.bool:
        a = a > 1
    x = tp.tensor(a, dtype=dtype)
    out = getattr(tp, name)(x, axis=1)
    assert out.dtype is want
    assert_close(out, ref(a.astype(np.float64), axis=1), rtol=1e-2 if dtype.itemsize == 2 else 0, atol=0)


def test_dtype_converts_first_and_integers_wrap_in_it():
    a = np.array([100, 100, 100], dtype=np.int8)
    out = tp.cumulative_sum(tp.tensor(a), dtype=tp.int8)
    assert out.dtype is tp.int8 and out.tolist() == np.cumsum(a, dtype=np.int8).tolist()
    out = tp.cumsum(tp.tensor([1.5, 2.5]), 0, dtype=tp.float64)
    assert out.dtype is tp.float64 and out.tolist() == [1.5, 4.0]
    big = np.array([2**63, 2**63 + 5], dtype=np.uint64)
    assert tp.cumulative_sum(tp.tensor(big)).tolist() == np.cumsum(big).tolist()


def test_include_initial_puts_the_identity_first():
    a = RNG.uniform(0.5, 2, (2, 3))
    out = tp.cumulative_sum(tp.tensor(a), axis=0, include_initial=True)
    assert_close(out, np.concatenate([np.zeros((1, 3)), np.cumsum(a, 0)]))
    out = tp.cumulative_prod(tp.tensor(a), axis=1, include_initial=True)
    assert_close(out, np.concatenate([np.ones((2, 1)), np.cumprod(a, 1)], 1))
    assert tp.cumulative_sum(tp.zeros(0), include_initial=True).tolist() == [0.0]


def test_pytorch_forms_and_methods():
    a = RNG.uniform(-1, 1, (3, 4))
    x = tp.tensor(a)
    assert_close(x.cumsum(1), np.cumsum(a, 1))
    assert_close(x.cumprod(dim=0), np.cumprod(a, 0))
    assert_close(tp.cumprod(x, -1), np.cumprod(a, -1))
    assert tp.cumsum is tp.cumulative_sum and tp.cumprod is tp.cumulative_prod


@pytest.mark.parametrize("dtype", [tp.complex64, tp.complex128], ids=str)
def test_complex_running_sums_and_products(dtype):
    a = (RNG.uniform(-1, 1, (2, 40)) + 1j * RNG.uniform(-1, 1, (2, 40))).astype(dtype.np)
    out = tp.cumulative_sum(tp.tensor(a), axis=1)
    assert out.dtype is dtype
    np.testing.assert_allclose(out.numpy(), np.cumsum(a.astype(np.complex128), 1), rtol=1e-5, atol=1e-5)
    out = tp.cumprod(tp.tensor(a[:, :5]), 1)
    np.testing.assert_allclose(out.numpy(), np.cumprod(a[:, :5].astype(np.complex128), 1), rtol=1e-5, atol=1e-6)
    assert tp.cumulative_prod(tp.tensor(a[0, :2]), include_initial=True).numpy()[0] == 1


def test_special_values_as_successive_adds():
    a = np.array([1.0, np.inf, -np.inf, 2.0, np.nan, 3.0])
    with np.errstate(invalid="ignore"):
        want_sum, want_prod = np.cumsum(a), np.cumprod(a)
    assert_close(tp.cumulative_sum(tp.tensor(a)), want_sum)
    assert_close(tp.cumulative_prod(tp.tensor(a)), want_prod)


def test_bad_arguments_are_sentences():
    with pytest.raises(ValueError, match=r"^cumulative_sum\(\) of a tensor of 2 dimensions needs the axis"):
        tp.cumulative_sum(tp.ones((2, 2)))
    with pytest.raises(TypeError, match=r"^cumulative_prod\(\) expects a tensor, got list$"):
        tp.cumulative_prod([1, 2])
    with pytest.raises(TypeError, match=r"^cumulative_sum\(\) got axis=0 and dim=1, two spellings of one argument"):
        tp.cumsum(tp.ones((2, 2)), 1, axis=0)


def test_gradients():
    a = RNG.uniform(0.5, 1.5, (2, 3))
    check_gradients(lambda x: tp.cumsum(x, 1), a)
    check_gradients(lambda x: tp.cumulative_sum(x, axis=0, include_initial=True), a)
    check_gradients(lambda x: tp.cumprod(x, 1), a)


@pytest.mark.parametrize("row", [[2.0, 0.0, 3.0, 4.0], [0.0, 2.0, 0.0, 3.0], [1.5, 2.0, 3.0, 0.0]], ids=str)
def test_the_gradient_of_a_running_product_is_right_at_zeros(row):
    check_gradients(lambda x: tp.cumprod(x, 0), np.array(row))


def test_scans_are_captured_and_replay_on_new_data():
    x = tp.tensor(RNG.uniform(-1, 1, (3, 70)))
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        total = tp.cumsum(x, 1)
        product = tp.cumulative_prod(x, axis=0, include_initial=True)
    for _ in range(2):
        a = RNG.uniform(-1, 1, (3, 70))
        x.copy_(tp.tensor(a))
        g.replay()
        assert_close(total, np.cumsum(a, 1))
        assert_close(product, np.concatenate([np.ones((1, 70)), np.cumprod(a, 0)]))


def test_a_scan_runs_inside_a_while_body():
    x, n, flag = tp.tensor(np.arange(40)), tp.tensor([3]), tp.empty(1, dtype=tp.bool)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        tp.gt(n, 0, out=flag)
        with g.while_(flag):
            x.copy_(tp.cumsum(x, 0) % 1000)
            n.sub_(1)
            tp.gt(n, 0, out=flag)
    g.replay()
    want = np.arange(40)
    for _ in range(3):
        want = np.cumsum(want) % 1000
    assert x.tolist() == want.tolist()
