"""Optional requirement sets an install line installs (reprobridge.detect.procedure._installs)."""

from __future__ import annotations

import pytest

from reprobridge.detect.procedure._installs import optional_sets

FILES = frozenset({"requirements/requirements-atari.txt"})


@pytest.mark.parametrize(
    ("line", "workdir", "sets"),
    [
        ('uv pip install ".[atari]"', ".", [".[atari]"]),
        ("pip install -e .[atari,dev]", ".", [".[atari]"]),  # a development extra is not
        ("python -m pip install './[atari]'", ".", [".[atari]"]),
        ("pip install -r requirements/requirements-atari.txt", ".", FILES),
        ("pip install -rrequirements/requirements-atari.txt", ".", FILES),
        ("pip install -r requirements-atari.txt", "requirements", FILES),
        ("pip install -r requirements/requirements-atari.txt", "docs", FILES),  # from the root
        ('poetry install -E atari --extras "mujoco docs"', ".", [".[atari]", ".[mujoco]"]),
        ("uv sync --extra atari", ".", [".[atari]"]),
        ("uv sync --all-extras", ".", [".[all extras]"]),
        # The base set, a PyPI package's extra, the project itself: nothing optional.
        ("pip install -r requirements/requirements.txt", ".", []),
        ("pip install torch[cuda] gymnasium", ".", []),
        ("uv pip install .", ".", []),
        ("python train.py --extras atari", ".", []),
        ('pip install "unclosed', ".", []),
    ],
)
def test_optional_sets(line: str, workdir: str, sets: list[str] | frozenset[str]) -> None:
    assert optional_sets(line, workdir, FILES) == sorted(sets)
