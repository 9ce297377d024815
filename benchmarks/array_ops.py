"""The array API's ops on the GPU, beside torch in the same process: ``sort``
of 2^24 float32 keys, ``cumsum`` of 2^26 float32, boolean-mask indexing
``x[mask]`` of 2^24 elements (a full call each: the mask's count is read back,
as in torch), elementwise ops against the copy bandwidth, and the host time of
an op new to this release (``atan2``) against ``x + y``'s.

Every figure is checked against NumPy (or torch) before it is timed.
"""

from __future__ import annotations

import numpy as np

import tensorplay as tp
from benchmarks.common import (
    checked_figure,
    host_us,
    on_gpu,
    peer,
    torch_events,
    tp_events,
    wall_us,
)
from benchmarks.targets import at_least, at_most, measurement


def _sizes() -> dict:
    big = on_gpu()
    return {
        "sort": 1 << 24 if big else 1 << 8,
        "cumsum": 1 << 26 if big else 1 << 10,
        "mask": 1 << 24 if big else 1 << 8,
    }


def _rate_row(name: str, elements: int) -> dict:
    return {"name": name, "unit": "G elements/s", "lower_is_better": False, "elements": elements}


def _per_ms(elements: int):
    return lambda ms: elements / (ms * 1e-3) / 1e9


def sort_and_scan(rows: list, progress) -> None:
    """``sort`` and ``cumsum``: G elements per second, device time by events."""
    torch = peer("torch")
    rng = np.random.default_rng(0)
    sizes = _sizes()
    for op, n, target in (("sort", sizes["sort"], 0.8), ("cumsum", sizes["cumsum"], 0.8)):
        host = rng.standard_normal(n).astype(np.float32)
        exponent = int(np.log2(n))
        row = _rate_row(f"{op} float32 2^{exponent}, G elements/s", n)
        ref = np.sort(host) if op == "sort" else np.cumsum(host.astype(np.float64))
        tol = 0.0 if op == "sort" else 1e-3

        def err_of(got, ref=ref):
            return float(np.max(np.abs(got - ref)) / max(1.0, float(np.max(np.abs(ref)))))

        x = tp.asarray(host)
        fn = (lambda x=x: tp.sort(x)) if op == "sort" else (lambda x=x: tp.cumsum(x, dim=0))
        checked_figure(row, "tensorplay", fn, lambda t: t.numpy().astype(np.float64), err_of, max(tol, 1e-12),
                       tp_events(), tp.cuda.synchronize, _per_ms(n))  # fmt: skip
        if torch is not None:
            tx = torch.from_numpy(host).cuda()
            tfn = (lambda tx=tx: torch.sort(tx).values) if op == "sort" else (lambda tx=tx: torch.cumsum(tx, 0))
            checked_figure(row, "torch", tfn, lambda t: t.cpu().numpy().astype(np.float64), err_of,
                           max(tol, 1e-12), torch_events(torch), torch.cuda.synchronize, _per_ms(n))  # fmt: skip
        at_least(row, target)
        rows.append(row)
    progress.step("sort and cumsum")


def mask_indexing(rows: list, progress) -> None:
    """``x[mask]`` of half the elements: a whole call (the count read back), microseconds."""
    torch = peer("torch")
    n = _sizes()["mask"]
    rng = np.random.default_rng(1)
    host, keep = rng.standard_normal(n).astype(np.float32), rng.random(n) < 0.5
    want = host[keep]
    x, mask = tp.asarray(host), tp.asarray(keep)
    got = x[mask].numpy()
    assert np.array_equal(got, want), "tensorplay's x[mask] differs from NumPy's"
    row = {"name": f"boolean-mask indexing x[mask] of 2^{int(np.log2(n))} float32, us per call",
           "unit": "us", "lower_is_better": True}  # fmt: skip
    row["tensorplay"] = wall_us(lambda: x[mask], tp.cuda.synchronize)
    if torch is not None:
        tx, tm = torch.from_numpy(host).cuda(), torch.from_numpy(keep).cuda()
        assert np.array_equal(tx[tm].cpu().numpy(), want)
        row["torch"] = wall_us(lambda: tx[tm], torch.cuda.synchronize)
    at_most(row, 1.25, note=" (>= 80% of torch's rate)")
    rows.append(row)
    progress.step("mask indexing")


_UNARY = ("exp", "sin", "erf", "log1p", "sqrt", "abs")


def elementwise_bandwidth(rows: list, progress) -> None:
    """Unary ops into a preallocated output, GB/s counting bytes read and written,
    against a copy of the same size in the same run (the copy row is the reference)."""
    n = (1 << 26) if on_gpu() else (1 << 10)
    rng = np.random.default_rng(2)
    host = rng.random(n).astype(np.float32) + 0.5
    x, out = tp.asarray(host), tp.empty(n)
    per_ms = lambda ms: 2 * 4 * n / (ms * 1e-3) / 1e9  # noqa: E731
    copy = {"name": "copy float32 2^26 (reference), GB/s", "unit": "GB/s", "lower_is_better": False}
    copy_error = lambda got: float(np.max(np.abs(got - host)))  # noqa: E731
    checked_figure(copy, "tensorplay", lambda: out.copy_(x), lambda t: t.numpy(), copy_error, 1e-12,
                   tp_events(), tp.cuda.synchronize, per_ms)  # fmt: skip
    measurement(copy, "the copy bandwidth the elementwise rows are judged against")
    rows.append(copy)
    for op in _UNARY:
        f, ref = getattr(tp, op), getattr(np, op) if op != "erf" else None
        want = ref(host.astype(np.float64)) if ref is not None else None
        row = {"name": f"elementwise {op} float32 2^26, GB/s", "unit": "GB/s", "lower_is_better": False}

        def err_of(got, want=want):
            return 0.0 if want is None else float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want))))

        checked_figure(row, "tensorplay", lambda f=f: f(x, out=out), lambda t: t.numpy().astype(np.float64),
                       err_of, 1e-5, tp_events(), tp.cuda.synchronize, per_ms)  # fmt: skip
        row["copy"] = copy["tensorplay"]
        at_least(row, 0.95, of="copy", label="the copy bandwidth")
        rows.append(row)
    progress.step("elementwise bandwidth")


def new_op_host_time(rows: list, progress) -> None:
    """Host microseconds of ``tp.atan2(x, y)`` (an op of this release) against ``x + y``'s, 1K float32."""
    x, y = tp.ones(1024), tp.full((1024,), 2.0)
    plus = host_us(lambda: x + y, tp.cuda.synchronize)
    row = {"name": "host us of a new op, atan2(x, y), 1K float32 (the x + y column: x + y's)", "unit": "us",
           "lower_is_better": True, "tensorplay": host_us(lambda: tp.atan2(x, y), tp.cuda.synchronize),
           "x + y": plus}  # fmt: skip
    at_most(row, 1.1, of="x + y")
    rows.append(row)
    progress.step("a new op's host time")


SECTIONS = [(sort_and_scan, 1), (mask_indexing, 1), (elementwise_bandwidth, 1), (new_op_host_time, 1)]
