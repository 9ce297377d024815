"""Steps that move into the next kernel, where it reads their inputs anyway.

A group with full reductions ends where an op over the same elements reads
what its tail computed from them: the op needs every block's sum first, so it
starts the next kernel. Steps of the ending group that neither its reductions
nor its tail need may run in that next kernel instead, first, with the same
values: a conjugate-gradient iteration written as tensor ops updates
``x += alpha * p`` beside ``r -= alpha * Ap`` and ``r · r``, and then
``p = r + beta * p`` must wait for ``r · r``; moved, the update of ``x`` reads
``p`` in the kernel that reads it for the new ``p``, and ``p`` (8 MB on a
1024² grid, in float64) goes through memory once less an iteration.

Steps move only where the next kernel gives each element a thread of its
own (at most a wave of threads, as ``launch.grid_1d`` gives them): where
threads take several elements each, the moved loads lengthen every thread's
chain of waits, and on the H100 the ops-only CG's iteration at 1024² took
32.8 µs with the update of ``x`` moved against 29.3 without; at 256² (a
thread an element) 14.7 against 15.3.

``sunk(g, operands)`` is the group of the moved steps (and which they
were), or None where they would land on threads with several elements, or
where moving them could change a value: a step stays where a staying step reads
its value, or where it reads a value that stays (registers do not cross
kernels), or draws random numbers or reads the head's values; and nothing
moves where a moved step reads memory the staying steps, the tail or the
reductions write (it would read the new values), or writes memory that
staying steps write, or that the tail or the head read (they would read the
old). A staying step that read memory a moved one writes read it before, as
it did in the fused kernel, whose loads all come before its stores. Steps move
only where the op reads something they read, so that the kernel that takes
them loads it once for both. ``sink`` puts it together: the moved steps'
group with the op joined, the steps taken out of ``g`` (``detach``).
"""

from __future__ import annotations

import copy
from dataclasses import replace

from .._overlap import byte_span
from .._tensor import Tensor
from ..runtime.backend import get as get_backend
from ._groups import CONFLICT, EAGER, Group, Rolled, _index, _strided_index, apply_step, plan
from ._views import spans_overlap

__all__ = ["detach", "sink", "sunk"]


def sink(g: Group, op: str, out: Tensor, operands, cast: str) -> Group | None:
    """The group of the next kernel, holding the steps of ``g`` that may run
    there (taken out of ``g``) and then the op ``out = op(*operands)`` that
    ends ``g``; None, ``g`` left as it was, where none may or the op cannot
    follow them."""
    found = sunk(g, operands)
    if found is None:
        return None
    h, moved = found
    args = plan(h, out, operands)
    if args in (CONFLICT, EAGER):
        return None
    detach(g, moved)
    apply_step(h, op, out, cast, args)
    return h


def sunk(g: Group, operands) -> tuple[Group, set[int]] | None:
    """(a new group over ``g``'s elements holding the steps of ``g`` that may
    run after the rest of it, those steps' numbers in ``g``; see the module),
    or None where none may or the op of ``operands`` reads nothing they read."""
    if g.n > get_backend().max_threads_per_launch:  # threads of several elements each
        return None
    moving = _movable(g)
    if not moving or not any(w.step in moving and w.alive() for w in g.writes.values()):
        return None
    reads = [_read_tensor(g, kind, k) for j in moving for kind, k in g.steps[j].args if kind in "abc"]
    staying_writes = [(w.lo, w.hi) for w in g.writes.values() if w.step not in moving and w.alive()]
    staying_writes += [(w.lo, w.hi) for w in (*g.tail_writes.values(), *g.head_writes.values()) if w.alive()]
    staying_writes += [byte_span(r.out) for r in g.reductions]
    if any(spans_overlap(byte_span(t), span) for t in reads for span in staying_writes):
        return None
    moved_writes = [(w.lo, w.hi) for w in g.writes.values() if w.step in moving and w.alive()]
    read_at_one = [byte_span(t) for t in g.ones]
    if any(spans_overlap(a, b) for a in moved_writes for b in (*staying_writes, *read_at_one)):
        return None
    touched = [o.x if isinstance(o, Rolled) else o for o in operands if isinstance(o, (Tensor, Rolled))]
    if not any(spans_overlap(byte_span(t), byte_span(o)) for t in reads for o in touched):
        return None
    return _group_of(g, moving), moving


def detach(g: Group, moved: set[int]) -> None:
    """Take the steps ``moved`` (``sunk``'s) out of ``g``, with their results
    and the inputs only they read."""
    keep = [j for j in range(len(g.steps)) if j not in moved]
    number = {j: n for n, j in enumerate(keep)}
    steps = [g.steps[j] for j in keep]
    inputs = sorted({k for s in steps for kind, k in s.args if kind == "a"})
    strided = sorted({k for s in steps for kind, k in s.args if kind == "c"})
    renumber = {"v": number, "a": {k: n for n, k in enumerate(inputs)}, "c": {k: n for n, k in enumerate(strided)}}
    g.steps = [replace(s, args=tuple((kind, renumber.get(kind, {}).get(k, k)) for kind, k in s.args)) for s in steps]
    g.inputs = [g.inputs[k] for k in inputs]
    g.strided = [g.strided[k] for k in strided]
    for r in g.reductions:
        r.step = number[r.step]
    g.writes = {key: w for key, w in g.writes.items() if w.step not in moved}
    for w in g.writes.values():
        w.step = number[w.step]


def _movable(g: Group) -> set[int]:
    """The steps of ``g`` that its reductions, its tail and its staying steps
    do not need: a step stays where the reductions reduce its value, where it
    draws or reads the head, where a staying step reads its value, or where it
    reads a staying step's value."""
    stay = {r.step for r in g.reductions}
    stay |= {j for j, s in enumerate(g.steps) if any(kind in "uh" for kind, _ in s.args)}
    changed = True
    while changed:
        changed = False
        for j, s in enumerate(g.steps):
            values = {k for kind, k in s.args if kind == "v"}
            wanted = values - stay if j in stay else ({j} if values & stay else set())
            if wanted:
                stay |= wanted
                changed = True
    return set(range(len(g.steps))) - stay


def _read_tensor(g: Group, kind: str, k: int) -> Tensor:
    return {"a": g.inputs, "b": g.ones}[kind][k] if kind != "c" else g.strided[k][0]


def _group_of(g: Group, moving: set[int]) -> Group:
    """A group over ``g``'s elements of the steps ``moving``, in their order, with their inputs and results."""
    h = Group(g.shape, g.n, g.stream)
    h.dims = g.dims
    number = {}
    for j in sorted(moving):
        args = []
        for kind, k in g.steps[j].args:
            if kind == "a":
                k = _index(h.inputs, g.inputs[k])
            elif kind == "b":
                k = _index(h.ones, g.ones[k])
            elif kind == "c":
                k = _strided_index(h.strided, *g.strided[k])
            elif kind == "s":
                h.scalars.append(g.scalars[k])
                k = len(h.scalars) - 1
            else:  # "v": a moved step's value
                k = number[k]
            args.append((kind, k))
        number[j] = len(h.steps)
        h.steps.append(replace(g.steps[j], args=tuple(args)))
    for key, w in g.writes.items():  # in the order they are stored
        if w.step in moving:
            h.writes[key] = copy.copy(w)
            h.writes[key].step = number[w.step]
    return h
