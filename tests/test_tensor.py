"""The Tensor object: factories, dtypes, layout, views and indexing, conversions.

Ops (arithmetic, reductions, matmul, ...) are in ``test_ops.py``.
"""

import re

import numpy as np
import pytest
from helpers import ALL_DTYPES, FLOAT_DTYPES, assert_close, random_array, random_tensor

import tensorplay as tp

# -- factories -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, dtype",
    [
        ([[1.5, -2.0], [3.0, 4.25]], tp.float32),
        ([1, -2, 3], tp.int64),
        ([True, False, True], tp.bool),
        ([1, 2.5], tp.float32),
        (3.5, tp.float32),
        (7, tp.int64),
        (True, tp.bool),
        ([], tp.float32),
    ],
)
def test_tensor_from_python_data(data, dtype):
    x = tp.tensor(data)
    expected = np.array(data)
    assert x.dtype == dtype
    assert x.shape == expected.shape
    assert x.tolist() == expected.tolist()


def test_tensor_from_scalar_is_0d():
    x = tp.tensor(7)
    assert x.shape == () and x.ndim == 0 and x.numel() == 1
    assert x.item() == 7
    assert tp.tensor(np.float64(2.5)).shape == ()
    assert tp.tensor(np.array(3, np.int32)).shape == ()


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_tensor_from_numpy_keeps_dtype(dtype):
    a = random_array((3, 4), dtype, seed=1)
    for x in (tp.tensor(a), tp.from_numpy(a)):
        assert x.dtype == dtype
        assert x.numpy().dtype == a.dtype
        np.testing.assert_array_equal(x.numpy(), a)


def test_tensor_copies_host_data():
    a = random_array((2, 3), np.float32)
    x = tp.tensor(a)
    a[:] = 1.0
    assert not np.array_equal(x.numpy(), a)


@pytest.mark.parametrize(
    "dtype, expected",
    [
        (tp.float64, tp.float64),
        (tp.int32, tp.int32),
        (tp.float16, tp.float16),
        (tp.bool, tp.bool),
        ("float64", tp.float64),
        (np.int32, tp.int32),
        (float, tp.float64),
        (int, tp.int64),
        (bool, tp.bool),
    ],
    ids=str,
)
def test_tensor_dtype_argument(dtype, expected):
    data = [[1.5, 2.0], [0.0, -3.0]]
    x = tp.tensor(data, dtype=dtype)
    assert x.dtype == expected
    np.testing.assert_array_equal(x.numpy(), np.array(data).astype(expected.np))


def test_tensor_from_non_contiguous_numpy():
    a = random_array((4, 6), np.float64)
    for view in (a[:, ::2], a.T, a[::-1]):
        x = tp.tensor(view)
        assert x.is_contiguous()
        np.testing.assert_array_equal(x.numpy(), view)


@pytest.mark.parametrize("make", [tp.empty, tp.zeros, tp.ones])
def test_empty_zeros_ones(make):
    for args in ((2, 3), ((2, 3),), ([2, 3],)):
        x = make(*args)
        assert x.shape == (2, 3) and x.dtype == tp.float32 and x.is_contiguous()
    x = make(4, dtype=tp.int32)
    assert x.shape == (4,) and x.dtype == tp.int32
    assert make(()).shape == ()
    assert make(0, 3).shape == (0, 3)
    if make is not tp.empty:
        np.testing.assert_array_equal(make(2, 3, dtype=tp.float16).numpy(), np.full((2, 3), make is tp.ones))


def test_full_infers_dtype_from_value():
    assert_close(tp.full((2, 3), 1.5), np.full((2, 3), 1.5), dtype=tp.float32)
    assert_close(tp.full((2,), 7), [7, 7], dtype=tp.int64)
    assert_close(tp.full(3, True), [True] * 3, dtype=tp.bool)
    assert_close(tp.full((2, 2), 2.75, dtype=tp.float64), np.full((2, 2), 2.75), dtype=tp.float64)
    assert_close(tp.full((2,), 2.7, dtype=tp.int32), [2, 2], dtype=tp.int32)


