"""The op table: one entry per elementwise op, from which everything else comes.

An entry holds the op's scalar device function, its dtype rule, the dtypes it
takes, its public names (the ``tp.`` function, its Tensor method and operator,
and their aliases, PyTorch's and the array API standard's) and its backward.
The Tensor methods and operators (``tensorplay/_methods.py``), the ``tp.``
functions (``_elementwise_functions.py``), the dtype checks (``_ops.py``), the kernels
(``kernels/elementwise.py``, ``kernels/fused.py``) and autograd
(``_differentiable.py``) are all derived from the entries, so adding an op is
adding an entry here. Backwards take ``(g, *inputs, out)`` and return a
gradient per input (None for none); they use only the tensors' own methods, so
this file imports nothing of tensorplay. For complex operands they give
PyTorch's gradient (``_tape``): a holomorphic op's is ``g`` times the
conjugate of its derivative (``_conj``), and ``abs``, ``sign``, ``real``,
``imag`` and ``conj``, which are not holomorphic, have their own.

The device functions and their special cases (the array API standard's:
signed zeros, NaN, infinities) are in ``kernels/scalar_math.py``: one
function per entry, for real and complex operands alike.

Examples
--------
>>> import tensorplay as tp
>>> x = tp.tensor([-2.5, -0.5, 0.5, 1.5])
>>> tp.round(x).tolist(), x.fix().tolist(), tp.negative is tp.neg  # (fix: an alias of trunc)
([-2.0, -0.0, 0.0, 2.0], [-2.0, -0.0, 0.0, 1.0], True)
"""

from __future__ import annotations

import cmath
import math
from dataclasses import dataclass

from . import scalar_math as sm
from ._target import device_function

__all__ = ["FILL", "OPS", "TERNARY", "Op", "identity"]


@device_function
def identity(x):
    return x


# -- entries --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """One elementwise op.

    ``result`` is the dtype rule: ``"same"`` (the promoted operands' dtype, bools
    counting as int64 in arithmetic), ``"float"`` (integers give float32, and are
    converted to it first), ``"divide"`` (true division: float32 from integers,
    divided as they are), ``"bool"`` (comparisons, tests and logic),
    ``"logical"`` (the operands' dtype, bools staying bools: bitwise ops,
    ``maximum``, ``minimum``),
    ``"real"`` (the operands' dtype, a complex one giving its parts': ``abs``).

    ``kinds`` are the dtypes it takes, by letter: ``b`` bool, ``i`` signed and
    ``u`` unsigned integers, ``h`` float16 and bfloat16 (whose math runs in
    float32), ``f`` float32 and float64, ``c`` complex64 and complex128.
    ``instead`` names the entry that computes it for operands of some kinds
    (``("iu", "copy")``: floor of an integer is itself).

    ``symbol`` names the Python operator (``+`` gives ``__add__`` and
    ``__radd__``; a unary one ``__neg__``); ``inplace`` names the in-place
    method (``add_``, with ``__iadd__``); ``method`` and ``function`` the Tensor
    method and the ``tp.`` function (None: none), ``aliases`` other names of
    both, and ``function_aliases`` other names of the function only (PyTorch's
    ``Tensor.equal`` compares whole tensors: ``tp.equal`` is the standard's).
    """

    name: str
    fn: object
    arity: int
    result: str = "same"
    symbol: str = ""
    inplace: str = ""
    method: str | None = None
    function: str | None = None
    backward: object = None
    uses_result: bool = False  # its backward reads the op's result
    grad_name: str = ""  # the node's name, as PyTorch's (``MulBackward``)
    kinds: str = "biuhf"  # (no complex unless it says so)
    instead: tuple = ()  # (kinds, entry): that entry computes it for operands of those kinds
    aliases: tuple[str, ...] = ()
    function_aliases: tuple[str, ...] = ()

    @property
    def functions(self) -> tuple[str, ...]:
        """The names of its ``tp.`` function: one function under each."""
        return (self.function, *self.aliases, *self.function_aliases) if self.function else ()

    @property
    def methods(self) -> tuple[str, ...]:
        """The names of its Tensor method: one method under each."""
        return (self.method, *self.aliases) if self.method else ()


def _unary(name, fn, result="same", backward=None, **kw) -> Op:
    kw.setdefault("method", name)
    kw.setdefault("function", name)
    return Op(name, device_function(fn), 1, result, backward=backward, **kw)


def _binary(name, fn, result="same", backward=None, **kw) -> Op:
    kw.setdefault("method", name)
    kw.setdefault("function", name)
    return Op(name, device_function(fn), 2, result, backward=backward, **kw)


# -- backwards ----------------------------------------------------------------------------------


def _conj(x):
    """The conjugate of a complex tensor or number; anything real as it is (no
    copy): the factor a holomorphic op's backward multiplies ``g`` by."""
    if isinstance(x, complex):
        return x.conjugate()
    return x.conj() if getattr(getattr(x, "dtype", None), "kind", "") == "c" else x


def _sign(x):
    """The direction of ``x``: -1, 0 or 1, and ``x / |x|`` (0 at 0) for a complex ``x``."""
    if x.dtype.kind == "c":
        return x.sign()
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)


