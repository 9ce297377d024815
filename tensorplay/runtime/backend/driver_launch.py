"""Kernel launches on the driver: a ``Launcher`` per compiled Numba kernel
launches it through ``cuLaunchKernel`` with its parameters packed into a
pre-built buffer per thread, which skips Numba's dispatcher (20-100 us a launch)."""

from __future__ import annotations

import ctypes
import threading

from cuda.bindings import driver as drv

from .driver_calls import fail
from .driver_overlap import register_waiting
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


KERNEL_NAMES: dict[str, str] = {}  # mangled name -> Python qualified name, for DOT


def kernel_name(dispatcher) -> str:
    """The Python qualified name of a Numba kernel."""
    fn = getattr(dispatcher, "py_func", dispatcher)
    return getattr(fn, "__qualname__", None) or repr(dispatcher)


class Launcher:
    """Launches one compiled Numba kernel with pre-packed parameters."""

    __slots__ = ("name", "kernel", "argtypes", "waits", "_func", "_packers", "_nbytes", "_local")

    def __init__(self, dispatcher, argtypes) -> None:
        self.kernel = dispatcher
        self.argtypes = tuple(argtypes)
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
        err = drv.cuLaunchKernel(
            self._func, grid[0], grid[1], grid[2], block[0], block[1], block[2],
            shared_bytes, stream, addr, 0,
        )[0]  # fmt: skip
        if err:
            raise fail(f"cuLaunchKernel({self.name})", err)
