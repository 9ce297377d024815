"""The lines of a fused kernel's source for one element of a chain (``fused.py``
writes the loops and reductions around them): its loads, each step as a call of
its op's device function converted to its tensor's dtype, its draws, its stores
(at an offset its index gives, for strided views; by the first element along
the dimensions a result is broadcast in), and a tail's steps on one thread."""

from __future__ import annotations

import keyword


def _fn_name(op: str) -> str:
    """The name a generated kernel calls an op by (``sub``; ``and_``, ``abs_``)."""
    return f"{op}_" if keyword.iskeyword(op) or op in ("abs", "pow", "copy", "min", "max", "sum") else op


# np.bool_, not bool: on the simulator a Python bool divides as Python does
# (True / False raises ZeroDivisionError), a NumPy one as the GPU (inf, NaN).
# to_int32 and to_int64 (kernels/_convert): np.int32 and np.int64 on the GPU.
_CONVERT = {
    "bool": "np.bool_",
    "int32": "to_int32",
    "int64": "to_int64",
    "float32": "np.float32",
    "float64": "np.float64",
}


def _elements(steps, stores, reductions, at: list[tuple[str, str]], layout: tuple, guards: dict = {}) -> list[str]:  # noqa: B006
    """The loop body for the elements at each ``(index, name suffix)`` of ``at``:
    every load first, then every op, then every store (a store may alias a load).
    ``guards`` maps a suffix to the condition under which its element is stored
    and reduced (its index then points at an element that exists, whose loads are
    harmless: the last elements of a grid-stride loop, loaded together)."""
    shape, strided, shifts, out_strides, draws = layout
    used = sorted({arg[1] for s in steps for arg in s.args if arg[0] == "a"})
    offsets = sorted({arg[1] for s in steps for arg in s.args if arg[0] == "c"})
    lines = [f"        x{k}{tag} = a{k}[{i}]" for i, tag in at for k in used]
    lines += [f"        z{k}{tag} = c{k}[{_offset(i, shape, strided[k], shifts[k])}]" for i, tag in at for k in offsets]
    lines += [line for i, tag in at for line in _draws(draws, i, tag)]
    lines += [f"        {_assign(f'v{j}{tag}', s, tag)}" for _, tag in at for j, s in enumerate(steps)]
    for i, tag in at:
        kept = []
        for k, j in enumerate(stores):
            where = i if out_strides[k] is None else _offset(i, shape, out_strides[k])
            first = None if out_strides[k] is None else _first_along_broadcast(i, shape, out_strides[k])
            if first is None:
                kept.append(f"        o{k}[{where}] = v{j}{tag}")
            else:  # a result broadcast over some dimensions: stored by the first element along them
                kept += [f"        if {first}:", f"            o{k}[{where}] = v{j}{tag}"]
        kept += [_accumulate(m, r, tag) for m, r in enumerate(reductions)]
        if tag in guards and kept:
            kept = [f"        if {guards[tag]}:", *["    " + line for line in kept]]
        lines += kept
    return lines


def _draw(d: int, wide: bool, index: str, tag: str) -> str:
    """The loop line that takes uniform draw ``d`` of the element at ``index``: the
    number ``tp.rand`` would give it, 53 random bits where ``wide`` (float64), else 24."""
    return f"u{d}{tag} = {'_unit53' if wide else '_unit'}(seed, np.uint64(base + {d} * n + {index}))"


def _draws(draws: tuple, index: str, tag: str) -> list[str]:
    """The loop lines of every draw (``draws``: whether each is wide) of the element at ``index``."""
    return [f"        {_draw(d, wide, index, tag)}" for d, wide in enumerate(draws)]


def _advance_lines(draws: tuple) -> list[str]:
    """Lines that move the generator's offset past the kernel's draws, once
    every block has read it (every thread calls ``_advance``)."""
    return [f"    _advance(rng, base, {len(draws)} * n)"] if draws else []


