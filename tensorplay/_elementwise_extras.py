"""Elementwise compositions PyTorch and NumPy users reach for: ``frac``,
``lerp``, ``addcmul``, ``addcdiv`` and ``nan_to_num``, with the in-place
methods ``lerp_``, ``addcmul_``, ``addcdiv_`` and ``nan_to_num_``.

Each is a few of the op table's ops (``tp.compile`` fuses them into one
kernel), differentiable through them; an in-place form computes the result
and copies it into the tensor, which must hold the result's dtype and shape.
"""

from __future__ import annotations

from . import _dtype as dt
from ._data_type_functions import finfo
from ._functions import where
from ._tape import refuse_in_place
from ._tensor import Tensor, add_methods

__all__ = ["addcdiv", "addcmul", "frac", "lerp", "nan_to_num"]


def frac(input: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
    """The fractional part, with the sign of ``input``: ``input - trunc(input)``."""
    return input - input.trunc()


def lerp(input: Tensor, end, weight) -> Tensor:  # noqa: A002 (PyTorch's name)
    """``input + weight * (end - input)``, as PyTorch computes it: from ``end``
    where ``weight >= 0.5``, so that weight 1 gives ``end`` exactly.

    >>> import tensorplay as tp
    >>> tp.lerp(tp.tensor([0.0, 10.0]), tp.tensor([10.0, 20.0]), 0.25).tolist()
    [2.5, 12.5]
    """
    diff = end - input
    if isinstance(weight, Tensor):
        return where(weight.abs() < 0.5, input + weight * diff, end - diff * (1 - weight))
    return input + weight * diff if abs(weight) < 0.5 else end - diff * (1 - weight)


def addcmul(input: Tensor, tensor1, tensor2, *, value=1) -> Tensor:  # noqa: A002 (PyTorch's name)
    """``input + value * tensor1 * tensor2``, broadcast."""
    product = tensor1 * tensor2
    return input + (product if value == 1 else product * value)


def addcdiv(input: Tensor, tensor1, tensor2, *, value=1) -> Tensor:  # noqa: A002 (PyTorch's name)
    """``input + value * tensor1 / tensor2``, broadcast (true division: integer
    operands are refused, as PyTorch does)."""
    if all(getattr(t, "dtype", dt.float32).kind in "biu" for t in (tensor1, tensor2)):
        raise TypeError("addcdiv() divides: integer tensor1 and tensor2 would be floor-divided; pass floats")
    quotient = tensor1 / tensor2
    return input + (quotient if value == 1 else quotient * value)


def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:  # noqa: A002
    """``input`` with NaN replaced by ``nan``, +inf by ``posinf`` and -inf by
    ``neginf`` (by default the dtype's largest and lowest finite values);
    integers and bools unchanged (a copy).

    >>> import tensorplay as tp
    >>> tp.nan_to_num(tp.tensor([float("nan"), float("inf"), -1.0]), posinf=9.0).tolist()
    [0.0, 9.0, -1.0]
    """
    if input.dtype.kind == "c":
        raise TypeError("nan_to_num() takes real tensors; apply it to the real and imaginary parts of a complex one")
    if input.dtype.kind != "f":
        return input.clone()
    info = finfo(input.dtype)
    big = info.max if posinf is None else posinf
    low = info.min if neginf is None else neginf
    out = where(input.isnan(), nan, input)
    return where(input == float("inf"), big, where(input == float("-inf"), low, out))


def _in_place(fn):
    def method(self, *args, **kwargs):
        # refused under its own name, before computing (copy_ would refuse it as copy_())
        refuse_in_place(f"{fn.__name__}_()", self, *(a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)))
        result = fn(self, *args, **kwargs)
        if result.shape != self.shape or result.dtype != self.dtype:
            raise RuntimeError(
                f"{fn.__name__}_() writes its result into the tensor: a result of {result.dtype} {result.shape} "
                f"does not fit one of {self.dtype} {self.shape}; use {fn.__name__}() for a new tensor"
            )
        return self.copy_(result)

    method.__name__, method.__doc__ = f"{fn.__name__}_", f"``{fn.__name__}`` into this tensor."
    return method


add_methods(
    {
        "addcdiv": addcdiv, "addcdiv_": _in_place(addcdiv), "addcmul": addcmul, "addcmul_": _in_place(addcmul),
        "frac": frac, "lerp": lerp, "lerp_": _in_place(lerp), "nan_to_num": nan_to_num,
        "nan_to_num_": _in_place(nan_to_num),
    }
)  # fmt: skip
