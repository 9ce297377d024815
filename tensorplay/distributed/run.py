"""``python -m tensorplay.distributed.run --nproc-per-node N script.py ARGS``:
run ``script.py`` as N ranks on this machine, as PyTorch's ``torchrun`` does.

Each rank is a process with ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` set (a free port of
this machine unless ``--master-port`` says one), its lines of output prefixed
with ``[rank r]``. Where the machine has a GPU for each rank (and
``CUDA_VISIBLE_DEVICES`` is not set), rank r sees GPU ``LOCAL_RANK`` alone, as
its ``cuda:0``; with fewer GPUs the ranks share them. When a rank fails, the others are stopped, its traceback is
said again at the end, and the launcher exits with its exit code; 0 when all
succeed. ``--nnodes`` and ``--node-rank`` run one machine's share of a group
over several (each machine runs the launcher with the same ``--master-addr``
and ``--master-port``).
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import threading
import time

from ._hub import free_port

__all__ = ["main"]

_TAIL = 40  # lines of a failed rank's error output said again at the end
_GRACE = 5.0  # seconds the other ranks get to stop after one failed


def _gpus() -> int:
    """How many GPUs the driver sees here (0 without one)."""
    try:
        from cuda.bindings import driver

        if driver.cuInit(0)[0] != driver.CUresult.CUDA_SUCCESS:
            return 0
        err, count = driver.cuDeviceGetCount()
        return count if err == driver.CUresult.CUDA_SUCCESS else 0
    except Exception:
        return 0


def _forward(stream, prefix: str, out, tail: collections.deque | None) -> None:
    for line in iter(stream.readline, ""):
        out.write(prefix + line)
        out.flush()
        if tail is not None:
            tail.append(line)
    stream.close()


def _split_at_script(argv: list) -> tuple[list, list]:
    """(the launcher's options, the script and its arguments): the script is the first word that is no
    option of ours nor an option's value (each of ours takes one, as ``--opt value`` or ``--opt=value``),
    so that the script's own options, ``--n`` among them, never read as ours."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 1 if "=" in argv[i] or argv[i] in ("-h", "--help") else 2
    return argv[:i], argv[i:]


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tensorplay.distributed.run", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
    )  # fmt: skip
    parser.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1, help="ranks on this machine")
    parser.add_argument("--nnodes", type=int, default=1, help="machines in the group")
    parser.add_argument("--node-rank", "--node_rank", type=int, default=0, help="this machine's number")
    parser.add_argument("--master-addr", "--master_addr", default="127.0.0.1", help="where rank 0 runs")
    parser.add_argument("--master-port", "--master_port", type=int, default=None, help="rank 0's port")
    parser.add_argument("script", help="the Python script each rank runs")
    parser.add_argument("args", nargs="*", help="its arguments (everything after the script is the script's)")
    own, script = _split_at_script(sys.argv[1:] if argv is None else list(argv))
    args = parser.parse_args(own + script[:1])
    args.args = script[1:]
    if args.nproc_per_node < 1 or args.nnodes < 1 or not 0 <= args.node_rank < args.nnodes:
        parser.error("--nproc-per-node and --nnodes must be at least 1, and --node-rank below --nnodes")
    if args.nnodes > 1 and args.master_port is None:
        parser.error("a group over several machines needs --master-addr and --master-port (the same on each)")
    world = args.nproc_per_node * args.nnodes
    port = args.master_port or free_port()
    ranks, threads, tails = [], [], {}
    own_gpu = "CUDA_VISIBLE_DEVICES" not in os.environ and _gpus() >= args.nproc_per_node
    for local in range(args.nproc_per_node):
        rank = args.node_rank * args.nproc_per_node + local
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(local), WORLD_SIZE=str(world),
                   LOCAL_WORLD_SIZE=str(args.nproc_per_node), MASTER_ADDR=args.master_addr, MASTER_PORT=str(port),
                   PYTHONUNBUFFERED="1", **({"CUDA_VISIBLE_DEVICES": str(local)} if own_gpu else {}))  # fmt: skip
        proc = subprocess.Popen(
            [sys.executable, args.script, *args.args], env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        tails[rank] = collections.deque(maxlen=_TAIL)
        for stream, out, tail in ((proc.stdout, sys.stdout, None), (proc.stderr, sys.stderr, tails[rank])):
            t = threading.Thread(target=_forward, args=(stream, f"[rank {rank}] ", out, tail), daemon=True)
            t.start()
            threads.append(t)
        ranks.append((rank, proc))
    failed = None  # (rank, exit code), the first to fail
    try:
        while [p.poll() for _, p in ranks].count(None):  # every one polled, each time
            if failed is None:
                failed = next(((r, p.returncode) for r, p in ranks if p.returncode not in (None, 0)), None)
                if failed is not None:
                    _stop([p for _, p in ranks], signal.SIGTERM)
                    deadline = time.monotonic() + _GRACE
            elif time.monotonic() > deadline:
                _stop([p for _, p in ranks], signal.SIGKILL)
            time.sleep(0.05)
    except KeyboardInterrupt:
        _stop([p for _, p in ranks], signal.SIGINT)
        for _, p in ranks:
            p.wait()
        raise
    for t in threads:
        t.join(5)
    if failed is None:
        failed = next(((r, p.returncode) for r, p in ranks if p.returncode), None)
    if failed is None:
        return 0
    rank, code = failed
    print(f"\n== rank {rank} of {world} failed with exit code {code}; the end of its error output:", file=sys.stderr)
    sys.stderr.write("".join(tails[rank]))
    return code if code > 0 else 1


def _stop(procs, sig) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass


if __name__ == "__main__":
    sys.exit(main())
