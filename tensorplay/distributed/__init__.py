"""Ranks and collectives, with PyTorch's names: ``tensorplay.distributed``::

    import tensorplay.distributed as dist

    dist.init_process_group()        # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    dist.all_reduce(t, op=dist.ReduceOp.MAX)   # in place, on every rank

Run a script on N ranks with ``python -m tensorplay.distributed.run
--nproc-per-node N script.py ARGS``, which sets those variables.

**The engines.** Each call is queued on the current stream. With
``backend=None`` (or ``"hub"``) it is one operation over the tensors' memory.
On the simulator that is a library call (a graph node when the stream
captures: collectives run inside graphs and inside while and if bodies, at
every replay and every pass), whose data goes from rank to rank through the
group's rendezvous in rank 0's process (``_hub.py``): ranks are processes, the
reductions NumPy's. On a GPU the same engine serves eagerly, through host
copies, and a capture refuses it. With ``backend="nccl"`` (a GPU for each
rank) NCCL moves the data on the GPUs and its kernels are captured into graphs
and while and if bodies (``_nccl.py``); the rendezvous then only checks each
call against the peers'.

**Rules.** Every rank makes the same collective calls in the same order, on
tensors of one dtype and shape; a ``recv`` takes what its peer's ``send``
sent, of its dtype and shape. Tensors are contiguous. A call that breaks a
rule, a rank that does not come within the group's timeout
(``init_process_group(timeout=...)``, else ``TENSORPLAY_DIST_TIMEOUT``, else
300 s), or one whose process ended, is a ``DistributedError`` in every rank,
naming the ranks and their calls; the group is then broken, and a new one
can be made after ``destroy_process_group()``.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import enum
import os
import socket
import sys

import numpy as np

from .._tensor import Tensor
from ..runtime.backend import CaptureError
from ..runtime.backend import get as _device
from ..runtime.capture import capture_state
from ..runtime.libraries.nccl import check_reduction
from ..runtime.libraries.simulated import Operand, call
from ..runtime.streams import current_stream
from . import _nccl
from ._hub import DistributedError, Hub, Link, LocalLink, Watch, free_port
from ._stops import note_stopping

__all__ = [
    "DistributedError", "P2POp", "ReduceOp", "Work", "all_gather_into_tensor", "all_reduce", "barrier",
    "batch_isend_irecv", "broadcast", "destroy_process_group", "get_backend", "get_rank", "get_world_size",
    "init_process_group", "irecv", "is_initialized", "isend", "recv", "reduce_scatter_tensor", "send",
]  # fmt: skip

DEFAULT_TIMEOUT = 300.0  # seconds, as PyTorch's NCCL default (10 minutes there)


class ReduceOp(enum.Enum):
    """How ``all_reduce`` and ``reduce_scatter_tensor`` combine the ranks' values."""

    SUM = "SUM"
    PROD = "PROD"
    MIN = "MIN"
    MAX = "MAX"
    AVG = "AVG"


class _Group:
    """The process's group: its rank, its size and its link to the rendezvous."""

    def __init__(self, rank: int, world: int, link, hub, engine=None, key: bytes = b"") -> None:
        self.rank, self.world, self.link, self.hub = rank, world, link, hub
        self.engine = engine  # the NCCL engine (None: the hub's)
        self.key = key  # the rendezvous's key, for a rank's further connections to it (Watch)


_group: _Group | None = None
_generation = 0  # the groups this process has made


def _environment(name: str, default=None, *alternatives: str) -> str | None:
    for key in (name, *alternatives):
        if os.environ.get(key, "") != "":
            return os.environ[key]
    return default


def _number(name: str, value, lowest: int = 0) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if n < lowest:
        raise ValueError(f"{name} must be at least {lowest}, got {n}")
    return n