def _accumulate(m: int, r, tag: str) -> str:
    """The loop line that adds the value reduction ``m`` (``r``, a ``fused.Reduction``) reduces, of the
    element ``tag``, to ``acc{m}``."""
    return f"        acc{m} = combine{m}(acc{m}, np.{r.acc}(v{r.step}{tag}))"


_NAMES = {"a": "x", "c": "z", "u": "u", "v": "v", "b": "y", "w": "w", "s": "s", "r": "r", "h": "h"}  # kind -> name
_PER_ELEMENT = frozenset("acuv")  # kinds with a value per element (their names take the element's suffix)


def _assign(value: str, s, tag: str = "") -> str:
    """``value = <step s>`` (a ``fused.Step``), converted to the dtype of the tensor it would be written to."""
    args = ", ".join(_operand(arg, s.cast, tag) for arg in s.args)
    return f"{value} = {_CONVERT[s.dtype]}({_fn_name(s.op)}({args}))"


def _operand(arg: tuple, cast: str, tag: str = "") -> str:
    """The expression of a step's argument (``tag``: the element's name suffix;
    ``"tail"``: a tail step's, which reads its one-element inputs as it runs)."""
    kind, k = arg
    if kind == "s":
        return f"s{k}"
    if kind == "b" and tag == "tail":
        value = f"b{k}[0]"
    else:
        value = f"{_NAMES[kind]}{k}{tag if kind in _PER_ELEMENT else ''}"
    return f"np.int64({value})" if cast == "int64" else value


def _tail_lines(tail) -> list[str]:
    """The tail's steps and stores (``tail``, a ``fused.Tail``), indented to run in the finish's ``if t == 0:``."""
    lines = [f"            {_assign(f'w{j}', s, 'tail')}" for j, s in enumerate(tail.steps)]
    lines += [f"            q{k}[0] = w{j}" for k, j in enumerate(tail.stores)]
    if tail.go is not None:  # the while node's pass ends here: no kernel of its own after this one
        lines += [f"            end_pass(loop, w{tail.go} != 0, counter, cancel, max_iters, 1)"]
    if tail.node is not None:  # the conditional node after this kernel needs no kernel of its own
        lines += ["            set_handle(node, w{}, {})".format(*tail.node)]
    return lines


def _offset(index: str, shape: tuple, strides: tuple, shifts: tuple = ()) -> str:
    """The element offset of a strided input at flat ``index`` of ``shape``:
    each dimension's coordinate (plus its shift, modulo its size) times its
    stride (dimensions of stride 0 left out), in unsigned arithmetic: strides
    and shifts are never negative here (a view that steps backwards runs
    eagerly). Unsigned, a division or modulo by a power of two is a shift or
    a mask where a signed one rounds toward minus infinity as Python does, and
    the load skips Numba's wrap of a negative index: on the H100 the ops-only
    Ising sweep took 18.2 µs where signed coordinates took 20.0."""
    u = f"np.uint64({index})"
    terms, inner = [], 1
    for d in range(len(shape) - 1, -1, -1):
        if strides[d] and shape[d] > 1:
            coord = u if inner == 1 else f"{u} // np.uint64({inner})"
            if shifts and shifts[d]:
                coord = f"({coord} + np.uint64({shifts[d]})) % np.uint64({shape[d]})"
            elif d:
                coord = f"({coord}) % np.uint64({shape[d]})"
            terms.append(coord if strides[d] == 1 else f"({coord}) * np.uint64({strides[d]})")
        inner *= shape[d]
    return " + ".join(reversed(terms)) or "np.uint64(0)"


def _first_along_broadcast(index: str, shape: tuple, strides: tuple) -> str | None:
    """The test that the element at flat ``index`` of ``shape`` is the first
    along every dimension an output's ``strides`` broadcast it in (stride 0),
    or None where there is none: one thread stores each of its elements."""
    terms, inner = [], 1
    for d in range(len(shape) - 1, -1, -1):
        if strides[d] == 0 and shape[d] > 1:
            coord = index if inner == 1 else f"{index} // {inner}"
            terms.append(f"({coord}) % {shape[d]} == 0" if d else f"{coord} == 0")
        inner *= shape[d]
    return " and ".join(reversed(terms)) or None
