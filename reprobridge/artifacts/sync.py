"""Which generated artifacts no longer match what `rb init` would write now."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reprobridge.manifest.schema import Manifest


@dataclass(frozen=True)
class SyncReport:
    """``stale``: every artifact `rb init` would create, change or remove (sorted)."""

    manifest: Manifest
    stale: list[str]


def check_artifacts(root: Path) -> SyncReport:
    """Compare every file `rb init` writes with what it would write now.

    The rendering is `rb init --dry-run`'s own (:func:`~reprobridge.initializer.init_repository`
    with ``dry_run=True``), so the two cannot disagree: the manifest refresh, ``flake.nix``,
    ``flake.lock``, ``repro/python/*``, the launchers, ``repro/check.py`` and
    ``REPRODUCE.md``. Nothing is written, nothing in the repository runs, no network: the
    lock mode ``keep`` compares against the existing ``uv.lock`` instead of running uv.
    Raises the manifest's errors (invalid manifest: exit 3).
    """
    from reprobridge.initializer import init_repository

    result = init_repository(root, lock="keep", dry_run=True, git_add=False)
    ch = result.changes
    return SyncReport(result.manifest, sorted({*ch.created, *ch.changed, *ch.removed}))
