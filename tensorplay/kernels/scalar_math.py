"""The scalar math of the elementwise ops: what the op table's device functions
call (``kernels/op_table.py``), real and complex.

On the GPU the library functions are Numba's ``math`` (C99's, through
libdevice) and, for complex arguments, its ``cmath``: ``either(name)`` is one
function of either, chosen as Numba types a kernel (an overload), so an entry
such as ``exp`` has one device function for every dtype. On the simulator,
which runs kernels as Python over NumPy scalars, they are NumPy's functions
(which take both, and give inf and NaN where Python's ``math`` raises).

The functions written here follow the array API standard's special cases
(signed zeros, NaN, infinities) where the libraries have no such function or
differ from it: ``round`` (ties to even), ``signum``, ``logaddexp``,
``digamma``, ``clamp``, ``floordiv`` (of an infinite operand: ``floor(a / b)``,
which the standard prefers to Python's), ``remainder`` (NumPy's) and, for complex numbers, ``divide``
(NumPy's, where Numba's raises on a zero divisor), ``sign``, ``expm1``,
``log1p``, ``log2`` and ``tanh``'s infinities. ``real_or_complex`` and
``float_or_integer`` make one function of an implementation per kind.

This module imports nothing of tensorplay (the GPU compile check loads the
kernel modules on their own).
"""

from __future__ import annotations

import cmath
import math

import numpy as np

from ._target import IEEE_MATH, INTRINSICS, device_function

__all__ = ["either", "float_or_integer", "ieee", "one", "real_or_complex"]  # and the functions below

_NUMPY_NAMES = {"acos": "arccos", "acosh": "arccosh", "asin": "arcsin", "asinh": "arcsinh", "atan": "arctan",
                "atanh": "arctanh", "atan2": "arctan2"}  # fmt: skip


def _python_twin(name: str):
    """Python's ``math.<name>`` (which NumPy lacks), in its argument's type, with
    C99's result where Python raises instead (``lgamma`` at its poles: inf)."""
    fn = getattr(math, name)

    def twin(x):
        try:
            return type(x)(fn(x))
        except (ValueError, OverflowError):
            return type(x)(math.inf)

    return twin


def ieee(name: str, twin=None):
    """``math.<name>`` for the kernels (Numba's: C99's on the GPU). On the
    simulator, NumPy's (or ``twin``) instead: it gives inf and NaN where
    Python's ``math`` raises (``log(0)``, ``sqrt(-1)``, ``exp(1000)``), as the GPU does."""
    if IEEE_MATH:
        return getattr(math, name)
    fn = twin or getattr(np, _NUMPY_NAMES.get(name, name))

    def wrapped(*args):
        with np.errstate(all="ignore"):
            return fn(*args)

    return wrapped


def _by_type(arity: int, choose, twin):
    """A function that Numba resolves as it types a kernel: ``choose`` gives the
    implementation for its arguments' Numba types (an overload: no test at run
    time; implementations name their arguments ``x``, or ``a`` and ``b``, as it
    does). On the simulator, which runs kernels as Python, ``twin``. Device
    functions call it (``lambda x: sm.exp(x)``); it is no device function itself."""
    if not IEEE_MATH:
        return twin
    from numba.cuda.extending import overload

    if arity == 1:

        def fn(x):
            raise NotImplementedError("a device function: called in kernels only")

        overload(fn)(lambda x: choose(x))
    else:

        def fn(a, b):
            raise NotImplementedError("a device function: called in kernels only")

        overload(fn)(lambda a, b: choose(a, b))
    return fn


def _any_of(kind: str, python_types: tuple):
    """``(numba_test, python_test)``: whether any argument is of a kind (``Complex``, ``Float``)."""

    def numba_test(*args) -> bool:
        from numba.cuda import types

        return any(isinstance(a, getattr(types, kind)) for a in args)

    return numba_test, lambda *args: any(isinstance(a, python_types) for a in args)


_COMPLEX = _any_of("Complex", (complex, np.complexfloating))
_FLOAT = _any_of("Float", (float, np.floating))


def real_or_complex(real, complex_, arity: int = 1, twin=None):
    """``real`` of real arguments, ``complex_`` where one is complex (on the
    simulator ``twin`` if given: NumPy's functions take both)."""
    numba_test, python_test = _COMPLEX

    def by_test(*args):
        return complex_(*args) if python_test(*args) else real(*args)

    return _by_type(arity, lambda *ts: complex_ if numba_test(*ts) else real, twin or by_test)


