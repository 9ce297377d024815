"""Indexing against NumPy: basic indexing (negative steps, None, Ellipsis) as
views, integer-array and boolean-mask indexing, assignment through all of
them, and the indexing functions (take, take_along_axis, gather, scatter,
index_select, index_add, masked_fill); gradients against finite differences;
capture and replay with new index values; the sentences bad indices get."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close
from helpers.gradcheck import check_gradients

import tensorplay as tp

RNG = np.random.default_rng(11)
X = np.arange(60, dtype=np.float64).reshape(3, 4, 5)  # exact values: every element tells where it came from
Y = np.arange(10, dtype=np.float64)
G = RNG.uniform(-2, 2, (3, 4))  # for finite differences: an evaluation per element and sign


def t(a):
    return tp.tensor(np.asarray(a, dtype=np.float64))


def ti(a, dtype=np.int64):
    return tp.tensor(np.asarray(a, dtype=dtype))


def on_device(index):
    """``index`` with every list or NumPy array in it made a device tensor."""
    items = index if isinstance(index, tuple) else (index,)
    out = tuple(tp.tensor(np.asarray(i)) if isinstance(i, (list, np.ndarray)) else i for i in items)
    return out if isinstance(index, tuple) else out[0]


# -- basic indexing: views with negative steps, None and Ellipsis ---------------------------

BASIC_3D = [
    np.s_[::-1], np.s_[:, ::-1], np.s_[..., ::-2], np.s_[2:0:-1, 1, ::-3], np.s_[None, ::-1, None, 1:],
    np.s_[..., None], np.s_[-1, ..., -2], np.s_[1:-1:-1], np.s_[::-1, ::-1, ::-1], np.s_[:, 3:-5:-1],
    np.s_[()], np.s_[...], np.s_[1, None, ::-2, 3], np.s_[::-2, None, ..., ::-1],
]  # fmt: skip
BASIC_1D = [np.s_[::-1], np.s_[5:1:-2], np.s_[-1:-11:-1], np.s_[8::-3], np.s_[:2:-1], np.s_[100:0:-1], np.s_[-100::-1]]


@pytest.mark.parametrize("index", BASIC_3D, ids=repr)
def test_basic_indexing_of_3d_tensors_gives_numpys_views(index):
    x = t(X)
    view = x[index]
    assert_close(view, X[index])
    if view.numel():  # a view: a write through it lands in x, where NumPy's view writes
        view.fill_(-1.0)
        want = X.copy()
        want[index] = -1.0
        assert_close(x, want)


@pytest.mark.parametrize("index", BASIC_1D, ids=repr)
def test_negative_steps_on_1d_tensors(index):
    y = t(Y)
    assert_close(y[index], Y[index])
    assert y[index].shape == Y[index].shape


def test_negative_step_views_share_memory_and_report_negative_strides():
    x = t(X)
    r = x[::-1, :, ::-2]
    assert r.stride() == (-20, 5, -2)
    assert r.storage_offset() == 44
    assert not r.is_contiguous()
    assert r[0, 0, 0].item() == 44.0
    x[2, 0, 4] = 100.0
    assert r[0, 0, 0].item() == 100.0


def test_slice_step_zero_is_refused():
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        t(Y)[::0]


def test_zero_dimensional_tensors_take_an_empty_tuple_and_ellipsis():
    s = tp.tensor(3.5)
    assert s[()].shape == () and s[()].item() == 3.5
    assert s[...].shape == ()
    assert s[None].shape == (1,)


# -- negative strides through every kernel path -------------------------------------------------


def test_elementwise_ops_read_and_write_negative_strides():
    x = t(X)
    r, ref = x[::-1, :, ::-2], X[::-1, :, ::-2]
    assert_close(r * 2 + r, ref * 2 + ref)
    assert_close(tp.exp(r / 60), np.exp(ref / 60))
    assert_close(r + x[0, ::-1, ::-2], ref + X[0, ::-1, ::-2])  # broadcast, both reversed
    assert_close(r > 30, ref > 30)
    assert_close(tp.where(r > 30, r, -r), np.where(ref > 30, ref, -ref))
    x[::-1, 1] += 1.0  # in place through a reversed view
    want = X.copy()
    want[::-1, 1] += 1.0
    assert_close(x, want)


def test_every_elementwise_layout_and_long_reductions_over_negative_strides():
    rows = np.arange(120, dtype=np.float32).reshape(3, 40)
    x = tp.tensor(rows)
    assert np.array_equal((x[:, ::-1] + 1).numpy(), rows[:, ::-1] + 1)  # rows of 40: the rows layout
    square = np.arange(4096, dtype=np.float32).reshape(64, 64)
    y = tp.tensor(square)
    assert np.array_equal((-y.t()[::-1]).numpy(), -square.T[::-1])  # column-major and reversed
    assert_close(y[::-1].sum(1), square[::-1].sum(1))
    assert_close(tp.tensor(np.arange(5000.0))[::-1].sum(), np.arange(5000.0).sum())  # chunks, then rows


def test_in_place_ops_on_overlapping_reversed_views_read_before_writing():
    y, want = t(Y), Y.copy()
    y[::-1] += y  # NumPy reads all of y before writing
    want[::-1] += want.copy()
    assert_close(y, want)
    y, want = t(Y), Y.copy()
    y[:] = y[::-1]
    want[:] = want[::-1].copy()
    assert_close(y, want)


def test_reductions_over_negative_strides():
    x = t(X)
    r, ref = x[::-1, ::-1, ::-2], X[::-1, ::-1, ::-2]
    assert_close(r.sum(), ref.sum())
    assert_close(r.sum(0), ref.sum(0))
    assert_close(r.sum((1, 2)), ref.sum((1, 2)))
    assert_close(r.mean(-1), ref.mean(-1))
    assert_close(r.amax(1), ref.max(1))
    assert_close(r.argmax(2), ref.argmax(2))
    assert_close(r.min(0).values, ref.min(0))


def test_copies_readback_and_reshapes_of_negative_strides():
    x = t(X)
    r, ref = x[:, ::-1, ::-1], X[:, ::-1, ::-1]
    assert np.array_equal(r.numpy(), ref) and r.tolist() == ref.tolist()
    assert_close(r.clone(), ref)
    assert r.contiguous().is_contiguous()
    assert_close(r.contiguous(), ref)
    assert_close(r.to(tp.float32), ref, dtype=tp.float32)
    assert_close(r.to(tp.float16), ref, dtype=tp.float16)
    assert_close(r.to(tp.bfloat16).to(tp.float64), ref.astype(np.float32))
    assert_close(r.reshape(3, 20), ref.reshape(3, 20))
    reversed_row = t(Y)[::-1]
    as_matrix = reversed_row.view(2, 5)  # a reversed contiguous run: still a view
    assert as_matrix.stride() == (-5, -1)
    assert_close(as_matrix, Y[::-1].reshape(2, 5))
    dst = tp.zeros(3, 4, 5, dtype=tp.float64)
    dst[::-1, ::-1].copy_(x)
    assert_close(dst, X[::-1, ::-1])
    y = t(Y)
    y.copy_(y[::-1])  # overlapping copy: all of the source is read first
    assert_close(y, Y[::-1])


def test_matmul_of_negative_strides():
    m = RNG.uniform(-1, 1, (4, 4))
    a = t(m)
    assert_close(a[::-1] @ a[:, ::-1], m[::-1] @ m[:, ::-1])
    assert_close(a[::-1, ::-1] @ t(m[0])[::-1], m[::-1, ::-1] @ m[0][::-1])


def test_negative_strides_leave_through_dlpack_and_the_cuda_array_interface():
    x = t(X)
    r = x[::-1, 1, ::-2]
    back = tp.from_dlpack(r)
    assert back.stride() == r.stride() and back.data_ptr() == r.data_ptr()
    assert_close(back, X[::-1, 1, ::-2])
    cai = r.__cuda_array_interface__
    assert cai["strides"] == (-160, -16) and cai["data"][0] == r.data_ptr()


def test_compiled_functions_take_negative_strides():
    f = tp.compile(lambda a: (a * 2 + 1).sum(0))
    x = t(X)
    for _ in range(3):  # warm-up, capture, replay
        assert_close(f(x[::-1, :, ::-1]), (X[::-1, :, ::-1] * 2 + 1).sum(0))


def test_compiled_functions_return_reversed_views_and_index_with_host_lists():
    x = t(X)
    reversed_view = tp.compile(lambda a: a[::-1, ::-1])
    picked = tp.compile(lambda a: a[:, [3, 0]] * 2)
    for _ in range(3):
        assert_close(reversed_view(x), X[::-1, ::-1])
        assert_close(picked(x), X[:, [3, 0]] * 2)


def test_custom_kernels_read_negative_strides():
    @tp.jit
    def first_column(a, out):
        i = tp.cuda.grid(1)
        if i < a.shape[0]:
            out[i] = a[i, 0]

    out = tp.zeros(3, dtype=tp.float64)
    first_column[1, 32](t(X)[::-1, 2, ::-2], out)
    assert_close(out, X[::-1, 2, ::-2][:, 0])


# -- assignment through basic indexing -------------------------------------------------------------

BASIC_SET = [
    (np.s_[::-1], RNG.uniform(size=(4, 5))),
    (np.s_[:, ::-2], RNG.uniform(size=(3, 2, 5))),
    (np.s_[..., ::-1], RNG.uniform(size=(5,))),
    (np.s_[2:0:-1, None, 1], RNG.uniform(size=(1, 5))),
    (np.s_[None, -1, ..., ::-3], 7.0),
    (np.s_[1, ::-1], np.array(2.5)),
    (np.s_[...], RNG.uniform(size=(4, 1))),
]


@pytest.mark.parametrize("index, value", BASIC_SET, ids=lambda v: repr(v) if isinstance(v, tuple) else "")
@pytest.mark.parametrize("kind", ["tensor", "host"])
def test_basic_assignment_broadcasts_values_as_numpy(index, value, kind):
    x, want = t(X), X.copy()
    want[index] = value
    x[index] = t(value) if kind == "tensor" and not isinstance(value, float) else value
    assert_close(x, want)


# -- integer-array indexing --------------------------------------------------------------------

ADVANCED = [
    [0, 2], [2, -1, 0, 2], [[0, 1], [2, 2]], np.s_[:, [3, 0]], np.s_[:, :, [-1, 1]],
    ([0, 2], [1, 3]), ([0, 2], slice(None), [1, 4]), np.s_[:, [0, 3], [1, 4]], (1, slice(None), [0, 2]),
    (slice(None), 1, [0, 2]), ([[0], [2]], [1, 3]), (Ellipsis, [4, 0]), (None, [0, 1]),
    ([0, 1], None, [0, 1]), (slice(None, None, -1), [0, 0, 3]), [], ([0, 2], Ellipsis, [1, 4]),
    (slice(None), [[1, 2], [3, 0]], slice(None, None, -2)), ([1], [2], [3]), (0, [1, 2], 3),
]  # fmt: skip


def _numpy_index(index):
    items = index if isinstance(index, tuple) else (index,)
    out = tuple(np.asarray(i, dtype=np.int64) if isinstance(i, list) else i for i in items)
    return out if isinstance(index, tuple) else out[0]


@pytest.mark.parametrize("index", ADVANCED, ids=repr)
@pytest.mark.parametrize("kind", ["list", "numpy", "tensor"])
def test_integer_array_indexing_follows_numpy(index, kind):
    want = X[_numpy_index(index)]
    if kind == "numpy":
        index = _numpy_index(index)
    elif kind == "tensor":
        index = on_device(_numpy_index(index))
    got = t(X)[index]
    assert got.shape == want.shape
    assert_close(got, want)


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, np.int16, np.uint32])
def test_index_tensors_of_every_integer_type(dtype):
    index = np.array([2, 0, 1, 1], dtype=dtype)
    assert_close(t(X)[:, ti(index, dtype)], X[:, index])
    if np.dtype(dtype).kind == "i":
        index = np.array([-1, 0, -3], dtype=dtype)
        assert_close(t(X)[ti(index, dtype)], X[index])


@pytest.mark.parametrize("dtype", [tp.float32, tp.int32, tp.bool, tp.bfloat16, tp.float16, tp.uint8])
def test_integer_indexing_moves_every_dtype_exactly(dtype):
    data = RNG.uniform(-50, 50, (4, 3)).astype(np.float32)
    x = tp.tensor(data).to(dtype)
    host = x.numpy()
    index = [3, 0, 3]
    assert np.array_equal(x[index].numpy(), host[index])
    assert np.array_equal(x[:, ti([2, 0])].numpy(), host[:, [2, 0]])


def test_advanced_indexing_of_non_contiguous_and_reversed_views():
    x = t(X)
    v, ref = x.permute(2, 0, 1)[:, ::-1], X.transpose(2, 0, 1)[:, ::-1]
    assert_close(v[[4, 0], :, [1, 3]], ref[[4, 0], :, [1, 3]])
    assert_close(v[:, [2, 0], [1, 3]], ref[:, [2, 0], [1, 3]])
    assert_close(x[::2, :, [1, 3]], X[::2, :, [1, 3]])


def test_out_of_range_host_indices_raise_as_numpy():
    x = t(X)
    with pytest.raises(IndexError, match=r"index 3 is out of range for dimension 0 of size 3"):
        x[[0, 3]]
    with pytest.raises(IndexError, match=r"index -6 is out of range for dimension 2 of size 5"):
        x[:, :, np.array([-6])]


def test_out_of_range_device_indices_are_clamped_on_reads():
    # A kernel cannot raise: reads clamp to the nearest valid index, never outside the tensor
    x = t(X)
    assert_close(x[ti([5, -7, 1])], X[[2, 0, 1]])
    assert_close(tp.take(t(Y), ti([10, -11]), axis=0), Y[[9, 0]])


def test_index_arrays_that_do_not_broadcast_are_refused():
    with pytest.raises(
        IndexError, match=r"shape mismatch: indexing arrays could not be broadcast together with shapes"
    ):
        t(X)[[0, 1], [0, 1, 2]]


@pytest.mark.parametrize(
    "index, message",
    [
        (np.array([0.5]), "arrays used as indices must be of integer \\(or boolean\\) type, got float64"),
        ((0, 0, 0, 0), "too many indices for a tensor of 3 dimensions"),
        ((Ellipsis, 0, Ellipsis), "an index can only have a single ellipsis"),
        ("a", "expected an integer, slice, None, ..., or an integer or boolean array as an index, got str"),
        (1.0, "expected an integer, slice, None, ..., or an integer or boolean array as an index, got float"),
    ],
    ids=repr,
)
def test_bad_indices_get_sentences(index, message):
    with pytest.raises((IndexError, TypeError), match=message):
        t(X)[index]


def test_float_index_tensors_are_refused():
    with pytest.raises(
        IndexError, match="arrays used as indices must be of integer \\(or boolean\\) type, got float32"
    ):
        t(X)[tp.tensor([0.0])]


# -- assignment through integer arrays ------------------------------------------------------

ADVANCED_SET = [
    ([0, 2], -1.0),
    ([0, 2], RNG.uniform(size=(2, 4, 5))),
    (np.s_[:, [3, 0]], RNG.uniform(size=(3, 1, 5))),
    (([0, 2], slice(None), [1, 4]), RNG.uniform(size=(2, 4))),
    ((slice(None), [0, 3], [1, 4]), RNG.uniform(size=(2,))),
    ((1, slice(None), [0, 2]), RNG.uniform(size=(2, 4))),
    ([0, 0, 1, 0], RNG.uniform(size=(4, 4, 5))),  # duplicates: the last write wins, as in NumPy
    (([[0], [2]], [1, 1]), RNG.uniform(size=(2, 2, 5))),
    ((slice(None, None, 2), slice(None), [1, 3]), RNG.uniform(size=(2, 4, 2))),  # a target no view can merge
    ((slice(None, None, -1), [0, 2]), RNG.uniform(size=(3, 2, 5))),
]


@pytest.mark.parametrize("index, value", ADVANCED_SET, ids=lambda v: repr(v) if not isinstance(v, np.ndarray) else "")
@pytest.mark.parametrize("kind", ["list", "tensor"])
def test_integer_array_assignment_follows_numpy(index, value, kind):
    x, want = t(X), X.copy()
    want[_numpy_index(index)] = value
    x[on_device(_numpy_index(index)) if kind == "tensor" else index] = (
        t(value) if isinstance(value, np.ndarray) else value
    )
    assert_close(x, want)


def test_duplicate_indices_from_the_device_keep_the_last_write():
    x, want = t(Y), Y.copy()
    index = np.array([3, 1, 3, 3, 1, 7])
    values = np.arange(6) * 10.0
    want[index] = values
    x[ti(index)] = t(values)
    assert_close(x, want)


def test_complex_tensors_are_indexed_and_accumulated_as_numpy():
    data = np.array([1 + 2j, 3 - 1j, 5j, -2 + 0.5j])
    z = tp.tensor(data)
    assert np.array_equal(z[[2, 0]].numpy(), data[[2, 0]])
    assert np.array_equal(z[::-2].numpy(), data[::-2])
    values = np.array([1j, 1 + 0j, 2j])
    want = data.copy()
    np.add.at(want, [0, 0, 2], values)
    z.index_put_((ti([0, 0, 2]),), tp.tensor(values), accumulate=True)
    np.testing.assert_allclose(z.numpy(), want, rtol=1e-6)


def test_assignment_casts_values_to_the_tensor_dtype():
    x = tp.zeros(5, dtype=tp.int32)
    x[[1, 3]] = t([2.7, -1.2])
    assert x.tolist() == [0, 2, 0, -1, 0]
    b = tp.zeros(4, dtype=tp.bool)
    b[ti([0, 2])] = 1
    assert b.tolist() == [True, False, True, False]


def test_out_of_range_device_indices_are_skipped_on_writes():
    x, want = t(Y), Y.copy()
    x[ti([12, 1, -11])] = -1.0
    want[1] = -1.0
    assert_close(x, want)
    x.index_put_((ti([1, 30]),), t([5.0, 6.0]), accumulate=True)
    want[1] += 5.0
    assert_close(x, want)


@pytest.mark.parametrize("dtype", [tp.float64, tp.float32, tp.int32, tp.int64, tp.float16, tp.bfloat16, tp.int8])
def test_index_put_accumulates_duplicates_as_add_at(dtype):
    base = RNG.integers(-5, 5, (4, 3)).astype(np.float64)
    values = RNG.integers(-3, 3, (6, 3)).astype(np.float64)
    index = np.array([0, 2, 0, 3, 0, 2])
    want = base.copy()
    np.add.at(want, index, values)
    x = t(base).to(dtype)
    out = x.index_put_((ti(index),), t(values).to(dtype), accumulate=True)
    assert out is x
    assert_close(x.to(tp.float64), want)


def test_index_put_with_two_index_arrays_and_its_out_of_place_form():
    base = RNG.uniform(size=(3, 4))
    rows, cols, values = np.array([0, 2, 0]), np.array([1, 3, 1]), np.array([1.0, 2.0, 3.0])
    want = base.copy()
    np.add.at(want, (rows, cols), values)
    x = t(base)
    got = tp.index_put(x, (ti(rows), ti(cols)), t(values), accumulate=True)
    assert_close(got, want)
    assert_close(x, base)  # untouched
    assert_close(x.index_put((ti(rows), ti(cols)), t(values)), _put(base, (rows, cols), values))


def _put(base, index, values):
    out = base.copy()
    out[index] = values
    return out


# -- boolean masks ---------------------------------------------------------------------------

MASK_1 = np.array([True, False, True])
MASK_2 = RNG.uniform(size=(3, 4)) > 0.5
MASK_3 = RNG.uniform(size=(3, 4, 5)) > 0.7


@pytest.mark.parametrize(
    "index",
    [MASK_1, MASK_2, MASK_3, (MASK_2, slice(1, None)), (slice(None), MASK_2[0]), (MASK_1, [0, 3]),
     (MASK_2, None), (1, MASK_2[1]), np.zeros((3, 4), bool), np.array(True), np.array(False)],
    ids=lambda v: f"{np.shape(v)}" if isinstance(v, np.ndarray) else repr(tuple(np.shape(i) for i in v)),
)  # fmt: skip
@pytest.mark.parametrize("kind", ["numpy", "tensor"])
def test_mask_indexing_follows_numpy(index, kind):
    want = X[index]
    got = t(X)[on_device(index) if kind == "tensor" else index]
    assert got.shape == want.shape
    assert_close(got, want)


def test_mask_made_on_the_device_and_a_python_list_of_bools():
    x = t(X)
    assert_close(x[x > 40], X[X > 40])
    assert_close(x[[True, False, True]], X[[True, False, True]])
    assert_close(x[:, range(3, 0, -1)], X[:, range(3, 0, -1)])


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_, np.complex64, np.float64])
def test_a_whole_mask_takes_the_values_straight_out_of_every_layout(dtype):
    # mask over every dimension: the values compacted straight from x, or through positions across a transpose
    a = (RNG.standard_normal((30, 40)) * 5).astype(dtype)
    keep = RNG.random((30, 40)) < 0.3
    x, mask = tp.tensor(a), tp.tensor(keep)
    np.testing.assert_array_equal(x[mask].numpy(), a[keep])
    np.testing.assert_array_equal(x[2:20][mask[2:20]].numpy(), a[2:20][keep[2:20]])
    np.testing.assert_array_equal(x.t()[mask.t()].numpy(), a.T[keep.T])
    np.testing.assert_array_equal(x[tp.zeros((30, 40), dtype=tp.bool)].numpy(), a[:0].reshape(0))


def test_a_mask_with_a_dimension_of_0_selects_nothing():
    # The standard's rule (NumPy refuses such a mask): a dimension of 0 matches any size
    x, mask = t(X), tp.zeros((3, 0), dtype=tp.bool)
    assert x[mask].shape == (0, 5)
    x[mask] = 1.0
    assert_close(x, X)


def test_a_mask_of_the_wrong_shape_is_refused():
    with pytest.raises(IndexError, match="boolean index did not match the indexed tensor along dimension 0; "
                       "its size is 3 but the boolean index's is 2"):  # fmt: skip
        t(X)[tp.tensor([True, False])]


def test_mask_indexing_is_refused_inside_a_capture_with_the_graph_safe_forms():
    x, mask = t(X), tp.tensor(MASK_3)
    g = tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.CaptureError, match=r"x\[mask\] .* tp\.where\(mask, x, 0\)"):
        with tp.cuda.graph(g):
            x[mask]


def test_the_graph_safe_forms_of_mask_indexing_are_captured():
    x, mask = t(X), tp.tensor(MASK_3)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        first = x[tp.nonzero(mask, size=4, fill_value=0)]
        kept = tp.where(mask, x, 0)
    for m in (MASK_3, RNG.uniform(size=(3, 4, 5)) > 0.5):
        mask.copy_(m)
        g.replay()
        assert_close(first, X[m][:4])
        assert_close(kept, np.where(m, X, 0))


@pytest.mark.parametrize(
    "index, value",
    [(MASK_1, 5.0), (MASK_2, RNG.uniform(size=(5,))), (MASK_3, -2.0), (MASK_1, RNG.uniform(size=(1, 4, 1))),
     (MASK_2, RNG.uniform(size=(int(MASK_2.sum()), 5))), (MASK_3, RNG.uniform(size=(int(MASK_3.sum()),))),
     ((slice(None), MASK_2[0]), RNG.uniform(size=(3, int(MASK_2[0].sum()), 5))),
     ((0, slice(None), MASK_3[0, 0]), 3.0), (np.array(True), RNG.uniform(size=(4, 5)))],
    ids=str,
)  # fmt: skip
@pytest.mark.parametrize("kind", ["numpy", "tensor"])
def test_mask_assignment_follows_numpy(index, value, kind):
    x, want = t(X), X.copy()
    want[index] = value
    x[on_device(index) if kind == "tensor" else index] = t(value) if isinstance(value, np.ndarray) else value
    assert_close(x, want)


def test_mask_assignment_is_captured_and_replayed_with_a_new_mask():
    x, mask = t(X), tp.tensor(MASK_3)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        x[mask] = 0.5
        x[~mask & (x > 50)] = -1.0
    for m in (MASK_3, RNG.uniform(size=(3, 4, 5)) > 0.3):
        x.copy_(X)
        mask.copy_(m)
        g.replay()
        want = X.copy()
        want[m] = 0.5
        want[~m & (want > 50)] = -1.0
        assert_close(x, want)


def test_mask_assignment_of_as_many_values_as_true_elements_is_captured():
    x, mask, values = t(Y), tp.tensor(Y > 4), t(-Y)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        x[mask] = values[:5]
    x.copy_(Y)
    new = (Y % 2) == 0  # five True as well
    mask.copy_(new)
    g.replay()
    want = Y.copy()
    want[new] = -Y[:5]
    assert_close(x, want)


# -- capture and replay ----------------------------------------------------------------------


def test_integer_indexing_is_captured_and_replayed_with_new_indices():
    x, rows, cols = t(X), ti([0, 2]), ti([[1], [3]])
    host_list = [4, 0, 4]
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        picked = x[rows, :, cols]
        listed = x[..., host_list]  # a host list is known at capture: it becomes part of the graph
        masked = x[MASK_1]
        x[rows, 1] = -1.0
    for r, c in (([1, 0], [[2], [0]]), ([2, 2], [[0], [3]])):
        x.copy_(X)
        rows.copy_(np.array(r))
        cols.copy_(np.array(c))
        g.replay()
        want = X.copy()
        assert_close(picked, X[np.array(r), :, np.array(c)])
        assert_close(listed, X[..., host_list])
        assert_close(masked, X[MASK_1])
        want[np.array(r), 1] = -1.0
        assert_close(x, want)


def test_indexing_functions_are_captured_and_replayed_with_new_indices():
    x, idx, idx2 = t(G), ti([2, 0]), ti([[0, 3, 1, 1], [2, 2, 0, 3]])
    ones = t(np.ones((2, 2)))
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        taken = tp.take(x, idx, axis=1)
        along = tp.take_along_axis(x, idx2[:, :3].T, axis=1)
        selected = tp.index_select(x, 0, idx)
        gathered = x.gather(1, idx2)
        added = tp.index_add(x, 0, idx, tp.ones(2, 4, dtype=tp.float64))
        scattered = tp.zeros(3, 4, dtype=tp.float64).scatter_add_(1, idx2[:, :2].T % 4, ones)
    for new, new2 in (([1, 1], [[1, 1, 0, 2], [3, 0, 0, 1]]), ([0, 2], [[3, 2, 1, 0], [0, 1, 2, 3]])):
        idx.copy_(np.array(new))
        idx2.copy_(np.array(new2))
        g.replay()
        i, i2 = np.array(new), np.array(new2)
        assert_close(taken, np.take(G, i, axis=1))
        assert_close(along, np.take_along_axis(G, i2[:, :3].T, axis=1))
        assert_close(selected, G[i])
        assert_close(gathered, np.take_along_axis(G[:2], i2, axis=1))
        want = G.copy()
        np.add.at(want, i, 1.0)
        assert_close(added, want)
        want = np.zeros((3, 4))
        np.add.at(want, (np.arange(2)[:, None], i2[:, :2].T % 4), 1.0)
        assert_close(scattered, want)


# -- the indexing functions -------------------------------------------------------------------


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_take_follows_numpy(axis):
    index = np.array([[2, 0], [-1, 1]])
    assert_close(tp.take(t(X), ti(index), axis=axis), np.take(X, index, axis=axis))
    assert_close(tp.take(t(X), ti([2, 1, 0]), axis=axis), np.take(X, [2, 1, 0], axis=axis))
    assert_close(t(X).take(ti(index)), np.take(X, index))  # PyTorch's method: a flat index


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
def test_take_along_axis_follows_numpy(axis):
    shape = list(X.shape)
    shape[axis] = 6
    index = RNG.integers(-X.shape[axis], X.shape[axis], shape)
    assert_close(tp.take_along_axis(t(X), ti(index), axis=axis), np.take_along_axis(X, index, axis=axis))


def test_take_along_axis_broadcasts_and_takes_pytorch_dim():
    index = np.array([[0, 3, 1]])  # (1, 3) against (3, 4): broadcast along axis 0
    assert_close(tp.take_along_axis(t(G), ti(index), axis=1), np.take_along_axis(G, index, axis=1))
    assert_close(tp.take_along_axis(t(G), ti(index), dim=1), np.take_along_axis(G, index, axis=1))
    order = np.argsort(G, axis=0)
    assert_close(tp.take_along_axis(t(G), ti(order), axis=0), np.sort(G, axis=0))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_gather_reads_a_smaller_index_as_pytorch(dim):
    shape = [2, 3, 4]
    shape[dim] = 5
    index = RNG.integers(0, X.shape[dim], shape)
    narrowed = X[tuple(slice(0, n) if d != dim % 3 else slice(None) for d, n in enumerate(shape))]
    want = np.take_along_axis(narrowed, index, axis=dim)
    assert_close(tp.gather(t(X), dim, ti(index)), want)
    assert_close(t(X).gather(dim, ti(index)), want)


def _scatter_reference(base, dim, index, src, add):
    out = base.copy()
    for pos in np.ndindex(index.shape):
        target = list(pos)
        target[dim] = index[pos]
        if add:
            out[tuple(target)] += src[pos]
        else:
            out[tuple(target)] = src[pos]
    return out


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_and_scatter_add_follow_a_host_loop(dim):
    shape = [2, 3, 3]
    index = RNG.integers(0, X.shape[dim], shape)  # duplicates among them
    src = RNG.uniform(-1, 1, (3, 4, 4))  # larger than the index: its leading block is used
    used = src[:2, :3, :3]
    for add in (False, True):
        want = _scatter_reference(X, dim % 3, index, used, add)
        fn = tp.scatter_add if add else tp.scatter
        assert_close(fn(t(X), dim, ti(index), t(src)), want)
        x = t(X)
        assert (x.scatter_add_ if add else x.scatter_)(dim, ti(index), t(src)) is x
        assert_close(x, want)


def test_scatter_matches_put_along_axis_and_takes_a_number():
    base, index = G.copy(), np.array([[1, 3], [0, 0], [2, 1]])
    values = RNG.uniform(size=(3, 2))
    want = base.copy()
    np.put_along_axis(want, index, values, axis=1)
    assert_close(tp.scatter(t(base), 1, ti(index), t(values)), want)
    want = base.copy()
    np.put_along_axis(want, index, 9.0, axis=1)
    assert_close(tp.scatter(t(base), 1, ti(index), 9.0), want)
    one_hot = tp.zeros(3, 5).scatter_(1, ti([[4], [0], [2]]), 1.0)
    assert one_hot.tolist() == np.eye(5, dtype=np.float32)[[4, 0, 2]].tolist()


def test_index_select_and_index_add_follow_numpy():
    index = np.array([3, 0, 3])
    assert_close(tp.index_select(t(X), 1, ti(index)), X[:, index])
    assert_close(t(X).index_select(-1, ti(index)), X[..., index])
    source = RNG.uniform(size=(3, 3, 5))
    want = X.copy()
    np.add.at(want, (slice(None), index), source * 2)
    assert_close(tp.index_add(t(X), 1, ti(index), t(source), alpha=2), want)
    x = t(X)
    assert x.index_add_(1, ti(index), t(source), alpha=2) is x
    assert_close(x, want)


def test_masked_fill_follows_where():
    mask = MASK_2[:, :, None]  # broadcast over the last dimension
    assert_close(tp.masked_fill(t(X), tp.tensor(mask), -3.0), np.where(mask, -3.0, X))
    x = t(X)
    assert x.masked_fill_(tp.tensor(mask), tp.tensor(2.0, dtype=tp.float64)) is x
    assert_close(x, np.where(mask, 2.0, X))
    assert_close(t(X).masked_fill(tp.tensor(MASK_3), 0.0), np.where(MASK_3, 0.0, X))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: tp.gather(t(G), 1, ti([0, 1])), "gather\\(\\) expects an index of 2 dimensions \\(as the input\\), "
         "got shape \\(2,\\)"),
        (lambda: tp.gather(t(G), 1, ti([[0, 1]] * 4)), "gather\\(\\) expects an index no larger than the input "
         "outside dimension 1, got shape \\(4, 2\\) for an input of shape \\(3, 4\\)"),
        (lambda: tp.gather(t(G), 1, t([[0.0]])), "gather\\(\\) expects an integer index tensor, got float64"),
        (lambda: tp.index_select(t(G), 0, ti([[0]])), "index_select\\(\\) expects a 1-D index, got shape \\(1, 1\\)"),
        (lambda: tp.take_along_axis(t(G), ti([0, 1]), axis=0),
         "take_along_axis\\(\\) expects indices of 2 dimensions \\(as x\\), got shape \\(2,\\)"),
        (lambda: tp.scatter(t(G), 1, ti([[0, 1]]), t([[1.0]])), "scatter\\(\\) expects a source no smaller than "
         "the index, got shape \\(1, 1\\) for an index of shape \\(1, 2\\)"),
        (lambda: tp.index_add(t(G), 0, ti([0, 1]), t(np.ones((3, 4)))), "index_add\\(\\) expects a source of shape "
         "\\(2, 4\\), got \\(3, 4\\)"),
        (lambda: tp.masked_fill(t(G), t(G), 0.0), "masked_fill\\(\\) expects a bool mask, got float64"),
        (lambda: tp.take(t(G), ti([0]), axis=2), "dimension 2 is out of range for a tensor of 2 dimensions"),
        (lambda: tp.masked_fill(t(G), tp.tensor(G > 0), t([1.0, 2.0])), "masked_fill\\(\\) expects a number or a "
         "0-d tensor as the value, got shape \\(2,\\)"),
        (lambda: tp.take(t(Y), [10]), "index 10 is out of range for dimension 0 of size 10"),
    ],
    ids=["gather_ndim", "gather_size", "gather_float", "index_select_2d", "take_along_ndim", "scatter_src",
         "index_add_src", "masked_fill_mask", "take_axis", "masked_fill_value", "take_host_index"],
)  # fmt: skip
def test_indexing_functions_refuse_bad_arguments_with_sentences(call, message):
    with pytest.raises((ValueError, TypeError, IndexError), match=message):
        call()


# -- gradients -------------------------------------------------------------------------------

IDX = np.array([2, 0, 2])
IDX2 = np.array([[0, 3, 3], [1, 1, 0], [2, 0, 0]])


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: a[ti(IDX)],
        lambda a: a[ti(IDX), ti([1, 1, 3])],
        lambda a: a[:, [3, 3, 0]] * 2,
        lambda a: a[tp.tensor(G > 0)],
        lambda a: a[::-1, ::-2],
        lambda a: tp.take(a, ti(IDX), axis=1),
        lambda a: tp.take(a, ti(IDX2)),
        lambda a: tp.take_along_axis(a, ti(IDX2), axis=1),
        lambda a: tp.gather(a, 0, ti(IDX2[:2] % 3)),
        lambda a: tp.index_select(a, 0, ti(IDX)),
        lambda a: tp.masked_fill(a, tp.tensor(G > 0), 1.5),
        lambda a: tp.index_add(a, 1, ti([0, 0, 2]), a[:, :3] * a[:, :3]),
        lambda a: tp.scatter_add(a, 1, ti(IDX2), a[:, 1:] * 3),
        lambda a: tp.scatter(a, 1, ti([[0, 2], [1, 3], [3, 0]]), a[:, 2:] * a[:, 2:]),
        lambda a: tp.index_put(a, (ti(IDX),), a[:3, 1:2] ** 2, accumulate=True),
        lambda a: tp.index_put(a, (ti([0, 2]), ti([1, 3])), a[1, :2] * 2),
    ],
    ids=["getitem", "getitem_pair", "getitem_list", "getitem_mask", "getitem_reversed", "take_axis", "take_flat",
         "take_along_axis", "gather", "index_select", "masked_fill", "index_add", "scatter_add", "scatter",
         "index_put_accumulate", "index_put"],
)  # fmt: skip
def test_gradients(fn):
    check_gradients(fn, G)


def test_gradients_of_gradients_through_a_gather():
    x = t(G).requires_grad_()
    y = (tp.gather(x, 1, ti(IDX2)) ** 2).sum()
    (gx,) = tp.autograd.grad(y, [x], create_graph=True)
    (ggx,) = tp.autograd.grad(gx.sum(), [x])
    counts = np.zeros_like(G)
    np.add.at(counts, (np.arange(3)[:, None], IDX2), 1.0)
    assert_close(gx, 2 * G * counts)
    assert_close(ggx, 2 * counts)


def test_in_place_indexing_functions_refuse_tensors_that_require_grad():
    x = t(G).requires_grad_()
    with pytest.raises(RuntimeError, match="scatter_\\(\\)"):
        x.scatter_(1, ti([[0]]), 1.0)
    with pytest.raises(RuntimeError, match="x\\[...\\] = value"):
        x[ti([0])] = 1.0
