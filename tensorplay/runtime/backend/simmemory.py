"""The simulator's device memory: host memory behind integer addresses.

``SimMemory`` (``SimBackend``'s base) allocates NumPy buffers aligned as the
driver's allocations are, keeps their addresses sorted so that any address
finds its buffer, counts the bytes in use against the simulated device's
memory (``TENSORPLAY_SIM_MEMORY``), admits host memory another library owns
(a NumPy array shared through DLPack), and gives NumPy views of all of it to
kernels and copies. It knows nothing of streams or captures: ``SimBackend``
adds the capture rules (a ``cuMemFree`` during a capture) and the copies.
"""

from __future__ import annotations

import bisect
import ctypes
import itertools
import os
import threading

import numpy as np

from .errors import CudaError

__all__ = ["DEFAULT_MEMORY", "MEMORY_VARIABLE", "SimMemory", "memory_size"]

_ALIGN = 256
MEMORY_VARIABLE = "TENSORPLAY_SIM_MEMORY"
DEFAULT_MEMORY = 1 << 34  # the simulated device's memory unless MEMORY_VARIABLE says otherwise
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def memory_size(text: str) -> int:
    """The bytes ``text`` names: a whole number, optionally followed by K, M, G
    or T (powers of 1024; ``KiB``, ``MB`` and the like are read alike), as in
    ``TENSORPLAY_SIM_MEMORY=8G``."""
    t = text.strip().upper()
    t = t[:-2] if t.endswith("IB") else t.removesuffix("B")
    unit = t[-1:] if t[-1:] in _UNITS else ""
    number = t[: len(t) - len(unit)].strip()
    if not number.isdigit() or int(number) == 0:
        raise ValueError(
            f"{MEMORY_VARIABLE} must be the simulated device's memory as a positive whole number of bytes, "
            f"optionally followed by K, M, G or T (e.g. 8G), got {text!r}"
        )
    return int(number) * _UNITS[unit]


def _illegal_address(ptr: int) -> CudaError:
    return CudaError.from_result(f"access to address {ptr:#x}", "CUDA_ERROR_ILLEGAL_ADDRESS")


