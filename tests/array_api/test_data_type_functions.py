"""Data type functions (``astype``, ``can_cast``, ``finfo``, ``iinfo``,
``isdtype``, ``result_type``) and the promotion they and the ops share: the
standard's tables (NumPy 2 follows them for the standard's types: the
reference), PyTorch's rules where the standard leaves a pair unspecified, and
the sentences bad arguments get."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

import tensorplay as tp

INTS = [tp.int8, tp.int16, tp.int32, tp.int64]
UINTS = [tp.uint8, tp.uint16, tp.uint32, tp.uint64]
FLOATS = [tp.float32, tp.float64]
COMPLEX = [tp.complex64, tp.complex128]
STANDARD = [tp.bool, *INTS, *UINTS, *FLOATS, *COMPLEX]


def _same_kind(a, b) -> bool:
    """A pair the standard's promotion tables specify (not uint64 with a signed type)."""
    groups = [{tp.bool}, set(INTS) | set(UINTS), set(FLOATS) | set(COMPLEX)]
    if {a, b} & {tp.uint64} and {a, b} & set(INTS):
        return False
    return any(a in g and b in g for g in groups)


SPECIFIED = [(a, b) for a, b in itertools.product(STANDARD, STANDARD) if _same_kind(a, b)]


@pytest.mark.parametrize("a, b", SPECIFIED, ids=str)
def test_result_type_follows_the_standards_tables(a, b):
    want = np.result_type(a.np, b.np)
    assert tp.result_type(a, b).np == want
    x, y = tp.zeros(1, dtype=a), tp.zeros(1, dtype=b)
    assert tp.result_type(x, y).np == want
    assert tp.result_type(x, b, a).np == want


def test_ops_promote_as_result_type_says():
    # the integer pairs PyTorch refuses and the standard specifies
    for a, b in [(tp.uint16, tp.int8), (tp.uint16, tp.uint32), (tp.uint32, tp.int64), (tp.uint8, tp.uint64)]:
        x, y = tp.tensor([3], dtype=a), tp.tensor([4], dtype=b)
        assert (x + y).dtype is tp.result_type(a, b)
        assert (x + y).tolist() == [7]
        assert tp.where(tp.tensor([True]), x, y).dtype is tp.result_type(a, b)


@pytest.mark.parametrize(
    "a, b, want",
    [
        (tp.int64, tp.float32, tp.float32),  # PyTorch: the floating type
        (tp.uint64, tp.float16, tp.float16),
        (tp.bool, tp.int8, tp.int8),
        (tp.int32, tp.complex64, tp.complex64),
        (tp.float16, tp.complex64, tp.complex64),
        (tp.bfloat16, tp.complex128, tp.complex128),
        (tp.float16, tp.bfloat16, tp.float32),
    ],
    ids=str,
)
def test_mixed_kinds_promote_as_in_pytorch(a, b, want):
    assert tp.result_type(a, b) is want and tp.result_type(b, a) is want


def test_uint64_with_a_signed_type_is_refused_with_a_sentence():
    with pytest.raises(
        TypeError, match=r"^cannot promote uint64 and int8: no integer type holds both .* \.to\(dtype\)"
    ):
        tp.result_type(tp.uint64, tp.int8)
    with pytest.raises(TypeError, match="^cannot promote int64 and uint64"):
        tp.zeros(1, dtype=tp.int64) + tp.zeros(1, dtype=tp.uint64)


@pytest.mark.parametrize(
    "args, want",
    [
        ((tp.float32, 1.0), tp.float32),
        ((tp.float64, 1j), tp.complex128),
        ((tp.float32, 1j), tp.complex64),
        ((tp.int8, 1), tp.int8),
        ((tp.int8, 1.5), tp.float32),  # PyTorch's: the standard leaves it unspecified
        ((tp.bool, True), tp.bool),
        ((tp.complex128, 1.0, 2), tp.complex128),
        ((1.0, tp.int16, tp.int32), tp.float32),
    ],
    ids=str,
)
def test_result_type_with_python_scalars(args, want):
    assert tp.result_type(*args) is want


def test_result_type_needs_a_tensor_or_a_dtype():
    with pytest.raises(ValueError, match=r"^result_type\(\) needs at least one tensor or dtype, got only \(1, 2\.0\)"):
        tp.result_type(1, 2.0)
    with pytest.raises(TypeError, match=r"^expected a dtype .* got 'floaty'"):
        tp.result_type("floaty")


@pytest.mark.parametrize("a, b", SPECIFIED, ids=str)
def test_can_cast_within_a_kind_is_numpys_safe_cast(a, b):
    assert tp.can_cast(a, b) == np.can_cast(a.np, b.np, casting="safe")
    assert tp.can_cast(tp.zeros(1, dtype=a), b) == np.can_cast(a.np, b.np, casting="safe")


def test_can_cast_across_kinds_goes_up_only():
    assert tp.can_cast(tp.bool, tp.int8) and tp.can_cast(tp.int64, tp.float32) and tp.can_cast(tp.float32, tp.complex64)
    assert not tp.can_cast(tp.int8, tp.bool) and not tp.can_cast(tp.float16, tp.int64)
    assert not tp.can_cast(tp.complex64, tp.float64) and not tp.can_cast(tp.uint64, tp.int64)


