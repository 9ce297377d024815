"""The gallery (``examples/gallery/``): each entry's solve, per step of its loop,
tensorplay's version with kernels of its own (``gallery: <entry> ...``) and its
ops-only version (``gallery ops-only: <entry> ...``), next to the same
algorithm in JAX (``benchmarks/gallery_jax.py``: ``lax.while_loop`` under
``jit``, in subprocesses with XLA's defaults, with command buffers for WHILE
and CONDITIONAL, and with those and ``--xla_gpu_graph_min_graph_size=1``;
``jax`` is the fastest) and in CuPy (``benchmarks/gallery_cupy.py``,
in this process: array ops, the loop on the host; for CG also one iteration
replayed as a CuPy graph; ``cupy`` is the faster). Every answer is compared
with tensorplay's before its time counts. Loops that converge run a fixed
amount of work here where the others' stopping rules differ (a tolerance of 0).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import tensorplay as tp
from benchmarks import gallery_cupy
from benchmarks.common import on_gpu, peer
from benchmarks.targets import at_most

ROOT = Path(__file__).resolve().parent.parent
GALLERY = ROOT / "examples" / "gallery"
COMMAND_BUFFERS = "--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUDNN,CUSTOM_CALL,CONDITIONAL,WHILE"
JAX_CONFIGURATIONS = {  # XLA reads its flags once, when JAX starts: a process each
    "jax_xla_defaults": None,
    "jax_command_buffers": COMMAND_BUFFERS,
    "jax_command_buffers_min_graph_size_1": f"{COMMAND_BUFFERS} --xla_gpu_graph_min_graph_size=1",
}


@functools.cache
def _entry(name: str):
    """``examples/gallery/<name>.py`` as a module (its folder holds its helpers)."""
    if str(GALLERY) not in sys.path:
        sys.path.insert(0, str(GALLERY))
    spec = importlib.util.spec_from_file_location(f"tensorplay_gallery_{name}", GALLERY / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def _best(solve, sync, before=None, repeats: int = 3) -> float:
    """Best wall seconds of ``solve()`` and the device work it queues, each after ``before()``."""
    best = float("inf")
    for _ in range(repeats if on_gpu() else 1):
        if before is not None:
            before()
        sync()
        t0 = time.perf_counter()
        solve()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def _tp(solver, steps_of) -> tuple[float, int]:
    """(seconds per step, steps) of a tensorplay solver's ``solve()`` (warmed up once)."""
    solver.solve()
    seconds = _best(solver.solve, tp.cuda.synchronize)
    steps = steps_of(solver)
    return seconds / steps, steps


def _jax(entry: str, inputs: dict) -> dict:
    """``gallery_jax.py`` on ``inputs`` in each of ``JAX_CONFIGURATIONS``:
    {key: (seconds per step, steps, answer) or the reason it failed}."""
    runs = {}
    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "in.npz")
        np.savez(source, **inputs)
        for key, flags in JAX_CONFIGURATIONS.items():
            env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
            if flags:
                env["XLA_FLAGS"] = flags
            target = os.path.join(folder, f"{key}.npz")
            try:
                done = subprocess.run(
                    [sys.executable, str(ROOT / "benchmarks" / "gallery_jax.py"), entry, source, target],
                    env=env, capture_output=True, text=True, timeout=900, check=False,
                )  # fmt: skip
                if done.returncode:
                    runs[key] = (done.stderr.strip().splitlines() or ["exit status"])[-1][:160]
                    continue
                result = json.loads(done.stdout.strip().splitlines()[-1])
                steps = max(result["steps"], 1)
                runs[key] = (result["seconds"] / steps, steps, dict(np.load(target)))
            except Exception as e:  # JAX is a reference: its failure must not cost the section
                runs[key] = f"{type(e).__name__}: {e}"[:160]
    return runs


