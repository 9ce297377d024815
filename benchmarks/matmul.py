"""fp32 matmul: TFLOP/s of ``a @ b`` (2*M*N*K / time) for 4096^3 and a batch of
8 x 1024^3, next to PyTorch (TF32 off) and ``cupy.matmul``; the relative
error of a 1024^3 product against a float64 reference; a table of shapes
(every square 128...4096, and the products of the training benchmark's MLP in
the layouts its forward and backward give them) beside torch, each row naming
the kernel tensorplay chose; and one square product per dtype (``matmul
float64 4096``, ``matmul float32 4096``, ``matmul bfloat16 8192``, ``matmul
float16 8192``) beside torch, each row naming the path (cuBLAS or the Numba
kernels, and why).

Every timed product is first checked against float64 on a sample of rows.
"""

from __future__ import annotations

import operator
from functools import partial

import numpy as np

import tensorplay as tp
from benchmarks.common import (
    checked_figure,
    cupy_events,
    device_ms,
    on_gpu,
    peer,
    torch_events,
    torch_hold,
    tp_events,
    tp_hold,
)
from benchmarks.targets import at_least, judge

TOL = 1e-5


def _torch():
    torch = peer("torch")
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference, as tensorplay computes it
    return torch


def _rel_err(got, ref) -> float:
    """Norm-wise relative error ||got - ref|| / ||ref||."""
    got = np.asarray(got)
    got = got.astype(np.complex128 if np.iscomplexobj(got) else np.float64)
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def _reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in float64: with torch on the GPU if available, else NumPy."""
    torch = _torch()
    if torch is None:
        return a.astype(np.float64) @ b.astype(np.float64)
    ta, tb = (torch.from_numpy(v).cuda().double() for v in (a, b))
    return (ta @ tb).cpu().numpy()


def throughput(gpu_shape: tuple, sim_shape: tuple, share: float, rows: list, progress) -> None:
    """TFLOP/s of ``a @ b`` with ``a``, ``b`` of ``shape``: (n, n) or (batch, n, n);
    the target: ``share`` of torch's."""
    shape = gpu_shape if on_gpu() else sim_shape
    n = shape[-1]
    batch = shape[0] if len(shape) == 3 else 1
    flop = 2.0 * batch * n**3
    label = f"{n}^3" if batch == 1 else f"{batch} x {n}^3"
    row = {"name": f"fp32 matmul {label}, TFLOP/s", "unit": "TFLOP/s", "lower_is_better": False}
    a, b = tp.rand(shape), tp.rand(shape)
    ha, hb = a.numpy(), b.numpy()
    sample = np.unique(np.linspace(0, n - 1, 8).astype(np.int64))
    ref = _reference(ha[..., sample, :], hb)  # the sampled rows of every product

    err_of = lambda got: _rel_err(got[..., sample, :], ref)
    tflops = lambda ms: flop / 1e12 / (ms / 1e3)

    fn = partial(operator.matmul, a, b)
    checked_figure(row, "tensorplay", fn, tp.Tensor.numpy, err_of, TOL, tp_events(), tp.cuda.synchronize, tflops)
    del a, b, fn
    tp.cuda.empty_cache()
    progress.step(f"matmul {label} tensorplay")

    torch = _torch()
    if torch is not None:
        fn = partial(operator.matmul, torch.from_numpy(ha).cuda(), torch.from_numpy(hb).cuda())
        to_host = lambda t: t.cpu().numpy()
        checked_figure(row, "torch", fn, to_host, err_of, TOL, torch_events(torch), torch.cuda.synchronize, tflops)
        del fn
        torch.cuda.empty_cache()
    progress.step(f"matmul {label} torch")

    cp = peer("cupy")
    if cp is not None:
        fn = partial(cp.matmul, cp.asarray(ha), cp.asarray(hb))
        sync = cp.cuda.Device().synchronize
        checked_figure(row, "cupy", fn, cp.asnumpy, err_of, TOL, cupy_events(cp), sync, tflops)
        del fn
        cp.get_default_memory_pool().free_all_blocks()
    progress.step(f"matmul {label} cupy")

    at_least(row, share, note="; TF32 off on both sides")
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
    judge(row, row["tensorplay"] < TOL, f"< {TOL:g} ({row['tensorplay']:.2g} here)")
    rows.append(row)
    progress.step("matmul accuracy")


