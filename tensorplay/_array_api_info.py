"""tensorplay as an array API namespace: the standard's version it implements,
``x.__array_namespace__()`` (which leads from a tensor back to ``tensorplay``),
``tp.__array_namespace_info__()`` (the inspection utilities: capabilities,
devices, dtypes) and ``x.to_device()``.

Examples
--------
>>> import tensorplay as tp
>>> x = tp.zeros(2)
>>> x.__array_namespace__() is tp, tp.__array_api_version__
(True, '2024.12')
>>> info = tp.__array_namespace_info__()
>>> info.default_dtypes()["real floating"], info.devices() == [x.device]
(tensorplay.float32, True)
"""

from __future__ import annotations

import sys

from . import _dtype as dt
from ._data_type_functions import kind_test
from ._device import DEVICE, Device, check_device
from ._tensor import Tensor, add_methods
from .kernels.elementwise import MAXDIM

__all__ = ["__array_api_version__", "__array_namespace_info__"]

__array_api_version__ = "2024.12"
_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")  # each holds the one before (what tensorplay has of it)

# The standard's dtypes (float16 and bfloat16 are tensorplay's own)
_STANDARD_DTYPES = (
    dt.bool, dt.int8, dt.int16, dt.int32, dt.int64, dt.uint8, dt.uint16, dt.uint32, dt.uint64,
    dt.float32, dt.float64, dt.complex64, dt.complex128,
)  # fmt: skip


class ArrayNamespaceInfo:
    """The inspection utilities of the array API standard, for tensorplay."""

    def capabilities(self) -> dict:
        """What tensorplay supports: indexing by integers, slices, None, ...,
        integer arrays and boolean masks (``x[mask]`` eagerly); the functions
        whose output shape depends on values (``nonzero``, the ``unique_*``
        ones, ``repeat`` with a tensor of counts), which read a count back to
        the host and so cannot be captured in a graph; and up to ``MAXDIM``
        dimensions that do not merge (the elementwise kernels' limit)."""
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": MAXDIM}

    def default_device(self) -> Device:
        return DEVICE

    def devices(self) -> list[Device]:
        return [DEVICE]

    def default_dtypes(self, *, device=None) -> dict:
        """The dtypes of new tensors made from Python numbers (and of indices)."""
        check_device(device)
        return {
            "real floating": dt.DEFAULT_FLOAT,
            "complex floating": dt.DEFAULT_COMPLEX,
            "integral": dt.DEFAULT_INT,
            "indexing": dt.int64,
        }

    def dtypes(self, *, device=None, kind=None) -> dict:
        """The standard's dtypes tensorplay has, by name, of ``kind`` (a kind name
        or a tuple of them; None: all)."""
        check_device(device)
        kinds = () if kind is None else kind if isinstance(kind, tuple) else (kind,)
        tests = [kind_test(k) for k in kinds]
        return {d.name: d for d in _STANDARD_DTYPES if not tests or any(test(d) for test in tests)}


_INFO = ArrayNamespaceInfo()


def __array_namespace_info__() -> ArrayNamespaceInfo:
    """The array API standard's inspection utilities (``capabilities()``,
    ``default_device()``, ``devices()``, ``default_dtypes()``, ``dtypes()``)."""
    return _INFO


def _array_namespace(self: Tensor, /, *, api_version: str | None = None):
    """``tensorplay`` itself: the array API namespace of tensors."""
    if api_version is not None and api_version not in _VERSIONS:
        raise ValueError(
            f"tensorplay implements version {__array_api_version__} of the array API standard (and with it "
            f"{', '.join(_VERSIONS[:-1])}), got api_version={api_version!r}; pass one of them or None"
        )
    return sys.modules[__package__]  # the package, which imports this module: looked up, not imported


# On the simulator Tensor derives from one of Numba's argument hints, whose ``to_device(retr, stream=0)``
# Numba's simulator calls on each kernel argument (``retr``: a list): that call goes on to it.
_argument_to_device = getattr(Tensor, "to_device", None)


def _to_device(self: Tensor, device, /, *, stream=None) -> Tensor:
    """The tensor on ``device``: itself, as tensorplay has one device."""
    if isinstance(device, list) and _argument_to_device is not None:
        return _argument_to_device(self, device, 0 if stream is None else stream)
    check_device(device)
    return self


add_methods({"__array_namespace__": _array_namespace, "to_device": _to_device})
