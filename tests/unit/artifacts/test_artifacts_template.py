"""The flake template (`nix flake init -t`) and `rb init` write the same flake.nix."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from reprobridge.artifacts.flake import render_flake, render_flake_lock
from reprobridge.data import load_pins
from reprobridge.manifest.io import load_manifest

TEMPLATES = Path(str(resources.files("reprobridge").joinpath("templates")))


def test_starter_manifest_validates_and_renders_the_template_itself() -> None:
    manifest, _ = load_manifest(TEMPLATES / "reprobridge.toml")
    assert render_flake(manifest) == (TEMPLATES / "flake.nix").read_text()
    assert '"rev": "b6018f87da91d19d0ab4cf979885689b469cdd41"' in render_flake_lock(manifest)


def test_template_pin_is_a_known_release() -> None:
    manifest, _ = load_manifest(TEMPLATES / "reprobridge.toml")
    pin = manifest.environment.nixpkgs
    assert pin is not None
    release = load_pins()["release"][pin.release]
    assert (pin.rev, pin.narHash, pin.lastModified) == (
        release["rev"],
        release["narHash"],
        release["lastModified"],
    )
