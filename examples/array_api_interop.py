"""Others' libraries on tensorplay tensors, through the Python array API
standard: scikit-learn (``array_api_dispatch=True``) fits a PCA and a linear
discriminant analysis, and SciPy's array-API-aware functions compute a
``logsumexp``, z-scores and an FFT, each on tensorplay tensors (results are
tensorplay tensors, computed by tensorplay's kernels and libraries) and each
compared with the same call on NumPy arrays. Runs on the simulator too.

    python examples/array_api_interop.py

SciPy reads ``SCIPY_ARRAY_API=1`` when it is imported, and scikit-learn
needs it: this script sets it before importing either.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # before scipy or sklearn is imported

import numpy as np  # noqa: E402
import scipy.fft  # noqa: E402
import scipy.special  # noqa: E402
import scipy.stats  # noqa: E402
import sklearn  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis  # noqa: E402

import tensorplay as tp  # noqa: E402


def _host(x) -> np.ndarray:
    return np.asarray(x.tolist()) if isinstance(x, tp.Tensor) else np.asarray(x)


def main() -> int:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 5)) @ rng.standard_normal((5, 5))  # correlated features
    y = (X[:, 0] - X[:, 2] + 0.5 * rng.standard_normal(60) > 0).astype(np.int64)
    Xt, yt = tp.asarray(X), tp.asarray(y)
    checks = []

    with sklearn.config_context(array_api_dispatch=True):
        pca = PCA(n_components=2, svd_solver="full").fit(Xt)
        lda = LinearDiscriminantAnalysis().fit(Xt, yt)
        predicted = lda.predict(Xt)
    pca_np = PCA(n_components=2, svd_solver="full").fit(X)
    predicted_np = LinearDiscriminantAnalysis().fit(X, y).predict(X)
    print(f"PCA on {type(pca.components_).__module__}.Tensor: explained variance {_host(pca.explained_variance_)}")
    checks.append(("PCA explained variance", np.allclose(_host(pca.explained_variance_), pca_np.explained_variance_)))
    checks.append(  # each component up to its sign
        ("PCA components", np.allclose(np.abs(_host(pca.components_)), np.abs(pca_np.components_), atol=1e-8))
    )
    agree = float((_host(predicted) == predicted_np).mean())
    print(f"LDA predictions on tensorplay tensors agree with NumPy's on {agree:.0%} of the samples")
    checks.append(("LDA predictions", agree == 1.0 and isinstance(predicted, tp.Tensor)))

    v = np.linspace(-2.0, 3.0, 9)
    vt = tp.asarray(v)
    for name, f in (
        ("scipy.special.logsumexp", scipy.special.logsumexp),
        ("scipy.stats.zscore", scipy.stats.zscore),
        ("scipy.fft.rfft", scipy.fft.rfft),
    ):
        got = f(vt)
        ok = isinstance(got, tp.Tensor) and np.allclose(_host(got), f(v))
        print(f"{name} on a tensorplay tensor: {type(got).__name__}, {'same as NumPy' if ok else 'DIFFERS'}")
        checks.append((name, ok))

    failed = [name for name, ok in checks if not ok]
    print("all checks passed" if not failed else f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
