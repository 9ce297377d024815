"""A kernel for timing others: ``hold`` keeps the device busy while the host
queues the launches to be timed, so that they run back to back and their
events measure the device, not the host's launch rate.

Examples
--------
>>> import numpy as np
>>> out = np.zeros(1, np.float32)
>>> hold[1, 1](out, 10)
>>> float(out[0]) > 0
True
"""

from numba import cuda

__all__ = ["HOLD_STEPS", "hold"]

HOLD_STEPS = 1 << 20  # a dependent chain of about 2 ms on an H200


@cuda.jit
def hold(out, steps):
    """One thread runs ``steps`` dependent multiply-adds and stores the result."""
    acc = 0.0
    for k in range(steps):
        acc = acc * 0.5 + 1.0 + k * 1e-30
    out[0] = acc