class SimMemory:
    """Simulated device memory (mixed into ``SimBackend``): allocations, host
    memory adopted from other libraries, and NumPy views of either."""

    def __init__(self) -> None:
        self._buffers: dict[int, np.ndarray] = {}  # base address -> its bytes
        self._used = 0  # bytes of the live allocations
        self.memory = memory_size(os.environ.get(MEMORY_VARIABLE, str(DEFAULT_MEMORY)))
        self._bases: list[int] = []  # the allocations' base addresses, sorted
        self._foreign: dict[int, tuple[int, np.ndarray]] = {}  # token -> (base, bytes)
        self._lock = threading.RLock()
        self._tokens = itertools.count(1)

    @property
    def memory(self) -> int:
        """The simulated device's memory in bytes (``TENSORPLAY_SIM_MEMORY``,
        16 GiB unless it says otherwise): an allocation that would take the
        live allocations past it fails with the driver's out-of-memory error.
        Settable, e.g. to test what a program does when memory runs out."""
        return self._memory

    @memory.setter
    def memory(self, nbytes: int) -> None:
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes <= 0:
            raise ValueError(f"expected the simulated device's memory as a positive int of bytes, got {nbytes!r}")
        self._memory = int(nbytes)

    def mem_alloc(self, nbytes: int) -> int:
        # More than the simulated device has left, or than the host gives, is
        # the driver's out-of-memory error, never NumPy's MemoryError.
        with self._lock:
            fits = self._used + nbytes <= self._memory
            if fits:
                self._used += nbytes  # taken now, so that two threads cannot both fit in the last bytes
        buf = None
        if fits:
            try:
                buf = np.empty(nbytes + _ALIGN, np.uint8)
            except MemoryError:
                with self._lock:
                    self._used -= nbytes
        if buf is None:
            raise CudaError.from_result(f"cuMemAlloc({nbytes})", "CUDA_ERROR_OUT_OF_MEMORY")
        ptr = (buf.ctypes.data + _ALIGN - 1) // _ALIGN * _ALIGN
        buf[:] = 0xA5  # poison, as fresh device memory holds garbage
        with self._lock:
            self._buffers[ptr] = buf[ptr - buf.ctypes.data :][:nbytes]
            bisect.insort(self._bases, ptr)
        return ptr

    def mem_free(self, ptr: int) -> None:
        with self._lock:
            buf = self._buffers.pop(ptr, None)
            if buf is None:
                raise CudaError.from_result("cuMemFree", "CUDA_ERROR_INVALID_VALUE")
            del self._bases[bisect.bisect_left(self._bases, ptr)]
            self._used -= buf.nbytes

    def mem_info(self) -> tuple[int, int]:
        """(free, total) bytes: free is never negative, even on a device set
        smaller than what is in use."""
        total = self._memory
        return max(0, total - self._used), total

    def adopt_foreign(self, ptr: int, nbytes: int) -> int | None:
        """Make ``nbytes`` of host memory at ``ptr`` that this backend did not
        allocate (a NumPy array shared through DLPack) addressable by kernels and
        copies; returns a token for ``release_foreign``, or None when the memory
        lies in simulated device memory. The caller keeps the memory alive."""
        if nbytes <= 0:
            return None
        raw = (ctypes.c_uint8 * nbytes).from_address(ptr)
        with self._lock:
            i = bisect.bisect_right(self._bases, ptr) - 1
            if i >= 0 and ptr + nbytes <= self._bases[i] + self._buffers[self._bases[i]].nbytes:
                return None
            token = next(self._tokens)
            self._foreign[token] = (ptr, np.frombuffer(raw, np.uint8))
        return token

    def release_foreign(self, token: int) -> None:
        with self._lock:
            self._foreign.pop(token, None)

    def _find(self, ptr: int, nbytes: int) -> tuple[int, np.ndarray | None]:
        """The buffer holding ``[ptr, ptr + nbytes)`` and its base address."""
        with self._lock:
            i = bisect.bisect_right(self._bases, ptr) - 1
            if i >= 0:
                base = self._bases[i]
                buf = self._buffers[base]
                if ptr + nbytes <= base + buf.nbytes:
                    return base, buf
            # Foreign ranges may nest or overlap (imports of a[:-1] and a[1:]): the one
            # reaching furthest, so that view_to_end sees every element of each.
            found = [(base + buf.nbytes, base, buf) for base, buf in self._foreign.values() if base <= ptr]
            end, base, buf = max(found, key=lambda f: f[0], default=(0, 0, None))
            if ptr + nbytes <= end:
                return base, buf
        return 0, None

    def view(self, ptr: int, shape, strides, dtype) -> np.ndarray:
        """A NumPy view of simulated device memory at ``ptr``."""
        dtype = np.dtype(dtype)
        lo = hi = 0
        if all(shape):
            for d, s in zip(shape, strides, strict=True):
                lo, hi = lo + min(0, (d - 1) * s), hi + max(0, (d - 1) * s)
            hi += dtype.itemsize
        base, buf = self._find(ptr + lo, hi - lo)
        if buf is None:
            raise _illegal_address(ptr)
        return np.ndarray(tuple(shape), dtype, buffer=buf, offset=ptr - base, strides=tuple(strides))

    def view_to_end(self, ptr: int, dtype) -> np.ndarray:
        """A 1-D NumPy view of simulated device memory from ``ptr`` to the end of
        its allocation."""
        dtype = np.dtype(dtype)
        base, buf = self._find(ptr, dtype.itemsize)
        if buf is None:
            raise _illegal_address(ptr)
        n = (buf.nbytes - (ptr - base)) // dtype.itemsize
        return np.ndarray((n,), dtype, buffer=buf, offset=ptr - base)

    def _bytes(self, ptr: int, nbytes: int) -> np.ndarray:
        return self.view(ptr, (nbytes,), (1,), np.uint8)
