"""``tensorplay.distributed``: ranks as processes on this machine, started by
the launcher (``python -m tensorplay.distributed.run``) or one by one, each
checking its results against NumPy's over every rank's data; the sentences of
calls that differ between ranks, a rank that never comes, a receive with no
send, a rank that dies, and the launcher's verdict; a group of one rank in
this process, and the misuse each call refuses.

On the simulator the collectives also run inside a captured graph and a while
body; on a GPU a capture refuses them (the engine moves data through the host)."""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.distributed as dist
from tensorplay.distributed._hub import free_port

ON_SIM = tp.cuda.backend() == "sim"
ROOT = Path(__file__).resolve().parents[2]
PROLOGUE = """
import os, sys, time
import numpy as np
import tensorplay as tp
import tensorplay.distributed as dist
ON_SIM = tp.cuda.backend() == "sim"
"""


def _script(tmp_path, body: str) -> str:
    path = tmp_path / "ranks.py"
    path.write_text(PROLOGUE + textwrap.dedent(body))
    return str(path)


def _env(**extra) -> dict:
    return dict(os.environ, TENSORPLAY_BACKEND=tp.cuda.backend(), PYTHONUNBUFFERED="1", **extra)


def _launch(script: str, n: int, timeout: float = 120, **env) -> subprocess.CompletedProcess:
    """The launcher running ``script`` on ``n`` ranks."""
    cmd = [sys.executable, "-m", "tensorplay.distributed.run", "--nproc-per-node", str(n), script]
    return subprocess.run(cmd, capture_output=True, text=True, env=_env(**env), timeout=timeout)


def _ranks(script: str, n: int, **env) -> list[subprocess.CompletedProcess]:
    """``script`` as ``n`` ranks started one by one (no launcher to stop the others when one fails)."""
    port = free_port()
    procs = [
        subprocess.Popen(
            [sys.executable, script],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), **env),
        )  # fmt: skip
        for r in range(n)
    ]
    done = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done


COLLECTIVES = """
dist.init_process_group()
r, w = dist.get_rank(), dist.get_world_size()
rng = np.random.default_rng(7)
data = rng.standard_normal((w, 6)).astype(np.float32)  # every rank can make every rank's data
ints = rng.integers(-50, 50, (w, 5)).astype(np.int64)


def close(t, want):
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-6, atol=1e-6)


for op, ref in [("SUM", data.sum(0)), ("PROD", data.prod(0)), ("MIN", data.min(0)), ("MAX", data.max(0)),
                ("AVG", data.mean(0))]:
    t = tp.tensor(data[r])
    dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
    close(t, ref)
t = tp.tensor(ints[r])
dist.all_reduce(t, op=dist.ReduceOp.SUM)
assert t.tolist() == ints.sum(0).tolist()
b = tp.tensor(data[r])
dist.broadcast(b, src=w - 1)
close(b, data[w - 1])
out = tp.empty((w, 6))
dist.all_gather_into_tensor(out, tp.tensor(data[r]))
close(out, data)
part = tp.empty((2, 3))
full = rng.standard_normal((w, 2 * w, 3)).astype(np.float32)
dist.reduce_scatter_tensor(part, tp.tensor(full[r]), op=dist.ReduceOp.MAX)
close(part, full.max(0)[2 * r : 2 * r + 2])
# a ring: each rank sends to the next and receives from the one before
got = tp.empty(4, dtype=tp.float64)
works = dist.batch_isend_irecv([dist.P2POp(dist.isend, tp.full((4,), float(r), dtype=tp.float64), (r + 1) % w),
                                dist.P2POp(dist.irecv, got, (r - 1) % w)])
for work in works:
    assert work.wait()
assert got.tolist() == [float((r - 1) % w)] * 4
if r == 0:
    dist.send(tp.arange(3), dst=w - 1)
if r == w - 1:
    t = tp.empty(3, dtype=tp.int64)
    assert dist.recv(t, src=0) == 0 and t.tolist() == [0, 1, 2]
work = dist.all_reduce(tp.ones(2), async_op=True)
assert work.wait()

# inside a graph, replayed, and inside a while body: the largest value over the ranks decides every rank's loop
x, flag, biggest = tp.full((1,), 100.0 * (r + 1)), tp.ones(1, dtype=tp.bool), tp.empty(1)
g = tp.cuda.CUDAGraph()
try:
    with tp.cuda.graph(g):
        with g.while_(flag):
            x.mul_(0.5)
            biggest.copy_(x)
            dist.all_reduce(biggest, op=dist.ReduceOp.MAX)
            tp.gt(biggest, 1.0, out=flag)
except tp.cuda.CaptureError as e:
    assert not ON_SIM and "cannot be captured on a GPU" in str(e), e
else:
    assert ON_SIM
    passes = int(np.ceil(np.log2(100.0 * w)))  # halvings until the largest is at most 1
    for _ in range(2):
        x.fill_(100.0 * (r + 1))
        flag.fill_(True)
        g.replay()
        close(x, 100.0 * (r + 1) / 2**passes)
        close(biggest, 100.0 * w / 2**passes)
    total = tp.empty(1)
    g2 = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g2):
        total.copy_(x * 0 + (r + 1))
        dist.all_reduce(total)
    for _ in range(3):
        g2.replay()
        assert total.item() == w * (w + 1) / 2
dist.barrier()
print(f"ok rank {r} of {w}")
dist.destroy_process_group()
"""


