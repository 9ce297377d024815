"""Settings for property-based tests (hypothesis), shared by the stress tests
and the compiler's random programs.

``FULL``
    True when ``TENSORPLAY_STRESS=full`` (``scripts/gpu-check`` sets it): more
    examples, drawn at random instead of from a fixed seed.
``hypothesis_settings(examples=(ci, full), steps=(ci, full))``
    No deadline (the simulator's timing says nothing about the package),
    derandomized in CI (a failure reproduces by rerunning), random in full
    runs, the failing example's blob printed (``@reproduce_failure``) in both,
    nothing written into the checkout. ``steps`` is for state machines.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["FULL", "hypothesis_settings"]

FULL = os.environ.get("TENSORPLAY_STRESS", "").lower() == "full"


def hypothesis_settings(examples: tuple[int, int], steps: tuple[int, int] = (50, 50)) -> settings:
    """``examples`` and ``steps`` (per example, for a state machine): (in CI, in full runs)."""
    return settings(
        max_examples=examples[FULL],
        stateful_step_count=steps[FULL],
        deadline=None,  # the simulator's timing says nothing about the package
        derandomize=not FULL,
        print_blob=True,
        database=None,  # nothing written into the checkout
        suppress_health_check=[HealthCheck.too_slow],
    )
