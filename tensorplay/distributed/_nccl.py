"""The NCCL engine of ``tensorplay.distributed`` (``backend="nccl"``, on a GPU).

Each call is first checked against the peers' calls at the group's rendezvous
(the hub: a round trip with no data, so that calls that differ between ranks
are a sentence rather than NCCL waiting forever), then queued by NCCL on the
current stream (``runtime/libraries/nccl.py``). Inside a capture the check
happens once, at capture, and NCCL's kernels become nodes of the graph: a
replay, or a pass of a while body, runs them with no host step.

**Starting.** Every rank loads NCCL and names its GPU; the ranks hear each
other's answers (a gather at the hub), so that a rank without NCCL, or two
ranks on one GPU (which NCCL refuses), are one sentence in every rank. Rank 0
then makes the group's NCCL id and the hub hands it to the others.

**Replays.** A graph that holds collectives tells the hub at each launch
(``Link.replayed``, no answer awaited): a rank that replays its k-th such
graph less often than its peers, within the group's timeout, breaks the group
with a sentence naming the ranks and their counts, where NCCL's kernels would
wait for it forever. (How long a replay runs does not matter: a while loop may
run for hours.)

**The watchdog.** A thread per rank listens on a second connection to the hub
(``Watch``) and asks NCCL for errors its work met. When the group breaks (a
rank died, a call timed out or differed, replays differ) it aborts the
communicator, so that kernels waiting for a peer return. If this rank's NCCL
work may have been cut short by that (an eager call or a replay not yet done),
the rank writes the sentence and ends with exit code 1, as PyTorch's watchdog
does: no rank goes on with what a broken collective left in its tensors.
Otherwise the next call raises ``DistributedError``.
"""

from __future__ import annotations

import collections
import os
import sys
import threading

import numpy as np

from ..runtime.backend import get as get_backend
from ..runtime.capture import capture_state
from ..runtime.libraries import nccl
from ..runtime.libraries._nvmath import LibraryUnavailable
from ._hub import DistributedError, Watch

__all__ = ["NcclEngine", "start"]

_TICK = 0.2  # seconds between the watchdog's looks at NCCL's errors


def _ranks(ranks) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


def start(link, rank: int, world: int) -> nccl.Communicator:
    """This rank's NCCL communicator, made by every rank at once through
    ``link`` (see "Starting" in the module docstring)."""
    dev = get_backend()
    if dev.name != "cuda":
        raise ValueError(
            'backend="nccl" needs a GPU, and this is the CPU simulator: leave backend=None, whose engine '
            "runs the same calls here"
        )
    try:
        nccl.library()
        why = b""
    except LibraryUnavailable as e:
        why = str(e).encode()[:240]
    record = np.zeros(256, np.uint8)  # one GPU's identity, then why NCCL did not load
    record[:16] = np.frombuffer(dev.device_uuid(), np.uint8)
    record[16 : 16 + len(why)] = np.frombuffer(why, np.uint8)
    every = link.collective(("all_gather", "uint8", (256,), "NCCL start"), record).reshape(world, 256)
    missing = [r for r in range(world) if every[r, 16:].any()]
    if missing:
        said = bytes(every[missing[0], 16:]).rstrip(b"\0").decode(errors="replace")
        raise DistributedError(f"NCCL cannot start on {_ranks(missing)}: {said}")
    gpus = collections.defaultdict(list)
    for r in range(world):
        gpus[bytes(every[r, :16])].append(r)
    shared = [ranks for ranks in gpus.values() if len(ranks) > 1]
    if shared:
        raise DistributedError(
            f"NCCL takes one GPU for each rank, and {_ranks(shared[0])} share one: give each rank its own "
            "(the launcher does where there are enough), or leave backend=None"
        )
    uid = np.frombuffer(nccl.unique_id(), np.uint8) if rank == 0 else np.zeros(nccl.UNIQUE_ID_BYTES, np.uint8)
    uid = link.collective(("broadcast", "uint8", (nccl.UNIQUE_ID_BYTES,), "src=0"), uid)
    return nccl.Communicator(world, rank, bytes(uid))


