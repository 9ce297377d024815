"""``tensorplay.distributed`` at its edges: the launcher naming the rank that
failed first, not a peer that failed for hearing of it, taking ``--`` as the
end of its options and naming an option it does not know; a recv from a rank
that has left; the reductions both engines refuse alike; a barrier's name in a
sentence."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

import tensorplay as tp
import tensorplay.distributed as dist
from tensorplay.distributed import run
from tensorplay.runtime.libraries import nccl

PROLOGUE = """
import os, sys, time
import tensorplay as tp
import tensorplay.distributed as dist
"""


def _launch(tmp_path, body: str, n: int = 2, words: tuple = ()) -> subprocess.CompletedProcess:
    """The launcher running ``body`` on ``n`` ranks (``words``: the launcher's before the script)."""
    script = tmp_path / "ranks.py"
    script.write_text(PROLOGUE + textwrap.dedent(body))
    cmd = [sys.executable, "-m", "tensorplay.distributed.run", "--nproc-per-node", str(n), *words, str(script)]
    env = dict(os.environ, TENSORPLAY_BACKEND=tp.cuda.backend(), PYTHONUNBUFFERED="1", TENSORPLAY_DIST_TIMEOUT="100")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize(
    ("who", "stop", "code", "last"),
    [
        (1, 'raise ValueError("this rank gives up")', 1, "ValueError: this rank gives up"),
        (0, 'raise ValueError("this rank gives up")', 1, "ValueError: this rank gives up"),
        (1, "sys.exit(3)", 3, None),
        (1, "os._exit(4)", 4, None),
    ],
)
def test_the_launcher_names_the_rank_that_stopped_not_the_peer_that_heard_it(tmp_path, who, stop, code, last):
    # the peer waits in a collective, hears of the stop at once, and fails too: often before the
    # stopping rank's process has ended (its traceback, its exit from the group)
    done = _launch(tmp_path, f"""
        dist.init_process_group()
        if dist.get_rank() == {who}:
            time.sleep(0.5)
            {stop}
        dist.all_reduce(tp.ones(2))
    """)  # fmt: skip
    assert done.returncode == code, done.stderr
    assert f"== rank {who} of 2 failed with exit code {code}; the end of its error output:" in done.stderr, done.stderr
    if last is not None:
        assert done.stderr.rstrip().endswith(last), done.stderr
    # the peer fails too, once it hears, unless the launcher's stop reached it first (a race the load of
    # the machine decides: on two busy CPUs the hard exit's peer was stopped before it said anything)
    peer = [line for line in done.stderr.splitlines() if line.startswith(f"[rank {1 - who}]")]
    assert not peer or any(f"(seen by rank {1 - who} in all_reduce" in line for line in peer), done.stderr
    assert "RuntimeWarning" not in done.stderr  # the package does not import the launcher's module


@pytest.mark.parametrize("recv_first", [True, False])
def test_a_recv_from_a_rank_that_left_gets_what_it_sent_then_fails_at_once(tmp_path, recv_first):
    # rank 1 sends one tensor and leaves; rank 0's second recv from it, waiting then or made after,
    # can never complete: it fails when rank 1 leaves, not at the group's timeout (100 s here)
    done = _launch(tmp_path, f"""
        dist.init_process_group()
        if dist.get_rank() == 1:
            time.sleep({0.5 if recv_first else 0})
            dist.send(tp.full((2,), 7.0), dst=0)
            {"dist.destroy_process_group()" if recv_first else "sys.exit(0)  # its script ends: it leaves at exit"}
        else:
            time.sleep({0 if recv_first else 1.5})
            t = tp.empty(2)
            dist.recv(t, src=1)
            print("got", t.tolist())
            start = time.monotonic()
            try:
                dist.recv(t, src=1)
            except dist.DistributedError as e:
                print("error at once:" if time.monotonic() - start < 30 else "error late:", e)
    """)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "[rank 0] got [7.0, 7.0]" in done.stdout, done.stdout
    assert (
        "[rank 0] error at once: rank 1 left the group (destroy_process_group) with no send for rank 0's recv "
        "from it, recv(float32 (2,)) (seen by rank 0 in recv from rank 1)"
    ) in done.stdout, done.stdout


def test_a_barrier_is_named_with_empty_parentheses(tmp_path):
    done = _launch(tmp_path, """
        dist.init_process_group()
        dist.barrier() if dist.get_rank() == 0 else dist.all_reduce(tp.ones(2))
    """)  # fmt: skip
    assert done.returncode == 1
    assert "rank 0 called barrier(), rank 1 called all_reduce(float32 (2,), SUM);" in done.stderr, done.stderr


@pytest.fixture
def one_rank():
    dist.init_process_group(rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize(
    ("dtype", "op"),
    [("int16", "SUM"), ("uint16", "MAX"), ("complex64", "MAX"), ("complex128", "PROD"), ("complex64", "MIN")],
)
def test_the_hub_refuses_the_reductions_nccl_refuses_with_its_sentence(one_rank, dtype, op):
    # a program that runs on the simulator runs on GPUs with NCCL too
    with pytest.raises(TypeError) as said:
        nccl.data_type(dtype, getattr(tp, dtype).itemsize, op)
    t = tp.ones(4, dtype=getattr(tp, dtype))
    with pytest.raises(TypeError, match=f"^{re.escape(str(said.value))}$"):
        dist.all_reduce(t, op=dist.ReduceOp[op])
    with pytest.raises(TypeError, match=f"^{re.escape(str(said.value))}$"):
        dist.reduce_scatter_tensor(tp.empty(4, dtype=getattr(tp, dtype)), t, op=dist.ReduceOp[op])
    dist.broadcast(t, src=0)  # moving them is no reduction


def test_the_hub_reduces_what_nccl_reduces(one_rank):
    flags, z = tp.tensor([True, False]), tp.ones(2, dtype=tp.complex64)
    dist.all_reduce(flags, op=dist.ReduceOp.PROD)
    dist.all_reduce(z, op=dist.ReduceOp.AVG)
    assert flags.tolist() == [True, False] and z.tolist() == [1, 1]


def test_the_launcher_takes_double_dash_as_the_end_of_its_options(tmp_path):
    done = _launch(tmp_path, "print('ARGS', sys.argv[1:])", n=1, words=("--",))
    assert done.returncode == 0 and "[rank 0] ARGS []" in done.stdout, done.stderr
    done = subprocess.run(
        [*done.args, "a", "--b", "--", "c"], capture_output=True, text=True, env=dict(os.environ), timeout=120
    )
    assert done.returncode == 0 and "[rank 0] ARGS ['a', '--b', '--', 'c']" in done.stdout, done.stderr


@pytest.mark.parametrize("words", [["--verbose", "x.py"], ["--nproc", "2", "x.py"], ["--verbose=1", "x.py"]])
def test_the_launcher_names_an_option_it_does_not_know(capsys, words):
    with pytest.raises(SystemExit) as ended:
        run.main(["--nnodes", "1", *words])
    assert ended.value.code == 2
    unknown = words[0]
    assert (
        f"error: unknown option {unknown}: the launcher's options are --nproc-per-node, --nnodes, --node-rank, "
        "--master-addr, --master-port and --help; the script's own options go after the script (or after --)"
    ) in capsys.readouterr().err
