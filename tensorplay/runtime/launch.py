"""The fast launch path: one compiled kernel per (kernel, argument types).

Numba's dispatcher types every argument on every call (20-100 us). Here the
argument types are summarised by cheap keys, the compiled kernel and its packed
parameter layout are resolved once per key by the backend, and later launches
only pack values and call the driver.
"""

from __future__ import annotations

import struct

import numpy as np

from .backend import get as get_backend
from .backend.params import array_struct
from .caches import BoundedCache
from .capture import capture_state, current_fuser, flush_fused, note_body_launch, refuse_legacy_launch
from .hazards import checking, kernel_launched
from .hazards.ops import user_line
from .streams import current_stream

__all__ = [
    "ArrayArg", "KernelArray", "grid_1d", "grid_groups", "grid_rows", "grid_tiles", "launch", "launch_packed",
    "launcher_for", "layout_packer", "numba_type", "pointer_key", "relaunched",
]  # fmt: skip

_launchers = BoundedCache("launch.launchers", 16384)  # (kernel, argument keys...) -> the backend's launcher


class KernelArray:
    """Anything passed to a kernel as an array.

    Subclasses provide ``_kkey`` (dtype name, ndim, C-contiguous) and
    ``_karray``: Numba's array parameters (meminfo, parent, nitems, itemsize,
    data pointer, shape..., strides in bytes...); ``_kbytes`` packs them.
    """

    __slots__ = ()

    @property
    def _kbytes(self) -> bytes:
        k = self._karray
        return array_struct((len(k) - 5) // 2).pack(*k)


_PACK_PTR = struct.Struct("<q").pack


def layout_packer(arg: KernelArray):
    """A function packing any array laid out as ``arg`` (same dtype, shape and
    strides) from its own data pointer: the slots around the pointer are fixed."""
    k = arg._karray
    before, after = struct.pack("<4q", *k[:4]), struct.pack(f"<{len(k) - 5}q", *k[5:])
    return lambda t: before + _PACK_PTR(t._ptr) + after


class ArrayArg(KernelArray):
    """A raw array description for a kernel (no Tensor needed)."""

    __slots__ = ("_karray", "_kkey")

    def __init__(self, ptr: int, shape, strides_bytes, dtype_name: str, itemsize: int, contig: bool):
        n = 1
        for d in shape:
            n *= d
        self._karray = (0, 0, n, itemsize, ptr, *shape, *strides_bytes)
        self._kkey = (dtype_name, len(shape), contig)

    @classmethod
    def contiguous(cls, shape, dtype_name: str, itemsize: int, ptr: int = 0) -> ArrayArg:
        """A C-contiguous array of ``shape`` (with no data by default: for
        launch keys and packers of arrays made later)."""
        strides, step = [], itemsize
        for d in reversed(shape):
            strides.append(step)
            step *= max(d, 1)
        return cls(ptr, shape, strides[::-1], dtype_name, itemsize, True)


def pointer_key(dtype_name: str) -> tuple[str, str]:
    """The launch key of an element pointer: a ``CPointer`` parameter, 8 bytes
    where an array takes 56 (``runtime/backend/params.py``), for operands whose
    size the kernel knows from another parameter (the flat kernels' inputs)."""
    return (dtype_name, "*")


def numba_type(key):
    """The Numba type for a launch key element (an array key, a pointer key or a
    scalar type). A bfloat16 array is its bits, a uint16 array (Numba's
    simulator has no bfloat16)."""
    from numba.cuda import types
    from numba.cuda.np.numpy_support import from_dtype

    if isinstance(key, tuple):
        element = from_dtype(np.dtype("uint16" if key[0] == "bfloat16" else key[0]))
        if key[1] == "*":
            return types.CPointer(element)
        return types.Array(element, key[1], "C" if key[2] else "A")
    if key is bool:
        return types.boolean
    if key is int:
        return types.int64
    if key is float:
        return types.float64
    return from_dtype(np.dtype(key))


def _launcher(key):
    kernel, argkeys = key[0], key[1:]
    argtypes = tuple(numba_type(k) for k in argkeys)
    return _launchers.put(key, get_backend().launcher(kernel, argtypes))


def resolve(kernel, argkeys):
    """The launcher of ``kernel`` for arguments summarised by ``argkeys``."""
    key = (kernel, *argkeys)
    return _launchers.get(key) or _launcher(key)


def launch(kernel, grid, block, args, stream=None, shared_bytes: int = 0) -> None:
    """Launch a ``numba.cuda.jit`` kernel on ``stream`` (the current one if None).

    ``grid`` and ``block`` are 3-tuples; array arguments are ``KernelArray``s,
    scalars are Python or NumPy numbers (their type picks the signature).
    """
    launch_with(launcher_for(kernel, args), grid, block, args, stream, shared_bytes)


def launcher_for(kernel, args):
    """The launcher of ``kernel`` for ``args`` (as ``launch`` takes them)."""
    key = (kernel, *[a._kkey if isinstance(a, KernelArray) else type(a) for a in args])
    return _launchers.get(key) or _launcher(key)


def launch_with(launcher, grid, block, args, stream=None, shared_bytes: int = 0) -> None:
    """Launch through a launcher from ``resolve`` (arguments must match its keys)."""
    s = launch_stream(launcher.name, stream)
    fuser = current_fuser() if capture_state.fusers else None
    if fuser is not None:  # tp.compile notes what its function may have written
        fuser.note_written(_array_pointers(args))
    launcher(grid, block, s._h, args, shared_bytes)
    if capture_state.active:  # what a capture notes of its launches: one test for eager work
        if capture_state.bodies:
            note_body_launch(s.handle, lambda: _array_pointers(args))
        if capture_state.recorders:
            _record(launcher, grid, block, s, shared_bytes)
    if checking.on:  # tp.cuda.sanitize()
        kernel_launched(launcher, s._h, args)


def launch_packed(launcher, grid, block, params: bytes) -> None:
    """Launch on the current stream with every parameter already packed (the ops'
    plans), refusing the legacy default stream during a capture."""
    s = current_stream()
    if capture_state.active:  # inline: no call while nothing captures, nor for a capture's usual launch
        if not s.handle:  # the legacy default stream, which a capture may miss
            refuse_legacy_launch(launcher.name, s)
        if capture_state.fusers:
            flush_fused()
    launcher.launch_packed(grid, block, s._h, params)
    if capture_state.active:  # as in launch_with
        if capture_state.bodies:  # every array parameter is 8-byte slots, its data pointer one of them
            note_body_launch(s.handle, lambda: np.frombuffer(params, np.uint64, len(params) // 8).tolist())
        if capture_state.recorders:
            _record(launcher, grid, block, s)
    if checking.on:  # tp.cuda.sanitize()
        kernel_launched(launcher, s._h, None, params)


def _array_pointers(args) -> list[int]:
    """The data pointers of a launch's array arguments."""
    return [a._karray[4] for a in args if isinstance(a, KernelArray)]


def _record(launcher, grid, block, s, shared_bytes: int = 0) -> None:
    """Note a kernel launched into a capture on its own stream: the node the
    backend added, its launch shape and dynamic shared memory (what ``set_args``
    launches it with), and the caller outside tensorplay that launched it (its
    file and line, formatted when ``CUDAGraph.nodes()`` asks). Runs once per
    captured kernel: a frame of the package's files is known by a set lookup."""
    record = capture_state.recorders.get(s.handle)
    if record is None:
        return
    record.append((get_backend().captured_node(s._h), launcher, grid, block, shared_bytes, user_line(2)))


def relaunched(s, node, launcher) -> None:
    """The kernel node ``node``, the last captured on ``s``, now runs ``launcher``'s
    kernel (``cuda/conditional.py`` swapped it): what ``CUDAGraph.nodes()`` gives
    of it, and ``set_args`` packs, follows."""
    record = capture_state.recorders.get(s.handle)
    if record and record[-1][0] == node:
        record[-1] = (node, launcher, *record[-1][2:])


def launch_stream(kernel_name: str, stream=None):
    """The stream to launch on (the current one if None), refusing the legacy
    default stream while a graph is being captured."""
    s = stream or current_stream()
    if capture_state.active:  # as in launch_packed
        if not s.handle:
            refuse_legacy_launch(kernel_name, s)
        if capture_state.fusers:
            flush_fused()
    return s


_limits: list = []  # (max_block, max_threads_per_launch, max_grid_threads), read once
_grids = BoundedCache("launch.grids", 4096)  # (n, block) -> launch shape


def _read_limits() -> None:
    if not _limits:
        dev = get_backend()
        _limits.extend((dev.max_block, dev.max_threads_per_launch, dev.max_grid_threads))


def grid_rows(nrows: int, inner: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """Grid and block for kernels walking ``nrows`` rows of ``inner`` items: a
    block row of whole warps per row (at most 256 threads), rows of a block side
    by side, a block row per row up to the launch limit (then they loop). When
    that is less than a wave of blocks, ``gridDim.y`` blocks share each row."""
    _read_limits()
    bx = min(256, _limits[0], -(-inner // 32) * 32)
    by = max(1, min(256, _limits[0]) // bx)
    blocks = max(1, min(-(-nrows // by), _limits[2] // (bx * by)))
    wave = max(1, _limits[1] // (bx * by))
    share = max(1, min(-(-inner // (4 * bx)), -(-wave // blocks), 65535))  # four items per thread at least
    return (blocks, share, 1), (bx, by, 1)


def grid_tiles(nrows: int, ncols: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """Grid and block for 32 x 32 tiles of an ``nrows`` x ``ncols`` output: a
    block of 32 x 8 threads per tile, up to the launch limit (then they loop)."""
    _read_limits()
    cap = max(1, _limits[2] // 256)
    tiles_c, tiles_r = -(-ncols // 32), -(-nrows // 32)
    gx = max(1, min(tiles_c, cap, 65535))
    gy = max(1, min(tiles_r, cap // gx, 65535))
    return (gx, gy, 1), (32, 8, 1)


GROUP_BLOCK = 256  # threads a block of grid_groups


def grid_groups(n: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """Grid and block giving a thread to each group of four of ``n`` items (the
    flat kernels' ``flat_exact`` layout, which does not loop)."""
    shape = _grids.get((n, "groups"))
    if shape is None:
        groups = -(-n // 4)
        threads = min(GROUP_BLOCK, max(32, -(-groups // 32) * 32))
        shape = _grids.put((n, "groups"), ((-(-groups // threads), 1, 1), (threads, 1, 1)))
    return shape


def grid_1d(n: int, block: int = 256) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """Grid and block for a grid-stride loop over ``n`` items.

    On the GPU the grid has a thread per 4 items (one pass of the unrolled flat
    kernels; 15% more bandwidth on the H200 than one wave of threads looping),
    and at least one wave of threads.
    """
    shape = _grids.get((n, block))
    if shape is None:
        _read_limits()
        threads = min(block, _limits[0], max(32, -(-n // 32) * 32))  # small n: one small block
        cap = min(max(_limits[1], -(-n // 4)), _limits[2])
        blocks = max(1, min(-(-n // threads), cap // threads))
        shape = _grids.put((n, block), ((blocks, 1, 1), (threads, 1, 1)))
    return shape
