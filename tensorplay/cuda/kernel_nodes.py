"""Changing a captured graph without capturing from scratch: an update (capture
again into the graph's executable) and a kernel node's new arguments.

**Update.** ``with tp.cuda.graph(g, update=True):`` captures again, into ``g``'s
pool, and hands the new graph to the executable ``g`` holds through
``cuGraphExecUpdate``: when the topology matches (same nodes, same edges, the
same conditional nodes; kernels, their arguments and launch shapes may change),
the executable takes the new parameters and nothing is instantiated; otherwise
the new graph is instantiated instead. ``g.last_update`` says which happened and why.

**A node's arguments.** ``g.nodes()`` lists the kernel nodes that the capture's
stream launched (not those of forked streams or conditional bodies) with their
Python kernel's name and the line that launched it; ``node.set_args(*args)``
gives one new arguments of the captured types, through
``cuGraphExecKernelNodeSetParams``, for every later replay. The graph keeps the
tensors passed alive. A changed node also changes what ``stage_and_launch``
replays (its staged copy is made again at its next call).

**An elementwise op's node** takes tensors of another size than the capture's:
its flat kernels launch over the output's elements, and where the captured grid
would not cover more of them (``flat_exact`` gives a thread to each group of
four, with no loop) the node gets the grid the op would launch now, which the
same call sets (a grid only grows: the kernels skip elements past the output's).
Every array operand must have the output's shape, as its kernel indexes it with
the output's indices.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass

import numpy as np

from .._tensor import TENSOR_TYPES
from ..runtime.backend import get as get_backend
from ..runtime.backend.params import POINTER, scalar_struct
from ..runtime.capture import release_after_captures
from ..runtime.launch import grid_1d, grid_groups

__all__ = ["GraphUpdate", "KernelNode", "KernelNodes"]

log = logging.getLogger("tensorplay")


@dataclass(frozen=True)
class GraphUpdate:
    """What ``capture_end`` did with a capture made with ``update=True``:
    ``updated`` when the executable took the new graph (``cuGraphExecUpdate``),
    else the new graph was instantiated, for the ``reason`` given."""

    updated: bool
    reason: str | None = None

    def __str__(self) -> str:
        return "updated in place" if self.updated else f"instantiated again: {self.reason}"


class NodeEdit:
    """What ``set_args`` changes one node with, shared by every ``KernelNode``
    of it: the backend's setter, the launch shape it sets (with the dynamic
    shared memory captured), and for an elementwise flat kernel the most
    elements that shape covers in one pass (None for other kernels, whose
    launch shape stays the captured one)."""

    __slots__ = ("setter", "grid", "block", "shared_bytes", "covers")

    def __init__(self, setter, grid: tuple, block: tuple, shared_bytes: int, flat: bool) -> None:
        self.setter, self.grid, self.block, self.shared_bytes = setter, grid, block, shared_bytes
        self.covers = grid[0] * block[0] * 4 if flat else None  # a thread per group of four


class KernelNode:
    """A kernel node of a captured graph, from ``CUDAGraph.nodes()``.

    ``kernel`` is the Python kernel's name, ``where`` the ``file:line`` that
    launched it, ``grid`` and ``block`` its launch shape (as ``set_args`` last
    set it).
    """

    __slots__ = (
        "index", "kernel", "where", "grid", "block",
        "_graph", "_capture", "_node", "_origin", "_launcher", "_plan", "_edit",
    )  # fmt: skip

    def __init__(self, graph, capture: int, index: int, record: tuple, origin) -> None:
        self._node, self._launcher, self.grid, self.block, _, caller = record
        self.where = f"{caller[0]}:{caller[1]}" if caller is not None else "?"
        self._origin = origin  # the same node in the graph the executable was instantiated from
        self._plan = None  # what set_args takes, made at its first call
        self._edit = None  # the node's NodeEdit, from its first call
        self.kernel = self._launcher.name
        self._graph, self._capture, self.index = graph, capture, index

    def set_args(self, *args) -> None:
        """Launch this node with ``args`` at every later replay: arrays of the
        captured dtypes and dimensions (a contiguous tensor may stand for a
        1-D array of its elements) and numbers, in the kernel's order. An
        elementwise op's node takes tensors of any size, the output's first."""
        graph, edit = self._graph, self._edit
        if edit is None or self._capture != graph._captures or graph._stream is not None:
            edit = self._edit = graph._node_edit(self)  # checks the node first
        packed = pack_args(self._plan, args, self.kernel)
        if edit.covers is not None and args[0].numel() > edit.covers:
            graph._grow(self, edit, args[0].numel(), packed)
        else:
            edit.setter(packed)
        self.grid, self.block = edit.grid, edit.block
        graph._held[self.index] = args  # the tensors themselves, kept alive
        if graph._stager is not None:  # it launches the old arguments
            graph._drop_stager()

    def __repr__(self) -> str:
        return f"<kernel node {self.index}: {self.kernel}<<<{self.grid}, {self.block}>>> launched at {self.where}>"


class KernelNodes:
    """``CUDAGraph``'s update and node editing; the graph holds ``_launches``
    (what its capture recorded), ``_setters`` and ``_held`` (edited nodes and
    the arguments they keep alive) and ``_captures`` (a count of its captures)."""

    def nodes(self) -> list[KernelNode]:
        """The kernel nodes the capture's stream launched, in launch order.

        Only kernels launched through tensorplay are listed (its ops, ``@tp.jit``
        kernels, ``tp.cuda.launch``), as those are the nodes ``set_args`` can
        repack: a kernel launched Numba's way (``kernel[grid, block, stream]``)
        is a node of the graph but not in the list. ``node.index`` counts the
        listed nodes only, while the DOT view (``g.dot()``, ``g.draw()``)
        numbers every node of the graph, so one kernel's two numbers can differ.

        >>> import tensorplay as tp
        >>> x = tp.ones(4)
        >>> g = tp.cuda.CUDAGraph()
        >>> with tp.cuda.graph(g):
        ...     y = x * 2
        >>> [node.index for node in g.nodes()]
        [0]
        """
        if self._exec is None:
            raise RuntimeError("nodes() needs a captured graph; capture one first")
        same = len(self._origin_launches) == len(self._launches)  # else the origin's nodes are not known
        nodes = [
            KernelNode(self, self._captures, i, r, self._origin_launches[i][0] if same else None)
            for i, r in enumerate(self._launches)
        ]
        for i, edit in self._setters.items():  # the launch shapes set_args changed
            nodes[i].grid, nodes[i].block = edit.grid, edit.block
        return nodes

    def _drop_stager(self) -> None:
        """Free the staged copy (``stage_and_launch``'s), made again at its next call."""
        release_after_captures(self._stager.release)
        self._stager = None

    def _node_edit(self, node: KernelNode) -> NodeEdit:
        """What sets ``node``'s packed parameters on the executable, once the
        node is known to be of the graph's current capture."""
        if node._graph is not self or node._capture != self._captures or self._exec is None:
            raise RuntimeError(
                f"{node!r} belongs to an earlier capture of this graph (it was captured again, updated or "
                "reset since); call g.nodes() again"
            )
        if self._stream is not None:
            raise RuntimeError("set_args() while the graph is capturing; call capture_end() first")
        if node._origin is None:
            raise RuntimeError(
                "this graph was updated in place from a capture that launched other kernels on its stream than "
                "the capture it was instantiated from, so its nodes cannot be told apart; reset() and capture "
                "it anew to change a node's arguments"
            )
        kernel = node._launcher.kernel
        if node._plan is None:
            node._plan = arg_plan(
                node._launcher.argtypes,
                getattr(kernel, "tp_counted", False),
                getattr(kernel, "tp_exact", False),
                _is_elementwise(kernel),
            )
        edit = self._setters.get(node.index)
        if edit is None:
            _, _, grid, block, shared_bytes, _ = self._launches[node.index]  # as captured
            setter = self._node_setter(node, grid, block, shared_bytes)
            flat = _is_elementwise(kernel) and getattr(kernel, "tp_counted", False)
            edit = self._setters[node.index] = NodeEdit(setter, grid, block, shared_bytes, flat)
        return edit

    def _node_setter(self, node: KernelNode, grid: tuple, block: tuple, shared_bytes: int):
        return get_backend().kernel_node_setter(
            self._exec, node._origin, self._graph, node._node, node._launcher, grid, block, shared_bytes
        )

    def _grow(self, node: KernelNode, edit: NodeEdit, n: int, packed: bytes) -> None:
        """Launch ``node``, an elementwise flat kernel's, with ``packed`` over
        ``n`` elements, more than its grid covers in one pass: on the grid the
        op launches for ``n`` (``flat_exact`` has no loop, so needs it) where
        that is larger. The node is changed only once the driver took it."""
        exact = getattr(node._launcher.kernel, "tp_exact", False)
        grid, block = grid_groups(n) if exact else grid_1d(n)
        if grid[0] * block[0] <= edit.grid[0] * edit.block[0]:  # the looping kernel at its grid's cap
            edit.setter(packed)
            return
        setter = self._node_setter(node, grid, block, edit.shared_bytes)
        setter(packed)
        edit.setter, edit.grid, edit.block, edit.covers = setter, grid, block, grid[0] * block[0] * 4

    def _sync_template(self) -> None:
        """Give the captured graph the arguments set on its nodes (before it is cloned or drawn)."""
        for edit in self._setters.values():
            edit.setter.set_template()

    def _forget_nodes(self) -> None:
        self._launches, self._setters, self._held = [], {}, {}
        self._captures += 1

    def _take_update(self, graph) -> tuple:
        """Give the executable held the new ``graph`` (or instantiate it);
        returns what happened, and the executable (None when it took the new
        graph) and the graphs to free. An updated executable keeps the graph it
        was instantiated from, whose node handles edit its nodes."""
        dev = get_backend()
        reason = dev.graph_exec_update(self._exec, graph, self._graph, self._recording)
        old_exec, old_graphs = None, [self._graph if self._graph is not self._origin else None]
        if reason is not None:
            old_exec, self._exec = self._exec, dev.graph_instantiate(graph, self._recording)
            old_graphs.append(self._origin)
            self._origin, self._origin_launches = graph, self._recording
        self._graph = graph
        result = GraphUpdate(reason is None, reason)
        log.debug("graph update: %s", result)
        return result, old_exec, old_graphs


_COUNT = "count"  # the plan of a flat kernel's element count: not an argument of set_args, the output's size
_EXACT_COUNT = "exact count"  # the same of a flat_exact kernel: aligned arrays, a multiple of four elements
_OUT_SHAPE = "the output's shape"  # the plan of an elementwise kernel's array: indexed with the output's indices


def _is_elementwise(kernel) -> bool:
    return getattr(kernel, "tp_recipe", ("",))[0] == "elementwise"


def arg_plan(argtypes, counted: bool = False, exact: bool = False, elementwise: bool = False) -> list[tuple]:
    """Per parameter of a captured launch: (dtype name, ndim, C-contiguous,
    None) of an array, (dtype name, None, True, None) of an element pointer, or
    (None, NumPy scalar type, type name, packing) of a number (Numba's parameter
    layout: ``runtime/backend/params.py``). ``counted``: a flat kernel's, whose
    second parameter is the output's element count (``_COUNT``), not an
    argument of ``set_args``; ``exact``: of the kernel for 16-byte aligned arrays
    of a multiple of four elements (``_EXACT_COUNT``); ``elementwise``: an
    elementwise op's, whose arrays must all have the output's shape (their
    fourth entry ``_OUT_SHAPE``)."""
    from numba.cuda import types
    from numba.cuda.np.numpy_support import as_dtype

    plan = []
    for ty in argtypes:
        if counted and len(plan) == 1:
            plan.append((_EXACT_COUNT if exact else _COUNT, None, True, POINTER.pack))
        elif isinstance(ty, types.Array):
            plan.append((as_dtype(ty.dtype).name, ty.ndim, ty.layout == "C", _OUT_SHAPE if elementwise else None))
        elif isinstance(ty, types.CPointer):
            plan.append((as_dtype(ty.dtype).name, None, True, None))
        else:
            dtype = np.dtype(np.bool_) if ty == types.boolean else as_dtype(ty)
            plan.append((None, dtype.type, dtype.name, scalar_struct(dtype).pack))
    return plan


def pack_args(plan: list, args: tuple, name: str) -> bytes:
    """``args`` packed as the captured launch's parameters, or a TypeError that
    says which argument does not fit (one pass: this is ``set_args``'s host time)."""
    counted = len(plan) > 1 and plan[1][0] in (_COUNT, _EXACT_COUNT)
    if len(args) != len(plan) - counted:
        raise TypeError(f"{name} takes {len(plan) - counted} arguments as captured; set_args got {len(args)}")
    if counted:  # the output's count after it, the operands' checked against it
        out = args[0]
        if type(out) not in TENSOR_TYPES:
            raise TypeError(
                f"argument 0 of {name} was captured as a contiguous tensor of {plan[0][0]} (the output); "
                f"got {type(out).__name__}"
            )
        args = (out, out.numel(), *args[1:])
        if plan[1][0] is _EXACT_COUNT:
            _refuse_unaligned(plan, args, name)
    parts, out_shape = [], None
    for p, (want, ndim, contig, pack) in enumerate(plan):
        a, i = args[p], p - (counted and p > 1)  # i: the argument's place among set_args's
        if want in (_COUNT, _EXACT_COUNT):
            parts.append(pack(a))
        elif want is None:  # a number: ndim is its NumPy type, contig its name
            if type(a) in _NUMBERS:
                try:  # struct takes a Python number as NumPy would convert it, and in a fifth of the time
                    parts.append(pack(a))
                    continue
                except (struct.error, OverflowError):  # a float for an integer, or out of range: NumPy's rules
                    pass
            elif not isinstance(a, (int, float, np.generic)):
                raise TypeError(f"argument {i} of {name} was captured as a number ({contig}); got {type(a).__name__}")
            try:
                parts.append(pack(ndim(a)))
            except OverflowError:
                raise OverflowError(
                    f"argument {i} of {name} was captured as a number ({contig}); got {a!r}, outside its range"
                ) from None
        elif ndim is None:  # an element pointer: a flat kernel's array, as many elements as its output
            parts.append(_pointer(a, i, want, args[1], name))  # only flat kernels take pointers: counted
        else:
            if not (
                type(a) in TENSOR_TYPES and a.dtype.name == want and len(a.shape) == ndim and (a._contig or not contig)
            ):
                a = _array(a, i, want, ndim, contig, name)  # not a tensor as captured: a view of one, or an error
            parts.append(a._kbytes)
            if pack is _OUT_SHAPE:  # an elementwise kernel's: the output's first
                shape = tuple(a._karray[5 : 5 + ndim])
                if out_shape is None:
                    out_shape = shape
                elif shape != out_shape:
                    _refuse_shape(shape, out_shape, i, name)
    return b"".join(parts)


def _refuse_shape(shape: tuple, out_shape: tuple, i: int, name: str) -> None:
    broadcast = all(d in (1, o) for d, o in zip(shape, out_shape, strict=True))
    raise TypeError(
        f"argument {i} of {name} was captured as an array of the output's shape {out_shape}; got shape {shape}"
        + (": pass a broadcast operand expand()ed to the output's shape" if broadcast else "")
    )


_NUMBERS = (float, int, bool)


def _refuse_unaligned(plan: list, args: tuple, name: str) -> None:
    """A flat_exact node reads and writes groups of four with no bounds check:
    its tensors must be 16-byte aligned and of a multiple of four elements."""
    n = args[1]
    tensors = [(i, a) for i, (a, entry) in enumerate(zip(args, plan, strict=True)) if entry[1] is None and i != 1]
    bad = [f"argument {i - (i > 1)}" for i, a in tensors if type(a) in TENSOR_TYPES and a._ptr & 15]
    if n & 3 or bad:
        why = f"{n} elements, not a multiple of four" if n & 3 else f"{', '.join(bad)} not 16-byte aligned"
        raise TypeError(
            f"{name} was captured with 16-byte aligned tensors of a multiple of four elements (its kernel reads "
            f"and writes groups of four); got {why}: capture the op again with these tensors instead"
        )


def _pointer(a, i: int, want: str, n: int, name: str) -> bytes:
    """The address of ``a``, a contiguous tensor of ``n`` elements of ``want``."""
    if type(a) not in TENSOR_TYPES:
        got = type(a).__name__
    elif a.dtype.name == want and a._contig and a.numel() == n:
        return POINTER.pack(a._ptr)
    else:
        got = f"a {'' if a._contig else 'non-'}contiguous tensor of {a.numel()} {a.dtype.name} elements"
    raise TypeError(
        f"argument {i} of {name} was captured as a contiguous tensor of {n} {want} elements (the output's "
        f"number); got {got}"
    )


def _array(a, i: int, want: str, ndim: int, contig: bool, name: str):
    key = getattr(a, "_kkey", None)
    if key is None:
        raise TypeError(f"argument {i} of {name} was captured as an array of {want}; got {type(a).__name__}")
    if key[1] != ndim and ndim == 1 and key[2] and hasattr(a, "_flat"):
        a = a._flat()  # a contiguous tensor stands for the 1-D array of its elements
        key = a._kkey
    if key[0] != want or key[1] != ndim or (contig and not key[2]):
        layout = ", C-contiguous" if contig else ""
        raise TypeError(
            f"argument {i} of {name} was captured as a {ndim}-d array of {want}{layout}; "
            f"got a {key[1]}-d array of {key[0]}{'' if key[2] else ', not contiguous'}"
        )
    return a
