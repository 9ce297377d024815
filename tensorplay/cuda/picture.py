"""A graph's picture as SVG without Graphviz: the DOT of ``CUDAGraph.dot()``
(the simulator's, or the driver's ``cuGraphDebugDotPrint``) read back into
nodes, edges and bodies, and drawn in layers.

Each graph (the top one, and every body of a conditional node) is a column of
layers: a node sits one layer below the lowest node it depends on. Nodes show
their kind, the Python kernel's name and its launch shape; a conditional
node's bodies are boxes to its right, named as the DOT names them, with a
dashed arrow from the node. ``draw``, behind ``CUDAGraph.draw``, asks the
``dot`` program instead where it exists (its layout is better); this is what
every user gets otherwise.

Examples
--------
>>> text = 'digraph "g" { a [label="kernel 0\\\\nadd"]; b [label="kernel 1\\\\nmul"]; a -> b; }'
>>> svg = dot_to_svg(text)
>>> svg.startswith("<svg") and "add" in svg and "mul" in svg
True
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

__all__ = ["Picture", "dot_to_svg", "parse_dot"]

_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_TOKEN = re.compile(
    r"subgraph\s+(?P<cluster>[^\s{]+)\s*\{"
    r"|(?P<close>\})"
    r"|(?P<tail>[\w\x00]+)\s*->\s*(?P<head>[\w\x00]+)"
    r"|(?P<node>[\w\x00]+)\s*\[(?P<attrs>[^\]]*)\]"
    r"|label\s*=\s*(?P<label>\x00\d+\x00)"
)
_KEYWORDS = {"node", "graph", "edge", "digraph"}

FONT = 11  # px, monospace
CHAR_W = 6.7
LINE_H = 14
PAD = 8
GAP_X, GAP_Y = 28, 26


@dataclass
class Graph:
    """One graph of the picture: the top one or a body (a DOT cluster)."""

    name: str
    label: str
    nodes: list = field(default_factory=list)  # node ids, in the order read


@dataclass
class Picture:
    """What ``parse_dot`` read: ``labels`` (node id -> display lines), ``edges``,
    the ``graphs`` (top first) and which node owns which body graph."""

    labels: dict
    edges: list
    graphs: list
    owner: dict  # body graph name -> the node id it belongs to


def _unescape(text: str) -> str:
    text = text.replace("\\n", "\n").replace("\\l", "\n")
    return re.sub(r"\\(.)", r"\1", text)


def _display(label: str) -> list[str]:
    """A node's lines: the simulator's label as it is; the driver's record
    label ({KERNEL | {ID | n | name<<<grid,block,shared>>>} | ...}) cut to its
    kind, its number and name, and a conditional's type and bodies."""
    if not _unescape(label).lstrip().startswith("{"):
        return [line for line in _unescape(label).splitlines() if line.strip()] or [""]
    kind = re.match(r"\{\s*([A-Z_]+)", _unescape(label).lstrip())
    lines = [kind.group(1).lower() if kind else "node"]
    # on the escaped text: a kernel's name may hold escaped braces (<<<\{16,16\},...>>>)
    ident = re.search(r"\{\s*ID\s*\|\s*(\d+)(?:[^|}\\]|\\.)*(?:\|\s*((?:[^}\\]|\\.)*))?\}", label)
    if ident:
        lines[0] += f" {ident.group(1)}"
        if ident.group(2) and ident.group(2).strip():
            lines.append(_unescape(ident.group(2)).strip())
    ctype = re.search(r"Conditional Type\s*\|\s*([A-Z_]+)", label)
    if ctype:
        lines.append(ctype.group(1).lower())
        for branch, body in re.findall(r"\{\s*([^|{}]+?)\s*\|\s*(graph_\d+)\s*\}", label):
            lines.append(f"{branch.strip().lower()}: {body}")
    return lines