def _cupy(fn, *args) -> tuple[float, int, dict] | str:
    """(seconds per step, steps, answer on the host) of a ``gallery_cupy`` function, or why not."""
    cp = peer("cupy")
    if cp is None:
        return "CuPy is not installed here"
    try:
        sync = cp.cuda.Device().synchronize
        fn(cp, *args)  # warm-up: kernels compiled
        out = {}

        def solve():
            out["result"] = fn(cp, *args)

        seconds = _best(solve, sync)
        answer, steps = out["result"]
        return (
            seconds / max(steps, 1),
            steps,
            {k: cp.asnumpy(v) if hasattr(v, "device") else v for k, v in answer.items()},
        )
    except Exception as e:  # a reference: its failure is reported in its row
        return f"{type(e).__name__}: {e}"[:160]


def _row(name: str, ours: float, others: dict, compare, note: str, target: float) -> dict:
    """A row: tensorplay's µs per step, each reference's where it ran and its
    answer passed ``compare(answer)`` (None when it did; else why not)."""
    row = {"name": name, "unit": "us", "lower_is_better": True, "tensorplay": ours * 1e6, "note": note}
    for key, run in others.items():
        if isinstance(run, str):
            row[f"{key}_error"] = run
            continue
        per_step, steps, answer = run
        why = compare(answer, steps)
        if why:
            row[f"{key}_error"] = f"answer differs: {why}"[:160]
        else:
            row[key] = per_step * 1e6
    jax = [row[k] for k in JAX_CONFIGURATIONS if row.get(k) is not None]
    row["jax"] = min(jax) if jax else None
    cupy = [row[k] for k in ("cupy_eager", "cupy_graph") if row.get(k) is not None]
    row["cupy"] = min(cupy) if cupy else None
    row["faster_reference"] = min([v for v in (row["jax"], row["cupy"]) if v is not None], default=None)
    at_most(row, target, of="faster_reference", label="the faster of jax and cupy")
    return row


def _close(got, want, tol: float) -> str | None:
    err = float(np.abs(np.asarray(got) - want).max() / max(np.abs(want).max(), 1e-300))
    return None if err <= tol else f"max relative difference {err:.3g} > {tol:g}"


# -- the entries ------------------------------------------------------------------------------


def cg_rows(rows: list, progress) -> None:
    cg = _entry("cg")
    for n in (256, 1024) if on_gpu() else (6,):
        problem = cg.Poisson(n)
        stencil = cg.KernelCG(problem, "stencil")
        per_iter, iters = _tp(stencil, lambda s: s.result()[1])
        x = stencil.result()[0].reshape(n, n)
        csr_per_iter, _ = _tp(cg.KernelCG(problem, "csr"), lambda s: s.result()[1])
        try:
            coop_per_iter, coop_iters = _tp(cg.CooperativeCG(problem), lambda s: s.result()[1])
        except cg.DoesNotFit as e:  # its vectors would not fit in the device's registers
            coop_per_iter, coop_iters, coop_why = None, None, str(e)
        try:
            shared_per_iter, shared_iters = _tp(cg.SharedCG(problem), lambda s: s.result()[1])
        except cg.DoesNotFit as e:  # its bands would not fit in the blocks' shared memory
            shared_per_iter, shared_iters, shared_why = None, None, str(e)
        ops_per_iter, ops_iters = _tp(cg.OpsCG(problem), lambda s: s.result()[1])
        progress.step(f"cg {n} tensorplay")
        stop, cap = cg.TOL**2 * float(np.sum(problem.b**2)), 20 * n + 100
        others = _jax("cg", {"b": problem.b, "stop": stop, "max_iters": cap})
        others["cupy_eager"] = _cupy(gallery_cupy.cg, _device_array(problem.b), stop, cap)
        others["cupy_graph"] = _cupy(gallery_cupy.cg_graph, _device_array(problem.b), stop, cap)
        progress.step(f"cg {n} jax, cupy")

        def compare(answer, steps, x=x, iters=iters):
            if abs(steps - iters) > 0.02 * iters:
                return f"{steps} iterations, tensorplay {iters}"
            return _close(answer["x"], x, 1e-6)

        note = (
            f"{iters} iterations (cooperative {coop_iters}, shared {shared_iters}, ops-only {ops_iters}); "
            f"csr kernel {csr_per_iter * 1e6:.1f} us/iter"
        )
        rows.append(
            _row(f"gallery: cg {n}x{n} float64 (stencil kernels), us/iter", per_iter, others, compare, note, 0.8)
        )
        rows[-1]["tensorplay_csr"] = csr_per_iter * 1e6
        name = f"gallery: cg {n}x{n} float64 (one cooperative kernel a pass), us/iter"
        if coop_per_iter is None:
            rows[-1]["note"] += f"; cooperative version not run: {coop_why}"
        else:
            rows.append(_row(name, coop_per_iter, others, compare, note, 0.8))
        name = f"gallery: cg {n}x{n} float64 (one cooperative kernel a pass, shared memory), us/iter"
        if shared_per_iter is None:
            rows[-1]["note"] += f"; shared-memory version not run: {shared_why}"
        else:
            rows.append(_row(name, shared_per_iter, others, compare, note, 0.8))
        rows.append(_row(f"gallery ops-only: cg {n}x{n} float64, us/iter", ops_per_iter, others, compare, note, 1.0))