# (M, K, N, layout): "NT" is x @ w.t() (linear's forward), "TN" g.t() @ x (a weight's gradient)
SHAPES = [(n, n, n, "NN") for n in (128, 256, 512, 1024, 2048, 4096)] + [
    (128, 512, 1024, "NT"),
    (128, 1024, 1024, "NT"),
    (128, 1024, 512, "NT"),
    (128, 512, 1024, "NN"),
    (128, 1024, 1024, "NN"),
    (512, 128, 1024, "TN"),
    (1024, 128, 1024, "TN"),
    (1024, 128, 512, "TN"),
]


def _operands(lib_rand, m: int, k: int, n: int, layout: str):
    """(a, b) of shapes (m, k), (k, n), stored as ``layout`` says."""
    a = lib_rand(k, m).t() if layout[0] == "T" else lib_rand(m, k)
    b = lib_rand(n, k).t() if layout[1] == "T" else lib_rand(k, n)
    return a, b


def shape_table(rows: list, progress) -> None:
    """One row per product of SHAPES: TFLOP/s beside torch's, results checked
    against torch's. The figures are the device's time alone: a hold kernel
    keeps the GPU busy while the host queues 20 products, which then run back
    to back (the products of 128 rows take a few microseconds, less than
    either library's host time a call). The target also gives the ratio of
    eager calls in a row, host included. Targets (issue 38): 90 % of torch for
    products of up to 1024 rows, 95 % above."""
    torch = _torch()
    shapes = SHAPES if on_gpu() else [(16, 24, 8, "NN"), (8, 32, 16, "NT"), (16, 8, 24, "TN")]
    r = {"n": 5, "warmup": 3, "batch": 20} if on_gpu() else {"n": 1, "warmup": 1}
    tp_held = dict(r, hold=tp_hold())
    for m, k, n, layout in shapes:
        flop = 2.0 * m * n * k
        row = {"name": f"fp32 matmul {m}x{k}x{n} {layout}, TFLOP/s", "unit": "TFLOP/s", "lower_is_better": False}
        a, b = _operands(lambda *s: tp.rand(s), m, k, n, layout)
        product = partial(operator.matmul, a, b)
        ms = device_ms(product, *tp_events(), tp.cuda.synchronize, **tp_held)
        ms_eager = device_ms(product, *tp_events(), tp.cuda.synchronize, **r)
        row["tensorplay"] = flop / 1e9 / ms
        choice = tp.backends.matmul.explain(m, n, k, trans_a=layout[0] == "T", trans_b=layout[1] == "T")
        note = ""
        if torch is not None:
            ta, tb = (torch.from_numpy(t.numpy()).cuda() for t in (a.contiguous(), b.contiguous()))
            ta = ta.t().contiguous().t() if layout[0] == "T" else ta
            tb = tb.t().contiguous().t() if layout[1] == "T" else tb
            want = (ta.double() @ tb.double()).cpu().numpy()
            err = _rel_err((a @ b).numpy(), want)
            if err > TOL:
                raise AssertionError(f"{row['name']}: relative error {err:.2e} against torch in float64")
            product = partial(operator.matmul, ta, tb)
            held = dict(r, hold=torch_hold(torch))
            ms_torch = device_ms(product, *torch_events(torch), torch.cuda.synchronize, **held)
            ms_torch_eager = device_ms(product, *torch_events(torch), torch.cuda.synchronize, **r)
            row["torch"] = flop / 1e9 / ms_torch
            note = f": {ms * 1e3:.1f} vs {ms_torch * 1e3:.1f} us; eager, host included: {ms_torch_eager / ms_eager:.0%}"
        at_least(row, 0.9 if m <= 1024 else 0.95, note=f"{note}; {choice.split(': ', 1)[1].split(' (')[0]}")
        rows.append(row)
        progress.step(f"matmul {m}x{k}x{n} {layout}")


