"""Fused kernels' contiguous loads and stores at signed indices (as generated)
or unsigned ones, on the gallery's ops-only CG and Ising, alternating in one
process: whether sparing Numba's wrap of a negative index on each ``a[i]`` and
``o[i]`` pays, as computing strided offsets unsigned did (the Ising sweep 20.0
-> 18.2 us on the H100). A probe, not part of ``benchmarks.run``::

    python -m benchmarks.fused_index_variants

prints, for each variant twice, us an iteration of the ops-only CG (256² and
1024²) and us a sweep of the ops-only Ising model (four 256² lattices).
"""

from __future__ import annotations

import re

import tensorplay as tp
from benchmarks.gallery import _best, _entry
from tensorplay.kernels import fused

_GENERATED = fused.source
_AT = re.compile(r"\b([ao]\d+)\[(i\d?)\]")  # a contiguous input's load or an output's store at a loop index


def _unsigned_source(*args, **kwargs) -> str:
    return _AT.sub(r"\1[np.uint64(\2)]", _GENERATED(*args, **kwargs))


def _measure(cg, ising) -> dict:
    on_gpu = tp.cuda.backend() == "cuda"
    out = {}
    for n in (256, 1024) if on_gpu else (6,):
        solver = cg.OpsCG(cg.Poisson(n))
        solver.solve()
        seconds = _best(solver.solve, tp.cuda.synchronize, repeats=5)
        out[f"cg {n}"] = seconds / solver.result()[1] * 1e6
    run = ising.Run(256, [1.5, 1.8, 2.0, 2.1], 2000, 500) if on_gpu else ising.Run(4, [2.0, 3.0], 40, 5)
    solver = ising.OpsIsing(run)
    solver.solve()
    out["ising"] = _best(solver.solve, tp.cuda.synchronize, repeats=5) / run.sweeps * 1e6
    return out


def main() -> None:
    cg, ising = _entry("cg"), _entry("ising")
    try:
        for _ in range(2):
            for label, source in (("signed  ", _GENERATED), ("unsigned", _unsigned_source)):
                fused.source = source
                figures = _measure(cg, ising)
                print(label, "  ".join(f"{k} {v:.2f} us" for k, v in figures.items()), flush=True)
    finally:
        fused.source = _GENERATED


if __name__ == "__main__":
    main()
