"""The main demo: a 2-D heat equation solved to a tolerance in one graph launch
with a while node. Its code ships with the package (``tensorplay/examples/heat.py``),
so that an installed tensorplay runs it without this repository too:
``python -m tensorplay.examples.heat`` or ``tensorplay-heat``; this script runs
the same, with the same options (``--help``).

    python examples/heat.py [--n 8] [--tol 1e-3] [--max-iters 400] [--no-fuse] [--dot heat_while.dot] [--pictures heat]
"""

from tensorplay.examples.heat import main

if __name__ == "__main__":
    main()
