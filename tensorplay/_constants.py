"""The array API standard's constants.

Examples
--------
>>> import tensorplay as tp
>>> tp.pi, tp.arange(2)[tp.newaxis].shape
(3.141592653589793, (1, 2))
"""

from __future__ import annotations

import math

__all__ = ["e", "inf", "nan", "newaxis", "pi"]

e = math.e
inf = math.inf
nan = math.nan
newaxis = None  # x[newaxis] adds a dimension of 1
pi = math.pi