@pytest.mark.parametrize("ranks", [2, 4])
def test_the_collectives_on_several_ranks_match_numpy(tmp_path, ranks):
    done = _launch(_script(tmp_path, COLLECTIVES), ranks)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(line for line in done.stdout.splitlines() if "ok rank" in line) == [
        f"[rank {r}] ok rank {r} of {ranks}" for r in range(ranks)
    ]


def test_ranks_making_different_collective_calls_hear_a_sentence_naming_them(tmp_path):
    script = _script(tmp_path, """
        dist.init_process_group()
        t = tp.ones(4)
        try:
            if dist.get_rank() == 0:
                dist.all_reduce(t)
            else:
                dist.broadcast(t, src=0)
        except dist.DistributedError as e:
            print("error:", e)
        try:
            dist.all_reduce(t)  # the group is broken: every later call says why
        except dist.DistributedError as e:
            print("later:", e)
        print("still works:", (t + 1).tolist())
    """)  # fmt: skip
    for r, done in enumerate(_ranks(script, 2)):
        assert done.returncode == 0, done.stderr
        said = (
            "collective call #1 differs between the ranks: rank 0 called all_reduce(float32 (4,), SUM), "
            "rank 1 called broadcast(float32 (4,), src=0); every rank must make the same collective calls "
            "in the same order"
        )
        assert f"error: {said} (seen by rank {r} in " in done.stdout, done.stdout
        assert f"later: {said}" in done.stdout
        assert "still works: [2.0, 2.0, 2.0, 2.0]" in done.stdout


def test_a_rank_that_does_not_come_and_a_recv_without_send_time_out(tmp_path):
    script = _script(tmp_path, """
        dist.init_process_group()
        if dist.get_rank() == 0:
            try:
                dist.all_reduce(tp.ones(3))
            except dist.DistributedError as e:
                print("error:", e)
        else:
            time.sleep(3)  # longer than the timeout
            try:
                dist.recv(tp.empty(2), src=0)
            except dist.DistributedError as e:
                print("error:", e)
    """)  # fmt: skip
    zero, one = _ranks(script, 2, TENSORPLAY_DIST_TIMEOUT="1.5")
    assert zero.returncode == 0 and one.returncode == 0, zero.stderr + one.stderr
    assert (
        "error: rank 1 did not make collective call #1 within 1.5 s, which rank 0 made as all_reduce(float32 (3,), SUM)"
    ) in zero.stdout, zero.stdout
    assert "error: rank 1 did not make collective call #1" in one.stdout  # the group broke before its recv


def test_a_recv_that_no_send_matches_times_out(tmp_path):
    script = _script(tmp_path, """
        dist.init_process_group()
        if dist.get_rank() == 1:
            try:
                dist.recv(tp.empty(2), src=0)
            except dist.DistributedError as e:
                print("error:", e)
        else:
            time.sleep(3)
    """)  # fmt: skip
    _, one = _ranks(script, 2, TENSORPLAY_DIST_TIMEOUT="1.5")
    assert "error: rank 1's recv from rank 0 (recv(float32 (2,))) found no send within 1.5 s" in one.stdout, one


