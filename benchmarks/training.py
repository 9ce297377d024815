"""A training step of an MLP (forward, backward, optimizer): time per step for
eager ops, for the forward and backward graphed by ``make_graphed_callables``,
and for the whole step captured as one CUDA graph, next to PyTorch doing the
same in the same process, for three models: a small one with SGD, a wide one
(four layers of 4096, batch 256) with Adam, and the wide one in bfloat16
(parameters and data; products on the tensor cores through cuBLAS) with SGD. The losses of the first steps are
checked against PyTorch's from the same initial weights before anything is
timed. The two sides are sampled in turn (a sample of tensorplay's step, then
one of torch's, ``REPEATS`` times), so that a drift of the GPU's clocks over
the run weighs on both alike.
"""

from __future__ import annotations

import statistics
import time
from functools import partial

import numpy as np

import tensorplay as tp
from benchmarks.common import check, on_gpu, peer
from benchmarks.targets import at_most

SIZES = (512, 1024, 1024, 512)  # features of the layers
BATCH = 128
LR = 1e-3
MODELS = {  # (features of the layers, batch, optimizer, dtype of the parameters and data)
    "small": (SIZES, BATCH, "SGD", "float32"),
    "wide": ((4096,) * 5, 256, "Adam", "float32"),
    "wide bfloat16": ((4096,) * 5, 256, "SGD", "bfloat16"),  # issue 38's `training step bfloat16`
}
TARGETS = (1.25, 1.0, 1.0)  # at most these times torch's: eager, graphed, whole step
REPEATS = 9  # samples a side, in turn with the other side's


