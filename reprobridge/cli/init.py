"""`rb init`: recover a repository's reproduction knowledge and write the artifacts."""

from __future__ import annotations

from pathlib import Path

import click

from reprobridge._log import sink
from reprobridge.cli._render import init_json, print_init_summary, progress_sink


@click.command("init")
@click.argument("path", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option(
    "--paper",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The paper (Markdown, LaTeX, arXiv source .tar.gz or PDF): target values and claims.",
)
@click.option(
    "--lock/--no-lock",
    "lock",
    default=None,
    help="Lock Python packages with uv (needs PyPI). Default: try, and keep the requirements if it fails.",
)
@click.option("--dry-run", is_flag=True, help="Show what would be written; write nothing.")
@click.option(
    "--no-git-add",
    is_flag=True,
    help="Do not `git add -N` new files (a flake only sees files git knows).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print a JSON report on stdout instead of the summary."
)
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
def init_command(
    path: Path,
    paper: Path | None,
    lock: bool | None,
    dry_run: bool,
    no_git_add: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Recover what reproducing PATH (default: .) needs and write reprobridge.toml, flake.nix,
    flake.lock, repro/ and REPRODUCE.md.

    Static recovery only: nothing in the repository is executed and no network is used
    (except `uv lock` reaching PyPI, unless --no-lock). Re-running refreshes what rb derived
    and keeps every value you edited in reprobridge.toml.
    """
    from reprobridge.initializer import LockMode, init_repository

    mode: LockMode = "auto" if lock is None else ("always" if lock else "never")
    with sink(progress_sink(quiet or as_json)):
        result = init_repository(
            path, paper=paper, lock=mode, dry_run=dry_run, git_add=not no_git_add
        )
    if as_json:
        click.echo(init_json(result))
    else:
        print_init_summary(result)
