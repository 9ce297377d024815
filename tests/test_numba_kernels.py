"""Plain Numba kernels (``numba.cuda.jit``) on tensorplay tensors and streams.

Each kernel is launched both ways: Numba's, ``kernel[grid, block, stream](...)``
with a tensorplay Stream, and tensorplay's, ``tp.cuda.launch(kernel, grid,
block, ...)``; eagerly, in graphs replayed with new inputs, and in conditional
bodies, against NumPy in float64. Every kernel is launched once before a capture
takes it: on a GPU, Numba's first launch of a kernel compiles and loads it,
which a capture does not allow.
"""

import gc
import threading
import weakref

import numba
import numpy as np
import pytest
from numba import cuda

import tensorplay as tp
from tensorplay.runtime.hazards import checker

N = 16


@cuda.jit
def axpy(a, x, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = a * x[i] + y[i]


@cuda.jit
def add_rows_minus_columns(m):
    i, j = cuda.grid(2)
    if i < m.shape[0] and j < m.shape[1]:
        m[i, j] += i - 2 * j


@cuda.jit
def halve(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= 0.5


@cuda.jit
def count_and_test(x, n, flag, tol):
    # One thread: counts the pass and tells whether an element is still above tol.
    if cuda.grid(1) == 0:
        n[0] += 1
        above = False
        for i in range(x.size):
            if abs(x[i]) > tol:
                above = True
        flag[0] = above


@cuda.jit
def any_above(x, flag, tol):
    if cuda.grid(1) == 0:
        above = False
        for i in range(x.size):
            if abs(x[i]) > tol:
                above = True
        flag[0] = above


@cuda.jit
def copy(dst, src):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i]


@cuda.jit
def store(x, value):
    x[0] = value


def numba_way(kernel, grid, block, *args):
    kernel[grid, block, tp.cuda.current_stream()](*args)


def tensorplay_way(kernel, grid, block, *args):
    tp.cuda.launch(kernel, grid, block, *args)


@pytest.fixture(params=[numba_way, tensorplay_way], ids=["kernel[g, b, s]", "tp.cuda.launch"])
def launch(request):
    return request.param


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _close(t, reference):
    np.testing.assert_allclose(t.numpy(), reference, rtol=1e-6, atol=1e-6)


# -- eagerly -------------------------------------------------------------------------------


def test_eagerly_on_a_stream_made_current(launch):
    rng = np.random.default_rng(0)
    xs, ys = _rand(rng, N), _rand(rng, N)
    s = tp.cuda.Stream()
    with tp.cuda.stream(s):
        x, y = tp.tensor(xs), tp.tensor(ys)
        launch(axpy, 1, N, 2.5, x, y)
        launch(axpy, 1, N, -1.0, x, y)
    s.synchronize()
    _close(y, 1.5 * xs.astype(np.float64) + ys)


def test_a_tensorplay_stream_is_a_launch_stream_where_numba_takes_one():
    rng = np.random.default_rng(1)
    ms = _rand(rng, 3, 5)
    m = tp.tensor(ms)
    s = tp.cuda.Stream()  # not the current stream: Numba's launch orders it after the current stream's work
    add_rows_minus_columns[(1, 1), (3, 5), s](m)
    view = m.t()  # a strided view: the kernel reaches it through its strides
    add_rows_minus_columns[(1, 1), (5, 3), s](view)
    s.synchronize()
    i, j = np.indices((3, 5))
    _close(m, ms + (i - 2 * j) + (j - 2 * i))


@pytest.mark.gpu
def test_on_the_gpu_a_tensorplay_stream_is_one_of_numbas():
    from numba.cuda.cudadrv.driver import Stream as NumbaStream

    s = tp.cuda.Stream()
    assert isinstance(s, NumbaStream) and s.handle == int(s.__cuda_stream__()[1])


# -- in graphs -----------------------------------------------------------------------------


def test_a_graph_replays_plain_kernels_on_fresh_inputs(launch):
    rng = np.random.default_rng(2)
    x, y0, y, m = tp.zeros(N), tp.zeros(N), tp.zeros(N), tp.zeros(4, 3)
    launch(axpy, 1, N, 1.0, x, y)  # compiled before the capture, as on a GPU
    launch(add_rows_minus_columns, (1, 1), (4, 3), m)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y.copy_(y0)
        launch(axpy, 1, N, 3.0, x, y)
        launch(axpy, 1, N, -0.5, x, y)
        total = y.sum()
        launch(add_rows_minus_columns, (1, 1), (4, 3), m)
    i, j = np.indices((4, 3))
    for replay in range(3):
        xs, ys = _rand(rng, N), _rand(rng, N)
        x.copy_(tp.tensor(xs))
        y0.copy_(tp.tensor(ys))
        g.replay()
        expected = 2.5 * xs.astype(np.float64) + ys
        _close(y, expected)
        assert abs(total.item() - expected.sum()) < 1e-4
        _close(m, (replay + 2) * (i - 2 * j))  # one eager launch, then one per replay


def test_plain_launches_are_graph_nodes_but_not_in_nodes():
    x, y = tp.zeros(N), tp.zeros(N)
    axpy[1, N, tp.cuda.current_stream()](1.0, x, y)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        axpy[1, N, tp.cuda.current_stream()](1.0, x, y)
        tp.cuda.launch(axpy, 1, N, 1.0, x, y)
    assert [n.kernel for n in g.nodes()] == ["axpy"]  # the tensorplay launch: set_args can change it


def test_a_while_body_runs_plain_kernels_until_they_stop_it(launch):
    x, n, flag = tp.zeros(N), tp.zeros(1, dtype=tp.int32), tp.zeros(1, dtype=tp.bool)
    tol = 0.01
    launch(any_above, 1, 1, x, flag, tol)
    launch(halve, 1, N, x)
    launch(count_and_test, 1, 1, x, n, flag, tol)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        n.zero_()
        launch(any_above, 1, 1, x, flag, tol)
        with g.while_(flag):
            launch(halve, 1, N, x)
            launch(count_and_test, 1, 1, x, n, flag, tol)
    rng = np.random.default_rng(3)
    counts = []
    for scale in (1.0, 40.0, 1e-3):
        xs = _rand(rng, N) * np.float32(scale)
        x.copy_(tp.tensor(xs))
        g.replay()
        host, passes = xs.astype(np.float64), 0
        while np.abs(host).max() > tol:
            host, passes = host * 0.5, passes + 1
        assert n.item() == passes
        _close(x, host)
        counts.append(passes)
    assert counts[1] > counts[0] > counts[2] == 0


def test_an_if_body_runs_a_plain_kernel_when_its_flag_holds(launch):
    pred, y, x = tp.zeros(1, dtype=tp.bool), tp.zeros(N), tp.ones(N)
    launch(axpy, 1, N, 0.0, x, y)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.if_(pred):
            launch(axpy, 1, N, 2.0, x, y)
    for holds, expected in ((True, 2.0), (False, 2.0), (True, 4.0)):
        pred.fill_(holds)
        g.replay()
        assert y.tolist() == [expected] * N


def test_a_plain_launch_sees_what_a_compiled_function_held_back():
    # Inside a capture tp.compile holds elementwise ops back to fuse them; a plain
    # launch after them must find their result written.
    @tp.compile
    def step(x, y):
        z = x * 2.0 + 1.0
        axpy[1, N, tp.cuda.current_stream()](1.0, z, y)

    x, y = tp.tensor(np.arange(N, dtype=np.float32)), tp.zeros(N)
    step(x, y)  # eager warm-up
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        step(x, y)
    g.replay()
    _close(y, 2 * (2.0 * np.arange(N) + 1.0))  # the warm-up and the replay (a capture only records)


# -- memory --------------------------------------------------------------------------------


def test_the_graph_keeps_the_tensors_it_was_given_alive(launch):
    dst, src = tp.zeros(N), tp.tensor(np.arange(N, dtype=np.float32))
    launch(copy, 1, N, dst, src)
    dst.zero_()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        launch(copy, 1, N, dst, src)
    held = weakref.ref(src._storage)
    del src
    gc.collect()
    junk = [tp.full((N,), 9.0) for _ in range(4)]  # would take src's memory, were it free
    g.replay()
    assert dst.tolist() == list(range(N)) and held() is not None
    g.reset()
    gc.collect()
    assert held() is None  # let go with the graph
    del junk


def test_tensors_the_capture_allocated_are_the_graphs_pool_not_held(launch):
    x = tp.ones(N)
    launch(axpy, 1, N, 0.0, x, tp.zeros(N))
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x * 2.0
        launch(axpy, 1, N, 1.0, x, y)
    g.replay()
    assert y.tolist() == [3.0] * N
    with pytest.raises(RuntimeError, match=r"reset\(\) while 1 tensor\(s\) allocated during the capture are alive"):
        g.reset()
    del y
    g.reset()  # the kernel's hold did not keep y


# -- refused -------------------------------------------------------------------------------

ADVICE = (
    r"pass the capturing stream as the launch's stream, kernel\[grid, block, tp\.cuda\.current_stream\(\)\]\(\.\.\.\), "
    r"and the launch is captured$"
)


@pytest.mark.parametrize("args", [("tensor",), ("number",)])
def test_a_launch_on_numbas_default_stream_in_a_capture_is_refused(args):
    if tp.cuda.backend() != "sim":
        pytest.skip("on the GPU the driver refuses a legacy-stream launch during a capture with its own error")
    x = tp.zeros(1)
    kernel, launch_args = (halve, (x,)) if args == ("tensor",) else (count_and_test, ())
    g = tp.cuda.CUDAGraph()
    with pytest.raises(
        tp.cuda.CaptureError,
        match=rf"^a plain Numba launch \(kernel\[grid, block\]\(\.\.\.\)\) of \w+ on Numba's default stream "
        rf"would run outside the graph that stream 0x[0-9a-f]+ is capturing; {ADVICE}",
    ):
        with tp.cuda.graph(g):
            kernel[1, 1](*launch_args)
    x.fill_(4.0)
    halve[1, 1](x)  # and the runtime goes on
    assert x.tolist() == [2.0]


def test_a_launch_on_a_numba_stream_in_a_capture_is_refused():
    if tp.cuda.backend() != "sim":
        pytest.skip("on the GPU a Numba stream is the driver's: its launch breaks or escapes the capture")
    x, g = tp.ones(N), tp.cuda.CUDAGraph()
    numba_stream = cuda.stream()
    with pytest.raises(tp.cuda.CaptureError, match=rf"on a stream that is not a tensorplay Stream .*; {ADVICE}"):
        with tp.cuda.graph(g):
            halve[1, N, numba_stream](x)
    halve[1, N, numba_stream](x)  # outside a capture it runs
    assert x.tolist() == [0.5] * N


def test_a_numpy_argument_on_a_capturing_stream_is_refused():
    if tp.cuda.backend() != "sim":
        pytest.skip("on the GPU Numba's copy of a host array breaks the capture with the driver's error")
    g = tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.CaptureError, match=r"argument 0 of halve is a NumPy array, which lives on the host"):
        with tp.cuda.graph(g):
            halve[1, N, tp.cuda.current_stream()](np.ones(N, np.float32))
    host = np.ones(N, np.float32)
    halve[1, N, tp.cuda.Stream()](host)  # eagerly Numba copies it there and back
    assert host.tolist() == [0.5] * N


