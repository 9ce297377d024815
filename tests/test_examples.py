"""The README's examples run (at tiny sizes) and say what they promise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.examples.plots import layout

ROOT = Path(__file__).resolve().parent.parent


def _run(script: str, *args: str) -> str:
    env = dict(os.environ, TENSORPLAY_BACKEND=tp.cuda.backend())
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), *args], capture_output=True, text=True, env=env, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_heat_demo_converges_like_numpy(tmp_path):
    dot = tmp_path / "heat.dot"
    pictures = str(tmp_path / "heat")
    text = _run("heat.py", "--n", "6", "--tol", "1e-2", "--max-iters", "50", "--dot", str(dot), "--pictures", pictures)
    assert "converged in" in text
    iters = int(text.split("converged in ")[1].split()[0])
    assert f"NumPy float64 reference: {iters} iterations" in text
    assert "while node, one launch (fused by tp.compile)" in text
    assert "conditional" in dot.read_text()
    svg = (tmp_path / "heat.svg").read_text()  # drawn with or without Graphviz
    assert svg.lstrip().startswith(("<svg", "<?xml")) and "jacobi_sweep" in svg
    rgb = _read_png(tmp_path / "heat_field.png")
    where = layout(np.zeros((6, 6)))  # where the field, its axes and its colour scale lie (the width aside)
    assert where.field_h == where.field_w >= 256  # 6 x 6 points, each a square of pixels
    assert rgb.shape[0] == where.height and rgb.shape[1] > where.bar_left > where.left + where.field_w
    middle = where.left + where.field_w // 2
    assert tuple(rgb[where.top, middle]) == (252, 255, 164)  # the top edge, held at 1: the brightest colour
    assert tuple(rgb[where.top + where.field_h - 1, middle]) == (0, 0, 4)  # the bottom edge, at 0: the darkest
    assert tuple(rgb[where.top, where.bar_left + 2]) == (252, 255, 164)  # the colour scale, brightest on top
    assert tuple(rgb[where.top - 1, middle]) == (0, 0, 0) and tuple(rgb[0, 0]) == (255, 255, 255)  # framed
    curve = (tmp_path / "heat_residual.svg").read_text()
    assert "<polyline" in curve and f"iteration (of {iters})" in curve  # one point per iteration
    assert "largest change (log scale)" in curve and curve.count('stroke="#dddddd"') >= 2  # a tick per decade


def _read_png(path) -> np.ndarray:
    """The pixels of an 8-bit RGB PNG without filters (what tensorplay/examples/plots.py writes)."""
    import struct
    import zlib

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", data[16:24])
    chunks, pos = b"", 8
    while pos < len(data):
        (n,), tag = struct.unpack(">I", data[pos : pos + 4]), data[pos + 4 : pos + 8]
        if tag == b"IDAT":
            chunks += data[pos + 8 : pos + 8 + n]
        pos += 12 + n
    rows = np.frombuffer(zlib.decompress(chunks), dtype=np.uint8).reshape(h, 1 + 3 * w)
    assert not rows[:, 0].any()  # filter type 0 on every row
    return rows[:, 1:].reshape(h, w, 3)


def test_quickstart():
    text = _run("quickstart.py")
    assert "matches NumPy: True" in text
    assert "saxpy on a side stream, sum: 1000000.0 expected: 1000000.0" in text


def test_the_notebook_runs_in_a_jupyter_kernel_and_shows_its_pictures(tmp_path):
    """Every cell in a real kernel (the test extra brings nbclient and
    ipykernel), then one more that prints what the cells computed. The kernel
    runs in a folder outside the repository, as a copied notebook would: it
    needs nothing but an installed tensorplay."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(ROOT / "notebooks" / "graphs_tour.ipynb", as_version=4)
    check = "steps.item(), y.item(), loop.iterations.item(), loop.hit_limit, tp.cuda.is_current_stream_capturing()"
    notebook.cells.append(nbformat.v4.new_code_cell(f"print({check})"))
    client = nbclient.NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TENSORPLAY_BACKEND", tp.cuda.backend())  # the kernel's process inherits it
        client.execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    shown = {kind for o in outputs for kind in o.get("data", {})}
    assert {"image/svg+xml", "image/png"} <= shown  # the graph and the residual (SVG), the heat field (PNG)
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "two operations touch the same memory with nothing ordering them" in printed  # the race cell's report
    assert "gallery validation passed" in printed  # one gallery entry, from this clone
    steps, y, passes, hit_limit, capturing = notebook.cells[-1].outputs[0]["text"].split()
    assert int(float(steps)) > 0
    assert float(y) == (0.0 + 1.0) * 100.0 + 5 * 0.5  # then-body, case 1, five capped passes
    assert (passes, hit_limit, capturing) == ("5", "True", "False")
