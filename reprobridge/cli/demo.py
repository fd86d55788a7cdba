"""`rb demo`: recover the bundled example paper repository, then audit it."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import cast

import click

from reprobridge._log import sink
from reprobridge.cli._render import print_init_summary, progress_sink
from reprobridge.cli.options import (
    backend_option,
    common_options,
    print_json,
    runs_option,
    state,
    tier_option,
)


@click.command("demo")
@click.option(
    "--dir",
    "dest",
    type=click.Path(path_type=Path),
    help="Where to put the example's copy (must not exist). Default: a new temporary directory.",
)
@backend_option()
@runs_option(3)
@click.option("--no-run", is_flag=True, help="Only recover and write the artifacts; run nothing.")
@tier_option("full")
@common_options
def demo_command(
    dest: Path | None, backend: str | None, runs: int, no_run: bool, tier: str, as_json: bool
) -> None:
    """Copy the bundled example paper repository, run `rb init` on it, then `rb audit` it:
    each experiment RUNS times in isolation, judged against the paper's numbers and claim.
    """
    from reprobridge.audit.auditor import AuditOptions, Tier
    from reprobridge.cli.audit import run_and_render
    from reprobridge.examples import copy_example
    from reprobridge.initializer import init_repository

    st = state()
    if dest is None:
        dest = Path(tempfile.mkdtemp(prefix="rb-demo-")) / "mixup-paper"
    elif dest.exists():
        raise click.UsageError(f"--dir {dest} already exists; give a new path")
    repo = copy_example(dest)
    quiet = st.quiet or as_json
    if not as_json:
        click.echo(click.style(f"Example repository: {repo}", bold=True))
    with sink(progress_sink(-1 if quiet else st.verbosity)):
        result = init_repository(repo, paper=repo / "paper.md")
    if no_run:
        if as_json:
            print_json({"repository": str(repo), "init": result.to_json()})
        else:
            print_init_summary(result)
        return
    opts = AuditOptions(
        runs=runs,
        tier=cast(Tier, tier),
        backend=st.operator.backend(backend),
        max_output_mb=st.operator.max_output_mb(None),
    )
    if not as_json:
        print_init_summary(result)
        click.echo(
            click.style(f"\nAuditing: rb audit --runs {runs} --tier {tier} (in {repo})", bold=True)
        )
    extra = {"repository": str(repo), "init": result.to_json()}
    try:
        run_and_render(repo, opts, as_json=as_json, quiet=quiet, extra=extra)
    finally:
        # Where to look next, passed or failed (an error, not a verdict, says its own hint).
        if not as_json and sys.exc_info()[0] in (None, click.exceptions.Exit):
            click.echo(
                click.style("Next", bold=True)
                + f": rb report -C {repo}   (one HTML page: verdicts, metrics, timelines)"
            )
