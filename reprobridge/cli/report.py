"""`rb report [AUDIT]`: an evidence bundle as a self-contained HTML page or as Markdown."""

from __future__ import annotations

from pathlib import Path

import click

from reprobridge.cli.options import common_options, print_json, repo_option


@click.command("report")
@click.argument("audit", required=False)
@click.option(
    "-o",
    "--output",
    help="Where to write the report; `-` for stdout. "
    "Default: repro/report.html (repro/report.md with --format md).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "md"]),
    help="html (one self-contained page) or md (GitHub Markdown, for a pull request). "
    "Default: from the output's suffix, else html.",
)
@click.option(
    "--compare",
    nargs=2,
    metavar="A B",
    help="Report on audit B and what changed since audit A (ids or bundle paths).",
)
@repo_option(
    "The repository whose repro/evidence holds the audits (default: the one holding .).",
    required=False,
)
@common_options
def report_command(
    audit: str | None,
    output: str | None,
    fmt: str | None,
    compare: tuple[str, str] | None,
    root: Path,
    as_json: bool,
) -> None:
    """Render audit AUDIT (an id under repro/evidence, or a bundle path; default: the newest
    finished audit) as a report: verdicts, metrics against their bands, resource timelines,
    fingerprints, differences between runs, and claims. The report shows what the bundle
    records; `rb verify` re-checks it. Prints the path written."""
    from reprobridge._fs import write_atomic
    from reprobridge.report import render_report

    if compare and audit:
        raise click.UsageError("give either AUDIT or --compare A B, not both")
    if fmt is None:
        fmt = "md" if output and output.lower().endswith((".md", ".markdown")) else "html"
    pair = (compare[0], compare[1]) if compare else None
    plan: list[str] = []
    text = render_report(
        root, audit, compare=pair, fmt="md" if fmt == "md" else "html", plan_differences=plan
    )
    if plan:
        # Before the path: "No verdict changed" between different plans is not like for like.
        click.echo(
            click.style("warning: the audits ran different plans: ", fg="yellow", bold=True)
            + "; ".join(plan),
            err=True,
        )
    if output == "-":
        click.echo(text, nl=False)
        return
    path = Path(output) if output else root / "repro" / f"report.{fmt}"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text.encode("utf-8"))
    if as_json:
        print_json({"path": str(path), "format": fmt})
    else:
        click.echo(str(path))