def test_arange():
    assert_close(tp.arange(5), np.arange(5), dtype=tp.int64)
    assert_close(tp.arange(2, 9, 3), [2, 5, 8], dtype=tp.int64)
    assert_close(tp.arange(0, 1, 0.25), [0.0, 0.25, 0.5, 0.75], dtype=tp.float32)
    assert_close(tp.arange(4, dtype=tp.float64), np.arange(4.0), dtype=tp.float64)
    assert tp.arange(0).shape == (0,)


@pytest.mark.parametrize("draw", [tp.rand, tp.randn])
def test_manual_seed_makes_draws_reproducible(draw):
    tp.manual_seed(123)
    first, second = draw(3, 5).numpy(), draw(3, 5).numpy()
    tp.manual_seed(123)
    np.testing.assert_array_equal(draw(3, 5).numpy(), first)
    np.testing.assert_array_equal(draw((3, 5)).numpy(), second)
    assert not np.array_equal(first, second)
    tp.manual_seed(124)
    assert not np.array_equal(draw(3, 5).numpy(), first)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_rand_is_uniform_in_unit_interval(dtype):
    tp.manual_seed(0)
    x = tp.rand(40, 50, dtype=dtype)
    assert x.dtype == dtype and x.shape == (40, 50)
    a = x.numpy().astype(np.float64)
    assert a.min() >= 0.0 and a.max() < 1.0
    assert abs(a.mean() - 0.5) < 0.03 and abs(a.var() - 1 / 12) < 0.01
    assert abs((a < 0.25).mean() - 0.25) < 0.03


def test_rand_float16_never_reaches_one():
    tp.manual_seed(0)
    assert tp.rand(20000, dtype=tp.float16).numpy().max() < 1.0


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_randn_is_standard_normal(dtype):
    tp.manual_seed(0)
    a = tp.randn(2000, dtype=dtype).numpy().astype(np.float64)
    assert abs(a.mean()) < 0.1 and abs(a.std() - 1.0) < 0.1
    assert abs((np.abs(a) < 1.0).mean() - 0.6827) < 0.04
    assert np.isfinite(a).all()


def test_random_draws_need_a_float_dtype():
    with pytest.raises(TypeError, match="random draws need a floating point dtype, got tensorplay.int64"):
        tp.rand(3, dtype=tp.int64)


@pytest.mark.parametrize("dtype", [None, tp.int32, tp.float64])
def test_like_factories(dtype):
    x = tp.tensor(random_array((2, 3), np.float16))[:, ::2]  # a non-contiguous float16 source
    want = dtype or tp.float16
    for y in (tp.empty_like(x, dtype=dtype), tp.zeros_like(x, dtype=dtype), tp.ones_like(x, dtype=dtype)):
        assert y.shape == (2, 2) and y.dtype == want and y.is_contiguous()
    assert_close(tp.zeros_like(x, dtype=dtype), np.zeros((2, 2)), dtype=want)
    assert_close(tp.ones_like(x, dtype=dtype), np.ones((2, 2)), dtype=want)
    assert_close(tp.full_like(x, 3, dtype=dtype), np.full((2, 2), 3), dtype=want)


def test_negative_size_is_rejected():
    with pytest.raises(ValueError, match=re.escape("expected non-negative sizes, got shape (2, -1)")):
        tp.zeros(2, -1)


TOO_BIG = re.escape(
    "cannot allocate 18446744073709551616 bytes for a tensor of shape (4611686018427387904,) and "
    "tensorplay.float32: no device can address that many; ask for fewer elements"
)
NOT_FLOAT = re.escape(
    "only floating point tensors can require gradients, got tensorplay.int64; "
    "make it floating point first (dtype=tp.float32, or .float())"
)


