"""One rank of the distributed benchmark: ``benchmarks/distributed.py`` runs it
on 1 or more ranks with the launcher, and rank 0 prints its figures as one
line, ``FIGURES {json}``.

- ``all_reduce`` of ``--mib`` MiB of float32 (two ranks or more): device time
  a call, eagerly and as one graph of ten calls, for tensorplay's group and
  torch.distributed's (NCCL) in the same processes, each checked first.
- the heat demo's band solve (``examples/heat_distributed.py``) on ``--rows``
  x ``--cols`` grid points a rank, a fixed ``--iters`` iterations: as one
  while node a rank, with the halos travelling while the interior is swept
  and without, and driven from the host with the same calls.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import time
from pathlib import Path

import numpy as np

import tensorplay as tp
import tensorplay.distributed as dist
from benchmarks.common import device_ms, on_gpu, peer, torch_events, tp_events

ROOT = Path(__file__).resolve().parents[1]
CALLS = 10  # all_reduce calls in the timed graph


def _example():
    spec = importlib.util.spec_from_file_location("heat_distributed", ROOT / "examples" / "heat_distributed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tp_all_reduce(elements: int, world: int, rank: int, reps: dict) -> dict:
    x = tp.full((elements,), float(rank + 1))
    dist.all_reduce(x)
    got, want = x.numpy(), world * (world + 1) / 2
    if not np.all(got == want):
        raise AssertionError(f"all_reduce gave {got[:4]}..., not {want}")
    x.zero_()  # the timed calls keep it finite
    eager = device_ms(lambda: dist.all_reduce(x), *tp_events(), tp.cuda.synchronize, **reps)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        for _ in range(CALLS):
            dist.all_reduce(x)
    graph = device_ms(g.replay, *tp_events(), tp.cuda.synchronize, **reps) / CALLS
    return {"eager_ms": eager, "graph_ms": graph}


def _torch_all_reduce(elements: int, world: int, rank: int, reps: dict) -> dict | None:
    torch = peer("torch")
    if torch is None or not on_gpu():  # the simulator's ranks share one GPU, where NCCL refuses two ranks
        return None
    import torch.distributed as tdist

    port = int(os.environ["MASTER_PORT"]) + 1  # the group's own rendezvous holds MASTER_PORT
    init = f"tcp://{os.environ['MASTER_ADDR']}:{port}"
    tdist.init_process_group("nccl", init_method=init, rank=rank, world_size=world)
    torch.cuda.set_device(0)
    y = torch.full((elements,), float(rank + 1), device="cuda")
    tdist.all_reduce(y)
    if not bool((y == world * (world + 1) / 2).all()):
        raise AssertionError("torch's all_reduce gave a wrong sum")
    y.zero_()
    eager = device_ms(lambda: tdist.all_reduce(y), *torch_events(torch), torch.cuda.synchronize, **reps)
    g = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        tdist.all_reduce(y)  # NCCL's warm-up before a capture
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(g):
        for _ in range(CALLS):
            tdist.all_reduce(y)
    graph = device_ms(g.replay, *torch_events(torch), torch.cuda.synchronize, **reps) / CALLS
    tdist.destroy_process_group()
    return {"eager_ms": eager, "graph_ms": graph}


def _heat(rows: int, cols: int, iters: int, world: int, rank: int) -> dict:
    band = _example().Band(rows * world, rank, world, cols)
    graphs = {}
    for overlap in (True, False):
        band.reset()
        band.step(-1.0, iters, overlap)  # compiles every kernel eagerly first
        g = graphs[overlap] = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            with g.while_(band.go):
                band.step(-1.0, iters, overlap)  # tol -1: the loop runs its iterations
    figures = {}
    for how in ("graph", "graph_plain", "host"):
        band.reset()
        dist.barrier()
        start = time.perf_counter()
        if how == "host":
            while band.go.item():
                band.step(-1.0, iters)
        else:
            graphs[how == "graph"].replay()
        tp.cuda.synchronize()
        figures[f"{how}_us"] = (time.perf_counter() - start) * 1e6 / iters
        if band.iters.item() != iters:
            raise AssertionError(f"the {how} loop ran {band.iters.item()} iterations, not {iters}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=float, default=256.0)
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    reps = {"n": args.reps, "warmup": 2, "batch": 1}
    figures = {"world": world, "backend": dist.get_backend()}
    if world > 1:
        elements = int(args.mib * 2**20) // 4
        figures["all_reduce"] = {"tensorplay": _tp_all_reduce(elements, world, rank, reps)}
        figures["all_reduce"]["torch"] = _torch_all_reduce(elements, world, rank, reps)
    figures["heat"] = _heat(args.rows, args.cols, args.iters, world, rank)
    if rank == 0:
        print("FIGURES " + json.dumps(figures), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
