"""The backend contract, as code: what the runtime asks of a device.

Both backends (``driver``: the CUDA driver through cuda-python; ``sim``: the
CPU) implement ``Backend`` with the same behaviour, capture rules included.
It is split by concern; a new backend is one module implementing all four and
one line in ``backend.BACKENDS``. Handles (streams, events, graphs) are opaque
objects of the backend; ``handle_int`` gives the integer a user sees.

Capabilities are attributes, so callers ask what a backend can do rather than
which backend it is:

- ``host_addressable``: device memory is host memory (DLPack reports the CPU);
- ``max_block``, ``max_threads_per_launch``, ``max_grid_threads``, ``sm_count``:
  the launch shapes the ops choose (small on the simulator, which runs a Python
  thread per CUDA thread);
- the simulator's alone, for the hazard check (``runtime/hazards``):
  ``interleave(rng)`` (independent work in seeded random orders, a kernel's
  threads watched for races) and ``observer`` (told of plain Numba launches).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["CONDITIONAL_DRIVER", "Backend", "Device", "Graphs", "Kernels", "Memory", "Streams", "conditional_missing"]

# The conditional node kinds and the driver version each needs (12080 is CUDA 12.8):
# if/else is an if node with two bodies, switch a node with n.
CONDITIONAL_DRIVER = {"if": 12040, "while": 12040, "if_else": 12080, "switch": 12080}


def conditional_missing(kind: str, version: int) -> str | None:
    """None when a driver of ``version`` has ``kind`` nodes, else the sentence saying what they need."""
    needs = CONDITIONAL_DRIVER[kind]
    if version >= needs:
        return None
    return (
        f"{kind.replace('_', '/')} conditional graph nodes need a CUDA {needs // 1000}.{needs % 1000 // 10} "
        f"or newer driver (this one is {version // 1000}.{version % 1000 // 10})"
    )


@runtime_checkable
class Device(Protocol):
    name: str
    host_addressable: bool
    max_block: int
    max_threads_per_launch: int
    max_grid_threads: int
    sm_count: int
    legacy_stream: Any

    def ensure_thread(self) -> None: ...
    def device_count(self) -> int: ...
    def device_name(self) -> str: ...
    def device_uuid(self) -> bytes: ...
    def launch_limits(self) -> dict: ...
    def device_attributes(self) -> dict: ...
    def synchronize(self) -> None:
        """Wait for all work on the device; Ctrl-C interrupts the wait."""


@runtime_checkable
class Memory(Protocol):
    def mem_alloc(self, nbytes: int) -> int: ...
    def mem_free(self, ptr: int) -> None: ...
    def mem_info(self) -> tuple[int, int]: ...
    def copy_htod(self, dst: int, host: np.ndarray, stream: Any) -> None: ...
    def read(self, src: int, nbytes: int, stream: Any) -> np.ndarray: ...
    def copy_dtod(self, dst: int, src: int, nbytes: int, stream: Any) -> None: ...
    def memset(self, ptr: int, byte: int, nbytes: int, stream: Any) -> None: ...
    def adopt_foreign(self, ptr: int, nbytes: int) -> Any:
        """Make memory another library allocated addressable; a token or None."""

    def release_foreign(self, token: Any) -> None: ...


@runtime_checkable
class Streams(Protocol):
    def stream_create(self) -> Any: ...
    def stream_destroy(self, stream: Any) -> None: ...
    def handle_int(self, handle: Any) -> int: ...
    def stream_from_int(self, handle: int) -> Any: ...
    def stream_synchronize(self, stream: Any) -> None: ...
    def stream_query(self, stream: Any) -> bool: ...
    def stream_wait_event(self, stream: Any, event: Any) -> None: ...
    def event_create(self, timing: bool) -> Any: ...
    def event_destroy(self, event: Any) -> None: ...
    def event_record(self, event: Any, stream: Any) -> None: ...
    def event_synchronize(self, event: Any) -> None: ...
    def event_query(self, event: Any) -> bool: ...
    def event_elapsed_ms(self, start: Any, end: Any) -> float: ...


@runtime_checkable
class Kernels(Protocol):
    def jit(self) -> Any:
        """``numba.cuda`` as this backend runs it."""

    def launcher(self, dispatcher: Any, argtypes: tuple) -> Any:
        """A callable ``(grid, block, stream, args, shared_bytes=0)`` with
        ``launch_packed(grid, block, stream, packed, shared_bytes=0)`` and ``name``,
        for the kernel compiled for ``argtypes``."""

    def conditional_setter(self) -> Any:
        """The device function ``(uint64 handle, uint32 value)`` setting a
        conditional node's condition."""

    def tensor_bases(self) -> tuple:
        """Classes a Tensor also derives from here, for plain Numba launches
        (``kernel[grid, block](tensor)``): none on the driver, where Numba takes a
        tensor through DLPack; on the simulator, one of Numba's argument hints."""

    def stream_bases(self) -> tuple:
        """Classes tensorplay's Stream also derives from here, so that a plain Numba
        launch takes it as its stream (``kernel[grid, block, stream]``): Numba's
        stream class on the driver (a launch reads its ``handle``, the CUstream);
        on the simulator, the class its launch hook knows (``simplain``), which
        reads the backend's stream from the Stream's ``_h``. Not slotted: they
        give Stream its ``__weakref__``."""


