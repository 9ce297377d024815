"""Kernel nodes whose parameters change after instantiation, on the driver:
staged graphs (a captured graph behind kernels whose parameters each launch
sets: ``CUDAGraph.stage_and_launch``'s copies) and a captured node's new
arguments (``KernelNode.set_args``)."""

from __future__ import annotations

import ctypes
import threading
from functools import partial
from typing import TYPE_CHECKING

from cuda.bindings import driver as drv

from .driver_calls import add_dependencies, check, entry_point, fail
from .params import PackedLaunch

if TYPE_CHECKING:
    from .driver_launch import Launcher

__all__ = ["KernelNode", "NodeSetter", "StagedGraph"]


# Nodes that keep a graph from being cloned or nested (cuGraphClone returns
# CUDA_ERROR_NOT_SUPPORTED for a conditional node).
_NOT_CLONED = {
    drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL,
    drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEM_ALLOC,
    drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEM_FREE,
}
_set_kernel_node = drv.cuGraphExecKernelNodeSetParams
_graph_launch = drv.cuGraphLaunch


def _params_setter(graph_exec, exec_node, params):
    """A call without arguments that gives ``exec_node`` of ``graph_exec`` the
    parameters ``params`` holds at the time of the call; it returns the
    driver's result (0 for success)."""
    raw = entry_point("cuGraphExecKernelNodeSetParams", 12000, 3)
    if raw is not None:  # the three pointers converted once
        return partial(raw, int(graph_exec), int(exec_node), params.getPtr())
    return lambda: _set_kernel_node(graph_exec, exec_node, params)[0]


def _nodes(graph, roots_only: bool = False) -> list:
    get = drv.cuGraphGetRootNodes if roots_only else drv.cuGraphGetNodes
    count = check(get.__name__, get(graph, 0))[1]
    return list(check(get.__name__, get(graph, count))[0]) if count else []


def _clone_refusal(graph) -> str | None:
    """The name of a node type that keeps ``graph`` from being cloned, or None."""
    for node in _nodes(graph):
        kind = check("cuGraphNodeGetType", drv.cuGraphNodeGetType(node))
        if kind in _NOT_CLONED:
            return kind.name
    return None


