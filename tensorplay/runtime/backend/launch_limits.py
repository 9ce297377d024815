"""What a launch may ask of the device: the H200's limits, which the simulator
enforces as its own, and the sentence for a launch past a device's limits, the
same on the GPU and on the simulator whichever way the kernel is launched."""

from __future__ import annotations

import numpy as np

__all__ = ["DEVICE_ATTRIBUTES", "H200_ATTRIBUTES", "H200_LAUNCH_LIMITS", "refuse_launch_shape"]

# The H200's launch limits (cuDeviceGetAttribute; tests/test_launch_limits.py
# compares them with the real device's): what the simulator refuses as the GPU does.
H200_LAUNCH_LIMITS = {
    "max_grid_dim": ((1 << 31) - 1, 65535, 65535),
    "max_block_dim": (1024, 1024, 64),
    "max_threads_per_block": 1024,
    "max_shared_memory_per_block": 48 << 10,  # without opting in
    "max_shared_memory_per_block_optin": 227 << 10,  # for a kernel that opts in, as tensorplay's launches do
}

# What ``tp.cuda.get_device_properties()`` reports beside the name and memory (PyTorch's
# names), each with the driver's CU_DEVICE_ATTRIBUTE_ it is read from, and the H200's value,
# which the simulator reports as its own.
DEVICE_ATTRIBUTES = {
    "major": "COMPUTE_CAPABILITY_MAJOR",
    "minor": "COMPUTE_CAPABILITY_MINOR",
    "multi_processor_count": "MULTIPROCESSOR_COUNT",
    "max_threads_per_block": "MAX_THREADS_PER_BLOCK",
    "max_threads_per_multi_processor": "MAX_THREADS_PER_MULTIPROCESSOR",
    "warp_size": "WARP_SIZE",
    "regs_per_multiprocessor": "MAX_REGISTERS_PER_MULTIPROCESSOR",
    "shared_memory_per_block": "MAX_SHARED_MEMORY_PER_BLOCK",
    "shared_memory_per_block_optin": "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
    "shared_memory_per_multiprocessor": "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
    "L2_cache_size": "L2_CACHE_SIZE",
}
H200_ATTRIBUTES = {
    "major": 9, "minor": 0, "multi_processor_count": 132, "max_threads_per_block": 1024,
    "max_threads_per_multi_processor": 2048, "warp_size": 32, "regs_per_multiprocessor": 65536,
    "shared_memory_per_block": 48 << 10, "shared_memory_per_block_optin": 227 << 10,
    "shared_memory_per_multiprocessor": 228 << 10, "L2_cache_size": 50 << 20,
}  # fmt: skip


def refuse_launch_shape(limits: dict, grid: tuple, block: tuple, shared_bytes, opt_in: bool = True) -> None:
    """ValueError for a launch configuration a device of ``limits`` would refuse (grid
    and block as three ints each), before it reaches the backend (where an oversized grid
    would run for hours on the simulator). ``opt_in``: the launch raises the kernel's
    dynamic shared memory past the default limit where it asks for more (tensorplay's
    launches do; Numba's own do not)."""
    if not all(d > 0 for d in (*grid, *block)):
        raise ValueError(f"a launch needs one block and one thread at least, got a grid of {grid}, blocks of {block}")
    if any(g > m for g, m in zip(grid, limits["max_grid_dim"], strict=True)):
        raise ValueError(
            f"a grid of {grid} blocks exceeds the device's limits of {limits['max_grid_dim']} (x, y, z); "
            "launch fewer blocks and let each thread loop over several items (a grid-stride loop)"
        )
    threads = block[0] * block[1] * block[2]
    if threads > limits["max_threads_per_block"] or any(
        b > m for b, m in zip(block, limits["max_block_dim"], strict=True)
    ):
        raise ValueError(
            f"a block of {block} threads exceeds the device's limits: {limits['max_block_dim']} (x, y, z) "
            f"and {limits['max_threads_per_block']} threads in all; launch smaller blocks and more of them"
        )
    most = limits["max_shared_memory_per_block_optin" if opt_in else "max_shared_memory_per_block"]
    is_int = isinstance(shared_bytes, (int, np.integer)) and not isinstance(shared_bytes, bool)
    if not (is_int and 0 <= shared_bytes <= most):
        how = "" if opt_in else " for Numba's own launch (launch through tp.jit or tp.cuda.launch for more)"
        raise ValueError(
            f"expected shared_bytes (dynamic shared memory per block) as an int from 0 to {most}, "
            f"the device's limit{how}, got {shared_bytes!r}"
        )
