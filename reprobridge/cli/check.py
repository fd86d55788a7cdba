"""`rb check`: is reprobridge.toml valid, and are the generated artifacts in sync with it?"""

from __future__ import annotations

from pathlib import Path

import click

from reprobridge.cli.options import common_options, print_json, repo_argument


@click.command("check")
@repo_argument
@common_options
def check_command(path: Path, as_json: bool) -> None:
    """Validate the manifest of the repository at PATH (default: the one holding the current
    directory) and report every artifact `rb init` would change: reprobridge.toml's derived
    values, flake.nix, flake.lock, repro/python/*, the launchers, repro/check.py and
    REPRODUCE.md (what `rb init --dry-run` lists).

    Exits 3 when the manifest is invalid, 1 when an artifact is stale (run `rb init` to
    refresh), 0 when everything is in sync.
    """
    from reprobridge.constants import MANIFEST_FILE
    from reprobridge.initializer import check_artifacts

    report = check_artifacts(path)
    stale = report.stale
    if as_json:
        print_json({"valid": True, "root": str(path), "stale": stale})
    else:
        click.echo(f"{MANIFEST_FILE}: valid ({len(report.manifest.experiments)} experiment(s))")
        for rel in stale:
            click.echo(f"stale: {rel} (run `rb init` to refresh)")
        if not stale:
            click.echo("artifacts: in sync")
    if stale:
        raise click.exceptions.Exit(1)