@pytest.mark.parametrize("dtype", [tp.float16, tp.float32, tp.float64, tp.bfloat16, *COMPLEX], ids=str)
def test_finfo_matches_numpy(dtype):
    component = {tp.complex64: tp.float32, tp.complex128: tp.float64}.get(dtype, dtype)
    want = ml_dtypes.finfo(component.np) if dtype is tp.bfloat16 else np.finfo(component.np)
    for arg in (dtype, tp.ones(1, dtype=dtype)):
        info = tp.finfo(arg)
        assert info.dtype is component and info.bits == want.bits
        assert (info.eps, info.max, info.min, info.smallest_normal) == (
            float(want.eps), float(want.max), float(want.min), float(want.smallest_normal)
        )  # fmt: skip
        assert all(type(v) is float for v in (info.eps, info.max, info.min, info.smallest_normal))


@pytest.mark.parametrize("dtype", INTS + UINTS, ids=str)
def test_iinfo_matches_numpy(dtype):
    want = np.iinfo(dtype.np)
    for arg in (dtype, tp.ones(1, dtype=dtype)):
        info = tp.iinfo(arg)
        assert (info.bits, info.min, info.max, info.dtype) == (want.bits, int(want.min), int(want.max), dtype)
        assert type(info.min) is int and type(info.max) is int


def test_finfo_and_iinfo_refuse_the_other_kind():
    with pytest.raises(TypeError, match=r"^finfo\(\) expects a floating-point or complex dtype, got tensorplay\.int32"):
        tp.finfo(tp.int32)
    with pytest.raises(TypeError, match=r"^iinfo\(\) expects an integer dtype, got tensorplay\.bool; "):
        tp.iinfo(tp.bool)


KINDS = ["bool", "signed integer", "unsigned integer", "integral", "real floating", "complex floating", "numeric"]


@pytest.mark.parametrize("dtype", STANDARD, ids=str)
def test_isdtype_matches_numpy(dtype):
    for kind in KINDS + [tp.float32, ("bool", tp.int8), ("complex floating", "unsigned integer")]:
        np_kind = tuple(k.np if isinstance(k, tp.DType) else k for k in kind) if isinstance(kind, tuple) else kind
        np_kind = kind.np if isinstance(kind, tp.DType) else np_kind
        assert tp.isdtype(dtype, kind) == np.isdtype(dtype.np, np_kind), kind


def test_isdtype_counts_float16_and_bfloat16_as_real_floating():
    for d in (tp.float16, tp.bfloat16):
        assert tp.isdtype(d, "real floating") and tp.isdtype(d, "numeric") and not tp.isdtype(d, "integral")


def test_isdtype_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match=r"^expected a dtype kind \(one of 'bool', .*\), got 'floating'"):
        tp.isdtype(tp.float32, "floating")
    with pytest.raises(TypeError, match=r"^isdtype\(\) expects a dtype, got Tensor; pass x\.dtype"):
        tp.isdtype(tp.zeros(1), "numeric")


# -- astype -------------------------------------------------------------------------------

CASTS = [
    (tp.float64, tp.int32), (tp.int64, tp.float32), (tp.float32, tp.bool), (tp.bool, tp.float64),
    (tp.int8, tp.uint8), (tp.float32, tp.complex64), (tp.int32, tp.complex128), (tp.bool, tp.complex64),
    (tp.complex64, tp.complex128), (tp.complex128, tp.complex64), (tp.complex64, tp.bool), (tp.float16, tp.float64),
]  # fmt: skip


@pytest.mark.parametrize("src, dst", CASTS, ids=str)
def test_astype_matches_numpy(src, dst):
    a = np.array([[0, 1.5, -2.25], [3, 0, 7]])
    if src.is_complex:
        a = a + 1j * np.array([[0, -1, 2], [0, 0.5, 0]])
    host = a.astype(src.np)
    x = tp.asarray(host)
    y = tp.astype(x, dst)
    assert y.dtype is dst and y.shape == x.shape
    np.testing.assert_array_equal(y.numpy(), host.astype(dst.np))
    strided = tp.astype(x[:, ::2], dst)  # a strided view
    np.testing.assert_array_equal(strided.numpy(), host[:, ::2].astype(dst.np))


def test_astype_copy_keyword():
    x = tp.arange(3)
    assert tp.astype(x, tp.int64, copy=False) is x
    y = tp.astype(x, tp.int64)
    assert y is not x and y.data_ptr() != x.data_ptr() and y.tolist() == [0, 1, 2]
    z = tp.astype(x, tp.float32, copy=False)  # another dtype: a new tensor all the same
    assert z.dtype is tp.float32 and z.tolist() == [0.0, 1.0, 2.0]
    assert tp.astype(x, tp.int64, device=x.device, copy=False) is x


def test_astype_refuses_complex_to_real_with_a_sentence():
    x = tp.asarray([1 + 2j])
    with pytest.raises(
        TypeError, match=r"^astype\(\) does not cast complex64 to float32: .* tp\.real\(x\) or tp\.imag"
    ):
        tp.astype(x, tp.float32)
    with pytest.raises(ValueError, match="got device='cpu'"):
        tp.astype(tp.zeros(1), tp.float64, device="cpu")


def test_astype_carries_gradients_between_floating_types():
    x = tp.tensor([1.0, 2.0, 3.0], dtype=tp.float64).requires_grad_()
    (tp.astype(x, tp.float32) * tp.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert x.grad.dtype is tp.float64 and x.grad.tolist() == [1.0, 2.0, 3.0]


def test_astype_is_captured_and_replayed():
    x = tp.tensor([1.5, -2.5, 3.0])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = tp.astype(x, tp.int32)
        z = tp.astype(x, tp.complex64)
    x.copy_(tp.tensor([4.5, 5.0, -6.75]))
    g.replay()
    assert y.tolist() == [4, 5, -6]
    np.testing.assert_array_equal(z.numpy(), np.array([4.5, 5.0, -6.75], np.complex64))
