"""Recorded graphs for the simulator: nodes with dependencies, replayed in
order, and staged graphs (kernels whose parameters each launch sets, in front
of a captured graph).

A replay runs the nodes in the order they were recorded, which respects every
edge; while the hazard check interleaves work (``interleave``), each replay
takes a random order that still respects every edge, so that nodes nothing
orders run in either order, as on a GPU. As the driver does, an executable
graph runs one launch at a time: a launch from another thread (on another
stream) waits for the one in progress, and a staged graph's launch sets its
kernels' parameters and launches under one lock.
"""

from __future__ import annotations

import functools
import itertools
import random
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import update_refusal
from .params import PackedLaunch

if TYPE_CHECKING:
    from .sim import SimBackend


@dataclass
class SimNode:
    id: int
    kind: str  # "kernel", "memcpy", "memset", "conditional"
    run: object  # a callable taking no arguments
    label: str
    deps: tuple[int, ...]
    bodies: tuple[SimGraph, ...] = ()  # a conditional node's bodies
    condition: str = ""  # a conditional node's kind: "if", "if_else", "switch" or "while"


@dataclass(eq=False)
class SimGraph:
    """A graph recorded by a capture (one object per graph: equal only to itself)."""

    nodes: list[SimNode] = field(default_factory=list)
    handles: list[int] = field(default_factory=list)  # conditional handles created in it
    conditions: list = field(default_factory=list, repr=False)  # their SimConditions
    capture: Capture | None = field(default=None, repr=False, compare=False)  # a body's: the capture holding its node
    _ids: itertools.count = field(default_factory=lambda: itertools.count(0), repr=False)

    def add(self, kind: str, run, label: str, deps: tuple, bodies: tuple = (), condition: str = "") -> int:
        node = SimNode(next(self._ids), kind, run, label, tuple(deps), tuple(bodies), condition)
        self.nodes.append(node)
        return node.id

    def set_kernel(self, node: int, run, label: str) -> None:
        """Give kernel node ``node`` another launch: ``run``, and the label
        (kernel name, launch shape) the DOT shows, as the driver's
        ``cuGraphKernelNodeSetParams`` sets a node's function, grid and block."""
        n = self.nodes[node]  # node ids count the nodes in the order they were recorded
        n.run, n.label = run, label

    def all_handles(self) -> list[int]:
        """The conditional handles of this graph and of its nodes' bodies."""
        found = list(self.handles)
        for n in self.nodes:
            for body in n.bodies:
                found += body.all_handles()
        return found

    def dot(self, name: str = "tensorplay") -> str:
        lines = [f'digraph "{name}" {{', "  node [shape=box, fontname=monospace];"]
        self._dot_body(lines, "n", "  ")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def _dot_body(self, lines: list, prefix: str, indent: str) -> None:
        for n in self.nodes:
            label = n.label.replace('"', '\\"')
            lines.append(f'{indent}{prefix}{n.id} [label="{n.kind} {n.id}\\n{label}"];')
            lines.extend(f"{indent}{prefix}{d} -> {prefix}{n.id};" for d in n.deps)
            for i, body in enumerate(n.bodies):  # a conditional node's bodies as clusters
                name = _body_name(n.label, i)
                lines.append(f'{indent}subgraph cluster_{prefix}{n.id}_{i} {{ label="{n.kind} {n.id}: {name}";')
                body._dot_body(lines, f"{prefix}{n.id}_{i}_", indent + "  ")
                lines.append(f"{indent}}}")


def _body_name(label: str, i: int) -> str:
    """What body ``i`` of a conditional node labelled ``label`` is: then, else, case i, loop body."""
    kind = label.split(" ", 1)[0]
    if kind == "switch":
        return f"case {i}"
    if kind == "while":
        return "loop body"
    return ("then", "else")[i]


_shuffle: random.Random | None = None  # set while the hazard check interleaves independent work


def interleave(rng: random.Random | None) -> None:
    """Replay graphs in random orders drawn from ``rng`` that respect their edges (None: in recorded order)."""
    global _shuffle
    _shuffle = rng


