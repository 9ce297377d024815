"""Custom kernels: ``@tp.jit`` and ``tp.cuda.launch``."""

import importlib

import numpy as np
import pytest

import tensorplay as tp

# numba.cuda only after tensorplay, which picks the simulator before it loads.
cuda = importlib.import_module("numba.cuda")


@tp.jit
def saxpy(a, x, y):
    i = tp.cuda.grid(1)
    if i < x.size:
        y[i] = a * x[i] + y[i]


@tp.jit
def fill_index_2d(out):
    i, j = tp.cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = i * 10 + j


@tp.jit
def scalars(out, n, scale, flag):
    i = tp.cuda.grid(1)
    if i < out.size:
        v = (i + n) * scale
        out[i] = v if flag else -v


@tp.jit
def grid_stride_add_one(x):
    start, step = tp.cuda.grid(1), tp.cuda.gridsize(1)
    for i in range(start, x.size, step):
        x[i] += 1


@cuda.jit
def plain_scale(out, x, factor):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] * factor


def test_saxpy_on_the_current_stream():
    a = np.arange(20, dtype=np.float32)
    x, y = tp.tensor(a), tp.ones(20)
    saxpy[3, 8](2.0, x, y)
    np.testing.assert_array_equal(y.numpy(), 2 * a + 1)


def test_saxpy_under_a_stream_context():
    s = tp.cuda.Stream()
    a = np.arange(10, dtype=np.float32)
    x, y = tp.tensor(a), tp.zeros(10)
    s.wait_stream(tp.cuda.current_stream())
    with tp.cuda.stream(s):
        saxpy[1, 16](3.0, x, y)
    s.synchronize()
    np.testing.assert_array_equal(y.numpy(), 3 * a)


def test_saxpy_on_an_explicit_stream():
    s = tp.cuda.Stream()
    a = np.linspace(-1, 1, 12, dtype=np.float32)
    x, y = tp.tensor(a), tp.full((12,), 0.5)
    s.wait_stream(tp.cuda.current_stream())
    saxpy[2, 8, s](-1.5, x, y)
    s.synchronize()
    np.testing.assert_allclose(y.numpy(), -1.5 * a + 0.5, rtol=1e-6)


def test_float64_and_int_tensors_compile_their_own_signatures():
    x64 = tp.tensor(np.arange(6, dtype=np.float64))
    y64 = tp.zeros(6, dtype=tp.float64)
    saxpy[1, 8](0.5, x64, y64)
    assert y64.dtype == tp.float64
    np.testing.assert_array_equal(y64.numpy(), 0.5 * np.arange(6))
    xi, yi = tp.arange(6), tp.ones(6, dtype=tp.int64)
    saxpy[1, 8](3, xi, yi)
    np.testing.assert_array_equal(yi.numpy(), 3 * np.arange(6) + 1)


def test_2d_kernel_with_grid_2():
    out = tp.zeros(5, 7)
    fill_index_2d[(2, 2), (4, 4)](out)
    i, j = np.meshgrid(np.arange(5), np.arange(7), indexing="ij")
    np.testing.assert_array_equal(out.numpy(), i * 10 + j)


def test_int_float_bool_scalar_arguments():
    out = tp.zeros(8, dtype=tp.float64)
    scalars[1, 8](out, 3, 0.25, True)
    np.testing.assert_array_equal(out.numpy(), (np.arange(8) + 3) * 0.25)
    scalars[1, 8](out, np.int32(1), np.float32(2.0), False)
    np.testing.assert_array_equal(out.numpy(), -(np.arange(8) + 1) * 2.0)
    scalars[1, 8](out, 0, 1.0, np.bool_(True))
    np.testing.assert_array_equal(out.numpy(), np.arange(8.0))


def test_any_launch_shape_covers_a_grid_stride_loop():
    x = tp.zeros(30, dtype=tp.int32)
    grid_stride_add_one[2, 4](x)
    grid_stride_add_one[(1,), (16,)](x)
    np.testing.assert_array_equal(x.numpy(), np.full(30, 2))