def _weights(sizes, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for i, o in zip(sizes[:-1], sizes[1:], strict=True):
        bound = 1 / np.sqrt(i)
        out += [rng.uniform(-bound, bound, (o, i)), rng.uniform(-bound, bound, o)]
    return out


def step_us(sides, n: int, repeats: int = REPEATS) -> list[float]:
    """Median wall microseconds per step, with the GPU's work included, of each
    of ``sides`` (``(step, sync)`` pairs), sampled in turn: ``n`` steps of the
    first side, then of the next, ``repeats`` times."""
    for step, sync in sides:
        for _ in range(3):
            step()
        sync()
    samples = [[] for _ in sides]
    for _ in range(repeats):
        for (step, sync), out in zip(sides, samples, strict=True):
            t0 = time.perf_counter()
            for _ in range(n):
                step()
            sync()
            out.append((time.perf_counter() - t0) / n * 1e6)
    return [statistics.median(out) for out in samples]


def _tp_model(sizes, weights, optimizer="SGD", dtype="float32"):
    import tensorplay.nn as nn
    import tensorplay.optim as optim

    layers = []
    for i, o in zip(sizes[:-1], sizes[1:], strict=True):
        layers += [nn.Linear(i, o), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    if dtype != "float32":
        model.to(getattr(tp, dtype))
    with tp.no_grad():
        for p, w in zip(model.parameters(), weights, strict=True):
            p.copy_(tp.tensor(w.astype(np.float32)).to(p.dtype))
    return model, getattr(optim, optimizer)(model.parameters(), lr=LR)


def _tp_steps(sizes, weights, x, y, optimizer, dtype="float32"):
    """(eager step, make_graphed_callables step, whole-step graph replay, first eager losses)."""
    import tensorplay.nn.functional as F

    def make_step(forward, model, opt):
        def step():
            opt.zero_grad(set_to_none=True)
            loss = F.mse_loss(forward(x), y)
            loss.backward()
            opt.step()
            return loss

        return step

    model, opt = _tp_model(sizes, weights, optimizer, dtype)
    eager = make_step(model, model, opt)
    losses = [eager().float().item() for _ in range(3)]

    model_g, opt_g = _tp_model(sizes, weights, optimizer, dtype)
    graphed = tp.cuda.make_graphed_callables(model_g, (x,))
    graphed_step = make_step(graphed, model_g, opt_g)

    model_w, opt_w = _tp_model(sizes, weights, optimizer, dtype)
    whole = make_step(model_w, model_w, opt_w)
    whole()  # warm-up: every kernel compiled, optimizer state made
    g = tp.cuda.CUDAGraph()
    opt_w.zero_grad(set_to_none=True)
    with tp.cuda.graph(g):
        whole()
    return eager, graphed_step, g.replay, losses


def _torch_model(torch, sizes, weights, optimizer="SGD", capturable=False, dtype="float32"):
    torch.backends.cuda.matmul.allow_tf32 = False
    layers = []
    for i, o in zip(sizes[:-1], sizes[1:], strict=True):
        layers += [torch.nn.Linear(i, o), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1]).cuda().to(getattr(torch, dtype))
    with torch.no_grad():
        for p, w in zip(model.parameters(), weights, strict=True):
            p.copy_(torch.tensor(w, dtype=torch.float32).to(p.dtype))
    if optimizer == "Adam":  # its default on CUDA: foreach; a captured step needs capturable
        return model, torch.optim.Adam(model.parameters(), lr=LR, capturable=capturable)
    return model, torch.optim.SGD(model.parameters(), lr=LR)


def _torch_steps(torch, sizes, weights, x, y, optimizer, dtype="float32"):
    model_and_opt = partial(_torch_model, torch, sizes, weights, optimizer, dtype=dtype)

    def make_step(forward, opt):
        def step():
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(forward(x), y)
            loss.backward()
            opt.step()
            return loss

        return step

    model, opt = model_and_opt()
    eager = make_step(model, opt)
    losses = [eager().float().item() for _ in range(3)]
    model_g, opt_g = model_and_opt()
    graphed = torch.cuda.make_graphed_callables(model_g, (x,))
    graphed_step = make_step(graphed, opt_g)

    model_w, opt_w = model_and_opt(capturable=True)
    whole = make_step(model_w, opt_w)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            whole()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    opt_w.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        whole()
    return eager, graphed_step, g.replay, losses


def training_step(model: str, rows: list, progress) -> None:
    sizes, batch, optimizer, dtype = MODELS[model] if on_gpu() else ((4, 8, 3), 2, *MODELS[model][2:])
    n = (50 if model == "small" else 20) if on_gpu() else 1
    rng = np.random.default_rng(1)
    xv, yv = rng.standard_normal((batch, sizes[0])), rng.standard_normal((batch, sizes[-1]))
    weights = _weights(sizes)
    x, y = (tp.tensor(v.astype(np.float32)).to(getattr(tp, dtype)) for v in (xv, yv))
    eager, graphed, whole, losses = _tp_steps(sizes, weights, x, y, optimizer, dtype)
    progress.step("training tensorplay capture")
    shape = "-".join(map(str, sizes))
    names = ["eager ops", "forward and backward graphed (make_graphed_callables)", "whole step as one CUDA graph"]
    kind = "training step" if dtype == "float32" else f"training step {dtype} (parameters and data)"
    rows_here = [
        {"name": f"{kind}, MLP {shape}, batch {batch}, {optimizer}: {what}, us/step", "unit": "us",
         "lower_is_better": True}
        for what in names
    ]  # fmt: skip
    progress.step("training tensorplay")
    torch = peer("torch")
    theirs = [None] * 3
    if torch is not None:
        tx, ty = (torch.tensor(v, dtype=torch.float32, device="cuda").to(getattr(torch, dtype)) for v in (xv, yv))
        *theirs, t_losses = _torch_steps(torch, sizes, weights, tx, ty, optimizer, dtype)
        err = max(abs(a - b) / abs(b) for a, b in zip(losses, t_losses, strict=True))
        check("training losses against torch's", err, 1e-3 if dtype == "float32" else 3e-2)
    for row, ours, their in zip(rows_here, (eager, graphed, whole), theirs, strict=True):
        sides = [(ours, tp.cuda.synchronize)] + ([(their, torch.cuda.synchronize)] if their else [])
        for who, us in zip(("tensorplay", "torch"), step_us(sides, n, REPEATS if on_gpu() else 2), strict=False):
            row[who] = us
    progress.step("training torch")
    for row, bound in zip(rows_here, TARGETS, strict=True):
        at_most(row, bound)
    rows.extend(rows_here)


SECTIONS = [(partial(training_step, model), 3) for model in MODELS]