def random_order(deps: list, rng: random.Random) -> list[int]:
    """An order of the nodes (``deps[i]``: the nodes node ``i`` waits for) that
    respects every edge, each next node drawn from those ready."""
    waiting = [len(set(d)) for d in deps]
    after: list[list[int]] = [[] for _ in deps]
    for i, d in enumerate(deps):
        for j in set(d):
            after[j].append(i)
    ready, order = [i for i, w in enumerate(waiting) if not w], []
    while ready:
        i = ready.pop(rng.randrange(len(ready)))
        order.append(i)
        for k in after[i]:
            waiting[k] -= 1
            if not waiting[k]:
                ready.append(k)
    return order


class SimGraphExec:
    """An instantiated graph: its nodes in an order that respects every edge.

    Nodes are recorded in issue order, which already respects dependencies
    (a node can only depend on nodes recorded before it).
    """

    def __init__(self, graph: SimGraph) -> None:
        self.origin = graph  # the graph instantiated (an update leaves it)
        self._runs = [n.run for n in graph.nodes]  # replaced, never changed: a launch keeps the list it took
        self._conditions = list(graph.conditions)
        self._shape = _topology(graph)
        self._lock = threading.Lock()  # held by the launch in progress

    def run(self) -> None:
        """One launch, once any launch of this graph in progress has ended: the
        driver runs an executable graph's launches one at a time, in the order
        they were made, on whatever streams (a launch never nests in its own).
        It runs the nodes as they were at the call: a node changed since
        (``set_run``, ``update``) is the next launch's, as the driver's
        ``cuGraphExecKernelNodeSetParams`` leaves launches made before it alone."""
        runs, conditions = self._runs, self._conditions
        with self._lock:
            for cond in conditions:  # the driver's CU_GRAPH_COND_ASSIGN_DEFAULT, at each launch
                cond.value = cond.default
            if _shuffle is not None:
                for i in random_order([d for _, d, _ in self._shape], _shuffle):
                    runs[i]()
                return
            for run in runs:
                run()

    def update(self, graph: SimGraph) -> str | None:
        """Take ``graph``'s nodes if it has this graph's topology, with the
        driver's rules (``cuGraphExecUpdate``; conditional nodes too, as the
        H200's driver 580 does, when their kinds, bodies and the bodies'
        topologies are the same); else say why, changing nothing."""
        shape = _topology(graph)
        if len(shape) != len(self._shape) or [d for _, d, _ in shape] != [d for _, d, _ in self._shape]:
            return update_refusal("CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED")
        if [k for k, _, _ in shape] != [k for k, _, _ in self._shape]:
            return update_refusal("CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED")
        if [c for _, _, c in shape] != [c for _, _, c in self._shape]:
            # A conditional node's kind, number of bodies or bodies' topology:
            # cuGraphExecUpdate fails with this code and cuda-bindings gives no
            # result info, so the driver backend words the code alike.
            return update_refusal("CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE")
        self._runs = [n.run for n in graph.nodes]
        self._conditions = list(graph.conditions)
        return None

    def set_run(self, node: int, run) -> None:
        runs = list(self._runs)  # a new list: a launch in progress keeps its own (see ``run``)
        runs[node] = run  # node ids count the nodes in the order they were recorded
        self._runs = runs


def _topology(graph: SimGraph) -> list:
    """Per node: its kind, its dependencies and, for a conditional node, its
    kind and its bodies' topologies (nested conditional nodes too)."""
    return [(n.kind, n.deps, _conditional(n)) for n in graph.nodes]


def _conditional(node: SimNode) -> tuple:
    if node.kind != "conditional":
        return ()
    return (node.condition, tuple(tuple(_topology(b)) for b in node.bodies))


class SimNodeSetter:
    """The driver's ``NodeSetter``: new parameter bytes for one kernel node."""

    __slots__ = ("_exec", "_exec_node", "_graph", "_node", "_launcher", "_grid", "_block", "_shared", "_run")

    def __init__(self, graph_exec: SimGraphExec, graph: SimGraph, exec_node: int, node: int, launcher, grid, block,
                 shared_bytes: int = 0):  # fmt: skip
        self._exec, self._exec_node, self._graph, self._node = graph_exec, exec_node, graph, node
        self._launcher, self._grid, self._block, self._shared = launcher, grid, block, shared_bytes
        self._run = None

    def __call__(self, packed: bytes) -> None:
        self._run = self._launcher.run_for(self._grid, self._block, self._launcher.unpack(packed), self._shared)
        self._exec.set_run(self._exec_node, self._run)

    def set_template(self) -> None:
        if self._run is not None:  # with the launch shape set: the DOT shows the node as it runs
            self._graph.set_kernel(self._node, self._run, self._launcher.label(self._grid, self._block))