def test_sizes_no_device_can_hold_are_sentences():
    with pytest.raises(ValueError, match=f"^{TOO_BIG}$"):
        tp.empty(1 << 62)
    with pytest.raises(ValueError, match="^cannot allocate 9223372036854775808 bytes"):
        tp.zeros(1 << 30, 1 << 30, dtype=tp.float64)  # one byte past what a 64-bit size holds
    for make in (lambda: tp.empty(1 << 40), lambda: tp.ones(1 << 40, dtype=tp.int64), lambda: tp.rand(1 << 58)):
        with pytest.raises(tp.cuda.CudaError, match=r"^out of memory: could not allocate \d+ bytes \(") as e:
            make()
        assert e.value.code == "CUDA_ERROR_OUT_OF_MEMORY"
    assert tp.ones(3).tolist() == [1.0, 1.0, 1.0]  # and the device still works


FACTORIES = {
    "tensor": lambda **kw: tp.tensor([1.0, 2.0], **kw),
    "empty": lambda **kw: tp.empty(2, **kw),
    "zeros": lambda **kw: tp.zeros(2, **kw),
    "ones": lambda **kw: tp.ones((2,), **kw),
    "full": lambda **kw: tp.full((2,), 1.5, **kw),
    "arange": lambda **kw: tp.arange(0.0, 2.0, **kw),
    "rand": lambda **kw: tp.rand(2, **kw),
    "randn": lambda **kw: tp.randn(2, **kw),
    "empty_like": lambda **kw: tp.empty_like(tp.zeros(2), **kw),
    "zeros_like": lambda **kw: tp.zeros_like(tp.zeros(2), **kw),
    "ones_like": lambda **kw: tp.ones_like(tp.zeros(2), **kw),
    "full_like": lambda **kw: tp.full_like(tp.zeros(2), 1.5, **kw),
}


@pytest.mark.parametrize("name", FACTORIES)
def test_factories_take_requires_grad(name):
    make = FACTORIES[name]
    x = make(requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.grad is None
    (x * x).sum().backward()
    assert x.grad is not None and x.grad.shape == (2,)
    assert not make().requires_grad and not make(requires_grad=False).requires_grad
    if name in ("rand", "randn"):
        return  # random draws refuse integer dtypes whether or not they require grad
    with pytest.raises(TypeError, match=f"^{NOT_FLOAT}$"):
        make(dtype=tp.int64, requires_grad=True)


def test_integer_data_cannot_require_grad():
    with pytest.raises(TypeError, match="^only floating point tensors can require gradients, got tensorplay.int64"):
        tp.tensor([1, 2], requires_grad=True)
    with pytest.raises(TypeError, match="^only floating point tensors can require gradients, got tensorplay.int64"):
        tp.arange(3, requires_grad=True)
    with pytest.raises(TypeError, match="^only floating point tensors can require gradients, got tensorplay.bool"):
        tp.full((2,), True, requires_grad=True)


# -- dtypes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype, itemsize, floating",
    [
        (tp.float32, 4, True),
        (tp.float64, 8, True),
        (tp.float16, 2, True),
        (tp.int32, 4, False),
        (tp.int64, 8, False),
        (tp.bool, 1, False),
    ],
    ids=str,
)
def test_dtype_attributes(dtype, itemsize, floating):
    assert dtype.itemsize == itemsize and dtype.is_floating_point == floating
    assert repr(dtype) == f"tensorplay.{dtype.name}"
    x = tp.zeros(3, dtype=dtype)
    assert x.element_size() == itemsize and x.is_floating_point == floating
    assert x.numpy().dtype == np.dtype(dtype.name if dtype is not tp.bool else np.bool_)


# -- layout ----------------------------------------------------------------------------