def init_process_group(
    backend: str | None = None, *, rank: int | None = None, world_size: int | None = None, timeout=None
) -> None:
    """Join this process to the group of ``world_size`` ranks as ``rank``.

    Without arguments both come from the environment: ``RANK`` and
    ``WORLD_SIZE`` (``python -m tensorplay.distributed.run`` sets them; under
    ``mpirun``, Open MPI's or PMI's ranks), and, for more than one rank,
    ``MASTER_ADDR`` and ``MASTER_PORT``, where rank 0 holds the rendezvous
    (under ``mpirun`` with mpi4py installed, rank 0 picks them and MPI tells
    the others).
    ``backend``: None or ``"hub"`` (tensorplay's engine), or ``"nccl"`` (on a
    GPU for each rank); None reads ``TENSORPLAY_DIST_BACKEND`` first. See the
    module docstring. ``timeout``: seconds or a ``datetime.timedelta``, how
    long a call waits for its peers.
    """
    global _group
    if _group is not None:
        raise RuntimeError("init_process_group() was already called: call destroy_process_group() first")
    backend = backend if backend is not None else _environment("TENSORPLAY_DIST_BACKEND", "hub")
    if backend not in ("hub", "nccl"):
        raise ValueError(f'backend must be None, "hub" (tensorplay\'s engine) or "nccl", got {backend!r}')
    world = _environment("WORLD_SIZE", None, "OMPI_COMM_WORLD_SIZE", "PMI_SIZE") if world_size is None else world_size
    me = _environment("RANK", None, "OMPI_COMM_WORLD_RANK", "PMI_RANK") if rank is None else rank
    if world is None or me is None:
        raise ValueError(
            "init_process_group() needs RANK and WORLD_SIZE (and MASTER_ADDR and MASTER_PORT for more than one "
            "rank): run the script with python -m tensorplay.distributed.run --nproc-per-node N script.py, "
            "or pass rank= and world_size="
        )
    world, me = _number("WORLD_SIZE", world, 1), _number("RANK", me)
    if me >= world:
        raise ValueError(f"RANK must be below WORLD_SIZE ({world}), got {me}")
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    timeout = float(timeout if timeout is not None else _environment("TENSORPLAY_DIST_TIMEOUT", DEFAULT_TIMEOUT))
    if world == 1:
        link = LocalLink()
        engine = _nccl.NcclEngine(0, _nccl.start(link, 0, 1), link, None) if backend == "nccl" else None
        _group = _Group(0, 1, link, None, engine)
        return
    address, port = _environment("MASTER_ADDR"), _environment("MASTER_PORT")
    if (address is None or port is None) and rank is None and _environment("RANK") is None:
        address, port = _mpi_rendezvous() or (address, port)
    if address is None or port is None:
        raise ValueError(
            f"a group of {world} ranks needs MASTER_ADDR and MASTER_PORT (where rank 0 holds its rendezvous): "
            "python -m tensorplay.distributed.run sets them (under mpirun, installing mpi4py does)"
        )
    port = _number("MASTER_PORT", port, 1)
    global _generation
    _generation += 1  # every rank makes its groups in the same order: the n-th group's key is the same
    key = f"tensorplay {address}:{port} {world} #{_generation}".encode()  # not the key of a group destroyed
    hub = Hub(address, port, world, timeout, key) if me == 0 else None
    link = engine = None
    try:
        link = Link(address, port, me, world, timeout, key)
        if backend == "nccl":
            engine = _nccl.NcclEngine(me, _nccl.start(link, me, world), link, Watch(address, port, me, key))
    except BaseException:
        if link is not None:
            link.close()
        if hub is not None:
            hub.join(0)
        raise
    _group = _Group(me, world, link, hub, engine, key)
    atexit.register(_leave_at_exit)  # rank 0's hub then serves the others until they leave
    if sys.excepthook is not _report_uncaught:
        _report_uncaught.previous = sys.excepthook
        sys.excepthook = _report_uncaught


