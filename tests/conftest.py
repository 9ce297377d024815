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
    """The kernels launched on the simulator during the test, in order."""
    kernels = []
    from tensorplay.runtime.backend.sim import SimLauncher

    real = SimLauncher.__call__

    def spy(self, *args, **kwargs):
        kernels.append(self._dispatcher)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SimLauncher, "__call__", spy)
    return kernels
