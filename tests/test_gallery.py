"""The gallery's entries (``examples/gallery/``) run at their ``--quick`` sizes,
pass their validations against references nobody here wrote, and say so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

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
    assert _checks(text) == 19  # stencil, csr, cooperative, shared: iterations, solution, residual, exact; ops: 3
    for version in ("stencil", "csr", "cooperative", "shared", "ops"):
        assert f"6x6 {version}: iterations against scipy's (relative)" in text
    assert "<polyline" in (tmp_path / "cg_residual_6.svg").read_text()
    assert (tmp_path / "cg_solution_6.png").read_bytes()[:4] == b"\x89PNG"


def test_cg_kernels_loop_when_the_grid_has_more_points_than_their_blocks_threads():
    # 12 x 12 points, at most MAX_BLOCKS (4) blocks of 32 threads on the simulator: threads take several
    text = _run("cg.py", "--quick", "--n", "12", "--only", "stencil", "csr")
    assert _checks(text) == 8 and "12x12 csr: iterations against scipy's (relative)" in text


@pytest.mark.parametrize("matrix", ["stencil", "csr"])
def test_cg_kernels_do_four_iterations_a_pass_as_one_a_pass(monkeypatch, matrix):
    # the iterations after convergence return at once: the same count, iterates and residuals (to the
    # rounding of the atomic adds, whose order moves from run to run)
    cg = _entry("cg")
    problem, got = cg.Poisson(9), {}
    for per_pass in (1, cg.PER_PASS):
        monkeypatch.setattr(cg, "PER_PASS", per_pass)
        solver = cg.KernelCG(problem, matrix)
        solver.solve()
        got[per_pass] = (*solver.result(), solver.residuals())
    (x1, n1, r1), (x4, n4, r4) = got.values()
    assert n1 == n4 == cg.scipy_cg(problem)[1] and n4 % cg.PER_PASS  # it converged inside a pass
    np.testing.assert_allclose(x4, x1, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(r4, r1, rtol=1e-6, atol=1e-14)  # the last is rounding (1.7e-16 of the first)


@pytest.mark.parametrize("version", ["CooperativeCG", "SharedCG"])
@pytest.mark.parametrize("n", [9, 12])
def test_cg_cooperative_passes_end_inside_a_pass_as_one_a_pass(monkeypatch, n, version):
    # on the simulator a cooperative grid is one block of 32 threads: in registers, 81 and 144 points take
    # 4 and 8 a thread; in shared memory, one band of every row, 3 and 5 a thread. A pass of one iteration
    # and one of 32 give the same iterations, iterates and residuals
    cg = _entry("cg")
    problem, got = cg.Poisson(n), {}
    for per_pass in (1, cg.COOPERATIVE_PER_PASS):
        monkeypatch.setattr(cg, "COOPERATIVE_PER_PASS", per_pass)
        solver = getattr(cg, version)(problem)
        solver.solve()
        got[per_pass] = (*solver.result(), solver.residuals())
    (x1, n1, r1), (xp, n_p, rp) = got.values()
    assert n1 == n_p == cg.scipy_cg(problem)[1] and n_p % cg.COOPERATIVE_PER_PASS  # it converged inside a pass
    np.testing.assert_allclose(xp, x1, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(rp, r1, rtol=1e-6, atol=1e-14)
    np.testing.assert_allclose(x1.reshape(n, n), problem.exact, rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [24, 100])
def test_cg_shared_memory_bands_swap_their_edge_rows(n):
    # several blocks (24: two, the second of 2 rows; 100: 17 of 6 rows, the last of 4): the halo rows
    # come through the edges; the answer and the iterations are SciPy's
    cg = _entry("cg")
    problem = cg.Poisson(n)
    solver = cg.SharedCG(problem)
    assert solver.blocks > 1
    solver.solve()
    x, iters = solver.result()
    x_ref, iters_ref, _ = cg.scipy_cg(problem)
    assert abs(iters - iters_ref) <= 0.02 * iters_ref
    np.testing.assert_allclose(x, x_ref, rtol=0, atol=1e-6 * np.abs(x_ref).max())


def test_cavity_steps_match_numpy_in_both_versions(tmp_path):
    text = _run("cavity.py", "--quick", "--plot", "--pictures", str(tmp_path))
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


def test_ising_kernel_matches_exact_enumeration():
    text = _run("ising.py", "--quick", "--only", "kernel")
    assert _checks(text) == 2  # <|m|> at T = 2 and 3 on 4x4, against all 2^16 states


def test_ising_ops_version_matches_exact_enumeration():
    """Fewer sweeps: ``tp.rand`` and the reductions run a Python thread per element on the simulator."""
    text = _run("ising.py", "--quick", "--only", "ops", "--sweeps", "24", "--temperatures", "3")
    assert _checks(text) == 1


def test_ising_references():
    """Onsager-Yang's magnetisation and the exact moments of small lattices, checked by hand."""
    sys.path.insert(0, str(GALLERY))
    try:
        import ising
    finally:
        sys.path.remove(str(GALLERY))
    assert ising.TC == pytest.approx(2.269185314213022)
    assert ising.onsager(ising.TC + 0.01) == 0.0 and ising.onsager(1.0) == pytest.approx(0.99927, abs=1e-5)
    # the 2x2 torus: each bond counted twice, energies -8 (all equal, 2 states), +8 (2 checkerboards), 0 (12 others)
    t = 2.0
    w = {-8: 2 * np.exp(8 / t), 8: 2 * np.exp(-8 / t), 0: 12.0}
    m_abs = (w[-8] * 1 + 8 * 0.5) / sum(w.values())  # |m| = 1 (all equal), 1/2 (the 8 with one spin flipped)
    assert ising.exact_moments(2, [t])[0, 0] == pytest.approx(m_abs)
    assert ising.crossing([1.0, 2.0, 3.0], np.array([0.5, 0.5, 0.5]), np.array([0.7, 0.5, 0.3])) == pytest.approx(2.0)