def test_shape_strides_and_offset():
    x = tp.arange(24).view(2, 3, 4)
    assert x.shape == x.size() == (2, 3, 4) and x.size(1) == 3 and x.size(-1) == 4
    assert x.ndim == x.dim() == 3 and x.numel() == 24 and len(x) == 2
    assert x.stride() == (12, 4, 1) and x.stride(0) == 12
    assert x.storage_offset() == 0 and x.is_contiguous()
    assert x.device == "cuda" and str(x.device) == "cuda:0" and x.is_cuda

    y = x[1, 1:, ::2]
    assert y.shape == (2, 2) and y.stride() == (4, 2)
    assert y.storage_offset() == 16 and not y.is_contiguous()
    assert y.data_ptr() == x.data_ptr() + 16 * 8

    z = x.transpose(0, 2)
    assert z.shape == (4, 3, 2) and z.stride() == (1, 4, 12) and not z.is_contiguous()
    assert x[:, :1].is_contiguous() is False and x[:1].is_contiguous()
    assert tp.zeros(0, 3).stride() == (3, 1) and tp.zeros(()).stride() == ()


def test_size_one_dimensions_do_not_break_contiguity():
    x = tp.zeros(3, 1, 4)
    assert x.transpose(0, 1).is_contiguous()
    assert x.unsqueeze(0).is_contiguous() and x.unsqueeze(-1).is_contiguous()


# -- indexing ----------------------------------------------------------------------------

INDICES = [
    1,
    -1,
    (1, 2),
    (-2, -3, -1),
    (slice(None), 1),
    slice(1, None),
    slice(None, None, 2),
    (slice(None), slice(1, 4, 2)),
    (slice(None), slice(None), slice(0, 5, 3)),
    (slice(-3, -1), slice(None, -1)),
    slice(5, 10),
    (slice(None), slice(3, 1)),
    (Ellipsis, 1),
    (1, Ellipsis),
    (Ellipsis, slice(1, 3), 4),
    Ellipsis,
    (),
    None,
    (None, 1, None),
    (1, None, Ellipsis, slice(0, 5, 3)),
    (slice(None), None, -1),
    (np.int64(2), 0),
]


@pytest.mark.parametrize("index", INDICES, ids=repr)
def test_basic_indexing_matches_numpy(index):
    x, a = random_tensor((3, 4, 5), tp.float32)
    v = x[index]
    expected = a[index]
    assert v.shape == expected.shape
    assert_close(v, expected)
    if v.numel():  # a view: same storage, the element at its start
        offset = (v.data_ptr() - x.data_ptr()) // 4
        assert 0 <= offset < a.size and a.flat[offset] == expected.flat[0]


def test_indexing_a_0d_tensor():
    x = tp.tensor(2.5)
    assert x[()].shape == () and x[...].item() == 2.5 and x[None].shape == (1,)


def test_writes_through_views():
    x, a = random_tensor((3, 4), tp.int64, seed=2)
    x[1:, ::2] = 5
    a[1:, ::2] = 5
    x[0] = tp.tensor([9, 8, 7, 6])
    a[0] = [9, 8, 7, 6]
    x[:, -1] = tp.tensor([-1, -2, -3])  # non-contiguous destination
    a[:, -1] = [-1, -2, -3]
    x[2, 1] = 11
    a[2, 1] = 11
    assert_close(x, a)


def test_setitem_casts_and_broadcasts():
    x, a = random_tensor((3, 4), tp.float32, seed=3)
    x[1:] = tp.tensor([1, 2, 3, 4])  # int64 row broadcast over two float32 rows
    a[1:] = [1, 2, 3, 4]
    x[0, ::2] = [0.5, 1.5]  # host data
    a[0, ::2] = [0.5, 1.5]
    x[..., 1] = np.array(7.0)
    a[..., 1] = 7.0
    x[0, 3] = tp.tensor(-2.5, dtype=tp.float64)
    a[0, 3] = -2.5
    assert_close(x, a)


def test_inplace_op_on_a_view_changes_the_base():
    x, a = random_tensor((4, 5), tp.float32, seed=4)
    v = x[1:3, ::2]
    v.add_(10)
    a[1:3, ::2] += 10
    v.mul_(tp.tensor([1.0, 2.0, 3.0]))
    a[1:3, ::2] *= [1.0, 2.0, 3.0]
    x.t()[0] += 1  # a column of x through a transposed view
    a[:, 0] += 1
    assert_close(x, a)
    assert_close(v, a[1:3, ::2])