def _rsqrt_grads(g, x, out):
    """d x^(-1/2) = -x^(-3/2) / 2: the result cubed (conjugated)."""
    c = _conj(out)
    return (g * -0.5 * c * c * c,)


def _acosh_grads(g, x, out):
    """d acosh(x) = 1 / sqrt(x^2 - 1) for real x; for complex x the principal
    branch's 1 / (sqrt(x - 1) sqrt(x + 1)) (the square root of the product is
    off by a sign where Re(x) < 0)."""
    if x.dtype.kind == "c":
        return (g / ((x - 1).sqrt() * (x + 1).sqrt()).conj(),)
    return (g / (x * x - 1).sqrt(),)


def _sign_grads(g, x, out):
    """``sign`` is piecewise constant on the reals (gradient 0); for a complex ``x``
    it is ``x / |x|``, whose gradient is ``(g - sgn^2 conj(g)) / (2 |x|)``, 0 at 0
    (PyTorch's ``sgn_backward``)."""
    if x.dtype.kind != "c":
        return _zero(g, x, out)
    magnitude, sgn = x.abs(), x.sign()
    grad = (g - sgn * sgn * g.conj()) / (2 * _select(magnitude == 0, 1.0, magnitude))
    return (_select(magnitude == 0, 0.0, grad),)


def _select(cond, a, b):
    """``a`` where ``cond`` holds, else ``b``, for the backwards (a or b may be a number)."""
    if hasattr(a, "where"):
        return a.where(cond, b)
    return b.where(~cond, a)


def _zero(g, x, out):
    """A piecewise constant op's gradient: zeros, as PyTorch's (``g * 0`` would
    be NaN where ``g`` is infinite)."""
    return (g.detach().clone().zero_(),)


def _pow_base(g, a, b):
    """d(a ** b)/da = b a ** (b - 1), and 0 where b == 0 (not 0 * inf at a == 0)."""
    ga = g * _conj(b) * _conj(a ** (b - 1))
    if hasattr(b, "where"):
        return _select(b == 0, 0.0, ga)
    return g * 0.0 if b == 0 else ga


def _pow_exponent(g, a, b, out):
    """d(a ** b)/db = a ** b log(a) for a > 0; 0 where a == 0 and b >= 0; NaN below."""
    if out.dtype.kind == "c":
        return _pow_exponent_complex(g, a, b, out)
    if not hasattr(a, "where"):
        if a > 0:
            return g * out * math.log(a)
        return _select(b >= 0, g * 0.0, math.nan) if a == 0 else g * math.nan
    positive = a > 0
    grad = g * out * _select(positive, a, 1.0).log()  # no log of 0 or of a negative base
    at_zero = (a == 0) & (b >= 0) if hasattr(b, "where") else (a == 0) if b >= 0 else None
    rest = math.nan if at_zero is None else _select(at_zero, g * 0.0, math.nan)
    return _select(positive, grad, rest)


def _pow_exponent_complex(g, a, b, out):
    """d(a ** b)/db = a ** b log(a), the principal logarithm of ``a`` as a
    complex number (of a negative real base too); at a == 0, 0 where b is a
    real number >= 0 and NaN elsewhere, as for real operands."""
    if not hasattr(a, "where") and a != 0:
        return g * _conj(out * cmath.log(a))
    ok = _nonnegative_real(b)
    at_zero_value = _select(ok, g * 0.0, math.nan) if hasattr(ok, "where") else g * (0.0 if ok else math.nan)
    if not hasattr(a, "where"):
        return at_zero_value
    at_zero = a == 0
    base = a if a.dtype is out.dtype else a.to(out.dtype)
    grad = g * _conj(out * _select(at_zero, 1.0, base).log())  # no log of 0
    return _select(at_zero, at_zero_value, grad)


