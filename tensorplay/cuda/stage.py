"""Staged replays: copy fresh inputs into a graph's static inputs and replay it.

``CUDAGraph.stage_and_launch(static_inputs, inputs)`` has the effect of
``static.copy_(x)`` for each pair followed by ``replay()``, in one launch from
the host where the driver allows it. Each graph owns a ``Stager``, made on
its first call, that holds its plans; the graph hands it its handles and its
``replay``, and has it release the plans when it is reset or freed.

- The first call for a tuple of static inputs builds a plan: the contiguous
  static inputs become the destinations of the gather-copy kernel
  (``kernels/gather.py``), their addresses are written to the device once,
  and the backend builds an executable graph of its own: the gather kernel
  node, then a clone of the captured graph whose root nodes wait for it.
- Later calls change only the gather node's parameters (this call's source
  addresses and byte counts) and launch. The driver copies kernel node
  parameters at ``cuGraphExecKernelNodeSetParams``, so a replay still in
  flight keeps its own, and launches of one executable graph run in order, so
  no copy overwrites a static input that an earlier replay still reads.
- An input of another layout (not contiguous, another dtype, a shape that
  broadcasts, host data) is copied with ``static.copy_(x)`` on the replay
  stream before the launch; an input that *is* its static input is skipped.
  When an input shares memory with a static input other than its own, or
  static inputs overlap, every pair is copied with ``copy_`` in order, so the
  result is always that of the ``copy_`` calls one after another.
- The driver does not clone a graph holding if/while nodes (nor nest it as a
  child graph): there the gather kernel is launched on the stream just before
  the graph's own launch (two launches, the same safety: kernel parameters are
  copied at the launch).

Everything is checked before anything is copied (host data is converted to
the static input's dtype, and refused while a capture forbids host copies, in
the check phase): an error leaves every static input as it was. The copies are
not recorded by autograd, whichever way they go: a static input that requires
grad (as ``make_graphed_callables``' are) takes host data as it takes a tensor.
"""

from __future__ import annotations

import functools
import struct
import weakref

import numpy as np

from .._factories import tensor
from .._overlap import foreign, overlap_groups, overlaps, same_view, self_overlapping, storage_key
from .._tensor import Tensor
from ..autograd import no_grad
from ..kernels import gather
from ..kernels.gather import MAX_PAIRS
from ..kernels.gather import kernel as gather_kernel
from ..runtime.backend import get as get_backend
from ..runtime.backend.params import PackedLaunch
from ..runtime.caches import track_factories
from ..runtime.capture import capture_state, refuse_host_transfer, refuse_staged_launch, release_after_captures
from ..runtime.launch import grid_1d, resolve
from ..runtime.streams import Stream, current_stream
from ..runtime.streams import stream as use_stream

__all__ = ["Stager"]

_TABLE_KEY = ("int64", 1, True)  # the launch key of the destination table
_HOST_DATA = (np.ndarray, np.generic, int, float, bool, list, tuple)

track_factories(gather)  # tp.cuda.clear_caches() drops its kernels too


