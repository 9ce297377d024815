"""What the stress tests share: how hard to push, and snapshots of the runtime's
bookkeeping to prove that everything came back.

``FULL``, ``hypothesis_settings(examples=(ci, full), steps=(ci, full))``
    From ``tests/helpers/properties.py``: ``TENSORPLAY_STRESS=full``
    (``scripts/gpu-check`` sets it) gives more hypothesis examples, more
    thread rounds, and the 10 000-cycle leak check.
``Snapshot.take()`` / ``snapshot.assert_returned()``
    Allocated and reserved bytes, the sizes of the allocator's tables, and on the
    simulator its conditional handles and device buffers; compared later, after
    every tensor and graph made in between is gone.
``assert_no_capture(other_threads=True)``
    No capture left in progress (by this thread only, if ``other_threads`` is
    False), and this thread back on the default stream.
"""

from __future__ import annotations

import gc
import importlib
from dataclasses import dataclass

from helpers.properties import FULL, hypothesis_settings

import tensorplay as tp
from tensorplay.runtime.backend import get as get_backend
from tensorplay.runtime.capture import capture_state
from tensorplay.runtime.memory import DEFAULT_POOL, allocator

__all__ = ["FULL", "SIM", "Snapshot", "assert_no_capture", "hypothesis_settings", "sim_backend_module", "table_sizes"]

SIM = tp.cuda.backend() == "sim"

# The allocator's per-capture and per-pool tables: one entry per capture or pool
# in use, so each must be back to its size once the captures and graphs are gone.
ALLOCATOR_TABLES = (
    "_live_by_capture",
    "_pool_users",
    "_reserved",
    "_routes",
    "_capture_pools",
    "_capture_tokens",
    "_capture_ids",
    "_dead_pools",
    "_deferred",
)


def sim_backend_module():
    """``tensorplay.runtime.backend.sim``, imported only when it is the backend in use."""
    return importlib.import_module("tensorplay.runtime.backend.sim")


def table_sizes() -> dict[str, int]:
    """The sizes of the allocator's tables (and the simulator's), by name."""
    sizes = {name: len(getattr(allocator, name)) for name in ALLOCATOR_TABLES}
    sizes["_reserved"] -= DEFAULT_POOL in allocator._reserved  # made by the first allocation ever
    # Free lists of graph pools: a pool that is gone must leave no key behind.
    sizes["_free (graph pools)"] = sum(1 for key in allocator._free if key[0] != DEFAULT_POOL)
    sizes["captures in progress"] = capture_state.active
    if SIM:
        sim = sim_backend_module()
        dev = get_backend()
        sizes["sim _CONDITIONS"] = len(sim._CONDITIONS)
        sizes["sim captures"] = len(dev._captures)
        sizes["sim device buffers"] = len(dev._buffers)
    return sizes


@dataclass
class Snapshot:
    allocated: int
    reserved: int
    tables: dict[str, int]

    @classmethod
    def take(cls, collect: bool = True) -> Snapshot:
        """The runtime's bookkeeping now, with cached blocks given back first.

        With ``collect``, garbage that earlier code left in reference cycles is
        collected first, so that the cycle collector freeing it later cannot
        move the baseline. ``assert_returned`` does not collect: memory must
        come back when the last reference goes."""
        if collect:
            gc.collect()
        tp.cuda.empty_cache()
        return cls(tp.cuda.memory_allocated(), tp.cuda.memory_reserved(), table_sizes())

    def assert_returned(self, what: str = "") -> None:
        """Everything is as at ``take()``: call once every tensor and graph made
        since is deleted (graphs reset)."""
        where = f" after {what}" if what else ""
        tp.cuda.empty_cache()
        now = Snapshot(tp.cuda.memory_allocated(), tp.cuda.memory_reserved(), table_sizes())
        if now.allocated != self.allocated:
            gc.collect()  # for the message only: would the cycle collector have given it back?
            raise AssertionError(
                f"memory_allocated() is {now.allocated} bytes{where}, {self.allocated} before "
                f"({now.allocated - self.allocated:+d}; {tp.cuda.memory_allocated()} after gc.collect())"
            )
        assert now.reserved == self.reserved, (
            f"memory_reserved() after empty_cache() is {now.reserved} bytes{where}, {self.reserved} before"
        )
        grown = {k: (self.tables[k], v) for k, v in now.tables.items() if v != self.tables[k]}
        assert not grown, f"tables changed size{where} (before, now): {grown}"


def assert_no_capture(other_threads: bool = True) -> None:
    """No capture of this thread in progress (``other_threads``: none of any thread)."""
    assert not tp.cuda.capture_stream().is_capturing(), "this thread's capture stream is still capturing"
    assert not tp.cuda.current_stream().is_capturing(), "the current stream is still capturing"
    if other_threads:
        assert capture_state.active == 0, f"{capture_state.active} capture(s) still registered as in progress"
    assert tp.cuda.current_stream() == tp.cuda.default_stream(), (
        f"the current stream is {tp.cuda.current_stream()}, not the default stream"
    )
