"""``tp.fft``: every function against ``numpy.fft`` in float64 (odd sizes, n and
s padding and cutting, any axes, the three norms, complex64/128 and
float32/64 inputs, strided layouts), the types and the arguments' errors,
transforms captured in graphs and run in while bodies, and which path a call
takes. On the simulator the transforms are ``numpy.fft`` as the library's
call; on a GPU cuFFT (the ``gpu`` tests check that it is cuFFT).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import tensorplay as tp
from tensorplay._fft_choice import FFT

ON_SIM = tp.cuda.backend() == "sim"
RNG = np.random.default_rng(0)


def _data(shape, kind: str, seed: int) -> np.ndarray:
    """Random float64 (``kind`` "r") or complex128 ("c") values of ``shape``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if kind == "c" else x


def _check(got: tp.Tensor, want: np.ndarray, dtype: tp.DType, tol: float) -> None:
    assert got.dtype == dtype, (got.dtype, dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    np.testing.assert_allclose(got.numpy().astype(want.dtype), want, rtol=tol, atol=tol * scale)


# (function, input kind, shape, keyword arguments): numpy.fft's function of the same name is the reference
CASES = [
    ("fft", "c", (7,), {}),
    ("fft", "c", (3, 5), {"n": 8, "axis": 0}),
    ("fft", "c", (4, 6), {"n": 3, "norm": "ortho"}),
    ("fft", "r", (2, 9), {"norm": "forward"}),  # a real input: complex output, as PyTorch
    ("ifft", "c", (5, 3), {"axis": -2}),
    ("ifft", "c", (6,), {"n": 11, "norm": "ortho"}),
    ("ifft", "c", (2, 3, 4), {"axis": 1, "norm": "forward"}),
    ("fftn", "c", (3, 4, 5), {}),
    ("fftn", "c", (3, 4, 5), {"s": (2, 7), "axes": (2, 0), "norm": "ortho"}),
    ("fftn", "c", (2, 3, 2, 3, 2), {}),  # five axes: a rank-3 step, then a rank-2 one
    ("ifftn", "c", (4, 3, 5), {"s": (5, -1), "axes": (0, 2), "norm": "forward"}),
    ("fft2", "c", (2, 5, 6), {}),
    ("ifft2", "c", (5, 6), {"s": (4, 8)}),
    ("rfft", "r", (9,), {}),
    ("rfft", "r", (4, 6), {"n": 7, "axis": 0, "norm": "ortho"}),
    ("rfft", "r", (3, 10), {"n": 5, "norm": "forward"}),
    ("rfftn", "r", (4, 5, 6), {}),
    ("rfftn", "r", (4, 5, 6), {"axes": (2, 0), "s": (7, 3)}),  # the real axis is the last one named
    ("rfftn", "r", (2, 3, 2, 3, 2), {"norm": "ortho"}),
    ("rfft2", "r", (3, 4, 5), {}),
    ("irfft", "c", (3, 5), {}),
    ("irfft", "c", (5, 4), {"n": 9, "axis": 0}),
    ("irfft", "c", (4, 6), {"n": 4, "norm": "ortho"}),
    ("irfftn", "c", (4, 5, 4), {"axes": (0, 1, 2), "s": (4, 5, 6)}),
    ("irfftn", "c", (3, 4, 5), {"axes": (2, 0), "norm": "forward"}),
    ("irfftn", "c", (2, 3, 2, 3, 2), {"axes": (0, 1, 2, 3, 4), "s": (2, 3, 2, 3, 3)}),
    ("irfft2", "c", (4, 5), {}),
    ("hfft", "c", (6,), {}),
    ("hfft", "c", (4, 5), {"n": 7, "axis": 0, "norm": "ortho"}),
    ("ihfft", "r", (7,), {}),
    ("ihfft", "r", (3, 8), {"n": 6, "norm": "forward"}),
]


def _reference(name: str, a: np.ndarray, kwargs: dict) -> np.ndarray:
    np_name = {"fft2": "fftn", "ifft2": "ifftn", "rfft2": "rfftn", "irfft2": "irfftn"}.get(name, name)
    kw = dict(kwargs)
    if name.endswith("2"):
        kw.setdefault("axes", (-2, -1))
    elif np_name.endswith("n") and "s" in kw and "axes" not in kw:
        kw["axes"] = tuple(range(a.ndim - len(kw["s"]), a.ndim))
    if np_name.endswith("n") and "s" in kw:  # NumPy 2's -1: the axis's own length (its default elsewhere)
        kw["s"] = [a.shape[ax] if m == -1 else m for m, ax in zip(kw["s"], kw["axes"], strict=True)]
    return getattr(np.fft, np_name)(a, **kw)


def _ids(case) -> str:
    name, kind, shape, kwargs = case
    return f"{name}-{kind}{shape}-" + ",".join(f"{k}={v}" for k, v in kwargs.items())


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
@pytest.mark.parametrize("precision", ["double", "single"])
def test_each_function_against_numpy(case, precision):
    name, kind, shape, kwargs = case
    a = _data(shape, kind, seed=len(CASES) + hash(name) % 97)
    single = precision == "single"
    host = a.astype(np.complex64 if kind == "c" else np.float32) if single else a
    want = _reference(name, host.astype(a.dtype), kwargs)
    out_real = name in ("irfft", "irfftn", "irfft2", "hfft")
    dtype = {(True, True): tp.float32, (True, False): tp.float64}.get((out_real, single))
    if dtype is None:
        dtype = tp.complex64 if single else tp.complex128
    _check(getattr(tp.fft, name)(tp.tensor(host), **kwargs), want, dtype, 2e-5 if single else 1e-12)


@pytest.mark.parametrize("layout", ["transposed", "sliced", "offset"])
def test_strided_inputs_are_read_where_they_lie(layout):
    a = _data((6, 8), "c", seed=3)
    x = tp.tensor(a)
    view, want_in = {
        "transposed": (x.t(), a.T),
        "sliced": (x[::2, 1::3], a[::2, 1::3]),
        "offset": (x[1:, 2:], a[1:, 2:]),
    }[layout]
    _check(tp.fft.fft(view), np.fft.fft(want_in), tp.complex128, 1e-12)
    _check(tp.fft.fftn(view, axes=(0,)), np.fft.fftn(want_in, axes=(0,)), tp.complex128, 1e-12)
    r = tp.tensor(a.real.copy())
    _check(tp.fft.rfft(r.t(), axis=0), np.fft.rfft(a.real.T, axis=0), tp.complex128, 1e-12)
    assert (x.numpy() == a).all()  # the input is never written


def test_the_input_is_never_returned_nor_written():
    a = _data((4, 1), "c", seed=4)
    x = tp.tensor(a)
    out = tp.fft.fft(x, axis=1)  # a length-one axis: the transform is the input itself, as a new tensor
    assert out.data_ptr() != x.data_ptr()
    out.fill_(0)
    assert (x.numpy() == a).all()
    c = tp.tensor(np.fft.rfft(_data((3, 8), "r", seed=5)))
    before = c.numpy().copy()
    tp.fft.irfft(c)
    tp.fft.hfft(c)
    assert (c.numpy() == before).all()  # C2R overwrites its input: the library gets a copy


@pytest.mark.parametrize(
    "dtype, fn, out",
    [
        (tp.float32, "fft", tp.complex64),
        (tp.float64, "fft", tp.complex128),
        (tp.float16, "fft", tp.complex64),
        (tp.bfloat16, "rfft", tp.complex64),
        (tp.float16, "irfft", tp.float32),
        (tp.complex64, "irfft", tp.float32),
        (tp.complex128, "hfft", tp.float64),
        (tp.float64, "ihfft", tp.complex128),
        (tp.float32, "irfft", tp.float32),  # a real input of a complex-to-real transform: its imaginary parts are 0
    ],
    ids=str,
)
def test_result_types(dtype, fn, out):
    a = _data((2, 6), "r", seed=6)
    x = tp.tensor(a).to(dtype)
    got = getattr(tp.fft, fn)(x)
    assert got.dtype == out
    tol = 1e-2 if dtype in (tp.float16, tp.bfloat16) else 1e-5
    want = getattr(np.fft, fn)(x.to(tp.float64).numpy() if dtype.kind == "f" else x.numpy())
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol * 10)


