"""Where NumPy's and PyTorch's users look first: empty tensors, value counts,
dtypes at the edges, comparisons with None. Each case against NumPy or
PyTorch's documented answer."""

from __future__ import annotations

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