def cavity_rows(rows: list, progress) -> None:
    cavity = _entry("cavity")
    n, check, steps = (129, 100, 20_000) if on_gpu() else (8, 4, 8)
    sim = cavity.Cavity(n, 100)
    per_step = {}
    u = {}
    for version, make in (("kernel", cavity.KernelCavity), ("ops", cavity.OpsCavity)):
        solver = make(sim, check, 0.0, steps)  # tolerance 0: exactly ``steps`` steps
        per_step[version], _ = _tp(solver, lambda s: s.result()[1])
        u[version] = solver.result()[0]
    progress.step("cavity tensorplay")
    inputs = {"f": sim.at_rest(), "omega": sim.omega, "lid_speed": cavity.U, "check": check, "tol": 0.0,
              "max_steps": steps}  # fmt: skip
    others = _jax("cavity", inputs)
    others["cupy_eager"] = _cupy(gallery_cupy.cavity, _device_array(sim.at_rest()), sim.omega, cavity.U, steps)
    progress.step("cavity jax, cupy")

    def compare(answer, taken):
        return f"{taken} steps, expected {steps}" if taken != steps else _close(answer["u"], u["kernel"], 1e-9)

    note = f"Re 100, {steps} steps, a check every {check}"
    rows.append(
        _row(f"gallery: cavity LBM D2Q9 {n}x{n} float64, us/step", per_step["kernel"], others, compare, note, 0.8)
    )
    rows.append(_row(f"gallery ops-only: cavity LBM D2Q9 {n}x{n} float64, us/step", per_step["ops"], others,
                     compare, note, 1.0))  # fmt: skip


