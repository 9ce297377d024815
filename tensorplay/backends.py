"""Settings of the kernels behind the ops, as ``tp.backends.<area>``.

``tp.backends.matmul`` (a :class:`~tensorplay._matmul_choice.MatmulSettings`):
whether small matrix products time their kernel candidates (``autotune``),
where the choices are kept (``choices_path``), and ``explain(m, n, k)``.

``tp.backends.fft``: ``explain(...)`` says whether a transform runs on cuFFT
(with its plans), on the simulator's numpy.fft, or is refused, and why.
``tp.backends.linalg``: ``explain(...)`` does the same for ``tp.linalg``
(cuSOLVER, the simulator's numpy.linalg, or tensorplay ops composed).

Examples
--------
>>> import tensorplay as tp
>>> tp.backends.matmul.explain(8, 8, 8).startswith("matmul (8, 8) @ (8, 8) float32")
True
"""

from ._fft_choice import FFT as fft
from ._linalg_choice import LINALG as linalg
from ._matmul_choice import MATMUL as matmul

__all__ = ["fft", "linalg", "matmul"]
