"""Where the host microseconds of an eager op and of a readback go, on the GPU.

Times, in one process, tensorplay's ``x + y`` and ``flag.item()`` next to
PyTorch's, and the driver calls underneath them one by one: ``cuLaunchKernel``
through ``cuda.bindings`` (with handle objects and with plain integers) and
through ctypes straight into libcuda, ``cuStreamIsCapturing``,
``cuStreamSynchronize``, and a one-element device-to-host copy into pageable
and into pinned memory; then ``node.set_args`` of a captured kernel node next to
its parts (checking the arguments, packing them, the setter) and to
``cuGraphExecKernelNodeSetParams`` called alone through ``cuda.bindings`` and
through ctypes.

    python3 benchmarks/host_breakdown.py          (needs a GPU)
"""

from __future__ import annotations

import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import tensorplay as tp  # noqa: E402
from benchmarks.common import host_us, peer  # noqa: E402


def _raw_add(n: int):
    """tensorplay's compiled add kernel, its parameters packed once: (function, grid, block, parameter table)."""
    from tensorplay.kernels import elementwise as ew
    from tensorplay.runtime.launch import _launchers, grid_groups

    x, y = tp.rand(n), tp.rand(n)
    z = x + y
    key = next(k for k in _launchers if k[0] is ew.kernel("add", "aa", "flat_exact", "none"))
    launcher = _launchers[key]
    grid, block = grid_groups(n)
    launcher(grid, block, tp.cuda.current_stream()._h, [z, np.uint64(n), x, y])
    return launcher._func, grid, block, launcher._buffers()[2], (x, y, z)


@tp.jit
def _empty_kernel():
    pass


def _no_param_launch(drv, stream):
    """A launch of a kernel without parameters: what the binding costs when it converts no table."""
    from tensorplay.runtime.launch import resolve

    launcher = resolve(_empty_kernel.dispatcher, [])
    launcher((1, 1, 1), (32, 1, 1), stream, [])
    func = launcher._func
    return lambda: drv.cuLaunchKernel(func, 1, 1, 1, 32, 1, 1, 0, stream, 0, 0)


@tp.jit
def _scale_into(out, x, factor):
    i = tp.cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * factor


