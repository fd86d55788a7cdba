"""Train the MLP on noisy two-moons, with or without mixup, and report test accuracy.

    python train.py --method baseline --seed 0
    python train.py --method mixup --seed 0

Prints ``test_accuracy=...`` and ``train_loss=...`` and writes
``<out>/<method>-seed<seed>.json``.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from data import make_dataset
from model import MLP


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Mixup vs. ERM on noisy two-moons.")
    parser.add_argument("--method", choices=["baseline", "mixup"], default="baseline")
    parser.add_argument("--epochs", type=int, default=400, help="passes over the training set")
    parser.add_argument("--lr", type=float, default=0.1, help="initial SGD learning rate")
    parser.add_argument("--alpha", type=float, default=1.0, help="mixup Beta(alpha, alpha)")
    parser.add_argument("--hidden", type=int, default=32, help="hidden units")
    parser.add_argument("--seed", type=int, default=0, help="seeds the data, init and order")
    parser.add_argument("--out", default="results", help="directory for the JSON results")
    return parser.parse_args(argv)


def train(args: argparse.Namespace) -> dict[str, float]:
    train_set, test_set = make_dataset(args.seed)
    rng = random.Random(f"train-{args.seed}")
    model = MLP(args.hidden, rng)
    order = list(range(len(train_set)))
    for epoch in range(args.epochs):
        lr = args.lr * (1.0 - epoch / args.epochs)  # linear decay to 0
        rng.shuffle(order)
        partners = order[:]
        rng.shuffle(partners)
        for i, j in zip(order, partners):
            x, y = train_set[i]
            if args.method == "mixup":
                # mixup (Zhang et al., 2018): train on convex combinations of random pairs.
                x2, y2 = train_set[j]
                lam = rng.betavariate(args.alpha, args.alpha)
                mixed = [lam * x[0] + (1 - lam) * x2[0], lam * x[1] + (1 - lam) * x2[1]]
                model.step(mixed, lam * y + (1 - lam) * y2, lr)
            else:
                model.step(x, float(y), lr)
        if (epoch + 1) % 100 == 0:
            print(f"epoch={epoch + 1} train_loss={model.loss(train_set):.4f}", flush=True)
    return {
        "test_accuracy": round(model.accuracy(test_set), 4),
        "train_loss": round(model.loss(train_set), 4),
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    metrics = train(args)
    print(f"test_accuracy={metrics['test_accuracy']:.4f}")
    print(f"train_loss={metrics['train_loss']:.4f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{args.method}-seed{args.seed}.json"
    path.write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
