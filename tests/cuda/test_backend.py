"""Choosing the backend (TENSORPLAY_BACKEND), device queries and CudaError."""

import os
import pathlib
import subprocess
import sys

import pytest

import tensorplay as tp
from tensorplay.runtime.backend import SIMULATOR_NOTICE
from tensorplay.runtime.backend import get as get_backend

ROOT = pathlib.Path(__file__).resolve().parents[2]
ON_GPU = tp.cuda.backend() == "cuda"


def run_python(code: str, backend: str | None, *flags: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (with ``flags``) with TENSORPLAY_BACKEND set to ``backend``."""
    env = dict(os.environ)
    env.pop("TENSORPLAY_BACKEND", None)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if backend is not None:
        env["TENSORPLAY_BACKEND"] = backend
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    argv = [sys.executable, *flags, "-c", code]
    return subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_backend_and_device_queries():
    assert tp.cuda.backend() in ("cuda", "sim")
    assert tp.cuda.backend() == get_backend().name
    assert tp.cuda.is_available() is True
    assert tp.cuda.device_count() >= 1
    assert tp.cuda.current_device() == 0
    name = tp.cuda.get_device_name()
    assert isinstance(name, str) and name
    if tp.cuda.backend() == "sim":
        assert "simulator" in name


@pytest.mark.gpu
def test_device_name_on_hardware():
    assert tp.cuda.get_device_name().startswith("NVIDIA")


def test_synchronize_returns():
    x = tp.ones(8) * 3
    tp.cuda.synchronize()
    assert x.tolist() == [3.0] * 8


def test_bogus_backend_is_a_value_error_naming_the_choices():
    proc = run_python(
        "import tensorplay\n",
        "bogus",
    )
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ValueError: TENSORPLAY_BACKEND must be")
    for choice in ("'cuda'", "'sim'", "'auto'", "'bogus'"):
        assert choice in last


@pytest.mark.skipif(ON_GPU, reason="needs a machine without a CUDA driver")
def test_cuda_backend_without_driver_is_a_clear_error():
    proc = run_python("import tensorplay\n", "cuda")
    assert proc.returncode != 0
    err = proc.stderr
    last = err.strip().splitlines()[-1]
    assert "CudaError: TENSORPLAY_BACKEND=cuda" in last
    assert "set TENSORPLAY_BACKEND=sim" in last
    # One traceback, ours: no chained loader error (OSError, ImportError, cuInit).
    assert err.count("Traceback (most recent call last)") == 1
    assert "During handling of the above exception" not in err
    assert "The above exception was the direct cause" not in err
    assert "OSError" not in err and "ImportError" not in err


def test_cuda_error_is_raised_from_import_as_a_catchable_cuda_error():
    code = (
        "try:\n"
        "    import tensorplay as tp\n"
        "    print('ok', tp.cuda.backend())\n"
        "except Exception as e:\n"
        "    from tensorplay.runtime.backend.errors import CudaError\n"
        "    print(type(e).__name__, isinstance(e, CudaError), e.__cause__ is None, e.__context__ is None)\n"
    )
    proc = run_python(code, "cuda")
    assert proc.returncode == 0, proc.stderr
    if ON_GPU:
        assert proc.stdout.split() == ["ok", "cuda"]
    else:
        assert proc.stdout.split() == ["CudaError", "True", "True", "True"]


def test_auto_announces_the_simulator_once_in_one_line():
    # One line through the "tensorplay" logger, however often the backend is
    # asked for; with logging set up it goes where the application says.
    code = (
        "import logging\n"
        "logging.basicConfig(format='%(name)s|%(levelname)s|%(message)s')\n"
        "import tensorplay as tp\n"
        "from tensorplay.runtime.backend import get\n"
        "get(); get(); tp.ones(2).tolist()\n"
        "print(tp.cuda.backend())\n"
    )
    for backend in ("auto", None):  # auto is the default
        proc = run_python(code, backend)
        assert proc.returncode == 0, proc.stderr
        notices = [line for line in proc.stderr.splitlines() if "simulator" in line]
        if proc.stdout.strip() == "cuda":
            assert notices == []
            continue
        assert proc.stdout.strip() == "sim"
        assert notices == [f"tensorplay|WARNING|{SIMULATOR_NOTICE}"]
        assert "CPU simulator" in SIMULATOR_NOTICE and "TENSORPLAY_BACKEND=sim" in SIMULATOR_NOTICE


def test_auto_notice_on_stderr_without_logging_set_up_and_warnings_as_errors():
    # python -W error: the import works (the notice is not a warning), and
    # Python's last-resort handler prints the one line.
    proc = run_python("import tensorplay as tp\nprint(tp.cuda.backend())\n", "auto", "-W", "error")
    assert proc.returncode == 0, proc.stderr
    mentions = [line for line in proc.stderr.splitlines() if "simulator" in line]
    if proc.stdout.strip() == "cuda":
        assert mentions == []
    else:
        assert mentions == [SIMULATOR_NOTICE]
        assert len(proc.stderr.strip().splitlines()) == 1


def test_explicit_sim_is_silent():
    proc = run_python("import tensorplay as tp\nprint(tp.cuda.backend())\n", "sim")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "sim"
    assert "simulator" not in proc.stderr


def test_cuda_error_attributes():
    e = tp.cuda.CudaError.from_result("cuMemAlloc", "CUDA_ERROR_OUT_OF_MEMORY")
    assert isinstance(e, RuntimeError)
    assert e.function == "cuMemAlloc"
    assert e.code == "CUDA_ERROR_OUT_OF_MEMORY"
    assert str(e).startswith("cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY: the device is out of memory")
    plain = tp.cuda.CudaError("something went wrong")
    assert (plain.function, plain.code) == ("", "")
    assert issubclass(tp.cuda.CaptureError, tp.cuda.CudaError)


def test_cuda_error_from_a_failing_device_call():
    from tensorplay.runtime.backend import get

    start, end = tp.cuda.Event(enable_timing=True), tp.cuda.Event(enable_timing=True)
    with pytest.raises(tp.cuda.CudaError, match="^cuEventElapsedTime failed: CUDA_ERROR_INVALID_HANDLE") as info:
        get().event_elapsed_ms(start._h, end._h)  # neither event was recorded (Event.elapsed_time says so first)
    assert info.value.function == "cuEventElapsedTime"
    assert info.value.code == "CUDA_ERROR_INVALID_HANDLE"
    assert not isinstance(info.value, tp.cuda.CaptureError)


def test_the_backend_implements_the_protocol_and_is_registered_by_name():
    from tensorplay.runtime.backend import BACKENDS, Backend, get

    backend = get()
    assert isinstance(backend, Backend)  # every member of every concern, checked by name
    assert type(backend).__name__ == BACKENDS[backend.name][1]
    assert isinstance(backend.host_addressable, bool)


def test_simulated_library_kernels_give_inf_and_nan_without_numpy_warnings():
    # As the GPU does: 1/0 is inf, 0/0 NaN, log(-1) NaN, and nothing is printed.
    code = (
        "import warnings\n"
        "warnings.simplefilter('default')\n"
        "import tensorplay as tp\n"
        "x = tp.tensor([1.0, 0.0, -1.0])\n"
        "print((x / 0).tolist(), (x / x).tolist(), x.log().tolist())\n"
    )
    proc = run_python(code, "sim")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[inf, nan, -inf] [1.0, nan, 1.0] [0.0, -inf, nan]"
    assert proc.stderr == ""


def test_the_driver_entry_point_lookup_takes_the_bindings_flag_and_calls_what_it_gets(monkeypatch):
    """set_args calls cuGraphExecKernelNodeSetParams through the address the
    driver gives (0.9 us on the H200 against 1.5 through the bindings), as a
    capture reads each kernel's node and rewrites its edges: the lookup passes
    the version asked and the bindings' flag enum and calls the function found,
    and a driver without the function gives None (the bindings' call is used)."""
    import ctypes
    import importlib

    from cuda.bindings import driver as drv

    calls_module = importlib.import_module("tensorplay.runtime.backend.driver_calls")
    calls, asked = [], []
    found = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
        lambda *a: calls.append(a) or 7
    )

    def fake_lookup(name, version, flags):
        asked.append((name, version, flags))
        address = ctypes.cast(found, ctypes.c_void_p).value if name == b"cuFound" else 0
        return drv.CUresult.CUDA_SUCCESS, address, None

    monkeypatch.setattr(calls_module, "_get_proc_address", fake_lookup)
    calls_module.entry_point.cache_clear()
    try:
        assert calls_module.entry_point("cuFound", 12000, 3)(1, 2, 3) == 7
        assert calls == [(1, 2, 3)]
        assert calls_module.entry_point("cuMissing", 12030, 5) is None
    finally:
        calls_module.entry_point.cache_clear()
    assert [a[1:] for a in asked] == [
        (v, drv.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT) for v in (12000, 12030)
    ]


def test_the_simulated_device_has_the_memory_tensorplay_sim_memory_gives(monkeypatch):
    code = (
        "import tensorplay as tp\n"
        "free, total = tp.cuda.mem_get_info()\n"
        "x = tp.empty(1 << 20)\n"  # 4 MiB of the 6
        "try:\n"
        "    tp.empty(1 << 20)\n"
        "except tp.cuda.CudaError as e:\n"
        "    print(total, free <= total, e.code, sep='|')\n"
        "    print(e)\n"
    )
    monkeypatch.setenv("TENSORPLAY_SIM_MEMORY", "6M")
    proc = run_python(code, "sim")
    assert proc.returncode == 0, proc.stderr
    numbers, message = proc.stdout.splitlines()
    assert numbers == f"{6 << 20}|True|CUDA_ERROR_OUT_OF_MEMORY"
    assert message.startswith("out of memory: could not allocate 4194304 bytes (")


@pytest.mark.parametrize("value", ["lots", "-1", "0", "8X", "8I"])
def test_a_bad_tensorplay_sim_memory_is_a_value_error_with_an_example(monkeypatch, value):
    monkeypatch.setenv("TENSORPLAY_SIM_MEMORY", value)
    proc = run_python("import tensorplay\n", "sim")
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (
        "ValueError: TENSORPLAY_SIM_MEMORY must be the simulated device's memory as a positive whole number of "
        f"bytes, optionally followed by K, M, G or T (e.g. 8G), got {value!r}"
    )


def test_a_wait_spins_then_yields_then_sleeps_and_ends_at_the_first_ready_poll(monkeypatch):
    """``_wait_until_done`` on a fake clock: no pause in the first ``SPIN_S``,
    ``sleep(0)`` (the CPU given away, back at once) up to ``YIELD_S``, then
    ``SLEEP_S`` pauses; it returns at the first poll that finds the work done,
    and raises the driver's error where the query fails."""
    pytest.importorskip("cuda.bindings")
    from cuda.bindings import driver as drv

    from tensorplay.runtime.backend import driver_calls as calls
    from tensorplay.runtime.backend.errors import CudaError

    now = [0.0]
    pauses = []

    def sleep(seconds):
        pauses.append(seconds)
        now[0] += max(seconds, 1e-6)

    monkeypatch.setattr(calls.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(calls.time, "sleep", sleep)
    not_ready, done = drv.CUresult.CUDA_ERROR_NOT_READY, drv.CUresult.CUDA_SUCCESS
    for ready_at in (0.0, 1e-3, 20e-3, 80e-3):
        polls, pauses[:] = [], []

        def query(handle, ready_at=ready_at, polls=polls):
            polls.append(now[0])
            now[0] += 1e-6  # a poll takes a microsecond
            return (done if polls[-1] >= ready_at else not_ready,)

        now[0] = 0.0
        calls._wait_until_done("cuStreamSynchronize", query, None)
        assert polls[-1] >= ready_at and all(p < ready_at for p in polls[:-1])
        assert polls[-1] - ready_at <= (calls.SLEEP_S if ready_at > calls.YIELD_S else 2e-6) + 2e-6
        assert all(p == 0 for p in pauses if p < calls.SLEEP_S) and set(pauses) <= {0, calls.SLEEP_S}
        spun = sum(1 for p in polls if p <= calls.SPIN_S)
        assert len(pauses) <= len(polls) - min(spun, len(polls))  # no pause while spinning
        assert (calls.SLEEP_S in pauses) == (ready_at > calls.YIELD_S + 1e-4)
    with pytest.raises(CudaError, match="cuStreamSynchronize"):
        calls._wait_until_done("cuStreamSynchronize", lambda h: (drv.CUresult.CUDA_ERROR_LAUNCH_FAILED,), None)
