"""tensorplay as an array API namespace (standard version 2024.12): the
version, ``__array_namespace__``, the inspection object, the one device and
the ``device=`` keyword, the constants. The references are NumPy's own
namespace (``np.__array_namespace_info__``) and what tensorplay's functions do."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tensorplay as tp

ARRAY_API_DTYPE_NAMES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128",
]  # fmt: skip


def test_the_namespace_declares_its_version_and_tensors_lead_back_to_it():
    x = tp.zeros(2)
    assert tp.__array_api_version__ == "2024.12"
    assert x.__array_namespace__() is tp
    assert x.__array_namespace__(api_version="2024.12") is tp
    assert x.__array_namespace__(api_version="2023.12") is tp  # a later version holds the earlier ones


def test_an_unknown_version_is_refused_with_a_sentence():
    with pytest.raises(ValueError, match=r"^tensorplay implements version 2024\.12 .* got api_version='2099\.01'"):
        tp.zeros(2).__array_namespace__(api_version="2099.01")


def test_capabilities_state_what_tensorplay_does_today():
    caps = tp.__array_namespace_info__().capabilities()
    assert set(caps) == {"boolean indexing", "data-dependent shapes", "max dimensions"}
    x, mask = tp.arange(4), tp.tensor([True, False, True, False])
    try:
        got = x[mask]
    except (TypeError, IndexError):
        assert caps["boolean indexing"] is False
    else:
        assert caps["boolean indexing"] is True and got.tolist() == [0, 2]
    dependent = ("nonzero", "unique_all", "unique_counts", "unique_inverse", "unique_values", "repeat")
    assert caps["data-dependent shapes"] == all(hasattr(tp, f) for f in dependent)
    limit = caps["max dimensions"]
    # ``limit`` dimensions that cannot merge (a permuted tensor) still go through an op; one more does not
    a = np.arange(2**limit, dtype=np.float32).reshape((2,) * limit)
    x = tp.tensor(a).permute(*reversed(range(limit)))
    np.testing.assert_array_equal((x + 1).numpy(), a.transpose() + 1)
    y = tp.zeros((2,) * (limit + 1)).permute(*reversed(range(limit + 1)))
    with pytest.raises(ValueError, match="non-mergeable dimensions"):
        y + 1


def test_the_one_device():
    info = tp.__array_namespace_info__()
    x = tp.zeros(2)
    assert info.devices() == [x.device]
    assert info.default_device() == x.device and info.default_device() in info.devices()
    assert str(x.device) == "cuda:0"


def test_default_dtypes_are_what_creation_gives():
    defaults = tp.__array_namespace_info__().default_dtypes()
    assert defaults == tp.__array_namespace_info__().default_dtypes(device=tp.zeros(1).device)
    assert defaults["real floating"] is tp.asarray(0.5).dtype is tp.float32
    assert defaults["complex floating"] is tp.asarray(0.5j).dtype is tp.complex64
    assert defaults["integral"] is tp.asarray(1).dtype is tp.int64
    assert defaults["indexing"] is tp.argmax(tp.zeros(3)).dtype


@pytest.mark.parametrize(
    "kind",
    [None, "bool", "signed integer", "unsigned integer", "integral", "real floating", "complex floating", "numeric",
     ("bool", "complex floating")],
)  # fmt: skip
def test_dtypes_by_kind_match_numpys_namespace(kind):
    want = np.__array_namespace_info__().dtypes(kind=kind)
    got = tp.__array_namespace_info__().dtypes(kind=kind)
    assert sorted(got) == sorted(want)
    assert all(got[name] is getattr(tp, name) for name in got)


def test_dtypes_lists_the_standards_types_only_and_refuses_an_unknown_kind():
    info = tp.__array_namespace_info__()
    assert sorted(info.dtypes()) == sorted(ARRAY_API_DTYPE_NAMES)  # float16 and bfloat16 are extensions
    with pytest.raises(ValueError, match=r"^expected a dtype kind \(one of 'bool', .*\), got 'floating'"):
        info.dtypes(kind="floating")


@pytest.mark.parametrize("device", [None, "cuda", "cuda:0"])
def test_creation_takes_the_one_device(device):
    x = tp.zeros((2, 3), device=device)
    assert x.shape == (2, 3) and x.device == tp.__array_namespace_info__().default_device()
    for make in (tp.ones, tp.empty):
        assert make(3, device=device).shape == (3,)
    assert tp.full(2, 1.5, device=device).tolist() == [1.5, 1.5]
    assert tp.asarray([1, 2], device=x.device).tolist() == [1, 2]
    assert tp.arange(3, device=device).tolist() == [0, 1, 2]
    assert tp.zeros_like(x, device=device).shape == (2, 3)


def test_creation_refuses_the_cpu_with_a_sentence():
    with pytest.raises(ValueError, match=r"^tensorplay has one device, cuda:0, .* got device='cpu'; .*numpy\(\)"):
        tp.zeros(2, device="cpu")
    with pytest.raises(ValueError, match=r"got device='cuda:1'"):
        tp.asarray([1.0], device="cuda:1")


def test_to_and_cuda_take_pytorchs_device_forms():
    x = tp.arange(3, dtype=tp.float32)
    for args, kwargs in [(("cuda",), {}), ((x.device,), {}), ((0,), {}), ((), {"device": "cuda:0"})]:
        assert x.to(*args, **kwargs) is x
    assert x.to("cuda", tp.float64).dtype == tp.float64
    assert x.to(device="cuda", dtype=tp.int32).tolist() == [0, 1, 2]
    assert x.to(tp.zeros(1, dtype=tp.float16)).dtype == tp.float16  # another tensor's dtype
    assert x.to("cuda", copy=True) is not x
    assert x.cuda() is x and x.cuda(0) is x and tp.empty(2, device=0).shape == (2,)
    with pytest.raises(ValueError, match=r"got device='cpu'; take a host copy with x\.numpy\(\)"):
        x.to("cpu")
    for other in ("cuda:1", 1):
        with pytest.raises(ValueError, match=r"run a process per GPU .*distributed\.run"):
            x.to(other)
    with pytest.raises(ValueError, match="got device=1"):
        x.cuda(1)


def test_to_device_to_the_same_device_is_the_tensor_itself():
    x = tp.arange(3)
    assert x.to_device(x.device) is x
    assert x.to_device("cuda") is x
    with pytest.raises(ValueError, match=r"got device='cpu'"):
        x.to_device("cpu")


def test_constants():
    assert tp.e == math.e and tp.pi == math.pi and tp.inf == math.inf
    assert math.isnan(tp.nan) and tp.newaxis is None
    assert tp.arange(3)[tp.newaxis, :, tp.newaxis].shape == (1, 3, 1)
    assert all(isinstance(c, float) for c in (tp.e, tp.pi, tp.inf, tp.nan))
