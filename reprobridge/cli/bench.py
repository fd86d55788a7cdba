"""`rb bench`: init and smoke-audit every repository of a suite; tabulate the levels."""

from __future__ import annotations

from pathlib import Path

import click

from reprobridge.cli.options import (
    agent_option,
    backend_option,
    common_options,
    runs_option,
    state,
    threads_option,
    tier_option,
)


@click.command("bench")
@click.argument("suite_path", metavar="SUITE.toml", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Results directory (default: rb-bench-<suite name>): copies, logs, records, tables.",
)
@click.option("-j", "--jobs", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option(
    "--time-limit",
    type=click.FloatRange(min=1.0),
    default=None,
    help="Seconds per repository for init and audit together (default: the suite's, else 600).",
)
@tier_option("smoke")
@runs_option(1)
@backend_option("The audit's backend (host: this machine's Python; not hermetic).", default="host")
@agent_option("static", "How `rb init` recovers (claude costs money; the cost is tabulated).")
@click.option(
    "--reuse",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="A first pass's results directory: audit its (refined) copies, compare with it.",
)
@click.option("--only", multiple=True, metavar="NAME", help="Bench only these repositories.")
@threads_option(
    "RB_THREADS, else `threads` in the user config, else this machine's usable CPUs "
    "divided by --jobs (at least 1)."
)
@common_options
def bench_command(
    suite_path: Path,
    out: Path | None,
    jobs: int,
    time_limit: float | None,
    tier: str,
    runs: int,
    backend: str,
    agent_mode: str,
    reuse: Path | None,
    only: tuple[str, ...],
    threads: int | None,
    as_json: bool,
) -> None:
    """Run `rb init` and `rb audit --tier smoke --runs 1` on each repository of SUITE.toml,
    each in a copy, and write bench.md, bench.json and bench.html to the results directory.

    Resumable: re-running with the same --out skips repositories that have a record.
    Exit 0 when every repository was benched (whatever its levels), 3 for a bad suite,
    130 when interrupted.
    """
    from reprobridge.bench.runner import BenchOptions, make_report, run_bench
    from reprobridge.bench.suite import load_suite
    from reprobridge.bench.table import render_json, render_markdown, write_outputs

    st = state()
    quiet = st.quiet
    suite, base = load_suite(suite_path)
    out = out or Path(f"rb-bench-{suite.bench.name or suite_path.stem}")

    def progress(name: str, text: str) -> None:
        if not quiet:
            click.echo(f"[{name}] {text}", err=True)

    opts = BenchOptions(
        out=out.resolve(),
        jobs=jobs,
        time_limit_s=time_limit or suite.bench.time_limit_s,
        tier=tier,
        runs=runs,
        backend=backend,
        agent=agent_mode,
        reuse=reuse.resolve() if reuse else None,
        only=only,
        threads=st.operator.threads(threads),
        progress=progress,
    )
    records = run_bench(suite, base, opts)
    report = make_report(suite_path, suite, opts, records)
    paths = write_outputs(report, opts.out)
    click.echo(render_json(report) if as_json else render_markdown(report), nl=False)
    if not quiet:
        click.echo(f"written: {', '.join(str(p) for p in paths.values())}", err=True)
