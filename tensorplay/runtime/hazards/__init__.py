"""Hazard checking: races between operations that nothing orders, named before they reach a GPU.

``sanitize()`` (or ``TENSORPLAY_SANITIZE=1``) turns it on; ``HazardError``
is what it raises. The parts: ``access`` (the bytes an operation reads and
writes), ``written`` (which parameters a kernel writes, from its code),
``timeline`` (the order of eager work: vector clocks), ``captures`` (a
captured graph against its edges), ``replays`` (an executable graph's
launches: what they touch, in what order they run) and ``checker`` (on and
off, and the calls it listens to).
"""

from __future__ import annotations

from .checker import checking, enable_from_environment, enabled, kernel_launched, sanitize
from .ops import HazardError

__all__ = ["HazardError", "checking", "enable_from_environment", "enabled", "kernel_launched", "sanitize"]
