"""fp32 matmul: TFLOP/s of ``a @ b`` (2*M*N*K / time) for 4096^3 and a batch of
8 x 1024^3, next to PyTorch (TF32 off) and ``cupy.matmul``; and the relative
error of a 1024^3 product against a float64 reference.

Every timed product is first checked against float64 on a sample of rows.
"""

from __future__ import annotations

from functools import partial

import numpy as np

import tensorplay as tp
from benchmarks.common import check, cupy_events, device_ms, on_gpu, peer, reps, torch_events, tp_events

TOL = 1e-5


def _torch():
    torch = peer("torch")
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference, as tensorplay computes it
    return torch


def _rel_err(got, ref) -> float:
    """Norm-wise relative error ||got - ref|| / ||ref||."""
    return float(np.linalg.norm(np.asarray(got, np.float64) - ref) / np.linalg.norm(ref))


def _reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in float64: with torch on the GPU if available, else NumPy."""
    torch = _torch()
    if torch is None:
        return a.astype(np.float64) @ b.astype(np.float64)
    ta, tb = (torch.from_numpy(v).cuda().double() for v in (a, b))
    return (ta @ tb).cpu().numpy()


def throughput(shape: tuple, rows: list, progress) -> None:
    """TFLOP/s of ``(*batch, m, k) @ (*batch, k, n)`` with m = n = k = shape[-1]."""
    if not on_gpu():
        shape = shape[:-2] + (16, 16) if len(shape) == 3 else (32, 32)
        shape = (2, 16, 16) if len(shape) == 3 else shape
    n = shape[-1]
    batch = shape[0] if len(shape) == 3 else 1
    flop = 2.0 * batch * n**3
    label = " x ".join(map(str, shape)) + f" @ {n}x{n}"
    row = {"name": f"fp32 matmul {label}, TFLOP/s", "unit": "TFLOP/s", "lower_is_better": False, "rel_err": {}}
    a, b = tp.rand(shape), tp.rand(shape)
    ha, hb = a.numpy(), b.numpy()
    sample = np.unique(np.linspace(0, n - 1, 8).astype(np.int64))
    ref = _reference(ha[..., sample, :], hb)  # rows of the first (or only) product's sample

    def tflops(ms: float) -> float:
        return flop / 1e12 / (ms / 1e3)

    err = _rel_err((a @ b).numpy()[..., sample, :], ref)
    row["rel_err"]["tensorplay"] = check(f"tensorplay matmul {label}", err, TOL)
    row["tensorplay"] = tflops(device_ms(lambda: a @ b, *tp_events(), tp.cuda.synchronize, **reps()))
    del a, b
    tp.cuda.empty_cache()
    progress.step(f"matmul {label} tensorplay")

    torch = _torch()
    if torch is not None:
        ta, tb = torch.from_numpy(ha).cuda(), torch.from_numpy(hb).cuda()
        err = _rel_err((ta @ tb).cpu().numpy()[..., sample, :], ref)
        row["rel_err"]["torch"] = check(f"torch matmul {label}", err, TOL)
        row["torch"] = tflops(device_ms(lambda: ta @ tb, *torch_events(torch), torch.cuda.synchronize, **reps()))
        del ta, tb
        torch.cuda.empty_cache()
    progress.step(f"matmul {label} torch")

    cp = peer("cupy")
    if cp is not None:
        ca, cb = cp.asarray(ha), cp.asarray(hb)
        err = _rel_err(cp.asnumpy(cp.matmul(ca, cb))[..., sample, :], ref)
        row["rel_err"]["cupy"] = check(f"cupy matmul {label}", err, TOL)
        ms = device_ms(lambda: cp.matmul(ca, cb), *cupy_events(cp), cp.cuda.Device().synchronize, **reps())
        row["cupy"] = tflops(ms)
        del ca, cb
        cp.get_default_memory_pool().free_all_blocks()
    progress.step(f"matmul {label} cupy")

    row["target"] = ">= 50% of torch (TF32 off)"
    rows.append(row)


def accuracy(rows: list, progress) -> None:
    """Norm-wise relative error of a full 1024^3 fp32 product against float64."""
    n = 1024 if on_gpu() else 32
    a, b = tp.rand((n, n)), tp.rand((n, n))
    ha, hb = a.numpy(), b.numpy()
    ref = _reference(ha, hb)
    row = {"name": f"fp32 matmul {n}^3, relative error vs float64", "unit": "", "lower_is_better": True}
    row["tensorplay"] = _rel_err((a @ b).numpy(), ref)
    torch = _torch()
    if torch is not None:
        row["torch"] = _rel_err((torch.from_numpy(ha).cuda() @ torch.from_numpy(hb).cuda()).cpu().numpy(), ref)
    cp = peer("cupy")
    if cp is not None:
        row["cupy"] = _rel_err(cp.asnumpy(cp.matmul(cp.asarray(ha), cp.asarray(hb))), ref)
    row["target"] = f"< {TOL:g}"
    rows.append(row)
    progress.step("matmul accuracy")


SECTIONS = [(accuracy, 1), (partial(throughput, (4096, 4096)), 3), (partial(throughput, (8, 1024, 1024)), 3)]