def test_nbody_kernel_against_numpy_and_kepler(tmp_path):
    text = _run("nbody.py", "--quick", "--only", "kernel", "--plot", "--pictures", str(tmp_path))
    assert _checks(text) == 5  # start accelerations, energy, NumPy's leapfrog; the pair: Kepler, NumPy's crossing
    assert "<polyline" in (tmp_path / "nbody_orbit.svg").read_text()


def test_nbody_tiles_in_shared_memory():
    """The GPU's tiled kernel, which the simulator otherwise replaces by the same sum read from global memory."""
    text = _run(
        "nbody.py", "--quick", "--only", "kernel", "--shared-tiles", "--n", "8", "--steps", "2", "--orbits", "0"
    )
    assert _checks(text) == 3


def test_nbody_ops_version_against_numpy():
    """Four bodies: the simulator runs the fused N x N x 3 reductions a Python thread per element."""
    text = _run("nbody.py", "--quick", "--only", "ops", "--n", "4", "--steps", "1")
    assert _checks(text) == 3


def test_dopri_takes_scipys_steps(tmp_path):
    text = _run("dopri.py", "--quick", "--only", "kernel", "--plot", "--pictures", str(tmp_path))
    assert _checks(text) == 14  # per system: accepted, rejected, end states, 4 trajectories alone
    assert "lorenz kernel: accepted steps (got 54, expected 54)" in text
    assert "<polyline" in (tmp_path / "dopri_vdp_steps.svg").read_text()


def test_dopri_kernels_do_four_attempts_a_pass_as_one_a_pass(monkeypatch):
    # the attempts after the end return at once and their if/else bodies do nothing: the same counts,
    # end states and path
    dopri = _entry("dopri")
    base = dopri.SYSTEMS["vdp"]
    system = dopri.System(base.name, base.dim, base.device, base.numpy, 0.5)
    y0, p = system.ensemble(6)
    got = {}
    for per_pass in (1, dopri.PER_PASS):
        monkeypatch.setattr(dopri, "PER_PASS", per_pass)
        solver = dopri.KernelDopri(system, y0, p, 1e-4, 1e-6, 1e-9)
        solver.solve()
        got[per_pass] = (*solver.result(), solver.steps())
    (y1, a1, r1, path1), (y4, a4, r4, path4) = got.values()
    assert (a4, r4) == (a1, r1) == dopri.scipy_ensemble(system, y0, p, 1e-4, 1e-6, 1e-9)[1:]
    assert (a4 + r4) % dopri.PER_PASS  # it ended inside a pass
    np.testing.assert_allclose(y4, y1, rtol=1e-13)
    np.testing.assert_allclose(path4, path1, rtol=1e-13)


