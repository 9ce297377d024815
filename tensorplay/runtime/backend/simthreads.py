"""Races between the threads of one kernel launch, seen on the simulator.

Nothing orders the threads of a launch that never meet (no ``syncthreads``, no
shared memory: the kernels the simulator runs one thread after another,
``simplain``): on a GPU they run in any order, or at once. So two of them
touching one element of a global array, one writing, is a race: the answer
depends on which runs first. While the hazard check is on, such a launch
runs on arrays that note, per element, the thread that wrote it and the
thread that read it, and the second thread to touch it so raises
``HazardError`` with both threads' indices. A store to a row or a slice
(``out[r] = v``) counts as a store to each element it changes. Atomic operations
(``cuda.atomic.*``) are how threads share an element: they are left out;
so is a store that leaves an element as it was (threads filling a broadcast
view with one value, or raising one flag, give the same answer in any order).

Examples
--------
>>> import numpy as np
>>> from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
>>> watch = Watch("kernel k", ("out",))
>>> out = watch.array(FakeCUDAArray(np.zeros(4)), 0)
>>> watch.thread = ((0, 0, 0), (0, 0, 0))
>>> out[1] = 1.0
>>> watch.thread = ((0, 0, 0), (1, 0, 0))
>>> try:
...     out[1] = 2.0
... except HazardError as e:
...     print(e.second)
thread (1, 0, 0) of block (0, 0, 0) writes element (1,) of out (float64[4])
"""

from __future__ import annotations

import numpy as np
from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray, FakeWithinKernelCUDAArray

from .errors import HazardError

__all__ = ["Watch"]


class Watch:
    """The accesses of one launch to its arrays' elements, by address: the
    thread (block, thread indices) that last wrote each, and the one that read it."""

    def __init__(self, kernel: str, params: tuple[str, ...]) -> None:
        self.kernel, self.params = kernel, params
        self.thread: tuple | None = None  # the (block, thread) running
        self.written: dict[int, tuple] = {}
        self.read: dict[int, tuple] = {}  # address -> a thread that read it (None: several)
        self.atomic = 0  # > 0 inside an atomic operation

    def array(self, a: FakeCUDAArray, i: int) -> WatchedArray:
        name = self.params[i] if i < len(self.params) else f"argument {i}"
        return WatchedArray(a, self, name)

    def load(self, address: int, where: str) -> None:
        if self.atomic:
            return
        me = self.thread
        writer = self.written.get(address)
        if writer is not None and writer[0] != me:
            raise self._race(writer, "writes", me, "reads", where)
        if address not in self.read:
            self.read[address] = me
        elif self.read[address] != me:
            self.read[address] = None

    def store(self, address: int, where: str) -> None:
        if self.atomic:
            return
        me = self.thread
        writer = self.written.get(address)
        if writer is not None and writer[0] != me:
            raise self._race(writer, "writes", me, "writes", where)
        reader = self.read.get(address, me)
        if reader != me:  # (None: several threads read it)
            raise self._race((reader, where), "reads", me, "writes", where)
        self.written[address] = (me, where)

    def _race(self, earlier: tuple, did: str, me: tuple, does: str, where: str) -> HazardError:
        first = f"{_thread(earlier[0])} {did} {earlier[1]}"
        second = f"{_thread(me)} {does} {where}"
        return HazardError(
            f"two threads of one launch of {self.kernel} touch the same element with nothing ordering them:\n"
            f"  {first}\n  {second}\n"
            "the threads of a launch run in any order, or at once: give each thread elements of its own, "
            "or combine their values with cuda.atomic operations",
            first,
            second,
        )


def _thread(t: tuple | None) -> str:
    if t is None:
        return "more than one thread"
    block, thread = t
    return f"thread {tuple(thread)} of block {tuple(block)}"


class WatchedArray(FakeWithinKernelCUDAArray):
    """A kernel's array that tells its ``Watch`` of each element read and written."""

    def __init__(self, item: FakeCUDAArray, watch: Watch, name: str) -> None:
        super().__init__(item)
        ary = item._ary
        d = self.__dict__  # (the base class's __setattr__ stores into the array)
        d["_watch"], d["_name"] = watch, name
        d["_base"], d["_shape"], d["_strides"] = ary.__array_interface__["data"][0], ary.shape, ary.strides
        d["_what"] = f"{name} ({ary.dtype}[{', '.join(map(str, ary.shape))}])"

    def _address(self, idx) -> int | None:
        """The address of element ``idx``; None for anything but one element."""
        if not isinstance(idx, tuple):
            idx = (idx,)
        if len(idx) != len(self._shape):
            return None
        address = self._base
        for i, n, stride in zip(idx, self._shape, self._strides, strict=True):
            if not isinstance(i, (int, np.integer)):
                return None
            i = int(i)
            address += (i + n if i < 0 else i) * stride
        return address

    def _where(self, idx) -> str:
        idx = idx if isinstance(idx, tuple) else (idx,)
        return f"element {tuple(int(i) for i in idx)} of {self._what}"

    def __getitem__(self, idx):
        address = self._address(idx)
        if address is None:  # a view: watched too
            item = self._item.__getitem__(idx)
            return WatchedArray(item, self._watch, self._name) if isinstance(item, FakeCUDAArray) else item
        self._watch.load(address, self._where(idx))
        return self._item.__getitem__(idx)

    def __setitem__(self, idx, value) -> None:
        address = self._address(idx)
        if address is None:
            self._store_region(idx, value)
            return
        ary = self._item._ary
        before = ary[idx].tobytes()
        self._item.__setitem__(idx, value)
        if ary[idx].tobytes() != before:  # a store that changes nothing races with nothing
            self._watch.store(address, self._where(idx))

    def _store_region(self, idx, value) -> None:
        """A store to a row or a slice (``out[r] = v``): each element it changes, as a store of its own."""
        ary = self._item._ary
        before = np.array(ary[idx], copy=True)
        self._item.__setitem__(idx, value)
        after = ary[idx]
        if not isinstance(after, np.ndarray):  # one element after all (an index numpy reads as one)
            after, before = np.asarray(after).reshape(1), before.reshape(1)
        changed = _bytes_of(after) != _bytes_of(before)
        if not changed.any():
            return
        positions = np.arange(ary.size).reshape(ary.shape)[idx]  # the parent's flat index of each element
        for flat in np.asarray(positions).reshape(-1)[changed.any(axis=1)]:
            element = tuple(int(i) for i in np.unravel_index(flat, ary.shape))
            self._watch.store(self._address(element), self._where(element))


def _bytes_of(a: np.ndarray) -> np.ndarray:
    """The bytes of each element of ``a`` in C order, a row each."""
    flat = np.ascontiguousarray(a).reshape(-1)
    return flat.view(np.uint8).reshape(flat.size, flat.dtype.itemsize)


class WatchedAtomics:
    """A kernel module's ``cuda.atomic``, whose operations the watch leaves out."""

    def __init__(self, atomic, watch: Watch) -> None:
        self._atomic, self._watch = atomic, watch

    def __getattr__(self, name: str):
        op = getattr(self._atomic, name)
        watch = self._watch

        def atomic(*args, **kwargs):
            watch.atomic += 1
            try:
                return op(*args, **kwargs)
            finally:
                watch.atomic -= 1

        return atomic
