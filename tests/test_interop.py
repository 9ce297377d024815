"""Zero-copy exchange: the CUDA Array Interface, DLPack, PyTorch and CuPy."""

import gc
import re

import numpy as np
import pytest
from helpers import NARROW_INT_DTYPES

import tensorplay as tp

ON_GPU = tp.cuda.backend() == "cuda"


class CAIHolder:
    """A foreign object exposing nothing but a CUDA Array Interface dict."""

    def __init__(self, cai: dict) -> None:
        self.__cuda_array_interface__ = cai


# -- the CUDA Array Interface -------------------------------------------------------


def test_cuda_array_interface_of_a_contiguous_tensor():
    x = tp.zeros(3, 4)
    cai = x.__cuda_array_interface__
    assert cai["shape"] == (3, 4)
    assert cai["typestr"] == "<f4"
    assert cai["data"] == (x.data_ptr(), False)
    assert cai["strides"] is None
    assert cai["version"] == 3
    assert "stream" in cai and cai["stream"] is None


@pytest.mark.parametrize(
    "dtype, typestr",
    [
        (tp.float64, "<f8"),
        (tp.float16, "<f2"),
        (tp.int32, "<i4"),
        (tp.int64, "<i8"),
        (tp.bool, "|b1"),
        (tp.uint8, "|u1"),
        (tp.int8, "|i1"),
        (tp.int16, "<i2"),
        (tp.uint16, "<u2"),
        (tp.uint32, "<u4"),
        (tp.uint64, "<u8"),
    ],  # fmt: skip
    ids=str,
)
def test_cuda_array_interface_typestr(dtype, typestr):
    assert tp.zeros(2, dtype=dtype).__cuda_array_interface__["typestr"] == typestr


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_narrow_integers_round_trip_through_the_interface(dtype):
    info = np.iinfo(dtype.np)
    src = tp.tensor([[info.min, info.max, 1], [2, 3, 4]], dtype=dtype)
    alias = tp.as_tensor(CAIHolder(dict(src.t().__cuda_array_interface__)))
    assert alias.dtype == dtype and alias.data_ptr() == src.data_ptr() and not alias.is_contiguous()
    assert alias.tolist() == [[info.min, 2], [info.max, 3], [1, 4]]
    alias.add_(1)  # wraps in place, seen through the other tensor
    assert src.tolist() == [[info.min + 1, info.min, 2], [3, 4, 5]]


def test_cuda_array_interface_of_a_strided_view():
    x = tp.zeros(4, 6, dtype=tp.float64)
    v = x[1:, ::2]
    cai = v.__cuda_array_interface__
    assert cai["shape"] == (3, 3)
    assert cai["strides"] == (48, 16)  # bytes
    assert cai["data"][0] == v.data_ptr() == x.data_ptr() + 48
    t = x.t()
    assert t.__cuda_array_interface__["strides"] == (8, 48)


def test_as_tensor_aliases_cuda_array_interface_memory():
    src = tp.tensor(np.arange(6, dtype=np.float32))
    holder = CAIHolder(dict(src.__cuda_array_interface__))
    alias = tp.as_tensor(holder)
    assert alias.data_ptr() == src.data_ptr()
    assert alias.shape == (6,) and alias.dtype == tp.float32
    alias.mul_(10.0)  # write through one ...
    np.testing.assert_array_equal(src.numpy(), np.arange(6) * 10.0)  # ... read through the other
    src.fill_(-1.0)
    assert alias.tolist() == [-1.0] * 6


def test_as_tensor_honours_strides_and_keeps_the_owner_alive():
    src = tp.tensor(np.arange(12, dtype=np.int32).reshape(3, 4))
    ref = src.numpy()
    alias = tp.as_tensor(CAIHolder(dict(src[:, 1::2].__cuda_array_interface__)))
    assert alias.shape == (3, 2)
    np.testing.assert_array_equal(alias.numpy(), ref[:, 1::2])
    alias.fill_(0)
    ref[:, 1::2] = 0
    np.testing.assert_array_equal(src.numpy(), ref)


