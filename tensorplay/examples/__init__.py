"""Examples that ship with tensorplay, runnable without the repository.

``python -m tensorplay.examples.heat`` (or the ``tensorplay-heat`` command) runs
the main demo: a 2-D heat equation solved to a tolerance in one graph launch
with a while node (``heat.py``), its pictures drawn with no plotting library
(``plots.py``).
"""