def _report_uncaught(kind, value, traceback) -> None:
    """An exception that ends a rank's program breaks its group at once: its peers hear a
    sentence naming it instead of waiting out the timeout for a call it will never make."""
    group = _group
    if group is not None:
        note_stopping(issubclass(kind, DistributedError))  # before the peers hear it: the launcher names this rank
        sentence = f"rank {group.rank} stopped with {kind.__name__}: {value}"
        try:
            (group.hub or group.link).report_failure(sentence)
        except Exception:  # a link already broken: the peers hear that instead
            pass
    _report_uncaught.previous(kind, value, traceback)


def _mpi_rendezvous() -> tuple[str, int] | None:
    """(address, port) of the rendezvous, chosen by rank 0 and told to every
    rank by MPI (mpi4py), for ranks that ``mpirun`` started; None without
    mpi4py. On one machine the address is the loopback one, else rank 0's."""
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    comm = MPI.COMM_WORLD
    hosts = comm.allgather(socket.gethostname())
    where = None
    if comm.Get_rank() == 0:
        one_machine = len(set(hosts)) == 1
        where = ("127.0.0.1" if one_machine else socket.gethostbyname(hosts[0]), free_port())
    return comm.bcast(where, root=0)


def _leave_at_exit() -> None:
    if _group is not None:
        note_stopping()  # before the peers hear it (sys.exit(3) in a group: the launcher names this rank)
        destroy_process_group()


def is_initialized() -> bool:
    return _group is not None


def _the_group(fn: str) -> _Group:
    if _group is None:
        raise RuntimeError(f"{fn}() needs a process group: call tensorplay.distributed.init_process_group() first")
    return _group


def get_rank() -> int:
    return _the_group("get_rank").rank


def get_world_size() -> int:
    return _the_group("get_world_size").world


def get_backend(group=None) -> str:
    """The group's engine: ``"nccl"`` or ``"hub"`` (see the module docstring)."""
    return "hub" if _the_group("get_backend").engine is None else "nccl"


def destroy_process_group() -> None:
    """Leave the group (rank 0 waits for the others to leave, up to the timeout).
    A process that ends in the group leaves it so."""
    global _group
    group = _the_group("destroy_process_group")
    _group = None
    if group.engine is not None:
        group.engine.close()
    group.link.close()
    if group.hub is not None:
        group.hub.join(group.hub.timeout)


# -- the calls ----------------------------------------------------------------------------------


class Work:
    """The handle of a call made with ``async_op=True``: ``wait()`` makes the
    current stream wait for it (as PyTorch's NCCL handles do)."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def wait(self) -> bool:
        s = current_stream()
        if s is not self._stream:
            s.wait_stream(self._stream)
        return True

    def is_completed(self) -> bool:
        return self._stream.query()


def _checked(fn: str, *tensors: Tensor) -> None:
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}() takes tensorplay tensors, got {type(t).__name__}")
        if not t.is_contiguous():
            raise ValueError(f"{fn}() needs contiguous tensors, got one of shape {t.shape}: pass t.contiguous()")


def _desc(kind: str, t: Tensor, detail: str = "") -> tuple:
    return (kind, t.dtype.name, tuple(t.shape), detail)


def _run(fn: str, inputs: list, outputs: list, exchange, async_op: bool):
    """Queue ``exchange(*input arrays) -> output arrays`` on the current stream
    (see the module docstring): a library call on the simulator, host copies
    around it on a GPU."""
    s = current_stream()
    if _device().name == "sim":
        operands = [Operand.dense(t._ptr, tuple(t.shape), t.dtype.np) for t in (*inputs, *outputs)]

        def compute(*views):
            results = exchange(*views[: len(inputs)])
            for view, result in zip(views[len(inputs) :], results, strict=True):
                view[...] = np.asarray(result).reshape(view.shape)

        call(f"distributed.{fn}", compute, operands)
    else:
        if capture_state.active:
            raise CaptureError(
                f"{fn}() cannot be captured on a GPU with tensorplay's engine, which moves the data through the "
                "host, which a graph cannot wait for: call it outside the capture, or make the group with "
                'init_process_group("nccl") (a GPU for each rank), whose calls graphs capture'
            )
        results = exchange(*(t.numpy() for t in inputs))
        for t, result in zip(outputs, results, strict=True):
            t.copy_(np.ascontiguousarray(result).reshape(t.shape))
    return Work(s) if async_op else None


def _collective(fn: str, g: _Group, desc: tuple, source: Tensor, result: Tensor, async_op: bool, queue):
    """The collective ``desc``: this rank's ``source`` to the group, its part of
    the answer into ``result``; on NCCL, ``queue(engine, stream)`` queues it,
    once the call is checked with the peers'."""
    if g.engine is None:
        return _run(fn, [source], [result], lambda a: [g.link.collective(desc, a)], async_op)
    g.link.collective(desc, None)
    s = current_stream()
    queue(g.engine, s)
    return Work(s) if async_op else None