# (dtype, n on a GPU, norm-wise relative error allowed against float64): one rounding of the result to the dtype
DTYPE_PRODUCTS = [
    ("float64", 4096, 1e-12), ("float32", 4096, TOL), ("bfloat16", 8192, 1e-2), ("float16", 8192, 2e-3),
    ("complex64", 4096, TOL),
]  # fmt: skip


def _path(text: str) -> str:
    """The path a product takes, from ``explain``: the cuBLAS call, or the Numba kernel and why."""
    described = text.split(": ", 1)[1]
    if "; Numba kernel: " in described:
        return "Numba kernel: " + described.rsplit("; Numba kernel: ", 1)[1]
    return described.split(": ", 1)[0]


def dtype_products(rows: list, progress) -> None:
    """TFLOP/s of an n^3 product of each dtype of DTYPE_PRODUCTS, beside torch
    (TF32 off), timed by CUDA events; both results checked first against
    float64 on a sample of rows."""
    torch = _torch()
    for name, gpu_n, tol in DTYPE_PRODUCTS:
        n = gpu_n if on_gpu() else 16
        row = {"name": f"matmul {name} {n}", "unit": "TFLOP/s", "lower_is_better": False}
        sample = np.unique(np.linspace(0, n - 1, 8).astype(np.int64))
        if name.startswith("complex"):  # random real and imaginary parts; 8 real flops per complex product
            rng = np.random.default_rng(3)
            ha, hb = (rng.random((n, n)) + 1j * rng.random((n, n)) for _ in range(2))
            ha, hb = ha.astype(name), hb.astype(name)
            a, b = tp.asarray(ha), tp.asarray(hb)
            ref, flops, wide = ha[sample].astype(np.complex128) @ hb.astype(np.complex128), 8.0 * n**3, np.complex128
        else:
            a, b = tp.rand(n, n).to(name), tp.rand(n, n).to(name)
            ha, hb = (t.float().numpy() for t in (a, b))  # exact: every value is the dtype's
            ref, flops, wide = _reference(ha[sample], hb), 2.0 * n**3, np.float64
        err_of = lambda got: _rel_err(np.asarray(got, wide)[sample], ref)  # noqa: B023 (used in this pass)
        tflops = lambda ms: flops / 1e12 / (ms / 1e3)  # noqa: B023
        to_host = lambda t: t.to(wide.__name__).numpy()  # noqa: B023
        checked_figure(
            row, "tensorplay", partial(operator.matmul, a, b), to_host, err_of, tol, tp_events(), tp.cuda.synchronize,
            tflops,
        )  # fmt: skip
        del a, b
        tp.cuda.empty_cache()
        progress.step(f"matmul {name} {n} tensorplay")
        path = _path(tp.backends.matmul.explain(n, n, n, dtype=name))
        if torch is not None:
            ta, tb = (torch.from_numpy(h).cuda().to(getattr(torch, name)) for h in (ha, hb))
            fn = partial(operator.matmul, ta, tb)
            to_host = lambda t: t.to(getattr(torch, wide.__name__)).cpu().numpy()  # noqa: B023
            checked_figure(row, "torch", fn, to_host, err_of, tol, torch_events(torch), torch.cuda.synchronize, tflops)
            del ta, tb, fn
            torch.cuda.empty_cache()
        progress.step(f"matmul {name} {n} torch")
        at_least(row, 0.95, note=f"; tensorplay: {path}")
        rows.append(row)


SECTIONS = [
    (accuracy, 1),
    (partial(throughput, (4096, 4096), (32, 32), 0.95), 3),
    (partial(throughput, (8, 1024, 1024), (2, 16, 16), 0.9), 3),
    (shape_table, len(SHAPES)),
    (dtype_products, 2 * len(DTYPE_PRODUCTS)),
]
