"""The fused SGD step's kernel in variants, beside torch's, on the GPU: where the
bfloat16 MLP step's update loses to torch's ``multi_tensor_apply``.

The parameters are the ``wide bfloat16`` model's (``benchmarks/training.py``):
four 4096 x 4096 weights and four 4096-element biases, bfloat16, with
gradients. Each variant is one captured ``opt.step()`` replayed; the figure is
its GPU time and the bandwidth of the bytes it must move (each parameter and
gradient read, each parameter written). The variants change how the work is
shared out: elements a thread takes a pass (``multi_tensor.UNROLL``, doubled
for bfloat16), and a cap on the grid in waves of the GPU's threads, each
tensor at most its equal share (``optim._fused.WAVES``; then the threads
loop), against the tensor ops' step (``foreach=False``) and torch's
``SGD(foreach=True)``. On the H100 at ``7314eb8``: 191.5 us in one pass, 167.6
capped at two waves, 225-395 with 16 or 32 elements a thread; the tensor ops
244.6; torch 169.0.

    python3 -m benchmarks.sgd_variants          (needs a GPU)
"""

from __future__ import annotations

import numpy as np

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.optim as optim
from benchmarks.common import device_ms, peer, torch_events, tp_events
from tensorplay.kernels import multi_tensor as mt
from tensorplay.optim import _fused

SHAPES = [(4096, 4096), (4096,)] * 4
LR = 1e-3


def _values():
    rng = np.random.default_rng(0)
    return [(rng.uniform(-1, 1, s).astype(np.float32), rng.uniform(-1, 1, s).astype(np.float32)) for s in SHAPES]


def _tp_step_us(values, foreach) -> float:
    params = [nn.Parameter(tp.tensor(p).to(tp.bfloat16)) for p, _ in values]
    for param, (_, g) in zip(params, values, strict=True):
        param.grad = tp.tensor(g).to(tp.bfloat16)
    opt = optim.SGD(params, lr=LR, foreach=foreach)
    opt.step()
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        opt.step()
    return 1e3 * device_ms(graph.replay, *tp_events(), tp.cuda.synchronize, n=30, batch=10)


def _set_variant(unroll: int, waves: int | None) -> None:
    mt.UNROLL = unroll
    _fused.WAVES = waves or 1 << 20  # no cap: one pass
    mt.multi_tensor.cache_clear()
    _fused._PLANS.clear()


def main() -> None:
    if tp.cuda.backend() != "cuda":
        raise SystemExit("sgd_variants needs a GPU")
    values = _values()
    moved = 3 * 2 * sum(p.size for p, _ in values)  # bytes: parameters and gradients read, parameters written
    rows = []
    saved = mt.UNROLL, _fused.WAVES
    try:
        for unroll in (4, 8, 16):
            for waves in (None, 8, 2):  # a grid cap: each tensor at most its equal share of these waves
                _set_variant(unroll, waves)
                where = "one pass" if waves is None else f"at most {waves} waves, threads loop"
                rows.append((f"fused, {2 * unroll} bfloat16 a thread a pass, {where}", _tp_step_us(values, None)))
    finally:
        mt.UNROLL, _fused.WAVES = saved
        mt.multi_tensor.cache_clear()
        _fused._PLANS.clear()
    rows.append(("tensor ops (foreach=False)", _tp_step_us(values, False)))
    torch = peer("torch")
    if torch is not None:
        params = [torch.tensor(p, device="cuda").to(torch.bfloat16).requires_grad_() for p, _ in values]
        for param, (_, g) in zip(params, values, strict=True):
            param.grad = torch.tensor(g, device="cuda").to(torch.bfloat16)
        opt = torch.optim.SGD(params, lr=LR, foreach=True)
        rows.append(("torch SGD(foreach=True)", 1e3 * device_ms(opt.step, *torch_events(torch), torch.cuda.synchronize,
                                                                 n=30, batch=10)))  # fmt: skip
    print(f"SGD step of the wide bfloat16 MLP's parameters ({moved / 2**20:.0f} MiB moved), GPU us and GB/s:")
    for name, us in rows:
        print(f"  {us:8.1f} us  {moved / us / 1e3:7.0f} GB/s  {name}")


if __name__ == "__main__":
    main()