class Stager:
    """The staged replays of one ``CUDAGraph``: its plans, by the ids of their
    static inputs.

    The graph makes its stager on its first ``stage_and_launch`` and owns it.
    It passes at each call what a plan needs of it (its graph and executable
    graph handles, None until it holds a capture, and its ``replay``), and
    calls ``release()`` when it is reset or freed. The stager keeps no
    reference to the graph.
    """

    __slots__ = ("_plans", "__weakref__")

    def __init__(self) -> None:
        self._plans: dict[tuple, _Plan] = {}

    def plans(self) -> tuple:
        """The plans built so far (for tests and debugging)."""
        return tuple(self._plans.values())

    def launch(self, static_inputs, inputs, stream: Stream | None, graph_handle, exec_handle, replay) -> None:
        """Copy ``inputs[i]`` into ``static_inputs[i]`` for every i, then launch the
        captured graph on ``stream`` (the current stream if None); see the
        module's docstring for how. ``CUDAGraph.stage_and_launch`` calls this."""
        if stream is None:
            s = current_stream()
        elif isinstance(stream, Stream):
            s = stream
        else:
            raise TypeError(f"expected stream=None or a tensorplay.cuda.Stream, got {type(stream).__name__}")
        if capture_state.active:
            refuse_staged_launch(s)
        plan = self._plans.get(tuple(map(id, static_inputs))) if type(static_inputs) in (list, tuple) else None
        if plan is not None and plan.fast is not None and type(inputs) in (list, tuple):
            # The common case inline (host time is the point): every input is
            # contiguous with its static input's dtype and shape, one gather kernel.
            layouts, sizes, table, pack = plan.fast
            storages = plan.storages
            ptrs = []
            if len(inputs) == len(layouts):
                for x, (dtype, shape) in zip(inputs, layouts, strict=True):
                    try:
                        if x.dtype is not dtype or x.shape != shape or not x.is_contiguous():
                            break
                        if storage_key(x) in storages or foreign(x):
                            break
                    except AttributeError:  # not a Tensor: the general path says what is wrong
                        break
                    ptrs.append(x.data_ptr())
                else:
                    if s is not plan.home:
                        plan.streams.add(s)
                    plan.staged.launch([table + pack(*ptrs, *sizes)], s._h)
                    return
        if exec_handle is None:
            raise RuntimeError(
                "stage_and_launch() needs a captured graph; capture one first (after reset(), capture again)"
            )
        if not isinstance(static_inputs, (list, tuple)):
            raise TypeError(f"expected a list or tuple of static input tensors, got {type(static_inputs).__name__}")
        if not isinstance(inputs, (list, tuple)):
            raise TypeError(f"expected a list or tuple of inputs, got {type(inputs).__name__}")
        if len(inputs) != len(static_inputs):
            raise ValueError(
                f"stage_and_launch() got {len(inputs)} inputs for {len(static_inputs)} static inputs; "
                "pass one input per static input, in the same order"
            )
        if plan is None:
            plan = _Plan(self, static_inputs, tuple(map(id, static_inputs)), graph_handle, exec_handle)
        plan.launch(static_inputs, inputs, s, replay)

    def release(self) -> None:
        """Free the staged graphs of every plan (the graph is being reset or freed)."""
        plans, self._plans = self._plans, {}
        for plan in plans.values():
            plan.destroy()


