"""Pictures for the examples without a plotting library: a 2-D field as a PNG
(a colour map, written with zlib; with ``axes=True``, framed by ticked axes and a
colour scale, their numbers drawn in a small bitmap font) and a curve as an SVG
line chart (a labelled log scale by default, with a tick at every decade).

With matplotlib installed, ``plt.imshow(field); plt.colorbar()`` and
``plt.semilogy(values)`` draw the same; these need nothing beyond NumPy and the
standard library.

>>> import os, tempfile
>>> import numpy as np
>>> folder = tempfile.mkdtemp()
>>> png = write_png(os.path.join(folder, "f.png"), np.eye(4), axes=True)
>>> svg = write_line_svg(os.path.join(folder, "r.svg"), [1.0, 0.1, 0.01], "change", "largest change")
>>> open(png, "rb").read(4), "log scale" in open(svg).read()
(b'\\x89PNG', True)
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass

import numpy as np

__all__ = ["Layout", "colour", "layout", "write_line_svg", "write_png"]

# A dark-to-bright colour map (black, purple, red, orange, pale yellow), RGB at even steps.
_STOPS = np.array([[0, 0, 4], [87, 16, 110], [188, 55, 84], [249, 142, 9], [252, 255, 164]], dtype=np.float64)

# A 5 x 7 bitmap font for the axes' numbers and letters (each row five bits, the leftmost first).
_GLYPHS = {
    "0": "01110 10001 10011 10101 11001 10001 01110", "1": "00100 01100 00100 00100 00100 00100 01110",
    "2": "01110 10001 00001 00010 00100 01000 11111", "3": "11111 00010 00100 00010 00001 10001 01110",
    "4": "00010 00110 01010 10010 11111 00010 00010", "5": "11111 10000 11110 00001 00001 10001 01110",
    "6": "00110 01000 10000 11110 10001 10001 01110", "7": "11111 00001 00010 00100 01000 01000 01000",
    "8": "01110 10001 10001 01110 10001 10001 01110", "9": "01110 10001 10001 01111 00001 00010 01100",
    ".": "00000 00000 00000 00000 00000 01100 01100", "-": "00000 00000 00000 11111 00000 00000 00000",
    "+": "00000 00100 00100 11111 00100 00100 00000", "e": "00000 00000 01110 10001 11111 10000 01110",
    "i": "00100 00000 01100 00100 00100 00100 01110", "j": "00010 00000 00110 00010 00010 10010 01100",
    "u": "00000 00000 10001 10001 10001 10011 01101", " ": "00000 00000 00000 00000 00000 00000 00000",
}  # fmt: skip
_FONT_SCALE = 2  # each font pixel a 2 x 2 square
_CHAR_W, _CHAR_H = 6 * _FONT_SCALE, 7 * _FONT_SCALE  # advance (glyph and a column of space), height
_TICK, _GAP, _BAR = 5, 6, 16  # tick length, space between parts, colour bar width (pixels)
_WHITE, _BLACK = (255, 255, 255), (0, 0, 0)


def colour(t: np.ndarray) -> np.ndarray:
    """Values in [0, 1] as RGB bytes along the colour map."""
    x = np.clip(t, 0.0, 1.0) * (len(_STOPS) - 1)
    i = np.minimum(x.astype(int), len(_STOPS) - 2)
    f = (x - i)[..., None]
    return np.round(_STOPS[i] * (1 - f) + _STOPS[i + 1] * f).astype(np.uint8)


def _number(v: float) -> str:
    text = f"{v:.3g}"
    return "0" if text in ("-0", "0.0", "-0.0") else text


@dataclass(frozen=True)
class Layout:
    """Where ``write_png(..., axes=True)`` puts things: the field's top-left
    pixel (``top``, ``left``), the pixels per point (``scale``), the field's size
    in pixels, the colour bar's left column, and the whole picture's size."""

    top: int
    left: int
    scale: int
    field_h: int
    field_w: int
    bar_left: int
    height: int
    width: int
    bar_ticks: tuple


def layout(field: np.ndarray, min_size: int = 256) -> Layout:
    """The layout of ``field``'s picture with axes (``write_png(..., axes=True)``)."""
    a = np.asarray(field, dtype=np.float64)
    scale = max(1, -(-min_size // min(a.shape)))
    field_h, field_w = a.shape[0] * scale, a.shape[1] * scale
    lo, hi = float(np.nanmin(a)), float(np.nanmax(a))
    bar_ticks = tuple(_number(v) for v in ((lo, (lo + hi) / 2, hi) if hi > lo else (lo,)))
    row_labels = max(len(str(i)) for i in _ticks(a.shape[0])) * _CHAR_W
    top = _CHAR_H + 2 * _GAP  # room for the colour bar's label, "u"
    left = _GAP + _CHAR_W + 2 * _GAP + row_labels + _GAP + _TICK  # "i", the row numbers, the ticks
    bar_left = left + field_w + 2 * _GAP
    width = bar_left + _BAR + _TICK + _GAP + max(len(t) for t in bar_ticks) * _CHAR_W + _GAP
    height = top + field_h + _TICK + _GAP + _CHAR_H + _GAP + _CHAR_H + _GAP  # ticks, numbers, "j"
    return Layout(top, left, scale, field_h, field_w, bar_left, height, width, bar_ticks)


def _text(img: np.ndarray, text: str, x: int, y: int, anchor: str = "left") -> None:
    """Draw ``text`` in black with its top at row ``y``; ``x`` is its left end
    (``anchor="left"``), middle or right end."""
    width = len(text) * _CHAR_W - _FONT_SCALE
    x0 = {"left": x, "middle": x - width // 2, "right": x - width}[anchor]
    for k, ch in enumerate(text):
        bits = np.array([[c == "1" for c in row] for row in _GLYPHS[ch].split()])
        block = np.kron(bits, np.ones((_FONT_SCALE, _FONT_SCALE), dtype=bool))
        cx = x0 + k * _CHAR_W
        img[y : y + block.shape[0], cx : cx + block.shape[1]][block] = _BLACK


def _ticks(count: int) -> list[int]:
    """Indices to number along an axis of ``count`` points: round ones, about five."""
    if count <= 6:
        return list(range(count))
    return [int(v) for v in _nice_ticks(0, count - 1)]


def _with_axes(a: np.ndarray, rgb: np.ndarray, where: Layout) -> np.ndarray:
    img = np.full((where.height, where.width, 3), 255, dtype=np.uint8)
    t, left, s = where.top, where.left, where.scale
    img[t : t + where.field_h, left : left + where.field_w] = rgb
    bottom, right = t + where.field_h, left + where.field_w
    img[t - 1 : bottom + 1, [left - 1, right]] = _BLACK  # the frame
    img[[t - 1, bottom], left - 1 : right + 1] = _BLACK
    for i in _ticks(a.shape[0]):  # rows, numbered down the left side
        y = t + i * s + s // 2
        img[y, left - 1 - _TICK : left - 1] = _BLACK
        _text(img, str(i), left - 1 - _TICK - _GAP, y - _CHAR_H // 2, "right")
    for j in _ticks(a.shape[1]):  # columns, along the bottom
        x = left + j * s + s // 2
        img[bottom + 1 : bottom + 1 + _TICK, x] = _BLACK
        _text(img, str(j), x, bottom + _TICK + _GAP, "middle")
    _text(img, "i", _GAP, t + where.field_h // 2 - _CHAR_H // 2)
    _text(img, "j", left + where.field_w // 2, bottom + _TICK + 2 * _GAP + _CHAR_H, "middle")
    bar = colour(np.linspace(1.0, 0.0, where.field_h))[:, None, :]  # the brightest at the top
    b0 = where.bar_left
    img[t:bottom, b0 : b0 + _BAR] = bar
    img[t - 1 : bottom + 1, [b0 - 1, b0 + _BAR]] = _BLACK
    img[[t - 1, bottom], b0 - 1 : b0 + _BAR + 1] = _BLACK
    marks = where.bar_ticks[::-1]  # the largest value at the top
    for k, label in enumerate(marks):
        y = t + round((where.field_h - 1) * k / max(len(marks) - 1, 1))
        img[y, b0 + _BAR + 1 : b0 + _BAR + 1 + _TICK] = _BLACK
        _text(img, label, b0 + _BAR + _TICK + _GAP, min(max(y - _CHAR_H // 2, 0), where.height - _CHAR_H))
    _text(img, "u", b0 + _BAR // 2, _GAP, "middle")
    return img


def write_png(path: str, field: np.ndarray, min_size: int = 256, axes: bool = False) -> str:
    """``field`` (2-D) as a PNG at ``path``, its smallest value dark and its
    largest bright, each point a square of pixels so that the field is at
    least ``min_size`` pixels on its shorter side. ``axes``: a frame with the
    row (``i``) and column (``j``) indices ticked, and a colour scale of the
    values (``u``) on the right (``layout`` says where each part lies)."""
    a = np.asarray(field, dtype=np.float64)
    if a.ndim != 2 or not a.size:
        raise ValueError(f"write_png draws a non-empty 2-D field, got shape {a.shape}")
    lo, hi = np.nanmin(a), np.nanmax(a)
    rgb = colour((a - lo) / (hi - lo) if hi > lo else np.zeros_like(a))
    scale = max(1, -(-min_size // min(a.shape)))
    rgb = np.repeat(np.repeat(rgb, scale, axis=0), scale, axis=1)
    if axes:
        rgb = _with_axes(a, rgb, layout(a, min_size))
    h, w = rgb.shape[:2]
    rows = b"".join(b"\x00" + row.tobytes() for row in rgb)  # filter type 0 per row

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)  # 8-bit RGB
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)))
        f.write(chunk(b"IEND", b""))
    return path


def _nice_ticks(lo: float, hi: float, most: int = 6) -> list[float]:
    """Round numbers from ``lo`` to ``hi``, at most ``most`` of them."""
    step = 10 ** math.floor(math.log10((hi - lo) / 2 or 1))
    for m in (1, 2, 5, 10, 20, 50):
        if (hi - lo) / (m * step) <= most - 1:
            step *= m
            break
    first = math.ceil(lo / step) * step
    return [first + k * step for k in range(int((hi - first) / step + 1e-9) + 1)]


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Exponents of 10 to tick on a log axis spanning ``lo``..``hi`` (log10): every
    decade, or with 2 and 5 between where the axis spans less than two."""
    decades = [float(e) for e in range(math.ceil(lo - 1e-9), math.floor(hi + 1e-9) + 1)]
    if len(decades) >= 3:
        step = max(1, -(-len(decades) // 8))
        return decades[::step]
    fine = [e + math.log10(m) for e in range(math.floor(lo) - 1, math.ceil(hi) + 1) for m in (1, 2, 5)]
    return [e for e in fine if lo - 1e-9 <= e <= hi + 1e-9]


def _log_label(e: float) -> str:
    """The value 10**e as a tick label: 1, 10, 0.1, 0.01, 1e-5 ... at decades."""
    if abs(e - round(e)) > 1e-9:
        return f"{10**e:.1g}"
    return {0: "1", 1: "10", 2: "100", -1: "0.1", -2: "0.01"}.get(round(e), f"1e{round(e)}")


def write_line_svg(path: str, values, title: str, ylabel: str, log: bool = True) -> str:
    """``values`` against their iteration (1, 2, ...) as an SVG line chart; with
    ``log`` (the default) the vertical axis is logarithmic, says so in its label,
    and has a tick and a grid line at every decade."""
    y = np.asarray(values, dtype=np.float64)
    if y.size < 2:
        raise ValueError("write_line_svg draws at least two values")
    if log:
        y = np.log10(np.maximum(y, np.finfo(np.float64).tiny))
    w, h, left, right, top, bottom = 560, 360, 84, 24, 40, 52
    lo, hi = float(y.min()), float(y.max())
    lo, hi = (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)
    x_lo, x_hi = 1.0, float(y.size)

    def px(x):
        return left + (w - left - right) * (x - x_lo) / (x_hi - x_lo)

    def py(v):
        return h - bottom - (h - top - bottom) * (v - lo) / (hi - lo)

    points = " ".join(f"{px(k + 1):.1f},{py(v):.1f}" for k, v in enumerate(y))
    label = f"{ylabel} (log scale)" if log else ylabel
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<text x="{w / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>',
    ]
    for v in _log_ticks(lo, hi) if log else _nice_ticks(lo, hi):
        text = _log_label(v) if log else f"{v:.3g}"
        out += [f'<line x1="{left}" y1="{py(v):.1f}" x2="{w - right}" y2="{py(v):.1f}" stroke="#dddddd"/>',
                f'<text x="{left - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{text}</text>']  # fmt: skip
    for x in _nice_ticks(x_lo, x_hi):
        out += [f'<line x1="{px(x):.1f}" y1="{h - bottom}" x2="{px(x):.1f}" y2="{h - bottom + 5}" stroke="black"/>',
                f'<text x="{px(x):.1f}" y="{h - bottom + 18}" text-anchor="middle">{x:.0f}</text>']  # fmt: skip
    out += [
        f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>',
        f'<text x="{(left + w - right) / 2}" y="{h - 12}" text-anchor="middle">iteration (of {y.size})</text>',
        f'<text x="16" y="{(top + h - bottom) / 2}" transform="rotate(-90 16 {(top + h - bottom) / 2})" '
        f'text-anchor="middle">{label}</text>',
        f'<polyline points="{points}" fill="none" stroke="#bc3754" stroke-width="1.5"/>',
        "</svg>",
    ]
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return path