@dataclass(eq=False)
class SimCondition:
    """A conditional node's handle: the value the body's kernels set, and the
    node's bodies, run with the driver's rules."""

    kind: str  # "if", "if_else", "switch" or "while"
    bodies: tuple[SimGraph, ...]
    value: int = 0
    default: int = 0  # the value at each launch of the graph the handle was made in
    _execs: list | None = None

    def run(self) -> None:
        if self._execs is None:
            self._execs = [SimGraphExec(b) for b in self.bodies]
        if self.kind == "while":
            while self.value:
                self._execs[0].run()
        elif self.kind == "switch":
            if self.value < len(self._execs):  # out of range: no body
                self._execs[self.value].run()
        elif self.value:
            self._execs[0].run()
        elif self.kind == "if_else":
            self._execs[1].run()


@dataclass(eq=False)
class Capture:
    """One capture in progress, possibly spanning several streams."""

    origin: object
    mode: str
    thread: int
    state: str = "active"  # "active", "invalidated", "ended"
    graph: SimGraph = field(default_factory=SimGraph)
    streams: set = field(default_factory=set)
    parent: Capture | None = None  # the capture holding this conditional body

    def __post_init__(self) -> None:
        self.streams.add(self.origin)

    def unjoined(self, origin) -> list:
        """Forked streams whose last node the origin stream does not depend on."""
        reach = set(origin.frontier)
        for node in reversed(self.graph.nodes):
            if node.id in reach:
                reach.update(node.deps)
        return [s for s in self.streams if s is not origin and not set(s.frontier) <= reach]


class SimStagedGraph:
    """The driver's ``StagedGraph`` on the simulator: kernel nodes whose
    parameters each launch sets, then a clone of the captured graph whose root
    nodes depend on them, in one recorded graph (or, for a graph holding
    conditional nodes, which the driver does not clone, the kernels launched
    just before it)."""

    def __init__(
        self, backend: SimBackend, graph: SimGraph, graph_exec: SimGraphExec, heads: list[PackedLaunch]
    ) -> None:
        self.single_launch = not any(n.kind == "conditional" for n in graph.nodes)
        self._lock = threading.Lock()  # a launch runs the parameters it set, as the driver's StagedGraph
        self._backend = backend
        self._heads = list(heads)
        self._params = [bytes(h.params) for h in heads]
        self._graph = None
        self._exec = graph_exec
        if self.single_launch:
            self._stream = backend.stream_create()  # the kernels run when the graph runs
            staged = SimGraph()
            first = tuple(
                staged.add(
                    "kernel", functools.partial(self._run, i), f"{h.launcher.name}\\n<<<{h.grid}, {h.block}>>>", ()
                )
                for i, h in enumerate(self._heads)
            )
            ids: dict[int, int] = {}
            for n in graph.nodes:  # the clone: roots wait for the kernels
                deps = tuple(ids[d] for d in n.deps) or first
                ids[n.id] = staged.add(n.kind, n.run, n.label, deps, n.bodies, n.condition)
            self._graph, self._exec = staged, SimGraphExec(staged)

    def _run(self, i: int) -> None:
        head = self._heads[i]
        head.launcher.launch_packed(head.grid, head.block, self._stream, self._params[i])

    def launch(self, params: list, stream) -> None:
        """Launch with ``params[i]`` (packed bytes) for the i-th kernel."""
        # the backend's own launch, not the hazard checker's stand-in: as the driver's StagedGraph calls
        # cuGraphLaunch itself, the checker follows a staged launch as a whole (its ``staged_graph``)
        graph_launch = type(self._backend).graph_launch
        if not self.single_launch:  # the kernels on the stream, then the graph: no lock, as on the driver
            for head, packed in zip(self._heads, params, strict=True):
                head.launcher.launch_packed(head.grid, head.block, stream, packed)
            graph_launch(self._backend, self._exec, stream)
            return
        with self._lock:  # another thread's parameters wait until this launch has run with these
            self._params = [bytes(p) for p in params]  # copied at the call, as the driver does
            graph_launch(self._backend, self._exec, stream)

    def destroy(self) -> None:
        """Free the staged graph; its executable's destroy is refused during a
        global capture, as the driver's ``cuGraphExecDestroy`` is."""
        if self._graph is not None:
            self._graph = None
            self._backend._check_unsafe("cuGraphExecDestroy")