def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False):
    """Combine ``tensor`` over the ranks with ``op``, in place on every rank."""
    g = _the_group("all_reduce")
    _checked("all_reduce", tensor)
    op = _op("all_reduce", op, tensor)
    desc = _desc("all_reduce", tensor, op)
    return _collective("all_reduce", g, desc, tensor, tensor, async_op, lambda e, s: e.all_reduce(tensor, op, s))


def broadcast(tensor: Tensor, src: int, group=None, async_op: bool = False):
    """Rank ``src``'s ``tensor`` into every rank's ``tensor``."""
    g = _the_group("broadcast")
    _checked("broadcast", tensor)
    _peer("broadcast", "src", src, g)
    desc = _desc("broadcast", tensor, f"src={src}")
    return _collective("broadcast", g, desc, tensor, tensor, async_op, lambda e, s: e.broadcast(tensor, src, s))


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group=None, async_op: bool = False):
    """Every rank's ``input_tensor``, in rank order, into every rank's
    ``output_tensor`` (``world_size`` times its elements: (world * n, ...) or (world, n, ...))."""
    g = _the_group("all_gather_into_tensor")
    _checked("all_gather_into_tensor", output_tensor, input_tensor)
    _sizes("all_gather_into_tensor", output_tensor, input_tensor, g.world)
    desc = _desc("all_gather", input_tensor)

    def queue(e, s):
        e.all_gather(output_tensor, input_tensor, s)

    return _collective("all_gather_into_tensor", g, desc, input_tensor, output_tensor, async_op, queue)


def reduce_scatter_tensor(
    output: Tensor,
    input: Tensor,  # noqa: A002 (PyTorch's name)
    op: ReduceOp = ReduceOp.SUM,
    group=None,
    async_op: bool = False,
):
    """``input`` combined over the ranks with ``op``, cut into ``world_size``
    equal parts along its first dimension: rank r gets part r in ``output``."""
    g = _the_group("reduce_scatter_tensor")
    _checked("reduce_scatter_tensor", output, input)
    _sizes("reduce_scatter_tensor", input, output, g.world)
    name = _op("reduce_scatter_tensor", op, input)
    desc = _desc("reduce_scatter", input, name)

    def queue(e, s):
        e.reduce_scatter(output, input, name, s)

    return _collective("reduce_scatter_tensor", g, desc, input, output, async_op, queue)


def barrier(group=None, async_op: bool = False):
    """Wait until every rank has come here (the current stream's work before it included)."""
    g = _the_group("barrier")
    s = current_stream()
    if capture_state.active:
        raise CaptureError("barrier() waits on the host, which a capture cannot: call it outside the capture")
    s.synchronize()
    g.link.collective(("barrier", "", (), ""), np.empty(0))
    return Work(s) if async_op else None


def send(tensor: Tensor, dst: int, group=None) -> None:
    """Send ``tensor`` to rank ``dst``, whose ``recv`` takes it."""
    isend(tensor, dst)


