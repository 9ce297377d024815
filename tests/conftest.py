"""Test-tree configuration: ``@pytest.mark.gpu`` tests are skipped on the simulator.

Select the backend with ``TENSORPLAY_BACKEND=sim|cuda|auto``; shared helpers are in
``tests/helpers`` (``from helpers import assert_close``).
"""

import pytest

import tensorplay as tp


def pytest_collection_modifyitems(config, items):
    if tp.cuda.backend() != "sim":
        return
    skip = pytest.mark.skip(reason="needs a real GPU (running on the simulator)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def launched(monkeypatch):
    """The kernels ``_ops`` launches during the test, in order."""
    kernels = []
    from tensorplay import _ops

    real = _ops.launch

    def spy(kernel, *args, **kwargs):
        kernels.append(kernel)
        return real(kernel, *args, **kwargs)

    monkeypatch.setattr(_ops, "launch", spy)
    return kernels
