"""`rb doctor`: say what this machine can do (nix, flakes, bubblewrap, uv, git, GPUs, disk).

Exit status: 0 whenever the report was made, missing pieces included (the doctor reports,
it does not judge), except with ``--strict``, where a missing required piece (python, nix, git)
exits 11, the :class:`~reprobridge.errors.MachineError` code.
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
    help="Exit 11 when a required piece (python, nix, git) is missing.",
)
@common_options
def doctor_command(strict: bool, as_json: bool) -> None:
    """Say what this machine can do: nix, flakes, bubblewrap, uv, git, GPUs, disk."""
    checks = doctor.run_checks()
    missing = doctor.missing_required(checks)
    if as_json:
        payload = {
            "checks": [c.to_json() for c in checks],
            "missing_required": [c.name for c in missing],
        }
        print_json(payload)
    else:
        click.echo(render_table(checks))
    if strict and missing:
        from reprobridge.errors import MachineError

        names = ", ".join(c.name for c in missing)
        raise MachineError(
            f"required tools missing: {names}",
            hint="run `rb doctor` for the fix of each",
        )
