"""Programmatic edges on the driver: in a captured graph, a kernel that begins
by waiting for the kernels before it (``kernels/_dependency.py``) may launch
while the kernel it depends on is still draining.

Capture records every kernel -> kernel dependency as a plain edge: the second
kernel launches once the first has finished and its writes are flushed.
``overlap_kernels(graph)``, called before the graph is instantiated or an
executable graph updated from it, turns each such edge into a programmatic one
(``CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC`` from the first kernel's programmatic
port) where the second kernel's function is one that waits
(``register_waiting``): the driver may then launch it as soon as every block of
the first has passed its own wait, and its ``griddepcontrol.wait`` holds its
threads until the first is done. An edge into any other kernel, or from or to a
node of another type, stays as it is. Bodies of conditional nodes and child
graphs are left plain.
"""

from __future__ import annotations

from cuda.bindings import driver as drv

from .driver_calls import add_dependencies, check, get_edges, remove_dependencies

__all__ = ["overlap_kernels", "register_waiting"]

_WAITING: set[int] = set()  # CUfunction handles of the kernels that wait for the ones before them

_KERNEL = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
_PLAIN = drv.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_DEFAULT


def _programmatic_edge():
    edge = drv.CUgraphEdgeData()
    edge.type = drv.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
    edge.from_port = drv.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC
    return edge


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


def overlap_kernels(graph) -> int:
    """Make programmatic each plain edge of ``graph`` from a kernel node to a
    kernel node whose function waits; return how many were changed."""
    if not _WAITING:
        return 0
    count = check("cuGraphGetEdges", get_edges(graph, 0))[-1]
    if not count:
        return 0
    froms, tos, data, _ = check("cuGraphGetEdges", get_edges(graph, count))
    waits: dict[int, bool] = {}  # node -> a kernel node whose function waits
    kernels: dict[int, bool] = {}  # node -> a kernel node

    def is_kernel(node) -> bool:
        key = int(node)
        if key not in kernels:
            kernels[key] = check("cuGraphNodeGetType", drv.cuGraphNodeGetType(node)) == _KERNEL
        return kernels[key]

    def waiting(node) -> bool:
        key = int(node)
        if key not in waits:
            params = is_kernel(node) and check("cuGraphKernelNodeGetParams", drv.cuGraphKernelNodeGetParams(node))
            handles = (params.func, getattr(params, "kern", None)) if params else ()
            waits[key] = any(h is not None and int(h) in _WAITING for h in handles)
        return waits[key]

    pairs = [
        (a, b)
        for k, (a, b) in enumerate(zip(froms, tos, strict=True))
        if (not data or data[k].type == _PLAIN) and waiting(b) and is_kernel(a)
    ]
    if not pairs:
        return 0
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    check("cuGraphRemoveDependencies", remove_dependencies(graph, a, b, None, len(pairs)))
    check("cuGraphAddDependencies", add_dependencies(graph, a, b, [_programmatic_edge()] * len(pairs), len(pairs)))
    return len(pairs)