def recv(tensor: Tensor, src: int, group=None) -> int:
    """Receive into ``tensor`` what rank ``src`` sends; returns ``src``."""
    irecv(tensor, src)
    return src


def isend(tensor: Tensor, dst: int, group=None) -> Work:
    g = _the_group("send")
    _checked("send", tensor)
    _peer("send", "dst", dst, g)
    desc = _desc("send", tensor)
    if g.engine is None:
        return _run("send", [tensor], [], lambda a: g.link.send(dst, desc, a) or [], True)
    g.link.send(dst, desc, None)
    s = current_stream()
    g.engine.send(tensor, dst, s)
    return Work(s)


def irecv(tensor: Tensor, src: int, group=None) -> Work:
    g = _the_group("recv")
    _checked("recv", tensor)
    _peer("recv", "src", src, g)
    desc = _desc("recv", tensor)
    if g.engine is None:
        return _run("recv", [], [tensor], lambda: [g.link.recv(src, desc)], True)
    g.link.recv(src, desc)
    s = current_stream()
    g.engine.recv(tensor, src, s)
    return Work(s)


class P2POp:
    """One send or receive of ``batch_isend_irecv``: ``P2POp(isend, t, peer)``
    or ``P2POp(irecv, t, peer)``."""

    def __init__(self, op, tensor: Tensor, peer: int, group=None, tag: int = 0) -> None:
        if op not in (isend, irecv):
            raise ValueError("P2POp takes tensorplay.distributed.isend or irecv as its op")
        self.op, self.tensor, self.peer = op, tensor, peer


def batch_isend_irecv(p2p_op_list: list) -> list:
    """Make the sends and receives of ``p2p_op_list``, the sends first (so that
    ranks exchanging with each other do not wait on each other); a ``Work`` each."""
    if not p2p_op_list or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("batch_isend_irecv() takes a non-empty list of P2POp")
    order = sorted(range(len(p2p_op_list)), key=lambda i: p2p_op_list[i].op is not isend)
    works = [None] * len(p2p_op_list)
    engine = _the_group("batch_isend_irecv").engine
    with engine.group() if engine is not None else contextlib.nullcontext():  # NCCL runs them together
        for i in order:
            p = p2p_op_list[i]
            works[i] = p.op(p.tensor, p.peer)
    return works


def _op(fn: str, op, t: Tensor) -> str:
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{fn}() takes op= as a tensorplay.distributed.ReduceOp (SUM, PROD, MIN, MAX, AVG), got {op!r}")
    if op is ReduceOp.AVG and t.dtype.kind not in "fc":
        raise TypeError(f"{fn}() averages floating-point tensors only, got {t.dtype.name}: use SUM and divide")
    check_reduction(t.dtype.name, op.value)  # both engines refuse what NCCL's cannot do
    return op.value


def _peer(fn: str, name: str, peer, g: _Group) -> None:
    if isinstance(peer, bool) or not isinstance(peer, int) or not 0 <= peer < g.world:
        raise ValueError(f"{fn}() takes {name}= as a rank from 0 to {g.world - 1}, got {peer!r}")
    if fn in ("send", "recv") and peer == g.rank and g.world > 1:
        raise ValueError(f"{fn}() to or from this rank itself ({peer}) would wait forever: use a copy")


def _sizes(fn: str, big: Tensor, small: Tensor, world: int) -> None:
    if big.dtype is not small.dtype:
        raise TypeError(f"{fn}() takes tensors of one dtype, got {big.dtype.name} and {small.dtype.name}")
    if big.numel() != world * small.numel() or (big.ndim and big.shape[0] % world):
        raise ValueError(
            f"{fn}() needs a tensor of world_size ({world}) times the elements of the other, cut along its first "
            f"dimension, got shapes {tuple(big.shape)} and {tuple(small.shape)}"
        )
