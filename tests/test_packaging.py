"""What a new user meets: the package's metadata (licence, classifiers, the
demo's command), the lowest dependency versions CI tests, the demo run from
outside the repository, and importing ``numba.cuda`` before tensorplay."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None


@pytest.fixture(scope="module")
def project() -> dict:
    if tomllib is None:
        pytest.skip("tomllib is Python 3.11's")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_wheel_carries_a_licence_classifiers_and_the_demos_command(project):
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")
    classifiers = set(project["classifiers"])
    assert {
        "Programming Language :: Python :: 3",
        "Typing :: Typed",
        "Operating System :: POSIX :: Linux",
    } <= classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # the licence expression says it
    assert project["scripts"] == {"tensorplay-heat": "tensorplay.examples.heat:main"}


def test_ci_tests_the_lowest_version_each_dependency_allows(project):
    """``.ci/lowest.txt`` pins every runtime dependency at the lower bound of its
    requirement in pyproject.toml: the lowest versions the metadata allows."""
    pins = {}
    for line in (ROOT / ".ci" / "lowest.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            req = Requirement(line)
            pins[req.name.lower().replace("_", "-")] = str(req.specifier)
    wanted = {}
    for text in project["dependencies"]:
        req = Requirement(text)
        lower = [s.version for s in req.specifier if s.operator == ">="]
        assert lower, f"{text}: expected a lower bound (>=) that CI can test"
        wanted[req.name.lower().replace("_", "-")] = f"=={lower[0]}"
    assert pins == wanted


def test_the_numpy_bound_is_above_the_versions_that_break_the_simulator(project):
    (numpy,) = [Requirement(t) for t in project["dependencies"] if t.startswith("numpy")]
    for broken in ("1.24.4", "1.26.4", "2.0.2", "2.1.0", "2.1.1", "2.2.4"):
        assert broken not in numpy.specifier
    assert "2.2.5" in numpy.specifier and "2.4.6" in numpy.specifier


def _python(code: str, cwd, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "PYTHONPATH")} | env
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=environ, capture_output=True, text=True, timeout=300
    )


@pytest.mark.skipif(os.environ.get("TENSORPLAY_BACKEND") == "cuda", reason="the simulator's import order")
def test_numba_cuda_imported_first_is_refused_with_what_to_do(tmp_path):
    done = _python(
        """
        import numba.cuda
        import tensorplay as tp
        tp.ones(2)
        """,
        tmp_path,
        TENSORPLAY_BACKEND="sim",
    )
    assert done.returncode != 0
    assert "numba.cuda was imported before tensorplay without it; import tensorplay first" in done.stderr


@pytest.mark.skipif(os.environ.get("TENSORPLAY_BACKEND") == "cuda", reason="the simulator's import order")
@pytest.mark.parametrize("order", ["tensorplay first", "NUMBA_ENABLE_CUDASIM=1"])
def test_the_readmes_two_ways_to_have_numba_cuda_and_tensorplay(tmp_path, order):
    first, second = ("import tensorplay as tp", "from numba import cuda") if order == "tensorplay first" else (
        "from numba import cuda", "import tensorplay as tp")  # fmt: skip
    env = {"TENSORPLAY_BACKEND": "sim"} | ({"NUMBA_ENABLE_CUDASIM": "1"} if order != "tensorplay first" else {})
    done = _python(
        f"""
        {first}
        {second}

        @cuda.jit
        def double(x):
            i = cuda.grid(1)
            if i < x.size:
                x[i] *= 2

        x = tp.ones(4)
        double[1, 4, tp.cuda.current_stream()](x)
        print(x.tolist())
        """,
        tmp_path,
        **env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[2.0, 2.0, 2.0, 2.0]"


def test_the_demo_runs_from_the_installed_package_outside_the_repository(tmp_path):
    """``python -m tensorplay.examples.heat``, in a folder with no repository
    around: the demo and its pictures ship in the package."""
    try:
        importlib.metadata.distribution("tensorplay")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("tensorplay is not installed here (it runs from PYTHONPATH): pip install -e . to check this")
    done = subprocess.run(
        [sys.executable, "-m", "tensorplay.examples.heat", "--n", "6", "--tol", "1e-2", "--max-iters", "40",
         "--dot", "heat.dot", "--pictures", "heat"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "converged in" in done.stdout
    assert {p.name for p in tmp_path.iterdir()} >= {"heat.dot", "heat.svg", "heat_field.png", "heat_residual.svg"}
