"""The pictures of ``examples/spectral.py``, with no plotting library: a
vorticity field on [0, 2π)² with its axes and colour scale (an SVG around a
PNG), and the energy and enstrophy against time (the gallery's charts).

>>> import os, tempfile
>>> from pathlib import Path
>>> import numpy as np
>>> path = Path(tempfile.mkdtemp()) / "f.svg"
>>> svg = write_field_svg(path, np.outer(np.sin(np.arange(8)), np.ones(8)), "demo", "ω")
>>> "data:image/png;base64," in path.read_text(), "3π/2" in path.read_text()
(True, True)
"""

from __future__ import annotations

import base64
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "gallery"))  # the gallery's charts
from charts import Series, chart, colour, write_png  # noqa: E402

__all__ = ["draw", "write_field_svg"]


def write_field_svg(path: Path, field: np.ndarray, title: str, label: str, most: int = 256) -> str:
    """``field`` on [0, 2π)² as an SVG: the picture (a PNG inside), x and y
    axes in units of π, and a colour scale of ``label``'s values. Fields
    larger than ``most`` points a side are drawn at every k-th point."""
    step = max(1, -(-field.shape[0] // most))
    a = np.asarray(field[::step, ::step], dtype=np.float64)[::-1]  # y upwards
    with tempfile.TemporaryDirectory() as tmp:
        png = write_png(os.path.join(tmp, "f.png"), a, min_size=a.shape[0])
        data = base64.b64encode(Path(png).read_bytes()).decode()
    size, left, top = 360, 60, 40
    lo, hi = float(a.min()), float(a.max())
    bar = colour(np.linspace(1.0, 0.0, 64))
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + size + 110}" height="{top + size + 50}" '
        'font-family="sans-serif" font-size="12">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="{left + size / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>',
        f'<image x="{left}" y="{top}" width="{size}" height="{size}" preserveAspectRatio="none" '
        f'style="image-rendering:pixelated" href="data:image/png;base64,{data}"/>',
        f'<rect x="{left}" y="{top}" width="{size}" height="{size}" fill="none" stroke="black"/>',
        f'<text x="{left + size / 2}" y="{top + size + 40}" text-anchor="middle">x</text>',
        f'<text x="16" y="{top + size / 2}" text-anchor="middle">y</text>',
    ]
    for q, text in enumerate(("0", "π/2", "π", "3π/2", "2π")):
        px, py = left + size * q / 4, top + size * (1 - q / 4)
        out.append(f'<line x1="{px}" y1="{top + size}" x2="{px}" y2="{top + size + 5}" stroke="black"/>')
        out.append(f'<text x="{px}" y="{top + size + 20}" text-anchor="middle">{text}</text>')
        out.append(f'<line x1="{left - 5}" y1="{py}" x2="{left}" y2="{py}" stroke="black"/>')
        out.append(f'<text x="{left - 8}" y="{py + 4}" text-anchor="end">{text}</text>')
    bx = left + size + 20
    for r, rgb in enumerate(bar):
        out.append(f'<rect x="{bx}" y="{top + size * r / 64:.1f}" width="16" height="{size / 64 + 0.5:.1f}" '
                   f'fill="rgb({rgb[0]},{rgb[1]},{rgb[2]})"/>')  # fmt: skip
    out.append(f'<rect x="{bx}" y="{top}" width="16" height="{size}" fill="none" stroke="black"/>')
    for q in range(5):
        value, py = hi - (hi - lo) * q / 4, top + size * q / 4
        out.append(f'<line x1="{bx + 16}" y1="{py}" x2="{bx + 21}" y2="{py}" stroke="black"/>')
        text = "0" if abs(value) < 1e-9 * (hi - lo) else f"{value:.3g}"
        out.append(f'<text x="{bx + 24}" y="{py + 4}">{text}</text>')
    out.append(f'<text x="{bx + 8}" y="{top - 8}" text-anchor="middle">{label}</text>')
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")
    return str(path)


def draw(folder: Path, tg, shear, k: int) -> None:
    """The three pictures of a run, in ``folder``: ``tg`` and ``shear`` are its solvers."""
    t, energy, _ = tg.history()
    exact = 0.25 * np.exp(-4 * tg.flow.nu * k * k * t)
    n = tg.flow.n
    series = [Series("exp(-4νk²t) / 4, exact", t, exact), Series("tensorplay", t, energy, "points")]
    title = f"Taylor-Green vortex, {n}x{n}, k = {k}: energy"
    tg_chart = chart(folder / "spectral_tg_energy.svg", series, title, "time t", "energy E = ½⟨u² + v²⟩")
    t, energy, enstrophy = shear.history()
    n = shear.flow.n
    series = [Series("energy E(t) / E(0)", t, energy / energy[0]),
              Series("enstrophy Z(t) / Z(0)", t, enstrophy / enstrophy[0])]  # fmt: skip
    title = f"double shear layer, {n}x{n}: energy and enstrophy"
    shear_chart = chart(folder / "spectral_shear_energy.svg", series, title, "time t", "relative to t = 0")
    field = write_field_svg(folder / "spectral_shear_vorticity.svg", shear.vorticity(),
                            f"double shear layer, {n}x{n}: vorticity at t = {t[-1]:.3g}", "ω")  # fmt: skip
    print(f"pictures: {tg_chart}, {shear_chart}, {field}")
