"""A one-hidden-layer tanh network for binary classification, trained by SGD in pure Python."""

from __future__ import annotations

import math
import random


def sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)  # the other branch would overflow for very negative z
    return e / (1.0 + e)


class MLP:
    """p(y=1 | x) = sigmoid(v . tanh(W x + c) + b), for 2-D inputs."""

    def __init__(self, hidden: int, rng: random.Random) -> None:
        self.W = [[rng.gauss(0.0, 1.0), rng.gauss(0.0, 1.0)] for _ in range(hidden)]
        self.c = [rng.gauss(0.0, 0.5) for _ in range(hidden)]
        self.v = [rng.gauss(0.0, 1.0 / math.sqrt(hidden)) for _ in range(hidden)]
        self.b = 0.0

    def forward(self, x: list[float]) -> tuple[list[float], float]:
        """Hidden activations and the probability of class 1."""
        h = [math.tanh(w[0] * x[0] + w[1] * x[1] + c) for w, c in zip(self.W, self.c)]
        return h, sigmoid(sum(v * hk for v, hk in zip(self.v, h)) + self.b)

    def step(self, x: list[float], target: float, lr: float) -> None:
        """One SGD step on the cross-entropy with a soft ``target`` in [0, 1]."""
        h, p = self.forward(x)
        g = p - target
        for k, (hk, v) in enumerate(zip(h, self.v)):
            gh = g * v * (1.0 - hk * hk)
            self.v[k] = v - lr * g * hk
            w = self.W[k]
            w[0] -= lr * gh * x[0]
            w[1] -= lr * gh * x[1]
            self.c[k] -= lr * gh
        self.b -= lr * g

    def loss(self, data: list[tuple[list[float], int]]) -> float:
        """Mean binary cross-entropy over ``data``."""
        total = 0.0
        for x, y in data:
            p = min(max(self.forward(x)[1], 1e-12), 1.0 - 1e-12)
            total -= math.log(p if y == 1 else 1.0 - p)
        return total / len(data)

    def accuracy(self, data: list[tuple[list[float], int]]) -> float:
        return sum((self.forward(x)[1] >= 0.5) == (y == 1) for x, y in data) / len(data)
