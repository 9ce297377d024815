"""GPU time by kernel of one workload, tensorplay beside torch in the same
process, from the device's own activity records (CUPTI, through
``torch.profiler``, which sees every kernel of the context: tensorplay's,
launched by driver calls or inside graph replays, and the libraries').

Workloads: the whole ``wide bfloat16`` training step of ``benchmarks.training``
as one graph (``step``), ``cumsum`` of 2^26 float32 and ``sort`` of 2^24
float32, each tensorplay's beside torch's; and the gallery's conjugate gradient
on the 1024² grid (``cg``), its kernel version beside its ops-only version, a
call 200 of the solve's iterations; and the bodies of the gallery's ops-only
Ising sweep (``ising``, 256² x4 temperatures) and Dormand-Prince attempt
(``dopri``, 4096 trajectories, the acceptance's body after each attempt), each
captured 20 times into a plain graph, a call one replay of it: the profiler
does not see the kernels inside a conditional node's body. For each, a table of the kernels of
most total time, per call of the workload, and with ``--idle`` where the GPU
ran no kernel of it: the time from the first kernel's start to the last one's
end a call, and the gaps between kernels summed by the pair of kernels either
side (a gap between calls included)::

    python -m benchmarks.profile_kernels [--workload step cumsum sort cg ising dopri] [--calls 20] [--top 15] [--idle]

Needs a GPU and torch.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

import tensorplay as tp
from benchmarks.common import peer


def _short(name: str) -> str:
    """A kernel's name, readable: tensorplay's Python name for its own kernels
    (mangled by Numba), else the library's name cut to 90 characters."""
    from tensorplay.runtime.backend.driver_launch import KERNEL_NAMES

    if name in KERNEL_NAMES:
        return "tp: " + KERNEL_NAMES[name]
    if name.startswith("_Z"):  # mangled: its first identifiers
        return ".".join(re.findall(r"\d+([A-Za-z_]\w*)", name)[:5])[:90]
    return name[:90]


def _device_events(torch, run, calls: int) -> list:
    """The device's records of ``calls`` calls of ``run`` (after one unrecorded)."""
    from torch.profiler import ProfilerActivity, profile

    run()
    torch.cuda.synchronize()
    tp.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            run()
        torch.cuda.synchronize()
        tp.cuda.synchronize()
    return [e for e in prof.events() if "CUDA" in str(getattr(e, "device_type", None))]


