"""The gallery's pictures with no plotting library: charts of several series
(lines and points, with a legend and ticks) as SVG, and fields as PNG
(``tensorplay.examples.plots``, the heat demo's).

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "c.svg")
>>> chart(path, [Series("y = x", [0, 1, 2], [0, 1, 2])], "demo", "x", "y") == path
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tensorplay.examples.plots import colour, write_png

__all__ = ["Series", "chart", "colour", "write_png"]

COLOURS = ("#1f4e99", "#bc3754", "#2a9d55", "#e0a100", "#6a3d9a", "#555555")
W, H, LEFT, RIGHT, TOP, BOTTOM = 560, 380, 70, 20, 40, 50


@dataclass(frozen=True)
class Series:
    """One series: a ``"line"`` or ``"points"`` (open circles) named ``label``."""

    label: str
    x: object
    y: object
    style: str = "line"


def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        return [10.0**e for e in range(math.floor(lo), math.ceil(hi) + 1)]
    step = 10 ** math.floor(math.log10((hi - lo) / 2 or 1))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (m * step) <= 6:
            step *= m
            break
    first = math.ceil(lo / step) * step
    return [first + k * step for k in range(int((hi - first) / step + 1e-9) + 1)]


def chart(
    path: str | Path,
    series: list[Series],
    title: str,
    xlabel: str,
    ylabel: str,
    logy: bool = False,
    logx: bool = False,
    legend: str = "upper right",
) -> str:
    """Draw ``series`` on shared axes as an SVG at ``path``, the legend in the
    corner ``legend`` names ("upper right", "lower right"); returns the path."""
    if not series:
        raise ValueError("chart draws at least one series, got none")

    def axis(v, log):
        v = np.asarray(v, dtype=np.float64)
        return np.log10(np.maximum(v, np.finfo(np.float64).tiny)) if log else v

    xs = [axis(s.x, logx) for s in series]
    ys = [axis(s.y, logy) for s in series]
    for s, x, y in zip(series, xs, ys, strict=True):
        if x.shape != y.shape or x.ndim != 1:
            raise ValueError(f"series {s.label!r}: expected x and y of one shape, got {x.shape} and {y.shape}")
    x_lo, x_hi = min(float(x.min()) for x in xs), max(float(x.max()) for x in xs)
    y_lo, y_hi = min(float(y.min()) for y in ys), max(float(y.max()) for y in ys)
    x_hi, y_hi = (x_hi if x_hi > x_lo else x_lo + 1), (y_hi if y_hi > y_lo else y_lo + 1)

    def px(x):
        return LEFT + (W - LEFT - RIGHT) * (x - x_lo) / (x_hi - x_lo)

    def py(y):
        return H - BOTTOM - (H - TOP - BOTTOM) * (y - y_lo) / (y_hi - y_lo)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>',
        f'<rect x="{LEFT}" y="{TOP}" width="{W - LEFT - RIGHT}" height="{H - TOP - BOTTOM}" '
        'fill="none" stroke="black"/>',
        f'<text x="{(W + LEFT - RIGHT) / 2}" y="{H - 12}" text-anchor="middle">{xlabel}</text>',
        f'<text x="16" y="{(H + TOP - BOTTOM) / 2}" transform="rotate(-90 16 {(H + TOP - BOTTOM) / 2})" '
        f'text-anchor="middle">{ylabel}</text>',
    ]
    for t in _ticks(x_lo, x_hi, logx):
        v = math.log10(t) if logx else t
        if x_lo - 1e-9 <= v <= x_hi + 1e-9:
            out.append(f'<text x="{px(v):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{t:g}</text>')
    for t in _ticks(y_lo, y_hi, logy):
        v = math.log10(t) if logy else t
        if y_lo - 1e-9 <= v <= y_hi + 1e-9:
            out.append(f'<line x1="{LEFT}" y1="{py(v):.1f}" x2="{W - RIGHT}" y2="{py(v):.1f}" stroke="#ddd"/>')
            out.append(f'<text x="{LEFT - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{t:g}</text>')
    for k, (s, x, y) in enumerate(zip(series, xs, ys, strict=True)):
        c = COLOURS[k % len(COLOURS)]
        if s.style == "points":
            out += [
                f'<circle cx="{px(a):.1f}" cy="{py(b):.1f}" r="3.5" fill="none" stroke="{c}"/>'
                for a, b in zip(x, y, strict=True)
            ]
        else:
            points = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in zip(x, y, strict=True))
            out.append(f'<polyline points="{points}" fill="none" stroke="{c}" stroke-width="1.6"/>')
        ly = TOP + 16 + 16 * k if legend == "upper right" else H - BOTTOM - 10 - 16 * (len(series) - 1 - k)
        out.append(f'<line x1="{W - RIGHT - 170}" y1="{ly - 4}" x2="{W - RIGHT - 150}" y2="{ly - 4}" stroke="{c}"/>')
        out.append(f'<text x="{W - RIGHT - 145}" y="{ly}">{s.label}</text>')
    out.append("</svg>")
    Path(path).write_text("\n".join(out) + "\n")
    return str(path)