# -- threads that wait for each other, and threads that never do -----------------------------------


@cuda.jit
def reverse_each_block(x):  # the threads of a block swap values through shared memory: each waits for all
    tile = cuda.shared.array(N, numba.float32)
    i = cuda.threadIdx.x
    at = cuda.blockIdx.x * cuda.blockDim.x
    tile[i] = x[at + i]
    cuda.syncthreads()
    x[at + i] = tile[cuda.blockDim.x - 1 - i]


def test_threads_that_wait_for_each_other_and_threads_that_never_do_give_the_same_results(launch):
    x = tp.tensor(np.arange(2 * N, dtype=np.float32))
    launch(reverse_each_block, (2, 1, 1), (N, 1, 1), x)
    launch(axpy, (2, 1, 1), (N, 1, 1), 2.0, tp.ones(2 * N), x)
    reference = np.concatenate([np.arange(N)[::-1], np.arange(N, 2 * N)[::-1]]) + 2.0
    _close(x, reference)


SEEN: list = []


@cuda.jit
def note_thread(x):
    SEEN.append((threading.current_thread().name, cuda.blockIdx.x, cuda.threadIdx.x))  # on the simulator: Python
    x[cuda.grid(1)] = 1


@cuda.jit
def note_thread_after_the_others(x):
    cuda.syncthreads()
    SEEN.append((threading.current_thread().name, cuda.blockIdx.x, cuda.threadIdx.x))
    x[cuda.grid(1)] = 1


