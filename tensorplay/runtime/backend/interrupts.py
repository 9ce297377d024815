"""Ctrl-C while the device runs work: what both backends do with it.

A host wait (``synchronize``, a readback, an event or stream wait) on the GPU
polls in Python, so Ctrl-C reaches it; before the ``KeyboardInterrupt`` goes
on to the program, ``interrupted()`` runs the hooks registered with
``on_interrupt``: the graph layer's stops the while loops of graphs that may be
running (``CUDAGraph.cancel``), so a loop that never ends does not keep the
device busy after the program has moved on.

The simulator runs a graph inside its launch. There ``deferred()`` holds Ctrl-C
for the launch: the hooks run at once (the loop stops at its next pass, as on
the GPU), the launch finishes, and then ``KeyboardInterrupt`` is raised, so the
graph's memory is never left half-written by a kernel stopped midway.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from contextlib import contextmanager

__all__ = ["deferred", "interrupted", "on_interrupt"]

_hooks: list[Callable[[], None]] = []


def on_interrupt(hook: Callable[[], None]) -> None:
    """Run ``hook()`` whenever Ctrl-C interrupts a host wait on the device."""
    _hooks.append(hook)


def interrupted() -> None:
    """Run the hooks (each at most fails on its own: the interrupt goes on)."""
    for hook in _hooks:
        try:
            hook()
        except Exception:
            pass


@contextmanager
def deferred():
    """Hold Ctrl-C in the main thread for the block: run the hooks when it
    comes, and raise ``KeyboardInterrupt`` once the block has ended. Python's
    own Ctrl-C handler must be the one in place (else the block runs as is)."""
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    hit = []

    def hold(signum, frame):
        hit.append(signum)
        interrupted()

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if hit:
        raise KeyboardInterrupt
