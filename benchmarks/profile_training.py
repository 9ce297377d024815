"""Where the host time of an eager and a graphed training step goes: the small
model of ``benchmarks.training`` (MLP 512-1024-1024-512, batch 128, SGD).
First a table of the step's phases (zero_grad, forward, loss, backward,
optimizer step), host microseconds each, tensorplay beside torch; then the
steps run under ``cProfile``, with the functions of the most own time and the
most cumulative time. Run it on the GPU machine (on the simulator the
simulated kernels dominate)::

    python -m benchmarks.profile_training [--steps 200] [--top 30]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import numpy as np

import tensorplay as tp
from benchmarks.common import peer
from benchmarks.training import BATCH, SIZES, _torch_model, _tp_model, _tp_steps, _weights

PHASES = ("zero_grad", "forward", "loss", "backward", "step")


def phase_us(zero_grad, forward, loss_of, opt_step, sync, steps: int) -> dict:
    """Host microseconds per step of each phase of ``steps`` steps (no sync
    inside a step: the host's time to issue each phase, as in a host-bound loop)."""
    totals = dict.fromkeys(PHASES, 0.0)
    for i in range(steps + 5):
        t0 = time.perf_counter()
        zero_grad()
        t1 = time.perf_counter()
        out = forward()
        t2 = time.perf_counter()
        loss = loss_of(out)
        t3 = time.perf_counter()
        loss.backward()
        t4 = time.perf_counter()
        opt_step()
        t5 = time.perf_counter()
        if i >= 5:  # the first steps warm up
            for name, a, b in zip(PHASES, (t0, t1, t2, t3, t4), (t1, t2, t3, t4, t5), strict=True):
                totals[name] += (b - a) * 1e6
        if i % 10 == 9:
            sync()  # the device catches up now and then, so that queues stay short
    return {name: total / steps for name, total in totals.items()}


def phases(x, y, steps: int) -> None:
    """The table of phases: eager and graphed (make_graphed_callables), tensorplay and torch."""
    import tensorplay.nn.functional as F

    weights = _weights(SIZES)
    columns = {}
    for graphed in (False, True):
        model, opt = _tp_model(SIZES, weights)
        forward = tp.cuda.make_graphed_callables(model, (x,)) if graphed else model
        columns[f"tp {'graphed' if graphed else 'eager'}"] = phase_us(
            lambda opt=opt: opt.zero_grad(set_to_none=True), lambda f=forward: f(x),
            lambda out: F.mse_loss(out, y), opt.step, tp.cuda.synchronize, steps,
        )  # fmt: skip
    torch = peer("torch")
    if torch is not None:
        tx, ty = torch.from_numpy(x.numpy()).cuda(), torch.from_numpy(y.numpy()).cuda()
        for graphed in (False, True):
            model, opt = _torch_model(torch, SIZES, weights)
            forward = torch.cuda.make_graphed_callables(model, (tx,)) if graphed else model
            columns[f"torch {'graphed' if graphed else 'eager'}"] = phase_us(
                lambda opt=opt: opt.zero_grad(set_to_none=True), lambda f=forward: f(tx),
                lambda out: torch.nn.functional.mse_loss(out, ty), opt.step, torch.cuda.synchronize, steps,
            )  # fmt: skip
    print(f"== host us per step, by phase ({steps} steps)")
    print(f"{'phase':<12}" + "".join(f"{name:>16}" for name in columns))
    for name in (*PHASES, "total"):
        cells = [sum(c.values()) if name == "total" else c[name] for c in columns.values()]
        print(f"{name:<12}" + "".join(f"{v:>16.1f}" for v in cells))


def profile(step, steps: int, top: int, title: str) -> None:
    for _ in range(5):
        step()
    tp.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        step()
    tp.cuda.synchronize()
    prof.disable()
    stats = pstats.Stats(prof)
    print(f"== {title}: {stats.total_tt / steps * 1e6:.0f} us per step under the profiler")
    for key in ("tottime", "cumulative"):
        print(f"-- by {key} (times are totals over {steps} steps)")
        stats.sort_stats(key).print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200, help="profiled steps of each kind")
    parser.add_argument("--top", type=int, default=30, help="functions listed per table")
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    x = tp.tensor(rng.standard_normal((BATCH, SIZES[0]), dtype=np.float32))
    y = tp.tensor(rng.standard_normal((BATCH, SIZES[-1]), dtype=np.float32))
    phases(x, y, args.steps)
    eager, graphed, _, _ = _tp_steps(SIZES, _weights(SIZES), x, y, "SGD")
    profile(eager, args.steps, args.top, "eager step")
    profile(graphed, args.steps, args.top, "forward and backward graphed (make_graphed_callables)")


if __name__ == "__main__":
    main()
