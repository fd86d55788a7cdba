"""Which generated artifacts no longer match what the manifest renders."""

from __future__ import annotations

from pathlib import Path

from reprobridge import __version__
from reprobridge.constants import FLAKE_FILE, FLAKE_LOCK_FILE, LAUNCHERS_DIR
from reprobridge.manifest.schema import Manifest


def expected_artifacts(manifest: Manifest) -> dict[str, str]:
    """The artifacts that depend on the manifest alone (not on recovery notes)."""
    from reprobridge.artifacts.flake import render_flake, render_flake_lock
    from reprobridge.artifacts.launchers import render_launcher

    out = {
        FLAKE_FILE: render_flake(manifest, version=__version__),
        FLAKE_LOCK_FILE: render_flake_lock(manifest),
    }
    for exp_id in manifest.experiments:
        out[f"{LAUNCHERS_DIR}/{exp_id}.sh"] = render_launcher(manifest, exp_id, version=__version__)
    return out


def stale_artifacts(root: Path, manifest: Manifest) -> list[str]:
    """Relative paths whose content differs from (or is missing for) the manifest's rendering."""
    stale = []
    for rel, text in sorted(expected_artifacts(manifest).items()):
        path = root / rel
        if not path.is_file() or path.read_text(encoding="utf-8", errors="replace") != text:
            stale.append(rel)
    return stale
