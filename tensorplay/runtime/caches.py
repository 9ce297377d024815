"""The caches of what is built once and reused: plans, launchers, launch shapes.

Each is a ``BoundedCache``: a dict with a name and a cap, so that a hit stays
one dict lookup (``cache.get(key)``) on the hot paths. A full cache keeps no
new entries: what it holds stays valid, and a miss past the cap builds again.
Every ``BoundedCache`` registers itself here (weakly: a cache that belongs to an
object, a compiled function's, goes with it), and ``clear_caches()`` empties
them all, with the kernel factories' ``functools`` caches that the layers
above name through ``track_factories`` (kernel modules import nothing of
tensorplay, so they cannot register themselves).

This module knows nothing of what the caches hold.
"""

from __future__ import annotations

import weakref

__all__ = ["BoundedCache", "clear_caches", "registered", "track_factories"]

_CACHES: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # id -> cache (a dict is not hashable)
_FACTORIES: list = []  # functools-cached kernel factories


class BoundedCache(dict):
    """A dict of at most ``cap`` entries, named ``name``, emptied by ``clear_caches()``.

    Read it as a dict (``get`` is the dict's own); add through ``put``.

    Examples
    --------
    >>> from tensorplay.runtime.caches import BoundedCache
    >>> squares = BoundedCache("example.squares", cap=2)
    >>> [squares.get(n) or squares.put(n, n * n) for n in (3, 4, 5)]
    [9, 16, 25]
    >>> sorted(squares)  # full at two: 5 was computed, not kept
    [3, 4]
    """

    __slots__ = ("name", "cap", "__weakref__")

    def __init__(self, name: str, cap: int) -> None:
        if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
            raise ValueError(f"expected a cache size cap of 1 or more entries, got {cap!r}")
        super().__init__()
        self.name, self.cap = name, cap
        _CACHES[id(self)] = self

    def put(self, key, value):
        """Keep ``value`` under ``key`` unless the cache is full; return ``value``."""
        if len(self) < self.cap:
            self[key] = value
        return value

    def __repr__(self) -> str:
        return f"<BoundedCache {self.name}: {len(self)} of {self.cap} entries>"


def track_factories(*modules) -> None:
    """Have ``clear_caches()`` clear the ``functools`` caches defined at the top
    level of ``modules`` (kernel modules: their cached factories)."""
    for module in modules:
        for value in vars(module).values():
            if (
                callable(getattr(value, "cache_clear", None))
                and getattr(value, "__module__", None) == module.__name__
                and value not in _FACTORIES
            ):
                _FACTORIES.append(value)


def registered() -> list[BoundedCache]:
    """The live caches, in no particular order."""
    return list(_CACHES.values())


def clear_caches() -> None:
    """Drop every compiled plan and kernel cache: the ops' plans, the kernel
    launchers, launch shapes, the kernels the factories built, and the graphs
    of ``tp.compile`` functions (as their ``reset()`` does). Later ops build
    them again, compiling kernels on first use as a new process does.

    Memory is not returned (``tp.cuda.empty_cache()`` does that), and kernels
    already loaded on the device stay loaded: graphs captured before may run
    them.

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.ones(3)
    >>> (x + x).tolist()
    [2.0, 2.0, 2.0]
    >>> tp.cuda.clear_caches()
    >>> (x + x).tolist()  # the plan and its launcher are built again
    [2.0, 2.0, 2.0]
    """
    for cache in list(_CACHES.values()):
        cache.clear()
    for factory in _FACTORIES:
        factory.cache_clear()
