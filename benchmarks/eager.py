"""Eager ops: host time per small op, and bandwidth of large elementwise ops.

Each tensorplay figure is printed next to PyTorch, CuPy and the raw driver,
measured in the same process.
"""

from __future__ import annotations

import functools

import numpy as np

import tensorplay as tp
from benchmarks.common import (
    check,
    cupy_events,
    device_ms,
    host_us,
    on_gpu,
    optional,
    peer,
    reps,
    torch_events,
    tp_events,
)
from benchmarks.targets import at_least, below, measurement


def raw_launch_us(n: int = 1024) -> float | None:
    """cuLaunchKernel of tensorplay's compiled add kernel with parameters packed
    once: the floor any Python launch path can reach (None on the simulator,
    which has no driver)."""
    if not on_gpu():
        return None
    from tensorplay.kernels import elementwise as ew
    from tensorplay.runtime.launch import _launchers, grid_groups

    x, y = tp.rand(n), tp.rand(n)
    z = x + y  # compiles and caches the launcher
    key = next(k for k in _launchers if k[0] is ew.kernel("add", "aa", "flat_exact", "none"))
    launcher = _launchers[key]
    stream = tp.cuda.current_stream()._h
    grid, block = grid_groups(n)
    launcher(grid, block, stream, [z, np.uint64(n), x, y])  # packs the parameters into its buffer once
    from cuda.bindings import driver as drv

    _, _, addr = launcher._buffers()
    func = launcher._func

    def call():
        drv.cuLaunchKernel(func, grid[0], 1, 1, block[0], 1, 1, 0, stream, addr, 0)

    return host_us(call, tp.cuda.synchronize)


def eager_host(rows: list, progress) -> None:
    """Host microseconds for ``x + y`` on 1K float32 elements."""
    n = 1024
    x, y = tp.rand(n), tp.rand(n)
    want = x.numpy().astype(np.float64) + y.numpy()
    check("eager x + y", float(np.abs((x + y).numpy() - want).max() / np.abs(want).max()), 1e-6)
    row = {"name": "eager x + y, 1K float32, host us/op", "unit": "us", "lower_is_better": True}
    row["tensorplay"] = host_us(lambda: x + y, tp.cuda.synchronize)
    progress.step("eager tensorplay")
    torch = optional("torch")
    if torch is not None and torch.cuda.is_available():
        a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
        row["torch"] = host_us(lambda: a + b, torch.cuda.synchronize)
    progress.step("eager torch")
    cp = optional("cupy")
    if cp is not None:
        a, b = cp.random.rand(n, dtype=cp.float32), cp.random.rand(n, dtype=cp.float32)
        row["cupy"] = host_us(lambda: a + b, cp.cuda.Device().synchronize)
    progress.step("eager cupy")
    row["driver"] = raw_launch_us(n)
    progress.step("eager raw driver")
    below(row, 7, "us", note="; driver column: cuLaunchKernel of the same kernel, its parameters packed once")
    rows.append(row)


def _tp_add_ms(n: int) -> float:
    """Device ms of tensorplay's ``x + y`` on n float32 (checked on sampled elements)."""
    x, y = tp.rand(n), tp.rand(n)
    z = x + y
    for i in np.random.default_rng(0).integers(0, n, 5):
        want = x[int(i)].item() + y[int(i)].item()
        check(f"x + y on {n} float32, element {int(i)}", abs(z[int(i)].item() - want) / max(abs(want), 1e-30), 1e-6)
    return device_ms(lambda: x + y, *tp_events(), tp.cuda.synchronize, **reps())


def _sim_mib(mib: float) -> float:
    """``mib`` on a GPU; 16 KiB on the simulator, which runs each CUDA thread in Python."""
    return mib if on_gpu() else 1 / 64


def bandwidth(rows: list, progress, mib: float = 1024) -> None:
    """GB/s of ``z = x + y`` on float32 arrays of ``mib`` MiB each (read 2, write 1)."""
    mib = _sim_mib(mib)
    n = int(mib * (1 << 20)) // 4
    gbytes = 3 * n * 4 / 1e9
    row = {"name": f"elementwise x + y, {mib:g} MiB float32, GB/s (driver column: torch's device-to-device copy)",
           "unit": "GB/s", "lower_is_better": False}  # fmt: skip
    row["tensorplay"] = gbytes / (_tp_add_ms(n) / 1e3)
    progress.step("bandwidth tensorplay")
    torch = optional("torch")
    if torch is not None and torch.cuda.is_available():
        a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
        row["torch"] = gbytes / (device_ms(lambda: a + b, *torch_events(torch), torch.cuda.synchronize) / 1e3)
        # device-to-device copy: the bandwidth ceiling (2 bytes moved per byte copied)
        c = torch.empty_like(a)
        copy_ms = device_ms(lambda: c.copy_(a), *torch_events(torch), torch.cuda.synchronize)
        row["driver"] = 2 * n * 4 / 1e9 / (copy_ms / 1e3)
        del a, b, c
        torch.cuda.empty_cache()
    progress.step("bandwidth torch")
    cp = optional("cupy")
    if cp is not None:
        a, b = cp.random.rand(n, dtype=cp.float32), cp.random.rand(n, dtype=cp.float32)
        row["cupy"] = gbytes / (device_ms(lambda: a + b, *cupy_events(cp), cp.cuda.Device().synchronize) / 1e3)
        del a, b
        cp.get_default_memory_pool().free_all_blocks()
    progress.step("bandwidth cupy")
    at_least(row, 0.9)
    rows.append(row)
    tp.cuda.empty_cache()


