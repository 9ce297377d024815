"""Which path a ``tp.linalg`` call takes, and why: ``tp.backends.linalg``.

The factorisations (LU, Cholesky, the Hermitian eigendecomposition, the SVD,
QR) run in cuSOLVER on a GPU, through nvmath-python's bindings, and in NumPy
on the simulator, as library calls of the same routines on the same buffers
(``_linalg_lapack``); on a GPU without nvmath-python or libcusolver they are
refused with a sentence saying what to install. Everything else in
``tp.linalg`` is composed of tensorplay's own ops (elementwise kernels,
reductions, ``matmul``), on either backend, some of them on top of a
factorisation (``matrix_norm(ord=2)`` takes ``svdvals``).
"""

from __future__ import annotations

from ._shape import numel
from .runtime.backend import get as get_backend
from .runtime.libraries import cusolver

__all__ = ["LINALG", "LinalgSettings"]

# an LU solve: cuSOLVER's factorisation, the pivots' row interchanges by a gather of tensorplay's and two
# triangular solves by cuBLAS (cuSOLVER's Xgetrs allocates inside a capture: see runtime/libraries/cublas.py)
_LU_SOLVE = "Xgetrf + tensorplay's row interchanges + cublas<t>trsm twice"
# function -> the routines it calls, once per matrix of the batch
ROUTINES = {
    "solve": f"{_LU_SOLVE} (op T on B copied column-major)",
    "solve_ex": f"{_LU_SOLVE} (op T on B copied column-major)",
    "solve_triangular": f"{_LU_SOLVE} on the triangle (as solve)",
    "inv": f"{_LU_SOLVE} (op N on the identity)",
    "inv_ex": f"{_LU_SOLVE} (op N on the identity)",
    "det": "Xgetrf, then U's diagonal and the pivots' parity by tensorplay's kernels",
    "slogdet": "Xgetrf, then U's diagonal and the pivots' parity by tensorplay's kernels",
    "cholesky": "Xpotrf",
    "cholesky_ex": "Xpotrf",
    "eigh": "Xsyevd (with vectors)",
    "eigvalsh": "Xsyevd (no vectors)",
    "svd": "Xgesvd",
    "svdvals": "Xgesvd (no vectors)",
    "qr": "Xgeqrf + <t>orgqr",
    "pinv": "Xgesvd, then products by matmul",
    "lstsq": "Xgesvd (pinv), then products by matmul",
    "matrix_rank": "Xgesvd (no vectors), then a count",
}
# function -> the tensorplay ops it is made of
COMPOSED = {
    "cross": "elementwise kernels (products and differences of the components)",
    "matrix_power": "products by matmul (powers of two; inv first for a negative power)",
    "vector_norm": "elementwise kernels and a reduction",
    "matmul": "tp.matmul (tp.backends.matmul.explain says which kernel)",
    "tensordot": "tp.matmul (tp.backends.matmul.explain says which kernel)",
    "vecdot": "an elementwise product and a sum",
    "outer": "an elementwise product",
    "matrix_transpose": "a view",
    "diagonal": "a view",
    "trace": "a view and a sum",
}
_SPECTRAL = {2, -2, "nuc"}  # matrix_norm orders that take singular values


class LinalgSettings:
    """``tp.backends.linalg``: says which path a ``tp.linalg`` function takes.

    Examples
    --------
    >>> from tensorplay._linalg_choice import LINALG  # tp.backends.linalg
    >>> text = LINALG.explain("solve", (4, 4), "float64")
    >>> text.startswith("linalg.solve (4, 4) float64: ")
    True
    >>> LINALG.explain("cross", (5, 3))
    'linalg.cross (5, 3) float32: tensorplay ops: elementwise kernels (products and differences of the components)'
    """

    def explain(self, function: str, shape: tuple = (), dtype="float32", ord=None) -> str:  # noqa: A002 (the standard's name)
        """The path ``tp.linalg.<function>`` takes for an input of ``shape`` and
        ``dtype`` (``ord`` for ``matrix_norm`` and ``norm``), and why."""
        name = getattr(dtype, "name", str(dtype))
        head = f"linalg.{function} {tuple(shape)} {name}: "
        if function in ("matrix_norm", "norm"):
            if ord not in _SPECTRAL:
                return head + "tensorplay ops: elementwise kernels and reductions"
            function = "svdvals"
        if function in COMPOSED:
            return head + "tensorplay ops: " + COMPOSED[function]
        if function not in ROUTINES:
            known = ", ".join(sorted({*ROUTINES, *COMPOSED, "matrix_norm", "norm"}))
            raise ValueError(f"explain() expects a tp.linalg function, got {function!r}; one of {known}")
        if name not in cusolver.DTYPES:
            return head + f"refused: the factorisations take float32, float64, complex64 and complex128, not {name}"
        count = numel(tuple(shape)[:-2])
        each = f", once per matrix ({count} matrices)" if count != 1 else ""
        captured = (
            "; refused inside a capture (syevd and gesvd wait for the host)"
            if "syevd" in ROUTINES[function] or "gesvd" in ROUTINES[function]
            else "; captured in graphs and while bodies"
        )
        if get_backend().name != "cuda":
            return head + (
                f"NumPy on the simulator (numpy.linalg, and LAPACK's LU and Householder steps written in NumPy), "
                f"as cuSOLVER's {ROUTINES[function]}{each}: one library-call node each{captured}"
            )
        reason = cusolver.unavailable()
        if reason is not None:
            return head + f"refused: {reason}"
        calls = " + ".join(f"cusolverDn{c}" if c[0] in "X<" else c for c in ROUTINES[function].split(" + "))
        return head + cusolver.describe(calls) + each + captured


LINALG = LinalgSettings()