def test_as_tensor_of_a_tensor_and_of_host_data():
    x = tp.ones(3)
    assert tp.as_tensor(x) is x
    y = tp.as_tensor([1.0, 2.0])
    assert y.tolist() == [1.0, 2.0]
    a = np.zeros(3, np.float32)
    z = tp.as_tensor(a)  # host data is copied, on the simulator too (whose memory is host memory)
    a[0] = 5.0
    assert z.tolist() == [0.0, 0.0, 0.0]


def test_as_tensor_rejects_a_masked_interface():
    src = tp.zeros(2)
    cai = dict(src.__cuda_array_interface__, mask=object())
    with pytest.raises(TypeError, match="mask"):
        tp.as_tensor(CAIHolder(cai))


@tp.jit
def double(x):
    i = tp.cuda.grid(1)
    if i < x.size:
        x[i] *= 2


def test_a_kernel_accepts_a_cuda_array_interface_object():
    src = tp.tensor([1.0, 2.0, 3.0])
    double[1, 4](CAIHolder(dict(src.__cuda_array_interface__)))
    assert src.tolist() == [2.0, 4.0, 6.0]


# -- DLPack --------------------------------------------------------------------------


def test_dlpack_device():
    expected = (2, 0) if ON_GPU else (1, 0)  # kDLCUDA on the GPU, kDLCPU on the simulator
    assert tp.zeros(1).__dlpack_device__() == expected


@pytest.mark.skipif(ON_GPU, reason="the simulator exports host memory")
def test_numpy_from_dlpack_sees_the_tensor_and_is_a_view():
    x = tp.tensor(np.arange(8, dtype=np.float32).reshape(2, 4))
    a = np.from_dlpack(x)
    np.testing.assert_array_equal(a, np.arange(8).reshape(2, 4))
    assert a.ctypes.data == x.data_ptr()
    x.fill_(7.0)  # modifying the tensor afterwards is visible
    tp.cuda.synchronize()
    np.testing.assert_array_equal(a, np.full((2, 4), 7.0))
    del x
    gc.collect()
    np.testing.assert_array_equal(a, np.full((2, 4), 7.0))  # the array keeps the memory


@pytest.mark.skipif(ON_GPU, reason="the simulator exports host memory")
def test_numpy_from_dlpack_is_writable_and_writes_reach_the_tensor():
    # NumPy asks for a DLPack 1 capsule, whose flags say writable; a legacy
    # (unversioned) capsule would give it a read-only array.
    x = tp.zeros(3)
    a = np.from_dlpack(x)
    assert a.flags.writeable
    a[1] = 5.0
    assert x.tolist() == [0.0, 5.0, 0.0]


def test_dlpack_capsules_of_each_version():
    x = tp.tensor(np.arange(4, dtype=np.float32))
    for kwargs in ({}, {"max_version": (1, 0)}, {"max_version": (1, 3)}, {"max_version": (0, 8)}):
        y = tp.from_dlpack(x.__dlpack__(**kwargs))
        assert y.data_ptr() == x.data_ptr() and y.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_dlpack_copies_when_asked_and_refuses_another_device():
    x = tp.zeros(2)
    copied = tp.from_dlpack(x.__dlpack__(copy=True, max_version=(1, 0)))
    assert copied.data_ptr() != x.data_ptr() and copied.tolist() == [0.0, 0.0]
    x.fill_(5.0)
    assert copied.tolist() == [0.0, 0.0]  # the copy's memory is its own
    with pytest.raises(BufferError, match=re.escape("not (7, 3)")):
        x.__dlpack__(dl_device=(7, 3))
    assert tp.from_dlpack(x.__dlpack__(copy=False, dl_device=x.__dlpack_device__())).shape == (2,)