def test_fill_zero_and_copy_on_views():
    x, a = random_tensor((4, 6), tp.float64, seed=5)
    x[::2, 1::2].fill_(3.5)
    a[::2, 1::2] = 3.5
    x[1].zero_()
    a[1] = 0
    x[:, 0].zero_()
    a[:, 0] = 0
    src, host = random_tensor((2, 3), tp.float16, seed=6)
    x[2:, 3:].copy_(src)
    a[2:, 3:] = host
    assert_close(x, a)
    x.fill_(tp.tensor([2.0]))
    assert_close(x, np.full((4, 6), 2.0))


def test_bool_setitem_from_floats():
    x = tp.zeros(4, dtype=tp.bool)
    x[1:] = tp.tensor([0.5, 0.0, -2.0])
    assert x.tolist() == [False, True, False, True]


# -- views and copies -----------------------------------------------------------------


def test_view_and_reshape():
    x, a = random_tensor((2, 3, 4), tp.float32, seed=7)
    for shape in [(6, 4), (-1,), (4, -1), (2, 12), (24, 1), (1, 2, 1, 12), ((3, 8),), ([3, -1],)]:
        want = a.reshape(shape[0] if isinstance(shape[0], (tuple, list)) else shape)
        v = x.view(*shape)
        assert v.data_ptr() == x.data_ptr()
        assert_close(v, want)
        assert_close(x.reshape(*shape), want)
    assert_close(x.flatten(), a.reshape(-1))
    assert x.flatten().data_ptr() == x.data_ptr()


def test_view_of_non_contiguous_tensor():
    x, a = random_tensor((4, 6), tp.float32, seed=8)
    v = x[:, ::2].view(2, 2, 3)  # splitting a strided dimension is fine
    assert_close(v, a[:, ::2].reshape(2, 2, 3))
    assert v.data_ptr() == x.data_ptr()
    t = x.t()
    r = t.reshape(24)  # needs a copy
    assert_close(r, a.T.reshape(24))
    assert r.is_contiguous()
    r.fill_(0.0)
    assert_close(x, a)  # the copy does not alias x
    assert_close(t.reshape(6, 2, 2), a.T.reshape(6, 2, 2))
    assert_close(t.flatten(), a.T.flatten())


def test_view_and_reshape_of_empty_and_0d_tensors():
    e = tp.zeros(0, 3)
    assert e.view(3, 0).shape == (3, 0)
    assert e.reshape(-1).shape == (0,) and e.flatten().shape == (0,)
    assert e.view(0, 1, 3).shape == (0, 1, 3)
    s = tp.tensor(4.0)
    assert s.view(1, 1).shape == (1, 1) and s.reshape(-1).shape == (1,) and s.flatten().tolist() == [4.0]
    assert tp.tensor([4.0]).view(()).item() == 4.0


def test_permute_transpose_t_T():
    x, a = random_tensor((2, 3, 4), tp.int32, seed=9)
    assert_close(x.permute(2, 0, 1), a.transpose(2, 0, 1))
    assert_close(x.permute((1, -1, 0)), a.transpose(1, 2, 0))
    assert_close(x.transpose(0, -1), a.swapaxes(0, 2))
    assert_close(x.T, a.T)
    m, b = random_tensor((3, 5), tp.float32, seed=10)
    assert_close(m.t(), b.T)
    assert_close(m.T, b.T)
    assert_close(m.t().t(), b)
    assert m.t().data_ptr() == m.data_ptr()
    v = tp.tensor([1.0, 2.0])
    assert v.t() is v