def test_pytorch_spellings():
    a = _data((4, 6), "c", seed=7)
    x = tp.tensor(a)
    _check(tp.fft.fft(x, 5, 0), np.fft.fft(a, 5, axis=0), tp.complex128, 1e-12)  # (input, n, dim, norm)
    _check(tp.fft.ifft(x, None, 0, "ortho"), np.fft.ifft(a, axis=0, norm="ortho"), tp.complex128, 1e-12)
    _check(tp.fft.fft(x, dim=0), np.fft.fft(a, axis=0), tp.complex128, 1e-12)
    _check(tp.fft.fftn(x, None, (0,)), np.fft.fftn(a, axes=(0,)), tp.complex128, 1e-12)
    _check(tp.fft.fft(x, norm=None), np.fft.fft(a), tp.complex128, 1e-12)  # PyTorch's default
    _check(tp.fft.fft2(x, (3, 3)), np.fft.fft2(a, (3, 3)), tp.complex128, 1e-12)
    _check(tp.fft.fftshift(x, dim=1), np.fft.fftshift(a, axes=1), tp.complex128, 0)
    with pytest.raises(TypeError, match=r"^fft\(\) got axis=1 and dim=0, two spellings of one argument"):
        tp.fft.fft(x, dim=0, axis=1)


def test_frequencies_and_shifts():
    for n in (1, 6, 7):
        np.testing.assert_allclose(tp.fft.fftfreq(n, d=0.3, dtype=tp.float64).numpy(), np.fft.fftfreq(n, 0.3))
        np.testing.assert_allclose(tp.fft.rfftfreq(n, 2.5, dtype=tp.float64).numpy(), np.fft.rfftfreq(n, 2.5))
    f = tp.fft.fftfreq(8)
    assert f.dtype == tp.float32 and tp.fft.rfftfreq(5, dtype=tp.float16).dtype == tp.float16
    np.testing.assert_allclose(f.numpy(), np.fft.fftfreq(8), rtol=1e-7)
    a = _data((3, 4, 5), "r", seed=8)
    x = tp.tensor(a)
    assert (tp.fft.fftshift(x).numpy() == np.fft.fftshift(a)).all()
    assert (tp.fft.ifftshift(x, axes=(0, 2)).numpy() == np.fft.ifftshift(a, axes=(0, 2))).all()
    assert (tp.fft.ifftshift(tp.fft.fftshift(x, axes=-1), axes=-1).numpy() == a).all()
    c = tp.tensor(_data((5,), "c", seed=9))
    assert (tp.fft.fftshift(c).numpy() == np.fft.fftshift(c.numpy())).all()


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: tp.fft.fft(tp.arange(4)), TypeError,
         "fft() expects a floating-point or complex tensor, got tensorplay.int64; convert it first (x.to(tp.float32))"),
        (lambda: tp.fft.rfft(tp.ones(4, dtype=tp.complex64)), TypeError,
         "rfft() expects a real floating-point tensor, got tensorplay.complex64; fft() transforms complex input"),
        (lambda: tp.fft.rfftn(tp.ones(4, dtype=tp.bool)), TypeError,
         "rfftn() expects a real floating-point tensor, got tensorplay.bool; convert it first (x.to(tp.float32))"),
        (lambda: tp.fft.fft(tp.ones(4), norm="unitary"), ValueError,
         "fft() expects norm to be 'backward', 'ortho' or 'forward', got 'unitary'"),
        (lambda: tp.fft.fft(tp.ones(4), n=0), ValueError, "fft() expects n >= 1, got 0"),
        (lambda: tp.fft.fft(tp.ones(4), n=2.0), TypeError, "fft() expects n to be an int or None, got 2.0"),
        (lambda: tp.fft.fft(tp.ones((2, 3)), axis=2), IndexError,
         "fft() got axis 2, out of range for a tensor of 2 dimensions"),
        (lambda: tp.fft.fft(tp.ones(())), IndexError, "fft() got axis -1, out of range for a tensor of 0 dimensions"),
        (lambda: tp.fft.fftn(tp.ones((2, 3)), axes=(0, -2)), ValueError,
         "fftn() expects distinct axes, got axes=(0, -2)"),
        (lambda: tp.fft.fftn(tp.ones((2, 3)), s=(2, 3), axes=(0,)), ValueError,
         "fftn() expects one size per axis, got s=(2, 3) for axes (0,)"),
        (lambda: tp.fft.fftn(tp.ones((2, 3)), s=(0, 3)), ValueError,
         "fftn() expects sizes of 1 or more (or -1: the axis's own length), got s=(0, 3)"),
        (lambda: tp.fft.fftn(tp.ones(3), s=(2, 3)), ValueError,
         "fftn() got s=(2, 3), more sizes than the 1 axes of the input"),
        (lambda: tp.fft.fftn(tp.ones(3), axes="ab"), TypeError, "fftn() expects axes as a sequence of ints, got 'ab'"),
        (lambda: tp.fft.irfft(tp.ones((3, 1), dtype=tp.complex64)), ValueError,
         "irfft() cannot transform axis 1 of 2 * (1 - 1) = 0 points; pass n of 1 or more"),
        (lambda: tp.fft.fft(tp.ones((0, 2))[:, 0]), ValueError,
         "fft() cannot transform axis 0 of length 0; pass n of 1 or more"),
        (lambda: tp.fft.rfftn(tp.ones(3), axes=()), ValueError,
         "rfftn() needs at least one axis to transform, got axes=()"),
        (lambda: tp.fft.fft([1.0, 2.0]), TypeError, "fft() expects a tensor, got list"),
        (lambda: tp.fft.fftfreq(0), ValueError, "fftfreq() expects n to be an int of 1 or more, got 0"),
        (lambda: tp.fft.rfftfreq(4, dtype=tp.int32), TypeError,
         "rfftfreq() expects a real floating-point dtype, got tensorplay.int32"),
    ],
    ids=lambda v: "" if callable(v) or isinstance(v, type) else v[:40],
)  # fmt: skip
def test_errors_are_sentences(call, error, message):
    with pytest.raises(error, match="^" + re.escape(message) + "$"):
        call()


