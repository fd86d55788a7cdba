"""What an auditor's ``--override-input`` put in place of a locked flake input.

Contract of :func:`substitutions`: for each overridden input, the narHash ``flake.lock``
locks and the narHash Nix resolved for the override (``nix flake metadata --json`` with
the overrides: its ``locks``). When they differ (or either is unknown) the input was
*substituted*: the audited environment is not the pinned one, so it is not hermetic and
its environment level is not a pass. An override whose content is the locked content (the
same narHash, e.g. a local copy of the pinned nixpkgs) substitutes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Substitution:
    """One overridden input whose content is not the locked content (both narHashes)."""

    input: str
    url: str
    locked_nar_hash: str | None
    override_nar_hash: str | None

    def describe(self) -> str:
        return (
            f"input {self.input!r} substituted by {self.url} "
            f"(narHash {self.override_nar_hash or 'unknown'}; flake.lock locks "
            f"{self.locked_nar_hash or 'none'})"
        )


def input_node(lock: Mapping[str, Any], input_path: str) -> str | None:
    """The node key an input path (``nixpkgs``, ``a/b``) names in ``lock``, or None."""
    nodes = lock.get("nodes") or {}
    key: Any = lock.get("root", "root")
    for part in input_path.split("/"):
        ref = ((nodes.get(key) or {}).get("inputs") or {}).get(part)
        if isinstance(ref, list):  # `follows`: a path from the root
            return input_node(lock, "/".join(ref)) if ref else None
        if not isinstance(ref, str):
            return None
        key = ref
    return str(key)


def _nar_hash(lock: Mapping[str, Any], input_path: str) -> str | None:
    node = input_node(lock, input_path)
    locked = ((lock.get("nodes") or {}).get(node) or {}).get("locked") if node else None
    value = locked.get("narHash") if isinstance(locked, dict) else None
    return value if isinstance(value, str) and value else None


def substitutions(
    committed: Mapping[str, Any], resolved: Mapping[str, Any], overrides: Mapping[str, str]
) -> list[Substitution]:
    """The overrides (input path -> URL) whose resolved narHash in ``resolved`` is not the
    one ``committed`` (flake.lock) locks, in input order (see the module docstring)."""
    out: list[Substitution] = []
    for name, url in sorted(overrides.items()):
        locked, got = _nar_hash(committed, name), _nar_hash(resolved, name)
        if locked is None or got is None or locked != got:
            out.append(Substitution(name, url, locked, got))
    return out
