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
@click.option(
    "--agent",
    "agent_mode",
    type=click.Choice(["static", "claude", "auto"]),
    default="auto",
    show_default=True,
    help="Recovery: static only, a Claude agent, or auto (Claude when ANTHROPIC_API_KEY is set).",
)
@click.option("--model", default=None, help="Claude model id (default claude-sonnet-4-5).")
@click.option("--max-tokens", type=int, default=None, help="Max output tokens per response.")
@click.option("--budget-usd", type=float, default=None, help="Stop the agent at this cost.")
@click.option("--max-tool-calls", type=int, default=None, help="Stop after this many tool calls.")
@click.option("--max-wall", type=float, default=None, help="Stop the agent after SECONDS.")
@click.option(
    "--allow-network", is_flag=True, default=None, help="Let the agent's commands use the network."
)
@click.option("--verify", is_flag=True, help="Run a smoke audit (1 run, host) of the result.")
def init_command(
    path: Path,
    paper: Path | None,
    lock: bool | None,
    dry_run: bool,
    no_git_add: bool,
    as_json: bool,
    quiet: bool,
    agent_mode: str,
    model: str | None,
    max_tokens: int | None,
    budget_usd: float | None,
    max_tool_calls: int | None,
    max_wall: float | None,
    allow_network: bool | None,
    verify: bool,
) -> None:
    """Recover what reproducing PATH (default: .) needs and write reprobridge.toml, flake.nix,
    flake.lock, repro/ and REPRODUCE.md.

    Static recovery only: nothing in the repository is executed and no network is used
    (except `uv lock` reaching PyPI, unless --no-lock). Re-running refreshes what rb derived
    and keeps every value you edited in reprobridge.toml.
    """
    import os

    from reprobridge.initializer import AgentOptions, LockMode, init_repository

    mode: LockMode = "auto" if lock is None else ("always" if lock else "never")
    has_key = bool(os.environ.get("ANTHROPIC_API_KEY"))
    use_claude = agent_mode == "claude" or (agent_mode == "auto" and has_key)
    agent = None
    if use_claude:
        from reprobridge.recovery.agent import config_from_pyproject

        pyproject = path / "pyproject.toml"
        config = config_from_pyproject(
            pyproject.read_text("utf-8") if pyproject.is_file() else None,
            {
                "model": model,
                "max_tokens": max_tokens,
                "budget_usd": budget_usd,
                "max_tool_calls": max_tool_calls,
                "max_wall_s": max_wall,
                "allow_network": allow_network,
            },
        )
        agent = AgentOptions(config=config)
    with sink(progress_sink(quiet or as_json)):
        result = init_repository(
            path, paper=paper, lock=mode, dry_run=dry_run, git_add=not no_git_add, agent=agent
        )
    # Said after the work: an error must stay the one `error:` line of the CLI contract.
    if not quiet:
        why = (
            "--agent claude"
            if agent_mode == "claude"
            else ("ANTHROPIC_API_KEY is set" if has_key else "no ANTHROPIC_API_KEY")
            if agent_mode == "auto"
            else "--agent static"
        )
        click.echo(f"recovery: {'claude agent' if use_claude else 'static'} ({why})", err=True)
    if as_json:
        click.echo(init_json(result))
    else:
        print_init_summary(result)
        if result.agent is not None:
            click.echo(f"agent: {result.agent.ledger.summary()}")
            if result.agent.stopped_by:
                click.echo(f"agent stopped early: {result.agent.stopped_by}")
    if verify and not dry_run:
        from reprobridge.audit.auditor import AuditOptions, run_audit

        audit = run_audit(result.root, AuditOptions(tier="smoke", runs=1, backend="host"))
        click.echo(
            f"verify (smoke audit, 1 run, host): {'PASS' if audit.passed else 'FAIL'} "
            f"— {audit.path}",
            err=as_json,
        )
