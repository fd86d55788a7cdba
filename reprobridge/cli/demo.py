"""`rb demo`: init (and run) the bundled example paper repository."""

from __future__ import annotations

import tempfile
from pathlib import Path

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
    help="Where the experiments run: nix when it can run the flake, else the host.",
)
@click.option("--no-run", is_flag=True, help="Only recover and write the artifacts; run nothing.")
@click.option("--tier", type=click.Choice(["full", "smoke"]), default="full", show_default=True)
def demo_command(dest: Path | None, backend: str, no_run: bool, tier: str) -> None:
    """Copy the bundled example paper repository, run `rb init` on it, then run each
    experiment once through its launcher and threshold check.
    """
    from reprobridge.examples import copy_example
    from reprobridge.execute import RunRequest, choose_executor
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
    executor, why_not_nix = choose_executor(backend, repo)  # type: ignore[arg-type]
    click.echo(
        click.style(
            f"Running {len(result.manifest.experiments)} experiment(s) on the {executor.name} backend"
            + (
                f" (not hermetic: {why_not_nix or '--backend host'})"
                if executor.name == "host"
                else ""
            ),
            bold=True,
        )
    )
    failed = 0
    for exp_id in result.manifest.experiments:
        outcome = executor.run(RunRequest(repo, exp_id, tier))  # type: ignore[arg-type]
        mark = click.style("PASS", fg="green") if outcome.passed else click.style("FAIL", fg="red")
        click.echo(f"{mark} {exp_id}  (log: {outcome.log_path.relative_to(repo)})")
        for line in outcome.check_output.strip().splitlines():
            click.echo(f"     {line}")
        failed += not outcome.passed
    click.echo(f"Artifacts are in {repo}: reprobridge.toml, flake.nix, repro/, REPRODUCE.md")
    if failed:
        raise click.exceptions.Exit(1)
