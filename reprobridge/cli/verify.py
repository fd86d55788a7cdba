"""`rb verify BUNDLE`: re-check hashes and signature, re-derive every verdict."""

from __future__ import annotations

from pathlib import Path

import click

from reprobridge.cli.options import common_options, print_json


@click.command("verify")
@click.argument("bundle", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--key",
    "public_key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The signer's public key (PEM). Without it a signature is checked only against "
    "the key inside the bundle, which proves nothing about who signed.",
)
@common_options
def verify_command(bundle: Path, public_key: Path | None, as_json: bool) -> None:
    """Verify an evidence BUNDLE (repro/evidence/<audit-id>): exit 0 when every hash, the
    signature and every re-derived verdict agree, 1 otherwise."""
    from reprobridge.audit.verify import verify_audit

    out = verify_audit(bundle, public_key)
    if as_json:
        print_json(
            {
                "path": str(out.path),
                "ok": out.ok,
                "problems": out.problems,
                "signature": out.signature,
                "runs": out.runs,
                "passed": out.passed,
                "verdict": out.verdict,
                "incomplete": out.incomplete,
            }
        )
    else:
        for p in out.problems:
            click.echo(f"problem: {p}")
        click.echo(f"signature: {out.signature}")
        click.echo(f"runs: {len(out.runs)} ({', '.join(sorted(set(out.runs.values()))) or 'none'})")
        click.echo(f"re-derived verdict: {out.verdict or 'unknown'}")
        for line in out.incomplete:
            click.echo(f"  not judged: {line}")
        click.echo("bundle: OK" if out.ok else f"bundle: {len(out.problems)} problem(s)")
    if not out.ok:
        raise click.exceptions.Exit(1)
