"""Rendering library events and results for a terminal (human) or for scripts (--json)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # the initializer pulls in every detector and pydantic: not for `--help`
    from reprobridge.initializer import InitResult


def progress_sink(verbosity: int) -> Any:
    """An event sink that prints one short line per phase to stderr: nothing when quiet
    (``verbosity`` < 0), every event with its fields when verbose (> 0)."""

    def _sink(event: str, fields: dict[str, Any]) -> None:
        if verbosity < 0:
            return
        if event == "index":
            click.echo(f"rb: indexed {fields['files']} files in {fields['root']}", err=True)
        elif event == "merge":
            click.echo(f"rb: merging {fields['findings']} findings", err=True)
        elif event == "lock":
            click.echo(f"rb: locking Python packages ({fields['path']})", err=True)
        elif event == "paper":
            click.echo(f"rb: {fields['note']}", err=True)
        elif event == "lock-retry":
            click.echo(f"rb: locking again: {fields['why']}", err=True)
        elif event == "agent":
            click.echo(f"rb: recovery agent ({fields['model']}): asking the Messages API", err=True)
        elif event == "agent-retry":
            click.echo(
                f"rb: Messages API: {fields['reason']}; attempt {fields['attempt']} of "
                f"{fields['attempts']} in {fields['delay']:g}s",
                err=True,
            )
        elif event == "probe-round":
            click.echo(
                f"rb: probe round {fields['round']}: smoke run of {fields['experiments']} "
                f"in the sandbox ({fields['budget_left']}s of the budget left)",
                err=True,
            )
        elif event == "probe-run":
            line = f": {fields['line']}" if fields.get("line") else ""
            click.echo(f"rb: probe: {fields['experiment']}: {fields['kind']}{line}", err=True)
        elif event == "probe-decision":
            click.echo(f"rb: probe repair {fields['repair']}: {fields['why']}", err=True)
        elif verbosity > 0:
            detail = " ".join(f"{k}={v}" for k, v in sorted(fields.items()))
            click.echo(f"rb: {event} {detail}".rstrip(), err=True)

    return _sink


def _src(result: InitResult, path: str) -> str:
    d = result.manifest.derived.get(path)
    return (
        f"  [{', '.join(d.sources[:2])}{', ...' if len(d.sources) > 2 else ''}]"
        if d
        else "  [your edit]"
    )


def print_init_summary(result: InitResult, next_step: str | None = None) -> None:
    """A human summary of what was recovered and written; ``next_step``, when given, is the
    command to suggest (:func:`reprobridge.doctor.next_step_after_init`)."""
    # The manifest's models are loaded already (``result`` holds one); kept out of the
    # module's imports, which every verb pays.
    from reprobridge.manifest.schema import edit_place

    m = result.manifest
    env = m.environment
    echo = click.echo
    style = click.style
    echo(style(f"Recovered for {m.project.name}", bold=True))
    echo(f"  python       {env.python}{_src(result, 'environment.python')}")
    echo(
        f"  cuda         {env.cuda or 'none (CPU only)'}"
        + (_src(result, "environment.cuda") if env.cuda else "")
    )
    if env.compilers:
        echo(f"  compiler     gcc {env.compilers['gcc']}")
    if env.system:
        echo(f"  system libs  {', '.join(env.system)}")
    if env.nixpkgs:
        echo(f"  nixpkgs      {env.nixpkgs.release} {env.nixpkgs.rev[:12]}")
    echo(
        f"  packages     {len(env.python_requirements)} requirement(s)"
        + (
            f", {len(result.merge.notes.flagged_imports)} imported but undeclared"
            if result.merge.notes.flagged_imports
            else ""
        )
    )
    for exp_id, exp in m.experiments.items():
        echo(f"  experiment   {style(exp_id, fg='cyan')}: {exp.command}")
        for name, metric in exp.metrics.items():
            band = ""
            if metric.target is not None:
                tol = (
                    metric.tolerance
                    if metric.tolerance is not None
                    else f"{(metric.relative_tolerance or 0):.0%}"
                )
                band = f" target {metric.target:g} ± {tol}"
            echo(f"               metric {name}{band}")
        smoke = exp.tiers.get("smoke")
        if smoke is not None:
            shown = [f"{k}={v}" for k, v in smoke.params.items()] + list(smoke.args)
            shown += [
                f"{e.file} {edit_place(e.cell, e.line)}: {e.was} -> {e.value}"
                for e in smoke.edits
                if not e.renames
            ]
            unbounded = f"unbounded: the full command, stopped after {smoke.timeout or exp.timeout}"
            echo(f"               smoke tier: {'; '.join(shown) or unbounded}")
        else:
            echo("               smoke tier: none (no parameter bounds the run)")
        renamed = [e for e in exp.tier("full").edits if e.renames]
        if renamed:
            echo(
                f"               renamed in every tier: {len(renamed)} removed name(s) in "
                f"{renamed[0].file} ({renamed[0].was} -> {renamed[0].value}"
                + (", ..." if len(renamed) > 1 else "")
                + ")"
            )
    if not m.experiments:
        echo(style("  experiment   none found", fg="yellow"))
    dropped = result.merge.notes.dropped_experiments
    if dropped:
        echo(f"  other        {len(dropped)} candidate(s) not made experiments (REPRODUCE.md):")
        for d in dropped[:5]:
            echo(f"               {d if len(d) <= 100 else d[:99] + '…'}")
        if len(dropped) > 5:
            echo(f"               ... and {len(dropped) - 5} more")
    for claim in m.claims:
        echo(f"  claim        {claim.expr}")
    unmatched = result.merge.notes.unmatched_targets
    if unmatched:
        # Every one: a paper number left unattached is a target the audit will not judge.
        echo(
            style(
                f"Paper numbers not matched to an experiment metric ({len(unmatched)})", bold=True
            )
        )
        for u in unmatched:
            echo(f"  - {u}")
    notes = [
        *(f"conflict: {c}" for c in result.merge.notes.conflicts),
        *(f"undeclared import: {f}" for f in result.merge.notes.flagged_imports),
        *result.merge.notes.warnings,
        *(f"kept your edit: {k}" for k in (result.refresh.kept_edits if result.refresh else [])),
    ]
    if notes:
        echo(style(f"Notes ({len(notes)})", bold=True))
        for n in notes[:20]:
            echo(f"  - {n}")
        if len(notes) > 20:
            echo(f"  ... and {len(notes) - 20} more in REPRODUCE.md")
    if result.agent_fallback:
        echo(style(f"warning: {result.agent_fallback}", fg="yellow"))
    if result.lock_warning:
        echo(style(f"warning: {result.lock_warning}", fg="yellow"))
        if "repro/python/uv.lock" not in result.files:
            echo("  the flake installs repro/python/requirements.txt unpinned until a lock exists")
    ch = result.changes
    verb = "Would write" if result.dry_run else "Wrote"
    echo(
        style(verb, bold=True) + f": {len(ch.created)} created, {len(ch.changed)} changed, "
        f"{len(ch.unchanged)} unchanged, {len(ch.removed)} removed"
    )
    for rel in ch.created + ch.changed:
        echo(f"  {'+' if rel in ch.created else '~'} {rel}")
    for rel in ch.removed:
        echo(f"  - {rel}")
    if next_step and not result.dry_run:
        echo(style("Next", bold=True) + f": {next_step}")
    sys.stdout.flush()
