"""The NCCL engine of ``tensorplay.distributed`` (``backend="nccl"``).

Anywhere: how tensors' types map onto NCCL's (complex numbers as pairs, bools
as bytes with SUM an or, types NCCL lacks moved as bytes and refused for
reductions), the sentence where NCCL is not installed, the refusal on the
simulator, and the rendezvous's part (calls checked with no data, a watch
that hears the group break at once).

On the simulator, the engine's side of every call with a recording stand-in
for NCCL's communicator: the pointers, counts, types and reductions it is
given, the check of each call with the peers, a one-rank group's sends to
itself, sends and receives in one NCCL group, and the watchdog's verdict on an
error NCCL reports.

On a GPU, where NCCL is installed: a group of one rank runs every call
against NumPy eagerly, inside a replayed graph and inside a while body; with
two GPUs, two ranks do."""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
import threading

import pytest

import tensorplay as tp
import tensorplay.distributed as dist
from tensorplay.distributed import _hub, _nccl
from tensorplay.runtime.libraries import nccl

ON_SIM = tp.cuda.backend() == "sim"
HAS_NCCL = importlib.util.find_spec("nvidia.nccl") is not None


def test_tensor_types_map_onto_ncclS_and_what_it_cannot_reduce_is_a_sentence():
    assert nccl.data_type("float32", 4, "SUM") == (7, 1)
    assert nccl.data_type("bfloat16", 2, "MAX") == (9, 1)
    assert nccl.data_type("complex128", 16, "AVG") == (8, 2)  # pairs of float64, summed part by part
    assert nccl.data_type("complex64", 8, None) == (7, 2)
    assert nccl.data_type("int16", 2, None) == (1, 2)  # moved as its bytes
    assert nccl.data_type("bool", 1, "SUM") == (1, 1)
    assert nccl.reduction("bool", "SUM") == nccl.reduction("float32", "MAX")  # an or, as NumPy's sum of bools
    assert nccl.reduction("bool", "PROD") == nccl.reduction("float32", "MIN")  # an and
    assert nccl.reduction("int64", "PROD") == 1
    with pytest.raises(TypeError, match=r"^NCCL cannot reduce int16 tensors: cast them to a wider type first"):
        nccl.data_type("int16", 2, "SUM")
    with pytest.raises(TypeError, match=r"^NCCL reduces complex tensors with SUM and AVG only, not MAX"):
        nccl.data_type("complex64", 8, "MAX")


def test_a_missing_library_is_a_sentence_saying_what_to_install(monkeypatch):
    monkeypatch.setenv("TENSORPLAY_NCCL_LIBRARY", "/nowhere/libnccl.so.2")
    monkeypatch.setattr(nccl, "_lib", None)
    monkeypatch.setattr(nccl, "_reason", None)
    with pytest.raises(nccl.LibraryUnavailable, match=r"^NCCL is not installed \(/nowhere/libnccl.so.2: .*pip install"):
        nccl.library()
    with pytest.raises(nccl.LibraryUnavailable, match="^NCCL is not installed"):  # said again, not tried again
        nccl.version()


@pytest.mark.skipif(not HAS_NCCL, reason="NCCL's wheel (nvidia-nccl-cu13 or -cu12) is not installed")
def test_the_library_loads_and_makes_group_ids_without_a_gpu():
    major, minor, _ = (int(p) for p in nccl.version().split("."))
    assert (major, minor) >= (2, 14)  # ncclCommFinalize
    one, two = nccl.unique_id(), nccl.unique_id()
    assert len(one) == len(two) == 128 and one != two


@pytest.mark.skipif(not ON_SIM, reason="the simulator's refusal")
def test_nccl_needs_a_gpu_and_other_backends_are_a_sentence():
    with pytest.raises(ValueError, match=r'^backend="nccl" needs a GPU, and this is the CPU simulator'):
        dist.init_process_group("nccl", rank=0, world_size=1)
    with pytest.raises(ValueError, match=r'^backend must be None, "hub" .* or "nccl", got \'gloo\''):
        dist.init_process_group("gloo", rank=0, world_size=1)
    assert not dist.is_initialized()


