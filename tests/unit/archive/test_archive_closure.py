"""`--with-closure` with real Nix and the stub nixpkgs (tests/nixstub): the devShell's
environment and every flake input land in a file binary cache inside the archive."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from archive_helpers import read_members
from artifacts_helpers import NixRunner, nix_env

from reprobridge.archive.build import ArchiveOptions, build_archive
from reprobridge.archive.closure import export_closure
from reprobridge.archive.verify import verify_archive
from reprobridge.examples import copy_example
from reprobridge.initializer import init_repository

pytestmark = [pytest.mark.nix, pytest.mark.slow]  # real Nix builds of a closure


@pytest.fixture
def flake_repo(tmp_path: Path) -> Path:
    repo = copy_example(tmp_path / "mixup-paper")
    init_repository(repo, paper=repo / "paper.md", lock="never")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "rb init"], check=True)
    return repo


def test_closure_cache_is_complete(nix: NixRunner, flake_repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = nix_env(binary=nix.binary)
    devenv = export_closure(
        flake_repo, cache, nix=nix.binary, overrides={"nixpkgs": f"path:{nix.stub}"}, env=env
    )
    assert (cache / "nix-cache-info").is_file()
    assert devenv.startswith("/nix/store/")
    # The whole closure of the environment is in the cache (path-info against the cache
    # store fails on any missing reference), and so is the stub nixpkgs source.
    out = subprocess.run(
        [nix.binary, "path-info", "--store", f"file://{cache}", "--recursive", devenv],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.split()) >= 2
    stub_hash = Path(nix.stub).name.split("-", 1)[0]
    assert (cache / f"{stub_hash}.narinfo").is_file()


def test_archive_with_closure_verifies(nix: NixRunner, flake_repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "c.tar.gz"
    res = build_archive(
        flake_repo,
        out,
        ArchiveOptions(
            evidence=["none"],
            with_closure=True,
            nix_binary=nix.binary,
            nix_overrides={"nixpkgs": f"path:{nix.stub}"},
            nix_env=nix_env(binary=nix.binary),
        ),
    )
    rep = verify_archive(res.path)
    assert rep.ok, rep.problems
    names = read_members(out)
    assert "nix-cache/nix-cache-info" in names
    assert any(n.endswith(".narinfo") for n in names)
    assert json.loads(names["MANIFEST.json"] or b"")["with_closure"] is True
