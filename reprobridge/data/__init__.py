"""Data files shipped with ReproBridge, loaded with :mod:`importlib.resources`.

``nixpkgs-pins.toml`` is a copy of ``shared/data/nixpkgs-pins.toml`` (the known nixpkgs
releases and the torch/TensorFlow/JAX <-> CUDA <-> gcc pairings). It is package data so that
an installed ``rb`` works offline without the source tree.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from importlib.resources import files
from typing import Any

PINS_FILE = "nixpkgs-pins.toml"


@lru_cache(maxsize=1)
def load_pins() -> dict[str, Any]:
    """The parsed ``nixpkgs-pins.toml``, read once per process.

    Callers must not mutate the returned dict (it is shared through the cache).
    """
    text = files(__name__).joinpath(PINS_FILE).read_text(encoding="utf-8")
    return tomllib.loads(text)
