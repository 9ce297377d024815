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


def host_us(fn, sync, n: int = 2000, repeats: int = 5) -> float:
    """Median host microseconds per call of ``fn`` (work queued, not waited for)."""
    for _ in range(50):
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


def device_ms(fn, record_start, record_end, elapsed, sync, n: int = 20, warmup: int = 3) -> float:
    """Median device milliseconds of ``fn`` between two events."""
    for _ in range(warmup):
        fn()
    sync()
    samples = []
    for _ in range(n):
        record_start()
        fn()
        record_end()
        sync()
        samples.append(elapsed())
    return statistics.median(samples)


class Progress:
    """A one-line progress bar on stderr."""

    def __init__(self, total: int, label: str = "bench") -> None:
        self.total, self.done, self.label = total, 0, label

    def step(self, what: str) -> None:
        self.done += 1
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        bar = "#" * filled + "-" * (width - filled)
        sys.stderr.write(f"\r{self.label} [{bar}] {self.done}/{self.total} {what[:40]:<40}")
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()
