"""The simulator's device memory on its own (``simmemory.SimMemory``, the base
of ``SimBackend``): allocations counted against the simulated device's bytes,
views over them and over host memory other libraries own, checked against
NumPy; and the update refusals both backends word alike (``errors.update_refusal``)."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp

pytestmark = pytest.mark.skipif(tp.cuda.backend() != "sim", reason="the simulator's memory")


@pytest.fixture
def memory():
    from tensorplay.runtime.backend.simmemory import SimMemory

    mem = SimMemory()
    mem.memory = 1 << 12
    return mem


def test_allocations_count_against_the_simulated_device_and_free_gives_them_back(memory):
    a = memory.mem_alloc(1000)
    b = memory.mem_alloc(2000)
    assert a % 256 == 0 and b % 256 == 0  # aligned as the driver's
    assert memory.mem_info() == ((1 << 12) - 3000, 1 << 12)
    with pytest.raises(tp.cuda.CudaError, match=r"^cuMemAlloc\(2000\) failed: CUDA_ERROR_OUT_OF_MEMORY: the device"):
        memory.mem_alloc(2000)
    memory.mem_free(a)
    assert memory.mem_info() == ((1 << 12) - 2000, 1 << 12)
    with pytest.raises(tp.cuda.CudaError, match=r"^cuMemFree failed: CUDA_ERROR_INVALID_VALUE"):
        memory.mem_free(a)
    assert memory.mem_info() == ((1 << 12) - 2000, 1 << 12)  # the refused free changed nothing


def test_views_read_and_write_an_allocation_as_numpy_does(memory):
    ptr = memory.mem_alloc(6 * 8)
    reference = np.arange(6, dtype=np.float64).reshape(2, 3)
    memory.view(ptr, (2, 3), (24, 8), np.float64)[:] = reference
    assert np.array_equal(memory.view(ptr, (3, 2), (8, 24), np.float64), reference.T)
    assert np.array_equal(memory.view_to_end(ptr + 16, np.float64), reference.reshape(-1)[2:])
    with pytest.raises(tp.cuda.CudaError, match=r"^access to address 0x[0-9a-f]+ failed: CUDA_ERROR_ILLEGAL_ADDRESS"):
        memory.view(ptr, (7,), (8,), np.float64)  # one element past the allocation


def test_foreign_host_memory_is_addressable_until_released(memory):
    host = np.arange(8, dtype=np.int32)
    token = memory.adopt_foreign(host.ctypes.data, host.nbytes)
    assert token is not None
    view = memory.view(host.ctypes.data + 4, (3,), (4,), np.int32)
    view *= 10
    assert host.tolist() == [0, 10, 20, 30, 4, 5, 6, 7]
    ptr = memory.mem_alloc(16)
    assert memory.adopt_foreign(ptr, 16) is None  # already simulated device memory
    memory.release_foreign(token)
    with pytest.raises(tp.cuda.CudaError, match="CUDA_ERROR_ILLEGAL_ADDRESS"):
        memory.view(host.ctypes.data, (1,), (4,), np.int32)


def test_the_simulator_refuses_an_update_with_the_driver_backends_sentences():
    from tensorplay.runtime.backend.errors import update_refusal
    from tensorplay.runtime.backend.simgraph import SimGraph, SimGraphExec

    def graph(*kinds):
        g = SimGraph()
        for kind in kinds:
            g.add(kind, lambda: None, kind, ())
        return g

    graph_exec = SimGraphExec(graph("kernel"))
    assert graph_exec.update(graph("kernel", "kernel")) == "the graph's topology changed (nodes or edges)"
    assert graph_exec.update(graph("memset")) == "a node's type changed"
    assert graph_exec.update(graph("kernel")) is None
    assert update_refusal("CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED") == "a node's type changed"
    assert update_refusal("CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE") == (
        "the driver refused the update (CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)"
    )
