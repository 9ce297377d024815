"""Pictures without a plotting library, for the scripts in this folder: the
package's ``tensorplay.examples.plots`` (a field as a PNG, a curve as an SVG)."""

from tensorplay.examples.plots import Layout, colour, layout, write_line_svg, write_png

__all__ = ["Layout", "colour", "layout", "write_line_svg", "write_png"]