def test_empty_batches_and_axes():
    x = tp.ones((0, 4), dtype=tp.complex64)
    assert tp.fft.fft(x).shape == (0, 4) and tp.fft.rfft(tp.ones((0, 4))).shape == (0, 3)
    assert tp.fft.irfft(x, n=6).shape == (0, 6)
    a = _data((2, 3), "c", seed=10)
    _check(tp.fft.fftn(tp.tensor(a), axes=()), a, tp.complex128, 0)  # no axes: a copy, as NumPy
    padded = tp.fft.fft(tp.ones((2, 0), dtype=tp.complex128), n=3)  # nothing but zeros padded in
    _check(padded, np.zeros((2, 3), complex), tp.complex128, 0)


# -- graphs -----------------------------------------------------------------------------------


def test_transforms_are_captured_and_replayed_on_new_inputs():
    a, r = _data((3, 8), "c", seed=11), _data((4, 6), "r", seed=12)
    x, y = tp.tensor(a), tp.tensor(r)
    tp.fft.fft(x), tp.fft.irfft(tp.fft.rfft(y, n=7), n=6)  # warm-up (plans made before the capture)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        f = tp.fft.fftn(x, s=(4, 5), norm="ortho")  # cut and padded: copies inside the graph
        back = tp.fft.irfftn(tp.fft.rfftn(y, axes=(0, 1)), s=(4, 6))
        spectrum = tp.fft.fftshift(tp.fft.fft(x, axis=0))
    for seed in (13, 14):
        a, r = _data((3, 8), "c", seed=seed), _data((4, 6), "r", seed=seed + 10)
        x.copy_(tp.tensor(a))
        y.copy_(tp.tensor(r))
        g.replay()
        _check(f, np.fft.fftn(a, s=(4, 5), axes=(0, 1), norm="ortho"), tp.complex128, 1e-12)
        _check(back, r, tp.float64, 1e-12)
        _check(spectrum, np.fft.fftshift(np.fft.fft(a, axis=0)), tp.complex128, 1e-12)


