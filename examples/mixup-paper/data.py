"""Synthetic data: two interleaving half-moons in 2-D, with noisy training labels.

Everything is drawn from ``random.Random(f"data-{seed}")``, so a seed names one dataset
exactly, on every platform and Python hash seed.
"""

from __future__ import annotations

import math
import random

Example = tuple[list[float], int]


def make_moons(rng: random.Random, n: int, noise: float, label_noise: float) -> list[Example]:
    """``n`` points alternating between the two moons, Gaussian ``noise`` on each coordinate.

    A fraction ``label_noise`` of the labels is flipped at random.
    """
    examples: list[Example] = []
    for i in range(n):
        label = i % 2
        t = rng.random() * math.pi
        if label == 0:
            x, y = math.cos(t), math.sin(t)
        else:
            x, y = 1.0 - math.cos(t), 0.5 - math.sin(t)
        point = [x + rng.gauss(0.0, noise), y + rng.gauss(0.0, noise)]
        if rng.random() < label_noise:
            label = 1 - label
        examples.append((point, label))
    return examples


def make_dataset(
    seed: int,
    *,
    n_train: int = 100,
    n_test: int = 1000,
    noise: float = 0.2,
    label_noise: float = 0.3,
) -> tuple[list[Example], list[Example]]:
    """The (train, test) split for ``seed``: few training points with 30% flipped labels,
    a large test set with clean labels."""
    rng = random.Random(f"data-{seed}")
    train = make_moons(rng, n_train, noise, label_noise)
    test = make_moons(rng, n_test, noise, 0.0)
    return train, test
