"""tensorplay.cuda.picture: a graph's DOT (the simulator's, and a real one the
H200's driver printed for the heat demo, kept in tests/cuda/data) read back and
drawn as SVG without Graphviz; CUDAGraph.draw and the notebook's picture."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import tensorplay as tp
from tensorplay.cuda import picture as picture_module
from tensorplay.cuda.picture import dot_to_svg, parse_dot

H200_HEAT = (Path(__file__).parent / "data" / "h200_heat.dot").read_text()
SVG = "{http://www.w3.org/2000/svg}"


def _texts(svg: str) -> list[str]:
    return [t.text for t in ET.fromstring(svg).iter(f"{SVG}text")]


def test_the_drivers_dot_is_read_back():
    pic = parse_dot(H200_HEAT)
    assert [g.label for g in pic.graphs] == ["graph_1", "graph_2"]
    top, body = ([pic.labels[n] for n in g.nodes] for g in pic.graphs)
    assert top[0] == ["kernel 0", "elementwise.fill_s_flat<<<1,32,0>>>"]
    assert top[2] == ["conditional 2", "while", "true: graph_2"]
    assert body[0] == ["kernel 0", "jacobi_sweep<<<{16,16},{16,16},0>>>"]  # escaped braces read back
    assert body[1][1].startswith("fused_sub_abs_max_add_gt_lt_and<<<")
    assert pic.owner == {"cluster_2": "graph_1_node_2"}
    assert ("graph_2_node_0", "graph_2_node_1") in pic.edges


def test_the_drivers_dot_is_drawn():
    texts = _texts(dot_to_svg(H200_HEAT))
    assert "graph_2" in texts  # the while node's body, as a titled box
    assert "jacobi_sweep<<<{16,16},{16,16},0>>>" in texts


def _captured():
    x, flag, n = tp.ones(4), tp.ones(1, dtype=tp.bool), tp.zeros(1, dtype=tp.int32)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        x.mul_(2)
        with g.while_(flag, max_iters=3):
            x.add_(1)
            with g.if_(flag):
                n.add_(1)
        with g.if_else(flag) as branch:
            x.mul_(2)
            branch.else_()
            x.sub_(1)
    return g


def test_a_graph_with_nested_bodies_is_drawn():
    g = _captured()
    pic = parse_dot(g.dot())  # the simulator's DOT, or the driver's on a GPU
    titles = [g.label for g in pic.graphs[1:]]
    assert len(titles) == 4  # the loop's body, the if's inside it, then and else
    if tp.cuda.backend() == "sim":  # the driver titles its bodies graph_N
        assert titles[0].endswith("loop body")
        assert [t.rsplit(": ", 1)[1] for t in titles[1:]] == ["then", "then", "else"]
    assert len(pic.owner) == 4  # every body found its node, the nested one included
    svg = g.draw()
    texts = _texts(svg)
    assert set(titles) <= set(texts)
    assert any(t and t.startswith("elementwise.mul") for t in texts)
    rects = ET.fromstring(svg).findall(f"{SVG}rect")
    assert len(rects) == len(pic.labels) + len(titles)  # a box per node and per body


def test_draw_without_graphviz(tmp_path, monkeypatch):
    monkeypatch.setattr(picture_module.shutil, "which", lambda name: None)
    g = _captured()
    svg = g.draw(tmp_path / "graph.svg")
    assert (tmp_path / "graph.svg").read_text() == svg and svg.startswith("<svg")
    with pytest.raises(ValueError, match=re.escape("drawing a .png file needs Graphviz's dot program")):
        g.draw(tmp_path / "graph.png")
    assert not (tmp_path / "graph.png").exists()
    bundle = g._repr_mimebundle_()  # what Jupyter shows: the picture, and the DOT as text
    assert bundle["image/svg+xml"].startswith("<svg") and bundle["text/plain"].startswith("digraph")


def test_a_failing_dot_program_falls_back(monkeypatch):
    monkeypatch.setattr(picture_module.shutil, "which", lambda name: "/usr/bin/dot")
    monkeypatch.setattr(picture_module, "_graphviz", lambda text, fmt: None)
    assert _captured().draw().startswith("<svg")


def test_draw_needs_a_captured_graph():
    with pytest.raises(RuntimeError, match="needs a captured graph; capture one first"):
        tp.cuda.CUDAGraph().draw()


def _launch_shape(grid: tuple, block: tuple) -> str:
    """A launch shape as the DOT writes it: the simulator's ``<<<grid, block>>>``
    of 3-tuples; the driver's ``<<<grid,block,shared>>>``, each without its
    trailing ones and in braces where more than one is left."""
    if tp.cuda.backend() == "sim":
        return f"<<<{grid}, {block}>>>"

    def dims(d: tuple) -> str:
        d = list(d)
        while len(d) > 1 and d[-1] == 1:
            d.pop()
        return str(d[0]) if len(d) == 1 else "{" + ",".join(map(str, d)) + "}"

    return f"<<<{dims(grid)},{dims(block)},0>>>"


def test_a_kernel_nodes_new_launch_shape_is_drawn(tmp_path):
    # set_args with more elements than the captured grid covers grows the node's grid: the picture shows the new one
    a = tp.ones(8)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        _ = a * 2.0
    (node,) = g.nodes()
    captured = _launch_shape(node.grid, node.block)
    assert any(captured in line for lines in parse_dot(g.dot()).labels.values() for line in lines)
    out = tp.empty(4096)
    node.set_args(out, tp.ones(4096), 3.0)
    grown = _launch_shape(node.grid, node.block)
    assert grown != captured
    g.replay()
    assert out.numpy().min() == out.numpy().max() == 3.0
    for text in (g.dot(), open(g.debug_dump(str(tmp_path / "g.dot"))).read()):
        shown = [line for lines in parse_dot(text).labels.values() for line in lines]
        assert any(grown in line for line in shown), shown
        assert not any(captured in line for line in shown), shown
    assert grown in "\n".join(_texts(g.draw()))
