"""The caching allocator: device memory reused per stream and per graph pool.

Blocks are rounded up to a size class and, once freed, kept on a free list for
the stream they were used on (stream order makes reuse there safe without any
synchronisation). A block that was also used on other streams
(``record_stream``) goes back to the free lists only when events recorded on
those streams at free time have completed; the allocator polls them, it never
synchronises the device.

Allocations made while a stream captures a graph go to that graph's private
pool: pool memory serves only allocations into the same pool, so it is never
handed to anyone else while a graph that replays into it lives. A graph
replays on whichever stream it is launched on, so a pool's blocks freed
outside a capture serve any stream; a block freed while a capture into its pool
is in progress serves only the stream that last allocated it, as the captured
work of two streams forked from one capture is ordered only where they join,
and serves any stream again once the pool's last capture has ended (else each
capture on a new stream would leave a block behind for that stream alone).
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict

from . import streams
from .backend import CudaError
from .backend import get as get_backend
from .caches import BoundedCache
from .capture import capture_state, refuse_empty_cache, wait_for_device_unless_capturing
from .streams import Event, Stream

__all__ = [
    "Block",
    "allocator",
    "empty_cache",
    "max_memory_allocated",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "reset_peak_memory_stats",
]

DEFAULT_POOL = 0
_SMALL = 1 << 20  # blocks up to 1 MiB round to a power of two
_LARGE_ROUND = 2 << 20  # larger ones to a multiple of 2 MiB


def round_size(nbytes: int) -> int:
    """The size class a request of ``nbytes`` is served from."""
    if nbytes <= 512:
        return 512
    if nbytes <= _SMALL:
        return 1 << (nbytes - 1).bit_length()
    return -(-nbytes // _LARGE_ROUND) * _LARGE_ROUND


_SIZES = BoundedCache("memory.size_classes", 65536)  # request -> size class, for the sizes seen


def _size_class(nbytes: int) -> int:
    return _SIZES.put(nbytes, round_size(nbytes))


class Block:
    """One device allocation of ``size`` bytes at ``ptr``."""

    __slots__ = ("ptr", "size", "pool", "stream_key", "free_list", "requested", "other_streams", "capture")

    def __init__(self, ptr: int, size: int, pool, stream_key: int) -> None:
        self.ptr, self.size, self.pool, self.stream_key = ptr, size, pool, stream_key
        self.free_list = (pool, stream_key, size)  # its key in the allocator's free lists
        self.requested = 0
        self.other_streams: set | None = None
        self.capture = None  # the token of the capture that allocated it, while live


class Counts:
    """The allocator's counters, plain attributes on the allocation path;
    ``as_stats()`` gives them under the names of ``memory_stats()``."""

    __slots__ = (
        "allocated", "allocated_peak", "reserved", "reserved_peak", "requested",
        "allocs", "frees", "device_allocs", "device_frees", "alloc_retries",
    )  # fmt: skip

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, 0)

    def as_stats(self) -> dict[str, int]:
        return {
            "allocated_bytes.current": self.allocated,
            "allocated_bytes.peak": self.allocated_peak,
            "reserved_bytes.current": self.reserved,
            "reserved_bytes.peak": self.reserved_peak,
            "requested_bytes.current": self.requested,
            "active_blocks.current": self.allocs - self.frees,
            "num_allocs": self.allocs,
            "num_frees": self.frees,
            "num_device_allocs": self.device_allocs,
            "num_device_frees": self.device_frees,
            "num_alloc_retries": self.alloc_retries,
            "num_cache_hits": self.allocs - self.device_allocs,  # every miss allocates on the device
        }


class CachingAllocator:
    def __init__(self) -> None:
        self._free: dict[tuple, list[Block]] = defaultdict(list)
        self._pending: list[tuple[Block, list]] = []  # blocks waiting on events
        self._deferred: list[Block] = []  # freed during a capture, their events not yet recorded
        self._capture_pools: dict[int, object] = {}  # stream key -> pool during capture
        self._capture_tokens: dict[int, object] = {}  # stream key -> capture token
        self._capture_ids: dict[int, int] = {}  # stream key -> the driver's id of its capture
        self._routes: dict[int, tuple] = {}  # capture id -> (pool, token), for streams that join it
        self._live_by_capture: dict[object, set] = {}  # capture token -> live blocks
        self._held: dict[object, dict] = {}  # capture token -> what its kernels' arguments need alive, by id
        self._pool_users: dict[object, int] = defaultdict(int)  # pool -> captures and graphs
        self._dead_pools: set = set()  # pools no graph uses, whose memory goes back to the device
        self._capturing: dict[object, int] = {}  # pool -> streams routed to it (captures in progress)
        # pool bookkeeping, from any thread (not the allocation path, but for a free into a capturing pool)
        self._pools_lock = threading.RLock()
        self._pool_ids = itertools.count(1)
        self.counts = Counts()
        self._reserved: dict[object, int] = defaultdict(int)  # pool -> bytes

    # -- pools -----------------------------------------------------------------
    def new_pool_id(self) -> tuple[int, int]:
        return (0, next(self._pool_ids))

    def route_to_pool(self, stream, pool, token=None) -> None:
        """Send allocations on ``stream``, which captures (it has begun on the
        device), to ``pool`` (None: stop routing), noting them under ``token``
        (see ``live_blocks``). Streams that join its capture later (forked
        through an event) are routed there too."""
        key = stream._key
        with self._pools_lock:  # _capturing counts the routes, for free()
            old = self._capture_pools.pop(key, None)
            if pool is None:
                self._capture_tokens.pop(key, None)
                self._routes.pop(self._capture_ids.pop(key, None), None)
            else:
                self._capturing[pool] = self._capturing.get(pool, 0) + 1
            if old is not None:  # after the new count: a stream routed again shares nothing
                self._stop_capturing(old)
        if pool is None:
            return
        self._capture_pools[key] = pool
        self._capture_tokens[key] = token
        self._live_by_capture.setdefault(token, set())
        capture_id = get_backend().capture_id(stream._h)
        if capture_id:
            self._capture_ids[key] = capture_id
            self._routes[capture_id] = (pool, token)

    def _stop_capturing(self, pool) -> None:
        """One stream stopped capturing into ``pool``; after the last, the pool's
        blocks kept for one stream serve any (under the pools' lock)."""
        n = self._capturing.pop(pool) - 1
        if n:
            self._capturing[pool] = n
            return
        for key in [k for k in list(self._free) if k[0] == pool and k[1]]:
            kept, shared = self._free.pop(key, []), self._free[(pool, 0, key[2])]
            while kept:
                try:  # one at a time, as allocate() pops: a block never lands in two places
                    shared.append(kept.pop())
                except IndexError:
                    break

    def begin_capture(self, stream, pool, token) -> None:
        """A capture on ``stream`` (begun on the device) starts using ``pool``."""
        with self._pools_lock:
            self._pool_users[pool] += 1
            self._dead_pools.discard(pool)  # a pool handle used again
        self.route_to_pool(stream, pool, token)

    def end_capture(self, stream, pool, keep: bool) -> None:
        """The capture on ``stream`` ended; ``keep``: a graph goes on using ``pool``
        (else the capture is discarded: nothing will replay into its memory)."""
        token = self._capture_tokens.get(stream._key)
        self.route_to_pool(stream, None)
        if not keep:
            if token is not None:
                self.forget_capture(token)
            self.release_pool(pool)
        if not capture_state.active:
            self._after_captures()

    def _after_captures(self) -> None:
        """Work that waited for the captures in progress to end."""
        if self._deferred:
            deferred, self._deferred = self._deferred, []
            for block in deferred:
                self._wait_for_other_streams(block)
        if self._dead_pools:
            self._release_dead_pools()

    def release_pool(self, pool) -> None:
        """One graph or capture stopped using ``pool``; once none does, its
        memory goes back to the device (as soon as no capture is in progress)."""
        with self._pools_lock:
            self._pool_users[pool] -= 1
            dead = self._pool_users[pool] <= 0
            if dead:
                del self._pool_users[pool]
                self._dead_pools.add(pool)
        if dead and not capture_state.active:  # not under the pools' lock: see _release_dead_pools
            self._release_dead_pools()

    def _release_dead_pools(self) -> None:
        """Give the cached blocks of unused pools back to the device. A graph
        replay may still be using them: the device is synchronised first (not
        while a capture is in progress, which that would break: then later).
        The capture lock is taken before the pools' lock, in the order a
        capture's begin takes them: the other order let a thread resetting a
        graph and one beginning a capture wait for each other for ever."""
        with capture_state.lock, self._pools_lock:
            dead = set(self._dead_pools)
            if any(key[0] in dead for key, blocks in list(self._free.items()) if blocks):
                if not wait_for_device_unless_capturing(get_backend().synchronize):
                    return
                for pool in dead:
                    self.release_cached(pool)
            for pool in [p for p in dead if not self._reserved.get(p)]:
                self._dead_pools.discard(pool)
                self._reserved.pop(pool, None)

    def forget_capture(self, token) -> None:
        """Stop tracking the blocks of a capture whose graph is gone, and let go
        of what ``hold`` kept for it."""
        for block in self._live_by_capture.pop(token, ()):
            block.capture = None
        self._held.pop(token, None)

    def hold(self, stream, owners) -> None:
        """Keep ``owners`` (memory a kernel captured on ``stream`` uses: objects
        with a ``block``, an allocator Block or None for foreign memory) alive as
        long as the graph of that capture; nothing when ``stream`` captures none.
        Memory the capture allocated itself is the graph's already (its pool),
        and is not held, so that ``reset()`` can tell when it is free."""
        if not self._capture_tokens:
            return
        token = self._capture_tokens.get(stream._key)
        if token is None and stream._key:  # a stream forked from a capture
            token = self._routes.get(get_backend().capture_id(stream._h), (None, None))[1]
        if token is None:
            return
        held = self._held.setdefault(token, {})
        for owner in owners:
            if owner.block is None or owner.block.capture is not token:
                held[id(owner)] = owner

    def take_held(self, token) -> dict:
        """What ``hold`` kept for the capture ``token``, no longer kept: a capture
        with update=True holds what its own kernels use."""
        return self._held.pop(token, {})

    def restore_held(self, token, held: dict) -> None:
        """Keep ``held`` (from ``take_held``) for ``token`` again, in place of what
        was held since: the update it was taken for did not happen."""
        self._held[token] = held

    def live_blocks(self, token) -> list[Block]:
        """Blocks allocated during the capture ``token`` that are still in use."""
        return list(self._live_by_capture.get(token, ()))

    def pool_reserved(self, pool) -> int:
        return self._reserved.get(pool, 0)

    # -- allocate and free -------------------------------------------------------
    def allocate(self, nbytes: int, stream) -> Block:
        pool, token = DEFAULT_POOL, None
        if self._capture_pools:
            pool = self._capture_pools.get(stream._key, DEFAULT_POOL)
            if pool is not DEFAULT_POOL:  # a pool id is a tuple: no comparison needed
                token = self._capture_tokens[stream._key]
            elif stream._key:  # a stream forked from a capture allocates from its pool
                pool, token = self._routes.get(get_backend().capture_id(stream._h), (DEFAULT_POOL, None))
        size = _SIZES.get(nbytes) or _size_class(nbytes)
        key = (pool, stream._key, size)
        free = self._free.get(key)
        if not free and pool is not DEFAULT_POOL:  # what the pool had before this capture: any stream's
            free = self._free.get((pool, 0, size))
        if not free and self._pending and not capture_state.active:
            self._collect_pending()
            free = self._free.get(key)
        try:  # list.pop is atomic, so two threads never get one block
            block = free.pop()
            if block.stream_key != stream._key:  # a graph pool's, freed outside a capture: now this stream's
                block.stream_key, block.free_list = stream._key, key
        except (AttributeError, IndexError):  # nothing cached for this key
            block = Block(self._device_alloc(size, pool), size, pool, stream._key)
        block.requested = nbytes
        if token is not None:
            block.capture = token
            self._live_by_capture[token].add(block)
        c = self.counts
        c.allocs += 1
        c.requested += nbytes
        cur = c.allocated = c.allocated + size
        if cur > c.allocated_peak:
            c.allocated_peak = cur
        return block

    def free(self, block: Block) -> None:
        c = self.counts
        c.frees += 1
        c.requested -= block.requested
        c.allocated -= block.size
        if block.capture is not None:
            live = self._live_by_capture.get(block.capture)
            if live is not None:
                live.discard(block)
            block.capture = None
        if block.other_streams:
            if capture_state.active:
                # An event recorded now could land in a graph, and none can be
                # queried while a global capture runs: record them after it.
                self._deferred.append(block)
            else:
                self._wait_for_other_streams(block)
            return
        self._file(block)
        if block.pool in self._dead_pools and not capture_state.active:
            self._release_dead_pools()  # the last tensor of a graph that is gone

    def _file(self, block: Block) -> None:
        """Put ``block`` on its free list: its stream's in the default pool; in a
        graph's pool its stream's while a capture into the pool is in progress,
        else the pool's list for any stream (see the module's docstring)."""
        pool = block.pool
        if pool is DEFAULT_POOL:
            self._free[block.free_list].append(block)
        elif pool not in self._capturing:
            self._free[(pool, 0, block.size)].append(block)
        else:  # decided and filed under the lock: not for its stream just after _stop_capturing shared the rest
            with self._pools_lock:
                key = block.free_list if pool in self._capturing else (pool, 0, block.size)
                self._free[key].append(block)

    def _wait_for_other_streams(self, block: Block) -> None:
        """Hold ``block`` back until the work queued on its other streams is done."""
        events = []
        for s in block.other_streams:
            e = Event()
            e.record(s)
            events.append(e)
        block.other_streams = None
        self._pending.append((block, events))

    def record_stream(self, block: Block, stream) -> None:
        """Note that ``block`` is used on ``stream`` too: its reuse waits for it."""
        if not isinstance(stream, Stream):
            raise TypeError(f"record_stream() takes a tensorplay.cuda.Stream, got {type(stream).__name__}")
        if stream._key != block.stream_key:
            if block.other_streams is None:
                block.other_streams = set()
            block.other_streams.add(stream)

    def _collect_pending(self) -> None:
        still = []
        for block, events in self._pending:
            if all(e.query() for e in events):
                self._file(block)
            else:
                still.append((block, events))
        self._pending = still

    def _out_of_memory(self, size: int, pool) -> str:
        """The sentence of an allocation the device refused even after the cache was emptied."""
        said = (
            f"out of memory: could not allocate {size} bytes "
            f"({self.counts.allocated} allocated, {self.counts.reserved} reserved by tensorplay); "
        )
        cached = sum(  # what empty_cache() gives back: the default pool's, and pools no graph uses
            b.size
            for key, blocks in list(self._free.items())
            if key[0] != pool and (key[0] is DEFAULT_POOL or key[0] not in self._pool_users)
            for b in blocks
        )
        if capture_state.active and cached:  # the cache cannot be given back in the middle of a capture
            return said + (
                f"{cached} bytes of it are cached for other pools (eager tensors freed), which a graph's "
                "pool cannot take and a capture cannot give back: call tp.cuda.empty_cache() before "
                "capturing, or free tensors you no longer need"
            )
        return said + "free tensors you no longer need"

    def _device_alloc(self, size: int, pool) -> int:
        dev = get_backend()
        try:
            ptr = _mem_alloc(dev, size)
        except CudaError as e:
            if e.code != "CUDA_ERROR_OUT_OF_MEMORY":
                raise
            self.counts.alloc_retries += 1
            if not capture_state.active:  # cuMemFree would break the capture
                self.release_cached(DEFAULT_POOL)
            try:
                ptr = _mem_alloc(dev, size)
            except CudaError as e2:
                raise CudaError(self._out_of_memory(size, pool), e2.function, e2.code) from None
        c = self.counts
        c.device_allocs += 1
        self._reserved[pool] += size
        cur = c.reserved = c.reserved + size
        if cur > c.reserved_peak:
            c.reserved_peak = cur
        return ptr

    # -- giving memory back --------------------------------------------------------
    def release_cached(self, pool=None) -> int:
        """Give the free blocks of ``pool`` (all pools if None) back to the device."""
        if self._pending and not capture_state.active:
            self._collect_pending()
        return self._give_back([k for k in list(self._free) if pool is None or k[0] == pool])

    def forget_stream(self, key: int) -> None:
        """A collected stream's cached blocks go back to the device: they would
        serve no other stream, and a later stream given the same handle must not
        take them unordered. Called before its handle is destroyed, outside captures.
        (A graph pool's blocks kept for one stream serve any once the captures into
        the pool end: ``_stop_capturing``.)"""
        self._give_back([k for k in list(self._free) if k[1] == key and k[0] is DEFAULT_POOL])

    def _give_back(self, keys: list) -> int:
        dev = get_backend()
        released = 0
        for key in keys:
            for block in self._free.pop(key, ()):
                dev.mem_free(block.ptr)
                released += block.size
                self._reserved[block.pool] -= block.size
                self.counts.device_frees += 1
        self.counts.reserved -= released
        return released

    def empty_cache(self) -> None:
        """Give back the cached blocks of the default pool and of pools no graph uses."""
        refuse_empty_cache()
        for pool in {k[0] for k in self._free} - set(self._pool_users):
            self.release_cached(pool)


def _mem_alloc(dev, size: int) -> int:
    if size >= 1 << 63:  # more than the driver's size type holds: no device has it
        raise CudaError(f"cuMemAlloc({size}) failed", "cuMemAlloc", "CUDA_ERROR_OUT_OF_MEMORY")
    return dev.mem_alloc(size)


allocator = CachingAllocator()
streams.retirement_hooks.append(allocator.forget_stream)


def memory_allocated() -> int:
    """Bytes held by live tensors (rounded to block sizes)."""
    return allocator.counts.allocated


def max_memory_allocated() -> int:
    """The peak of ``memory_allocated()`` since start or the last reset."""
    return allocator.counts.allocated_peak


def memory_reserved() -> int:
    """Bytes the allocator holds from the device, cached blocks included."""
    return allocator.counts.reserved


def reset_peak_memory_stats() -> None:
    """Reset the peaks to the current values."""
    c = allocator.counts
    c.allocated_peak, c.reserved_peak = c.allocated, c.reserved


def memory_stats() -> dict[str, int]:
    """A copy of the allocator's counters (bytes and counts)."""
    return allocator.counts.as_stats()


def empty_cache() -> None:
    """Give cached, unused blocks back to the device (not those of live graph pools)."""
    allocator.empty_cache()