def ising_rows(rows: list, progress) -> None:
    ising = _entry("ising")
    side, temps, sweeps = (256, [1.5, 1.8, 2.0, 2.1], 2000) if on_gpu() else (4, [2.0, 3.0], 40)
    burn_in = sweeps // 4
    per_sweep, moments = {}, {}
    for version, make in (("kernel", ising.KernelIsing), ("ops", ising.OpsIsing)):
        run = ising.Run(side, list(temps), sweeps, burn_in)
        per_sweep[version], _ = _tp(make(run), lambda s: s.run.sweeps)
        moments[version] = run.moments
    progress.step("ising tensorplay")
    spins = np.ones((len(temps), side, side), np.int32)
    others = _jax("ising", {"spins": spins, "beta": 1.0 / np.array(temps), "sweeps": sweeps, "burn_in": burn_in,
                            "seed": 7})  # fmt: skip
    beta = _device_array(1.0 / np.array(temps))
    others["cupy_eager"] = _cupy(gallery_cupy.ising, _device_array(spins), beta, sweeps, burn_in, 7)
    progress.step("ising jax, cupy")
    onsager = np.array([ising.onsager(t) for t in temps])

    def compare(answer, taken):
        if taken != sweeps:
            return f"{taken} sweeps, expected {sweeps}"
        return _close(answer["moments"][:, 0], onsager, 0.02) if on_gpu() else None

    for version in ("kernel", "ops"):
        why = compare({"moments": moments[version]}, sweeps)
        if why:
            raise AssertionError(f"ising {version}: <|m|> against Onsager-Yang: {why}")
    note = f"{len(temps)} temperatures, {sweeps} sweeps; <|m|> of each within 2 % of Onsager-Yang"
    name = f"ising {side}x{side} x{len(temps)} temperatures"
    rows.append(_row(f"gallery: {name}, us/sweep", per_sweep["kernel"], others, compare, note, 0.8))
    rows.append(_row(f"gallery ops-only: {name}, us/sweep", per_sweep["ops"], others, compare, note, 1.0))


def nbody_rows(rows: list, progress) -> None:
    nbody = _entry("nbody")
    n, steps, dt, eps = (2048, 1000, 1e-3, 0.01) if on_gpu() else (8, 2, 1e-3, 0.01)
    bodies = nbody.plummer(n, eps)
    per_step, state = {}, {}
    for version, make in (("kernel", nbody.KernelNBody), ("ops", nbody.OpsNBody)):
        sim = make(bodies, dt)
        graph = sim.steps_graph(steps)
        sim.reset()
        graph.replay()
        per_step[version] = _best(graph.replay, tp.cuda.synchronize, before=sim.reset) / steps
        state[version] = sim.x.numpy()
    progress.step("nbody tensorplay")
    inputs = {"m": bodies.m, "x": bodies.x, "v": bodies.v, "dt": dt, "eps2": eps * eps, "steps": steps}
    others = _jax("nbody", inputs)
    device = [_device_array(a) for a in (bodies.m, bodies.x, bodies.v)]
    others["cupy_eager"] = _cupy(gallery_cupy.nbody, *device, dt, eps * eps, steps)
    progress.step("nbody jax, cupy")

    def compare(answer, taken):
        return f"{taken} steps, expected {steps}" if taken != steps else _close(answer["x"], state["kernel"], 1e-8)

    note = f"Plummer sphere, {steps} steps of {dt:g}; kernel version with shared-memory tiles"
    rows.append(_row(f"gallery: nbody {n} bodies float64, us/step", per_step["kernel"], others, compare, note, 0.8))
    rows.append(_row(f"gallery ops-only: nbody {n} bodies float64, us/step", per_step["ops"], others, compare, note,
                     1.0))  # fmt: skip