def test_unsqueeze_squeeze():
    x, a = random_tensor((3, 4), tp.float32, seed=11)
    for dim in (0, 1, 2, -1, -3):
        assert_close(x.unsqueeze(dim), np.expand_dims(a, dim))
    y = x.unsqueeze(0).unsqueeze(-1)  # (1, 3, 4, 1)
    assert_close(y.squeeze(), a)
    assert_close(y.squeeze(0), a[..., None])
    assert_close(y.squeeze(-1), a[None])
    assert_close(y.squeeze(1), a[None, ..., None])  # size 3: unchanged
    assert_close(x[:, ::2].unsqueeze(1), a[:, None, ::2])
    assert tp.tensor(1.0).unsqueeze(0).shape == (1,)


def test_narrow():
    x, a = random_tensor((4, 6), tp.float64, seed=12)
    assert_close(x.narrow(0, 1, 2), a[1:3])
    assert_close(x.narrow(1, -4, 3), a[:, 2:5])
    assert_close(x.narrow(-1, 0, 0), a[:, :0])
    with pytest.raises(IndexError, match=re.escape("narrow(1, 4, 3) is out of range for size 6")):
        x.narrow(1, 4, 3)


def test_expand():
    x, a = random_tensor((3, 1), tp.float32, seed=13)
    e = x.expand(2, 3, 4)
    assert e.stride() == (0, 1, 0)
    assert_close(e, np.broadcast_to(a, (2, 3, 4)))
    assert_close(x.expand(-1, 5), np.broadcast_to(a, (3, 5)))
    assert_close(x.expand((3, 2)), np.broadcast_to(a, (3, 2)))
    assert_close(x.expand_as(tp.zeros(3, 4)), np.broadcast_to(a, (3, 4)))
    assert_close(e.contiguous(), np.broadcast_to(a, (2, 3, 4)))
    with pytest.raises(ValueError, match=re.escape("cannot broadcast shape (3, 1) to (2, 4)")):
        x.expand(2, 4)


def test_contiguous_and_clone():
    x, a = random_tensor((3, 4), tp.float32, seed=14)
    assert x.contiguous() is x
    t = x.t()
    c = t.contiguous()
    assert c.is_contiguous() and c.data_ptr() != x.data_ptr()
    assert_close(c, a.T)
    y = x.clone()
    assert y.data_ptr() != x.data_ptr() and y.dtype == x.dtype
    y.fill_(1.0)
    assert_close(x, a)
    z = x[:, 1::2].clone()
    assert z.is_contiguous() and z.stride() == (2, 1)
    assert_close(z, a[:, 1::2])


# -- host conversions ---------------------------------------------------------------------


def test_numpy_returns_a_copy():
    x, a = random_tensor((2, 3), tp.float32, seed=15)
    h = x.numpy()
    assert isinstance(h, np.ndarray) and h.dtype == np.float32 and h.flags.c_contiguous
    h[:] = 0
    assert_close(x, a)
    np.testing.assert_array_equal(np.asarray(x), a)
    np.testing.assert_array_equal(x.t().numpy(), a.T)


def test_item_tolist_and_python_conversions():
    assert tp.tensor(2.5).item() == 2.5 and isinstance(tp.tensor(2.5).item(), float)
    assert tp.tensor([[7]]).item() == 7 and isinstance(tp.tensor([[7]]).item(), int)
    assert tp.tensor(True).item() is True
    assert tp.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert tp.tensor([1.5, 2.0]).tolist() == [1.5, 2.0]
    assert tp.tensor(3.0).tolist() == 3.0
    assert float(tp.tensor([2.5])) == 2.5 and int(tp.tensor(3.75)) == 3 and int(tp.tensor(-3.75)) == -3
    assert bool(tp.tensor([1.5])) is True and bool(tp.tensor(0)) is False
    assert list(range(tp.tensor(3))) == [0, 1, 2]
    assert [v.item() for v in tp.tensor([4, 5])] == [4, 5]