def test_a_transform_first_met_inside_a_capture():
    a = _data((5, 7), "c", seed=15)
    x = tp.tensor(a)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        out = tp.fft.ifft2(x, s=(5, 9))  # a shape seen by no eager call: its plan is made during the capture
    g.replay()
    _check(out, np.fft.ifft2(a, s=(5, 9)), tp.complex128, 1e-12)


def test_a_while_body_shifts_a_signal_by_its_spectrum():
    # v <- irfft(rfft(v) * exp(-2 pi i k / n)): one step of a circular shift each pass, in a while node.
    n = 8
    v0 = _data((2, n), "r", seed=16)
    v = tp.tensor(v0)
    phase = tp.tensor(np.exp(-2j * np.pi * np.arange(n // 2 + 1) / n))
    count, flag = tp.tensor([0], dtype=tp.int32), tp.empty(1, dtype=tp.bool)
    tp.fft.irfft(tp.fft.rfft(v) * phase, n=n)  # warm-up
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        tp.gt(count, 0, out=flag)
        with g.while_(flag):
            v.copy_(tp.fft.irfft(tp.fft.rfft(v) * phase, n=n))
            count.sub_(1)
            tp.gt(count, 0, out=flag)
    shifted = 0
    for passes in (3, 2):
        count.fill_(passes)
        g.replay()
        shifted += passes
        np.testing.assert_allclose(v.numpy(), np.roll(v0, shifted, axis=1), rtol=1e-12, atol=1e-12)


def test_frequencies_are_made_on_the_device_inside_a_capture():
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        f = tp.fft.fftfreq(6, d=0.5, dtype=tp.float64)
        r = tp.fft.rfftfreq(7, dtype=tp.float64)
    g.replay()
    np.testing.assert_allclose(f.numpy(), np.fft.fftfreq(6, 0.5))
    np.testing.assert_allclose(r.numpy(), np.fft.rfftfreq(7))


def test_a_compiled_function_with_transforms():
    f = tp.compile(lambda x: tp.fft.irfft(tp.fft.rfft(x) * 2.0, n=8) + x * 3)
    for seed in range(4):  # warm-up, capture, replays on new inputs
        a = _data((8,), "r", seed=20 + seed)
        np.testing.assert_allclose(f(tp.tensor(a)).numpy(), 5 * a, rtol=1e-12, atol=1e-12)


# -- which path ---------------------------------------------------------------------------------


@pytest.mark.skipif(not ON_SIM, reason="the simulator's path")
def test_explain_on_the_simulator():
    text = FFT.explain("irfftn", (4, 6, 5, 3), "complex64")
    assert text == (
        "irfftn (4, 6, 5, 3) complex64 -> (4, 6, 5, 4) float32, axes (0, 1, 2, 3), n (4, 6, 5, 4): numpy.fft on "
        "the simulator (cuFFT runs on a GPU only, and this is the CPU simulator), in cuFFT's steps: C2C of rank 1, "
        "sizes [4], batch 90 over axes (0,); then C2R of rank 3, sizes [6, 5, 4], batch 4 over axes (1, 2, 3); "
        "then scaled by 0.00208333 (norm='backward')"
    ), text
    assert FFT.explain("rfft", (3, 1), "float32").endswith("no library call (every axis transformed has length one, "
                                                            "or nothing to transform)")  # fmt: skip
    assert FFT.explain("rfftn", (3, 4), "float64", s=(3, 1)).endswith(
        "over axes (0,) (an R2C of last length one is a C2C)"
    )
    assert FFT.plans == 0  # no cuFFT plan here


def test_explain_checks_its_arguments_as_the_functions_do():
    with pytest.raises(ValueError, match=r"^explain\(\) expects one of fft, ifft, .*, got 'dct'$"):
        FFT.explain("dct", (4,))
    with pytest.raises(TypeError, match=r"^rfft\(\) expects a real floating-point tensor, got tensorplay.complex64"):
        FFT.explain("rfft", (4,), "complex64")
    assert FFT.explain("fft2", (3, 4, 5)).startswith("fft2 (3, 4, 5) complex64 -> (3, 4, 5) complex64, axes (1, 2)")


# -- on the GPU: cuFFT ----------------------------------------------------------------------------


@pytest.mark.gpu
def test_the_gpu_takes_cufft_and_matches_numpy():
    text = FFT.explain("fft", (4, 1 << 16))
    assert "cuFFT (nvmath-python " in text and "cufftExecC2C of rank 1, sizes [65536], batch 4" in text, text
    cases = [
        ("fft", "c", (4, 1 << 16), {}, tp.complex64),
        ("ifft", "c", (3, 5 * 7 * 11 * 13), {"norm": "ortho"}, tp.complex128),  # odd, not a power of two
        ("fft2", "c", (256, 384), {}, tp.complex64),
        ("rfft", "r", (1 << 18,), {}, tp.complex64),
        ("irfft", "c", (6, 1001), {"n": 2001}, tp.float64),
        ("rfftn", "r", (2, 30, 40, 50), {"axes": (1, 2, 3)}, tp.complex128),
        ("irfftn", "c", (5, 6, 7, 8), {}, tp.float32),  # four axes: a C2C step and a rank-3 C2R one
    ]
    for name, kind, shape, kwargs, dtype in cases:
        a = _data(shape, kind, seed=17)
        single = dtype in (tp.complex64, tp.float32)
        host = a.astype(np.complex64 if kind == "c" else np.float32) if single else a
        plans = FFT.plans
        got = getattr(tp.fft, name)(tp.tensor(host), **kwargs)
        assert FFT.plans > plans or name == "fft"  # a plan made for each new shape
        want = _reference(name, host.astype(a.dtype), kwargs)
        err = np.linalg.norm(got.numpy().astype(want.dtype) - want) / np.linalg.norm(want)
        assert err < (5e-6 if single else 1e-13), (name, shape, err)


@pytest.mark.gpu
def test_cufft_in_a_graph_and_a_while_body_on_the_gpu():
    assert "cuFFT" in FFT.explain("rfft", (2, 8), "float64")
    test_transforms_are_captured_and_replayed_on_new_inputs()
    test_a_transform_first_met_inside_a_capture()
    test_a_while_body_shifts_a_signal_by_its_spectrum()


def test_a_bluestein_plan_first_met_inside_a_capture_is_refused_with_what_to_do():
    # cuFFT makes plans of lengths with a prime factor over 127 (Bluestein's) by computing tables on the
    # device, which fails inside a capture (CUFFT_INTERNAL_ERROR on the H200): refused, on both backends.
    x = tp.tensor(_data((3, 131), "c", seed=30))
    g = tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.CaptureError, match=r"prime factor over 127.*call the same transform once before"):
        with tp.cuda.graph(g):
            tp.fft.fft(x)
    want = np.fft.fft(x.numpy())
    _check(tp.fft.fft(x), want, tp.complex128, 1e-12)  # the runtime is usable: eagerly, then captured
    with tp.cuda.graph(g):
        out = tp.fft.fft(x)
    g.replay()
    _check(out, want, tp.complex128, 1e-12)
