"""Which auditor overrides replace a locked flake input with other content."""

from __future__ import annotations

from typing import Any

from reprobridge.audit.nixlock import Substitution, substitutions


def _lock(nar: str | None, *, follows: bool = False) -> dict[str, Any]:
    locked = {"type": "github", "owner": "NixOS", "repo": "nixpkgs", "rev": "a" * 40}
    if nar is not None:
        locked["narHash"] = nar
    root_inputs: dict[str, Any] = {"nixpkgs": ["other"]} if follows else {"nixpkgs": "nixpkgs"}
    return {
        "version": 7,
        "root": "root",
        "nodes": {
            "root": {"inputs": {**root_inputs, "other": "nixpkgs"}},
            "nixpkgs": {"locked": locked},
        },
    }


def test_an_override_with_other_content_is_a_substitution() -> None:
    got = substitutions(_lock("sha256-A"), _lock("sha256-B"), {"nixpkgs": "path:/x"})
    assert got == [Substitution("nixpkgs", "path:/x", "sha256-A", "sha256-B")]
    assert "flake.lock locks sha256-A" in got[0].describe()


def test_the_locked_content_is_not_a_substitution() -> None:
    assert substitutions(_lock("sha256-A"), _lock("sha256-A"), {"nixpkgs": "path:/x"}) == []
    assert substitutions(_lock("sha256-A"), _lock("sha256-B"), {}) == []


def test_an_unknown_hash_is_a_substitution_and_follows_are_followed() -> None:
    got = substitutions(_lock(None), _lock("sha256-B"), {"nixpkgs": "path:/x"})
    assert got[0].locked_nar_hash is None
    followed = substitutions(
        _lock("sha256-A", follows=True), _lock("sha256-A", follows=True), {"nixpkgs": "p"}
    )
    assert followed == []