def parse_dot(text: str) -> Picture:
    """The nodes, edges and graphs of DOT ``text`` (either backend's)."""
    strings: list[str] = []

    def hide(m: re.Match) -> str:
        strings.append(m.group(0)[1:-1])
        return f"\x00{len(strings) - 1}\x00"

    def shown(token: str) -> str:
        m = re.fullmatch(r"\x00(\d+)\x00", token)
        return strings[int(m.group(1))] if m else token

    plain = _QUOTED.sub(hide, text)
    top = Graph("", "")
    graphs, stack = [top], [top]
    labels: dict = {}
    edges: list = []
    for m in _TOKEN.finditer(plain):
        if m.group("cluster"):
            g = Graph(shown(m.group("cluster")), "")
            graphs.append(g)
            stack.append(g)
        elif m.group("close"):
            if len(stack) > 1:
                stack.pop()
        elif m.group("tail"):
            edges.append((shown(m.group("tail")), shown(m.group("head"))))
        elif m.group("node"):
            node = shown(m.group("node"))
            if node in _KEYWORDS:
                continue
            found = re.search(r"label\s*=\s*(\x00\d+\x00)", m.group("attrs"))
            labels[node] = _display(shown(found.group(1)) if found else node)
            if node not in stack[-1].nodes:
                stack[-1].nodes.append(node)
        elif m.group("label") and len(stack) > 1 and not stack[-1].label:
            stack[-1].label = _unescape(shown(m.group("label")))
    graphs = [g for g in graphs if g.nodes]
    owner = {}
    for g in graphs[1:]:
        for node, lines in labels.items():
            named = g.label and any(re.search(rf"\b{re.escape(g.label)}\b", line) for line in lines)
            prefixed = re.fullmatch(rf"cluster_{re.escape(node)}_\d+", g.name)
            if (named or prefixed) and node not in g.nodes:
                owner[g.name] = node
                break
    return Picture(labels, edges, graphs, owner)


def _layers(g: Graph, edges: list) -> dict:
    """Node -> layer within graph ``g`` (one below the lowest node it depends on)."""
    inside = set(g.nodes)
    layer = {n: 0 for n in g.nodes}
    for _ in range(len(g.nodes)):  # longest path by relaxation: graphs here are small
        moved = False
        for tail, head in edges:
            if tail in inside and head in inside and layer[head] < layer[tail] + 1:
                layer[head] = layer[tail] + 1
                moved = True
        if not moved:
            break
    return layer


class _Layout:
    """Where each node and body box goes: a graph is a column of layers, and a
    conditional node's bodies are boxes to its right, the next layer below them."""

    def __init__(self, pic: Picture) -> None:
        self.pic = pic
        self.size = {
            n: (max(len(line) for line in lines) * CHAR_W + 2 * PAD, len(lines) * LINE_H + PAD)
            for n, lines in pic.labels.items()
        }
        self.place: dict = {}  # node -> (x, y)
        self.frames: dict = {}  # body graph name -> (x, y, w, h, title)
        self.bodies: dict = {}  # node -> its body graphs, in DOT order
        for g in pic.graphs:
            if g.name in pic.owner:
                self.bodies.setdefault(pic.owner[g.name], []).append(g)

    def graph(self, g: Graph, x: float, y: float) -> tuple[float, float]:
        """Lay out ``g`` from (x, y); its (width, height)."""
        layer = _layers(g, self.pic.edges)
        rows: dict = {}
        for n in g.nodes:
            rows.setdefault(layer[n], []).append(n)
        cur_y, width = y, 0.0
        for depth in sorted(rows):
            cur_x, row_h = x, 0.0
            for n in rows[depth]:
                w, h = self.size[n]
                self.place[n] = (cur_x, cur_y)
                cur_x += w + GAP_X / 2
                for body in self.bodies.get(n, []):
                    bw, bh = self.frame(body, cur_x + GAP_X / 2, cur_y)
                    cur_x += bw + GAP_X
                    h = max(h, bh)
                row_h = max(row_h, h)
            width = max(width, cur_x - x)
            cur_y += row_h + GAP_Y
        return width, max(cur_y - y - GAP_Y, 0.0)

    def frame(self, g: Graph, x: float, y: float) -> tuple[float, float]:
        """A body's box at (x, y), its graph inside; the box's (width, height)."""
        w, h = self.graph(g, x + PAD, y + LINE_H + PAD)
        box = (x, y, w + PAD, h + LINE_H + 2 * PAD, g.label or g.name)
        self.frames[g.name] = box
        return box[2], box[3]


