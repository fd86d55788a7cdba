"""`rb check`: is reprobridge.toml valid, and are the generated artifacts in sync with it?"""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("check")
@click.argument("path", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON report.")
def check_command(path: Path, as_json: bool) -> None:
    """Validate PATH/reprobridge.toml and report artifacts that are stale.

    Exits 3 when the manifest is invalid, 1 when an artifact differs from what the manifest
    renders (run `rb init` to refresh), 0 when everything is in sync.
    """
    from reprobridge.artifacts.sync import stale_artifacts
    from reprobridge.constants import MANIFEST_FILE
    from reprobridge.manifest.io import load_manifest

    manifest, _ = load_manifest(path / MANIFEST_FILE)
    stale = stale_artifacts(path, manifest)
    if as_json:
        click.echo(json.dumps({"valid": True, "stale": stale}, indent=2, sort_keys=True))
    else:
        click.echo(f"{MANIFEST_FILE}: valid ({len(manifest.experiments)} experiment(s))")
        for rel in stale:
            click.echo(f"stale: {rel} (run `rb init` to refresh)")
        if not stale:
            click.echo("artifacts: in sync")
    if stale:
        raise click.exceptions.Exit(1)
