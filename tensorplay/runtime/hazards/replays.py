"""Executable graphs under the check: what a launch of one touches, and the
order of its launches.

Instantiating a captured graph, or updating an executable graph from one,
gives its launches the accesses of the graph's nodes (``Captures.accesses``);
a kernel node given new arguments (``set_args``, through the node setter the
backend makes) is checked against the other nodes of its graph, and its new
accesses replace its old ones. A launch is one operation on its stream that
touches all of them, after the graph's previous launch, whatever that one's
stream: the driver runs an executable graph's launches one at a time, in the
order they are made, so each waits on a pseudo-event recorded after the one
before it (``launches_of``). A staged launch (``stage_and_launch``) is its
kernels, then a replay of the graph.

The wrappers here take the checker's state (``checker._State``: its
``lock``, ``on``, ``issued``, ``execs``, ``launching``, ``captures``,
``timeline``) and the backend's call, as the checker's others do.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .access import Access, kernel_accesses, unpack
from .captures import handle_key
from .ops import user_line

__all__ = ["WRAPPERS", "launches_of"]


def launches_of(graph_exec) -> tuple:
    """The key of the pseudo-event recorded after each launch of ``graph_exec``
    (no event's key): the driver runs an executable graph's launches one at a
    time, each after the one made before it, whatever their streams."""
    return ("launches of", handle_key(graph_exec))


@contextmanager
def _launch_order(state, launch: tuple) -> Iterator[None]:
    """Held while a launch of one executable graph is made and followed, so that
    the check sees that graph's launches in the order the backend makes them."""
    with state.lock:
        lock = state.launching.setdefault(launch, threading.Lock())
    with lock:
        yield


def _forget_launches(state, launch: tuple) -> None:
    """An executable graph destroyed: its handle may name another one later."""
    with state.lock:
        state.timeline.forget_event(launch)
        state.launching.pop(launch, None)


def _graph_instantiate(state, call):
    def graph_instantiate(graph, launches=()):
        graph_exec = call(graph, launches)
        with state.lock:
            state.execs[handle_key(graph_exec)] = _replayed(state.captures.accesses(graph))
        return graph_exec

    return graph_instantiate


def _graph_exec_update(state, call):
    def graph_exec_update(graph_exec, graph, instantiated, launches=()):
        refused = call(graph_exec, graph, instantiated, launches)
        if refused is None:
            with state.lock:
                state.execs[handle_key(graph_exec)] = _replayed(state.captures.accesses(graph))
        return refused

    return graph_exec_update


def _replayed(accesses: list) -> list[Access]:
    """A graph's accesses as a launch of it makes them, each naming its node's operation."""
    return [Access(a.start, a.end, a.write, f"{a.what} of its {op.what}", a.layout) for op, a in accesses]


def _graph_launch(state, call):
    def graph_launch(graph_exec, stream) -> None:
        launch = launches_of(graph_exec)
        with _launch_order(state, launch):
            call(graph_exec, stream)
            accesses = state.execs.get(handle_key(graph_exec), [])
            state.issued(stream, "replay of a CUDA graph", accesses, launch)

    return graph_launch


def _kernel_node_setter(state, call):
    def kernel_node_setter(graph_exec, exec_node, graph, node, launcher, *shape):
        setter = call(graph_exec, exec_node, graph, node, launcher, *shape)
        return _FollowedSetter(state, setter, graph_exec, graph, node, launcher)

    return kernel_node_setter


class _FollowedSetter:
    """A kernel node's setter (the backend's, for ``set_args``) that checks
    the new arguments against the other nodes of the node's graph before
    passing them on, and then makes the graph's replays touch what they
    touch; anything else is the backend setter's own (``set_template``)."""

    __slots__ = ("state", "call", "graph_exec", "graph", "node", "launcher")

    def __init__(self, state, call, graph_exec, graph, node, launcher) -> None:
        self.state, self.call, self.graph_exec = state, call, graph_exec
        self.graph, self.node, self.launcher = graph, node, launcher

    def __call__(self, packed: bytes) -> None:
        state, launcher = self.state, self.launcher
        if not state.on:  # made while checking was on, called after it went off
            self.call(packed)
            return
        argtypes = getattr(launcher, "argtypes", None)
        accesses = kernel_accesses(getattr(launcher, "kernel", None), argtypes, unpack(argtypes, packed))
        line = user_line(1)
        with state.lock:
            state.captures.check_node_args(self.graph, self.node, accesses, line)
        self.call(packed)  # (refused by the check above, the node keeps its arguments)
        with state.lock:
            state.captures.set_node_args(self.graph, self.node, accesses, line)
            key = handle_key(self.graph_exec)
            if key in state.execs:
                state.execs[key] = _replayed(state.captures.accesses(self.graph))

    def __getattr__(self, name: str):
        return getattr(self.call, name)


def _staged_graph(state, call):
    def staged_graph(graph, graph_exec, heads):
        return _FollowedStaging(state, call(graph, graph_exec, heads), graph_exec, heads)

    return staged_graph


_staged_ids = itertools.count()  # launch orders of staged graphs' own executable graphs


class _FollowedStaging:
    """A staged graph (``stage_and_launch``'s) whose launches are checked as
    what they run: its kernels in front (the inputs' copies, with the
    parameters of the launch), then a replay of the graph behind them; both
    backends launch it with calls of their own, which the wrappers above do
    not see. Its launches run one at a time: where it is one executable graph
    of its own (``single_launch``) the kernels too, else the replay alone, in
    the order of the graph's launches. Anything else is the staged graph's own."""

    __slots__ = ("state", "staged", "graph_exec", "heads", "launches")

    def __init__(self, state, staged, graph_exec, heads: list) -> None:
        self.state, self.staged, self.graph_exec, self.heads = state, staged, graph_exec, heads
        self.launches = ("staged graph", next(_staged_ids)) if staged.single_launch else launches_of(graph_exec)

    def launch(self, params: list, stream) -> None:
        state = self.state
        if not state.on:  # made while checking was on, launched after it went off
            self.staged.launch(params, stream)
            return
        whole = self.launches if self.staged.single_launch else None  # the kernels wait for the last launch too
        with _launch_order(state, self.launches):
            self.staged.launch(params, stream)
            for head, packed in zip(self.heads, params, strict=True):
                argtypes = getattr(head.launcher, "argtypes", None)
                accesses = kernel_accesses(getattr(head.launcher, "kernel", None), argtypes, unpack(argtypes, packed))
                state.issued(stream, f"kernel {head.launcher.name} of stage_and_launch", accesses, whole)
            accesses = state.execs.get(handle_key(self.graph_exec), [])
            state.issued(stream, "replay of a CUDA graph by stage_and_launch", accesses, self.launches)

    def destroy(self) -> None:
        self.staged.destroy()
        if self.staged.single_launch and self.state.on:
            _forget_launches(self.state, self.launches)

    def __getattr__(self, name: str):
        return getattr(self.staged, name)


def _graph_destroy(state, call):
    def graph_destroy(graph) -> None:
        call(graph)
        with state.lock:
            state.captures.graphs.pop(handle_key(graph), None)

    return graph_destroy


def _graph_exec_destroy(state, call):
    def graph_exec_destroy(graph_exec) -> None:
        call(graph_exec)
        with state.lock:
            state.execs.pop(handle_key(graph_exec), None)
        _forget_launches(state, launches_of(graph_exec))

    return graph_exec_destroy


# The backend's methods for executable graphs wrapped while checking is on (their protocol names: protocol.py).
WRAPPERS = {
    "graph_instantiate": _graph_instantiate,
    "graph_exec_update": _graph_exec_update,
    "kernel_node_setter": _kernel_node_setter,
    "graph_launch": _graph_launch,
    "staged_graph": _staged_graph,
    "graph_destroy": _graph_destroy,
    "graph_exec_destroy": _graph_exec_destroy,
}
