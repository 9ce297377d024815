"""Programmatic edges on the driver: in a captured graph, a kernel that begins
by waiting for the kernels before it (``kernels/_dependency.py``) may launch
while the kernel it depends on is still draining.

Capture records every kernel -> kernel dependency as a plain edge: the second
kernel launches once the first has finished and its writes are flushed.
``overlap_kernels(graph, known)``, called before the graph is instantiated or
an executable graph updated from it, turns each such edge into a programmatic
one (``CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC`` from the first kernel's
programmatic port) where the second kernel's function is one that waits
(``register_waiting``): the driver may then launch it as soon as every block of
the first has passed its own wait, and its ``griddepcontrol.wait`` holds its
threads until the first is done. An edge into any other kernel, or from or to a
node of another type, stays as it is. The body of a conditional node may be
rewritten the same way as its capture ends (``conditional_end``, where
``OVERLAP_BODIES``), so that a while loop's kernels, and the kernel that ends
each pass, overlap too; the bodies of child graphs (an unrolled loop's
copies) are left plain.

The capture already knows most nodes: each kernel tensorplay launched on the
capture's stream was recorded with its launcher (``known``: node -> whether
its function waits). The driver is asked only about the others (kernels
launched Numba's own way or on forked streams, copies, fills, conditional
nodes). The edges go in and out as arrays through the driver's entry points
(CUDA 12.3's edge-data forms): the bindings would build three Python objects
per edge. Where the driver has no such forms, edges stay plain.
"""

from __future__ import annotations

import ctypes

import numpy as np
from cuda.bindings import driver as drv

from .driver_calls import check, entry_point, fail

__all__ = ["known_kernels", "overlap_kernels", "programmatic_pairs", "register_waiting"]

_WAITING: set[int] = set()  # CUfunction handles of the kernels that wait for the ones before them

_KERNEL = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
_PLAIN = int(drv.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_DEFAULT)
_PROGRAMMATIC = int(drv.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC)
_PROGRAMMATIC_PORT = int(drv.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC)
_EDGE_BYTES = 8  # CUgraphEdgeData: from_port, to_port, type, 5 reserved bytes
_TYPE = 2  # the byte of an edge's type


def register_waiting(function) -> None:
    """Note that the kernel ``function`` begins with ``wait_for_prior_grids()``.

    numba-cuda loads kernels through ``cuLibraryLoadData``: the handle it gives
    is a ``CUkernel`` (launched as a ``CUfunction``), while a captured kernel
    node may report the context's ``CUfunction`` of it (``func``) or the
    ``CUkernel`` (``kern``): both are noted."""
    _WAITING.add(int(function))
    err, in_context = drv.cuKernelGetFunction(drv.CUkernel(int(function)))
    if not err:
        _WAITING.add(int(in_context))


def _driver_queries() -> tuple:
    """(waits, is_kernel): functions of a node (an int) asking the driver
    whether it is a kernel node whose function waits, and whether it is a
    kernel node; each node's type is asked once."""
    kernels: dict[int, bool] = {}

    def is_kernel(node: int) -> bool:
        kernel = kernels.get(node)
        if kernel is None:
            kernel = kernels[node] = check("cuGraphNodeGetType", drv.cuGraphNodeGetType(node)) == _KERNEL
        return kernel

    def waits(node: int) -> bool:
        if not is_kernel(node):
            return False
        params = check("cuGraphKernelNodeGetParams", drv.cuGraphKernelNodeGetParams(node))
        handles = (params.func, getattr(params, "kern", None))
        return any(h is not None and int(h) in _WAITING for h in handles)

    return waits, is_kernel


