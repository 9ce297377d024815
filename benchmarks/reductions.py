"""Reductions: GB/s of ``x.sum()``, ``x.sum(dim=-1)`` and ``x.mean(dim=-1)`` on
256 MiB of float32 (larger than L2), GB/s = bytes read / time.

Each result is first checked against NumPy in float64 on a sample of rows
(relative error < 1e-4), then timed next to PyTorch and CuPy in the same process.
"""

from __future__ import annotations

from functools import partial

import numpy as np

import tensorplay as tp
from benchmarks.common import checked_figure, cupy_events, on_gpu, peer, torch_events, tp_events
from benchmarks.targets import at_least

TOL = 1e-4
MIB256 = 64 << 20  # float32 elements in 256 MiB

# (op, dim, shape on a GPU, shape on the simulator)
CASES = [
    ("sum", None, (MIB256,), (4096,)),
    ("sum", -1, (16384, 4096), (8, 256)),
    ("sum", -1, (MIB256 // 256, 256), (32, 16)),  # many short rows
    ("sum", -1, (256, MIB256 // 256), (2, 1024)),  # few long rows
    ("mean", -1, (16384, 4096), (8, 256)),
]


def _reference(host: np.ndarray, op: str, dim, sample) -> np.ndarray:
    """``op`` in float64 over all of ``host`` (dim None) or over the sampled rows."""
    data = host if dim is None else host[sample]
    return np.atleast_1d(getattr(np, op)(data, axis=dim, dtype=np.float64))


def _rel_err(got, ref: np.ndarray) -> float:
    got = np.atleast_1d(np.asarray(got, dtype=np.float64))
    return float(np.max(np.abs(got - ref) / np.abs(ref)))


def reduction(case, rows: list, progress) -> None:
    op, dim, gpu_shape, sim_shape = case
    shape = gpu_shape if on_gpu() else sim_shape
    expr = f"x.{op}()" if dim is None else f"x.{op}(dim={dim})"
    nbytes = int(np.prod(shape)) * 4
    row = {"name": f"{expr} {shape} float32, GB/s", "unit": "GB/s", "lower_is_better": False}
    x = tp.rand(shape)
    host = x.numpy()
    sample = None if dim is None else np.unique(np.linspace(0, shape[0] - 1, 16).astype(np.int64))
    ref = _reference(host, op, dim, sample)
    err_of = lambda got: _rel_err(got if dim is None else got[sample], ref)
    gbs = lambda ms: nbytes / 1e9 / (ms / 1e3)

    fn = partial(getattr(x, op), dim)
    checked_figure(row, "tensorplay", fn, tp.Tensor.numpy, err_of, TOL, tp_events(), tp.cuda.synchronize, gbs)
    del x, fn
    tp.cuda.empty_cache()
    progress.step(f"{expr} tensorplay")

    torch = peer("torch")
    if torch is not None:
        a = torch.from_numpy(host).cuda()
        fn = partial(getattr(a, op)) if dim is None else partial(getattr(a, op), dim=dim)
        to_host = lambda t: t.cpu().numpy()
        checked_figure(row, "torch", fn, to_host, err_of, TOL, torch_events(torch), torch.cuda.synchronize, gbs)
        del a, fn
        torch.cuda.empty_cache()
    progress.step(f"{expr} torch")

    cp = peer("cupy")
    if cp is not None:
        a = cp.asarray(host)
        fn = partial(getattr(a, op), axis=dim)
        sync = cp.cuda.Device().synchronize
        checked_figure(row, "cupy", fn, cp.asnumpy, err_of, TOL, cupy_events(cp), sync, gbs)
        del a, fn
        cp.get_default_memory_pool().free_all_blocks()
    progress.step(f"{expr} cupy")

    at_least(row, 0.8)
    rows.append(row)


SECTIONS = [(partial(reduction, case), 3) for case in CASES]
