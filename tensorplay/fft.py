"""Discrete Fourier transforms: the array API standard's ``fft`` extension, as ``tp.fft``."""

from __future__ import annotations

__all__: list[str] = []
