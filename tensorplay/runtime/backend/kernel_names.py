"""What a kernel's Python code names, on either backend: the names its code and
what it reaches through its globals and closure use. Enough to know, before
compiling, whether a kernel synchronises its whole grid (``this_grid``) or sets
a conditional node's handle (``set_conditional``).
"""

from __future__ import annotations

import types

from .errors import grid_sync_with_set_conditional

__all__ = ["code_names", "names_reached", "refuse_grid_sync_with_set_conditional", "syncs_grid"]


def _python_function(fn):
    """A kernel's or device function's Python function: the simulator's ``fn``, Numba's ``py_func``."""
    return getattr(fn, "fn", None) or getattr(fn, "py_func", None) or fn


def code_names(fn) -> set[str]:
    """The names the code of Python function ``fn`` (and of the functions defined in it) uses."""
    codes, names = [fn.__code__], set()
    while codes:
        c = codes.pop()
        names.update(c.co_names)
        codes.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    return names


def _reach(fn, names: set, seen: set) -> None:
    """Add the names ``fn``'s code uses and those of what it reaches through its
    globals and closure."""
    fn = _python_function(fn)
    if getattr(fn, "__code__", None) is None or fn in seen:
        return
    seen.add(fn)
    own = code_names(fn)
    names |= own
    reached = [cell.cell_contents for cell in fn.__closure__ or ()]
    for name in own:
        target = fn.__globals__.get(name)
        if isinstance(target, types.ModuleType):  # module.attr(...): each attribute named there (not
            reached += [vars(target).get(attr) for attr in own]  # through getattr: NumPy's warns on some)
        else:
            reached.append(target)
    for target in reached:
        if callable(target) and not isinstance(target, type):
            _reach(target, names, seen)


def names_reached(fn) -> set[str]:
    """The names kernel function ``fn``'s code and what it reaches use (``_reach``)."""
    names: set[str] = set()
    _reach(fn, names, set())
    return names


def syncs_grid(dispatcher) -> bool:
    """Whether a kernel's code, or what it reaches, names ``this_grid``: it synchronises its whole grid."""
    return "this_grid" in names_reached(dispatcher)


def refuse_grid_sync_with_set_conditional(name: str, dispatcher) -> None:
    """Refuse, before it is compiled, a kernel that both synchronises its grid and sets a
    conditional node's handle: each links CUDA's device runtime, and the GPU's linker
    refuses (or crashes on) two copies of it."""
    names = names_reached(dispatcher)
    if "this_grid" in names and "set_conditional" in names:
        raise grid_sync_with_set_conditional(name)