def float_or_integer(floating, integer):
    """``floating`` of two arguments where one is a float, else ``integer``."""
    numba_test, python_test = _FLOAT

    def by_test(a, b):
        return floating(a, b) if python_test(a, b) else integer(a, b)

    return _by_type(2, lambda *ts: floating if numba_test(*ts) else integer, by_test)


def either(name: str):
    """``math.<name>`` of a real argument, ``cmath.<name>`` of a complex one."""
    real, complex_ = getattr(math, name), getattr(cmath, name)
    return real_or_complex(lambda x: real(x), lambda x: complex_(x), twin=ieee(name))


if INTRINSICS:
    from numba.cuda.extending import intrinsic

    @intrinsic
    def one(typingctx, x):
        """1 in ``x``'s type. Numba types a literal ``1.0`` float64 and ``1`` int64,
        either of which makes float32 math float64: ``1.0 / (1.0 + exp(-x))`` was a
        float64 add and reciprocal per element (on 1M float32 in a graph on the
        H200, 2.92 us a launch; 2.83 in float32)."""
        return x(x), lambda context, builder, sig, args: context.get_constant(sig.return_type, 1)

else:

    def one(x):
        return type(x)(1)


# -- the library's -------------------------------------------------------------------------------

exp, log, log10, sqrt, sin, cos, tan = (either(n) for n in ("exp", "log", "log10", "sqrt", "sin", "cos", "tan"))
isinf, isfinite = either("isinf"), either("isfinite")
asin, atan = either("asin"), either("atan")
floor, ceil, trunc, atan2, hypot = (ieee(n) for n in ("floor", "ceil", "trunc", "atan2", "hypot"))
copysign, nextafter, fmod = ieee("copysign"), ieee("nextafter"), ieee("fmod")
erf, erfc, lgamma = (ieee(n, _python_twin(n)) for n in ("erf", "erfc", "lgamma"))
LN2, LN10, PI = math.log(2.0), math.log(10.0), math.pi
_expm1, _log1p, _log2 = ieee("expm1"), ieee("log1p"), ieee("log2")


# -- complex functions the libraries lack ------------------------------------------------------


def _complex_expm1(x):
    """``exp(x) - 1``, accurate near 0: ``expm1(a) cos b - 2 sin^2(b / 2) + i exp(a) sin b``
    (``+ 0.0``: -0 + 0j gives +0 + 0j); the standard's special cases at infinite and NaN parts."""
    a, b = x.real, x.imag
    if isinf(a):
        if a < 0:  # +0 cis(b) - 1
            return complex(-1.0, copysign(0.0, sin(b)) if isfinite(b) else 0.0)
        if b == 0 or not isfinite(b):
            return complex(a, b if b == 0 else math.nan)
        return complex(a * cos(b), a * sin(b))  # inf cis(b) - 1
    if a != a:
        return complex(a, b) if b == 0 else complex(math.nan, math.nan)
    half = sin(b * 0.5)
    return complex(_expm1(a) * cos(b) - 2.0 * half * half + 0.0, exp(a) * sin(b))


def _complex_log1p(x):
    """``log(1 + x)``, accurate near 0: ``log |1 + x|`` as ``log1p(2a + a^2 + b^2) / 2``."""
    a, b = x.real, x.imag
    if abs(a) < 0.5 and abs(b) < 0.5:
        return complex(0.5 * _log1p(a * (2.0 + a) + b * b), atan2(b, 1.0 + a))
    return log(x + 1.0)


# The standard's (C99 Annex G's) values at signed zeros, infinities and NaN that Numba's cmath on the
# GPU does not give (the array API suite's special cases); NumPy, the simulator's, gives them already.
_ccosh, _csinh, _ctanh, _cacos, _cacosh, _casinh, _catanh = (
    getattr(cmath, n) if IEEE_MATH else ieee(n) for n in ("cosh", "sinh", "tanh", "acos", "acosh", "asinh", "atanh")
)
_NAN = math.nan


def _complex_cosh(x):
    a, b = x.real, x.imag
    if isinf(a) and isinf(b):
        return complex(abs(a), _NAN)
    if (a == 0 and not isfinite(b)) or (a != a and b == 0):
        return complex(_NAN, 0.0)
    return _ccosh(x)


def _complex_sinh(x):
    a, b = x.real, x.imag
    if (isinf(a) and isinf(b)) or (a == 0 and not isfinite(b)):
        return complex(a, _NAN)
    if a != a and b == 0:
        return complex(_NAN, b)
    return _csinh(x)


