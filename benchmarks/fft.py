"""FFTs: GFLOP/s of ``tp.fft`` beside ``torch.fft`` (and ``cupy.fft``) in one
process, counted as FFT benchmarks count them (5 N log2 N for a complex
transform of N points, 2.5 N log2 N for a real one, over the device time):
``fft complex64 2^24``, ``fft2 complex64 4096x4096``, ``rfft float32 2^24``,
each row naming the path tensorplay took (cuFFT's plans, from ``explain``).

Every timed transform is first checked against float64 (torch's complex128
transform on the GPU where torch is, else NumPy). Target: >= 95 % of torch.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

import tensorplay as tp
from benchmarks.common import checked_figure, cupy_events, on_gpu, peer, torch_events, tp_events
from benchmarks.targets import at_least
from tensorplay._fft_choice import FFT

TOL = 1e-5  # norm-wise, against float64: single-precision transforms of 2^24 points are near 1e-7


def _label(shape: tuple) -> str:
    """``2^24`` for one power-of-two axis, ``4096x4096`` otherwise."""
    if len(shape) == 1 and shape[0] & (shape[0] - 1) == 0:
        return f"2^{shape[0].bit_length() - 1}"
    return "x".join(str(d) for d in shape)


def _host(shape: tuple, dtype: str) -> np.ndarray:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape, dtype=np.float32)
    if dtype == "complex64":
        x = x + 1j * rng.standard_normal(shape, dtype=np.float32)
    return x.astype(dtype)


def _reference(name: str, host: np.ndarray) -> np.ndarray:
    """The transform in float64: by torch on the GPU if available, else NumPy."""
    torch = peer("torch")
    if torch is None:
        return getattr(np.fft, name)(host.astype(np.complex128 if host.dtype.kind == "c" else np.float64))
    wide = torch.complex128 if host.dtype.kind == "c" else torch.float64
    out = getattr(torch.fft, name)(torch.from_numpy(host).cuda().to(wide)).cpu().numpy()
    torch.cuda.empty_cache()
    return out


def _path(name: str, shape: tuple, dtype: str) -> str:
    """The path a call takes, from ``explain``: cuFFT's plans, or why not."""
    return FFT.explain(name, shape, dtype).split(": ", 1)[1]


def transform(name: str, dtype: str, gpu_shape: tuple, sim_shape: tuple, rows: list, progress) -> None:
    """GFLOP/s of ``name`` on an input of ``shape`` and ``dtype``, beside torch
    and cupy; the target: 95 % of torch's."""
    shape = gpu_shape if on_gpu() else sim_shape
    label = f"{name} {dtype} {_label(shape)}"
    points = math.prod(shape)
    flop = (2.5 if name.startswith("r") else 5.0) * points * math.log2(points)
    row = {"name": label, "unit": "GFLOP/s", "lower_is_better": False}
    host = _host(shape, dtype)
    ref = _reference(name, host)
    err_of = lambda got: float(np.linalg.norm(np.asarray(got, np.complex128) - ref) / np.linalg.norm(ref))
    per_ms = lambda ms: flop / 1e9 / (ms / 1e3)

    x = tp.tensor(host)
    fn = partial(getattr(tp.fft, name), x)
    checked_figure(row, "tensorplay", fn, tp.Tensor.numpy, err_of, TOL, tp_events(), tp.cuda.synchronize, per_ms)
    del x, fn
    tp.cuda.empty_cache()
    progress.step(f"{label} tensorplay")

    torch = peer("torch")
    if torch is not None:
        fn = partial(getattr(torch.fft, name), torch.from_numpy(host).cuda())
        to_host = lambda t: t.cpu().numpy()
        checked_figure(row, "torch", fn, to_host, err_of, TOL, torch_events(torch), torch.cuda.synchronize, per_ms)
        del fn
        torch.cuda.empty_cache()
    progress.step(f"{label} torch")

    cp = peer("cupy")
    if cp is not None:
        fn = partial(getattr(cp.fft, name), cp.asarray(host))
        sync = cp.cuda.Device().synchronize
        checked_figure(row, "cupy", fn, cp.asnumpy, err_of, TOL, cupy_events(cp), sync, per_ms)
        del fn
        cp.get_default_memory_pool().free_all_blocks()
        cp.fft.config.get_plan_cache().clear()
    progress.step(f"{label} cupy")

    at_least(row, 0.95, note=f"; tensorplay: {_path(name, shape, dtype)}")
    rows.append(row)


SECTIONS = [
    (partial(transform, "fft", "complex64", (1 << 24,), (1 << 6,)), 3),
    (partial(transform, "fft2", "complex64", (4096, 4096), (8, 8)), 3),
    (partial(transform, "rfft", "float32", (1 << 24,), (1 << 6,)), 3),
]
