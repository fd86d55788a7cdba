"""`--with-closure` with real Nix and the stub nixpkgs (tests/nixstub): the devShell's
environment and every flake input land in a file binary cache inside the archive."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from archive_helpers import read_members
from artifacts_helpers import NixRunner, nix_env

from reprobridge.archive.build import ArchiveOptions, build_archive
from reprobridge.archive.closure import NIX_FLAGS, PUBLIC_KEY_FILE, export_closure
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
    # Signed by the key whose public half the cache carries (rb unpack prints it).
    public = (cache / PUBLIC_KEY_FILE).read_text().strip()
    assert public.startswith("rb-archive:")
    assert all("Sig: rb-archive:" in p.read_text() for p in cache.glob("*.narinfo"))
    # From an empty store, with signatures required: the whole closure substitutes from
    # the cache alone (a local store at another root stands for a new machine's /nix).
    empty = tmp_path / "empty-store"
    copy = [nix.binary, *NIX_FLAGS, "copy", "--from", f"file://{cache}", "--to", str(empty)]
    trusted = ["--option", "require-sigs", "true", "--option", "trusted-public-keys"]
    got = subprocess.run(
        [*copy, *trusted, public, devenv], env=env, capture_output=True, text=True, check=False
    )
    assert got.returncode == 0, got.stderr
    assert (empty / devenv.lstrip("/")).exists()
    # With another key trusted, Nix refuses the cache's paths.
    other = tmp_path / "other-store"
    wrong = "other:" + public.split(":", 1)[1][:-4] + "AAA="
    got = subprocess.run(
        [*copy[:-1], str(other), *trusted, wrong, devenv],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert got.returncode != 0
    assert not (other / devenv.lstrip("/")).exists()


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
    key = (names[f"nix-cache/{PUBLIC_KEY_FILE}"] or b"").decode().strip()
    assert key.startswith(f"rb-archive-{res.commit[:12]}:")
    # rb unpack prints the cache's key, ready for trusted-public-keys.
    proc = subprocess.run(
        [sys.executable, "-m", "reprobridge", "unpack", str(out), str(tmp_path / "u")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"nix-cache/ is signed with the Nix key: {key}" in proc.stdout
    assert f"--option trusted-public-keys '{key}'" in proc.stdout


def test_nix_develop_from_the_cache_in_an_empty_store_offline(
    nix: NixRunner, flake_repo: Path, nixstub_dir: Path, tmp_path: Path
) -> None:
    """A new machine: `/nix` is an empty directory (bubblewrap binds one over it), the
    network namespace has no interface, builds are off (max-jobs 0). `nix develop` gets the
    whole environment from the archive's signed cache and runs a command in it.

    Nix turns substitution off when it finds no network interface ("you don't have
    Internet access"), local file caches included: `--option substitute true` (what
    `rb unpack` prints) turns it back on. The cache serves the Nix that made it: `nix
    develop`'s environment derivation embeds that Nix's get-env.sh."""
    if shutil.which("bwrap") is None:
        pytest.skip("needs bubblewrap to put an empty /nix in place")
    # The stub as a plain directory: its store path is not in the empty store.
    over = {"nixpkgs": f"path:{nixstub_dir}"}
    env = nix_env(binary=nix.binary)
    cache = tmp_path / "cache"
    export_closure(flake_repo, cache, nix=nix.binary, overrides=over, env=env)
    key = (cache / PUBLIC_KEY_FILE).read_text().strip()
    empty = tmp_path / "empty-nix"
    empty.mkdir()
    env = {**env, "XDG_CACHE_HOME": str(tmp_path / "xdg")}  # no remembered narinfo misses
    binary = shutil.which(nix.binary)
    assert binary is not None
    argv = [
        "bwrap", "--bind", "/", "/", "--bind", str(empty), "/nix", "--dev", "/dev",
        "--proc", "/proc", "--unshare-net", "--",
        binary, *NIX_FLAGS, "develop", "--no-write-lock-file",
        "--override-input", "nixpkgs", over["nixpkgs"],
        "--option", "substitute", "true",
        "--option", "substituters", f"file://{cache}",
        "--option", "trusted-public-keys", key,
        "--option", "max-jobs", "0",
        str(flake_repo), "-c", "sh", "-c", "command -v python3 && echo RB-OFFLINE-OK",
    ]  # fmt: skip
    got = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=600)
    assert got.returncode == 0, got.stderr[-3000:]
    assert "RB-OFFLINE-OK" in got.stdout
    assert got.stdout.startswith("/nix/store/")  # python3 from the substituted closure
    assert "copying path" in got.stderr and "building '" not in got.stderr