def test_conversion_errors():
    with pytest.raises(ValueError, match=re.escape("only one-element tensors can be converted to Python numbers")):
        tp.tensor([1.0, 2.0]).item()
    with pytest.raises(ValueError, match="the truth value of a tensor with 2 elements is ambiguous"):
        bool(tp.tensor([1, 2]))
    with pytest.raises(TypeError, match="only one-element integer tensors can be used as an index"):
        range(tp.tensor(2.0))
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(tp.tensor(1))


CASTS = [(s, d) for s in ALL_DTYPES for d in ALL_DTYPES if s is not d]


@pytest.mark.parametrize("src, dst", CASTS, ids=lambda d: str(d).split(".")[-1])
def test_to_dtype(src, dst):
    host = random_array((2, 5), src, seed=16)
    if src.is_floating_point:
        host[0, 0] = 0  # float -> bool must see a zero too
        host[1, 0] = 2.75  # truncation towards zero for float -> int
        host[1, 1] = -2.75
    x = tp.tensor(host)[:, 1:]  # non-contiguous source
    y = x.to(dst)
    assert y.dtype == dst and y.is_contiguous()
    want = host[:, 1:] != 0 if dst is tp.bool else host[:, 1:].astype(dst.np)
    assert_close(y, want, rtol=0, atol=0)


def test_to_same_dtype_and_shorthands():
    x = tp.tensor([1.5, -2.5])
    assert x.to(tp.float32) is x and x.to("float32") is x
    y = x.to(tp.float32, copy=True)
    assert y is not x and y.data_ptr() != x.data_ptr()
    assert x.to("cuda") is x
    for method, dtype in [("float", tp.float32), ("double", tp.float64), ("half", tp.float16),
                          ("int", tp.int32), ("long", tp.int64), ("bool", tp.bool)]:  # fmt: skip
        assert getattr(x, method)().dtype == dtype
    assert x.type(tp.float64).dtype == tp.float64
    assert_close(x.half(), [1.5, -2.5], dtype=tp.float16)
    assert_close(x.int(), [1, -2], dtype=tp.int32)


def test_float16_rounding():
    values = [0.1, 1e-5, 70000.0, -70000.0, 2049.0, 65504.0]  # overflow gives +-inf
    x = tp.tensor(values, dtype=tp.float64).half()
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(x.numpy(), np.array(values).astype(np.float16))