def _complex_tanh(x):
    """Also at an infinite real part and a finite imaginary one: +-1 + 0j, the
    zero of b's sign (C99's and NumPy's take sin(2b)'s)."""
    a, b = x.real, x.imag
    if isinf(a) and isfinite(b):
        return complex(copysign(1.0, a), copysign(0.0, b))
    if a == 0 and not isfinite(b):
        return complex(a, _NAN)
    if a != a and b == 0:
        return complex(_NAN, b)
    return _ctanh(x)


def _complex_acos(x):
    if x.real == 0 and x.imag != x.imag:
        return complex(PI / 2, _NAN)
    return _cacos(x)


def _complex_acosh(x):
    if x.real == 0 and x.imag != x.imag:
        return complex(_NAN, PI / 2)
    return _cacosh(x)


def _complex_asinh(x):
    if x.real != x.real and x.imag == 0:
        return complex(_NAN, x.imag)
    return _casinh(x)


def _complex_atanh(x):
    a, b = x.real, x.imag
    if a == 0 and b != b:
        return complex(a, _NAN)
    if a != a and isfinite(b):
        return complex(_NAN, _NAN)
    return _catanh(x)


def _with_cases(name: str, complex_):
    """``math.<name>`` of a real argument (IEEE's on the simulator), ``complex_`` of a complex one."""
    real, real_twin = getattr(math, name), ieee(name)
    python_test = _COMPLEX[1]
    return real_or_complex(lambda x: real(x), complex_, twin=lambda x: complex_(x) if python_test(x) else real_twin(x))


cosh, sinh, tanh = (
    _with_cases("cosh", _complex_cosh),
    _with_cases("sinh", _complex_sinh),
    _with_cases("tanh", _complex_tanh),
)
acos, acosh = _with_cases("acos", _complex_acos), _with_cases("acosh", _complex_acosh)
asinh, atanh = _with_cases("asinh", _complex_asinh), _with_cases("atanh", _complex_atanh)


def _complex_log2(x):
    z = log(x)
    return complex(z.real / LN2, z.imag / LN2)


expm1 = real_or_complex(lambda x: _expm1(x), _complex_expm1)
log1p = real_or_complex(lambda x: _log1p(x), _complex_log1p)
log2 = real_or_complex(lambda x: _log2(x), _complex_log2)


# -- written here ----------------------------------------------------------------------------------


def _round(x):
    """Round half to even, as C's ``rint``: ties go to the even neighbour, the
    sign is kept (-0.4 gives -0.0), infinities and NaN are themselves."""
    o = one(x)
    half = o / (o + o)
    r = floor(x)
    d = x - r  # NaN for infinities (inf - inf) and NaN: no adjustment
    if d > half or (d == half and floor(r * half) * (o + o) != r):
        r = r + o
    return copysign(r, x)


# (what an overload's implementation calls must be a device function on the GPU)
_round_part = device_function(_round) if IEEE_MATH else _round


def _complex_round(x):
    """The real and imaginary parts rounded on their own (the standard's)."""
    return complex(_round_part(x.real), _round_part(x.imag))


round_ = real_or_complex(_round, _complex_round)


def _signum(x):
    """-1, 0 or 1 by the sign of ``x``; NaN for NaN (the standard's ``sign``)."""
    return x if x != x else int(x > 0) - int(x < 0)


def _complex_sign(x):
    """``x / |x|``, 0 at 0: NaN + NaN j where a part is NaN (the standard's) or
    both are infinite, the unit along an infinite part where one is (NumPy's)."""
    re, im = x.real, x.imag
    if re != re or im != im or (isinf(re) and isinf(im)):
        return complex(math.nan, math.nan)
    if isinf(re) or isinf(im):
        return complex(copysign(1.0, re) if isinf(re) else 0.0, copysign(1.0, im) if isinf(im) else 0.0)
    m = hypot(re, im)
    if m == 0:
        return complex(0.0, 0.0)
    return complex(re / m, im / m)


signum = real_or_complex(_signum, _complex_sign)


def _real_divide(a, b):
    return a / b


def _complex_divide(a, b):
    """``a / b`` as NumPy divides complex numbers (Smith's method; a zero
    divisor gives infinite or NaN parts, where Numba's division, CPython's, raises)."""
    ar, ai, br, bi = a.real, a.imag, b.real, b.imag
    if abs(br) >= abs(bi):
        if br == 0 and bi == 0:
            return complex(ar / abs(br), ai / abs(br))
        ratio = bi / br
        scale = one(ratio) / (br + bi * ratio)
        return complex((ar + ai * ratio) * scale, (ai - ar * ratio) * scale)
    ratio = br / bi
    scale = one(ratio) / (bi + br * ratio)
    return complex((ar * ratio + ai) * scale, (ai * ratio - ar) * scale)


