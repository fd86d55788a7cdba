"""`rb doctor`: say what this machine can do (nix, flakes, bubblewrap, uv, git, GPUs, disk).

Exit status: 0 whenever the report was made, missing pieces included (the doctor reports,
it does not judge), except with ``--strict``, where any row that would stop an audit
(:data:`reprobridge.doctor.BLOCKS_AUDIT`: python, nix, git or uv missing, a Nix too old for
current pins or that cannot evaluate flakes, reach its store or build in its sandbox, no
working bubblewrap) exits 11, the :class:`~reprobridge.errors.MachineError` code.
"""

from __future__ import annotations

import click

from reprobridge import doctor
from reprobridge.cli.options import common_options, print_json

_SYMBOL = {"ok": "ok", "warn": "!!", "missing": "--"}


def render_table(checks: list[doctor.Check]) -> str:
    """The report as an aligned table (status, name, detail) followed by the fixes."""
    width = max(len(c.name) for c in checks)
    lines = [f"{_SYMBOL[c.status]}  {c.name:<{width}}  {c.detail}" for c in checks]
    fixes = [c for c in checks if c.fix and c.status != "ok"]
    if fixes:
        lines += ["", "To fix:"]
        lines += [f"  {c.name:<{width}}  {c.fix}" for c in fixes]
    return "\n".join(lines)


@click.command("doctor")
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 11 when anything here would stop an audit (a missing tool, a Nix too old "
    "for current pins or without its sandbox, no working bubblewrap).",
)
@common_options
def doctor_command(strict: bool, as_json: bool) -> None:
    """Say what this machine can do: nix, flakes, bubblewrap, uv, git, GPUs, disk."""
    checks = doctor.run_checks()
    missing = doctor.missing_required(checks)
    blockers = doctor.audit_blockers(checks)
    if as_json:
        payload = {
            "checks": [c.to_json() for c in checks],
            "missing_required": [c.name for c in missing],
            "blocks_audit": [c.name for c in blockers],
        }
        print_json(payload)
    else:
        click.echo(render_table(checks))
    if strict and blockers:
        from reprobridge.errors import MachineError

        names = ", ".join(c.name for c in blockers)
        raise MachineError(
            f"this machine cannot audit as it is: {names} (see the table's fixes)",
            hint="run `rb doctor` for the fix of each",
        )