def _nonnegative_real(b):
    """Whether ``b`` (a number or a tensor, complex or not) is a real number >= 0."""
    if isinstance(b, complex):
        return b.imag == 0 and b.real >= 0
    return b.abs() == b if hasattr(b, "abs") else b >= 0


def _wants(x) -> bool:
    """Whether an operand gets a gradient: a backward computes only those (a
    number, or a tensor that needs none, is given None)."""
    return getattr(x, "requires_grad", False)


def _sub_grads(g, a, b, out):
    return g, -g if _wants(b) else None


def _mul_grads(g, a, b, out):
    return g * _conj(b) if _wants(a) else None, g * _conj(a) if _wants(b) else None


def _div_grads(g, a, b, out):
    return g / _conj(b) if _wants(a) else None, -g * _conj(out) / _conj(b) if _wants(b) else None


def _pow(g, a, b, out):
    return (_pow_base(g, a, b) if _wants(a) else None, _pow_exponent(g, a, b, out) if _wants(b) else None)


def _trigamma(x):
    """ψ'(x), the derivative of digamma, as tensor ops (so that it has gradients of its own):
    ψ'(y) = Σ_{k<6} 1/(y+k)² + the asymptotic series at y + 6, for y = x ≥ 1/2; below,
    the reflection ψ'(x) = π²/sin²(πx) - ψ'(1 - x). Relative error about 1e-11 (float64)."""
    low = x < 0.5
    y = (1 - x).where(low, x)
    total = sum(1 / ((y + k) * (y + k)) for k in range(6))
    z = 1 / (y + 6)
    z2 = z * z
    total = total + z + z2 / 2 + z * z2 * (1 / 6 - z2 * (1 / 30 - z2 * (1 / 42 - z2 / 30)))
    return (math.pi**2 / (x * math.pi).sin().square() - total).where(low, total)


def _pick(g, a, b, wins):
    """maximum/minimum: the gradient goes to the operand chosen, split evenly on ties."""
    share = ((a > b) if wins == "gt" else (a < b)) + (a == b) * 0.5
    return g * share, g * (1 - share)


def _atan2_grads(g, a, b, out):
    """d atan2(a, b) = (b da - a db) / (a^2 + b^2)."""
    scale = g / (a * a + b * b)
    return scale * b if _wants(a) else None, -scale * a if _wants(b) else None


def _hypot_grads(g, a, b, out):
    return g * a / out if _wants(a) else None, g * b / out if _wants(b) else None


def _logaddexp_grads(g, a, b, out):
    return g * (a - out).exp() if _wants(a) else None, g * (b - out).exp() if _wants(b) else None


def _copysign_grads(g, a, b, out):
    """d copysign(a, b)/da = out / a (+-1), and 0 at a == 0, as PyTorch's; none for b."""
    return (_select(a == 0, 0.0, g * out / a) if _wants(a) else None), None