def test_dopri_ops_version_takes_scipys_steps():
    text = _run("dopri.py", "--quick", "--only", "ops", "--system", "vdp", "--t-end", "0.5")
    assert _checks(text) == 3


def test_transport_tallies_match_numpy_and_the_rod_model(tmp_path):
    text = _run("transport.py", "--quick", "--only", "kernel", "--plot", "--pictures", str(tmp_path))
    assert _checks(text) == 5  # all tallied, three shares against the exact ones, NumPy's histories
    assert "<circle" in (tmp_path / "transport_shares.svg").read_text()


def test_transport_ops_version_against_the_rod_model():
    text = _run("transport.py", "--quick", "--only", "ops", "--particles", "32")
    assert _checks(text) == 4


def _entry(name: str):
    sys.path.insert(0, str(GALLERY))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(GALLERY))


@pytest.mark.parametrize("name", ["cg", "ising", "transport"])
def test_the_gpus_block_sums_on_the_simulator(name):
    """Each entry's ``shared_block_sum`` (shared memory and barriers: what its
    kernels use on the GPU, where the simulator adds per thread instead), in a
    kernel of two blocks, against the plain sum."""
    entry = _entry(name)
    block = entry.BLOCK if isinstance(entry.BLOCK, tuple) else (entry.BLOCK,)
    threads = int(np.prod(block))
    dtype = tp.float64 if name == "cg" else tp.int64
    values = tp.tensor(np.arange(2 * threads) - 5, dtype=dtype)
    total, block_sum = tp.zeros(2, dtype=dtype), entry.shared_block_sum

    @tp.jit
    def add_up(values, total):
        t = cuda.threadIdx.x + cuda.blockDim.x * cuda.threadIdx.y
        block_sum(values[cuda.blockIdx.x * threads + t], total, 1)

    add_up[2, block](values, total)
    assert total.tolist() == [0, (2 * threads - 1) * threads - 10 * threads]


def test_dopris_block_sum_tells_one_thread_that_every_block_is_in():
    """dopri's ``shared_block_sum`` (the GPU's) in a kernel of three blocks:
    the sum, and True on exactly one thread, which then reads the whole sum."""
    dopri = _entry("dopri")
    threads = dopri.BLOCK
    values = tp.tensor(np.arange(3 * threads) - 5.0)
    total, ticket, seen = tp.zeros(2, dtype=tp.float64), tp.zeros(1, dtype=tp.int32), tp.zeros(2, dtype=tp.float64)
    block_sum = dopri.shared_block_sum

    @tp.jit
    def add_up(values, total, ticket, seen):
        if block_sum(values[cuda.grid(1)], total, 1, ticket):
            seen[0] += 1.0
            seen[1] = cuda.atomic.add(total, 1, 0.0)

    add_up[3, threads](values, total, ticket, seen)
    whole = float((np.arange(3 * threads) - 5.0).sum())
    assert total.tolist() == [0.0, whole] and seen.tolist() == [1.0, whole] and ticket.item() == 3


