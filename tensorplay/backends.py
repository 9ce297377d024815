"""Settings of the kernels behind the ops, as ``tp.backends.<area>``.

``tp.backends.matmul`` (a :class:`~tensorplay._matmul_choice.MatmulSettings`):
whether small matrix products time their kernel candidates (``autotune``),
where the choices are kept (``choices_path``), and ``explain(m, n, k)``.

Examples
--------
>>> import tensorplay as tp
>>> tp.backends.matmul.explain(8, 8, 8).startswith("matmul (8, 8) @ (8, 8) float32")
True
"""

from ._matmul_choice import MATMUL as matmul

__all__ = ["matmul"]
