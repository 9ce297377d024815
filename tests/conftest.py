"""Test-tree configuration: ``@pytest.mark.gpu`` tests are skipped on the simulator.

Select the backend with ``TENSORPLAY_BACKEND=sim|cuda|auto``; shared helpers are in
``tests/helpers`` (``from helpers import assert_close``).

On the simulator the test process is pinned to one CPU (see ``pytest_configure``).
"""

import os

import pytest

if os.environ.get("TENSORPLAY_DRIVER_TRACE"):  # before tensorplay and Numba look up any driver call
    from helpers import driver_trace

    driver_trace.install()

import tensorplay as tp  # noqa: E402


def pytest_configure(config):
    """On the simulator, keep the process on one CPU.

    Numba's simulator runs a Python thread per CUDA thread, and every call of a
    device function (each element of an elementwise kernel calls two or three)
    takes a lock shared by the calling module's functions, while the launching
    thread polls the block's threads in a busy loop. On two or more free cores
    the threads form a convoy on that lock, each hand-over waiting on the GIL
    that the polling thread holds: one launch over 23 040 elements (in
    test_elementwise_on_permuted_layouts) took from 1 s to over 10 minutes from
    run to run. On one core it takes under 1 s every time, and the simulated
    threads never ran in parallel anyway (the GIL). Threads inherit the
    affinity, so this runs before any is started; pytest-xdist workers take a
    CPU each, in turn.
    """
    if tp.cuda.backend() != "sim" or not hasattr(os, "sched_setaffinity"):
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ...
    if not worker and getattr(config.option, "numprocesses", None):
        return  # pytest-xdist's controller runs no test: its workers, started from it, must find every CPU
    cpus = sorted(os.sched_getaffinity(0))
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    os.sched_setaffinity(0, {cpus[index % len(cpus)]})


# The GPU compile check (a subprocess compiling every kernel the simulator launched, about half of the
# suite's CPU time) goes first: with pytest-xdist its worker starts it while the others run the rest.
FIRST = "kernels/test_gpu_compile.py::test_every_launched_library_kernel_compiles_for_the_gpu"


def pytest_collection_modifyitems(config, items):
    if tp.cuda.backend() != "sim":
        return
    items.sort(key=lambda item: not item.nodeid.endswith(FIRST))  # a stable sort: the rest keep their order
    skip = pytest.mark.skip(reason="needs a real GPU (running on the simulator)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def launched(monkeypatch):
    """The kernels launched on the simulator during the test, in order."""
    kernels = []
    from tensorplay.runtime.backend.sim import SimLauncher

    real = SimLauncher.__call__

    def spy(self, *args, **kwargs):
        kernels.append(self._dispatcher)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SimLauncher, "__call__", spy)
    return kernels


@pytest.fixture(autouse=True, scope="session")
def _random_state_made():
    """The random generator's device state, made once per process before any
    test: the memory tests then see it as there from the start, whichever test
    file a process runs first (tests/test_random.py checks its first making)."""
    from tensorplay._random import generator

    generator.prepare()


@pytest.fixture(autouse=True)
def _backend_left_as_found():
    """Each test leaves the backend object without calls of its own set on it.
    ``monkeypatch.setattr(backend, name, f)`` undoes itself by setting the old
    bound method on the object, which then hides the class's method from what
    wraps it later: the hazard checker's doctest failed on the GPU after such a
    test. ``monkeypatch.setitem(vars(backend), name, f)`` undoes by removing it."""
    from tensorplay.runtime.backend import get as get_backend

    dev = get_backend()
    before = set(vars(dev))
    yield
    left = sorted(name for name, value in vars(dev).items() if name not in before and callable(value))
    for name in left:  # the later tests run against the class's calls all the same
        del vars(dev)[name]
    assert not left, (
        f"the test left {left} set on the backend object; patch the backend's calls with "
        "monkeypatch.setitem(vars(backend), name, f), whose undo removes them"
    )


@pytest.fixture(autouse=True)
def _no_capture_left_open():
    """Each test ends the captures it begins: one left in progress (a 'global'
    one forbids host waits and allocations in every thread) would fail the
    tests after it in this process. Such captures are ended, and the test that
    left them fails, by name."""
    yield
    from helpers.open_captures import end_open_captures

    left = end_open_captures()
    if left:
        pytest.fail("the test left captures in progress, now ended: " + "; ".join(left), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """With ``TENSORPLAY_DRIVER_TRACE=DIR``: a failed test's last driver calls go to DIR.
    On a GPU, under pytest-xdist: a failed test that left the device unusable
    (a kernel fault is sticky: every later call of the process fails) ends its
    worker, which pytest-xdist reports as crashed in that test and replaces."""
    report = yield
    directory = os.environ.get("TENSORPLAY_DRIVER_TRACE")
    if directory and report.failed:
        from helpers import driver_trace

        driver_trace.dump(item.nodeid, directory)
    if report.failed and report.when == "call" and os.environ.get("PYTEST_XDIST_WORKER"):
        from helpers.open_captures import device_broken

        broken = device_broken()
        if broken:
            os.write(2, f"\n{item.nodeid} left the device unusable ({broken}): this worker ends\n".encode())
            os._exit(3)
    return report