def _remainder_grads(g, a, b, out):
    """a % b = a - b floor(a / b): 1 for a, -floor(a / b) for b."""
    return g if _wants(a) else None, -g * (a // b) if _wants(b) else None


def _fmod_grads(g, a, b, out):
    """fmod(a, b) = a - b trunc(a / b): 1 for a, -trunc(a / b) for b."""
    return g if _wants(a) else None, -g * (a / b).trunc() if _wants(b) else None


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


OPS: dict[str, Op] = {
    op.name: op
    for op in (
        _unary("copy", identity, method=None, function=None),
        # -- arithmetic
        _unary(
            "neg", lambda x: -x, symbol="-", backward=lambda g, x, out: (-g,), kinds="iuhfc", aliases=("negative",),
        ),
        _unary(
            "pos", identity, symbol="+", method="positive", function="positive", backward=lambda g, x, out: (g,),
            kinds="iuhfc", grad_name="PositiveBackward",
        ),
        _unary(
            "abs", lambda x: abs(x), "real", symbol="abs", backward=lambda g, x, out: (g * _sign(x),), kinds="iuhfc",
            aliases=("absolute",),
        ),
        _unary("square", lambda x: x * x, backward=lambda g, x, out: (g * 2 * _conj(x),), kinds="iuhfc"),
        _unary("sign", lambda x: sm.signum(x), backward=_sign_grads, kinds="iuhfc"),
        _unary(
            "reciprocal", lambda x: sm.divide(sm.one(x), x), "float", lambda g, x, out: (-g * _conj(out) * _conj(out),),
            uses_result=True, kinds="biuhfc",
        ),
        _unary(
            "rsqrt", lambda x: sm.divide(sm.one(x), sm.sqrt(x)), "float", _rsqrt_grads, uses_result=True,
            kinds="biuhfc",
        ),
        # (of a real tensor: itself, its real part, no imaginary part)
        _unary(
            "conj", lambda x: x.conjugate(), backward=lambda g, x, out: (_conj(g),), kinds="biuhfc",
            instead=("biuhf", "copy"),
        ),
        _unary(
            "real", lambda x: x.real, "real", lambda g, x, out: (g,), method=None, kinds="biuhfc",
            instead=("biuhf", "copy"),
        ),  # (PyTorch's Tensor.real is a property)
        _unary("imag", lambda x: x.imag, "real", lambda g, x, out: (g * 1j,), method=None, kinds="c"),
        # -- rounding: integers are their own floor, ceil, trunc and round
        _unary("floor", lambda x: sm.floor(x), backward=_zero, kinds="iuhf", instead=("iu", "copy")),
        _unary("ceil", lambda x: sm.ceil(x), backward=_zero, kinds="iuhf", instead=("iu", "copy")),
        _unary(
            "trunc", lambda x: sm.trunc(x), backward=_zero, kinds="iuhf", instead=("iu", "copy"), aliases=("fix",),
        ),
        _unary("round", lambda x: sm.round_(x), backward=_zero, kinds="iuhfc", instead=("iu", "copy")),
        # -- exponentials and logarithms
        _unary(
            "exp", lambda x: sm.exp(x), "float", lambda g, x, out: (g * _conj(out),), uses_result=True, kinds="biuhfc",
        ),
        _unary(
            "expm1", lambda x: sm.expm1(x), "float", lambda g, x, out: (g * _conj(out + 1),), uses_result=True,
            kinds="biuhfc",
        ),
        _unary("log", lambda x: sm.log(x), "float", lambda g, x, out: (g / _conj(x),), kinds="biuhfc"),
        _unary("log1p", lambda x: sm.log1p(x), "float", lambda g, x, out: (g / _conj(x + 1),), kinds="biuhfc"),
        _unary("log2", lambda x: sm.log2(x), "float", lambda g, x, out: (g / _conj(x * sm.LN2),), kinds="biuhfc"),
        _unary(
            "log10", lambda x: sm.log10(x), "float", lambda g, x, out: (g / _conj(x * sm.LN10),), kinds="biuhfc",
        ),
        _unary(
            "sqrt", lambda x: sm.sqrt(x), "float", lambda g, x, out: (g * 0.5 / _conj(out),), uses_result=True,
            kinds="biuhfc",
        ),
        # -- trigonometric and hyperbolic
        _unary("sin", lambda x: sm.sin(x), "float", lambda g, x, out: (g * _conj(x.cos()),), kinds="biuhfc"),
        _unary("cos", lambda x: sm.cos(x), "float", lambda g, x, out: (-g * _conj(x.sin()),), kinds="biuhfc"),
        _unary(
            "tan", lambda x: sm.tan(x), "float", lambda g, x, out: (g * _conj(1 + out * out),), uses_result=True,
            kinds="biuhfc",
        ),
        _unary(
            "asin", lambda x: sm.asin(x), "float", lambda g, x, out: (g / _conj((1 - x * x).sqrt()),), kinds="biuhfc",
            aliases=("arcsin",),
        ),
        _unary(
            "acos", lambda x: sm.acos(x), "float", lambda g, x, out: (-g / _conj((1 - x * x).sqrt()),), kinds="biuhfc",
            aliases=("arccos",),
        ),
        _unary(
            "atan", lambda x: sm.atan(x), "float", lambda g, x, out: (g / _conj(1 + x * x),), kinds="biuhfc",
            aliases=("arctan",),
        ),
        _unary("sinh", lambda x: sm.sinh(x), "float", lambda g, x, out: (g * _conj(x.cosh()),), kinds="biuhfc"),
        _unary("cosh", lambda x: sm.cosh(x), "float", lambda g, x, out: (g * _conj(x.sinh()),), kinds="biuhfc"),
        _unary(
            "tanh", lambda x: sm.tanh(x), "float", lambda g, x, out: (g * _conj(1 - out * out),), uses_result=True,
            kinds="biuhfc",
        ),
        _unary(
            "asinh", lambda x: sm.asinh(x), "float", lambda g, x, out: (g / _conj((x * x + 1).sqrt()),),
            kinds="biuhfc", aliases=("arcsinh",),
        ),
        _unary(
            "acosh", lambda x: sm.acosh(x), "float", _acosh_grads, kinds="biuhfc", aliases=("arccosh",),
        ),
        _unary(
            "atanh", lambda x: sm.atanh(x), "float", lambda g, x, out: (g / _conj(1 - x * x),), kinds="biuhfc",
            aliases=("arctanh",),
        ),
        # -- special functions
        _unary("erf", lambda x: sm.erf(x), "float", lambda g, x, out: (g * _TWO_OVER_SQRT_PI * (-x * x).exp(),)),
        _unary("erfc", lambda x: sm.erfc(x), "float", lambda g, x, out: (g * -_TWO_OVER_SQRT_PI * (-x * x).exp(),)),
        _unary("lgamma", lambda x: sm.lgamma(x), "float", lambda g, x, out: (g * x.digamma(),)),
        _unary("digamma", sm.digamma, "float", lambda g, x, out: (g * _trigamma(x),)),
        # -- activations
        _unary(
            "sigmoid", lambda x: sm.one(x) / (sm.one(x) + sm.exp(-x)), "float",
            lambda g, x, out: (g * out * (1 - out),), uses_result=True,
        ),
        # (unsigned integers are their own relu: `x if x > 0 else 0` would be float64 in Numba's typing)
        _unary(
            "relu", lambda x: x if (x > 0 or x != x) else 0, backward=lambda g, x, out: (g._relu_grad(x),),
            kinds="iuhf", instead=("u", "copy"),
        ),
        # relu's backward, g * (x > 0), as one kernel (two as tensor ops); differentiable in g
        _binary(
            "relu_grad", lambda g, x: g if x > 0 else g * 0, method="_relu_grad", function=None, kinds="iuhf",
            backward=lambda gg, g, x, out: (gg._relu_grad(x), None),
        ),
        # -- tests
        _unary("isnan", lambda x: x != x, "bool", kinds="biuhfc"),
        _unary("isinf", lambda x: sm.isinf(x), "bool", kinds="biuhfc"),
        _unary("isfinite", lambda x: sm.isfinite(x), "bool", kinds="biuhfc"),
        _unary("signbit", lambda x: sm.copysign(1.0, x) < 0, "bool", kinds="iuhf"),  # -0.0 and -NaN too
        # -- logic and bits (a bool's ~ is its logical not)
        _unary(
            "invert", lambda x: ~x, "logical", symbol="~", method="bitwise_not", function="bitwise_not",
            kinds="biu", instead=("b", "logical_not"), aliases=("bitwise_invert",),
        ),
        _unary("logical_not", lambda x: not x, "bool"),
        # -- binary arithmetic
        _binary(
            "add", lambda a, b: a + b, symbol="+", inplace="add_", backward=lambda g, a, b, out: (g, g),
            kinds="biuhfc",
        ),
        _binary(
            "sub", lambda a, b: a - b, symbol="-", inplace="sub_", backward=_sub_grads, kinds="biuhfc",
            aliases=("subtract",),
        ),
        _binary(
            "mul", lambda a, b: a * b, symbol="*", inplace="mul_", backward=_mul_grads, kinds="biuhfc",
            aliases=("multiply",),
        ),
        _binary(
            "truediv", lambda a, b: sm.divide(a, b), "divide", symbol="/", inplace="div_", method="div", function="div",
            backward=_div_grads, uses_result=True, grad_name="DivBackward", kinds="biuhfc",
            aliases=("divide", "true_divide"),
        ),
        _binary(
            "floordiv", lambda a, b: sm.floordiv(a, b), symbol="//", inplace="floor_divide_", method="floor_divide",
            function="floor_divide",
        ),
        _binary(
            "mod", lambda a, b: sm.remainder(a, b), symbol="%", inplace="remainder_", method="remainder",
            function="remainder", backward=_remainder_grads, grad_name="RemainderBackward",
        ),
        _binary(
            "fmod", lambda a, b: sm.truncated_remainder(a, b), inplace="fmod_", backward=_fmod_grads,
            grad_name="FmodBackward",
        ),
        _binary(
            "pow", lambda a, b: sm.power(a, b), symbol="**", inplace="pow_", backward=_pow, uses_result=True,
            kinds="biuhfc",
        ),
        _binary(
            "maximum", lambda a, b: a if (a > b or a != a) else b, "logical",  # bools stay bools, as NumPy's
            backward=lambda g, a, b, out: _pick(g, a, b, "gt"), grad_name="MaximumBackward",
        ),
        _binary(
            "minimum", lambda a, b: a if (a < b or a != a) else b, "logical",  # bools stay bools, as NumPy's
            backward=lambda g, a, b, out: _pick(g, a, b, "lt"), grad_name="MinimumBackward",
        ),
        _binary("atan2", lambda a, b: sm.atan2(a, b), "float", _atan2_grads, aliases=("arctan2",)),
        _binary("hypot", lambda a, b: sm.hypot(a, b), "float", _hypot_grads, uses_result=True),
        _binary("logaddexp", sm.logaddexp, "float", _logaddexp_grads, uses_result=True),
        _binary("copysign", lambda a, b: sm.copysign(a, b), "float", _copysign_grads, uses_result=True),
        _binary("nextafter", lambda a, b: sm.nextafter(a, b), kinds="f"),  # (float16's next value is not float32's)
        # -- comparisons (an order of complex numbers: none)
        _binary("eq", lambda a, b: a == b, "bool", symbol="==", kinds="biuhfc", function_aliases=("equal",)),
        _binary("ne", lambda a, b: a != b, "bool", symbol="!=", kinds="biuhfc", aliases=("not_equal",)),
        _binary("lt", lambda a, b: a < b, "bool", symbol="<", aliases=("less",)),
        _binary("le", lambda a, b: a <= b, "bool", symbol="<=", aliases=("less_equal",)),
        _binary("gt", lambda a, b: a > b, "bool", symbol=">", aliases=("greater",)),
        _binary("ge", lambda a, b: a >= b, "bool", symbol=">=", aliases=("greater_equal",)),
        # -- logic: truth values (nonzero, NaN too) of any dtype; on bools, the bitwise ops' kernels
        _binary("logical_and", lambda a, b: (a != 0) & (b != 0), "bool", instead=("b", "and")),
        _binary("logical_or", lambda a, b: (a != 0) | (b != 0), "bool", instead=("b", "or")),
        _binary("logical_xor", lambda a, b: (a != 0) != (b != 0), "bool", instead=("b", "xor")),
        # -- bits
        _binary(
            "and", lambda a, b: a & b, "logical", symbol="&", inplace="bitwise_and_", method="bitwise_and",
            function="bitwise_and", kinds="biu",
        ),
        _binary(
            "or", lambda a, b: a | b, "logical", symbol="|", inplace="bitwise_or_", method="bitwise_or",
            function="bitwise_or", kinds="biu",
        ),
        _binary(
            "xor", lambda a, b: a ^ b, "logical", symbol="^", inplace="bitwise_xor_", method="bitwise_xor",
            function="bitwise_xor", kinds="biu",
        ),
        _binary(
            "lshift", lambda a, b: a << b, "logical", symbol="<<", inplace="bitwise_left_shift_",
            method="bitwise_left_shift", function="bitwise_left_shift", kinds="iu",
        ),
        _binary(
            "rshift", lambda a, b: a >> b, "logical", symbol=">>", inplace="bitwise_right_shift_",
            method="bitwise_right_shift", function="bitwise_right_shift", kinds="iu",
        ),
    )
}  # fmt: skip


TERNARY = {
    "where": device_function(lambda c, a, b: a if c else b),
    "clamp": device_function(sm.clamp),
}

FILL = {"fill": identity}
