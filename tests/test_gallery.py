"""The gallery's entries (``examples/gallery/``) run at their ``--quick`` sizes,
pass their validations against references nobody here wrote, and say so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tensorplay as tp

GALLERY = Path(__file__).resolve().parent.parent / "examples" / "gallery"


def _run(script: str, *args: str, ok: bool = True) -> str:
    env = dict(os.environ, TENSORPLAY_BACKEND=tp.cuda.backend())
    out = subprocess.run(
        [sys.executable, str(GALLERY / script), *args], capture_output=True, text=True, env=env, timeout=600
    )
    assert (out.returncode == 0) == ok, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def _checks(text: str) -> int:
    """The number of checks an entry's last line says passed."""
    last = text.strip().splitlines()[-1]
    assert last.startswith("all ") and last.endswith(" checks passed"), last
    return int(last.split()[1])


def test_cg_matches_scipy_in_every_version(tmp_path):
    text = _run("cg.py", "--quick", "--plot", "--pictures", str(tmp_path))
    assert _checks(text) == 11  # stencil, csr: iterations, solution, residual, exact; ops: the first three
    for version in ("stencil", "csr", "ops"):
        assert f"6x6 {version}: iterations against scipy's (relative)" in text
    assert "<polyline" in (tmp_path / "cg_residual_6.svg").read_text()
    assert (tmp_path / "cg_solution_6.png").read_bytes()[:4] == b"\x89PNG"


def test_cg_block_sums_in_shared_memory():
    """The GPU's block sums (shared memory and barriers), which the simulator
    otherwise replaces by an atomic add per thread."""
    text = _run("cg.py", "--quick", "--n", "5", "--shared-sums", "--only", "stencil", "csr")
    assert _checks(text) == 8


def test_cavity_steps_match_numpy_in_both_versions(tmp_path):
    text = _run("cavity.py", "--quick", "--ops", "--plot", "--pictures", str(tmp_path))
    assert _checks(text) == 4  # kernel and ops: the velocity against NumPy's, the mass
    assert "Re 10 ops: velocity / U against NumPy's after 24 steps" in text
    assert "<polyline" in (tmp_path / "cavity_re10_u.svg").read_text()
    assert (tmp_path / "cavity_re10_speed.png").read_bytes()[:4] == b"\x89PNG"


def test_cavity_ghia_tables_as_published():
    """Spot checks of the tables typed in from Ghia, Ghia & Shin (1982), and the
    deviation measured from them: Table I's centre value, Table II's extremes."""
    sys.path.insert(0, str(GALLERY))
    try:
        import cavity
    finally:
        sys.path.remove(str(GALLERY))
    assert len(cavity.GHIA_Y) == len(cavity.GHIA_X) == 17
    assert all(len(t) == 17 for t in (*cavity.GHIA_U.values(), *cavity.GHIA_V.values()))
    assert cavity.GHIA_U[100][8] == -0.20581 and cavity.GHIA_U[1000][11] == -0.38289
    assert min(cavity.GHIA_V[1000]) == -0.51550 and max(cavity.GHIA_V[100]) == 0.17527
    n = 129  # a field made of the tables themselves deviates from them only by interpolation
    pos = (np.arange(n) + 0.5) / n
    u = np.zeros((2, n, n))
    u[0] = np.interp(pos, cavity.GHIA_Y[::-1], cavity.GHIA_U[100][::-1])[:, None]
    u[1] = np.interp(pos, cavity.GHIA_X[::-1], cavity.GHIA_V[100][::-1])[None, :]
    du, dv = cavity.ghia_deviation(u, 100)
    assert du < 0.01 and dv < 0.01


def test_a_failed_check_is_the_exit_status_and_the_last_line():
    from importlib import util

    spec = util.spec_from_file_location("gallery_validation", GALLERY / "validation.py")
    validation = sys.modules[spec.name] = util.module_from_spec(spec)  # its dataclass looks itself up there
    spec.loader.exec_module(validation)
    v = validation.Validation("demo")
    v.at_most("an error", 2.0, 1.0)
    v.at_most("a nan", float("nan"), 1.0)
    lines = []
    assert v.report(out=lines.append) == 1
    assert lines[-1] == "FAILED: 2 of 2 checks"
    with pytest.raises(ValueError, match="^demo: expected at least one check"):
        validation.Validation("demo").report()
