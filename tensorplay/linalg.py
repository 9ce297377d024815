"""Linear algebra: the array API standard's ``linalg`` extension, as ``tp.linalg``."""

from __future__ import annotations

__all__: list[str] = []
