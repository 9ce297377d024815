"""Kernels on the simulator: a compiled kernel's launcher runs it in Numba's
CUDA simulator on views of simulated device memory (``SimBackend.view``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import too_many_cooperative_blocks
from .kernel_names import refuse_grid_sync_with_set_conditional, syncs_grid
from .params import POINTER, pack_pointer, param_formats
from .simplain import memory_array, pointer_array, run_kernel

if TYPE_CHECKING:
    from .sim import SimBackend

__all__ = ["SimLauncher"]


class SimLauncher:
    """Runs a kernel in Numba's simulator on views of simulated device memory."""

    __slots__ = ("name", "kernel", "argtypes", "cooperative", "_backend", "_dispatcher", "_arrays", "_formats")

    def __init__(self, backend: SimBackend, dispatcher, argtypes) -> None:
        from numba.cuda import types
        from numba.np.numpy_support import as_dtype

        fn = getattr(dispatcher, "fn", dispatcher)
        self.name = getattr(fn, "__qualname__", None) or repr(dispatcher)
        self.kernel = dispatcher
        self.argtypes = tuple(argtypes)
        self._backend = backend
        self._dispatcher = dispatcher
        self._arrays = [  # per parameter: (dtype, ndim) of an array, (dtype, None) of an element pointer
            (as_dtype(t.dtype), getattr(t, "ndim", None)) if isinstance(t, (types.Array, types.CPointer)) else None
            for t in argtypes
        ]
        self._formats = param_formats(argtypes)
        refuse_grid_sync_with_set_conditional(self.name, dispatcher)  # as the GPU's linker does
        self.cooperative = syncs_grid(dispatcher)

    def max_cooperative_blocks(self, threads: int, shared_bytes: int = 0) -> tuple[int, str]:
        """One: Numba's simulator synchronises a grid of one block (the driver's launcher says more)."""
        return 1, "the simulator synchronises a grid of one block only"

    def __call__(self, grid, block, stream, args, shared_bytes=0) -> None:
        self._backend.enqueue(stream, "kernel", self.run_for(grid, block, args, shared_bytes), self.label(grid, block))

    def label(self, grid, block) -> str:
        return f"{self.name}\\n<<<{grid}, {block}>>>"

    def run_for(self, grid, block, args, shared_bytes=0):
        """The launch as a function of no arguments (run now, or a graph node)."""
        if type(grid) is not tuple or type(block) is not tuple:  # the driver's launcher reads 3 of each
            raise TypeError(f"launching {self.name}: grid and block must be 3-tuples, got {grid!r} and {block!r}")
        if self.cooperative and grid != (1, 1, 1):
            raise too_many_cooperative_blocks(self.name, grid[0] * grid[1] * grid[2], *self.max_cooperative_blocks(0))

        backend = self._backend
        fake = [
            a if spec is None else _fake_array(backend, a, *spec) for spec, a in zip(self._arrays, args, strict=True)
        ]
        dispatcher = self._dispatcher

        def run() -> None:
            run_kernel(dispatcher, grid, block, shared_bytes, fake)

        return run

    def pack(self, args) -> bytes:
        """The parameter bytes of ``args``, as the driver's launcher packs them."""
        return b"".join(
            packing.pack(*a._karray)
            if is_array
            else pack_pointer(a)
            if packing is POINTER
            else packing.pack(dtype.type(a))
            for (is_array, packing, dtype), a in zip(self._formats, args, strict=True)
        )

    def unpack(self, data: bytes) -> list:
        args, offset = [], 0
        for is_array, packing, dtype in self._formats:
            values = packing.unpack_from(data, offset)
            if is_array:
                args.append(_Packed(values))
            else:  # an element pointer's address stays a Python int
                args.append(values[0] if packing is POINTER else dtype.type(values[0]))
            offset += packing.size
        return args

    def launch_packed(self, grid, block, stream, data: bytes, shared_bytes=0) -> None:
        """Launch with every parameter already packed (the ops' fast path)."""
        self(grid, block, stream, self.unpack(data), shared_bytes)


def _fake_array(backend, a, dtype, ndim):
    """The simulator array a kernel parameter stands for: an array's, or for an
    element pointer (``ndim`` None) the elements from its address to the end of
    the allocation (a kernel reads as many as it knows it may)."""
    if ndim is None:
        return pointer_array(backend, a if type(a) is int else a._karray[4], dtype)
    return memory_array(backend, a._karray, ndim, dtype)


class _Packed:
    __slots__ = ("_karray",)

    def __init__(self, karray: tuple) -> None:
        self._karray = karray
