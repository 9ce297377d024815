"""Shared timing helpers: every figure is measured next to its references in one run."""

from __future__ import annotations

import statistics
import sys
import time


def optional(name: str):
    """Import a peer library if it is installed (torch, cupy), else None."""
    try:
        return __import__(name)
    except Exception:
        return None


def peer(name: str):
    """``torch`` or ``cupy`` when installed and it sees a GPU, else None."""
    lib = optional(name)
    try:
        if name == "torch":
            return lib if lib is not None and lib.cuda.is_available() else None
        return lib if lib is not None and lib.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:
        return None


def on_gpu() -> bool:
    """True on a real GPU; on the simulator benchmarks shrink their sizes and repeats."""
    import tensorplay as tp

    return tp.cuda.backend() == "cuda"


def reps() -> dict:
    """``n``, ``warmup`` and ``batch`` for ``device_ms``: few on the simulator, where a
    kernel takes ~0.5 s."""
    return {"n": 20, "warmup": 3, "batch": 10} if on_gpu() else {"n": 2, "warmup": 1, "batch": 1}


def tp_events(stream=None):
    """(record start, record end, elapsed ms) for ``device_ms`` on a tensorplay stream
    (the current stream if None)."""
    import tensorplay as tp

    start, end = tp.cuda.Event(enable_timing=True), tp.cuda.Event(enable_timing=True)
    return lambda: start.record(stream), lambda: end.record(stream), lambda: start.elapsed_time(end)


def torch_events(torch):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    return start.record, end.record, lambda: start.elapsed_time(end)


def tp_hold():
    """A ``hold`` for ``device_ms`` on tensorplay's current stream: a one-thread
    kernel of about 2 ms (``kernels/timing.py``)."""
    import tensorplay as tp
    from tensorplay.kernels import timing
    from tensorplay.runtime.launch import launch

    scratch, steps = tp.empty(1), timing.HOLD_STEPS if on_gpu() else 1  # the simulator runs it in Python
    return lambda: launch(timing.hold, (1, 1, 1), (1, 1, 1), [scratch, steps])


def torch_hold(torch, cycles: int = 4_000_000):
    """A ``hold`` for ``device_ms`` on torch's current stream: ``torch.cuda._sleep``
    (about 2 ms at the H200's 1.98 GHz)."""
    return lambda: torch.cuda._sleep(cycles)


def cupy_events(cp):
    start, end = cp.cuda.Event(), cp.cuda.Event()
    return start.record, end.record, lambda: cp.cuda.get_elapsed_time(start, end)


def check(what: str, err: float, tol: float) -> float:
    """Refuse to time a wrong result: raise unless the relative error ``err`` is below ``tol``."""
    if not err < tol:
        raise AssertionError(f"{what}: relative error {err:.3g} against a float64 reference, expected < {tol:g}")
    return err


def checked_figure(row: dict, who: str, fn, to_host, err_of, tol: float, events, sync, per_ms) -> None:
    """Check ``fn()`` (``err_of(to_host(result))`` < ``tol``), then time it with ``events``:
    ``row[who] = per_ms(median ms)`` and ``row["rel_err"][who] = error``."""
    err = err_of(to_host(fn()))
    row.setdefault("rel_err", {})[who] = check(f"{who}: {row['name']}", err, tol)
    row[who] = per_ms(device_ms(fn, *events, sync, **reps()))


RUNS = 5  # samples a side of a comparison takes: medians of as many on every side


def wall_us(fn, sync, per: int = 1, runs: int = RUNS, before=None) -> float:
    """Median wall microseconds of ``fn()`` divided by ``per`` (its iterations),
    over ``runs`` calls, each after ``before()`` (untimed) and a sync, and timed
    up to the sync that follows it: what a loop run to its end costs, device
    work included. Every side of a comparison is sampled by this, alike (on the
    simulator, which runs each kernel in Python, with two runs at most)."""
    samples = []
    for _ in range(runs if on_gpu() else min(runs, 2)):
        if before is not None:
            before()
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        samples.append((time.perf_counter() - t0) / per * 1e6)
    return statistics.median(samples)


def host_us(fn, sync, n: int = 2000, repeats: int = 5) -> float:
    """Median host microseconds per call of ``fn`` (work queued, not waited for);
    on the simulator, which runs each kernel in Python, two calls show the code runs."""
    warmup = 50
    if not on_gpu():
        warmup, n, repeats = 1, min(n, 2), 1
    for _ in range(warmup):
        fn()
    sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        sync()
        samples.append((t1 - t0) / n * 1e6)
    return statistics.median(samples)


def device_ms(
    fn, record_start, record_end, elapsed, sync, n: int = 20, warmup: int = 3, batch: int = 1, hold=None
) -> float:
    """Median device milliseconds per call of ``fn``: events around ``batch`` calls
    in a row, so that the host's time to issue a call overlaps the previous one's
    GPU work, as in any loop (host time per call is measured by ``host_us``).
    ``hold`` (``tp_hold()``, ``torch_hold(torch)``) queues a kernel that keeps the
    device busy before each sample, so that the calls wait queued and run back to
    back: the figure is then the device's time alone, whatever the host's speed."""
    for _ in range(warmup):
        fn()
    sync()
    samples = []
    for _ in range(n):
        if hold is not None:
            hold()
        record_start()
        for _ in range(batch):
            fn()
        record_end()
        sync()
        samples.append(elapsed() / batch)
    return statistics.median(samples)


class Progress:
    """A one-line progress bar on stderr: tqdm's where it is installed (the
    ``bench`` extra), else a plain one (the GPU machine reaches no registry)."""

    def __init__(self, total: int, label: str = "bench") -> None:
        self.total, self.done, self.label = total, 0, label
        try:
            from tqdm import tqdm
        except ImportError:
            self._bar = None
        else:
            self._bar = tqdm(total=total, desc=label, file=sys.stderr, leave=True)

    def step(self, what: str) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.set_postfix_str(what[:40], refresh=False)
            self._bar.update(1)
            if self.done == self.total:
                self._bar.close()
            return
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        bar = "#" * filled + "-" * (width - filled)
        sys.stderr.write(f"\r{self.label} [{bar}] {self.done}/{self.total} {what[:40]:<40}")
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()
