"""`rb check-links`: offline never crashes, HTTP outcomes mapped, coverage by the archive,
and the store path computed from a narHash equals Nix's."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reprobridge.archive import links
from reprobridge.archive.links import check_links, input_url, source_store_hash

LOCK = {
    "nodes": {
        "nixpkgs": {
            "locked": {
                "type": "github",
                "owner": "NixOS",
                "repo": "nixpkgs",
                "rev": "a" * 40,
                "narHash": "sha256-h4gyzSK14DjhF7cBN4VY+Km2ytc4Gg5tV6noZdNPhaY=",
            }
        },
        "local": {"locked": {"type": "path", "path": "/somewhere", "narHash": "sha256-AAAA"}},
        "root": {"inputs": {"nixpkgs": "nixpkgs", "local": "local"}},
    },
    "root": "root",
    "version": 7,
}
MANIFEST = """schema = 1
[project]
name = "demo"
[datasets.cifar]
url = "https://example.org/cifar.tar.gz"
sha256 = "%s"
[experiments.main]
command = "python train.py"
""" % ("b" * 64)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "flake.lock").write_text(json.dumps(LOCK))
    (tmp_path / "reprobridge.toml").write_text(MANIFEST)
    return tmp_path


def test_store_hash_matches_nix() -> None:
    # `nix store add-path --name source` of a directory with a file "a" = "hi\n".
    assert source_store_hash("sha256-h4gyzSK14DjhF7cBN4VY+Km2ytc4Gg5tV6noZdNPhaY=") == (
        "ms37m6i4z2hfa1lm7a6lch7lw9vcr26l"
    )


def test_github_url() -> None:
    url = input_url(LOCK["nodes"]["nixpkgs"]["locked"])  # type: ignore[index]
    assert url == f"https://github.com/NixOS/nixpkgs/archive/{'a' * 40}.tar.gz"


def test_offline_urlopen_error_is_unchecked(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*a: Any, **k: Any) -> Any:
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", fail)
    res = {r.name: r for r in check_links(repo, timeout=0.5)}
    assert res["nixpkgs"].status == "unchecked"
    assert res["nixpkgs"].reason.startswith("could not check: Temporary failure")
    assert res["cifar"].status == "unchecked"
    assert res["local"].status == "local"
    assert not any(r.covered for r in res.values())


def test_success_and_404(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Resp(io.BytesIO):
        status = 200

    def fake(req: urllib.request.Request, timeout: float) -> Any:
        if "example.org" in req.full_url:
            raise urllib.error.HTTPError(req.full_url, 404, "Not Found", {}, None)  # type: ignore[arg-type]
        return Resp(b"")

    monkeypatch.setattr(urllib.request, "urlopen", fake)
    res = {r.name: r for r in check_links(repo)}
    assert (res["nixpkgs"].status, res["nixpkgs"].reason) == ("ok", "HTTP 200")
    assert (res["cifar"].status, res["cifar"].reason) == ("broken", "HTTP 404 Not Found")


def test_head_refused_falls_back_to_ranged_get(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    class Resp(io.BytesIO):
        status = 206

    def fake(req: urllib.request.Request, timeout: float) -> Any:
        seen.append(req.get_method())
        if req.get_method() == "HEAD":
            raise urllib.error.HTTPError(req.full_url, 405, "Method Not Allowed", {}, None)  # type: ignore[arg-type]
        return Resp(b"x")

    monkeypatch.setattr(urllib.request, "urlopen", fake)
    assert links.probe("https://example.org/x") == ("ok", "HTTP 206")
    assert seen == ["HEAD", "GET"]


def test_cli_offline_json(repo: Path) -> None:
    from reprobridge.cli import cli

    out = CliRunner().invoke(cli, ["check-links", "--offline", "--json", str(repo)])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert {d["name"] for d in data} == {"nixpkgs", "local", "cifar"}
    assert all(d["status"] in ("unchecked", "local") for d in data)
    assert any("offline" in d["reason"] for d in data)


@pytest.mark.parametrize("kind", ["missing", "empty-dir"])
def test_cli_path_that_is_no_repository_fails_in_one_line(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`rb check-links /nonexistent` (or a directory rb never set up) exits 10 with one
    error line and a hint, instead of 0 and "nothing to check"."""
    from reprobridge.cli import main

    target = tmp_path / "nonexistent"
    if kind == "empty-dir":
        target.mkdir()
    with pytest.raises(SystemExit) as exit_:
        main(["check-links", "--offline", str(target)])
    assert exit_.value.code == 10
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"error: {target}: ") and lines[1].startswith("hint: ")


def test_archive_coverage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dataset whose sha256 is a file of the archive, and a flake input whose narinfo is
    in nix-cache/, are covered."""
    import hashlib

    from reprobridge.archive.build import MANIFEST_JSON
    from reprobridge.archive.pack import Member, write_archive
    from reprobridge.evidence.dsse import canonical_json

    data = b"the dataset\n"
    manifest = MANIFEST.replace("b" * 64, hashlib.sha256(data).hexdigest())
    h = source_store_hash(LOCK["nodes"]["nixpkgs"]["locked"]["narHash"])  # type: ignore[index]
    files = {
        "flake.lock": json.dumps(LOCK).encode(),
        "reprobridge.toml": manifest.encode(),
        "data/cifar.tar.gz": data,
        f"nix-cache/{h}.narinfo": b"StorePath: x\n",
    }
    members = [Member(p, data=b) for p, b in files.items()]
    members.append(
        Member(MANIFEST_JSON, data=canonical_json({"format": "rb-archive/1", "files": []}))
    )
    out = write_archive(members, tmp_path / "a.tar.gz", mtime=0).path
    res = {r.name: r for r in check_links(out, offline=True)}
    assert res["nixpkgs"].covered and res["nixpkgs"].covered_by == f"nix-cache/{h}.narinfo"
    assert res["cifar"].covered and res["cifar"].covered_by == "data/cifar.tar.gz"