class _HostCapsule:
    """A capsule of host memory, as NumPy's from_dlpack takes it."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.skipif(not ON_GPU, reason="the simulator's memory is the CPU's: no copy is needed")
def test_dlpack_to_the_cpu_copies_and_refuses_when_copy_is_false():
    x = tp.tensor(np.arange(3, dtype=np.float32))
    for copy in (None, True):
        host = np.from_dlpack(_HostCapsule(x.__dlpack__(copy=copy, dl_device=(1, 0))))
        np.testing.assert_array_equal(host, [0, 1, 2])
    with pytest.raises(BufferError, match=re.escape("only a copy can reach the CPU (copy=None or True)")):
        x.__dlpack__(copy=False, dl_device=(1, 0))  # the standard's answer; the conformance suite expects none


@pytest.mark.skipif(ON_GPU, reason="the simulator takes host producers")
def test_from_dlpack_refuses_read_only_memory():
    a = np.arange(3.0)
    a.flags.writeable = False
    with pytest.raises(ValueError, match=re.escape("marked read-only, and tensors are writable; copy it")):
        tp.from_dlpack(a)
    assert tp.tensor(a).tolist() == [0.0, 1.0, 2.0]


@pytest.mark.skipif(ON_GPU, reason="the simulator exports host memory")
def test_numpy_from_dlpack_of_a_strided_view():
    x = tp.tensor(np.arange(12, dtype=np.float64).reshape(3, 4))
    a = np.from_dlpack(x[:, ::2].t())
    np.testing.assert_array_equal(a, np.arange(12.0).reshape(3, 4)[:, ::2].T)


@pytest.mark.skipif(ON_GPU, reason="the simulator takes host producers")
def test_from_dlpack_of_a_numpy_array_shares_memory():
    a = np.arange(6, dtype=np.float32)
    t = tp.from_dlpack(a)
    assert t.data_ptr() == a.ctypes.data
    assert t.shape == (6,) and t.dtype == tp.float32
    np.testing.assert_array_equal(t.numpy(), a)
    a[0] = 100.0
    assert t[0].item() == 100.0
    t.add_(1.0)  # a kernel writes the NumPy array's memory
    tp.cuda.synchronize()
    np.testing.assert_array_equal(a, [101, 2, 3, 4, 5, 6])


@pytest.mark.skipif(ON_GPU, reason="the simulator takes host producers")
def test_from_dlpack_of_strided_numpy_views():
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    t = tp.from_dlpack(a[:, 1::2])
    assert t.shape == (3, 2) and not t.is_contiguous()
    np.testing.assert_array_equal(t.numpy(), a[:, 1::2])
    r = tp.from_dlpack(a[::-1])  # negative strides
    np.testing.assert_array_equal(r.numpy(), a[::-1])
    t.fill_(0)
    np.testing.assert_array_equal(a, [[0, 0, 2, 0], [4, 0, 6, 0], [8, 0, 10, 0]])


@pytest.mark.skipif(ON_GPU, reason="the simulator takes host producers")
def test_from_dlpack_nested_views_outlive_each_other():
    a = np.arange(10, dtype=np.float32)
    whole = tp.from_dlpack(a)
    part = tp.from_dlpack(a[2:5])
    del whole
    gc.collect()
    assert part.tolist() == [2.0, 3.0, 4.0]
    part.fill_(0.0)
    assert a[2:5].tolist() == [0.0, 0.0, 0.0]


@pytest.mark.skipif(ON_GPU, reason="the simulator takes host producers")
def test_from_dlpack_of_a_capsule():
    a = np.arange(4, dtype=np.int32)
    t = tp.from_dlpack(a.__dlpack__())
    assert t.tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("dtype", NARROW_INT_DTYPES, ids=str)
def test_narrow_integers_round_trip_through_dlpack(dtype):
    info = np.iinfo(dtype.np)
    x = tp.tensor([info.min, info.max, 7], dtype=dtype)
    y = tp.from_dlpack(x.__dlpack__(max_version=(1, 0)))
    assert y.dtype == dtype and y.data_ptr() == x.data_ptr() and y.tolist() == [info.min, info.max, 7]
    if not ON_GPU:  # NumPy reads the simulator's (host) memory: its own decoding of the dtype code
        a = np.from_dlpack(x)
        assert a.dtype == dtype.np and a.tolist() == [info.min, info.max, 7]
        host = np.array([info.max, 0, info.min], dtype=dtype.np)
        t = tp.from_dlpack(host)
        assert t.dtype == dtype and t.data_ptr() == host.ctypes.data
        t.sub_(1)
        tp.cuda.synchronize()
        assert host.tolist() == [info.max - 1, -1 if info.min else info.max, info.max]  # wrapped


def test_tensor_round_trips_through_its_own_dlpack():
    x = tp.tensor(np.arange(5, dtype=np.float32))
    y = tp.from_dlpack(x)
    assert y.data_ptr() == x.data_ptr()
    y.mul_(3.0)
    assert x.tolist() == [0.0, 3.0, 6.0, 9.0, 12.0]


@pytest.mark.gpu
def test_from_dlpack_of_a_cpu_producer_copies_it_to_the_gpu_unless_copy_is_false():
    """The standard's rule: copy=None copies memory that cannot be shared, copy=False refuses."""
    host = np.arange(4, dtype=np.float32)
    assert tp.from_dlpack(host).tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(BufferError, match="cannot share host memory"):
        tp.from_dlpack(host, copy=False)