@runtime_checkable
class Graphs(Protocol):
    def capture_status(self, stream: Any) -> str:
        """``"none"``, ``"active"`` or ``"invalidated"``."""

    def capture_id(self, stream: Any) -> int:
        """The id of the capture ``stream`` takes part in (0 when none)."""

    def begin_capture(self, stream: Any, mode: str) -> None: ...
    def end_capture(self, stream: Any) -> Any: ...
    def driver_version(self) -> int:
        """The CUDA version of the driver (the simulator's can be set, to test the errors)."""

    def conditional_support(self, kind: str = "if") -> str | None:
        """None when conditional nodes of ``kind`` (see ``CONDITIONAL_DRIVER``) work here, else why not."""

    def conditional_handle(self, stream: Any, default: int = 0) -> int:
        """A conditional handle in the graph ``stream`` captures into, set to ``default`` at each of its launches."""

    def conditional_add(self, stream: Any, handle: int, kind: str, size: int) -> tuple:
        """Add a conditional node with ``size`` bodies after the stream's work; its body graphs."""

    def conditional_body_capture(self, body: Any, mode: str) -> Any:
        """A new stream capturing into a conditional node's body graph."""

    def conditional_handle_in(self, graph: Any, default: int = 0) -> int:
        """A conditional handle created in a body graph that is not being captured."""

    def graph_create(self) -> Any: ...
    def conditional_repeat(self, body_stream: Any, target: Any, handles: list) -> None:
        """End the capture on ``body_stream`` (into a graph of its own) and put a copy of it into the
        body graph ``target``, then an if node per handle holding another copy (an unrolled loop)."""

    def conditional_end(self, body_stream: Any) -> None: ...
    def captured_node(self, stream: Any) -> Any:
        """The node the last work captured on ``stream`` added (None when none): called once per
        kernel launched into a capture, so as cheap as the backend can make it."""

    def sole_captured_node(self, stream: Any) -> Any:
        """The node that the next work captured on ``stream`` would depend on, where it
        would depend on that one alone; else None (several, none, or no capture)."""

    def set_captured_kernel(self, node: Any, launcher: Any, grid: tuple, block: tuple, args: list) -> None:
        """Give the kernel node ``node`` of a graph being captured new arguments (same kernel)."""

    def graph_instantiate(self, graph: Any, launches: Sequence = ()) -> Any:
        """The executable graph. ``launches``: the kernel launches the capture recorded
        (``(node, launcher, grid, block, caller)``, ``runtime/launch.py``), which the backend may
        use rather than asking the device about those nodes."""

    def graph_exec_update(self, graph_exec: Any, graph: Any, instantiated: Any, launches: Sequence = ()) -> str | None:
        """Give ``graph_exec`` (instantiated from ``instantiated``) the parameters of ``graph``;
        None when done, else why not (nothing changed). ``launches`` as for ``graph_instantiate``."""

    def graph_launch(self, graph_exec: Any, stream: Any) -> None: ...
    def graph_launch_raw(self, graph_exec: Any, stream: Any) -> tuple:
        """The launch itself, returning the driver's result tuple (replay's hot path)."""

    def error(self, function: str, err: Any) -> Exception: ...
    def graph_destroy(self, graph: Any) -> None: ...
    def graph_exec_destroy(self, graph_exec: Any) -> None: ...
    def graph_node_count(self, graph: Any) -> int: ...
    def graph_edges(self, graph: Any) -> list[tuple]:
        """The edges ``(from, to)`` of ``graph`` (its own, not its conditional bodies'), each node
        named as ``captured_node`` names it: what the hazard check orders a captured graph's nodes by."""

    def graph_dot(self, graph: Any, path: str) -> None: ...
    def staged_graph(self, graph: Any, graph_exec: Any, heads: list) -> Any:
        """``graph`` behind kernels whose parameters each launch sets (``heads``:
        ``params.PackedLaunch`` records: launcher, grid, block, packed parameters)."""


@runtime_checkable
class Backend(Device, Memory, Streams, Kernels, Graphs, Protocol):
    """Everything the runtime asks of a device."""
