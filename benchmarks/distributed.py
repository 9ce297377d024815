"""Ranks and collectives: ``benchmarks/distributed_rank.py`` run by the launcher
on one rank and on two (one GPU each; NCCL's engine on a GPU, tensorplay's own
on the simulator, small, as a check of the code), with torch.distributed's
NCCL in the same processes:

- ``all_reduce`` of 256 MiB of float32 on 2 ranks, bus GB/s (the bytes each
  link carries, 2 (n - 1) / n of the data), eagerly and as one graph of ten
  calls: target >= 90 % of torch's;
- the heat demo split over ranks, 4096 x 4096 points a GPU: weak-scaling
  efficiency from 1 to 2 ranks (time an iteration on 1 over that on 2),
  target >= 90 %, with the halos travelling while the interior is swept (and,
  as a measurement, without); and one while node a rank against the same loop
  driven from the host: target <= 0.8x.

With fewer than two GPUs the two-rank rows say so and are not judged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import tensorplay as tp
from benchmarks.common import on_gpu
from benchmarks.targets import at_least, at_most, judge, measurement

ROOT = Path(__file__).resolve().parents[1]
GPU_SIZES = {"mib": 256, "rows": 4096, "cols": 4096, "iters": 200, "reps": 10}
SIM_SIZES = {"mib": 1 / 256, "rows": 8, "cols": 8, "iters": 3, "reps": 2}


def _run(world: int, sizes: dict) -> dict:
    """Rank 0's figures of ``distributed_rank.py`` on ``world`` ranks."""
    args = [f"--{k}={v}" for k, v in sizes.items()]
    cmd = [sys.executable, "-m", "tensorplay.distributed.run", "--nproc-per-node", str(world)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env["TENSORPLAY_DIST_BACKEND"] = "nccl" if on_gpu() else "hub"
    done = subprocess.run(
        [*cmd, str(ROOT / "benchmarks" / "distributed_rank.py"), *args],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    lines = [line.split("FIGURES ", 1)[1] for line in done.stdout.splitlines() if "FIGURES " in line]
    if done.returncode or not lines:
        raise RuntimeError(f"{world} ranks failed (exit {done.returncode}): {done.stderr[-1500:]}")
    return json.loads(lines[0])


def _bus_gbs(mib: float, ms: float | None, world: int) -> float | None:
    return None if ms is None else mib * 2**20 * 2 * (world - 1) / world / (ms * 1e6)


def scaling(rows: list, progress) -> None:
    sizes = GPU_SIZES if on_gpu() else SIM_SIZES
    gpus = tp.cuda.device_count() if on_gpu() else 2  # the simulator's ranks share its one emulated device
    plate = f"{sizes['rows']}x{sizes['cols']} a GPU"
    data = f"{sizes['mib']:g} MiB" if sizes["mib"] >= 1 else f"{sizes['mib'] * 1024:g} KiB"
    one = _run(1, sizes)
    progress.step("distributed: 1 rank")
    alone = {"name": f"distributed: heat {plate} on 1 rank, one while node, us per iteration",
             "tensorplay": one["heat"]["graph_us"], "lower_is_better": True}  # fmt: skip
    measurement(alone, "the 1-rank figure of the weak-scaling row")
    rows.append(alone)
    names = [
        f"distributed: all_reduce {data} float32 on 2 ranks, bus GB/s, eager",
        f"distributed: all_reduce {data} float32 on 2 ranks, bus GB/s, one graph of 10 calls",
        f"distributed: heat {plate} on 2 ranks, weak-scaling efficiency from 1 rank",
        f"distributed: heat {plate} on 2 ranks, weak-scaling efficiency from 1 rank, halos not overlapped",
        f"distributed: heat {plate} on 2 ranks, one while node a rank vs the host-driven loop, us per iteration",
    ]
    if gpus < 2:
        for name in names:
            row = {"name": name}
            judge(row, None, f"needs 2 GPUs, and this machine has {gpus}")
            rows.append(row)
        progress.step("distributed: 2 ranks (not run)")
        return
    two = _run(2, sizes)
    progress.step("distributed: 2 ranks")
    mine, torch = two["all_reduce"]["tensorplay"], two["all_reduce"]["torch"] or {}
    for name, key in zip(names[:2], ("eager_ms", "graph_ms"), strict=True):
        row = {"name": name, "tensorplay": _bus_gbs(sizes["mib"], mine[key], 2),
               "torch": _bus_gbs(sizes["mib"], torch.get(key), 2), "lower_is_better": False}  # fmt: skip
        at_least(row, 0.9, label="torch.distributed (NCCL)")
        rows.append(row)
    efficiency = {"name": names[2], "tensorplay": one["heat"]["graph_us"] / two["heat"]["graph_us"]}
    met = efficiency["tensorplay"] >= 0.9
    judge(efficiency, met, f">= 90% weak-scaling efficiency ({efficiency['tensorplay']:.0%} here)")
    plain = {"name": names[3], "tensorplay": one["heat"]["graph_plain_us"] / two["heat"]["graph_plain_us"]}
    measurement(plain, "what overlapping the halos with the interior sweep buys")
    rows += [efficiency, plain]
    loop = {"name": names[4], "tensorplay": two["heat"]["graph_us"], "host": two["heat"]["host_us"],
            "lower_is_better": True}  # fmt: skip
    at_most(loop, 0.8, of="host", label="the host-driven loop")
    rows.append(loop)


SECTIONS = [(scaling, 2)]