# -- PyTorch and CuPy (on the GPU) -----------------------------------------------------


@pytest.mark.gpu
def test_torch_from_dlpack_of_a_tensor_shares_memory():
    torch = pytest.importorskip("torch")
    x = tp.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    t = torch.from_dlpack(x)
    assert t.is_cuda and tuple(t.shape) == (2, 3) and t.dtype == torch.float32
    assert t.data_ptr() == x.data_ptr()
    np.testing.assert_array_equal(t.cpu().numpy(), np.arange(6).reshape(2, 3))
    t.mul_(2)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(x.numpy(), 2 * np.arange(6).reshape(2, 3))
    v = torch.from_dlpack(x.t())
    assert tuple(v.stride()) == (1, 3)


@pytest.mark.gpu
def test_tp_from_dlpack_of_a_torch_tensor_shares_memory():
    torch = pytest.importorskip("torch")
    t = torch.arange(8, dtype=torch.float64, device="cuda")
    x = tp.from_dlpack(t)
    assert x.data_ptr() == t.data_ptr() and x.dtype == tp.float64 and x.shape == (8,)
    np.testing.assert_array_equal(x.numpy(), np.arange(8.0))
    x.add_(1.0)
    tp.cuda.synchronize()
    np.testing.assert_array_equal(t.cpu().numpy(), np.arange(8.0) + 1)
    s = tp.from_dlpack(t.view(2, 4)[:, 1::2])
    np.testing.assert_array_equal(s.numpy(), (np.arange(8.0) + 1).reshape(2, 4)[:, 1::2])


@pytest.mark.gpu
def test_tp_as_tensor_of_a_torch_tensor_uses_its_interface():
    torch = pytest.importorskip("torch")
    t = torch.ones(5, device="cuda")
    torch.cuda.synchronize()
    x = tp.as_tensor(t)
    assert x.data_ptr() == t.data_ptr()
    x.mul_(4.0)
    tp.cuda.synchronize()
    assert t.tolist() == [4.0] * 5


@pytest.mark.gpu
def test_cupy_round_trips():
    cupy = pytest.importorskip("cupy")
    c = cupy.arange(6, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    x = tp.as_tensor(c)
    assert x.data_ptr() == c.data.ptr
    np.testing.assert_array_equal(x.numpy(), np.arange(6))
    x.add_(10.0)
    tp.cuda.synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(c), np.arange(6) + 10)
    y = tp.tensor(np.arange(4, dtype=np.float32))
    tp.cuda.synchronize()
    d = cupy.asarray(y)
    assert d.data.ptr == y.data_ptr()
    d *= 3
    cupy.cuda.Device().synchronize()
    assert y.tolist() == [0.0, 3.0, 6.0, 9.0]
    e = cupy.from_dlpack(y)
    assert e.data.ptr == y.data_ptr()
    z = tp.from_dlpack(c)
    assert z.data_ptr() == c.data.ptr


def test_as_tensor_copies_numpy_arrays_on_every_backend():
    host = np.arange(4, dtype=np.float32)
    t = tp.as_tensor(host)
    host[:] = -1.0  # the tensor holds a copy, as its docstring says
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert tp.as_tensor(np.float64(2.5)).item() == 2.5


# -- writes between imports of the same memory ----------------------------------------
# Whether an op's output overlaps an input it reads is decided on addresses, so two
# imports of one buffer (or an import and the tensor it came from) are seen to overlap
# and read the old values, as NumPy's ufuncs and assignments do.

