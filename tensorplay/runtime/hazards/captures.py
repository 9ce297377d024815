"""The check of a captured graph: its nodes' accesses against its edges.

While a stream captures, each operation issued on it (or on a stream forked
from it, or on a conditional body's stream) is noted with the node the
backend added for it (``captured_node``) and the graph that node is in. When
the capture ends, the backend gives each graph's edges (``graph_edges``: the
simulator's recorded dependencies, the driver's ``cuGraphGetEdges``), so what
is checked is the graph the device will run, not tensorplay's idea of it.

Two nodes are ordered when a path of edges leads from one to the other in the
graph holding both; a node in a conditional node's body is where that
conditional node is, for everything outside it; two bodies of one if/else or
switch node never run in the same launch; a while node's passes run one
after another. Two accesses that meet, one a write, in nodes not so ordered,
are a race.

A kernel node given new arguments after its capture (``set_args``) is checked
the same way, its new accesses against the other nodes of its graph, and the
graph's accesses follow it (``check_node_args``, ``set_node_args``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from .access import Access, meet
from .ops import HazardError, Op
from .timeline import race_error

__all__ = ["Captures", "GraphRef", "handle_key"]


def handle_key(handle) -> int:
    """An integer naming a backend's handle (an event, a graph): its value where
    it has one (the driver's), else the object's identity (the simulator's)."""
    try:
        return int(handle)
    except TypeError:
        return id(handle)


@dataclass(eq=False)
class Session:
    """One capture, begun on a stream: the graphs it captures into."""

    origin: int
    graphs: list[GraphRef] = field(default_factory=list)


@dataclass(eq=False)
class GraphRef:
    """A graph being captured into: its handle (a root's, once its capture
    ends), how it is reached from the root graph (per level: the graph, its
    conditional node, the body taken), and the operations captured into it."""

    handle: Any
    session: Session | None
    path: tuple = ()
    kind: str = ""  # the kind of conditional node this is a body of
    ops: list = field(default_factory=list)  # (op, node, accesses, order of issue)
    edges: list | None = None  # read early where the graph does not outlive its capture

    def __post_init__(self) -> None:
        if self.session is not None:
            self.session.graphs.append(self)


class Captures:
    """The captures in progress: which graph each capturing stream adds to."""

    def __init__(self, device) -> None:
        self.device = device
        self.streams: dict[int, GraphRef] = {}  # capturing stream -> the graph it adds to
        self.events: dict[int, GraphRef] = {}  # event recorded in a capture -> that graph
        self.bodies: dict[int, GraphRef] = {}  # body graph -> its ref, from when its node is added
        self.roots: set[int] = set()  # streams on which a capture began
        self.graphs: dict[int, Session] = {}  # captured graph -> its capture: its nodes and their accesses
        self._issued = itertools.count()

    def begin(self, stream: int) -> None:
        self.roots.add(stream)
        self.streams[stream] = GraphRef(None, Session(stream))

    def note(self, stream: int, handle, op: Op, accesses: list[Access]) -> None:
        """An operation issued on capturing ``stream`` (``handle``: the backend's)."""
        graph = self.streams[stream]
        node = self.device.captured_node(handle)
        if node is not None:  # one with no accesses too: set_args may give it some
            graph.ops.append((op, node, accesses, next(self._issued)))

    def record(self, event: int, stream: int) -> bool:
        """An event recorded on ``stream``: True when it marks a point in a capture."""
        graph = self.streams.get(stream)
        if graph is None:
            self.events.pop(event, None)
            return False
        self.events[event] = graph
        return True

    def wait(self, stream: int, event: int) -> bool:
        """``stream`` waits on an event: True when that joins it to a capture (a fork)."""
        graph = self.events.get(event)
        if graph is None:
            return False
        self.streams.setdefault(stream, graph)
        return True

    def conditional_added(self, stream: int, handle, bodies, kind: str) -> None:
        """A conditional node added after ``stream``'s work, with body graphs ``bodies``."""
        graph = self.streams.get(stream)
        if graph is None:
            return
        node = self.device.captured_node(handle)
        for i, body in enumerate(bodies):
            path = (*graph.path, (graph, node, i))
            self.bodies[handle_key(body)] = GraphRef(body, graph.session, path, kind)

    def body_begun(self, body, stream: int) -> None:
        """``stream`` captures into ``body`` (a conditional node's body, or a graph of its own)."""
        ref = self.bodies.get(handle_key(body))
        self.streams[stream] = ref if ref is not None else GraphRef(body, None)

    def body_ended(self, stream: int) -> None:
        graph = self.streams.pop(stream, None)
        self._leave(graph)

    def repeated(self, stream: int, target) -> None:
        """``stream``'s graph is about to be copied into ``target``'s body (an
        unrolled loop): its nodes count as that body's, and its edges are read
        now, as the graph is freed once copied."""
        graph = self.streams.pop(stream, None)
        body = self.bodies.get(handle_key(target))
        if graph is None or body is None:
            return
        graph.path, graph.kind, graph.session = body.path, body.kind, body.session
        body.session.graphs.append(graph)
        graph.edges = list(self.device.graph_edges(graph.handle))
        self._leave(graph)

    def _leave(self, graph: GraphRef | None) -> None:
        """Streams forked into ``graph`` stop capturing with it; its events mark no point to wait for."""
        if graph is not None:
            for stream in [s for s, g in self.streams.items() if g is graph]:
                del self.streams[stream]
            for event in [e for e, g in self.events.items() if g is graph]:
                del self.events[event]

    def abandon(self, stream: int) -> Session | None:
        """The capture begun on ``stream`` ended: forget its streams; its session."""
        self.roots.discard(stream)
        root = self.streams.get(stream)
        if root is None or root.session is None:
            return None
        session = root.session
        mine = {id(g) for g in session.graphs}
        for s in [s for s, g in self.streams.items() if id(g) in mine]:
            del self.streams[s]
        for key in [k for k, g in self.bodies.items() if id(g) in mine]:
            del self.bodies[key]
        for event in [e for e, g in self.events.items() if id(g) in mine]:
            del self.events[event]
        return session

    def ended(self, stream: int, graph) -> None:
        """The capture begun on ``stream`` ended with ``graph``: check it (raise
        ``HazardError`` for the first race) and keep its accesses for its replays."""
        session = self.abandon(stream)
        if session is None:
            return
        session.graphs[0].handle = graph
        check(self.device, session)
        self.graphs[handle_key(graph)] = session

    def accesses(self, graph) -> list[tuple[Op, Access]]:
        """(operation, access) of each of ``graph``'s nodes (none for a graph
        whose capture was not checked)."""
        session = self.graphs.get(handle_key(graph))
        if session is None:
            return []
        return [(op, access) for g in session.graphs for op, _, accesses, _ in g.ops for access in accesses]

    def check_node_args(self, graph, node, accesses: list[Access], line: tuple | None) -> None:
        """Raise ``HazardError`` where kernel ``node`` of ``graph``, given
        arguments that touch ``accesses`` (at ``line``), would race another of
        the graph's nodes."""
        session = self.graphs.get(handle_key(graph))
        if session is not None:
            check(self.device, session, NodeArgs(node, accesses, line), _NEW_ARGS_ADVICE)

    def set_node_args(self, graph, node, accesses: list[Access], line: tuple | None) -> None:
        """Kernel ``node`` of ``graph`` touches ``accesses`` from now on (its
        arguments set at ``line``)."""
        session = self.graphs.get(handle_key(graph))
        if session is not None:
            changed = NodeArgs(node, accesses, line)
            for g in session.graphs:
                g.ops = [changed.applied(entry) for entry in g.ops]


@dataclass(frozen=True)
class NodeArgs:
    """New arguments of a captured kernel node: the accesses they make, and
    the line of user code that set them (None where none is known)."""

    node: Any
    accesses: list[Access]
    line: tuple | None

    def applied(self, entry: tuple) -> tuple:
        """A graph's entry (op, node, accesses, order of issue), with these
        accesses and line where it is of this node."""
        op, node, accesses, issued = entry
        if node != self.node:
            return entry
        return Op(op.what, op.where, self.line or op.line), node, self.accesses, issued


_CAPTURE_ADVICE = (
    "no path of edges leads from one node to the other: make the stream of the second wait for the "
    "first's (second_stream.wait_stream(first_stream), or an event recorded after the first and waited on) "
    "before the second is captured; the capture was discarded"
)
_NEW_ARGS_ADVICE = (
    "no path of edges leads from one node to the other, and set_args() gave one of them arguments that meet "
    "the other's: give it other memory, or capture the graph again with the two ordered; the node keeps its "
    "arguments"
)


def check(device, session: Session, changed: NodeArgs | None = None, advice: str = _CAPTURE_ADVICE) -> None:
    """Raise ``HazardError`` for the first pair of the session's nodes that
    race. With ``changed``, only pairs of its node and another are checked,
    its node touching the accesses of its new arguments."""
    entries = []  # (access, op, chain, order of issue): chain as _ordered() takes it
    for g in session.graphs:
        for op, node, accesses, issued in g.ops:
            if changed is not None:
                op, node, accesses, issued = changed.applied((op, node, accesses, issued))
            chain = (*g.path, (g, node, None))
            entries.extend((a, op, chain, issued) for a in accesses)
    entries.sort(key=lambda e: e[0].start)
    reach = _Reach(device)
    for i, (a, op_a, chain_a, issued_a) in enumerate(entries):
        for j in range(i + 1, len(entries)):
            b, op_b, chain_b, issued_b = entries[j]
            if b.start >= a.end:
                break
            if changed is not None and changed.node not in (chain_a[-1][1], chain_b[-1][1]):
                continue
            if (a.write or b.write) and chain_a != chain_b and meet(a, b) and not _ordered(reach, chain_a, chain_b):
                first, second = (a, op_a, chain_a), (b, op_b, chain_b)
                if issued_b < issued_a:
                    first, second = second, first
                raise _graph_race(session, *first, *second, advice)


def _ordered(reach: _Reach, chain_a: tuple, chain_b: tuple) -> bool:
    """Whether the nodes at the ends of two chains (per level from the root:
    graph, node, body taken) cannot run at once in a launch of the graph."""
    for (graph, node_a, body_a), (_, node_b, body_b) in zip(chain_a, chain_b, strict=False):
        if node_a != node_b:
            return reach(graph, node_a, node_b) or reach(graph, node_b, node_a)
        if body_a is None or body_b is None:
            return True  # one node (of an operation that added several accesses)
        if body_a != body_b:
            return True  # two bodies of one if/else or switch node: one of them runs
    return True


class _Reach:
    """Paths in the session's graphs, from the backend's edges (read once a graph)."""

    def __init__(self, device) -> None:
        self.device = device
        self.below: dict[int, dict] = {}  # graph ref id -> node -> the nodes reachable from it (a bitset)
        self.index: dict[int, dict] = {}  # graph ref id -> node -> its bit

    def __call__(self, graph: GraphRef, a, b) -> bool:
        if id(graph) not in self.below:
            self._read(graph)
        bit = self.index[id(graph)].get(b)
        below = self.below[id(graph)].get(a, 0)
        return bit is not None and bool(below >> bit & 1)

    def _read(self, graph: GraphRef) -> None:
        edges = graph.edges if graph.edges is not None else list(self.device.graph_edges(graph.handle))
        index: dict = {}
        successors: dict = {}
        preds: dict = {}
        for a, b in edges:
            for n in (a, b):
                if n not in index:
                    index[n] = len(index)
                    successors[n], preds[n] = [], 0
            successors[a].append(b)
            preds[b] += 1
        order, ready = [], [n for n in index if not preds[n]]
        while ready:
            n = ready.pop()
            order.append(n)
            for s in successors[n]:
                preds[s] -= 1
                if not preds[s]:
                    ready.append(s)
        below: dict = {}
        for n in reversed(order):
            bits = 0
            for s in successors[n]:
                bits |= below[s] | (1 << index[s])
            below[n] = bits
        self.below[id(graph)], self.index[id(graph)] = below, index


def _where(chain: tuple) -> str:
    """Where a node is: "node 3", "node 1, in the then-body of the if node 3"."""
    parts = []
    for graph, node, body in chain:
        if body is None:
            parts.append(f"node {_node_name(node)}")
        else:
            parts.append(f"{_body_name(graph, chain, body)} of the {_kind_of(chain, graph)} node {_node_name(node)}")
    return ", in the ".join(reversed(parts))


def _kind_of(chain: tuple, graph: GraphRef) -> str:
    for i, (g, _, _) in enumerate(chain):
        if g is graph and i + 1 < len(chain):
            return chain[i + 1][0].kind.replace("_", "/") or "conditional"
    return "conditional"


def _body_name(graph: GraphRef, chain: tuple, body: int) -> str:
    kind = _kind_of(chain, graph)
    if kind == "switch":
        return f"case {body}"
    if kind == "while":
        return "loop body"
    return ("then-body", "else-body")[body]


def _node_name(node) -> str:
    if isinstance(node, tuple):  # the simulator's: (graph, node id)
        return str(node[-1])
    return f"{node:#x}" if isinstance(node, int) else str(node)


def _graph_race(
    session: Session, a: Access, op_a: Op, chain_a: tuple, b: Access, op_b: Op, chain_b: tuple, advice: str
) -> HazardError:
    op_a = Op(op_a.what, f"{_where(chain_a)}, captured on {op_a.where}", op_a.line)
    op_b = Op(op_b.what, f"{_where(chain_b)}, captured on {op_b.where}", op_b.line)
    return race_error(op_a, a, op_b, b, advice, f"in the graph captured on stream {session.origin:#x}")
