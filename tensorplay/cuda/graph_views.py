"""``CUDAGraph``'s views of itself for debugging: the captured graph as
Graphviz DOT (``debug_dump``, ``dot``), as a picture (``draw``, and the
drawing a notebook shows for a graph at the end of a cell)."""

from __future__ import annotations

import os

from ..runtime.backend import get as get_backend
from . import picture

__all__ = ["GraphViews"]


class GraphViews:
    """The debugging views of ``CUDAGraph`` (a mixin: it reads the graph's
    ``_graph`` and ``_sync_template()``)."""

    def enable_debug_mode(self) -> None:
        """Keep the captured graph for ``debug_dump`` (it is always kept here)."""
        self._debug = True

    def debug_dump(self, path: str) -> str:
        """Write the graph as Graphviz DOT to ``path`` and return the path."""
        if self._graph is None:
            raise RuntimeError("debug_dump() needs a captured graph; capture one first")
        self._sync_template()
        get_backend().graph_dot(self._graph, os.fspath(path))
        return os.fspath(path)

    def dot(self) -> str:
        """The graph as Graphviz DOT text."""
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            path = self.debug_dump(os.path.join(d, "graph.dot"))
            with open(path) as f:
                return f.read()

    def draw(self, path: str | os.PathLike | None = None) -> str:
        """The graph as an SVG picture (its text), also written to ``path`` if
        given. Graphviz's ``dot`` program draws it where it is installed (and
        then ``path`` may end in any format it writes, ``.png``, ``.pdf``...);
        elsewhere ``tensorplay.cuda.picture`` does, in SVG only (a ``path``
        without an extension gets SVG). Returns the SVG text (for another
        format, the path written).

        Examples
        --------
        >>> import tensorplay as tp
        >>> x = tp.ones(4)
        >>> g = tp.cuda.CUDAGraph()
        >>> with tp.cuda.graph(g):
        ...     _ = x.mul_(2)
        >>> "elementwise.mul" in g.draw()
        True
        """
        return picture.draw(self.dot(), path)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        if self._graph is None:
            return {"text/plain": repr(self)}
        return {"text/plain": self.dot(), "image/svg+xml": self.draw()}
