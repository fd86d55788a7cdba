"""`rb demo`: recover the bundled example paper repository, then audit it."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import cast

import click

from reprobridge._log import sink
from reprobridge.cli._render import print_init_summary, progress_sink


@click.command("demo")
@click.option(
    "--dir",
    "dest",
    type=click.Path(path_type=Path),
    help="Where to put the example's copy (must not exist). Default: a new temporary directory.",
)
@click.option(
    "--backend",
    type=click.Choice(["auto", "nix", "host"]),
    default="auto",
    show_default=True,
    help="Where the audit runs: nix when it can materialize the pinned devShell, else the host.",
)
@click.option(
    "--runs", type=click.IntRange(1, 100), default=3, show_default=True, help="Runs per experiment."
)
@click.option("--no-run", is_flag=True, help="Only recover and write the artifacts; run nothing.")
@click.option("--tier", type=click.Choice(["full", "smoke"]), default="full", show_default=True)
def demo_command(dest: Path | None, backend: str, runs: int, no_run: bool, tier: str) -> None:
    """Copy the bundled example paper repository, run `rb init` on it, then `rb audit` it:
    each experiment RUNS times in isolation, judged against the paper's numbers and claim.
    """
    from reprobridge.audit.auditor import AuditOptions, Backend, Tier
    from reprobridge.cli.audit import run_and_render
    from reprobridge.examples import copy_example
    from reprobridge.initializer import init_repository

    if dest is None:
        dest = Path(tempfile.mkdtemp(prefix="rb-demo-")) / "mixup-paper"
    elif dest.exists():
        raise click.UsageError(f"--dir {dest} already exists; give a new path")
    repo = copy_example(dest)
    click.echo(click.style(f"Example repository: {repo}", bold=True))
    with sink(progress_sink(False)):
        result = init_repository(repo, paper=repo / "paper.md")
    print_init_summary(result)
    if no_run:
        return
    click.echo(
        click.style(f"\nAuditing: rb audit --runs {runs} --tier {tier} (in {repo})", bold=True)
    )
    opts = AuditOptions(runs=runs, tier=cast(Tier, tier), backend=cast(Backend, backend))
    run_and_render(repo, opts, as_json=False, quiet=False)
