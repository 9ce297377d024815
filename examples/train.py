"""Fit a small MLP to y = sin(2x) with tensorplay.nn and tensorplay.optim.

The first training step (forward, backward, optimizer step) runs eagerly and
warms up; the next is captured once as a CUDA graph, and every later step is one
replay of it, with no host sync until a loss is printed. ``--eager`` runs every
step op by op instead. With no GPU it runs on the CPU simulator, where the
default size keeps it to a few seconds; on a GPU try ``--size 4096 --steps 500``.

    python examples/train.py [--size 8] [--steps 10] [--optimizer sgd|adam] [--lr 0.1] [--eager]
"""

from __future__ import annotations

import argparse
import time

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F
import tensorplay.optim as optim


def make_data(n: int) -> tuple[tp.Tensor, tp.Tensor]:
    x = tp.rand(n, 1) * 2 - 1
    return x, (x * 2).sin()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8, help="samples; the hidden layer is as wide (at most 256)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    parser.add_argument("--lr", type=float, default=None, help="default: 0.1 for SGD (momentum 0.5), 0.01 for Adam")
    parser.add_argument("--eager", action="store_true", help="no CUDA graph: run every step op by op")
    args = parser.parse_args()

    tp.manual_seed(0)
    hidden = min(args.size, 256)
    model = nn.Sequential(nn.Linear(1, hidden), nn.Tanh(), nn.Linear(hidden, 1))
    x, y = make_data(args.size)
    if args.optimizer == "adam":
        opt = optim.Adam(model.parameters(), lr=0.01 if args.lr is None else args.lr)
    else:
        opt = optim.SGD(model.parameters(), lr=0.1 if args.lr is None else args.lr, momentum=0.5)
    print(f"{model}\n{args.size} samples on {tp.cuda.get_device_name()} (backend: {tp.cuda.backend()})")

    def train_step() -> tp.Tensor:
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    report = max(1, args.steps // 5)
    start = time.perf_counter()
    first = last = None
    graph = static_loss = None
    for i in range(1, args.steps + 1):
        if args.eager or i == 1:
            loss = train_step()  # the first step also compiles the kernels and creates the optimizer state
        elif graph is None:
            graph = tp.cuda.CUDAGraph()
            with tp.cuda.graph(graph):  # recorded, not run: the replay below is this step
                static_loss = train_step()
        if graph is not None:
            graph.replay()
            loss = static_loss
        if i == 1 or i % report == 0 or i == args.steps:
            last = loss.item()  # the only host sync: reading the loss
            first = last if first is None else first
            print(f"step {i:4d}  loss {last:.5f}")
    tp.cuda.synchronize()
    elapsed = time.perf_counter() - start
    mode = "eager" if args.eager else "a graph replay per step after the first"
    print(f"loss {first:.5f} -> {last:.5f} in {args.steps} steps ({mode}, {elapsed:.2f} s)")


if __name__ == "__main__":
    main()
