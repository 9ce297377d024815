"""Creation functions (the array API's signatures, PyTorch's forms kept)
against NumPy; the kernels of eye, linspace, tril and triu; capture and
replay; gradients of tril, triu and meshgrid; the sentences bad arguments get."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_close
from helpers.gradcheck import check_gradients

import tensorplay as tp

RNG = np.random.default_rng(5)


# -- asarray -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "obj, want",
    [
        (True, tp.bool), ([True, False], tp.bool), (3, tp.int64), ([1, True], tp.int64), (2.5, tp.float32),
        ([1, 2.5], tp.float32), ([[1, 2j]], tp.complex64), ([[1.5], [2]], tp.float32),
    ],
    ids=repr,
)  # fmt: skip
def test_asarray_infers_the_dtype_as_the_standard_says(obj, want):
    x = tp.asarray(obj)
    assert x.dtype is want
    np.testing.assert_array_equal(x.numpy(), np.asarray(obj).astype(want.np))


def test_asarray_of_host_data_with_a_dtype():
    np.testing.assert_array_equal(tp.asarray([1, 2], dtype=tp.float64).numpy(), np.array([1.0, 2.0]))
    a = RNG.uniform(size=(2, 3)).astype(np.float32)
    assert_close(tp.asarray(a), a, dtype=tp.float32)
    assert tp.asarray(a, dtype=tp.float64).dtype is tp.float64
    assert tp.asarray(memoryview(np.arange(3, dtype=np.int16))).tolist() == [0, 1, 2]  # the buffer protocol
    assert tp.asarray([tp.asarray(1.5), 2]).tolist() == [1.5, 2.0]  # 0-d tensors among the numbers


def test_asarray_of_a_tensor_shares_it_unless_told_to_copy():
    x = tp.arange(4)
    assert tp.asarray(x) is x and tp.asarray(x, copy=False) is x and tp.asarray(x, dtype=tp.int64) is x
    y = tp.asarray(x, copy=True)
    assert y.data_ptr() != x.data_ptr() and y.tolist() == [0, 1, 2, 3]
    z = tp.asarray(x, dtype=tp.float64)
    assert z.dtype is tp.float64 and z.tolist() == [0.0, 1.0, 2.0, 3.0]
    w = tp.asarray(z, requires_grad=True)  # a new leaf over the same memory: z itself is left as it was
    assert w.requires_grad and not z.requires_grad and w.data_ptr() == z.data_ptr()


def test_asarray_copy_false_refuses_what_must_be_copied():
    with pytest.raises(ValueError, match=r"^asarray\(copy=False\) cannot convert int64 to float32 without a copy;"):
        tp.asarray(tp.arange(2), dtype=tp.float32, copy=False)
    with pytest.raises(ValueError, match=r"^asarray\(copy=False\) cannot put host data .* without a copy; "):
        tp.asarray([1.0, 2.0], copy=False)
    with pytest.raises(ValueError, match=r"^asarray\(copy=False\) cannot put host data"):
        tp.asarray(np.zeros(2), copy=False)


def test_asarray_refuses_what_is_not_numbers():
    with pytest.raises(TypeError, match=r"^expected numbers, nested lists of numbers or an array, got str"):
        tp.asarray("abc")


# -- the filled ones, PyTorch's forms and the standard's ---------------------------------------


@pytest.mark.parametrize("make, fill", [(tp.zeros, 0), (tp.ones, 1)])
def test_shapes_in_every_form(make, fill):
    for args, shape in [
        ((2, 3), (2, 3)),
        (((2, 3),), (2, 3)),
        (([2, 3],), (2, 3)),
        ((4,), (4,)),
        (((),), ()),
        ((), ()),
    ]:
        x = make(*args)
        assert x.shape == shape and x.dtype is tp.float32
        np.testing.assert_array_equal(x.numpy(), np.full(shape, fill, np.float32))
    assert make(3, dtype=tp.int16).dtype is tp.int16
    assert make(shape=(1, 2)).shape == (1, 2)  # the standard's keyword
    assert tp.empty(2, 3).shape == (2, 3) and tp.empty((0, 2)).shape == (0, 2)


def test_shape_errors_are_sentences():
    with pytest.raises(ValueError, match=r"^expected non-negative sizes, got shape \(2, -1\)"):
        tp.zeros((2, -1))
    with pytest.raises(TypeError, match="^expected a shape of integers"):
        tp.ones(2.5)


def test_full_and_the_like_functions():
    np.testing.assert_array_equal(tp.full((2, 2), 7).numpy(), np.full((2, 2), 7))
    assert tp.full((2,), 7).dtype is tp.int64 and tp.full(2, 0.5).dtype is tp.float32
    assert tp.full(2, True).dtype is tp.bool and tp.full(2, 3, dtype=tp.float64).dtype is tp.float64
    x = tp.tensor([[1, 2, 3]], dtype=tp.int16)
    for like, want in [(tp.zeros_like, 0), (tp.ones_like, 1), (lambda x, **k: tp.full_like(x, 9, **k), 9)]:
        y = like(x)
        assert y.dtype is tp.int16 and y.tolist() == [[want] * 3]
        assert like(x, dtype=tp.float64).dtype is tp.float64
    assert tp.empty_like(x, dtype=tp.bool).shape == (1, 3)


# -- arange ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs",
    [((5,), {}), ((1, 7, 2), {}), ((5, 0, -1), {}), ((1.0, 2.0, 0.25), {}), ((0, 1, 0.1), {}), ((3,), {"stop": 9}),
     ((2,), {"stop": 11, "step": 3}), ((0, 5), {"dtype": tp.float64}), ((5, 1), {}), ((-2.5, 2), {})],
    ids=str,
)  # fmt: skip
def test_arange_matches_numpy(args, kwargs):
    x = tp.arange(*args, **kwargs)
    np_kwargs = {k: v.np if k == "dtype" else v for k, v in kwargs.items()}
    want = np.arange(*args, **np_kwargs)
    assert x.shape == want.shape
    assert x.dtype is (kwargs.get("dtype") or (tp.int64 if want.dtype.kind == "i" else tp.float32))
    assert_close(x, want)


def test_arange_takes_stop_or_end_not_both():
    assert tp.arange(0, end=3).tolist() == [0, 1, 2]
    with pytest.raises(TypeError, match=r"^arange\(\) got stop=4 and end=3, two spellings of one argument"):
        tp.arange(0, 4, end=3)


# -- eye ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, k", [((3,), 0), ((2, 4), 1), ((4, 2), -1), ((3, 5), 3), ((3, 3), -5), ((0, 2), 0), ((1,), 0)], ids=str
)
def test_eye_matches_numpy(args, k):
    assert_close(tp.eye(*args, k=k), np.eye(*args, k=k), dtype=tp.float32)


@pytest.mark.parametrize("dtype", [tp.int32, tp.bool, tp.float16, tp.bfloat16, tp.uint8, tp.float64], ids=str)
def test_eye_in_every_dtype(dtype):
    x = tp.eye(3, 4, k=1, dtype=dtype)
    assert x.dtype is dtype
    assert_close(x, np.eye(3, 4, k=1))


@pytest.mark.parametrize("dtype", [tp.complex64, tp.complex128], ids=str)
def test_complex_eye(dtype):
    np.testing.assert_array_equal(tp.eye(2, 3, k=-1, dtype=dtype).numpy(), np.eye(2, 3, k=-1, dtype=dtype.np))


def test_eye_refuses_negative_sizes():
    with pytest.raises(ValueError, match=r"^eye\(\) expects non-negative sizes, got n_rows=-1 and n_cols=2"):
        tp.eye(-1, 2)
    with pytest.raises(TypeError, match=r"^eye\(\) expects integer sizes and k, got k=0\.5"):
        tp.eye(2, k=0.5)


# -- linspace ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "start, stop, num, endpoint",
    [(0, 1, 5, True), (0, 1, 5, False), (-3.5, 2, 7, True), (2, -2, 4, True), (1, 5, 1, True), (1, 5, 1, False),
     (1, 5, 0, True), (0.25, 0.25, 3, True)],
    ids=str,
)  # fmt: skip
def test_linspace_matches_numpy(start, stop, num, endpoint):
    for dtype in (tp.float64, tp.float32):
        x = tp.linspace(start, stop, num, endpoint=endpoint, dtype=dtype)
        assert_close(x, np.linspace(start, stop, num, endpoint=endpoint), dtype=dtype)
    assert tp.linspace(start, stop, num=num, endpoint=endpoint).dtype is tp.float32


def test_linspace_ends_exactly_at_stop():
    x = tp.linspace(0.1, 0.7, 7, dtype=tp.float64).numpy()
    assert x[0] == 0.1 and x[-1] == 0.7


def test_linspace_in_pytorchs_spelling_and_integer_types():
    assert_close(tp.linspace(0, 1, steps=3), [0, 0.5, 1])
    x = tp.linspace(-3, 7, 4, dtype=tp.int64)
    np.testing.assert_array_equal(x.numpy(), np.linspace(-3, 7, 4, dtype=np.int64))
    assert_close(tp.linspace(0, 2, 5, dtype=tp.bfloat16), np.linspace(0, 2, 5), dtype=tp.bfloat16)


@pytest.mark.parametrize("dtype", [None, tp.complex128], ids=str)
def test_complex_linspace(dtype):
    x = tp.linspace(1 - 2j, 3 + 4j, 5, dtype=dtype)
    assert x.dtype is (dtype or tp.complex64)
    np.testing.assert_allclose(x.numpy(), np.linspace(1 - 2j, 3 + 4j, 5), rtol=1e-6)


def test_linspace_refuses_bad_arguments():
    with pytest.raises(ValueError, match=r"^linspace\(\) expects a non-negative number of values, got num=-1"):
        tp.linspace(0, 1, -1)
    with pytest.raises(TypeError, match=r"^linspace\(\) needs num \(PyTorch: steps\)"):
        tp.linspace(0, 1)
    with pytest.raises(TypeError, match=r"^linspace\(\) got num=3 and steps=4, two spellings of one argument"):
        tp.linspace(0, 1, 3, steps=4)
    with pytest.raises(TypeError, match=r"^linspace\(\) expects a complex dtype for complex start or stop"):
        tp.linspace(0, 1j, 3, dtype=tp.float32)


# -- meshgrid ----------------------------------------------------------------------------------


@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("sizes", [(3,), (2, 3), (2, 3, 4)], ids=str)
def test_meshgrid_matches_numpy(indexing, sizes):
    arrays = [RNG.uniform(size=n) for n in sizes]
    got = tp.meshgrid(*[tp.asarray(a, dtype=tp.float64) for a in arrays], indexing=indexing)
    want = np.meshgrid(*arrays, indexing=indexing)
    assert isinstance(got, list) and len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, dtype=tp.float64)


def test_meshgrid_takes_pytorchs_list_and_defaults_to_the_standards_xy():
    a, b = tp.arange(2), tp.arange(3)
    got = tp.meshgrid([a, b])
    assert [g.shape for g in got] == [(3, 2), (3, 2)]
    assert tp.meshgrid() == []


def test_meshgrid_refuses_bad_input():
    with pytest.raises(
        ValueError, match=r"^meshgrid\(\) expects one-dimensional tensors, got shapes \[\(2,\), \(1, 2\)\]"
    ):
        tp.meshgrid(tp.zeros(2), tp.zeros((1, 2)))
    with pytest.raises(TypeError, match=r"^meshgrid\(\) expects tensors of one dtype, got float32 and int64"):
        tp.meshgrid(tp.zeros(2), tp.arange(2))
    with pytest.raises(ValueError, match=r"^meshgrid\(\) expects indexing='xy' or 'ij', got 'yx'"):
        tp.meshgrid(tp.zeros(2), indexing="yx")


def test_meshgrid_gradients():
    check_gradients(lambda a, b: tp.meshgrid(a, b)[0] * tp.meshgrid(a, b)[1], RNG.uniform(size=2), RNG.uniform(size=3))


# -- tril and triu -----------------------------------------------------------------------------


@pytest.mark.parametrize("k", [0, 1, -1, 3, -4])
@pytest.mark.parametrize("shape", [(3, 4), (4, 2), (2, 3, 3), (2, 1, 2, 3)], ids=str)
def test_tril_and_triu_match_numpy(shape, k):
    a = RNG.uniform(-2, 2, shape)
    x = tp.asarray(a, dtype=tp.float64)
    assert_close(tp.tril(x, k=k), np.tril(a, k=k))
    assert_close(tp.triu(x, k=k), np.triu(a, k=k))
    assert_close(tp.tril(x, k), np.tril(a, k=k))  # PyTorch's positional diagonal


def test_tril_and_triu_of_a_strided_view_and_of_other_dtypes():
    a = RNG.uniform(-2, 2, (4, 5))
    x = tp.asarray(a, dtype=tp.float64)
    assert_close(tp.tril(x.T), np.tril(a.T))
    assert_close(tp.triu(x[:, ::2], k=-1), np.triu(a[:, ::2], k=-1))
    ints = np.arange(12).reshape(3, 4)
    assert tp.tril(tp.asarray(ints)).tolist() == np.tril(ints).tolist()
    flags = ints % 2 == 0
    assert tp.triu(tp.asarray(flags)).tolist() == np.triu(flags).tolist()
    c = a[:3, :3] + 1j * a[1:, 2:]
    np.testing.assert_array_equal(tp.tril(tp.asarray(c)).numpy(), np.tril(c))
    assert_close(tp.tril(tp.asarray(a, dtype=tp.bfloat16)), np.tril(a), dtype=tp.bfloat16)
    assert tp.tril(tp.zeros((0, 3))).shape == (0, 3)


def test_tril_refuses_fewer_than_two_dimensions():
    with pytest.raises(ValueError, match=r"^tril\(\) expects a tensor of at least 2 dimensions, got shape \(3,\)"):
        tp.tril(tp.zeros(3))
    with pytest.raises(TypeError, match=r"^triu\(\) expects an integer k, got 1\.5"):
        tp.triu(tp.zeros((2, 2)), k=1.5)


def test_tril_and_triu_gradients():
    a = RNG.uniform(-1, 1, (3, 3))
    check_gradients(lambda x: tp.tril(x, k=-1) * 2, a)
    check_gradients(lambda x: tp.triu(x) + tp.tril(x), a)


# -- from_dlpack -------------------------------------------------------------------------------


def test_from_dlpack_shares_unless_told_to_copy():
    x = tp.arange(3)
    assert tp.from_dlpack(x).data_ptr() == x.data_ptr()
    assert tp.from_dlpack(x, copy=False, device=x.device).data_ptr() == x.data_ptr()
    y = tp.from_dlpack(x, copy=True)
    assert y.data_ptr() != x.data_ptr() and y.tolist() == [0, 1, 2]
    with pytest.raises(BufferError, match="got device='cpu'"):  # the standard's error for a device it cannot reach
        tp.from_dlpack(x, device="cpu")


# -- in graphs ---------------------------------------------------------------------------------


def test_creation_is_captured_and_replayed():
    x = tp.asarray(RNG.uniform(-2, 2, (3, 3)), dtype=tp.float32)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        eye = tp.eye(3, k=1)
        line = tp.linspace(0, 1, 5)
        steps = tp.arange(2, 8, 2)
        lower, upper = tp.tril(x), tp.triu(x, k=1)
        grid = tp.meshgrid(line[:3], line[:2], indexing="ij")[0] * 1
        filled = tp.full((2,), 3.5)
    for t in (eye, line, steps, lower, upper, grid, filled):
        t.zero_()
    new = RNG.uniform(-2, 2, (3, 3)).astype(np.float32)
    x.copy_(tp.asarray(new))
    g.replay()
    assert_close(eye, np.eye(3, k=1))
    assert_close(line, np.linspace(0, 1, 5))
    assert steps.tolist() == [2, 4, 6]
    assert_close(lower, np.tril(new))
    assert_close(upper, np.triu(new, k=1))
    assert_close(grid, np.meshgrid([0, 0.25, 0.5], [0, 0.25], indexing="ij")[0])
    assert filled.tolist() == [3.5, 3.5]


@pytest.mark.gpu_compile
@pytest.mark.skipif(tp.cuda.backend() != "sim", reason="on a GPU every test compiles its kernels")
def test_the_creation_kernels_compile_for_the_gpu():
    # The simulator runs kernels as Python: compile the ones launched here to PTX, as the GPU backend would
    # (tests/helpers/gpu_compile.py; skipped where NVRTC or NVVM is missing).
    from helpers.gpu_compile import MISSING_LIBRARIES, signatures

    for dtype in (tp.bool, tp.uint8, tp.int32, tp.int64, tp.uint64, tp.float16, tp.float32, tp.float64, tp.bfloat16):
        tp.eye(2, dtype=dtype)
        tp.linspace(0, 3, 3, dtype=dtype)
        tp.tril(tp.ones((2, 2), dtype=dtype))
        tp.triu(tp.ones((2, 4), dtype=dtype)[:, ::2])
    for dtype in (tp.complex64, tp.complex128):
        tp.eye(2, dtype=dtype)
        tp.linspace(0, 1j, 3, dtype=dtype)
        tp.tril(tp.ones((2, 2), dtype=dtype))
    found = [s for s in signatures() if s["recipe"][0] == "creation"]
    assert {s["recipe"][1] for s in found} == {"eye", "linspace", "triangle"}
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "TENSORPLAY_BACKEND")}
    script = Path(__file__).resolve().parents[1] / "helpers" / "gpu_compile.py"
    proc = subprocess.run(
        [sys.executable, str(script)], input=json.dumps(found), capture_output=True, text=True, env=env, timeout=900
    )
    if proc.returncode == MISSING_LIBRARIES:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, f"{len(found)} kernels checked:\n{proc.stdout}{proc.stderr[-3000:]}"


def test_eye_with_a_diagonal_far_outside_the_matrix_is_all_zeros():
    # k beyond the kernel's int64 parameter (the conformance suite draws 2**63) is a diagonal that is not there
    for k in (2**63, -(2**63), 5, -4):
        np.testing.assert_array_equal(tp.eye(2, 3, k=k).numpy(), np.eye(2, 3, k=max(-9, min(k, 9))))
