"""Recorded graphs for the simulator: nodes with dependencies, replayed in order."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field


@dataclass
class SimNode:
    id: int
    kind: str  # "kernel", "memcpy", "memset", "conditional"
    run: object  # a callable taking no arguments
    label: str
    deps: tuple[int, ...]
    body: SimGraph | None = None  # a conditional node's body


@dataclass
class SimGraph:
    """A graph recorded by a capture."""

    nodes: list[SimNode] = field(default_factory=list)
    handles: list[int] = field(default_factory=list)  # conditional handles created in it
    _ids: itertools.count = field(default_factory=lambda: itertools.count(0), repr=False)

    def add(self, kind: str, run, label: str, deps: tuple, body: SimGraph | None = None) -> int:
        node = SimNode(next(self._ids), kind, run, label, tuple(deps), body)
        self.nodes.append(node)
        return node.id

    def all_handles(self) -> list[int]:
        """The conditional handles of this graph and of its nodes' bodies."""
        found = list(self.handles)
        for n in self.nodes:
            if n.body is not None:
                found += n.body.all_handles()
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
            if n.body is not None:  # a conditional node's body as a cluster
                lines.append(f'{indent}subgraph cluster_{prefix}{n.id} {{ label="{n.kind} {n.id} body";')
                n.body._dot_body(lines, f"{prefix}{n.id}_", indent + "  ")
                lines.append(f"{indent}}}")


class SimGraphExec:
    """An instantiated graph: its nodes in an order that respects every edge.

    Nodes are recorded in issue order, which already respects dependencies
    (a node can only depend on nodes recorded before it).
    """

    def __init__(self, graph: SimGraph) -> None:
        self._runs = [n.run for n in graph.nodes]

    def run(self) -> None:
        for run in self._runs:
            run()


@dataclass(eq=False)
class SimCondition:
    """A conditional node's handle: the value the body's kernels set."""

    kind: str  # "if" or "while"
    body: SimGraph
    value: int = 0
    _exec: SimGraphExec | None = None

    def run(self) -> None:
        if self._exec is None:
            self._exec = SimGraphExec(self.body)
        if self.kind == "if":
            if self.value:
                self._exec.run()
        else:
            while self.value:
                self._exec.run()


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
