"""Data files shipped with ReproBridge, loaded with :mod:`importlib.resources`.

``packages.toml`` holds the name tables of the dependency detectors (import -> distribution,
conda and apt names, system needs; typed in :mod:`reprobridge.detect._pkgmap`) and the torch
release dates the Python project renderer bounds torch with.

``nixpkgs-pins.toml`` is a copy of ``shared/data/nixpkgs-pins.toml`` (the known nixpkgs
releases and the torch/TensorFlow/JAX <-> CUDA <-> gcc pairings). It is package data so that
an installed ``rb`` works offline without the source tree.

``api_drift.toml`` lists names that package releases removed and what replaces each (typed
in :mod:`reprobridge.detect.procedure.drift`).

``io_calls.toml`` holds the library calls that download, read or write data (typed in
:mod:`reprobridge.detect.procedure._io_calls`); ``prices.toml`` the model prices of the agent's cost
ledger (typed in :mod:`reprobridge.agent.ledger`).

Each file is parsed on first use and once per process (:func:`load`); importing this package
reads nothing, so commands that need no table (``rb --help``) do not pay for one.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib.resources import files
from typing import Any

PINS_FILE = "nixpkgs-pins.toml"
PACKAGES_FILE = "packages.toml"
IO_CALLS_FILE = "io_calls.toml"
PRICES_FILE = "prices.toml"
API_DRIFT_FILE = "api_drift.toml"


@cache
def load(name: str) -> dict[str, Any]:
    """The parsed data file ``name`` of this package, read once per process.

    Callers must not mutate the returned dict (it is shared through the cache).
    """
    return tomllib.loads(files(__name__).joinpath(name).read_text(encoding="utf-8"))


def load_pins() -> dict[str, Any]:
    """The parsed ``nixpkgs-pins.toml`` (see :func:`load`)."""
    return load(PINS_FILE)


def load_packages() -> dict[str, Any]:
    """The parsed ``packages.toml`` (see :func:`load`)."""
    return load(PACKAGES_FILE)
