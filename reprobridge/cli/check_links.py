"""`rb check-links [PATH]`: which flake inputs and dataset URLs still resolve."""

from __future__ import annotations

from pathlib import Path

import click

from reprobridge.cli.options import common_options, print_json


@click.command("check-links")
# No exists=True: a missing PATH is the library's one-line ArchiveError (exit 10), not a
# three-line usage error.
@click.argument("path", type=click.Path(path_type=Path), default=".")
@click.option("--offline", is_flag=True, help="Check nothing on the network.")
@click.option("--timeout", type=click.FloatRange(0.1, 120), default=10.0, show_default=True)
@common_options
def check_links_command(path: Path, offline: bool, timeout: float, as_json: bool) -> None:
    """Check the links of PATH, a repository (default: .) or an archive: each locked flake
    input and dataset URL is ok, broken, unchecked (with the reason) or local, and
    "covered" when the archive holds it anyway. Exit 1 when a link is broken and not
    covered; 10 when PATH does not exist or is neither a repository set up by rb nor an
    archive."""
    from reprobridge.archive.links import check_links
    from reprobridge.discovery import find_repository

    if path.is_dir():  # an archive file is taken as it is; a directory is found upwards
        path = find_repository(path, required=False)
    results = check_links(path, offline=offline, timeout=timeout)
    lost = [r for r in results if r.status == "broken" and not r.covered]
    if as_json:
        print_json([r.to_json() for r in results])
    else:
        for r in results:
            cov = f"  [covered: {r.covered_by}]" if r.covered else ""
            click.echo(
                f"{r.kind} {r.name}: {r.status}: {r.reason or '-'} ({r.url or 'no url'}){cov}"
            )
        if not results:
            click.echo("no flake inputs or dataset URLs to check")
    if lost:
        raise click.exceptions.Exit(1)
