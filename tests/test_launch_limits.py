"""Launch configurations the device refuses: refused before the backend, with one
sentence on both backends, and the simulator's limits are the H200's."""

import importlib

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.runtime.backend import get as get_backend
from tensorplay.runtime.backend.launch_limits import H200_ATTRIBUTES, H200_LAUNCH_LIMITS

# numba.cuda only after tensorplay, which picks the simulator before it loads.
cuda = importlib.import_module("numba.cuda")
numba = importlib.import_module("numba")


@tp.jit
def add_one(x):
    i = tp.cuda.grid(1)
    if i < x.size:
        x[i] += 1


@cuda.jit
def plain_add_one(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


def _launches(blocks, threads, shared_bytes=0):
    """The same launch through ``kernel[...]`` and through ``tp.cuda.launch``."""
    x = tp.zeros(4)
    return [
        lambda: add_one[blocks, threads, None, shared_bytes](x),
        lambda: tp.cuda.launch(plain_add_one, blocks, threads, x, shared_bytes=shared_bytes),
    ]


GRID = r"^a grid of \(.*\) blocks exceeds the device's limits of \(2147483647, 65535, 65535\) \(x, y, z\); "
BLOCK = r"^a block of \(.*\) threads exceeds the device's limits: \(1024, 1024, 64\) \(x, y, z\) and 1024 threads "
SHARED = r"^expected shared_bytes \(dynamic shared memory per block\) as an int from 0 to 232448, the device's limit"


@pytest.mark.parametrize("blocks", [(1, 65536), (1, 70000), 2**31, (1, 1, 65536), (2**31, 65536, 65536)])
def test_a_grid_over_the_limits_is_refused(blocks):
    for launch in _launches(blocks, 1):
        with pytest.raises(ValueError, match=GRID + "launch fewer blocks"):
            launch()


@pytest.mark.parametrize("threads", [1025, (1, 1025), (1, 1, 65), (32, 32, 2), (2048, 1, 1)])
def test_a_block_over_the_limits_is_refused(threads):
    for launch in _launches(1, threads):
        with pytest.raises(ValueError, match=BLOCK + "in all; launch smaller blocks"):
            launch()


@pytest.mark.parametrize("shared_bytes", [232449, 1 << 20, -1, 1.5, True, "0"])
def test_bad_dynamic_shared_memory_is_refused(shared_bytes):
    for launch in _launches(1, 4, shared_bytes):
        with pytest.raises(ValueError, match=SHARED + ", got "):
            launch()


@pytest.mark.skipif(tp.cuda.backend() != "sim", reason="on a GPU Numba's own launch meets the driver's refusal")
@pytest.mark.parametrize(
    "blocks, threads, said",
    [(0, 32, "^a launch needs one block"), (1, 0, "^a launch needs one block"), (1, 1025, BLOCK),
     ((1, 1, 65536), 1, GRID), (2**31, 1, GRID)],
)  # fmt: skip
def test_the_simulator_refuses_a_kernel_launched_numbas_way_as_the_gpu(blocks, threads, said):
    x = tp.zeros(4)
    for stream in (tp.cuda.current_stream(), tp.cuda.Stream(), None):  # a tensorplay stream, or none
        config = (blocks, threads) if stream is None else (blocks, threads, stream)
        with pytest.raises(ValueError, match=said):
            plain_add_one[config](x)
    plain_add_one[1, 4](x)
    assert x.tolist() == [1.0] * 4


@tp.jit
def through_shared(x):
    buf = cuda.shared.array(0, numba.float32)  # dynamic: sized by the launch
    z = cuda.threadIdx.z
    buf[buf.size - 1 - z] = z
    cuda.syncthreads()
    x[z] = buf[buf.size - 1 - z]


def test_a_launch_at_the_limits_runs():
    x = tp.zeros(64)
    through_shared[1, (1, 1, 64), None, 232448](x)  # block z and dynamic shared memory (opted in) at their limits
    assert x.tolist() == list(range(64))


@tp.jit
def reverse_through_shared(x, out):
    """``out`` = ``x`` reversed, every element through dynamic shared memory."""
    buf = cuda.shared.array(0, numba.float64)
    t, step = cuda.threadIdx.x, cuda.blockDim.x
    for k in range(t, x.size, step):
        buf[k] = x[k]
    cuda.syncthreads()
    for k in range(t, x.size, step):
        out[k] = buf[x.size - 1 - k]


@pytest.mark.parametrize("cooperative", [False, True])
def test_more_than_48_kib_of_dynamic_shared_memory_is_opted_into(cooperative):
    # 160 KiB: past the 48 KiB a kernel gets without opting in; tensorplay raises the kernel's limit
    x, out = tp.arange(20480, dtype=tp.float64), tp.zeros(20480, dtype=tp.float64)
    nbytes = 8 * x.numel()
    if cooperative:  # the occupancy query and the cooperative launch see the raised limit too
        assert reverse_with_grid_sync.max_cooperative_blocks(64, x, out, shared_bytes=nbytes) >= 1
        reverse_with_grid_sync[1, 64, None, nbytes](x, out)
    else:
        reverse_through_shared[1, 64, None, nbytes](x, out)
    assert out.tolist() == x.tolist()[::-1]
    g = tp.cuda.CUDAGraph()  # and a kernel node captured with it
    out.zero_()
    with tp.cuda.graph(g):
        reverse_through_shared[1, 64, None, nbytes](x, out)
    g.replay()
    assert out.tolist() == x.tolist()[::-1]


@tp.jit
def reverse_with_grid_sync(x, out):
    buf = cuda.shared.array(0, numba.float64)
    t, step = cuda.threadIdx.x, cuda.blockDim.x
    for k in range(t, x.size, step):
        buf[k] = x[k]
    cuda.cg.this_grid().sync()
    for k in range(t, x.size, step):
        out[k] = buf[x.size - 1 - k]


@pytest.mark.skipif(tp.cuda.backend() != "sim", reason="on a GPU Numba's own launch meets the driver's refusal")
def test_numbas_own_launch_keeps_the_default_limit():
    x = tp.zeros(4)
    with pytest.raises(ValueError, match="from 0 to 49152, the device's limit for Numba's own launch"):
        plain_add_one[1, 4, 0, 49153](x)


def test_a_refused_launch_leaves_nothing_behind():
    x = tp.zeros(4)
    with pytest.raises(ValueError):
        add_one[(1, 70000), 1](x)
    add_one[1, 4](x)
    assert x.tolist() == [1.0, 1.0, 1.0, 1.0]


def test_the_simulator_enforces_the_h200s_limits():
    expected = {
        "max_grid_dim": (2**31 - 1, 65535, 65535),
        "max_block_dim": (1024, 1024, 64),
        "max_threads_per_block": 1024,
        "max_shared_memory_per_block": 49152,  # without opting in
        "max_shared_memory_per_block_optin": 232448,
    }
    assert H200_LAUNCH_LIMITS == expected
    if tp.cuda.backend() == "sim":
        assert get_backend().launch_limits() == expected


@pytest.mark.gpu
def test_the_simulators_limits_are_the_real_devices():
    assert get_backend().launch_limits() == H200_LAUNCH_LIMITS


def test_device_properties_by_pytorchs_names():
    props = tp.cuda.get_device_properties()
    assert props.name == tp.cuda.get_device_name() and props.total_memory == tp.cuda.mem_get_info()[1]
    assert (props.major, props.minor) >= (7, 0) and props.warp_size == 32
    assert props.shared_memory_per_block == H200_LAUNCH_LIMITS["max_shared_memory_per_block"]
    assert props.shared_memory_per_block_optin == get_backend().launch_limits()["max_shared_memory_per_block_optin"]
    assert props == tp.cuda.get_device_properties("cuda:0")
    with pytest.raises(ValueError, match=r"^get_device_properties\(1\): tensorplay drives one device"):
        tp.cuda.get_device_properties(1)


@pytest.mark.gpu
def test_the_simulators_properties_are_the_real_devices():
    # an H100 SXM's are the H200's too, but for the memory
    assert get_backend().device_attributes() == H200_ATTRIBUTES


@tp.jit
def reverse_scaled(x, out, a):
    buf = cuda.shared.array(0, numba.float64)
    t, step = cuda.threadIdx.x, cuda.blockDim.x
    for k in range(t, x.size, step):
        buf[k] = a * x[k]
    cuda.syncthreads()
    for k in range(t, x.size, step):
        out[k] = buf[x.size - 1 - k]


def test_the_opted_in_limit_is_the_kernels_and_never_lowered():
    # a float and a NumPy float64 launch one compiled kernel through two launchers: the second's
    # smaller launch must not lower the limit the first raised
    big, small = tp.arange(25600, dtype=tp.float64), tp.arange(12800, dtype=tp.float64)
    for x, a in ((big, 2.0), (small, np.float64(2.0)), (big, 2.0)):
        out = tp.zeros_like(x)
        reverse_scaled[1, 64, None, 8 * x.numel()](x, out, a)  # 200 KiB, 100 KiB, 200 KiB
        assert out.tolist() == (2.0 * x.numpy()[::-1]).tolist()


@pytest.mark.parametrize("nbytes_of", [lambda n: 8 * n, lambda n: 8 * 8192 + 8 * n], ids=["exact", "past-48-kib"])
def test_set_args_keeps_the_nodes_dynamic_shared_memory(nbytes_of):
    # new arguments for a node captured with dynamic shared memory: the node keeps its shared bytes
    x, out = tp.arange(512, dtype=tp.float64), tp.zeros(512, dtype=tp.float64)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        reverse_scaled[1, 64, None, nbytes_of(512)](x, out, 2.0)
    (node,) = g.nodes()
    y, out2 = tp.arange(512, 1024, dtype=tp.float64), tp.zeros(512, dtype=tp.float64)
    node.set_args(y, out2, 3.0)
    g.replay()
    assert out2.tolist() == (3.0 * y.numpy()[::-1]).tolist()
    assert out.tolist() == [0.0] * 512  # the old output no longer written