# name -> (the written view, the read view, the write in tensorplay, the same in NumPy)
OVERLAPPING_WRITES = {
    "add_ forward": (lambda b: b[1:], lambda b: b[:-1], lambda d, s: d.add_(s), lambda d, s: np.add(d, s, out=d)),
    "add_ backward": (lambda b: b[:-1], lambda b: b[1:], lambda d, s: d.add_(s), lambda d, s: np.add(d, s, out=d)),
    "sub_ strided": (
        lambda b: b[2::2],
        lambda b: b[:-2:2],
        lambda d, s: d.sub_(s),
        lambda d, s: np.subtract(d, s, out=d),
    ),
    "mul_ rows": (
        lambda b: b.reshape(3, 8)[:, 1:],
        lambda b: b.reshape(3, 8)[:, :-1],
        lambda d, s: d.mul_(s),
        lambda d, s: np.multiply(d, s, out=d),
    ),
    "add out=": (lambda b: b[1:], lambda b: b[:-1], lambda d, s: tp.add(s, s, out=d), lambda d, s: np.add(s, s, out=d)),
    "mul number out=": (
        lambda b: b[:-3],
        lambda b: b[3:],
        lambda d, s: tp.mul(s, 2.0, out=d),
        lambda d, s: np.multiply(s, 2.0, out=d),
    ),
    "neg out=": (lambda b: b[2:], lambda b: b[:-2], lambda d, s: tp.neg(s, out=d), lambda d, s: np.negative(s, out=d)),
    "copy_ forward": (lambda b: b[2:], lambda b: b[:-2], lambda d, s: d.copy_(s), lambda d, s: np.copyto(d, s)),
    "copy_ backward": (lambda b: b[:-2], lambda b: b[2:], lambda d, s: d.copy_(s), lambda d, s: np.copyto(d, s)),
    "copy_ strided": (lambda b: b[3::3], lambda b: b[:-3:3], lambda d, s: d.copy_(s), lambda d, s: np.copyto(d, s)),
}


def _imported(view):
    return tp.from_dlpack(view)


def _through_the_interface(view):
    return tp.as_tensor(CAIHolder(view.__cuda_array_interface__))


# name -> how the written and the read view reach tensorplay (each a function of a view of the buffer)
IMPORTS = {
    "two imports": (_imported, _imported),
    "import written, tensor read": (_imported, lambda v: v),
    "tensor written, import read": (lambda v: v, _imported),
    "two interface imports": (_through_the_interface, _through_the_interface),
}


@pytest.mark.parametrize("imports", IMPORTS)
@pytest.mark.parametrize("write", OVERLAPPING_WRITES)
def test_writes_between_imports_of_one_tensor_read_the_old_values(write, imports):
    dst_view, src_view, tp_write, np_write = OVERLAPPING_WRITES[write]
    as_dst, as_src = IMPORTS[imports]
    expected = np.random.default_rng(3).uniform(-2.0, 2.0, 24)
    x = tp.tensor(expected)
    tp_write(as_dst(dst_view(x)), as_src(src_view(x)))
    np_write(dst_view(expected), src_view(expected))
    np.testing.assert_allclose(x.numpy(), expected, rtol=1e-15)


@pytest.mark.skipif(ON_GPU, reason="the simulator takes host producers")
@pytest.mark.parametrize("write", OVERLAPPING_WRITES)
def test_writes_between_imports_of_one_numpy_array_read_the_old_values(write):
    dst_view, src_view, tp_write, np_write = OVERLAPPING_WRITES[write]
    a = np.random.default_rng(4).uniform(-2.0, 2.0, 24)
    expected = a.copy()
    tp_write(tp.from_dlpack(dst_view(a)), tp.from_dlpack(src_view(a)))
    tp.cuda.synchronize()
    np_write(dst_view(expected), src_view(expected))
    np.testing.assert_allclose(a, expected, rtol=1e-15)


def test_the_same_elements_imported_twice_are_written_in_place():
    """Two imports of the same view are not copied first: each element is read
    before it is written, as for ``x.add_(x)``."""
    expected = np.arange(6.0)
    x = tp.tensor(expected)
    tp.from_dlpack(x).mul_(tp.from_dlpack(x))
    tp.from_dlpack(x[::2]).add_(tp.from_dlpack(x[::2]))
    expected *= expected
    expected[::2] += expected[::2].copy()
    np.testing.assert_array_equal(x.numpy(), expected)