def draw(text: str, path: str | os.PathLike | None = None) -> str:
    """The DOT ``text`` drawn, for ``CUDAGraph.draw`` (see there): by Graphviz's
    ``dot`` where it is installed and works, else by ``dot_to_svg`` (SVG only);
    written to ``path`` if given. Returns the SVG text, or the path written for
    another format."""
    fmt = os.path.splitext(os.fspath(path))[1].lstrip(".").lower() if path is not None else ""
    fmt = fmt or "svg"  # a path without an extension gets the default
    drawn = _graphviz(text, fmt) if shutil.which("dot") else None
    if drawn is None and fmt != "svg":
        raise ValueError(
            f"drawing a .{fmt} file needs Graphviz's dot program, which is not installed here; "
            "draw an .svg instead (g.draw('graph.svg'))"
        )
    if drawn is None:
        drawn = dot_to_svg(text).encode()
    if path is not None:
        with open(path, "wb") as f:
            f.write(drawn)
    return drawn.decode(errors="replace") if fmt == "svg" else os.fspath(path)


def _graphviz(text: str, fmt: str) -> bytes | None:
    """``text`` drawn by the ``dot`` program in ``fmt``; None where it fails."""
    try:
        done = subprocess.run(["dot", f"-T{fmt}"], input=text.encode(), capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 and done.stdout else None


def dot_to_svg(text: str) -> str:
    """An SVG picture of the DOT ``text`` (see the module docstring)."""
    pic = parse_dot(text)
    lay = _Layout(pic)
    x = PAD
    for g in pic.graphs:  # the top graph, then any body whose node was not found
        if g.name in lay.frames or g.name in pic.owner:
            continue
        w, _ = lay.graph(g, x, PAD) if g is pic.graphs[0] else lay.frame(g, x, PAD)
        x += w + GAP_X
    place, size = lay.place, lay.size
    ends = [(px + size[n][0], py + size[n][1]) for n, (px, py) in place.items()]
    ends += [(fx + fw, fy + fh) for fx, fy, fw, fh, _ in lay.frames.values()]
    total_w = max([e[0] for e in ends] + [100]) + PAD
    total_h = max([e[1] for e in ends] + [40]) + PAD
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:.0f}" height="{total_h:.0f}" '
        f'font-family="monospace" font-size="{FONT}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#444"/></marker></defs>',
    ]
    for fx, fy, fw, fh, title in sorted(lay.frames.values(), key=lambda f: -f[2] * f[3]):  # outer boxes first
        out.append(f'<rect x="{fx:.1f}" y="{fy:.1f}" width="{fw:.1f}" height="{fh:.1f}" fill="#f4f7fb" '
                   'stroke="#7a8ca5" stroke-dasharray="4 3" rx="6"/>')  # fmt: skip
        out.append(f'<text x="{fx + PAD:.1f}" y="{fy + LINE_H:.1f}" fill="#34495e">{html.escape(title)}</text>')
    for tail, head in pic.edges:
        if tail in place and head in place:
            out.append(_arrow(place, size, tail, head))
    for node, bodies in lay.bodies.items():  # a dashed arrow to the first body; the rest sit beside it
        if node in place and bodies[0].name in lay.frames:
            out.append(_link(place[node], size[node], lay.frames[bodies[0].name]))
    for n, (nx, ny) in place.items():
        w, h = size[n]
        fill = "#fff4e0" if n in lay.bodies else "#ffffff"
        out.append(f'<rect x="{nx:.1f}" y="{ny:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}" '
                   'stroke="#333" rx="3"/>')  # fmt: skip
        for i, line in enumerate(pic.labels[n]):
            weight = ' font-weight="bold"' if i == 1 else ""
            y_text = ny + PAD + (i + 0.75) * LINE_H
            out.append(f'<text x="{nx + PAD:.1f}" y="{y_text:.1f}"{weight}>{html.escape(line)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _link(at: tuple, node_size: tuple, frame: tuple) -> str:
    """A dashed arrow from a conditional node's side to its first body's box."""
    (x, y), (w, _) = at, node_size
    return (f'<line x1="{x + w:.1f}" y1="{y + LINE_H:.1f}" x2="{frame[0]:.1f}" y2="{y + LINE_H:.1f}" '
            'stroke="#7a8ca5" stroke-dasharray="5 4" marker-end="url(#arrow)"/>')  # fmt: skip


def _arrow(place: dict, size: dict, tail: str, head: str) -> str:
    (tx, ty), (tw, th) = place[tail], size[tail]
    (hx, hy), (hw, _) = place[head], size[head]
    if hx > tx + tw:  # to a body on the right: from the node's side
        x1, y1, x2, y2 = tx + tw, ty + th / 2, hx, hy + LINE_H / 2
    else:
        x1, y1, x2, y2 = tx + tw / 2, ty + th, hx + hw / 2, hy
    return (f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#444" '
            'marker-end="url(#arrow)"/>')  # fmt: skip