divide = real_or_complex(_real_divide, _complex_divide, arity=2)


def _float_floordiv(a, b):
    """``a // b`` of floats: where an operand is infinite, ``floor(a / b)``, as
    the standard prefers (inf // 2 is inf, -5 // inf is -0, where Python's and
    NumPy's give NaN and -1); elsewhere Python's (1 // 0.1 is 9, not floor(10.0))."""
    if isinf(a) or isinf(b):
        return floor(a / b)
    return a // b


def _integer_floordiv(a, b):
    return a // b


floordiv = float_or_integer(_float_floordiv, _integer_floordiv)


def _inexact_power(a, b):
    return a**b


def _integer_power(a, b):
    """``a ** b`` of integers, as PyTorch's: a negative exponent gives ``1 / a ** -b``
    truncated (1 of 1, -1 or 1 of -1, else 0), where NumPy raises."""
    if b < 0:
        if a == 1:
            return a
        if a == -1:
            return a if b % 2 else -a
        return a - a
    return a**b


def _choose_power(*types):
    """``_integer_power`` where both arguments are integers or bools, else ``a ** b``."""
    from numba.cuda import types as nt

    exact = all(isinstance(t, (nt.Integer, nt.Boolean)) for t in types)
    return _integer_power if exact else _inexact_power


def _python_power(a, b):
    exact = all(isinstance(v, (int, np.integer, np.bool_)) for v in (a, b))  # bool is an int
    return _integer_power(a, b) if exact else _inexact_power(a, b)


power = _by_type(2, _choose_power, _python_power)


def _float_remainder(a, b):
    """``a % b`` of floats as NumPy's divmod computes it: ``fmod``, moved into
    the divisor's sign, and a zero of the divisor's sign. The standard's cases
    of an infinite divisor follow (-1 % inf is inf, 1 % inf is 1), where the
    GPU's ``a - b * floor(a / b)`` gives NaN."""
    r = fmod(a, b)
    if r != 0:
        if (b < 0) != (r < 0):
            r += b
    else:
        r = copysign(r, b)
    return r


def _integer_remainder(a, b):
    return a % b


remainder = float_or_integer(_float_remainder, _integer_remainder)


def _integer_fmod(a, b):
    """C's ``%`` of integers: the remainder with the dividend's sign (0 by 0, as ``remainder``)."""
    r = a % b  # as _integer_remainder (an overload's implementation calls no plain Python function)
    if r != 0 and (r < 0) != (a < 0):
        r -= b
    return r


truncated_remainder = float_or_integer(lambda a, b: fmod(a, b), _integer_fmod)  # NumPy's and PyTorch's fmod


def logaddexp(a, b):
    """``log(exp(a) + exp(b))`` without overflow, as NumPy's: equal operands
    (equal infinities too, whose difference is NaN) give ``a + log 2``."""
    if a == b:
        return a + LN2
    d = a - b
    if d > 0:
        return a + _log1p(exp(-d))
    if d <= 0:
        return b + _log1p(exp(d))
    return d  # NaN


def digamma(x):
    """The logarithmic derivative of the gamma function (``lgamma``'s), as
    PyTorch's: -inf at +0 (+inf at -0), NaN at the negative integers; the
    reflection formula below 0, the recurrence up to 10, then the asymptotic
    series to its x^-14 term (the next is 4e-17 at 10); in float64 (as the GPU
    computes it, on both targets)."""
    x = float(x)
    if x == 0:
        return copysign(math.inf, -x)
    if x < 0 and floor(x) == x:
        return math.nan
    reflected = 0.0
    if x < 0:  # psi(x) = psi(1 - x) - pi / tan(pi x)
        reflected = PI / tan(PI * x)
        x = 1.0 - x
    result = 0.0
    while x < 10.0:
        result -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    tail = 1.0 / 132 - f * (691.0 / 32760 - f * (1.0 / 12))
    series = f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * tail))))
    return result + log(x) - 0.5 / x - series - reflected


def clamp(x, lo, hi):
    """``min(max(x, lo), hi)``: NaN in ``x`` or in either bound gives NaN (the
    standard's ``clip``), and ``lo > hi`` gives ``hi`` (as in PyTorch and NumPy)."""
    y = lo if (x < lo or lo != lo) else x
    return hi if (y > hi or hi != hi) else y