class NcclEngine:
    """This rank's calls through ``comm`` (a ``Communicator``), checked
    through ``link``, and its watchdog listening on ``watch`` (None in a group
    of one rank)."""

    def __init__(self, rank: int, comm, link, watch: Watch | None) -> None:
        self.rank, self.comm, self.link = rank, comm, link
        self.failure: str | None = None
        self.graphs = 0  # graphs captured holding collectives, numbered alike on every rank
        self._done: dict[int, object] = {}  # stream handle -> an event after its last call or replay
        self._own_mail: collections.deque = collections.deque()  # a one-rank group's sends to itself
        self._stopped = threading.Event()
        self._watch = watch
        self._watchdog = threading.Thread(target=self._look, name="tensorplay-nccl-watchdog", daemon=True)
        self._watchdog.start()

    # -- the calls (tensors checked and the call checked with the peers by the caller)
    def all_reduce(self, t, op: str, s) -> None:
        kind, per = nccl.data_type(t.dtype.name, t.dtype.itemsize, op)
        red = nccl.reduction(t.dtype.name, op)
        self._queue(s, self.comm.all_reduce, t._ptr, t._ptr, t.numel() * per, kind, red, collective=True)

    def broadcast(self, t, src: int, s) -> None:
        kind, per = nccl.data_type(t.dtype.name, t.dtype.itemsize, None)
        self._queue(s, self.comm.broadcast, t._ptr, t._ptr, t.numel() * per, kind, src, collective=True)

    def all_gather(self, out, t, s) -> None:
        kind, per = nccl.data_type(t.dtype.name, t.dtype.itemsize, None)
        self._queue(s, self.comm.all_gather, t._ptr, out._ptr, t.numel() * per, kind, collective=True)

    def reduce_scatter(self, out, t, op: str, s) -> None:
        kind, per = nccl.data_type(t.dtype.name, t.dtype.itemsize, op)
        red = nccl.reduction(t.dtype.name, op)
        self._queue(s, self.comm.reduce_scatter, t._ptr, out._ptr, out.numel() * per, kind, red, collective=True)

    def send(self, t, dst: int, s) -> None:
        if dst == self.rank:  # NCCL's send to itself waits for a receive queued after it: a copy instead
            self._own_mail.append(t.clone())
            return
        kind, per = nccl.data_type(t.dtype.name, t.dtype.itemsize, None)
        self._queue(s, self.comm.send, t._ptr, t.numel() * per, kind, dst)

    def recv(self, t, src: int, s) -> None:
        if src == self.rank:
            if not self._own_mail:
                raise DistributedError(f"rank {src}'s recv from itself found no send before it: send first")
            t.copy_(self._own_mail.popleft())
            return
        kind, per = nccl.data_type(t.dtype.name, t.dtype.itemsize, None)
        self._queue(s, self.comm.recv, t._ptr, t.numel() * per, kind, src)

    def group(self):
        """Sends and receives that pair across ranks, run together."""
        return self.comm.group()

    def _queue(self, s, call, *args, collective: bool = False) -> None:
        if self.failure is not None:
            raise DistributedError(self.failure)
        call(*args, s)
        if not capture_state.active:
            self._mark(s)
        elif s.is_capturing():
            self._watch_replays(collective)

    def _mark(self, s) -> None:
        """Record that this rank's NCCL work on ``s`` ends where ``s`` is now."""
        dev = get_backend()
        done = self._done.get(s.handle)
        if done is None:
            done = self._done[s.handle] = dev.event_create(False)
        dev.event_record(done, s._h)

    def _watch_replays(self, collective: bool) -> None:
        """Have every launch of the graph being captured marked, and, where it
        holds a collective, told to the hub (see "Replays" in the module
        docstring): one hook a graph, numbered at its first collective."""
        me = threading.get_ident()
        keys = [key for key, (_, thread) in capture_state.modes.items() if thread == me]
        hooks = [h for key in keys for h in capture_state.replay_hooks.get(key, ())]
        hook = next((h for h in hooks if isinstance(h, _Replays) and h.engine is self), None)
        if hook is None:
            hook = _Replays(self)
            capture_state.on_replay(hook)
        if collective and hook.number is None:
            self.graphs += 1
            hook.number = self.graphs

    # -- the watchdog
    def _look(self) -> None:
        dev = get_backend()
        dev.ensure_thread()
        while not self._stopped.is_set():
            if self._watch is not None:
                heard = self._watch.heard(_TICK)
            else:  # a group of one rank: no peer to lose
                self._stopped.wait(_TICK)
                heard = None
            if self._stopped.is_set():
                return
            if heard is None:
                error = self.comm.async_error()
                if error is None:
                    continue
                heard = f"rank {self.rank}'s NCCL work failed: {error}"
            self._break(heard, dev)
            return

    def _break(self, sentence: str, dev) -> None:
        self.failure = sentence
        cut_short = self._in_flight(dev)
        self.comm.abort()
        if cut_short:
            sys.stderr.write(
                f"tensorplay.distributed: {sentence}; this rank's NCCL work was cut short, so the rank ends here "
                "(exit code 1) rather than go on with what that work left in its tensors\n"
            )
            sys.stderr.flush()
            os._exit(1)

    def _in_flight(self, dev) -> bool:
        """Whether NCCL work this rank queued (a call or a replay) may still run."""
        return not all(dev.event_query(e) for e in list(self._done.values()))

    def close(self) -> None:
        """Stop the watchdog and free the communicator (its work done first)."""
        self._stopped.set()
        self._watchdog.join()
        if self._watch is not None:
            self._watch.close()
        self.comm.close()
        dev = get_backend()
        for e in self._done.values():
            dev.event_destroy(e)


class _Replays:
    """The hook of a graph holding NCCL calls: each launch is marked, noted
    by the communicator and, where the graph holds collectives (``number``,
    its place among such graphs), told to the hub."""

    def __init__(self, engine: NcclEngine) -> None:
        self.engine, self.number = engine, None

    def __call__(self, s) -> None:
        self.engine._mark(s)
        self.engine.comm.note_replay()
        if self.number is not None:
            self.engine.link.replayed(self.number)