def test_tp_cuda_launch_with_a_plain_numba_kernel():
    a = np.arange(9, dtype=np.float32)
    x, out = tp.tensor(a), tp.empty(9)
    tp.cuda.launch(plain_scale, 2, 8, out, x, 4.0)
    np.testing.assert_array_equal(out.numpy(), 4 * a)


def test_tp_cuda_launch_on_a_stream_and_with_a_tp_kernel():
    s = tp.cuda.Stream()
    a = np.arange(9, dtype=np.float32)
    x, out = tp.tensor(a), tp.zeros(9)
    s.wait_stream(tp.cuda.current_stream())
    tp.cuda.launch(plain_scale, (1,), (16,), out, x, -1.0, stream=s)
    tp.cuda.launch(saxpy, 1, 16, 2.0, x, out, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(out.numpy(), a)


def test_writes_through_a_non_contiguous_view():
    base = tp.zeros(4, 6)
    view = base[:, 1::2]  # shape (4, 3), strides (6, 2)
    assert not view.is_contiguous()
    fill_index_2d[(1, 1), (4, 4)](view)
    expect = np.zeros((4, 6), np.float32)
    i, j = np.meshgrid(np.arange(4), np.arange(3), indexing="ij")
    expect[:, 1::2] = i * 10 + j
    np.testing.assert_array_equal(base.numpy(), expect)


def test_reads_through_a_transposed_view():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = tp.tensor(a).t()[1]  # column 1 of a: a strided 1-D view
    out = tp.zeros(3)
    tp.cuda.launch(plain_scale, 1, 4, out, x, 1.0)
    np.testing.assert_array_equal(out.numpy(), a[:, 1])


def test_numpy_array_argument_is_a_type_error():
    y = tp.zeros(4)
    with pytest.raises(TypeError, match=r"kernel argument 1 is a NumPy array.*tp\.tensor\(array\)"):
        saxpy[1, 4](2.0, np.ones(4, np.float32), y)
    with pytest.raises(TypeError, match=r"tp\.tensor"):
        tp.cuda.launch(plain_scale, 1, 4, y, np.ones(4, np.float32), 1.0)


def test_calling_a_kernel_without_a_configuration_is_a_type_error():
    with pytest.raises(TypeError, match=r"^launch saxpy with a configuration: saxpy\[blocks, threads\]"):
        saxpy(2.0, tp.ones(2), tp.ones(2))


@pytest.mark.parametrize(
    "config",
    [(1,), 4, (1, 2, None, 0, 5)],
)
def test_malformed_configuration_is_a_value_error(config):
    with pytest.raises(ValueError, match=r"kernel\[blocks, threads\]"):
        saxpy[config]


@pytest.mark.parametrize(
    "blocks, threads, what",
    [
        (0, 4, "blocks"),
        (-1, 4, "blocks"),
        (1, 0, "threads"),
        ((1, 1, 1, 1), 4, "blocks"),
        (1, (), "threads"),
        (1.5, 4, "blocks"),
        (1, "8", "threads"),
        (True, 4, "blocks"),
    ],
)
def test_bad_blocks_or_threads_are_value_errors(blocks, threads, what):
    x = tp.ones(4)
    with pytest.raises(ValueError, match=f"^expected {what} as a positive int"):
        saxpy[blocks, threads](1.0, x, x)
    with pytest.raises(ValueError, match=f"^expected {what} as a positive int"):
        tp.cuda.launch(plain_scale, blocks, threads, x, x, 1.0)


def test_foreign_object_argument_is_a_type_error():
    y = tp.zeros(4)
    with pytest.raises(
        TypeError, match=r"^kernel argument 1: expected a Tensor, a device array or a number, got object"
    ):
        saxpy[1, 4](2.0, object(), y)
    with pytest.raises(TypeError, match="got list"):
        saxpy[1, 4](2.0, [1.0, 2.0], y)


@pytest.mark.parametrize("stream, name", [(0, "int"), ("s", "str"), (object(), "object")])
def test_bad_stream_argument_is_a_type_error(stream, name):
    x = tp.ones(4)
    with pytest.raises(TypeError, match=f"^expected a tensorplay.cuda.Stream, got {name}$"):
        saxpy[1, 4, stream](1.0, x, x)
    with pytest.raises(TypeError, match=f"^expected a tensorplay.cuda.Stream, got {name}$"):
        tp.cuda.launch(plain_scale, 1, 4, x, x, 1.0, stream=stream)
    assert x.tolist() == [1.0, 1.0, 1.0, 1.0]  # nothing ran


def test_kernel_keeps_the_function_name_and_options():
    assert saxpy.__name__ == "saxpy"

    @tp.jit(fastmath=False)
    def negate(x):
        i = tp.cuda.grid(1)
        if i < x.size:
            x[i] = -x[i]

    x = tp.tensor([1.0, -2.0])
    negate[1, 2](x)
    assert x.tolist() == [-1.0, 2.0]


def test_a_launch_during_a_capture_is_captured():
    from tensorplay.runtime.backend import get as get_backend

    dev = get_backend()
    a = np.arange(8, dtype=np.float32)
    x, y = tp.tensor(a), tp.zeros(8)
    saxpy[1, 8](1.0, x, y)  # warm up: compile and load before capturing
    y.zero_()
    s = tp.cuda.Stream()
    s.wait_stream(tp.cuda.current_stream())
    with tp.cuda.stream(s):
        dev.begin_capture(s._h, "global")
        try:
            saxpy[1, 8](2.0, x, y)
            tp.cuda.launch(saxpy, 1, 8, 1.0, x, y)
        finally:
            graph = dev.end_capture(s._h)
        np.testing.assert_array_equal(y.numpy(), np.zeros(8))  # recorded, not run
        exe = dev.graph_instantiate(graph)
        dev.graph_launch(exe, s._h)
        dev.graph_launch(exe, s._h)
        s.synchronize()
    np.testing.assert_array_equal(y.numpy(), 6 * a)


@tp.jit
def store(out, x):
    i = tp.cuda.grid(1)
    if i < x.size:
        out[i] = x[i]


I32, I64 = (-(2**31), 2**31 - 1), (-(2**63), 2**63 - 1)
SPECIAL = [float("nan"), float("inf"), float("-inf"), 1e20, -1e20, 300.7, -1.5, 3e9, 2.5]


@pytest.mark.parametrize(
    "source, dtype, expected",
    [  # as measured on the H200: NaN gives 0 or the lowest value; the rest saturates
        (tp.float16, tp.int32, [0, I32[1], I32[0], I32[1], I32[0], 301, -2, I32[1], 2]),  # float16 rounds
        (tp.float16, tp.int64, [I64[0], I64[1], I64[0], I64[1], I64[0], 301, -2, I64[1], 2]),
        (tp.float32, tp.int32, [0, I32[1], I32[0], I32[1], I32[0], 300, -1, I32[1], 2]),
        (tp.float32, tp.int64, [I64[0], I64[1], I64[0], I64[1], I64[0], 300, -1, 3 * 10**9, 2]),
        (tp.float64, tp.int32, [I32[0], I32[1], I32[0], I32[1], I32[0], 300, -1, I32[1], 2]),
        (tp.float64, tp.int64, [I64[0], I64[1], I64[0], I64[1], I64[0], 300, -1, 3 * 10**9, 2]),
    ],
)
def test_a_kernel_storing_floats_into_ints_converts_as_the_gpu(source, dtype, expected):
    with np.errstate(over="ignore"):
        x = tp.tensor(np.array(SPECIAL).astype(source.np))
    out = tp.zeros(len(SPECIAL), dtype=dtype)
    store[1, 16](out, x)
    assert out.tolist() == expected


# -- plain Numba kernels, launched Numba's way ----------------------------------------------


@cuda.jit
def plain_fill_index(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = i


@cuda.jit
def plain_add_one_2d(x):
    i, j = cuda.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        x[i, j] += 1


def test_a_plain_numba_launch_gets_arrays_over_the_tensors_memory():
    x = tp.zeros(10)
    plain_fill_index[1, 16](x)
    np.testing.assert_array_equal(x.numpy(), np.arange(10))
    column = tp.zeros(4, 3)[:, 1]  # a strided view: the kernel writes through its strides
    plain_fill_index[1, 4](column)
    assert column.tolist() == [0.0, 1.0, 2.0, 3.0]
    y = tp.ones(2, 3, dtype=tp.int32)
    plain_add_one_2d[(1, 1), (2, 3)](y)
    plain_add_one_2d[(1, 1), (2, 3)](y)
    assert y.tolist() == [[3, 3, 3], [3, 3, 3]]


def test_the_same_plain_kernel_is_captured_through_tp_cuda_launch():
    x, flag, n = tp.zeros(8), tp.ones(1, dtype=tp.bool), tp.zeros(1, dtype=tp.int32)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag):
            tp.cuda.launch(plain_add_one_2d, (1, 1), (8, 1), x.view(8, 1))
            n.add_(1)
            tp.lt(n, 3, out=flag)
    g.replay()
    assert x.tolist() == [3.0] * 8


def test_a_plain_numba_launch_inside_a_capture_is_refused_on_the_simulator():
    if tp.cuda.backend() != "sim":
        pytest.skip("on the GPU Numba launches on the legacy stream, which the driver refuses during a capture")
    x, g = tp.zeros(4), tp.cuda.CUDAGraph()
    refused = r"^a plain Numba launch \(kernel\[grid, block\]\(\.\.\.\)\).*"
    advice = r"pass the capturing stream as the launch's stream, kernel\[grid, block, tp\.cuda\.current_stream\(\)\]"
    with pytest.raises(tp.cuda.CaptureError, match=refused + advice):
        with tp.cuda.graph(g):
            plain_fill_index[1, 4](x)
    plain_fill_index[1, 4](x)  # and the runtime goes on
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_launch_with_another_number_of_arguments_or_an_int_past_int64_is_refused_first():
    out = tp.zeros(4)

    @tp.jit
    def fill(out, value):
        i = tp.cuda.grid(1)
        if i < out.size:
            out[i] = value

    for args in ((out,), (out, 1.0, 2.0)):
        with pytest.raises(TypeError, match=r"kernel fill\(\) takes 2 argument\(s\), got"):
            fill[1, 4](*args)
    g = tp.cuda.CUDAGraph()
    with pytest.raises(TypeError, match="takes 2 argument"):  # refused at the capture, not at every replay
        with tp.cuda.graph(g):
            fill[1, 4](out)
    with pytest.raises(OverflowError, match="does not fit int64"):
        fill[1, 4](out, 2**70)
    fill[1, 4](out, 3.0)  # the runtime stays usable
    assert out.tolist() == [3.0] * 4


@tp.jit
def square_and_divide(k, a, b, out_i, out_f):
    if tp.cuda.grid(1) == 0:
        out_i[0] = k * k
        out_f[0] = a / b


@cuda.jit
def plain_square_and_divide(k, a, b, out_i, out_f):
    if cuda.grid(1) == 0:
        out_i[0] = k * k
        out_f[0] = a / b


@pytest.mark.parametrize("kernel", [square_and_divide, plain_square_and_divide])
def test_python_numbers_arrive_typed_as_on_the_gpu(kernel):
    # a Python int is an int64 in the kernel (its square wraps), a float a float64 (x / 0.0 is inf)
    out_i, out_f = tp.zeros(1, dtype=tp.int64), tp.zeros(1, dtype=tp.float64)
    for k, a in ((2**40 + 1, -1.0), (2**62 + 3, 2.0)):
        tp.cuda.launch(kernel, 1, 1, k, a, 0.0, out_i, out_f)
        with np.errstate(over="ignore"):
            assert out_i.item() == int(np.int64(k) * np.int64(k))
        assert out_f.item() == (np.inf if a > 0 else -np.inf)