def _gbps(nbytes: int, fn, events, sync) -> float:
    """GB/s of ``fn`` moving ``nbytes``, from its median device time."""
    return nbytes / 1e9 / (device_ms(fn, *events, sync, **reps()) / 1e3)


def broadcast_bandwidth(rows: list, progress, mib: float = 1024) -> None:
    """GB/s of ``x + b`` on a float32 matrix of ``mib`` MiB, ``b`` a row (one value
    per column) or a column (one per row): x read, the result written."""
    torch, cp = peer("torch"), peer("cupy")
    n = int(_sim_mib(mib) * (1 << 20)) // 4
    cols = 4096 if on_gpu() else 64
    _broadcast_rows(rows, progress, torch, cp, max(1, n // cols), cols, ("row", "column"))
    _broadcast_rows(rows, progress, torch, cp, 64, max(1, n // 64), ("column",))  # few long rows
    if torch is not None:
        torch.cuda.empty_cache()
    if cp is not None:
        cp.get_default_memory_pool().free_all_blocks()
    tp.cuda.empty_cache()


def _broadcast_rows(rows: list, progress, torch, cp, nrows: int, cols: int, cases) -> None:
    x = tp.rand(nrows, cols)
    xh = x.numpy()
    xt = torch.from_numpy(xh).cuda() if torch is not None else None
    xc = cp.asarray(xh) if cp is not None else None
    gbps = functools.partial(_gbps, 2 * nrows * cols * 4)
    for what in cases:
        b = tp.rand(cols) if what == "row" else tp.rand(nrows, 1)
        bh = b.numpy()
        if not np.allclose((x + b)[:64].numpy(), xh[:64] + (bh[:64] if what == "column" else bh)):
            raise AssertionError(f"x + {what}: tensorplay's result differs from NumPy's")
        row = {"name": f"broadcast x + {what}, ({nrows}, {cols}) float32, GB/s", "unit": "GB/s"}
        row["lower_is_better"] = False
        row["tensorplay"] = gbps(lambda b=b: x + b, tp_events(), tp.cuda.synchronize)
        if xt is not None:
            bt = torch.from_numpy(bh).cuda()
            row["torch"] = gbps(lambda bt=bt: xt + bt, torch_events(torch), torch.cuda.synchronize)
        if xc is not None:
            bc = cp.asarray(bh)
            row["cupy"] = gbps(lambda bc=bc: xc + bc, cupy_events(cp), cp.cuda.Device().synchronize)
        at_least(row, 0.9)
        rows.append(row)
        progress.step(f"broadcast {what}")


def transpose_bandwidth(rows: list, progress) -> None:
    """GB/s of ``x.t().contiguous()`` on a square float32 matrix (read + write)."""
    side = 8192 if on_gpu() else 48
    x = tp.rand(side, side)
    xh = x.numpy()
    if not np.array_equal(x.t().contiguous().numpy(), xh.T):
        raise AssertionError("x.t().contiguous(): tensorplay's result differs from NumPy's")
    gbps = functools.partial(_gbps, 2 * side * side * 4)
    row = {"name": f"transposed copy x.t().contiguous(), ({side}, {side}) float32, GB/s", "unit": "GB/s"}
    row["lower_is_better"] = False
    row["tensorplay"] = gbps(lambda: x.t().contiguous(), tp_events(), tp.cuda.synchronize)
    torch, cp = peer("torch"), peer("cupy")
    if torch is not None:
        xt = torch.from_numpy(xh).cuda()
        row["torch"] = gbps(lambda: xt.t().contiguous(), torch_events(torch), torch.cuda.synchronize)
        del xt
        torch.cuda.empty_cache()
    if cp is not None:
        xc = cp.asarray(xh)
        row["cupy"] = gbps(lambda: cp.ascontiguousarray(xc.T), cupy_events(cp), cp.cuda.Device().synchronize)
        del xc
        cp.get_default_memory_pool().free_all_blocks()
    at_least(row, 0.9)
    rows.append(row)
    progress.step("transpose")
    tp.cuda.empty_cache()


def bandwidth_launch_shapes(rows: list, progress, mib: float = 1024) -> None:
    """The same ``x + y`` with larger grids than the default (the grid-stride
    kernels allow any): a measurement for choosing ``grid_1d``'s limit. One
    element short of ``mib``: a count that is not a multiple of four takes the
    grid-stride kernel (the aligned multiple-of-four one does not loop)."""
    from tensorplay.runtime import launch

    mib = _sim_mib(mib)
    n = int(mib * (1 << 20)) // 4 - 1
    gbytes = 3 * n * 4 / 1e9
    launch.grid_1d(1)  # reads the backend's limits
    limits, figures = list(launch._limits), {}
    try:
        for passes in (1, 4, 16):  # grid-stride passes per thread (4 elements each)
            launch._grids.clear()
            launch._limits[:] = [limits[0], n // (4 * passes), n // (4 * passes)]
            figures[passes] = gbytes / (_tp_add_ms(n) / 1e3)
    finally:
        launch._grids.clear()
        launch._limits[:] = limits
    best = max(figures, key=figures.get)
    row = {
        "name": f"x + y, {mib:g} MiB, GB/s with a grid for 1/4/16 passes per thread (the best)",
        "unit": "GB/s",
        "lower_is_better": False,
        "tensorplay": figures[best],
    }
    measurement(row, ", ".join(f"{p} passes: {v:.0f}" for p, v in figures.items()) + " (the default grid: 1 pass)")
    rows.append(row)
    progress.step("bandwidth launch shapes")
    tp.cuda.empty_cache()


SECTIONS = [
    (eager_host, 4), (bandwidth, 3), (broadcast_bandwidth, 3), (transpose_bandwidth, 1), (bandwidth_launch_shapes, 1),
]  # fmt: skip
