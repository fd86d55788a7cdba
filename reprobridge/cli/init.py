"""`rb init`: recover a repository's reproduction knowledge and write the artifacts."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from reprobridge._log import sink
from reprobridge.cli._render import print_init_summary, progress_sink
from reprobridge.cli.options import agent_option, common_options, print_json, state

if TYPE_CHECKING:  # imported when the command runs, so `rb init --help` stays fast
    from reprobridge.initializer import InitResult
    from reprobridge.manifest.schema import Manifest


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
@agent_option(
    "auto", "Recovery: static only, a Claude agent, or auto (Claude when ANTHROPIC_API_KEY is set)."
)
@click.option("--model", default=None, help="Claude model id (default claude-sonnet-4-5).")
@click.option(
    "--max-tokens", type=click.IntRange(1), default=None, help="Max output tokens per response."
)
@click.option(
    "--budget-usd", type=click.FloatRange(0, min_open=True), help="Stop the agent at this cost."
)
@click.option(
    "--budget-tokens", type=click.IntRange(1), help="Stop the agent after this many tokens."
)
@click.option("--max-tool-calls", type=click.IntRange(1), help="Stop after this many tool calls.")
@click.option(
    "--max-wall", type=click.FloatRange(0, min_open=True), help="Stop the agent after SECONDS."
)
@click.option(
    "--allow-network/--no-allow-network",
    default=None,
    help="Let the agent's sandboxed commands use the network (default: off).",
)
@click.option(
    "--probe/--no-probe",
    "probe",
    default=None,
    help="After static recovery, run the chosen experiments' smoke tier in the sandbox, "
    "classify what failed and repair it, then run again (default: on where bubblewrap works; "
    "RB_PROBE, config `probe`).",
)
@click.option(
    "--probe-budget",
    type=click.FloatRange(1),
    default=None,
    metavar="SECONDS",
    help="Time for every probe round together (default 600; RB_PROBE_BUDGET, config "
    "`probe_budget`).",
)
@click.option("--verify", is_flag=True, help="Run a smoke audit (1 run, host) of the result.")
@common_options
def init_command(
    path: Path,
    paper: Path | None,
    lock: bool | None,
    dry_run: bool,
    no_git_add: bool,
    agent_mode: str,
    model: str | None,
    max_tokens: int | None,
    budget_usd: float | None,
    budget_tokens: int | None,
    max_tool_calls: int | None,
    max_wall: float | None,
    allow_network: bool | None,
    probe: bool | None,
    probe_budget: float | None,
    verify: bool,
    as_json: bool,
) -> None:
    """Recover what reproducing PATH (default: .) needs and write reprobridge.toml, flake.nix,
    flake.lock, repro/ and REPRODUCE.md.

    Static recovery first: rb reads the repository and runs git and, unless --no-lock, uv's
    resolver (`uv lock --no-build`, in a bubblewrap sandbox where available) against the
    package index; no repository code and no package's build code runs there (a package
    that only an sdist provides is left unlocked and named in REPRODUCE.md). Then, unless
    --no-probe, the probe runs the chosen experiments' smoke tier in the audit's sandbox
    (bubblewrap, cleared environment, no network, wheels only: no package builds), reads
    what failed, repairs it
    (repro/probe.toml records each decision with the log line behind it) and runs again,
    within --probe-budget. Re-running refreshes what rb derived and keeps every value you
    edited in reprobridge.toml.

    The agent's model, budgets and --allow-network come from the flags, else RB_AGENT_*,
    else [agent] in $XDG_CONFIG_HOME/rb/config.toml; never from the repository.
    """
    import os

    from reprobridge.initializer import LockMode, init_repository
    from reprobridge.settings import repository_suggestions

    mode: LockMode = "auto" if lock is None else ("always" if lock else "never")
    st = state()
    quiet = st.quiet or as_json
    has_key = bool(os.environ.get("ANTHROPIC_API_KEY"))
    use_claude = agent_mode == "claude" or (agent_mode == "auto" and has_key)
    agent = None
    if use_claude:
        from reprobridge.agent.session import AgentOptions  # the agent loads only when used

        config = st.operator.agent_config(
            {
                "model": model,
                "max_tokens": max_tokens,
                "budget_usd": budget_usd,
                "budget_tokens": budget_tokens,
                "max_tool_calls": max_tool_calls,
                "max_wall_s": max_wall,
                "allow_network": allow_network,
            }
        )
        agent = AgentOptions(config=config, fallback_static=agent_mode == "auto")
    probed = None
    with sink(progress_sink(-1 if quiet else st.verbosity)):
        result = init_repository(
            path, paper=paper, lock=mode, dry_run=dry_run, git_add=not no_git_add, agent=agent
        )
        if st.operator.probe(probe) and not dry_run:
            from reprobridge.probe.loop import ProbeOptions, probe_repository

            def reinit() -> tuple[Manifest, str | None]:
                nonlocal result
                # The agent is not asked again (its proposals are kept in the manifest).
                result = init_repository(
                    path, paper=paper, lock=mode, git_add=not no_git_add, agent=None
                )
                return result.manifest, result.lock_warning

            probed = probe_repository(
                result.root,
                ProbeOptions(
                    budget_s=st.operator.probe_budget(probe_budget),
                    threads=st.operator.threads(None),
                ),
                reinit,
                result.lock_warning,
            )
            result.probe = probed
    # Said after the work: an error must stay the one `error:` line of the CLI contract.
    if not quiet:
        why = (
            "--agent claude"
            if agent_mode == "claude"
            else ("ANTHROPIC_API_KEY is set" if has_key else "no ANTHROPIC_API_KEY")
            if agent_mode == "auto"
            else "--agent static"
        )
        ran = (
            "static (the agent could not start)"
            if result.agent_fallback
            else ("claude agent" if use_claude else "static")
        )
        click.echo(f"recovery: {ran} ({why})", err=True)
        if use_claude:
            suggested = repository_suggestions(result.root)
            if suggested:
                click.echo(
                    f"note: the repository suggests {', '.join(suggested)} "
                    "(pyproject.toml [tool.reprobridge]); not applied: agent limits come from "
                    "your flags, RB_AGENT_* or $XDG_CONFIG_HOME/rb/config.toml",
                    err=True,
                )
    if as_json:
        print_json(result)
    else:
        print_init_summary(result, _next_step(result))
        if probed is not None:
            click.echo(
                f"probe: {probed.stopped} ({len(probed.rounds)} round(s), {probed.wall_s:.0f}s, "
                f"of which runs {probed.run_wall_s:.0f}s)"
            )
            for d in probed.decisions:
                click.echo(f"  {d.repair}: {d.target}: {d.why}")
        if result.agent is not None:
            click.echo(f"agent: {result.agent.ledger.summary()}")
            if result.agent.stopped_by:
                click.echo(f"agent stopped early: {result.agent.stopped_by}")
    if verify and not dry_run:
        from reprobridge.audit.auditor import AuditOptions, run_audit

        opts = AuditOptions(
            tier="smoke",
            runs=1,
            backend="host",
            max_output_mb=st.operator.max_output_mb(None),
        )
        audit = run_audit(result.root, opts)
        click.echo(
            f"verify (smoke audit, 1 run, host): {audit.verdict} — {audit.path}",
            err=as_json,
        )


def _next_step(result: InitResult) -> str | None:
    """What to run next, checked against this machine's Nix (never a command that fails)."""
    if not result.manifest.experiments or result.dry_run:
        return None
    from reprobridge.doctor import Probes, next_step_after_init, nix_for_next_step

    return next_step_after_init(
        next(iter(result.manifest.experiments)), nix_for_next_step(Probes())
    )
