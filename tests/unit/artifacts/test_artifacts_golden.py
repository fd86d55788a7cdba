"""Golden files: the rendered artifacts of the sample manifest, byte for byte.

A change to a renderer shows up here as a diff of a readable file. After checking the diff
is intended: ``pytest tests/unit/artifacts --update-golden`` (or ``RB_UPDATE_GOLDEN=1``).
"""

from __future__ import annotations

import pytest
from artifacts_helpers import GOLDEN, VERSION

from reprobridge.artifacts import (
    render_flake,
    render_flake_lock,
    render_launcher,
    render_python_project,
)
from reprobridge.manifest.schema import Manifest

CASE = GOLDEN / "fastmix"


def rendered(manifest: Manifest) -> dict[str, str]:
    files = {
        "flake.nix": render_flake(manifest),
        "flake.lock": render_flake_lock(manifest),
        "repro/launchers/exp3.sh": render_launcher(manifest, "exp3", version=VERSION),
        "repro/launchers/baseline.sh": render_launcher(manifest, "baseline", version=VERSION),
    }
    files.update(render_python_project(manifest))
    return files


def test_golden(sample_manifest: Manifest, update_golden: bool) -> None:
    files = rendered(sample_manifest)
    if update_golden:
        for rel, text in files.items():
            path = CASE / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        pytest.skip("golden files rewritten")
    on_disk = sorted(str(p.relative_to(CASE)) for p in CASE.rglob("*") if p.is_file())
    assert on_disk == sorted(files), "golden files and renderers disagree on the file set"
    for rel, text in files.items():
        golden = (CASE / rel).read_text()
        assert text == golden, f"{rel} differs from tests/golden/fastmix/{rel}"


def test_golden_flake_is_the_template(sample_manifest: Manifest) -> None:
    """Only the nixpkgs input line differs between the shipped template and a rendered flake;
    for the template's own pin they are the same bytes (what `nix flake init -t` writes)."""
    from importlib import resources

    template = resources.files("reprobridge").joinpath("templates", "flake.nix").read_text()
    flake = render_flake(sample_manifest)
    assert len(template.splitlines()) == len(flake.splitlines())
    differing = [
        (a, b) for a, b in zip(template.splitlines(), flake.splitlines(), strict=True) if a != b
    ]
    assert [b for _, b in differing] == [
        f'  inputs.nixpkgs.url = "github:NixOS/nixpkgs/{sample_manifest.environment.nixpkgs.rev}";'  # type: ignore[union-attr]
    ]
