"""Kernel launches on the driver: a ``Launcher`` per compiled Numba kernel
launches it through ``cuLaunchKernel`` with its parameters packed into a
pre-built buffer per thread, which skips Numba's dispatcher (20-100 us a launch).
A kernel that synchronises its whole grid (``cuda.cg.this_grid().sync()``)
goes through ``cuLaunchCooperativeKernel``, which a capture records as a
cooperative kernel node, once its blocks are known to fit on the device at once.
A launch that asks for more dynamic shared memory than a kernel gets by default
(48 KiB) first raises the kernel's limit to it (``cuKernelSetAttribute``)."""

from __future__ import annotations

import ctypes
import threading

from cuda.bindings import driver as drv

from .driver_calls import check, fail
from .driver_overlap import register_waiting
from .errors import too_many_cooperative_blocks
from .kernel_names import refuse_grid_sync_with_set_conditional
from .params import POINTER, pack_pointer, param_formats

__all__ = ["KERNEL_NAMES", "Launcher", "kernel_name"]


# -- kernel parameter packing ------------------------------------------------


def _param_packers(argtypes) -> tuple[list, int]:
    """One packer per kernel parameter (None for arrays, which bring their own
    ``_kbytes``; an element pointer packs an array's data address) and the total
    size in bytes."""
    formats = param_formats(argtypes)
    packers = [
        None if is_array else pack_pointer if packing is POINTER else packing.pack for is_array, packing, _ in formats
    ]
    return packers, sum(packing.size for _, packing, _ in formats)


DEFAULT_SHARED_BYTES = 48 << 10  # dynamic shared memory a kernel may take without opting in
# The dynamic shared memory each kernel (CUkernel handle) has been allowed, raised and never lowered:
# the limit is the kernel's, and two launchers (argument keys) may launch one compiled kernel.
_SHARED_ALLOWED: dict[int, int] = {}
_SHARED_LOCK = threading.Lock()
KERNEL_NAMES: dict[str, str] = {}  # mangled name -> Python qualified name, for DOT


def kernel_name(dispatcher) -> str:
    """The Python qualified name of a Numba kernel."""
    fn = getattr(dispatcher, "py_func", dispatcher)
    return getattr(fn, "__qualname__", None) or repr(dispatcher)


