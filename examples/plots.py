"""Pictures for the examples without a plotting library: a 2-D field as a PNG
(a colour map, written with zlib) and a curve as an SVG line chart.

With matplotlib installed, ``plt.imshow(field)`` and ``plt.semilogy(values)``
draw the same; these need nothing beyond NumPy and the standard library.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

# A dark-to-bright colour map (black, purple, red, orange, pale yellow), RGB at even steps.
_STOPS = np.array([[0, 0, 4], [87, 16, 110], [188, 55, 84], [249, 142, 9], [252, 255, 164]], dtype=np.float64)


def colour(t: np.ndarray) -> np.ndarray:
    """Values in [0, 1] as RGB bytes along the colour map."""
    x = np.clip(t, 0.0, 1.0) * (len(_STOPS) - 1)
    i = np.minimum(x.astype(int), len(_STOPS) - 2)
    f = (x - i)[..., None]
    return np.round(_STOPS[i] * (1 - f) + _STOPS[i + 1] * f).astype(np.uint8)


def write_png(path: str, field: np.ndarray, min_size: int = 256) -> str:
    """``field`` (2-D) as a PNG at ``path``, its smallest value dark and its
    largest bright, each point a square of pixels so that the picture is at
    least ``min_size`` pixels on its shorter side."""
    a = np.asarray(field, dtype=np.float64)
    if a.ndim != 2 or not a.size:
        raise ValueError(f"write_png draws a non-empty 2-D field, got shape {a.shape}")
    lo, hi = np.nanmin(a), np.nanmax(a)
    rgb = colour((a - lo) / (hi - lo) if hi > lo else np.zeros_like(a))
    scale = max(1, -(-min_size // min(a.shape)))
    rgb = np.repeat(np.repeat(rgb, scale, axis=0), scale, axis=1)
    h, w = rgb.shape[:2]
    rows = b"".join(b"\x00" + row.tobytes() for row in rgb)  # filter type 0 per row

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)  # 8-bit RGB
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)))
        f.write(chunk(b"IEND", b""))
    return path


def write_line_svg(path: str, values, title: str, ylabel: str, log: bool = True) -> str:
    """``values`` against their index as an SVG line chart (a log scale by default)."""
    y = np.asarray(values, dtype=np.float64)
    if y.size < 2:
        raise ValueError("write_line_svg draws at least two values")
    if log:
        y = np.log10(np.maximum(y, np.finfo(np.float64).tiny))
    w, h, m = 480, 300, 50
    lo, hi = float(y.min()), float(y.max())
    hi = hi if hi > lo else lo + 1
    xs = m + (w - 2 * m) * np.arange(y.size) / (y.size - 1)
    ys = h - m - (h - 2 * m) * (y - lo) / (hi - lo)
    points = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(xs, ys, strict=True))
    fmt = (lambda v: f"{10**v:.2g}") if log else (lambda v: f"{v:.3g}")
    return _write(path, [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<text x="{w / 2}" y="20" text-anchor="middle">{title}</text>',
        f'<line x1="{m}" y1="{h - m}" x2="{w - m}" y2="{h - m}" stroke="black"/>',
        f'<line x1="{m}" y1="{m}" x2="{m}" y2="{h - m}" stroke="black"/>',
        f'<text x="{m - 4}" y="{m + 4}" text-anchor="end">{fmt(hi)}</text>',
        f'<text x="{m - 4}" y="{h - m}" text-anchor="end">{fmt(lo)}</text>',
        f'<text x="{w - m}" y="{h - m + 16}" text-anchor="end">iteration {y.size}</text>',
        f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" text-anchor="middle">{ylabel}</text>',
        f'<polyline points="{points}" fill="none" stroke="#bc3754" stroke-width="1.5"/>',
        "</svg>",
    ])  # fmt: skip


def _write(path: str, lines: list[str]) -> str:
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path