class KernelNode:
    """A kernel node's parameters kept ready for the driver: the values live in
    one buffer whose pointer table (a pointer per 8-byte slot, Numba's ABI) is
    built once, so an update rewrites bytes and passes the same struct."""

    __slots__ = ("params", "data", "_ptrs", "node", "set")

    def __init__(self, launcher: Launcher, grid, block, packed: bytes, shared_bytes: int = 0) -> None:
        nbytes = launcher._nbytes
        self.data = bytearray(max(nbytes, 8))
        base = ctypes.addressof((ctypes.c_char * len(self.data)).from_buffer(self.data))
        self._ptrs = (ctypes.c_uint64 * max(nbytes // 8, 1))(*[base + 8 * i for i in range(nbytes // 8)])
        self.data[:nbytes] = packed
        p = drv.CUDA_KERNEL_NODE_PARAMS()
        p.func = launcher.context_function()  # a kernel node wants the context's function
        p.gridDimX, p.gridDimY, p.gridDimZ = grid
        p.blockDimX, p.blockDimY, p.blockDimZ = block
        p.sharedMemBytes = shared_bytes  # the capture's: the kernel's limit was raised for it then
        p.kernelParams = self._ptrs
        self.params = p
        self.node = self.set = None  # set: its parameters to its node, once in an executable graph

    def update(self, packed: bytes) -> None:
        """Give the node in the executable graph the parameters ``packed``."""
        self.data[: len(packed)] = packed
        err = self.set()
        if err:
            raise fail("cuGraphExecKernelNodeSetParams", err)


class NodeSetter(KernelNode):
    """New parameters for one kernel node of an executable graph: the bytes go
    into a buffer whose pointer table the driver reads at each call (it copies
    them), so a change costs one packing and one ``cuGraphExecKernelNodeSetParams``."""

    __slots__ = ("_template",)

    def __init__(self, graph_exec, exec_node, node, launcher, grid, block, shared_bytes: int = 0) -> None:
        super().__init__(launcher, grid, block, bytes(launcher._nbytes), shared_bytes)  # bytes set at each call
        self._template, self.node = node, exec_node
        self.set = _params_setter(graph_exec, exec_node, self.params)

    __call__ = KernelNode.update

    def set_template(self) -> None:
        """Give the captured graph the parameters last set (before it is cloned or updated from)."""
        check("cuGraphKernelNodeSetParams", drv.cuGraphKernelNodeSetParams(self._template, self.params))


class StagedGraph:
    """A captured graph with kernels in front whose parameters change at every
    launch (``CUDAGraph.stage_and_launch``'s copies).

    Where the driver clones the graph, one executable graph holds the kernel
    nodes and a clone of the captured graph whose root nodes depend on them: a
    launch sets the kernel nodes' parameters (``cuGraphExecKernelNodeSetParams``,
    which copies them at the call and leaves launches in flight untouched) and
    calls ``cuGraphLaunch`` once. (A child graph node holding the captured graph
    would do too, at about 1 us more GPU time per launch on the H200.) A graph
    holding conditional nodes can be neither cloned nor nested: its kernels
    are launched on the stream just before it.
    """

    def __init__(self, graph, graph_exec, heads: list[PackedLaunch]) -> None:
        self.single_launch = _clone_refusal(graph) is None
        self._heads = list(heads)
        self._lock = threading.Lock()  # a launch's parameter updates belong to it
        self._graph = self._one = None
        self._exec = graph_exec
        if not self.single_launch:
            return
        self._nodes = [KernelNode(h.launcher, h.grid, h.block, h.params) for h in heads]
        self._graph = check("cuGraphClone", drv.cuGraphClone(graph))
        try:
            roots = _nodes(self._graph, roots_only=True)
            for kn in self._nodes:
                kn.node = check("cuGraphAddKernelNode", drv.cuGraphAddKernelNode(self._graph, None, 0, kn.params))
                if roots:
                    edges = add_dependencies(self._graph, [kn.node] * len(roots), roots, None, len(roots))
                    check("cuGraphAddDependencies", edges)
            self._exec = check("cuGraphInstantiate", drv.cuGraphInstantiate(self._graph, 0))
            for kn in self._nodes:
                kn.set = _params_setter(self._exec, kn.node, kn.params)
        except BaseException:
            self._exec = None
            self.destroy()
            raise
        if len(self._nodes) == 1:
            self._one = self._nodes[0]

    def launch(self, params: list, stream) -> None:
        """Launch with ``params[i]`` (packed bytes) for the i-th kernel."""
        if self._one is not None:  # one kernel node: the common case, without the loop
            with self._lock:
                self._one.update(params[0])
                err = _graph_launch(self._exec, stream)[0]
        elif self.single_launch:
            with self._lock:
                for kn, packed in zip(self._nodes, params, strict=True):
                    kn.update(packed)
                err = _graph_launch(self._exec, stream)[0]
        else:
            for head, packed in zip(self._heads, params, strict=True):
                head.launcher.launch_packed(head.grid, head.block, stream, packed)
            err = _graph_launch(self._exec, stream)[0]
        if err:
            raise fail("cuGraphLaunch", err)

    def destroy(self) -> None:
        """Free what this object built (not the captured graph or its executable graph)."""
        if self._graph is None:
            return
        graph, graph_exec = self._graph, self._exec
        self._graph = self._exec = self._one = None
        if graph_exec is not None:  # one in flight is freed when it completes
            check("cuGraphExecDestroy", drv.cuGraphExecDestroy(graph_exec))  # refused during a global capture
        check("cuGraphDestroy", drv.cuGraphDestroy(graph))