def programmatic_pairs(
    froms: np.ndarray, tos: np.ndarray, kinds: np.ndarray, known: dict[int, bool], waits, is_kernel
) -> np.ndarray:
    """Which edges (``froms[i] -> tos[i]`` of type ``kinds[i]``, node handles as
    uint64) become programmatic: plain, into a kernel that waits, from a
    kernel. ``known`` gives the nodes the capture recorded (kernels, and
    whether each waits); ``waits`` and ``is_kernel`` ask about the others, once
    per node. A boolean mask over the edges."""
    recorded = np.array(list(known), np.uint64)
    recorded_waiting = recorded[np.array(list(known.values()), bool)] if known else recorded
    chosen = kinds == _PLAIN
    asked = [node for node in np.unique(tos[chosen & ~np.isin(tos, recorded)]).tolist() if waits(node)]
    chosen &= np.isin(tos, np.concatenate([recorded_waiting, np.array(asked, np.uint64)]))
    asked = [node for node in np.unique(froms[chosen & ~np.isin(froms, recorded)]).tolist() if not is_kernel(node)]
    chosen &= ~np.isin(froms, np.array(asked, np.uint64))
    return chosen


def _edges(graph: int):
    """The edges of ``graph``: (from nodes, to nodes, types) as arrays, or None
    where the driver has no edge data (before CUDA 12.3)."""
    get = entry_point("cuGraphGetEdges", 12030, 5)
    if get is None:
        return None
    count = ctypes.c_size_t(0)
    err = get(graph, None, None, None, ctypes.addressof(count))
    if err:
        raise fail("cuGraphGetEdges", err)
    froms, tos = np.zeros(count.value, np.uint64), np.zeros(count.value, np.uint64)
    data = np.zeros((count.value, _EDGE_BYTES), np.uint8)
    if count.value:
        err = get(graph, froms.ctypes.data, tos.ctypes.data, data.ctypes.data, ctypes.addressof(count))
        if err:
            raise fail("cuGraphGetEdges", err)
    n = count.value  # as many, the graph being ours alone
    return froms[:n], tos[:n], data[:n, _TYPE]


def _make_programmatic(graph: int, froms: np.ndarray, tos: np.ndarray) -> None:
    """Replace the plain edges ``froms[i] -> tos[i]`` with programmatic ones."""
    remove = entry_point("cuGraphRemoveDependencies", 12030, 5)
    add = entry_point("cuGraphAddDependencies", 12030, 5)
    n = len(froms)
    data = np.zeros((n, _EDGE_BYTES), np.uint8)
    data[:, 0], data[:, _TYPE] = _PROGRAMMATIC_PORT, _PROGRAMMATIC
    a, b = np.ascontiguousarray(froms), np.ascontiguousarray(tos)
    err = remove(graph, a.ctypes.data, b.ctypes.data, None, n)
    if err:
        raise fail("cuGraphRemoveDependencies", err)
    err = add(graph, a.ctypes.data, b.ctypes.data, data.ctypes.data, n)
    if err:  # the graph keeps its plain edges (or, where even they cannot go back, is not to be run)
        if add(graph, a.ctypes.data, b.ctypes.data, None, n):
            raise RuntimeError(f"{n} edges of a graph were lost putting them back after {fail('', err)}")
        raise fail("cuGraphAddDependencies", err)


def overlap_kernels(graph, known: dict[int, bool] | None = None) -> int:
    """Make programmatic each plain edge of ``graph`` from a kernel node to a
    kernel node whose function waits; return how many were changed.
    ``known``: node (int) -> whether its function waits, for kernel nodes the
    capture recorded (the driver is asked about the others)."""
    if not _WAITING:
        return 0
    handle = int(graph)
    edges = _edges(handle)
    if edges is None or not len(edges[0]):
        return 0
    froms, tos, kinds = edges
    chosen = programmatic_pairs(froms, tos, kinds, known or {}, *_driver_queries())
    n = int(np.count_nonzero(chosen))
    if n:
        _make_programmatic(handle, froms[chosen], tos[chosen])
    return n


def known_kernels(launches) -> dict[int, bool]:
    """Node -> whether its function waits, for the kernel launches a capture
    recorded (``(node, launcher, ...)``: ``launch.py``) by a ``Launcher``."""
    known = {}
    for node, launcher, *_ in launches:
        waits = getattr(launcher, "waits", None)
        if node is not None and waits is not None:
            known[node] = waits
    return known