class _Plan:
    """What one tuple of static inputs needs: the pairs the gather kernel
    copies, its destination tables and the staged graph.

    The plan holds no static input alive (a reset() must not see them as
    live): it is keyed by their ids and forgotten when any of them dies.
    """

    __slots__ = ("pairs", "nslots", "chunks", "tables", "staged", "storages", "home", "streams", "refs", "fast")

    def __init__(self, stager: Stager, statics, key: tuple, graph_handle, exec_handle) -> None:
        for i, t in enumerate(statics):
            if not isinstance(t, Tensor):
                raise TypeError(f"expected a Tensor as static input {i}, got {type(t).__name__}")
            if self_overlapping(t):
                raise ValueError(
                    f"static input {i} of shape {tuple(t.shape)} and strides {tuple(t.stride())} has elements that "
                    "share memory (an expand()ed view), which no copy can write; capture with a tensor that has "
                    "memory of its own (.contiguous())"
                )
        self.storages = {storage_key(t) for t in statics}
        serial = bool(overlap_groups(statics))  # then every pair is copied with copy_, in order
        self.pairs: list[tuple] = []  # per pair: (gather slot or -1, dtype, shape, nbytes)
        dsts, sizes = [], []
        for t in statics:
            nbytes = t.numel() * t.dtype.itemsize
            gathered = t.is_contiguous() and nbytes and not serial
            self.pairs.append((len(dsts) if gathered else -1, t.dtype, t.shape, nbytes))
            if gathered:
                dsts.append(t.data_ptr())
                sizes.append(nbytes)
        self.nslots = len(dsts)
        self.chunks: list[tuple] = []  # (first slot, end slot, table parameters, packer of the rest)
        self.tables: list[Tensor] = []
        heads = []
        for first in range(0, self.nslots, MAX_PAIRS):
            k = min(MAX_PAIRS, self.nslots - first)
            table = tensor(np.array(dsts[first : first + k], np.int64))
            pack = struct.Struct(f"<{2 * k}q").pack
            launcher = resolve(gather_kernel(k), (_TABLE_KEY, *[np.int64] * (2 * k)))
            (blocks, _, _), block = grid_1d(-(-max(sizes[first : first + k]) // 8))
            self.chunks.append((first, first + k, table._kbytes, pack))
            self.tables.append(table)
            heads.append(PackedLaunch(launcher, (blocks, k, 1), block, table._kbytes + pack(*[0] * (2 * k))))
        self.home = current_stream()
        self.streams: set = set()  # other streams launched on: the tables' reuse waits for them
        if heads:
            self.home.synchronize()  # the tables' upload is done before any stream reads them
            self.staged = get_backend().staged_graph(graph_handle, exec_handle, heads)
        else:
            self.staged = None
        self.fast = None  # when one gather kernel copies every pair: (dtypes and shapes, sizes, table, packer)
        if len(self.chunks) == 1 and self.nslots == len(statics):
            self.fast = ([(t.dtype, t.shape) for t in statics], sizes, self.chunks[0][2], self.chunks[0][3])
        forget = functools.partial(_forget, weakref.ref(stager), key)
        self.refs = [weakref.ref(t, forget) for t in statics]
        stager._plans[key] = self

    def launch(self, statics, inputs, s: Stream, replay) -> None:
        srcs = [0] * self.nslots
        sizes = [0] * self.nslots  # a slot left at 0 bytes copies nothing
        storages = self.storages
        slow = []
        for i, (x, (slot, dtype, shape, nbytes)) in enumerate(zip(inputs, self.pairs, strict=True)):
            if (
                slot >= 0 and isinstance(x, Tensor) and x.dtype is dtype and x.shape == shape and x.is_contiguous()
                and storage_key(x) not in storages and not foreign(x)
            ):  # fmt: skip
                srcs[slot] = x.data_ptr()
                sizes[slot] = nbytes
            elif x is not statics[i]:
                slow.append(i)
        copies = []
        serial = host = False
        for i in slow:
            x, static = inputs[i], statics[i]
            if isinstance(x, Tensor) and _aliases(x, storages, statics):
                if same_view(x, static):
                    continue
                serial = True
            src = _source(i, x, static)
            host = host or not isinstance(src, Tensor)
            copies.append((i, src))
        if host:  # the upload would refuse it too, but after the copies before it
            refuse_host_transfer("stage_and_launch() with host data (a NumPy array or numbers)", s)
        if serial:  # an input aliases a static input: every copy with copy_, in order
            checked, skipped = dict(copies), set(slow)
            copies = [
                (i, checked.get(i, x))
                for i, x in enumerate(inputs)
                if x is not statics[i] and (i in checked or i not in skipped)
            ]
            srcs = None
        if copies:
            with use_stream(s), no_grad():  # a copy into a static input, as the gather kernel's
                for i, src in copies:
                    statics[i].copy_(src)
        if self.staged is not None and srcs is not None and any(sizes):
            if s is not self.home:
                self.streams.add(s)
            if len(self.chunks) == 1:
                params = [self.chunks[0][2] + self.chunks[0][3](*srcs, *sizes)]
            else:
                params = [prefix + pack(*srcs[a:b], *sizes[a:b]) for a, b, prefix, pack in self.chunks]
            self.staged.launch(params, s._h)
        else:
            replay(s)

    def destroy(self) -> None:
        if self.staged is not None:  # a static input may die in the middle of another graph's capture
            release_after_captures(self.staged.destroy)
            self.staged = None
        for table in self.tables:
            for s in self.streams:
                table.record_stream(s)
        self.tables = []


def _forget(stager_ref, key: tuple, _dead) -> None:
    """A static input died: its plan goes (its id may name another tensor next)."""
    stager = stager_ref()
    plan = stager._plans.pop(key, None) if stager is not None else None
    if plan is not None:
        try:
            plan.destroy()
        except Exception:  # interpreter shutdown
            pass


def _source(i: int, x, static: Tensor):
    """What ``static.copy_`` takes for input ``i``, once checked: ``x``, or
    host data as a NumPy array of the static input's dtype (converted here, so
    that a failing conversion comes before any copy)."""
    if isinstance(x, Tensor):
        shape = x.shape
    elif isinstance(x, _HOST_DATA):
        try:
            x = np.asarray(x)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"expected a Tensor or numeric host data as input {i}, got a {type(x).__name__}: {e}"
            ) from None
        if x.dtype.kind not in "biuf":
            raise TypeError(f"expected a Tensor or numeric host data as input {i}, got host data of dtype {x.dtype}")
        shape = x.shape
    else:
        raise TypeError(
            f"expected a Tensor or host data (a NumPy array or numbers) as input {i}, got {type(x).__name__}"
        )
    target = static.shape
    if len(shape) > len(target) or any(
        d not in (1, t) for d, t in zip(reversed(shape), reversed(target), strict=False)
    ):
        raise ValueError(
            f"input {i} of shape {tuple(shape)} cannot be copied into static input {i} of shape {tuple(target)}: "
            "the shapes must match or broadcast"
        )
    if not isinstance(x, Tensor):
        x = np.asarray(x, dtype=static.dtype.np, order="C")
    return x


def _aliases(x: Tensor, storages: set, statics) -> bool:
    """Whether input ``x`` may share memory with a static input: a view of one,
    or an import (whose storage is its own) reaching one's bytes."""
    if storage_key(x) in storages:
        return True
    return foreign(x) and any(same_view(x, t) or overlaps(x, t) for t in statics)
