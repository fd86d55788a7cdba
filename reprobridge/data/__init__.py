"""Data files shipped with ReproBridge, loaded with :mod:`importlib.resources`.

``packages.toml`` holds the name tables of the dependency detectors (import -> distribution,
conda and apt names, system needs; typed in :mod:`reprobridge.detect._pkgmap`) and the torch
release dates the Python project renderer bounds torch with.

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
PACKAGES_FILE = "packages.toml"


@lru_cache(maxsize=1)
def load_pins() -> dict[str, Any]:
    """The parsed ``nixpkgs-pins.toml``, read once per process.

    Callers must not mutate the returned dict (it is shared through the cache).
    """
    text = files(__name__).joinpath(PINS_FILE).read_text(encoding="utf-8")
    return tomllib.loads(text)


@lru_cache(maxsize=1)
def load_packages() -> dict[str, Any]:
    """The parsed ``packages.toml``, read once per process (callers must not mutate it)."""
    text = files(__name__).joinpath(PACKAGES_FILE).read_text(encoding="utf-8")
    return tomllib.loads(text)