def _set_args_rows(row, drv, sync) -> None:
    """``node.set_args`` and what it is made of, down to the bare driver call."""
    from tensorplay.cuda.kernel_nodes import pack_args

    n = 1 << 16
    x, y, out = tp.ones(n), tp.zeros(n), tp.empty(n)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        _scale_into[(n // 256, 1, 1), 256](out, x, 2.0)
    (node,) = g.nodes()
    node.set_args(out, y, 2.0)
    setter = g._setters[node.index].setter
    row("tensorplay node.set_args (3 arguments)", host_us(lambda: node.set_args(out, y, 2.0), sync))
    args = (out, y, 2.0)
    row("  checking and packing the arguments", host_us(lambda: pack_args(node._plan, args, "k"), sync))
    packed = pack_args(node._plan, args, "k")
    row("  the setter with packed bytes", host_us(lambda: setter(packed), sync))
    if not hasattr(setter.set, "args"):
        print("the driver gave no entry point for cuGraphExecKernelNodeSetParams: set_args goes through cuda.bindings")
        return
    iexec, inode, ikp = setter.set.args  # the integers the setter passes to the driver's entry point
    exec_, exec_node, kp = drv.CUgraphExec(iexec), drv.CUgraphNode(inode), setter.params
    row("cuGraphExecKernelNodeSetParams, cuda.bindings",
        host_us(lambda: drv.cuGraphExecKernelNodeSetParams(exec_, exec_node, kp), sync))  # fmt: skip
    libcuda = ctypes.CDLL("libcuda.so.1")
    set_params = libcuda.cuGraphExecKernelNodeSetParams_v2
    set_params.argtypes = [ctypes.c_void_p] * 3
    set_params.restype = ctypes.c_int
    row("cuGraphExecKernelNodeSetParams, ctypes into libcuda", host_us(lambda: set_params(iexec, inode, ikp), sync))


def main() -> None:
    if tp.cuda.backend() != "cuda":
        sys.exit("host_breakdown.py measures driver calls: run it on a GPU (TENSORPLAY_BACKEND=cuda)")
    from cuda.bindings import driver as drv

    sync = tp.cuda.synchronize
    rows: list[tuple[str, float, str]] = []

    def row(name: str, us: float, note: str = "") -> None:
        rows.append((name, us, note))
        print(f"{name:58} {us:7.2f} us  {note}", flush=True)

    x, y = tp.rand(1024), tp.rand(1024)
    row("tensorplay x + y (1K float32)", host_us(lambda: x + y, sync))
    func, grid, block, params, _keep = _raw_add(1024)
    stream = tp.cuda.current_stream()._h
    row(
        "cuLaunchKernel, cuda.bindings, handle objects",
        host_us(lambda: drv.cuLaunchKernel(func, grid[0], 1, 1, block[0], 1, 1, 0, stream, params, 0), sync),
    )
    ifunc, istream = int(func), int(stream)
    row(
        "cuLaunchKernel, cuda.bindings, integer handles",
        host_us(lambda: drv.cuLaunchKernel(ifunc, grid[0], 1, 1, block[0], 1, 1, 0, istream, params, 0), sync),
    )
    try:  # a launch configuration built once: fewer arguments to convert per call
        cfg = drv.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
        cfg.sharedMemBytes, cfg.hStream, cfg.numAttrs = 0, stream, 0
        row("cuLaunchKernelEx, cuda.bindings, configuration built once",
            host_us(lambda: drv.cuLaunchKernelEx(cfg, func, params, 0), sync))  # fmt: skip
    except Exception as e:  # report, go on with the other rows
        print(f"cuLaunchKernelEx: {type(e).__name__}: {e}")
    row("cuLaunchKernel, no parameters (kernelParams=0)", host_us(_no_param_launch(drv, stream), sync))
    libcuda = ctypes.CDLL("libcuda.so.1")
    launch = libcuda.cuLaunchKernel
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    launch.restype = ctypes.c_int
    row(
        "cuLaunchKernel, ctypes into libcuda",
        host_us(lambda: launch(ifunc, grid[0], 1, 1, block[0], 1, 1, 0, istream, params, None), sync),
    )
    row("cuStreamIsCapturing", host_us(lambda: drv.cuStreamIsCapturing(stream), sync))
    row("cuStreamSynchronize (idle stream)", host_us(lambda: drv.cuStreamSynchronize(stream), sync))

    flag = tp.ones(1, dtype=tp.bool)
    row("tensorplay flag.item() (1 bool)", host_us(flag.item, sync, n=500))
    pageable = np.empty(1, np.bool_)
    row(
        "cuMemcpyDtoHAsync 1 byte to pageable + cuStreamSynchronize",
        host_us(
            lambda: (
                drv.cuMemcpyDtoHAsync(pageable.ctypes.data, flag._ptr, 1, stream),
                drv.cuStreamSynchronize(stream),
            ),
            sync,
            n=500,
        ),  # fmt: skip
    )
    pinned_ptr = drv.cuMemHostAlloc(64, 0)[1]
    row(
        "cuMemcpyDtoHAsync 1 byte to pinned + cuStreamSynchronize",
        host_us(
            lambda: (drv.cuMemcpyDtoHAsync(pinned_ptr, flag._ptr, 1, stream), drv.cuStreamSynchronize(stream)),
            sync,
            n=500,
        ),  # fmt: skip
    )
    row("np.empty(1, bool)", host_us(lambda: np.empty(1, np.bool_), sync))
    try:
        _set_args_rows(row, drv, sync)
    except Exception as e:  # report, go on with the other rows
        print(f"set_args rows: {type(e).__name__}: {e}")

    torch = peer("torch")
    if torch is not None:
        a, b = torch.rand(1024, device="cuda"), torch.rand(1024, device="cuda")
        row("torch a + b (1K float32)", host_us(lambda: a + b, torch.cuda.synchronize))
        t = torch.ones(1, dtype=torch.bool, device="cuda")
        row("torch t.item() (1 bool)", host_us(t.item, torch.cuda.synchronize, n=500))
    drv.cuMemFreeHost(pinned_ptr)


if __name__ == "__main__":
    main()