def _two_links(timeout: float = 5.0):
    """A hub of two ranks in this process, its two links and a watch for rank 0."""
    from tensorplay.distributed._hub import free_port

    port, key = free_port(), b"test"
    hub = _hub.Hub("127.0.0.1", port, 2, timeout, key)
    links = [None, None]

    def join(r):
        links[r] = _hub.Link("127.0.0.1", port, r, 2, timeout, key)

    threads = [threading.Thread(target=join, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return hub, links, _hub.Watch("127.0.0.1", port, 0, key)


def _both(calls):
    """Run the two ranks' calls at once; their results, or the errors they raised."""
    out = [None, None]

    def run(r):
        try:
            out[r] = calls[r]()
        except Exception as e:  # noqa: BLE001 (the test reads it)
            out[r] = e

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_the_rendezvous_checks_calls_without_data_and_a_watch_hears_the_group_break():
    hub, links, watch = _two_links()
    desc = ("all_reduce", "float32", (4,), "SUM")
    assert _both([lambda: links[0].collective(desc, None), lambda: links[1].collective(desc, None)]) == [None, None]
    assert watch.heard(0.1) is None  # nothing wrong yet
    sends = _both([lambda: links[0].send(1, ("send", "int64", (3,), ""), None),
                   lambda: links[1].recv(0, ("recv", "int64", (3,), ""))])  # fmt: skip
    assert sends == [None, None]
    other = ("broadcast", "float32", (4,), "src=0")
    errors = _both([lambda: links[0].collective(desc, None), lambda: links[1].collective(other, None)])
    said = "collective call #2 differs between the ranks: rank 0 called all_reduce(float32 (4,), SUM), rank 1 called"
    assert all(isinstance(e, dist.DistributedError) and str(e).startswith(said) for e in errors), errors
    assert watch.heard(5).startswith(said)  # at once, with no call of rank 0's waiting
    for link in links:
        link.close()
    hub.join(5)
    watch.close()


class _Recording:
    """A stand-in for NCCL's communicator: what the engine asked of it."""

    def __init__(self) -> None:
        self.calls, self.error, self.replays = [], None, 0

    def _record(name):
        def call(self, *args):
            *args, s = args
            self.calls.append((name, *args, s.handle))

        return call

    all_reduce, broadcast, all_gather = _record("all_reduce"), _record("broadcast"), _record("all_gather")
    reduce_scatter, send, recv = _record("reduce_scatter"), _record("send"), _record("recv")

    @contextlib.contextmanager
    def group(self):
        self.calls.append(("group",))
        yield
        self.calls.append(("group end",))

    def async_error(self):
        return self.error

    def note_replay(self):
        self.replays += 1

    def abort(self):
        self.calls.append(("abort",))

    def close(self):
        self.calls.append(("close",))


@pytest.fixture
def recorded(monkeypatch):
    """A one-rank group whose NCCL engine drives a ``_Recording``."""
    comm = _Recording()
    link = _hub.LocalLink()
    monkeypatch.setattr(dist, "_group", dist._Group(0, 1, link, None, _nccl.NcclEngine(0, comm, link, None)))
    yield comm, link
    if dist.is_initialized():
        dist.destroy_process_group()


@pytest.mark.skipif(not ON_SIM, reason="a stand-in for NCCL on the simulator")
def test_the_engine_gives_nccl_pointers_counts_types_and_reductions(recorded):
    comm, link = recorded
    s = tp.cuda.current_stream().handle
    x = tp.ones(5)
    dist.all_reduce(x)
    z = tp.ones(3, dtype=tp.complex64)
    dist.all_reduce(z, op=dist.ReduceOp.AVG)
    flags = tp.ones(4, dtype=tp.bool)
    dist.all_reduce(flags, op=dist.ReduceOp.SUM)
    shorts = tp.ones((2, 2), dtype=tp.int16)
    dist.broadcast(shorts, src=0)
    out, row = tp.empty((1, 6)), tp.ones(6)
    dist.all_gather_into_tensor(out, row)
    part = tp.empty(4, dtype=tp.float64)
    whole = tp.ones(4, dtype=tp.float64)[:4]
    dist.reduce_scatter_tensor(part, whole, op=dist.ReduceOp.MAX)
    assert comm.calls == [
        ("all_reduce", x._ptr, x._ptr, 5, 7, 0, s),
        ("all_reduce", z._ptr, z._ptr, 6, 7, 4, s),  # complex64: 6 float32, averaged part by part
        ("all_reduce", flags._ptr, flags._ptr, 4, 1, 2, s),  # bools: bytes, SUM an or (MAX)
        ("broadcast", shorts._ptr, shorts._ptr, 8, 1, 0, s),  # int16: its bytes
        ("all_gather", row._ptr, out._ptr, 6, 7, s),
        ("reduce_scatter", whole._ptr, part._ptr, 4, 8, 2, s),
    ]
    assert link.collectives == 6  # each call checked with the peers' first
    with pytest.raises(TypeError, match="^NCCL cannot reduce int16 tensors"):
        dist.all_reduce(shorts)
    side = tp.cuda.Stream()
    with tp.cuda.stream(side):
        work = dist.all_reduce(x, async_op=True)
    assert comm.calls[-1][-1] == side.handle and work.wait()


@pytest.mark.skipif(not ON_SIM, reason="a stand-in for NCCL on the simulator")
def test_each_graph_holding_collectives_tells_each_launch_once(monkeypatch):
    comm, link, told = _Recording(), _hub.LocalLink(), []
    monkeypatch.setattr(link, "replayed", told.append, raising=False)
    monkeypatch.setattr(dist, "_group", dist._Group(0, 2, link, None, _nccl.NcclEngine(0, comm, link, None)))
    x, y = tp.ones(3), tp.zeros(2)
    g, h = tp.cuda.CUDAGraph(), tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        dist.all_reduce(x)
        dist.broadcast(y, src=0)  # the same graph: one number
    with tp.cuda.graph(h):
        dist.send(x, dst=1)  # sends and receives alone: marked, not counted at the hub
        dist.recv(x, src=1)
    assert [c[0] for c in comm.calls] == ["all_reduce", "broadcast", "send", "recv"]  # captured once
    g.replay()
    g.stage_and_launch([x], [tp.ones(3) * 2])
    h.replay()
    assert told == [1, 1] and dist._group.engine.graphs == 1
    assert comm.replays == 3  # every launch of a graph holding NCCL's calls: eager calls wait for the device
    dist.destroy_process_group()


@pytest.mark.skipif(not ON_SIM, reason="a stand-in for NCCL on the simulator")
def test_sends_to_itself_are_copies_and_pairs_run_in_one_nccl_group(recorded):
    comm, _ = recorded
    got, sent = tp.empty(3), tp.arange(3, dtype=tp.float32)
    works = dist.batch_isend_irecv([dist.P2POp(dist.irecv, got, 0), dist.P2POp(dist.isend, sent, 0)])
    sent.fill_(9.0)  # after the send: the receive has the value sent
    assert got.tolist() == [0.0, 1.0, 2.0] and all(w.wait() for w in works)
    assert comm.calls == [("group",), ("group end",)]  # to itself: no NCCL send or receive
    with pytest.raises(dist.DistributedError, match="recv from itself found no send before it"):
        dist.recv(got, src=0)


@pytest.mark.skipif(not ON_SIM, reason="a stand-in for NCCL on the simulator")
def test_an_error_nccl_reports_breaks_the_group_and_cut_short_work_ends_the_rank(recorded, monkeypatch, capsys):
    comm, _ = recorded
    engine = dist._group.engine
    dist.all_reduce(tp.ones(2))
    comm.error = "unhandled cuda error"
    engine._watchdog.join(5)  # the watchdog looks every 0.2 s
    assert not engine._watchdog.is_alive() and comm.calls[-1] == ("abort",)
    with pytest.raises(dist.DistributedError, match="^rank 0's NCCL work failed: unhandled cuda error$"):
        dist.all_reduce(tp.ones(2))  # the eager call was done: the rank goes on, and hears it
    ended = []
    monkeypatch.setattr(_nccl.os, "_exit", ended.append)
    monkeypatch.setattr(_nccl.NcclEngine, "_in_flight", lambda self, dev: True)  # a call or replay not yet done
    held = _Recording()
    held.error = "remote process exited or there was a network error"
    _nccl.NcclEngine(0, held, _hub.LocalLink(), None)._watchdog.join(5)
    assert ended == [1] and held.calls == [("abort",)]
    assert "remote process exited or there was a network error; this rank's NCCL work was cut short" in (
        capsys.readouterr().err
    )


# the largest value over the ranks, halved in one while node until it is at most 1 (r: the rank)
_LOOP = """
x, flag, biggest = tp.full((1,), 100.0 * (r + 1)), tp.ones(1, dtype=tp.bool), tp.empty(1)
g = tp.cuda.CUDAGraph()
with tp.cuda.graph(g):
    with g.while_(flag):
        x.mul_(0.5)
        biggest.copy_(x)
        dist.all_reduce(biggest, op=dist.ReduceOp.MAX)
        tp.gt(biggest, 1.0, out=flag)
"""

_ONE_RANK = (
    """
import numpy as np
import tensorplay as tp
import tensorplay.distributed as dist

dist.init_process_group("nccl", rank=0, world_size=1)
assert dist.get_backend() == "nccl"
rng = np.random.default_rng(3)
data = rng.standard_normal(1000).astype(np.float32)
for op in ("SUM", "PROD", "MIN", "MAX", "AVG"):
    t = tp.tensor(data)
    dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
    assert np.array_equal(t.numpy(), data), op  # one rank: its own values
z = (rng.standard_normal(6) + 1j * rng.standard_normal(6)).astype(np.complex64)
t = tp.tensor(z)
dist.all_reduce(t, op=dist.ReduceOp.AVG)
assert np.array_equal(t.numpy(), z)
flags = tp.tensor([True, False, True])
dist.all_reduce(flags)
assert flags.tolist() == [True, False, True]
out = tp.empty((1, 1000))
dist.all_gather_into_tensor(out, tp.tensor(data))
assert np.array_equal(out.numpy()[0], data)
part = tp.empty(1000)
dist.reduce_scatter_tensor(part, tp.tensor(data) * 2)
assert np.allclose(part.numpy(), 2 * data)
shorts = tp.tensor(np.arange(5, dtype=np.int16))
dist.broadcast(shorts, src=0)  # moved as bytes
assert shorts.tolist() == [0, 1, 2, 3, 4]
try:
    dist.all_reduce(shorts)
except TypeError as e:
    assert "NCCL cannot reduce int16" in str(e)
else:
    raise AssertionError("an int16 reduction went through")
got = tp.empty(3)
dist.batch_isend_irecv([dist.P2POp(dist.isend, tp.ones(3) * 7, 0), dist.P2POp(dist.irecv, got, 0)])
assert got.tolist() == [7.0, 7.0, 7.0]

# inside a graph, replayed, and inside a while body
r = 0
"""
    + _LOOP
    + """
for _ in range(2):
    x.fill_(100.0)
    flag.fill_(True)
    g.replay()
    assert x.item() == 100.0 / 2**7 and biggest.item() == x.item()
total, source = tp.empty(4), tp.arange(4, dtype=tp.float32)
g2 = tp.cuda.CUDAGraph()
with tp.cuda.graph(g2):
    dist.all_gather_into_tensor(total, source * 2)
for k in range(3):
    source.fill_(float(k))
    g2.replay()
    assert total.tolist() == [2.0 * k] * 4
t = tp.ones(2)
dist.all_reduce(t)  # eager after replays: the engine waits for the graphs' calls first
assert t.tolist() == [1.0, 1.0]
dist.barrier()
dist.destroy_process_group()
print("ok")
"""
)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_NCCL, reason="NCCL's wheel (nvidia-nccl-cu13 or -cu12) is not installed")
def test_a_one_rank_nccl_group_runs_every_call_eagerly_in_graphs_and_in_while_bodies(tmp_path):
    script = tmp_path / "one_rank.py"
    script.write_text(_ONE_RANK)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr


_TWO_RANKS = (
    """
import numpy as np
import tensorplay as tp
import tensorplay.distributed as dist

dist.init_process_group("nccl")
r, w = dist.get_rank(), dist.get_world_size()
data = np.random.default_rng(5).standard_normal((w, 4096)).astype(np.float32)
t = tp.tensor(data[r])
dist.all_reduce(t)
assert np.allclose(t.numpy(), data.sum(0), rtol=1e-5, atol=1e-5)
got = tp.empty(4096)
dist.batch_isend_irecv([dist.P2POp(dist.isend, tp.tensor(data[r]), (r + 1) % w),
                        dist.P2POp(dist.irecv, got, (r - 1) % w)])
assert np.array_equal(got.numpy(), data[(r - 1) % w])
"""
    + _LOOP
    + """
g.replay()
passes = int(np.ceil(np.log2(100.0 * w)))
assert abs(biggest.item() - 100.0 * w / 2**passes) < 1e-6
print("ok rank", r)
dist.destroy_process_group()
"""
)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_NCCL, reason="NCCL's wheel (nvidia-nccl-cu13 or -cu12) is not installed")
def test_two_ranks_on_two_gpus_reduce_swap_and_loop_in_one_while_node(tmp_path):
    if tp.cuda.device_count() < 2:
        pytest.skip("one GPU: NCCL takes one GPU for each rank")
    script = tmp_path / "two_ranks.py"
    script.write_text(_TWO_RANKS)
    cmd = [sys.executable, "-m", "tensorplay.distributed.run", "--nproc-per-node", "2", str(script)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[rank 1] ok rank 1" in done.stdout
