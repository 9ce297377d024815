"""Manipulation functions (the array API's, with PyTorch's names and forms as
aliases) against NumPy in float64; gradients against finite differences;
capture and replay; the sentences bad arguments get."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close
from helpers.gradcheck import check_gradients

import tensorplay as tp

RNG = np.random.default_rng(3)
A = RNG.uniform(-2, 2, (2, 3, 4))
M = RNG.uniform(-2, 2, (3, 4))
G = RNG.uniform(-2, 2, (2, 2, 3))  # for finite differences: an evaluation per element and sign


def t(a):
    return tp.tensor(np.asarray(a, dtype=np.float64))


# -- broadcasting -------------------------------------------------------------------------


def test_broadcast_arrays_and_broadcast_to():
    a, b = RNG.uniform(size=(3, 1)), RNG.uniform(size=(4,))
    got = tp.broadcast_arrays(t(a), t(b))
    want = np.broadcast_arrays(a, b)
    assert len(got) == 2
    for g, w in zip(got, want, strict=True):
        assert_close(g, w)
    assert_close(tp.broadcast_to(t(b), (2, 3, 4)), np.broadcast_to(b, (2, 3, 4)))
    assert tp.broadcast_tensors is tp.broadcast_arrays


def test_broadcast_to_refuses_an_incompatible_shape():
    with pytest.raises(ValueError, match=r"cannot broadcast shape \(3,\) to \(2, 4\)"):
        tp.broadcast_to(t([1, 2, 3]), (2, 4))


# -- joining and splitting ------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat_along_an_axis_and_its_pytorch_spellings(axis):
    a, b = RNG.uniform(size=(2, 3)), RNG.uniform(size=(2, 3))
    want = np.concatenate([a, b], axis=axis)
    assert_close(tp.concat([t(a), t(b)], axis=axis), want)
    assert_close(tp.cat([t(a), t(b)], axis), want)
    assert_close(tp.cat((t(a), t(b)), dim=axis), want)
    assert tp.cat is tp.concat


def test_concat_with_axis_none_flattens():
    a, b = RNG.uniform(size=(2, 3)), RNG.uniform(size=(4,))
    assert_close(tp.concat([t(a), t(b)], axis=None), np.concatenate([a, b], axis=None))


def test_concat_refuses_two_different_axes():
    with pytest.raises(TypeError, match=r"concat\(\) got axis=1 and dim=0, .* pass one of them"):
        tp.concat([t(M), t(M)], dim=0, axis=1)


def test_stack_and_its_pytorch_spelling():
    a, b = RNG.uniform(size=(2, 3)), RNG.uniform(size=(2, 3))
    assert_close(tp.stack([t(a), t(b)], axis=1), np.stack([a, b], axis=1))
    assert_close(tp.stack([t(a), t(b)], dim=-1), np.stack([a, b], axis=-1))
    assert_close(tp.stack([t(a), t(b)], 2), np.stack([a, b], axis=2))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_unstack_and_unbind(axis):
    got = tp.unstack(t(A), axis=axis)
    want = [np.take(A, i, axis=axis) for i in range(A.shape[axis])]
    assert isinstance(got, tuple) and len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w)
    for g, w in zip(t(A).unbind(axis), want, strict=True):
        assert_close(g, w)
    assert tp.unbind is tp.unstack


@pytest.mark.parametrize(
    "size, dim, sizes",
    [(2, 0, [2, 2, 1]), (5, 0, [5]), ([1, 3, 1], 0, [1, 3, 1]), (3, 1, [3, 1]), ([0, 4], -1, [0, 4])],
    ids=str,
)
def test_split_as_pytorch(size, dim, sizes):
    a = RNG.uniform(size=(5, 4)) if dim == 0 else RNG.uniform(size=(2, 4))
    got = tp.split(t(a), size, dim)
    bounds = np.cumsum(sizes)[:-1]
    want = np.split(a, bounds, axis=dim)
    assert [g.shape[dim] for g in got] == sizes
    for g, w in zip(got, want, strict=True):
        assert_close(g, w)
    assert [g.shape for g in t(a).split(size, dim=dim)] == [g.shape for g in got]


def test_split_refuses_sizes_that_do_not_add_up():
    with pytest.raises(ValueError, match=r"split sizes \[2, 2\] add up to 4, but dimension 0 has size 5"):
        tp.split(t(np.zeros(5)), [2, 2])


@pytest.mark.parametrize("n, chunks, sizes", [(5, 3, [2, 2, 1]), (6, 4, [2, 2, 2]), (6, 3, [2, 2, 2]), (2, 5, [1, 1])])
def test_chunk_as_pytorch(n, chunks, sizes):
    a = np.arange(float(n))
    got = tp.chunk(t(a), chunks)
    assert [g.shape[0] for g in got] == sizes
    assert_close(tp.concat(list(got)), a)
    assert [g.shape for g in t(a).chunk(chunks)] == [g.shape for g in got]


def test_chunk_refuses_a_count_below_one():
    with pytest.raises(ValueError, match="chunk expects at least 1 chunk, got 0"):
        tp.chunk(t(np.zeros(4)), 0)


# -- views --------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, 3, -1, -4])
def test_expand_dims(axis):
    assert_close(tp.expand_dims(t(A), axis=axis), np.expand_dims(A, axis))
    assert_close(tp.expand_dims(t(A), axis), np.expand_dims(A, axis))


def test_expand_dims_refuses_an_axis_out_of_range():
    with pytest.raises(IndexError, match="dimension 4 is out of range"):
        tp.expand_dims(t(A), axis=4)


@pytest.mark.parametrize("source, destination", [(0, 2), (-1, 0), ((0, 1), (2, 0)), ([2], [1])], ids=str)
def test_moveaxis_and_movedim(source, destination):
    want = np.moveaxis(A, source, destination)
    assert_close(tp.moveaxis(t(A), source, destination), want)
    assert_close(tp.movedim(t(A), source, destination), want)
    assert_close(t(A).movedim(source, destination), want)


def test_moveaxis_refuses_repeated_axes():
    with pytest.raises(ValueError, match=r"moveaxis\(\) expects unique source axes, got \(0, -3\)"):
        tp.moveaxis(t(A), (0, -3), (1, 2))


def test_permute_dims_and_permute():
    want = np.transpose(A, (2, 0, 1))
    assert_close(tp.permute_dims(t(A), (2, 0, 1)), want)
    assert_close(tp.permute_dims(t(A), axes=(2, 0, 1)), want)
    assert_close(tp.permute(t(A), (2, 0, 1)), want)
    assert_close(tp.permute(t(A), dims=(2, 0, 1)), want)


@pytest.mark.parametrize("copy", [None, True, False])
def test_reshape(copy):
    x = t(A)
    out = tp.reshape(x, (4, -1), copy=copy)
    assert_close(out, A.reshape(4, -1))
    assert (out.data_ptr() == x.data_ptr()) == (copy is not True)


def test_reshape_copies_when_the_layout_needs_it_unless_told_not_to():
    xt = t(M).t()
    assert_close(tp.reshape(xt, (12,)), M.T.reshape(12))
    with pytest.raises(ValueError, match=r"reshape\(\) with copy=False cannot show .* use copy=None"):
        tp.reshape(xt, (12,), copy=False)


@pytest.mark.parametrize("axis", [0, (0, 2), -1])
def test_squeeze(axis):
    a = RNG.uniform(size=(1, 3, 1))
    assert_close(tp.squeeze(t(a), axis), np.squeeze(a, axis))
    assert_close(tp.squeeze(t(a), dim=axis), np.squeeze(a, axis))


def test_squeeze_refuses_a_dimension_longer_than_one():
    with pytest.raises(
        ValueError, match=r"squeeze\(\) can only remove dimensions of size 1, but dimension 1 has size 3"
    ):
        tp.squeeze(t(np.zeros((1, 3))), 1)


# -- copies -----------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (0, 1, 2)], ids=str)
def test_flip(axis):
    assert_close(tp.flip(t(A), axis=axis), np.flip(A, axis))
    if axis is not None:
        assert_close(tp.flip(t(A), axis), np.flip(A, axis))
        assert_close(t(A).flip(axis), np.flip(A, axis))


def test_flip_of_a_strided_view_and_other_dtypes():
    x = t(A).permute(2, 0, 1)[:, :, 1:]  # strided and offset
    assert_close(tp.flip(x, axis=(0, 2)), np.flip(np.transpose(A, (2, 0, 1))[:, :, 1:], (0, 2)))
    for dtype in (tp.int32, tp.bool, tp.float16, tp.bfloat16, tp.uint8):
        a = (np.arange(12).reshape(3, 4) % 3).astype(dtype.np)
        out = tp.flip(tp.tensor(a), axis=1)
        assert out.dtype is dtype
        np.testing.assert_array_equal(out.numpy(), np.flip(a, 1))


@pytest.mark.parametrize(
    "shift, axis",
    [(1, None), (-2, None), (13, None), (1, 0), (-1, 1), (5, -1), ((1, -2), (0, 2)), (2, (0, 1))],
    ids=str,
)
def test_roll(shift, axis):
    assert_close(tp.roll(t(A), shift, axis=axis), np.roll(A, shift, axis))
    assert_close(tp.roll(t(A), shift, axis), np.roll(A, shift, axis))  # PyTorch's roll(x, shifts, dims)
    assert_close(t(A).roll(shift, axis), np.roll(A, shift, axis))


def test_roll_refuses_shifts_and_axes_of_different_lengths():
    with pytest.raises(ValueError, match=r"roll\(\) expects as many shifts as axes, got \(1, 2\) and \(0,\)"):
        tp.roll(t(A), (1, 2), axis=(0,))


@pytest.mark.parametrize("repeats, axis", [(2, None), (3, 1), (1, 0), (0, -1), ([1, 0, 2], 1), ([2], 0)], ids=str)
def test_repeat_is_the_standards_element_repeat(repeats, axis):
    want = np.repeat(A, repeats, axis=axis)
    assert_close(tp.repeat(t(A), repeats, axis=axis), want)
    assert_close(tp.repeat_interleave(t(A), repeats, axis), want)  # PyTorch's name for it


def test_repeat_takes_repeats_from_a_tensor():
    counts = np.array([2, 0, 1, 3])
    assert_close(tp.repeat(t(M), tp.tensor(counts), axis=1), np.repeat(M, counts, axis=1))


def test_repeat_refuses_bad_counts():
    with pytest.raises(ValueError, match=r"repeat\(\) expects 1 or 3 repeat counts for axis 1, got 2"):
        tp.repeat(t(A), [1, 2], axis=1)
    with pytest.raises(ValueError, match=r"repeat\(\) expects non-negative repeat counts, got -1"):
        tp.repeat(t(A), -1)


@pytest.mark.parametrize("reps", [(2,), (1, 2), (2, 1, 3), (2, 1, 1, 2)], ids=str)
def test_tile_and_the_pytorch_repeat_method(reps):
    want = np.tile(A, reps)
    assert_close(tp.tile(t(A), reps), want)
    assert_close(t(A).tile(reps), want)
    if len(reps) >= A.ndim:
        assert_close(t(A).repeat(*reps), want)  # PyTorch's Tensor.repeat tiles
        assert_close(t(A).repeat(reps), want)


def test_the_repeat_method_refuses_fewer_sizes_than_dimensions():
    with pytest.raises(ValueError, match=r"repeat\(\*sizes\) needs at least 3 sizes .* got 2"):
        t(A).repeat(1, 2)


@pytest.mark.parametrize(
    "pad, mode",
    [((1, 2), "constant"), ((1, 0, 0, 2), "constant"), ((-1, 1, 1, -1), "constant"), ((2, 1), "reflect"),
     ((1, 2, 2, 0), "replicate"), ((1, 3, 2, 1), "circular")],
    ids=str,
)  # fmt: skip
def test_pad_as_pytorchs_functional_pad(pad, mode):
    value = 0.5 if mode == "constant" else None
    np_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    widths = [(0, 0)] * A.ndim
    for i in range(len(pad) // 2):
        widths[A.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    cropped = A
    for d, (lo, hi) in enumerate(widths):  # negative pads crop
        index = [slice(None)] * A.ndim
        index[d] = slice(-min(lo, 0), A.shape[d] + min(hi, 0))
        cropped = cropped[tuple(index)]
    positive = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
    kw = {"constant_values": value} if mode == "constant" else {}
    want = np.pad(cropped, positive, mode=np_mode, **kw)
    assert_close(tp.pad(t(A), pad, mode=mode, value=value), want)


def test_pad_refuses_an_odd_pad_and_unknown_modes():
    with pytest.raises(ValueError, match=r"pad expects pairs .* got 3 values"):
        tp.pad(t(A), (1, 2, 3))
    with pytest.raises(
        ValueError, match="pad mode must be 'constant', 'reflect', 'replicate' or 'circular', got 'edge'"
    ):
        tp.pad(t(A), (1, 1), mode="edge")
    with pytest.raises(ValueError, match=r"reflect padding of 4 needs a dimension longer than that, got size 4"):
        tp.pad(t(A), (4, 0), mode="reflect")


# -- gradients --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: tp.flip(x, axis=(0, 2)),
        lambda x: tp.roll(x, (1, -1), axis=(1, 2)),
        lambda x: tp.roll(x, 5),
        lambda x: tp.repeat(x, 2, axis=1),
        lambda x: tp.repeat(x, [2, 0, 1], axis=2),
        lambda x: tp.tile(x, (2, 1, 2)),
        lambda x: x.repeat(1, 2, 1),
        lambda x: tp.moveaxis(x, 0, -1),
        lambda x: tp.concat([x, x * 2], axis=None),
        lambda x: tp.pad(x, (1, 2, 0, 1), value=3.0),
        lambda x: tp.pad(x, (-1, 1)),
        lambda x: tp.pad(x, (2, 1), mode="reflect"),
        lambda x: tp.pad(x, (1, 1, 2, 0), mode="replicate"),
        lambda x: tp.pad(x, (1, 2), mode="circular"),
        lambda x: tp.stack(tp.unstack(x, axis=1)[::-1], axis=0),
        lambda x: tp.concat(list(tp.chunk(x, 2, 2))[::-1], axis=2),
        lambda x: tp.squeeze(tp.expand_dims(x, axis=1), 1),
        lambda x: tp.broadcast_to(x[:1], (2, 2, 2, 3)),
    ],
    ids=[
        "flip", "roll", "roll_flat", "repeat", "repeat_counts", "tile", "repeat_method", "moveaxis", "concat",
        "pad", "pad_crop", "pad_reflect", "pad_replicate", "pad_circular", "unstack", "chunk", "squeeze",
        "broadcast_to",
    ],
)  # fmt: skip
def test_gradients(fn):
    check_gradients(fn, G)


# -- graphs -----------------------------------------------------------------------------


def test_manipulations_are_captured_and_replayed():
    x = t(A)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        flipped = tp.flip(x, axis=1)
        rolled = tp.roll(x, 2, axis=-1)
        tiled = tp.tile(x, (1, 2))
        padded = tp.pad(x, (1, 1), value=-1.0)
        repeated = tp.repeat(x, 2, axis=0)
    b = RNG.uniform(size=A.shape)
    x.copy_(b)
    g.replay()
    assert_close(flipped, np.flip(b, 1))
    assert_close(rolled, np.roll(b, 2, -1))
    assert_close(tiled, np.tile(b, (1, 2)))
    assert_close(padded, np.pad(b, [(0, 0), (0, 0), (1, 1)], constant_values=-1.0))
    assert_close(repeated, np.repeat(b, 2, axis=0))
