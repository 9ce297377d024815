"""Happens-before for work issued eagerly: a vector clock per stream.

Each stream counts the operations issued on it; its clock holds, for every
stream, the count of that stream's operations known to come before the next
one issued on it. Stream order advances a stream's own entry; an event takes
the clock of its stream when recorded, and a stream that waits on it takes the
larger of each entry; a host wait (a stream's, an event's, the device's) gives
the host what it waited for, and everything issued after takes the host's
clock too (the host saw that work finish before issuing it).

Each operation's accesses stay known, per stream in issue order, until the
host has waited for them (then nothing later can race with them). A new one is
compared with the accesses of the other streams that its clock does not
cover: on a stream's list those are the last ones, so a program whose streams
are ordered compares with none. An access on a stream replaces that stream's
earlier access to the same bytes (a write replaces reads and writes): what
would race with the earlier one races with it too.

Examples
--------
>>> from tensorplay.runtime.hazards.access import Access
>>> from tensorplay.runtime.hazards.ops import HazardError, Op
>>> t = Timeline()
>>> t.issue(1, Op("kernel fill", "stream 0x1", None), [Access(0, 16, True, "out")])
>>> try:
...     t.issue(2, Op("kernel sum", "stream 0x2", None), [Access(8, 12, False, "x")])
... except HazardError as e:
...     print(e.first)
...     print(e.second)
kernel fill on stream 0x1, writes out, 16 bytes at 0x0
kernel sum on stream 0x2, reads x, 4 bytes at 0x8
>>> t.record(7, 1); t.wait(2, 7)  # stream 2 waits for an event recorded on stream 1
>>> t.issue(2, Op("kernel sum", "stream 0x2", None), [Access(8, 12, False, "x")])
"""

from __future__ import annotations

from .access import Access, meet
from .ops import HazardError, Op

__all__ = ["Timeline", "race_error"]


def _join(into: dict[int, int], other: dict[int, int]) -> None:
    for k, v in other.items():
        if into.get(k, 0) < v:
            into[k] = v


class Timeline:
    """The clocks of the streams, the host and the events recorded eagerly,
    and the accesses not yet known to come before all later work. Keys are
    integers (stream handles, the backend's event keys), or tuples for the
    pseudo-events the check records itself (``replays.launches_of``)."""

    def __init__(self) -> None:
        self.host: dict[int, int] = {}
        self.clocks: dict[int, dict[int, int]] = {}
        self.events: dict[int | tuple, dict[int, int]] = {}
        self.shadow: dict[int, dict[tuple, tuple]] = {}  # stream -> {(start, end, write): (count, access, op)}

    def _at(self, stream: int) -> dict[int, int]:
        """The clock of the next operation issued on ``stream``."""
        clock = self.clocks.get(stream)
        if clock is None:
            clock = self.clocks[stream] = {}
        _join(clock, self.host)
        return clock

    def issue(self, stream: int, op: Op, accesses: list[Access]) -> None:
        """An operation issued on ``stream``: raise ``HazardError`` when one of its
        accesses races with an earlier one, else note them."""
        clock = self._at(stream)
        count = clock.get(stream, 0) + 1
        for access in accesses:
            self._compare(stream, clock, op, access)
        clock[stream] = count
        entries = self.shadow.get(stream)
        if entries is None:
            entries = self.shadow[stream] = {}
        for access in accesses:
            key = (access.start, access.end, access.write)
            entries.pop(key, None)
            if access.write:
                entries.pop((access.start, access.end, False), None)
            entries[key] = (count, access, op)

    def _compare(self, stream: int, clock: dict[int, int], op: Op, access: Access) -> None:
        for other, entries in self.shadow.items():
            if other == stream:
                continue
            known = clock.get(other, 0)
            for count, earlier, earlier_op in reversed(entries.values()):
                if count <= known:
                    break
                if (earlier.write or access.write) and meet(earlier, access):
                    raise race_error(earlier_op, earlier, op, access, _EAGER_ADVICE)

    def record(self, event: int | tuple, stream: int) -> None:
        self.events[event] = dict(self._at(stream))

    def wait(self, stream: int, event: int | tuple) -> None:
        clock = self.events.get(event)
        if clock is not None:
            _join(self._at(stream), clock)

    def forget_event(self, event: int | tuple) -> None:
        self.events.pop(event, None)

    def host_waits(self, stream: int) -> None:
        _join(self.host, self._at(stream))
        self._prune()

    def host_waits_event(self, event: int) -> None:
        clock = self.events.get(event)
        if clock is not None:
            _join(self.host, clock)
            self._prune()

    def host_waits_all(self) -> None:
        for clock in self.clocks.values():
            _join(self.host, clock)
        self._prune()

    def _prune(self) -> None:
        """Drop the accesses the host has waited for: everything issued from now on comes after them."""
        for stream, entries in self.shadow.items():
            done = self.host.get(stream, 0)
            stale = []
            for key, (count, _, _) in entries.items():
                if count > done:
                    break
                stale.append(key)
            for key in stale:
                del entries[key]


_EAGER_ADVICE = (
    "make the second wait for the first: second_stream.wait_stream(first_stream) before issuing it, or wait "
    "on an event recorded after the first (stream.wait_event), or synchronise the host between them. (If the "
    "memory was freed and given to a new tensor in between, the first's tensor was dropped while another stream "
    "still used it: tensor.record_stream(that_stream) keeps its memory from reuse until that stream's work is done)"
)


def race_error(first_op: Op, first: Access, second_op: Op, second: Access, advice: str, where: str = "") -> HazardError:
    """The error for two accesses that race: ``first`` (of ``first_op``) and ``second``."""
    a, b = first_op.describe(first), second_op.describe(second)
    what = f" {where}" if where else ""
    message = f"two operations touch the same memory{what} with nothing ordering them:\n  {a}\n  {b}\n{advice}"
    return HazardError(message, a, b)