def test_the_cupy_versions_on_numpy():
    """``benchmarks/gallery_cupy.py`` takes its array module: with NumPy, its
    algorithms against the entries' references, at tiny sizes."""
    from benchmarks import gallery_cupy as gc

    cg, cavity, nbody, dopri, transport = (_entry(n) for n in ("cg", "cavity", "nbody", "dopri", "transport"))
    problem = cg.Poisson(7)
    x_ref, iters, _ = cg.scipy_cg(problem)
    (x, got) = gc.cg(np, problem.b, cg.TOL**2 * float(np.sum(problem.b**2)), 200)
    assert got == iters and np.abs(x["x"].ravel() - x_ref).max() < 1e-12
    b = problem.b  # the iteration that cg_graph captures, run on the host
    x, r, p, rr, rr_new = np.zeros_like(b), b.copy(), b.copy(), np.array([np.vdot(b, b)]), np.zeros(1)
    steps = 0
    while rr[0] > cg.TOL**2 * float(np.sum(b**2)) and steps < 200:
        gc.cg_iteration(np, x, r, p, rr, rr_new)
        steps += 1
    assert steps == iters and np.abs(x.ravel() - x_ref).max() < 1e-12
    sim = cavity.Cavity(6, 10)
    u, _ = gc.cavity(np, sim.at_rest(), sim.omega, cavity.U, 5)
    assert np.abs(u["u"] - cavity.numpy_steps(sim, 5)).max() < 1e-13
    bodies = nbody.plummer(6, 0.01)
    state, _ = gc.nbody(np, bodies.m, bodies.x, bodies.v, 1e-3, 1e-4, 3)
    assert np.abs(state["x"] - nbody.numpy_leapfrog(bodies, 1e-3, 3)[0]).max() < 1e-14
    system = dopri.SYSTEMS["vdp"]
    y0, p = system.ensemble(4)
    system = dopri.System(system.name, system.dim, system.device, system.numpy, 1.0)
    y_ref, accepted, rejected = dopri.scipy_ensemble(system, y0, p, 1e-4, 1e-6, 1e-9)
    y, _ = gc.dopri(np, False, y0, p, 1e-4, 1e-6, 1e-9, 1.0, dopri.C, dopri.A, dopri.B, dopri.E)
    assert list(y["counts"]) == [accepted, rejected] and np.abs(y["y"] - y_ref).max() < 1e-12
    ising = _entry("ising")
    moments, _ = gc.ising(np, np.ones((1, 4, 4), np.int32), np.array([1 / 3.0]), 3000, 300, 1)
    assert abs(moments["moments"][0, 0] - ising.exact_moments(4, [3.0])[0, 0]) < 0.03
    tallies, _ = gc.transport(np, 20000, 2.0, 0.8, 1)
    exact = np.array(transport.Slab(2.0, 0.8).exact())
    assert np.allclose(gc.rod_model(2.0, 0.8), exact)
    assert (np.abs(tallies["tallies"] / 20000 - exact) < 4 * np.sqrt(exact * (1 - exact) / 20000)).all()


def test_the_jax_version_of_cg(tmp_path):
    """``benchmarks/gallery_jax.py`` (where JAX is installed; on the CPU here) against SciPy."""
    pytest.importorskip("jax")
    cg = _entry("cg")
    problem = cg.Poisson(7)
    x_ref, iters, _ = cg.scipy_cg(problem)
    stop = cg.TOL**2 * float(np.sum(problem.b**2))
    np.savez(tmp_path / "in.npz", b=problem.b, stop=stop, max_iters=200)
    root = GALLERY.parent.parent
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    done = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "gallery_jax.py"), "cg", str(tmp_path / "in.npz"),
         str(tmp_path / "out.npz")], capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["steps"] == iters
    assert np.abs(np.load(tmp_path / "out.npz")["x"].ravel() - x_ref).max() < 1e-12


@pytest.mark.gpu_compile
def test_every_kernel_compiles_for_the_gpu():
    """``scripts/gallery-compile``: each entry's kernels, as the GPU compiles them
    (block sums in shared memory, tiles), to PTX for compute capability 9.0."""
    root = GALLERY.parent.parent
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "TENSORPLAY_BACKEND")}
    done = subprocess.run(
        [sys.executable, str(root / "scripts" / "gallery-compile")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if done.returncode == 3:
        pytest.skip(done.stdout.strip())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    compiled = [line for line in done.stdout.splitlines() if line.startswith("ok ")]
    assert done.stdout.strip().endswith("all kernels compiled") and len(compiled) >= 22


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