@pytest.mark.skipif(checker.enabled(), reason="hazard checking runs a kernel's threads in a shuffled order")
def test_on_the_simulator_threads_that_never_meet_run_one_after_another_in_one_python_thread():
    # Numba's simulator starts a Python thread per CUDA thread (a launch of 64 takes 45 ms); a kernel
    # that names no block-wide call or shared memory runs its threads in turn in one Python thread.
    if tp.cuda.backend() != "sim":
        pytest.skip("simulator only: on a GPU kernels are not Python")
    x, s = tp.zeros(8), tp.cuda.current_stream()
    note_thread[(2, 1, 1), (4, 1, 1), s](x)
    assert x.tolist() == [1] * 8 and len({name for name, _, _ in SEEN}) == 1  # one Python thread ran them all,
    assert [(b, t) for _, b, t in SEEN] == [(b, t) for b in range(2) for t in range(4)]  # in order
    SEEN.clear()
    note_thread_after_the_others[(2, 1, 1), (4, 1, 1), s](x)
    assert len({name for name, _, _ in SEEN}) == 8  # a Python thread of its own for each
    for kernel in (note_thread, note_thread_after_the_others):  # an error names the thread, either way
        with pytest.raises(IndexError, match=r"tid=\[3, 0, 0\] ctaid=\[1, 0, 0\]"):  # the last: out of range
            kernel[(2, 1, 1), (4, 1, 1), s](x[:7])