def dopri_rows(rows: list, progress) -> None:
    dopri = _entry("dopri")
    n, t_end = (4096, 10.0) if on_gpu() else (8, 1.0)
    base = dopri.SYSTEMS["vdp"]
    system = dopri.System(base.name, base.dim, base.device, base.numpy, t_end)
    y0, p = system.ensemble(n)
    first, rtol, atol = 1e-4, 1e-6, 1e-9
    per_attempt, answers = {}, {}
    for version, make in (("kernel", dopri.KernelDopri), ("ops", dopri.OpsDopri)):
        solver = make(system, y0, p, first, rtol, atol)
        per_attempt[version], _ = _tp(solver, lambda s: sum(s.result()[1:]))
        answers[version] = solver.result()
    progress.step("dopri tensorplay")
    coefficients = {"C": dopri.C, "A": dopri.A, "B": dopri.B, "E": dopri.E}
    inputs = {"y0": y0, "p": p, "first_step": first, "rtol": rtol, "atol": atol, "t_end": t_end, "lorenz": 0.0,
              **coefficients}  # fmt: skip
    others = _jax("dopri", inputs)
    others["cupy_eager"] = _cupy(gallery_cupy.dopri, False, _device_array(y0), _device_array(p), first, rtol, atol,
                                 t_end, dopri.C, dopri.A, dopri.B, dopri.E)  # fmt: skip
    progress.step("dopri jax, cupy")
    y, accepted, rejected = answers["kernel"]

    def compare(answer, taken):
        if list(answer["counts"]) != [accepted, rejected]:
            return f"{list(answer['counts'])} steps accepted and rejected, tensorplay [{accepted}, {rejected}]"
        return _close(answer["y"], y, 1e-8)

    note = f"Van der Pol, {n} trajectories to t = {t_end:g}: {accepted} accepted, {rejected} rejected"
    rows.append(_row(f"gallery: dopri {n} trajectories float64, us/attempt", per_attempt["kernel"], others, compare,
                     note, 0.8))  # fmt: skip
    rows.append(_row(f"gallery ops-only: dopri {n} trajectories float64, us/attempt", per_attempt["ops"], others,
                     compare, note, 1.0))  # fmt: skip


def transport_rows(rows: list, progress) -> None:
    transport = _entry("transport")
    n = 1 << 20 if on_gpu() else 64
    slab = transport.Slab()
    per_pass, shares = {}, {}
    for version, make in (("kernel", transport.KernelTransport), ("ops", transport.OpsTransport)):
        sim = make(slab, n)
        per_pass[version], _ = _tp(sim, lambda s: s.result()[1])
        shares[version] = sim.result()[0] / n
    progress.step("transport tensorplay")
    others = _jax("transport", {"particles": n, "length": slab.length, "c": slab.c, "seed": 3})
    others["cupy_eager"] = _cupy(gallery_cupy.transport, n, slab.length, slab.c, 3)
    progress.step("transport jax, cupy")
    exact = np.array(gallery_cupy.rod_model(slab.length, slab.c))
    sigma = np.sqrt(exact * (1 - exact) / n)

    def compare(answer, taken):
        off = np.abs(np.asarray(answer["tallies"]) / n - exact) / sigma
        return None if off.max() <= 5 else f"shares {off.max():.1f} standard errors from the exact ones"

    for version in ("kernel", "ops"):
        why = compare({"tallies": shares[version] * n}, 0)
        if why:
            raise AssertionError(f"transport {version}: {why}")
    note = f"{n} particles, L = {slab.length:g}, c = {slab.c:g}; shares within 5 standard errors of the exact ones"
    rows.append(_row(f"gallery: transport {n} particles, us/pass", per_pass["kernel"], others, compare, note, 0.8))
    rows.append(_row(f"gallery ops-only: transport {n} particles, us/pass", per_pass["ops"], others, compare, note,
                     1.0))  # fmt: skip


def _device_array(a: np.ndarray):
    """``a`` on the GPU for CuPy (which the CuPy functions take), or as it is without CuPy."""
    cp = peer("cupy")
    return cp.asarray(a) if cp is not None else a


# GALLERY_ENTRIES="cg cavity" times those entries alone (the whole gallery takes about 8 minutes on an H200,
# most of it JAX's compiles in its three configurations' processes)
_ALL = [
    (cg_rows, 2 * (2 if on_gpu() else 1)), (cavity_rows, 2), (ising_rows, 2), (nbody_rows, 2), (dopri_rows, 2),
    (transport_rows, 2),
]  # fmt: skip
_CHOSEN = os.environ.get("GALLERY_ENTRIES", "").split()
SECTIONS = [(fn, steps) for fn, steps in _ALL if not _CHOSEN or fn.__name__.removesuffix("_rows") in _CHOSEN]