def test_a_rank_that_dies_is_an_error_in_the_others_not_a_hang(tmp_path):
    script = _script(tmp_path, """
        dist.init_process_group()
        if dist.get_rank() == 1:
            os._exit(3)
        try:
            dist.all_reduce(tp.ones(2))
        except dist.DistributedError as e:
            print("error:", e)
    """)  # fmt: skip
    zero, one = _ranks(script, 2)
    assert one.returncode == 3
    assert "error: rank 1 ended before the group was destroyed" in zero.stdout, zero.stdout + zero.stderr


def test_ranks_that_replay_a_graph_holding_collectives_unequally_hear_a_sentence(tmp_path):
    """NCCL's engine, its communicator a stand-in (the simulator has no NCCL):
    a rank that replays its graph holding collectives less often than its
    peers is a sentence naming both, where NCCL's kernels would wait forever."""
    script = _script(tmp_path, """
        from tensorplay.distributed import _hub, _nccl

        class Comm:  # NCCL's part: nothing to do here
            def all_reduce(self, *args): pass
            def async_error(self): return None
            def note_replay(self): pass
            def abort(self): pass
            def close(self): pass

        dist.init_process_group()
        g = dist._group
        watch = _hub.Watch(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), g.rank, g.key)
        g.engine = _nccl.NcclEngine(g.rank, Comm(), g.link, watch)
        x = tp.ones(2)
        graph = tp.cuda.CUDAGraph()
        with tp.cuda.graph(graph):
            dist.all_reduce(x)
        for _ in range(3 if g.rank == 0 else 2):
            graph.replay()
        time.sleep(3)  # longer than the timeout
        try:
            dist.all_reduce(x)
        except dist.DistributedError as e:
            print("error:", e)
    """)  # fmt: skip
    for done in _ranks(script, 2, TENSORPLAY_DIST_TIMEOUT="1.5"):
        assert done.returncode == 0, done.stderr
        assert (
            "error: rank 1 did not replay graph #1 holding collectives within 1.5 s as often as rank 0 (3 times; "
            "rank 1 2): every rank must replay its graphs that hold collectives as often as its peers"
        ) in done.stdout, done.stdout


MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")


