"""The repository's own flake.nix (packages rb, exposes the template) parses, and the
template it exposes is the one rb renders from."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(
    shutil.which("nix-instantiate") is None, reason="nix-instantiate is not installed"
)
def test_top_level_flake_parses() -> None:
    out = subprocess.run(
        ["nix-instantiate", "--parse", str(ROOT / "flake.nix")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr


def test_template_path_is_the_package_template_dir() -> None:
    text = (ROOT / "flake.nix").read_text()
    m = re.search(r"templates\.default = \{\s*path = (\S+);", text)
    assert m is not None
    template_dir = (ROOT / m.group(1)).resolve()
    assert (template_dir / "flake.nix").is_file()
    assert (template_dir / "reprobridge.toml").is_file()
    assert "nixConfig" not in text


def test_flake_lists_the_runtime_dependencies() -> None:
    """The Nix package must carry every dependency pyproject declares (names as nixpkgs has them)."""
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0].lower() for d in deps}
    text = (ROOT / "flake.nix").read_text()
    for name in names:
        assert f"py.{name}" in text, f"flake.nix does not package {name}"