class Launcher:
    """Launches one compiled Numba kernel with pre-packed parameters."""

    __slots__ = (
        "name", "kernel", "argtypes", "waits", "cooperative",
        "_func", "_packers", "_nbytes", "_local", "_fit", "_context_func", "_shared_allowed",
    )  # fmt: skip

    def __init__(self, dispatcher, argtypes) -> None:
        self.kernel = dispatcher
        self.argtypes = tuple(argtypes)
        refuse_grid_sync_with_set_conditional(kernel_name(dispatcher), dispatcher)  # the linker would crash
        kernel = dispatcher.compile(tuple(argtypes))
        kernel.bind()
        cufunc = kernel._codelibrary.get_cufunc()
        self.name = kernel_name(dispatcher)
        KERNEL_NAMES[cufunc.name] = self.name
        self._func = drv.CUfunction(int(cufunc.handle))
        self.waits = bool(getattr(dispatcher, "tp_waits_for_prior_grids", False))  # kernels/_dependency.py
        if self.waits:
            register_waiting(self._func)
        self._packers, self._nbytes = _param_packers(argtypes)
        self._local = threading.local()
        self.cooperative = bool(getattr(kernel, "cooperative", False))  # Numba saw a grid-wide sync in it
        self._fit: dict = {}  # (threads, shared bytes) -> (blocks at once on the device, how that comes)
        self._context_func = None  # the context's CUfunction of the library kernel, once asked for
        self._shared_allowed = DEFAULT_SHARED_BYTES  # dynamic shared memory a launch may ask for

    def context_function(self):
        """The context's CUfunction of the kernel: Numba loads kernels as library
        CUkernels, which ``cuLaunchKernel`` takes in place of one and other calls do not."""
        if self._context_func is None:
            kernel = drv.CUkernel(int(self._func))
            self._context_func = check("cuKernelGetFunction", drv.cuKernelGetFunction(kernel))
        return self._context_func

    def max_cooperative_blocks(self, threads: int, shared_bytes: int = 0) -> tuple[int, str]:
        """The most blocks of ``threads`` threads that are on the device at once, and how that comes."""
        fit = self._fit.get((threads, shared_bytes))
        if fit is None:
            self._allow_shared(shared_bytes)
            per_sm = check(
                "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(self.context_function(), threads, shared_bytes),
            )
            device = check("cuCtxGetDevice", drv.cuCtxGetDevice())
            count = drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
            sms = check("cuDeviceGetAttribute", drv.cuDeviceGetAttribute(count, device))
            fit = self._fit[threads, shared_bytes] = (per_sm * sms, f"{per_sm} a multiprocessor, {sms} of them")
        return fit

    def _buffers(self):
        # One buffer per thread: the driver reads it during cuLaunchKernel,
        # which runs without the GIL. The bytearray is never resized, so the
        # addresses in the pointer table stay valid.
        bufs = getattr(self._local, "bufs", None)
        if bufs is None:
            data = bytearray(max(self._nbytes, 8))
            base = ctypes.addressof((ctypes.c_char * len(data)).from_buffer(data))
            nslots = self._nbytes // 8
            ptrs = (ctypes.c_uint64 * max(nslots, 1))(*[base + 8 * i for i in range(nslots)])
            bufs = self._local.bufs = (data, ptrs, ctypes.addressof(ptrs))
        return bufs

    def __call__(self, grid, block, stream, args, shared_bytes=0) -> None:
        self.launch_packed(grid, block, stream, self.pack(args), shared_bytes)

    def pack(self, args) -> bytes:
        """The parameter bytes of ``args`` (arrays as ``KernelArray``s)."""
        return b"".join([a._kbytes if pack is None else pack(a) for pack, a in zip(self._packers, args, strict=True)])

    def launch_packed(self, grid, block, stream, packed: bytes, shared_bytes=0) -> None:
        """Launch with every parameter already packed (the ops' fast path)."""
        data, _, addr = self._buffers()
        data[: self._nbytes] = packed
        if shared_bytes > self._shared_allowed:
            self._allow_shared(shared_bytes)
        if self.cooperative:
            self._launch_cooperative(grid, block, stream, addr, shared_bytes)
            return
        err = drv.cuLaunchKernel(
            self._func, grid[0], grid[1], grid[2], block[0], block[1], block[2],
            shared_bytes, stream, addr, 0,
        )[0]  # fmt: skip
        if err:
            raise fail(f"cuLaunchKernel({self.name})", err)

    def _allow_shared(self, shared_bytes: int) -> None:
        """Raise the kernel's dynamic shared memory limit to ``shared_bytes`` where it is lower
        (the launch's size was checked against the device's opt-in limit before)."""
        if shared_bytes <= self._shared_allowed:
            return
        key = int(self._func)
        with _SHARED_LOCK:
            allowed = _SHARED_ALLOWED.get(key, DEFAULT_SHARED_BYTES)
            if shared_bytes > allowed:
                device = check("cuCtxGetDevice", drv.cuCtxGetDevice())
                attribute = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                err = drv.cuKernelSetAttribute(attribute, shared_bytes, drv.CUkernel(key), device)[0]
                if err:
                    raise fail(
                        f"cuKernelSetAttribute({self.name}, {shared_bytes} bytes of dynamic shared memory: with the "
                        "kernel's static shared memory, at most the device's opt-in limit)",
                        err,
                    )
                allowed = _SHARED_ALLOWED[key] = shared_bytes
            self._shared_allowed = allowed

    def _launch_cooperative(self, grid, block, stream, addr, shared_bytes) -> None:
        blocks = grid[0] * grid[1] * grid[2]
        most, why = self.max_cooperative_blocks(block[0] * block[1] * block[2], shared_bytes)
        if blocks > most:
            raise too_many_cooperative_blocks(self.name, blocks, most, why)
        err = drv.cuLaunchCooperativeKernel(
            self.context_function(), grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_bytes, stream, addr
        )[0]
        if err:
            raise fail(f"cuLaunchCooperativeKernel({self.name})", err)