@pytest.mark.skipif(MPIEXEC is None or importlib.util.find_spec("mpi4py") is None, reason="no MPI (mpi4py, mpich)")
def test_ranks_that_mpirun_started_find_each_other_through_mpi(tmp_path):
    script = _script(tmp_path, """
        assert not {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"} & set(os.environ)
        dist.init_process_group()  # MPI's ranks; rank 0's rendezvous, told by MPI
        r, w = dist.get_rank(), dist.get_world_size()
        t = tp.full((3,), float(r + 1))
        dist.all_reduce(t)
        print(f"rank {r} of {w}: {t.tolist()}")
        dist.destroy_process_group()
    """)  # fmt: skip
    env = {k: v for k, v in _env().items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env |= {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}  # Open MPI's mpiexec, as root
    done = subprocess.run([MPIEXEC, "-n", "2", sys.executable, script], capture_output=True, text=True, env=env,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    for r in range(2):
        assert f"rank {r} of 2: [3.0, 3.0, 3.0]" in done.stdout, done.stdout


def test_the_launcher_exits_with_the_failing_rank_code_and_its_traceback(tmp_path):
    script = _script(tmp_path, """
        assert os.environ["LOCAL_RANK"] == os.environ["RANK"] and os.environ["WORLD_SIZE"] == "2"
        if os.environ["RANK"] == "1":
            raise ValueError("rank one gives up")
        time.sleep(60)  # stopped by the launcher
    """)  # fmt: skip
    done = _launch(script, 2)
    assert done.returncode == 1
    assert "== rank 1 of 2 failed with exit code 1; the end of its error output:" in done.stderr
    assert done.stderr.rstrip().endswith("ValueError: rank one gives up")
    assert "[rank 1] ValueError: rank one gives up" in done.stderr


@pytest.mark.parametrize("who", [0, 1])
def test_a_rank_stopped_by_an_exception_breaks_the_group_at_once(tmp_path, who):
    script = _script(tmp_path, f"""
        dist.init_process_group()
        if dist.get_rank() == {who}:
            raise ValueError("this rank gives up")
        dist.all_reduce(tp.ones(2))
    """)  # fmt: skip
    start = time.monotonic()  # ranks started one by one: a launcher would stop the peer when the rank fails
    done = _ranks(script, 2, TENSORPLAY_DIST_TIMEOUT="100")
    assert time.monotonic() - start < 60  # not the group's timeout
    assert [p.returncode for p in done] == [1, 1]
    assert f"rank {who} stopped with ValueError: this rank gives up (seen by rank {1 - who}" in done[1 - who].stderr


def test_a_rank_that_leaves_while_its_peers_wait_for_it_is_a_sentence(tmp_path):
    script = _script(tmp_path, """
        dist.init_process_group()
        if dist.get_rank() == 0:
            dist.destroy_process_group()
        else:
            dist.all_reduce(tp.ones(2))
    """)  # fmt: skip
    start = time.monotonic()
    done = _launch(script, 2, TENSORPLAY_DIST_TIMEOUT="100")
    assert time.monotonic() - start < 60
    assert "rank 0 left the group (destroy_process_group) before collective call #1" in done.stderr


def test_a_process_makes_a_new_group_after_destroying_one(tmp_path):
    # on the simulator each group's call is captured, and the last graph replayed after its group is gone;
    # on a GPU tensorplay's engine is not captured (it moves data through the host), so the calls are eager
    script = _script(tmp_path, """
        g = None
        for round in range(3):  # the same MASTER_ADDR and MASTER_PORT each time
            dist.init_process_group()
            t = tp.ones(2) * (dist.get_rank() + 1)
            if tp.cuda.backend() == "sim":
                g = tp.cuda.CUDAGraph()
                with tp.cuda.graph(g):
                    dist.all_reduce(t)
                g.replay()
            else:
                dist.all_reduce(t)
            print("round", round, t.tolist())
            dist.destroy_process_group()
        try:  # its group is gone
            if g is not None:
                g.replay()
            tp.cuda.synchronize()
        except dist.DistributedError as e:
            print("after:", e)
    """)  # fmt: skip
    done = _launch(script, 2)
    assert done.returncode == 0, done.stderr
    if tp.cuda.backend() == "sim":
        assert "group was destroyed (destroy_process_group): its calls, a graph's that captured them" in done.stdout
    for r in range(2):
        for n in range(3):
            assert f"[rank {r}] round {n} [3.0, 3.0]" in done.stdout


def test_the_launcher_gives_the_script_every_word_after_it(tmp_path):
    script = _script(tmp_path, """
        print("ARGS", sys.argv[1:])
    """)  # fmt: skip
    cmd = [sys.executable, "-m", "tensorplay.distributed.run", "--nproc-per-node=1", script]
    for words in (["--n", "32", "--tol", "1e-3"], ["--nnodes", "3", "--", "x"], ["--nproc", "3"]):
        done = subprocess.run(cmd + words, capture_output=True, text=True, env=_env(), timeout=120)
        assert done.returncode == 0, done.stderr
        assert f"[rank 0] ARGS {words!r}" in done.stdout


# -- one rank, in this process ------------------------------------------------------------------


@pytest.fixture
def one_rank():
    dist.init_process_group(rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_a_group_of_one_rank(one_rank):
    assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
    assert dist.get_backend() == "hub"
    t = tp.tensor([1.0, -2.0, 3.0])
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    dist.broadcast(t, src=0)
    assert t.tolist() == [1.0, -2.0, 3.0]
    out = tp.empty(3)
    dist.all_gather_into_tensor(out, t)
    assert out.tolist() == t.tolist()
    dist.send(t * 2, dst=0)
    dist.recv(out, src=0)
    assert out.tolist() == [2.0, -4.0, 6.0]
    dist.barrier()


def test_each_call_refuses_misuse_with_a_sentence(one_rank):
    with pytest.raises(RuntimeError, match=r"^init_process_group\(\) was already called"):
        dist.init_process_group(rank=0, world_size=1)
    with pytest.raises(ValueError, match=r"^all_reduce\(\) needs contiguous tensors, got one of shape \(3, 2\)"):
        dist.all_reduce(tp.ones((2, 3)).t())
    with pytest.raises(TypeError, match=r"^all_reduce\(\) averages floating-point tensors only, got int64"):
        dist.all_reduce(tp.ones(2, dtype=tp.int64), op=dist.ReduceOp.AVG)
    with pytest.raises(TypeError, match=r"^all_reduce\(\) takes op= as a tensorplay.distributed.ReduceOp"):
        dist.all_reduce(tp.ones(2), op="sum")
    with pytest.raises(ValueError, match=r"^broadcast\(\) takes src= as a rank from 0 to 0, got 1"):
        dist.broadcast(tp.ones(2), src=1)
    with pytest.raises(ValueError, match=r"^broadcast\(\) takes src= as a rank from 0 to 0, got False"):
        dist.broadcast(tp.ones(2), src=False)  # a bool is no rank (the hub would not know it)
    with pytest.raises(ValueError, match=r"^all_gather_into_tensor\(\) needs a tensor of world_size \(1\) times"):
        dist.all_gather_into_tensor(tp.empty(4), tp.ones(2))
    with pytest.raises(TypeError, match=r"^all_reduce\(\) takes tensorplay tensors, got ndarray"):
        dist.all_reduce(np.ones(2))
    with pytest.raises(dist.DistributedError, match="recv from itself found no send before it"):
        dist.recv(tp.empty(1), src=0)


def test_without_a_group_or_its_variables_the_sentences_say_what_to_do(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(RuntimeError, match=r"^all_reduce\(\) needs a process group: call tensorplay.distributed"):
        dist.all_reduce(tp.ones(1))
    with pytest.raises(ValueError, match=r"needs RANK and WORLD_SIZE .* python -m tensorplay.distributed.run"):
        dist.init_process_group()
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(ValueError, match="a group of 2 ranks needs MASTER_ADDR and MASTER_PORT"):
        dist.init_process_group()
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(ValueError, match=r"^RANK must be below WORLD_SIZE \(2\), got 2"):
        dist.init_process_group()
    assert not dist.is_initialized()


def test_the_heat_demo_split_over_four_ranks_gives_the_one_process_answer():
    script = str(ROOT / "examples" / "heat_distributed.py")
    done = _launch(script, 4, timeout=600)  # four simulators on CI's two cores: about 2 minutes
    assert done.returncode == 0, done.stdout + done.stderr
    how = "one while node per rank" if ON_SIM else "the host drives each iteration"
    assert f"[rank 0] heat 16x16 on 4 ranks ({how}): 100 iterations" in done.stdout, done.stdout
    assert "[rank 0] one process: 100 iterations, largest difference 0" in done.stdout
    assert "[rank 0] same iterations and field as one process" in done.stdout


def test_one_device_per_process_and_a_sentence_for_any_other():
    tp.cuda.set_device(0)
    tp.cuda.set_device("cuda:0")
    tp.cuda.set_device(tp.ones(1).device)
    with tp.cuda.device(0):
        assert (tp.ones(2) + 1).tolist() == [2.0, 2.0] and tp.cuda.current_device() == 0
    for other in (1, "cuda:1", -1, "cpu"):
        with pytest.raises(ValueError, match=r"tensorplay drives one device per process, cuda:0 \(this machine has"):
            tp.cuda.set_device(other)
    with pytest.raises(ValueError, match=r"^device\(1\): .* --nproc-per-node N gives each rank a GPU of its own"):
        tp.cuda.device(1)


def test_the_launcher_gives_each_rank_a_gpu_of_its_own_where_there_are_enough(tmp_path, monkeypatch):
    from tensorplay.distributed import run

    script = tmp_path / "sees.py"  # no tensorplay: a rank shown a GPU this machine lacks could not start it
    script.write_text('import os\nprint("sees", os.environ.get("CUDA_VISIBLE_DEVICES"))\n')
    script = str(script)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(run, "_gpus", lambda: 2)
    for gpus, seen in ((2, ["0", "1"]), (1, ["None", "None"])):  # fewer GPUs than ranks: they share them
        monkeypatch.setattr(run, "_gpus", lambda gpus=gpus: gpus)
        out = io.StringIO()
        monkeypatch.setattr(sys, "stdout", out)
        assert run.main(["--nproc-per-node", "2", script]) == 0
        lines = sorted(line for line in out.getvalue().splitlines() if "sees" in line)
        assert lines == [f"[rank {r}] sees {s}" for r, s in enumerate(seen)]
