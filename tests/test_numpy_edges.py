"""Where NumPy's and PyTorch's users look first: empty tensors, value counts,
dtypes at the edges, comparisons with None. Each case against NumPy or
PyTorch's documented answer."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tensorplay as tp


@pytest.mark.parametrize("shape, dim", [((0,), None), ((3, 0), 1), ((0, 4), 0), ((2, 3), 1)])
def test_any_and_all_methods_answer_as_numpy_also_over_nothing(shape, dim):
    host = (np.arange(int(np.prod(shape))).reshape(shape) % 3 == 0).astype(np.float32)
    x = tp.tensor(host)
    assert x.any(dim).tolist() == np.any(host, axis=dim).tolist()
    assert x.all(dim).tolist() == np.all(host, axis=dim).tolist()
    assert x.any(dim, keepdim=True).shape == np.any(host, axis=dim, keepdims=True).shape


def test_masked_assignment_refuses_another_number_of_values():
    mask = np.array([True, False, True, True, False, True])
    x = tp.zeros(6)
    for count in (0, 2, 6):
        with pytest.raises(ValueError, match=f"cannot assign {count} values to the 4 elements the mask selects"):
            x[tp.tensor(mask)] = tp.arange(count, dtype=tp.float32)
    assert x.tolist() == [0.0] * 6  # nothing written
    x[tp.tensor(mask)] = tp.tensor([1.0, 2.0, 3.0, 4.0])
    expected = np.zeros(6)
    expected[mask] = [1.0, 2.0, 3.0, 4.0]
    assert x.tolist() == expected.tolist()
    x[tp.zeros(6, dtype=tp.bool)] = tp.tensor([])  # selects nothing: no values needed
    x[tp.tensor(mask)] = 7.0  # one value for all of them
    assert x.tolist() == np.where(mask, 7.0, expected).tolist()


def test_masked_assignment_of_no_values_is_refused_inside_a_capture():
    x, mask, nothing = tp.zeros(4), tp.tensor([True, False, True, False]), tp.zeros(0)
    g = tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.CaptureError, match="no values"):
        with tp.cuda.graph(g):
            x[mask] = nothing
    assert (x + 1).tolist() == [1.0] * 4  # the runtime goes on


def test_searchsorted_clamps_a_sorter_out_of_range():
    # a sorter index past the end reads the last element, as every gather here does: no read outside the tensor
    found = tp.searchsorted(tp.tensor([1.0, 2.0, 3.0]), tp.tensor([2.5]), sorter=tp.tensor([0, 1, 5]))
    assert found.tolist() == [2]
    x = np.array([3.0, 1.0, 2.0])
    order = np.argsort(x)
    assert tp.searchsorted(tp.tensor(x), tp.tensor([2.5]), sorter=tp.tensor(order)).tolist() == [
        int(np.searchsorted(x, 2.5, sorter=order))
    ]


@pytest.mark.parametrize("data", [[2**63], [1, 2**63], [[1], [2**63]], 2**63, [2**64], [-(2**63) - 1]])
def test_python_ints_beyond_int64_are_an_overflow_error(data):
    with pytest.raises(OverflowError, match="does not fit int64"):
        tp.tensor(data)


def test_python_ints_at_the_edges_of_int64_and_with_floats():
    assert tp.tensor([-(2**63), 2**63 - 1]).tolist() == [-(2**63), 2**63 - 1]
    assert tp.tensor([2**63], dtype=tp.uint64).tolist() == [2**63]
    mixed = tp.tensor([1.5, 2**63])  # a float among them: a floating tensor, as in PyTorch
    assert mixed.dtype == tp.float32 and mixed.tolist() == np.array([1.5, 2**63], np.float32).tolist()


@pytest.mark.parametrize("value", [np.float64(2.5), np.int16(3), np.uint8(200), np.bool_(True), np.complex128(1j)])
def test_numpy_scalars_keep_their_dtype(value):
    assert tp.tensor(value).dtype == tp.from_numpy(np.asarray(value)).dtype
    assert tp.asarray(value).dtype.name == np.asarray(value).dtype.name


@pytest.mark.parametrize("dtype, big", [(tp.int32, 3e9), (tp.int64, 3e19)])
def test_compiled_float_to_integer_conversion_is_the_eager_one(dtype, big):
    convert = lambda x: (x * 1).to(dtype)  # noqa: E731 (a fused chain ending in the conversion)
    compiled = tp.compile(convert, backend="cudagraphs")
    x = tp.tensor([big, -big, float("nan"), 2.7, -2.7], dtype=tp.float64)
    eager = convert(x).tolist()
    info = np.iinfo(dtype.name)
    assert eager[:2] == [info.max, info.min] and eager[3:] == [2, -2]  # saturating, towards zero
    for _ in range(3):  # the first call runs eagerly, the later ones replay the fused kernel's graph
        assert compiled(x).tolist() == eager


def test_integer_powers_with_negative_exponents_are_pytorchs():
    base, exponent = [2, 1, -1, -1, 0, 3, -2], [-1, -2, -3, -2, -1, 2, 3]
    # PyTorch's: 1 / a ** -b truncated towards zero (NumPy raises instead)
    expected = [int(1 / b**-e) if e < 0 and b else (b**e if e >= 0 else 0) for b, e in zip(base, exponent, strict=True)]
    assert (tp.tensor(base) ** tp.tensor(exponent)).tolist() == expected
    assert (tp.tensor([4.0, 2.0]) ** tp.tensor([-1, -2])).tolist() == [0.25, 0.25]
    power = tp.compile(lambda a, b: (a * 1) ** b, backend="cudagraphs")
    for _ in range(3):
        assert power(tp.tensor(base), tp.tensor(exponent)).tolist() == expected


def test_assignment_drops_the_values_leading_ones_as_numpy_does():
    x, host = tp.zeros(4, 5), np.zeros((4, 5))
    for index, value in [(0, np.ones((1, 5))), (slice(1, 3), 2 * np.ones((1, 2, 5))), (3, 3 * np.ones((1, 1, 5)))]:
        host[index] = value
        x[index] = tp.tensor(value)
    x[2] = [[4.0] * 5]
    host[2] = np.array([[4.0] * 5])
    assert x.tolist() == host.tolist()
    with pytest.raises(ValueError, match="cannot broadcast"):
        x[0] = tp.ones(2, 5)


def test_unsigned_accumulating_methods_give_int64_as_sum_does():
    u = tp.tensor([200, 100], dtype=tp.uint8)
    host = np.array([200, 100], dtype=np.int64)
    assert u.sum().dtype == u.prod().dtype == u.cumsum(0).dtype == u.cumprod(0).dtype == tp.int64
    assert u.prod().item() == host.prod() and u.cumprod(0).tolist() == host.cumprod().tolist()
    # the standard's functions keep uint64, and an explicit dtype wins
    assert tp.prod(u).dtype == tp.cumulative_sum(u).dtype == u.prod(dtype=tp.uint64).dtype == tp.uint64


def test_comparison_with_none_is_pythons():
    x = tp.ones(2)
    assert (x == None) is False and (x != None) is True  # noqa: E711 (what is tested)
    assert x in [None, x] and x not in [None]


def test_expand_refuses_negative_sizes_before_anything_reads_them():
    x = tp.zeros((3, 1))
    for sizes in [(3, -3), (-1, 3, 4), (3, -2)]:
        with pytest.raises(ValueError, match="sizes are numbers 0 or more, or -1"):
            x.expand(*sizes)
    with pytest.raises(ValueError, match="sizes are numbers 0 or more"):
        tp.broadcast_to(x, (3, -3))
    assert x.expand(2, -1, 5).shape == (2, 3, 5) and x.expand(3, 0).shape == (3, 0)
    assert (x + 1).tolist() == [[1.0]] * 3  # the runtime is fine


def test_squeeze_checks_its_dims_and_takes_a_tuple_as_pytorch():
    with pytest.raises(IndexError, match="dimension 3 is out of range"):
        tp.zeros((3, 4)).squeeze(3)
    with pytest.raises(TypeError, match="dimension as an int"):
        tp.zeros((3, 1)).squeeze(1.5)
    x = tp.zeros((1, 3, 1, 2))
    assert (
        x.squeeze((0, 2)).shape == (3, 2) and x.squeeze((0, 1)).shape == (3, 1, 2) and x.squeeze(-2).shape == (1, 3, 2)
    )


def test_a_zero_dimensional_host_index_takes_a_dimension_away_as_numpy():
    host = np.arange(12.0).reshape(3, 4)
    x = tp.tensor(host)
    for index in (np.array(1), (slice(None), np.array(2)), (np.array(1), np.array(2)), np.int64(2)):
        got = x[index]
        assert got.shape == host[index].shape and np.array_equal(np.asarray(got.tolist()), host[index])
    assert tp.take(x, 5).shape == () and tp.take(x, 5).item() == 5.0
    assert tp.take(x, 1, axis=1).tolist() == host[:, 1].tolist()
    x[np.array(1), np.array(2)] = 9.0
    assert x[1, 2].item() == 9.0 and x.sum().item() == host.sum() - 6.0 + 9.0


def test_a_mask_whose_bytes_are_not_0_or_1_selects_what_numpy_selects():
    # a NumPy view as bool (or memory from outside) may hold any nonzero byte as True
    raw = np.array([0, 2, 1, 3, 0, 4, 1, 255] * 40, np.uint8)
    mask, values = raw.view(bool), np.arange(raw.size, dtype=np.float32)
    x, m = tp.tensor(values), tp.tensor(mask)
    np.testing.assert_array_equal(x[m].numpy(), values[mask])
    y = tp.zeros(raw.size)
    y[m] = tp.arange(int(mask.sum())).float()
    want = np.zeros(raw.size, np.float32)
    want[mask] = np.arange(mask.sum())
    np.testing.assert_array_equal(y.numpy(), want)


def test_unary_functions_with_out_refuse_what_binary_ones_refuse():
    x = tp.tensor([0.5, 1.5, 2.5])
    with pytest.raises(TypeError, match="in-place 'exp' would store tensorplay.float32 results in a tensorplay.int32"):
        tp.exp(x, out=tp.zeros(3, dtype=tp.int32))
    with pytest.raises(TypeError, match="in-place 'neg' would store"):
        tp.negative(x, out=tp.zeros(3, dtype=tp.bool))
    with pytest.raises(ValueError, match=r"cannot write shape \(3,\) into shape \(2,\)"):
        tp.exp(x, out=tp.zeros(2))
    out = tp.zeros(2, 3, dtype=tp.float64)  # a wider dtype, and a result broadcast into its target: as binary ops
    tp.exp(x, out=out)
    np.testing.assert_allclose(out.numpy(), np.broadcast_to(np.exp([0.5, 1.5, 2.5]), (2, 3)), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64"])
def test_a_float_filled_into_integers_goes_towards_zero_or_is_a_sentence(dtype):
    x = tp.zeros(3, dtype=getattr(tp, dtype))
    assert x.fill_(2.7).tolist() == [2] * 3 and tp.full((2,), 3.9, dtype=getattr(tp, dtype)).tolist() == [3, 3]
    x[...] = 1.5
    assert x.tolist() == [1] * 3
    for bad in (float("nan"), float("inf"), -1.0 if dtype == "uint8" else -1e30, 1e30):
        with pytest.raises(OverflowError, match=re.escape(f"fill value {bad} is out of range for tensorplay.{dtype}")):
            x.fill_(bad)
    assert x.tolist() == [1] * 3  # nothing written


def test_small_forms_numpy_and_pytorch_users_write():
    x = tp.arange(24).reshape(2, 3, 4)
    assert x.to(np.float64).dtype == tp.float64 and x.to(np.dtype("float32")).dtype == tp.float32
    with pytest.raises(ValueError, match="cannot join zero-dimensional tensors"):
        tp.cat([tp.tensor(1.0), tp.tensor(2.0)])
    a, b = np.array([True, False, True]), np.array([False, False, True])
    for fn in ("maximum", "minimum"):
        got = getattr(tp, fn)(tp.tensor(a), tp.tensor(b))
        assert got.dtype == tp.bool and got.tolist() == getattr(np, fn)(a, b).tolist()
    host = np.arange(24).reshape(2, 3, 4)
    assert x.flatten().tolist() == host.ravel().tolist()
    assert x.flatten(1).shape == (2, 12) and tp.flatten(x, 0, 1).shape == (6, 4) and x.flatten(-2, -1).shape == (2, 12)
    assert tp.tensor(3.0).flatten().shape == (1,) and tp.zeros(2, 0, 3).flatten(0, 1).shape == (0, 3)
    assert x.unflatten(2, (2, 2)).tolist() == host.reshape(2, 3, 2, 2).tolist()
    assert tp.unflatten(x, -1, (-1, 2)).shape == (2, 3, 2, 2)
    with pytest.raises(ValueError, match="start_dim <= end_dim"):
        x.flatten(2, 1)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_statistics_and_norms_are_computed_in_float32(dtype):
    def close(got, want, rel=1e-2):
        assert abs(got.float().item() - want) <= rel * abs(want), (got, want)

    tp_dtype = getattr(tp, dtype)
    spread = tp.tensor([0.0] * 99 + [300.0], dtype=tp_dtype)  # 300² overflows float16
    close(tp.var(spread), np.var([0.0] * 99 + [300.0]))
    close(tp.std(spread, correction=1), np.std([0.0] * 99 + [300.0], ddof=1))
    close(tp.var(tp.tensor([256.0, 256.0, 258.0, 260.0], dtype=tp_dtype)), 2.75)
    close(tp.linalg.vector_norm(tp.tensor([300.0, 400.0], dtype=tp_dtype)), 500.0)
    close(tp.linalg.matrix_norm(tp.tensor([[300.0, 0.0], [0.0, 400.0]], dtype=tp_dtype)), 500.0)
    close(tp.logsumexp(tp.zeros(70000, dtype=tp_dtype), 0), float(np.log(70000.0)))
    assert tp.var(spread).dtype == tp_dtype and tp.linalg.vector_norm(spread).dtype == tp_dtype


def test_logsumexp_over_nothing_is_minus_infinity_and_refuses_complex():
    assert tp.logsumexp(tp.zeros(3, 0), 1).tolist() == [-np.inf] * 3 and tp.logsumexp(tp.zeros(0), 0).item() == -np.inf
    with pytest.raises(TypeError, match="logsumexp\\(\\) takes real tensors"):
        tp.logsumexp(tp.tensor([1 + 1j, 2 - 1j]), 0)


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_along_a_dimension_gives_its_gradient_to_the_index_it_returns(op):
    x = tp.tensor([[2.0, 2.0, 1.0], [0.0, 3.0, 3.0]] if op == "max" else [[1.0, 1.0, 2.0], [3.0, 0.0, 0.0]])
    x.requires_grad_()
    values, indices = getattr(x, op)(1)
    values.sum().backward()
    assert indices.tolist() == [0, 1] and x.grad.tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    x.grad = None
    getattr(tp, op)(x, 1, keepdim=True).values.sum().backward()
    assert x.grad.tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]


def test_reductions_take_numpy_integer_dimensions_and_refuse_bools():
    x = tp.tensor([[1.0, 2.0], [3.0, 5.0]])
    assert x.sum(np.int64(1)).tolist() == [3.0, 8.0] and x.amax(np.int32(0)).tolist() == [3.0, 5.0]
    assert x.sum(range(2)).item() == 11.0
    for bad in (True, 1.5):
        with pytest.raises(TypeError, match="expected a dimension as an int or a tuple of ints"):
            x.sum(bad)


# -- host data and NumPy arrays as operands ----------------------------------------------------------


def test_a_numpy_array_operand_keeps_its_dtype_as_numpys_and_pytorchs():
    small = tp.tensor([1, 2], dtype=tp.uint8)
    assert (small == np.array([257, 2])).tolist() == [False, True]  # not 257 wrapped to 1
    i32 = tp.tensor([1, 2], dtype=tp.int32)
    for total in (i32 + np.array([2**40, 5]), np.array([2**40, 5]) + i32):
        assert total.dtype is tp.int64 and total.tolist() == [2**40 + 1, 7]
    h = tp.tensor([1.0, 2.0], dtype=tp.float16) + np.array([70000.0, 1e-4])
    assert h.dtype is tp.float64 and h.tolist() == [70001.0, 2.0001]
    assert (i32 + np.array(3)).dtype is tp.int32  # a 0-d array is a number
    assert (i32 + [1, 2]).dtype is tp.int32  # Python data promotes like a Python number


def test_typed_host_data_keeps_its_type_and_big_ints_fit_a_float_dtype():
    import array

    big = tp.tensor([np.uint64(2**64 - 1), np.uint64(1)])
    assert big.dtype is tp.uint64 and big.tolist() == [2**64 - 1, 1]
    doubles = tp.asarray(array.array("d", [0.1, 1e300]))
    assert doubles.dtype is tp.float64 and doubles.tolist() == [0.1, 1e300]
    assert tp.asarray(array.array("b", [1, -1])).dtype is tp.int8
    assert tp.asarray(memoryview(np.array([0.1]))).dtype is tp.float64
    assert tp.tensor([0.1, 2.0]).dtype is tp.float32  # Python floats: the default dtype
    assert tp.tensor([2**64], dtype=tp.float32).tolist() == [float(2**64)]
    assert tp.asarray([-(2**63) - 1, 1], dtype=tp.float64).tolist() == [-9.223372036854776e18, 1.0]
    with pytest.raises(OverflowError, match="pass a floating dtype"):
        tp.tensor([2**64])


def test_arange_refuses_values_its_dtype_cannot_hold():
    for args, kw in (((0, 10**20, 10**19), {}), ((2**63, 2**63 + 3), {}), ((-3, 3), {"dtype": tp.uint8})):
        with pytest.raises(OverflowError, match="does not fit"):
            tp.arange(*args, **kw)
    assert tp.arange(250, 256, dtype=tp.uint8).tolist() == list(range(250, 256))
    assert tp.arange(254, 258, dtype=tp.uint8).tolist() == [254, 255, 0, 1]  # later values wrap, as NumPy's
    assert tp.arange(2**62, 2**63 - 1, 2**61).tolist() == [2**62, 2**62 + 2**61]


def test_numpy_never_copy_is_refused_and_bfloat16_prints_as_floats():
    t = tp.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match="copy of device memory"):
        np.asarray(t, copy=False)
    assert np.asarray(t, dtype=np.float64).tolist() == [1.0, 2.0]
    assert repr(tp.tensor([2.0, 100.0], dtype=tp.bfloat16)) == "tensor([  2., 100.], dtype=tensorplay.bfloat16)"
    assert repr(tp.tensor(3.0, dtype=tp.bfloat16)) == "tensor(3., dtype=tensorplay.bfloat16)"


def test_clamp_of_complex_numbers_is_refused_in_every_form():
    z = tp.tensor([1 + 1j, -2j])
    for call in (
        lambda: tp.clamp(z, tp.zeros(2), tp.ones(2)),
        lambda: tp.clip(z, 0, 1),
        lambda: z.clamp(min=0),
        lambda: tp.clamp(tp.ones(2), 0j, 1j),
    ):
        with pytest.raises(TypeError, match="not defined for complex numbers"):
            call()


def test_float64_digamma_is_accurate_to_a_few_ulp():
    from math import lgamma

    x = np.array([0.5, 1.0, 2.5, 3.0, 6.0, 9.5, 10.0, 40.0, -1.5])
    got = tp.digamma(tp.tensor(x)).numpy()
    h = 1e-5  # d lgamma / dx by a 4th-order central difference, in extended steps of float64
    want = np.array(
        [(-lgamma(v + 2 * h) + 8 * lgamma(v + h) - 8 * lgamma(v - h) + lgamma(v - 2 * h)) / (12 * h) for v in x]
    )
    np.testing.assert_allclose(got, want, rtol=2e-9)  # the difference's own error
    euler = 0.57721566490153286061
    assert abs(got[1] + euler) <= 5e-16 and abs(got[5] - (np.log(9.5) - 1 / 19)) < 2e-3  # psi(1) = -gamma
