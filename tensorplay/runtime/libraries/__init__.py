"""NVIDIA's math libraries on the device, one module per library.

Each module binds one library through nvmath-python's low-level bindings (raw
device pointers and a stream handle as integers: no array library in
between) and is the only place its library is called: ``cublas`` for matrix
products. NCCL, which nvmath-python does not bind, is bound through ``ctypes``
in ``nccl``, in the same terms. ``_nvmath`` imports nvmath-python when a library is first needed,
never at tensorplay's import, and turns what stops it (not installed, a
library that does not load, the simulator) into one sentence; the ops above
then use tensorplay's own kernels and their ``explain()`` says why.

Like the rest of ``runtime``, nothing here knows ``Tensor``: the ops pass
pointers, shapes and strides.
"""

from __future__ import annotations

__all__: list[str] = []