def test_repr():
    assert repr(tp.tensor([[1.0, 2.0], [3.0, 4.5]])) == "tensor([[1. , 2. ],\n        [3. , 4.5]])"
    assert repr(tp.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(tp.tensor([True, False])) == "tensor([ True, False])"
    assert repr(tp.tensor(2.5)) == "tensor(2.5)"
    assert repr(tp.tensor([1.0], dtype=tp.float64)) == "tensor([1.], dtype=tensorplay.float64)"
    assert repr(tp.tensor([3], dtype=tp.int32)) == "tensor([3], dtype=tensorplay.int32)"
    assert repr(tp.zeros(0)) == "tensor([])"
    assert repr(tp.zeros(0, 2)) == "tensor([], size=(0, 2))"
    assert repr(tp.zeros(2, 0, dtype=tp.int32)) == "tensor([], size=(2, 0), dtype=tensorplay.int32)"
    assert str(tp.tensor([1.5])) == repr(tp.tensor([1.5]))


# -- errors ----------------------------------------------------------------------------


def test_bad_view_and_reshape():
    x = tp.zeros(2, 3)
    with pytest.raises(ValueError, match=re.escape("shape (4,) is invalid for a tensor of 6 elements")):
        x.view(4)
    with pytest.raises(ValueError, match=re.escape("shape (4, -1) is invalid for a tensor of 6 elements")):
        x.reshape(4, -1)
    with pytest.raises(ValueError, match="only one dimension can be -1"):
        x.view(-1, -1)
    message = "view of shape (6,) is not compatible with the tensor's shape (3, 2) and strides (1, 3)"
    with pytest.raises(ValueError, match=re.escape(message)):
        x.t().view(6)
    with pytest.raises(TypeError, match="expected a shape of integers"):
        x.view(2.0, 3)


def test_bad_dims_for_views():
    x = tp.zeros(2, 3)
    with pytest.raises(IndexError, match="dimension 2 is out of range for a tensor of 2 dimensions"):
        x.transpose(0, 2)
    with pytest.raises(ValueError, match=re.escape("expected a permutation of 2 dimensions, got (0, 0)")):
        x.permute(0, 0)
    with pytest.raises(ValueError, match="t\\(\\) expects a tensor of at most 2 dimensions, got 3"):
        tp.zeros(1, 2, 3).t()


@pytest.mark.parametrize(
    "index, exc, message",
    [
        (3, IndexError, "index 3 is out of range for dimension 0 of size 3"),
        ((0, -5), IndexError, "index -5 is out of range for dimension 1 of size 4"),
        ((0, 0, 0), IndexError, "too many indices for a tensor of 2 dimensions"),
        ((Ellipsis, 0, Ellipsis), IndexError, "an index can only have a single ellipsis"),
        (slice(None, None, 0), ValueError, "slice step cannot be zero"),
        ([0, 5], IndexError, "index 5 is out of range for dimension 0 of size 3"),
        ((slice(None), [0.5]), IndexError, "arrays used as indices must be of integer \\(or boolean\\) type"),
        ("a", TypeError, "expected an integer, slice, None, ..., or an integer or boolean array .*, got str"),
        (1.0, TypeError, "expected an integer, slice, None, ..., or an integer or boolean array .*, got float"),
    ],
    ids=repr,
)
def test_bad_indices(index, exc, message):
    x = tp.zeros(3, 4)
    with pytest.raises(exc, match=message):
        x[index]


def test_float_tensor_index_is_rejected():
    x = tp.zeros(3, 4)
    with pytest.raises(IndexError, match="arrays used as indices must be of integer .* type, got float32"):
        x[tp.tensor([0.0, 1.0])]
    with pytest.raises(IndexError, match="boolean index did not match the indexed tensor along dimension 0"):
        x[tp.tensor([True, False])] = 1.0


def test_unsupported_dtypes_and_foreign_objects():
    supported = (
        "bool, uint8, int8, int16, int32, int64, uint16, uint32, uint64, float16, bfloat16, float32, float64, "
        "complex64, complex128"
    )
    with pytest.raises(TypeError, match=re.escape(f"expected one of {supported}, got dtype float128")):
        tp.tensor(np.zeros(2, np.longdouble))
    with pytest.raises(TypeError, match=re.escape(f"expected one of {supported}, got dtype <U1")):
        tp.from_numpy(np.zeros(2, "U1"))
    with pytest.raises(TypeError, match="expected numbers, nested lists of numbers or an array, got object"):
        tp.tensor(object())
    with pytest.raises(TypeError, match="expected numbers, nested lists of numbers or an array, got list"):
        tp.tensor(["a"])
    with pytest.raises(TypeError, match="expected numbers, nested lists of numbers or an array, got str"):
        tp.tensor("abc")
    with pytest.raises(TypeError, match="expected a numpy.ndarray, got list"):
        tp.from_numpy([1.0])
    with pytest.raises(TypeError, match="tensor\\(\\) got a Tensor; use .clone\\(\\)"):
        tp.tensor(tp.zeros(2))
    with pytest.raises(TypeError, match="expected a dtype \\(one of .*\\), got 'float128'"):
        tp.zeros(2, dtype="float128")
    with pytest.raises(TypeError, match="create tensors with tp.tensor"):
        tp.Tensor([1.0])


def test_setitem_shape_mismatch():
    x = tp.zeros(2, 3)
    with pytest.raises(ValueError, match=re.escape("cannot copy host data of shape (2,) into a tensor of shape (3,)")):
        x[0] = [1.0, 2.0]
    with pytest.raises(ValueError, match=re.escape("cannot broadcast shape (2,) to (3,)")):
        x[0] = tp.tensor([1.0, 2.0])
