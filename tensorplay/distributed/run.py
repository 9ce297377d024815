"""``python -m tensorplay.distributed.run --nproc-per-node N script.py ARGS``:
run ``script.py`` as N ranks on this machine, as PyTorch's ``torchrun`` does.

Each rank is a process with ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` set (a free port of
this machine unless ``--master-port`` says one), its lines of output prefixed
with ``[rank r]``. Where the machine has a GPU for each rank (and
``CUDA_VISIBLE_DEVICES`` is not set), rank r sees GPU ``LOCAL_RANK`` alone, as
its ``cuda:0``; with fewer GPUs the ranks share them. When a rank fails, the others are stopped, its traceback is
said again at the end, and the launcher exits with its exit code; 0 when all
succeed. That rank is the one that failed of itself, not a peer that failed for
hearing of it (each rank notes when and why it began to stop in
``TENSORPLAY_STOP_FILE``). ``--nnodes`` and ``--node-rank`` run one machine's share of a group
over several (each machine runs the launcher with the same ``--master-addr``
and ``--master-port``). ``--`` ends the launcher's options, as torchrun's does;
any other word before the script that starts with ``-`` and is none of them is an error.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from ._hub import free_port
from ._stops import STOP_FILE, stopped

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


def _wait(proc, rank: int, ended: dict) -> None:
    proc.wait()
    ended[rank] = time.time()  # the exit's time, for a rank that noted none


# the launcher's options, each taking one value: (names, type, default, help)
_OPTIONS = (
    (("--nproc-per-node", "--nproc_per_node"), int, 1, "ranks on this machine"),
    (("--nnodes",), int, 1, "machines in the group"),
    (("--node-rank", "--node_rank"), int, 0, "this machine's number"),
    (("--master-addr", "--master_addr"), str, "127.0.0.1", "where rank 0 runs"),
    (("--master-port", "--master_port"), int, None, "rank 0's port"),
)


def _split_at_script(argv: list) -> tuple[list, list]:
    """(the launcher's options, the script and its arguments): the script is the first word that is no
    option of ours nor an option's value (each of ours takes one, as ``--opt value`` or ``--opt=value``),
    or the word after ``--``, so that the script's own options, ``--n`` among them, never read as ours.
    Raises ``ValueError`` for an option of none of ours."""
    known = {name for names, *_ in _OPTIONS for name in names}
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        word = argv[i]
        if word == "--":  # the end of our options, as torchrun's
            return argv[:i], argv[i + 1 :]
        if word in ("-h", "--help"):
            i += 1
        elif word.split("=", 1)[0] in known:
            i += 1 if "=" in word else 2
        else:
            said = ", ".join(names[0] for names, *_ in _OPTIONS)
            raise ValueError(
                f"unknown option {word}: the launcher's options are {said} and --help; the script's own "
                "options go after the script (or after --)"
            )
    return argv[:i], argv[i:]


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tensorplay.distributed.run", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
    )  # fmt: skip
    for names, kind, default, said in _OPTIONS:
        parser.add_argument(*names, type=kind, default=default, help=said)
    parser.add_argument("script", help="the Python script each rank runs")
    parser.add_argument("args", nargs="*", help="its arguments (everything after the script is the script's)")
    try:
        own, script = _split_at_script(sys.argv[1:] if argv is None else list(argv))
    except ValueError as e:
        parser.error(str(e))
    args = parser.parse_args([*own, "--", script[0]] if script else own)  # after --, a script named -x.py
    args.args = script[1:]
    if args.nproc_per_node < 1 or args.nnodes < 1 or not 0 <= args.node_rank < args.nnodes:
        parser.error("--nproc-per-node and --nnodes must be at least 1, and --node-rank below --nnodes")
    if args.nnodes > 1 and args.master_port is None:
        parser.error("a group over several machines needs --master-addr and --master-port (the same on each)")
    world = args.nproc_per_node * args.nnodes
    port = args.master_port or free_port()
    with tempfile.TemporaryDirectory(prefix="tensorplay-run-") as notes:
        return _launch(args, world, port, notes)


def _launch(args, world: int, port: int, notes: str) -> int:
    procs, threads, tails, stops, ended = {}, [], {}, {}, {}
    own_gpu = "CUDA_VISIBLE_DEVICES" not in os.environ and _gpus() >= args.nproc_per_node
    for local in range(args.nproc_per_node):
        rank = args.node_rank * args.nproc_per_node + local
        stops[rank] = os.path.join(notes, f"rank{rank}")
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(local), WORLD_SIZE=str(world),
                   LOCAL_WORLD_SIZE=str(args.nproc_per_node), MASTER_ADDR=args.master_addr, MASTER_PORT=str(port),
                   PYTHONUNBUFFERED="1", **{STOP_FILE: stops[rank]},
                   **({"CUDA_VISIBLE_DEVICES": str(local)} if own_gpu else {}))  # fmt: skip
        proc = subprocess.Popen(
            [sys.executable, args.script, *args.args], env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        tails[rank] = collections.deque(maxlen=_TAIL)
        for stream, out, tail in ((proc.stdout, sys.stdout, None), (proc.stderr, sys.stderr, tails[rank])):
            t = threading.Thread(target=_forward, args=(stream, f"[rank {rank}] ", out, tail), daemon=True)
            t.start()
            threads.append(t)
        threading.Thread(target=_wait, args=(proc, rank, ended), daemon=True).start()
        procs[rank] = proc
    deadline, killed = None, set()  # once a rank failed: when the others are killed; the ranks stopped so
    try:
        while len(ended) < len(procs):
            if deadline is None:
                if any(procs[r].returncode for r in list(ended)):
                    # a rank that noted its stop is on its way out (its atexit, its traceback): left to end
                    killed |= {r for r in procs if r not in ended and stopped(stops[r]) is None}
                    _stop([procs[r] for r in killed], signal.SIGTERM)
                    deadline = time.monotonic() + _GRACE
            elif time.monotonic() > deadline:
                killed |= {r for r in procs if r not in ended}
                _stop([procs[r] for r in killed], signal.SIGKILL)
            time.sleep(0.05)
    except KeyboardInterrupt:
        _stop(procs.values(), signal.SIGINT)
        for p in procs.values():
            p.wait()
        raise
    for t in threads:
        t.join(5)
    failed = [r for r, p in procs.items() if p.returncode]
    if not failed:
        return 0

    def blame(r: int) -> tuple:
        # a rank that failed of itself before one that heard of it (its DistributedError) or that the
        # launcher stopped; of several, the first to stop (a rank that noted nothing: when it ended)
        when, heard = stopped(stops[r]) or (ended[r], False)
        return r in killed, heard, when

    rank = min(failed, key=blame)
    code = procs[rank].returncode
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