def _kernel_table(events: list, calls: int) -> list[tuple[str, float, int]]:
    """(kernel, microseconds per call, launches per call), most time first."""
    total, count = defaultdict(float), defaultdict(int)
    for event in events:
        key = _short(event.name)
        total[key] += event.device_time / calls  # microseconds
        count[key] += 1
    return sorted(((k, total[k], count[k] // calls) for k in total), key=lambda r: -r[1])


def _idle(events: list, calls: int) -> tuple[float, list[tuple[str, float]]]:
    """(microseconds from the first kernel's start to the last one's end, per
    call; the time no kernel ran, per call, by the pair of kernels either side
    of each gap, most first)."""
    spans = sorted((e.time_range.start, e.time_range.end, _short(e.name)) for e in events)
    gaps = defaultdict(float)
    end, before = spans[0][1], spans[0][2]
    for start, stop, name in spans[1:]:
        if start > end:
            gaps[f"{before[:40]}  ->  {name[:40]}"] += (start - end) / calls
        if stop >= end:
            end, before = stop, name
    return (end - spans[0][0]) / calls, sorted(gaps.items(), key=lambda g: -g[1])


WORKLOADS = ("step", "cumsum", "sort", "cg", "ising", "dopri")
BODIES = 20  # copies of a while node's body in the plain graph of the ising and dopri workloads
CG_ITERATIONS = 200  # iterations of the CG solve a call (it converges after 1708 on the 1024² grid)


def _workloads(torch, names: list[str]) -> dict:
    """name -> ((who, call), (who, call)): tensorplay's and torch's, or the
    gallery entry's two versions."""
    out = {}
    if "step" in names:
        from benchmarks.training import MODELS, _torch_steps, _tp_steps, _weights

        sizes, batch, optimizer, dtype = MODELS["wide bfloat16"]
        rng = np.random.default_rng(1)
        xv, yv = rng.standard_normal((batch, sizes[0])), rng.standard_normal((batch, sizes[-1]))
        weights = _weights(sizes)
        x, y = (tp.tensor(v.astype(np.float32)).to(tp.bfloat16) for v in (xv, yv))
        tx, ty = (torch.tensor(v, dtype=torch.float32, device="cuda").to(torch.bfloat16) for v in (xv, yv))
        ours = _tp_steps(sizes, weights, x, y, optimizer, dtype)[2]
        theirs = _torch_steps(torch, sizes, weights, tx, ty, optimizer, dtype)[2]
        out["step"] = (("tensorplay", ours), ("torch", theirs))
    rng = np.random.default_rng(2)
    if "cumsum" in names:
        v = rng.standard_normal(1 << 26).astype(np.float32)
        x, tx = tp.tensor(v), torch.tensor(v, device="cuda")
        out["cumsum"] = (("tensorplay", lambda: tp.cumsum(x, 0)), ("torch", lambda: torch.cumsum(tx, 0)))
    if "sort" in names:
        v = rng.standard_normal(1 << 24).astype(np.float32)
        x, tx = tp.tensor(v), torch.tensor(v, device="cuda")
        out["sort"] = (("tensorplay", lambda: tp.sort(x)), ("torch", lambda: torch.sort(tx)))
    if "cg" in names:
        cg = _gallery("cg")
        problem = cg.Poisson(1024)
        kernels, ops = cg.KernelCG(problem, max_iters=CG_ITERATIONS), cg.OpsCG(problem, max_iters=CG_ITERATIONS)
        each = f"{CG_ITERATIONS} iterations"
        out["cg"] = ((f"kernels, {each}", kernels.solve), (f"ops-only, {each}", ops.solve))
    if "ising" in names:
        out["ising"] = ((f"ops-only, {BODIES} sweeps", _ising_bodies()),)
    if "dopri" in names:
        out["dopri"] = ((f"ops-only, {BODIES} attempts and acceptances", _dopri_bodies()),)
    return out


def _gallery(name: str):
    """The gallery's entry ``name`` (``examples/gallery/<name>.py``), imported."""
    folder = str(Path(__file__).resolve().parent.parent / "examples" / "gallery")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)


def _plain_graph(body) -> tp.cuda.CUDAGraph:
    """``body`` captured ``BODIES`` times into one plain graph (compiled first)."""
    body()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        for _ in range(BODIES):
            body()
    return g


def _ising_bodies():
    ising = _gallery("ising")
    o = ising.OpsIsing(ising.Run(256, [1.5, 1.8, 2.0, 2.1], 2000, 500))
    run = o.run
    args = (o.spins, o.colours, o.beta, o.moments, o.bins, o.bin_numbers, o.sweep_count, o.go, run.burn_in,
            run.sweeps, 1.0 / run.side**2)  # fmt: skip
    return _plain_graph(lambda: o.step(*args)).replay


def _dopri_bodies():
    dopri = _gallery("dopri")
    base = dopri.SYSTEMS["vdp"]
    system = dopri.System(base.name, base.dim, base.device, base.numpy, 10.0)
    y0, p = system.ensemble(4096)
    o = dopri.OpsDopri(system, y0, p, 1e-4, 1e-6, 1e-9)
    o.reset()

    def body():
        o.attempt(o.y, o.f, o.y_new, o.f_new, o.p, o.t, o.h_abs, o.err, o.accepted, o.go, system.name,
                  system.t_end, o.rtol, o.atol)  # fmt: skip
        o.accept(o.y, o.f, o.y_new, o.f_new, o.t, o.h_abs, o.err, o.just_rejected, o.counts, system.t_end)

    return _plain_graph(body).replay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", nargs="*", default=["step", "cumsum", "sort"], choices=WORKLOADS)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--idle", action="store_true", help="where the GPU ran no kernel of the workload")
    args = parser.parse_args()
    torch = peer("torch")
    if torch is None or tp.cuda.backend() != "cuda":
        raise SystemExit("profile_kernels needs a GPU and torch")
    for name, pair in _workloads(torch, args.workload).items():
        for who, run in pair:
            events = _device_events(torch, run, args.calls)
            table = _kernel_table(events, args.calls)
            print(f"\n{name}, {who}: {sum(r[1] for r in table):.1f} us of kernels a call")
            for kernel, us, launches in table[: args.top]:
                print(f"  {us:9.1f} us  x{launches:<3d} {kernel}")
            if args.idle:
                span, gaps = _idle(events, args.calls)
                print(f"  {span:.1f} us from the first kernel's start to the last one's end a call;")
                print(f"  {sum(g for _, g in gaps):.1f} us of it with no kernel running, most between:")
                for pair, us in gaps[: args.top]:
                    print(f"  {us:9.1f} us  {pair}")


if __name__ == "__main__":
    main()
    # Past this point the process only tears down; on the H100 at 67ee162 that teardown, with the profiler's
    # activity records taken, aborted in free() ("invalid pointer") after every table was printed.
    sys.stdout.flush()
    os._exit(0)
