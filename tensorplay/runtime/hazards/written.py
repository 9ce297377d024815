"""Which array parameters a kernel writes, read from its Python source.

A kernel's arrays are all passed the same way, so a launch does not say which
it writes. The kernel's code does: a parameter is written where the code
stores into it (``out[i] = v``, ``out[i] += v``, through a name bound to it or
to a slice of it), hands it to an atomic operation (``cuda.atomic.add(out, i,
v)``), or passes it to a function that writes its own parameter there (device
functions are read the same way, through the kernel's globals and closure).
A compiled helper whose Python is not at hand (a Numba ``@intrinsic``) is
taken to write the array it gets first when its name begins with ``store``.
Everything else a parameter meets is a read.

The answer is what the code *may* do: a store under a condition counts. It is
the same on both backends (the GPU's kernels are compiled from the same
Python), and None where the source cannot be read, which the caller takes as
"every array may be written".

Examples
--------
>>> def axpy(out, a, x):
...     i = 0
...     view = out[1:]
...     view[i] += a * x[i]
>>> written_parameters(axpy)
(('out', 'a', 'x'), frozenset({'out'}))
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
import types

__all__ = ["written_parameters"]

_known: dict = {}  # Python function -> (parameter names, written names) or None


def written_parameters(fn) -> tuple[tuple[str, ...], frozenset[str]] | None:
    """The names of ``fn``'s parameters and those it may write through; None
    when its source cannot be read. ``fn`` is a Python function or a Numba
    kernel (its Python function is read)."""
    fn = python_function(fn)
    if fn is None:
        return None
    if fn in _known:
        return _known[fn]
    _known[fn] = ((), frozenset())  # a function that reaches itself: read as writing nothing more
    found = _known[fn] = _read(fn)
    return found


def python_function(obj) -> types.FunctionType | None:
    """The Python function of a Numba kernel or device function (``py_func`` on
    the GPU, ``fn`` in the simulator), or ``obj`` itself if it is one."""
    for candidate in (obj, getattr(obj, "py_func", None), getattr(obj, "fn", None)):
        if isinstance(candidate, types.FunctionType):
            return candidate
    return None


def _read(fn: types.FunctionType):
    node = None
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        node = next(
            (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == fn.__code__.co_name), None
        )
    except (OSError, TypeError, SyntaxError, IndentationError):
        pass
    if node is None:
        return _from_bytecode(fn)
    a = node.args
    names = tuple(p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs])
    return names, frozenset(_Writes(fn, names).find(node))


def _from_bytecode(fn: types.FunctionType):
    """A function whose source cannot be read (a lambda, code made at run time):
    one that neither stores into a subscript nor calls anything (``lambda a, b:
    a * b``) writes nothing; else None (it may write anything)."""
    import dis

    code = fn.__code__
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    for ins in dis.get_instructions(code):
        if ins.opname in ("STORE_SUBSCR", "DELETE_SUBSCR", "STORE_SLICE") or ins.opname.startswith("CALL"):
            return None
    if any(hasattr(c, "co_code") for c in code.co_consts):
        return None
    return names, frozenset()


class _Writes:
    """The parameters of one function its body may write through."""

    def __init__(self, fn: types.FunctionType, names: tuple[str, ...]) -> None:
        self.fn = fn
        self.bound: dict[str, set[str]] = {n: {n} for n in names}  # local name -> parameters it may stand for

    def find(self, node: ast.FunctionDef) -> set[str]:
        for _ in range(2):  # a name bound late in the text but used in a loop above
            for n in ast.walk(node):
                if isinstance(n, ast.Assign):
                    for target in n.targets:
                        self._bind(target, n.value)
                elif isinstance(n, (ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
                    self._bind(n.target, n.value)
                elif isinstance(n, (ast.For, ast.comprehension)):  # for row in out: / for a in (x, y):
                    items = n.iter.elts if isinstance(n.iter, (ast.Tuple, ast.List)) else [n.iter]
                    for item in items:
                        self._bind(n.target, item)
        written: set[str] = set()
        for n in ast.walk(node):
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, (ast.Store, ast.Del)):
                base = n.value
                while isinstance(base, (ast.Subscript, ast.Attribute)):  # out[i][j] = v, out.real[i] = v
                    base = base.value
                written |= self._roots(base)
            elif isinstance(n, ast.Call):
                written |= self._call(n)
        return written

    def _bind(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            roots = self._roots(value)
            if roots:
                self.bound.setdefault(target.id, set()).update(roots)
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
            for t, v in zip(target.elts, value.elts, strict=False):
                self._bind(t, v)

    def _roots(self, e: ast.expr) -> set[str]:
        """The parameters an expression may be, or be a view of: ``x[i]`` of a
        2-d ``x`` is a row (of a 1-d one an element, which nothing can store
        through), ``x.reshape(...)`` and the other methods' results of an array."""
        if isinstance(e, ast.Name):
            return self.bound.get(e.id, set())
        if isinstance(e, (ast.Subscript, ast.Attribute, ast.Starred)):
            return self._roots(e.value)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
            return self._roots(e.func.value)
        if isinstance(e, ast.IfExp):
            return self._roots(e.body) | self._roots(e.orelse)
        return set()

    def _call(self, call: ast.Call) -> set[str]:
        dotted = _dotted(call.func)
        if not any(self._roots(a) for a in [*call.args, *(k.value for k in call.keywords)]):
            return set()
        if "atomic" in dotted:  # cuda.atomic.add(ary, index, value) and the rest write their first argument
            return self._roots(call.args[0]) if call.args else set()
        callee = self._resolve(dotted)
        found = written_parameters(callee) if python_function(callee) is not None else None
        if found is None:
            if python_function(callee) is not None:  # Python whose source is lost: it may write anything
                return set().union(*(self._roots(a) for a in call.args))
            last = dotted[-1] if dotted else ""
            return self._roots(call.args[0]) if last.startswith("store") and call.args else set()
        names, writes = found
        written: set[str] = set()
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                break
            if i < len(names) and names[i] in writes:
                written |= self._roots(arg)
        for k in call.keywords:
            if k.arg in writes:
                written |= self._roots(k.value)
        return written

    def _resolve(self, dotted: tuple[str, ...]):
        """The object a dotted name in the function's code stands for (None when unknown)."""
        if not dotted:
            return None
        fn, head = self.fn, dotted[0]
        free = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False))
        if head in free:
            try:
                obj = free[head].cell_contents
            except ValueError:  # an empty cell
                return None
        elif head in fn.__globals__:
            obj = fn.__globals__[head]
        else:
            obj = getattr(builtins, head, None)
        for attr in dotted[1:]:
            if not isinstance(obj, types.ModuleType):  # no attribute of other objects is looked up: no code runs
                return None
            obj = vars(obj).get(attr)
        return obj


def _dotted(e: ast.expr) -> tuple[str, ...]:
    """``a.b.c`` as ("a", "b", "c"); () for anything else."""
    parts = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    if not isinstance(e, ast.Name):
        return ()
    return (e.id, *reversed(parts))
