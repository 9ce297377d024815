"""Others' libraries on tensorplay tensors through the array API standard:
``examples/array_api_interop.py`` (scikit-learn's PCA and linear discriminant
analysis with ``array_api_dispatch=True``, SciPy's ``logsumexp``, ``zscore``
and ``rfft``) runs in a process of its own (SciPy reads ``SCIPY_ARRAY_API``
at its import) and checks each result against the same call on NumPy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tensorplay as tp

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("sklearn", reason="scikit-learn is in the test extra: pip install -e '.[test]'")
pytest.importorskip("scipy", reason="SciPy is in the test extra: pip install -e '.[test]'")


def test_scikit_learn_and_scipy_run_on_tensorplay_tensors():
    env = dict(os.environ, TENSORPLAY_BACKEND=tp.cuda.backend(), SCIPY_ARRAY_API="1")
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "array_api_interop.py")],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    for name in ("PCA", "LDA predictions", "logsumexp", "zscore", "rfft"):
        assert name in out.stdout
    assert "all checks passed" in out.stdout
