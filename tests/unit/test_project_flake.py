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


@pytest.mark.nix
@pytest.mark.skipif(shutil.which("nix-trixie") is None, reason="nix-trixie is not installed")
def test_nix_flake_init_template_writes_a_starter(tmp_path: Path) -> None:
    """`nix flake init -t <rb>` (as the user guide says) writes the starter manifest and the
    flake rb renders. nixpkgs is replaced by a stub flake (offline): `templates` needs only
    its `lib.genAttrs`."""
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "unit" / "artifacts"))
    from artifacts_helpers import nix_env

    stub = tmp_path / "nixpkgs"
    stub.mkdir()
    (stub / "flake.nix").write_text(
        "{ outputs = _: { lib.genAttrs = names: f: builtins.listToAttrs"
        " (map (n: { name = n; value = f n; }) names); }; }\n"
    )
    rb = tmp_path / "rb"
    shutil.copytree(ROOT / "reprobridge" / "templates", rb / "reprobridge" / "templates")
    text = (ROOT / "flake.nix").read_text()
    text, n = re.subn(
        r'inputs\.nixpkgs\.url = "[^"]*";', f'inputs.nixpkgs.url = "path:{stub}";', text
    )
    assert n == 1
    (rb / "flake.nix").write_text(text)
    target = tmp_path / "paper"
    target.mkdir()
    out = subprocess.run(
        [
            "nix-trixie",
            "--extra-experimental-features",
            "nix-command flakes",
            "flake",
            "init",
            "-t",
            f"path:{rb}",
        ],
        cwd=target,
        env=nix_env(binary="nix-trixie"),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in target.iterdir()) == ["flake.nix", "reprobridge.toml"]
    template = ROOT / "reprobridge" / "templates"
    assert (target / "reprobridge.toml").read_text() == (template / "reprobridge.toml").read_text()
    assert "rb init" in out.stderr + out.stdout  # the welcome text
