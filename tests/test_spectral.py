"""The spectral example (``examples/spectral.py``): 2-D Navier-Stokes in one
while node, its ``--quick`` run passing its checks against the exact
Taylor-Green vortex, the energy budget and NumPy; the tensor-ops version
against NumPy; its kernels compiled for a real GPU."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tensorplay as tp

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SCRIPT = EXAMPLES / "spectral.py"


def _run(*args: str, ok: bool = True) -> str:
    env = dict(os.environ, TENSORPLAY_BACKEND=tp.cuda.backend())
    out = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=600)
    assert (out.returncode == 0) == ok, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def _passed(text: str) -> int:
    last = text.strip().splitlines()[-1]
    assert last.startswith("all ") and last.endswith(" checks passed"), last
    return int(last.split()[1])


@pytest.fixture(scope="module")
def spectral():
    """The example as a module (its folder and the gallery's hold its helpers)."""
    for folder in (EXAMPLES, EXAMPLES / "gallery"):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("tensorplay_example_spectral", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def test_quick_run_passes_its_checks_and_draws(tmp_path):
    text = _run("--quick", "--only", "kernel", "--plot", "--pictures", str(tmp_path))
    assert _passed(text) == 11  # Taylor-Green: steps x2, ω, E, Z, order, velocity; shear: budget, E, Z, NumPy
    assert "kernel: Taylor-Green: ω at t = 1 against the exact solution (max, relative)" in text
    assert "kernel: shear layer: ω against NumPy's float64 run of the method (max, relative)" in text
    field = (tmp_path / "spectral_shear_vorticity.svg").read_text()
    assert "data:image/png;base64," in field and ">ω</text>" in field and ">2π</text>" in field
    for chart in ("spectral_tg_energy.svg", "spectral_shear_energy.svg"):
        svg = (tmp_path / chart).read_text()
        assert "<polyline" in svg and ">time t</text>" in svg


def test_a_failed_check_fails_the_run():
    """Four steps for the shear layer: too coarse in time for its energy budget."""
    text = _run("--quick", "--only", "kernel", "--steps", "4", ok=False)
    assert "energy budget" in text and text.strip().endswith("FAILED: 1 of 11 checks")


def test_ops_version_matches_numpy(spectral):
    flow = spectral.shear_layer(16, 30.0, 0.05, 2 * np.pi * 1e-4, 0.1, 3)
    solver = spectral.OpsSolver(flow, "float64", every=1)
    solver.capture()
    solver.solve()
    ref = spectral.numpy_run(flow)
    assert solver.steps_done() == 3
    np.testing.assert_allclose(solver.vorticity(), ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    t, energy, enstrophy = solver.history()
    assert t.tolist() == pytest.approx([0.0, 0.1, 0.2, 0.3]) and np.all(np.diff(energy) < 0)
    assert np.all(np.diff(enstrophy) < 0)


def test_kernel_version_records_every_k_steps(spectral):
    """Five steps, a record every two: rows at steps 0, 2 and 4, each E as NumPy's."""
    flow = spectral.taylor_green(8, 1, 0.1, 0.05, 5, 0.0, 0.0)
    solver = spectral.Solver(flow, "float64", every=2)
    solver.capture()
    solver.solve()
    t, energy, _ = solver.history()
    assert solver.steps_done() == 5 and t.tolist() == pytest.approx([0.0, 0.1, 0.2])
    np.testing.assert_allclose(energy, 0.25 * np.exp(-4 * 0.1 * t), rtol=1e-12)


def test_solver_refuses_odd_grids_and_no_steps(spectral):
    with pytest.raises(ValueError, match="expected an even grid size of 8 or more, got 15"):
        spectral.Solver(spectral.taylor_green(15, 1, 0.1, 0.1, 2, 0.0, 0.0), "float64")
    with pytest.raises(ValueError, match="expected steps >= 1 and every >= 0, got 0 and 1"):
        spectral.Solver(spectral.taylor_green(8, 1, 0.1, 0.1, 0, 0.0, 0.0), "float64")
    solver = spectral.Solver(spectral.taylor_green(8, 1, 0.1, 0.1, 2, 0.0, 0.0), "float64")
    with pytest.raises(RuntimeError, match=r"solve\(\) before capture\(\): call capture\(\) once first"):
        solver.solve()


def test_simpson_integral(spectral):
    x = np.linspace(0.0, 1.0, 9)
    assert spectral.integral(x**3, x[1]) == pytest.approx(0.25, abs=1e-15)  # exact for cubics
    x = np.linspace(0.0, 1.0, 6)  # an odd number of intervals: the trapezoid on the last
    assert spectral.integral(np.exp(x), x[1]) == pytest.approx(np.e - 1, rel=2e-3)


PTX_CHECK = textwrap.dedent(
    """
    import math, os, sys, types
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        load_nvidia_dynamic_lib("nvrtc")
        load_nvidia_dynamic_lib("nvvm")
    except Exception as e:
        print(f"NVRTC or NVVM not found: {e}")
        sys.exit(3)
    import numpy as np
    import numba.cuda.dispatcher
    from numba import cuda, float64
    from numba.cuda import types as nt

    numba.cuda.dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=(9, 0))
    source = open(sys.argv[1]).read()
    kernels = source[source.index("# -- the kernels"):source.index("# -- the solver")]
    tp, tp_cuda = types.ModuleType("tp"), types.ModuleType("tp.cuda")
    tp.jit, tp.cuda, tp_cuda.grid = (lambda f: f), tp_cuda, cuda.grid
    tp_cuda.set_conditional = cuda.declare_device("tp_set_conditional", "int32(uint64, uint32)")
    ns = dict(tp=tp, cuda=cuda, float64=float64, np=np, math=math, SUM_BLOCK=256, GPU=True)
    exec(compile(kernels, sys.argv[1], "exec"), ns)
    a = lambda dtype, ndim: nt.Array(dtype, ndim, "C")
    failed = 0
    for real, cplx in ((nt.float64, nt.complex128), (nt.float32, nt.complex64)):
        for name, sig in {
            "prepare": (a(cplx, 2), a(cplx, 3), nt.float64),
            "advect": (a(real, 3), a(real, 2), nt.float64, nt.float64),
            "advance": (a(cplx, 2), a(cplx, 2), a(cplx, 2), a(cplx, 3), nt.int64, nt.float64, nt.float64,
                        nt.float64),
            "tick": (a(nt.int64, 1), nt.int64, nt.uint64),
            "tick_and_record": (a(nt.int64, 1), nt.int64, nt.int64, nt.uint64, nt.uint64),
            "record": (a(cplx, 2), a(nt.float64, 2), a(nt.int64, 1), nt.int64, nt.float64),
        }.items():
            try:
                cuda.compile_ptx(ns[name], sig, cc=(9, 0))
            except Exception as e:
                failed += 1
                print(f"FAILED {name} {cplx}: {type(e).__name__}: {str(e).strip().splitlines()[0]}")
    print(f"{12 - failed} of 12 compiled")
    sys.exit(1 if failed else 0)
    """
)


@pytest.mark.gpu_compile
@pytest.mark.skipif(tp.cuda.backend() != "sim", reason="on a GPU the other tests compile the kernels")
def test_kernels_compile_for_the_gpu():
    """Each kernel of the example, on float64 and float32 fields, compiled to
    PTX for sm_90 as the GPU would (no GPU needed: NVRTC and NVVM)."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run(
        [sys.executable, "-c", PTX_CHECK, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=600
    )
    if out.returncode == 3:
        pytest.skip(out.stdout.strip())
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "12 of 12 compiled" in out.stdout


@pytest.mark.gpu
def test_full_sizes_pass_on_the_gpu(tmp_path):
    """256² on the GPU: the Taylor-Green runs of 256 and 128 steps, the shear layer of 768, both versions."""
    text = _run("--n", "256", "--pictures", str(tmp_path))
    assert _passed(text) == 20  # each version: Taylor-Green 7, the shear layer 3 (no NumPy run at full size)
    assert (tmp_path / "spectral_shear_vorticity.svg").exists()
