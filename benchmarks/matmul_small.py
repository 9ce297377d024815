"""The small products where tensorplay's device time trails torch's: every tile
candidate the autotuner times, and a few it does not (other K tiles),
each timed through the library's own plans, beside torch, on the GPU.

A product of 128 rows, or one whose K is 128, takes 5-12 us: less than either
library's host time a call. Each figure here is the device's time alone: a
hold kernel keeps the GPU busy while the host queues 20 products, which then
run back to back (``benchmarks/common.py``). Where K is split, the table also
times the partial products without the kernel that sums them, which is what
an in-kernel sum of the runs could at best save.

    python3 benchmarks/matmul_small.py        (needs a GPU)
"""

from __future__ import annotations

import operator
import os
import sys
from functools import partial

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import tensorplay as tp  # noqa: E402
from benchmarks.common import device_ms, peer, torch_events, torch_hold, tp_events, tp_hold  # noqa: E402
from benchmarks.matmul import _operands  # noqa: E402
from tensorplay import _matmul  # noqa: E402
from tensorplay._matmul_choice import MATMUL, MatmulChoice, Problem  # noqa: E402
from tensorplay._tensor import Tensor  # noqa: E402
from tensorplay.kernels import matmul as mk  # noqa: E402
from tensorplay.runtime.launch import launch_packed  # noqa: E402

SHAPES = [(128, 128, 128, "NN"), (128, 512, 1024, "NN"), (512, 128, 1024, "TN"), (1024, 128, 512, "TN")]
T = mk.MatmulTiles
EXTRA_TILES = (  # not among TILE_CHOICES: other K tiles of its tile shapes
    T(64, 64, 8, 4, 4, vec=4, ku=4),
    T(64, 64, 16, 4, 4, vec=4, ku=4),
    T(32, 64, 8, 4, 4, vec=4, ku=4),
    T(64, 128, 16, 8, 8, vec=4, ku=4),
)
REPS = {"n": 7, "warmup": 3, "batch": 20}


def _three_d(t: Tensor, trans: bool) -> Tensor:
    return (t.t() if trans else t).reshape(1, *(t.shape[::-1] if trans else t.shape))


def _tp_us(fn, hold) -> float:
    return device_ms(fn, *tp_events(), tp.cuda.synchronize, hold=hold, **REPS) * 1e3


def main() -> None:
    torch = peer("torch")
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False
    hold = tp_hold()
    for m, k, n, layout in SHAPES:
        p = Problem(1, m, n, k, "float32", layout[0] == "T", layout[1] == "T")
        a, b = _operands(lambda *shape: tp.rand(shape), m, k, n, layout)
        a3, b3 = _three_d(a, p.trans_a), _three_d(b, p.trans_b)
        want = a.numpy().astype(np.float64) @ b.numpy().astype(np.float64)
        print(f"-- {m}x{k}x{n} {layout}: GPU us a product, 20 in a row, host hidden")
        if torch is not None:
            ta, tb = (torch.from_numpy(t.contiguous().numpy()).cuda() for t in (a, b))
            events = torch_events(torch)
            ms = device_ms(
                partial(torch.matmul, ta, tb), *events, torch.cuda.synchronize, hold=torch_hold(torch), **REPS
            )
            print(f"{'torch':<48}{ms * 1e3:8.2f}")
        print(f"{'tensorplay as chosen (a @ b)':<48}{_tp_us(partial(operator.matmul, a, b), hold):8.2f}")
        choices = [*MATMUL.candidates(p)]
        choices += [MatmulChoice(t, s, "extra") for t in EXTRA_TILES for s in (1, 2, 4) if p.k // s >= 64]
        for c in choices:
            out = Tensor._empty((1, m, n), tp.float32)
            plan = _matmul._plan(p, c, a3, b3, out, (m, n))
            plan.launch(a3, b3, out)
            err = np.abs(out.numpy()[0] - want).max() / np.abs(want).max()
            us = _tp_us(partial(plan.launch, a3, b3, out), hold)
            line = f"{str(c.tiles) + f' K/{p.runs(c.tiles, c.splits)}':<48}{us:8.2f}"
            if plan.partial_shape is not None:  # the partial products alone, without their sum
                partial_sums = Tensor._empty(plan.partial_shape, plan.partial_dtype)
                pa, pb, pc = plan.packers
                params = pa(a3) + pb(b3) + pc(partial_sums) + plan.tail
                alone = partial(launch_packed, plan.launcher, plan.grid, plan.block, params)
                line += f"   partials alone {_tp_us(alone, hold):6.2f}"
            print(line + ("" if err < 1e-5 else f"   WRONG: max error {err:.1e}"))


if __name__ == "__main__":
    main()
