"""Fixtures for the artifact renderers: a sample manifest, golden files, and real Nix.

``--update-golden`` (this directory's option; run ``pytest tests/unit/artifacts
--update-golden``, or set ``RB_UPDATE_GOLDEN=1`` when running the whole suite) rewrites
``tests/golden/`` from the current renderers instead of comparing.

The Nix fixtures follow ``tests/nixstub/README.md``: an offline ``NIX_CONFIG``, and the
stub package set prepared and added to the store once per session.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from artifacts_helpers import (
    HOST_COREUTILS,
    NIX_BINARIES,
    NIXSTUB,
    NixRunner,
    git_track,
    host_python,
    host_uv,
    nix_env,
    nix_unusable,
    sample_manifest_data,
    unpack_nixpkgs_lib,
)

from reprobridge.manifest.schema import Manifest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/ from the current renderers instead of comparing",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """True when golden files are to be rewritten rather than compared."""
    option = bool(request.config.getoption("--update-golden", default=False))
    return option or os.environ.get("RB_UPDATE_GOLDEN") == "1"


@pytest.fixture
def sample_manifest() -> Manifest:
    return Manifest.model_validate(sample_manifest_data())


# -- real Nix -----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def nixstub_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The prepared copy of tests/nixstub (a committed git repository, for git+file: use).

    It holds the tracked stub files, the real nixpkgs lib under nixpkgs-lib/, static bash
    and busybox under bin/, and host.json
    naming the host's python (as pythonXY of its own version), uv and GNU coreutils.
    """
    reason = nix_unusable()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("nixstub") / "stub"
    shutil.copytree(NIXSTUB, root, ignore=shutil.ignore_patterns("README.md"))
    unpack_nixpkgs_lib(root)  # root/nixpkgs-lib/lib: the stub's `lib`, the real one
    (root / "bin").mkdir()
    shutil.copy2("/bin/bash-static", root / "bin" / "bash")
    shutil.copy2("/bin/busybox", root / "bin" / "busybox")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    coreutils = {name: shutil.which(name) for name in HOST_COREUTILS}
    host = {
        "pythons": {version: host_python()},
        "uv": host_uv(),
        "coreutils": {k: v for k, v in sorted(coreutils.items()) if v},
    }
    (root / "host.json").write_text(json.dumps(host, indent=2, sort_keys=True) + "\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    git_track(root)
    subprocess.run(["git", "-C", str(root), "commit", "-q", "-m", "stub"], check=True)
    return root


@pytest.fixture(scope="session")
def nixstub(nixstub_dir: Path) -> str:
    """Store path of the prepared stub package set (added to the store once per session)."""
    out = subprocess.run(
        ["nix", "store", "add-path", "--name", "source", str(nixstub_dir)],
        env=nix_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        pytest.fail(f"nix store add-path failed: {out.stderr}")
    return out.stdout.strip()


@pytest.fixture(params=NIX_BINARIES)
def nix(request: pytest.FixtureRequest) -> NixRunner:
    """Run nix in a directory with the stub overriding the flake's nixpkgs input.

    ``nix("run", ".#reproduce-x", "--", "--tier", "smoke", cwd=repo)``. Parametrized over
    the Nix binaries in NIX_BINARIES; a missing one is skipped.
    """
    binary: str = request.param
    reason = nix_unusable(binary)
    if reason:
        pytest.skip(reason)
    return NixRunner(binary, request.getfixturevalue("nixstub"))


@pytest.fixture
def tmp_git_repo(tmp_path: Path) -> Iterator[Path]:
    repo = tmp_path / "paper-repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    yield repo
