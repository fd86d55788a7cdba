"""`rb verify BUNDLE`: re-check hashes and signature, re-derive every verdict.

Two verbs verify, one per kind of evidence: `rb verify` takes one audit's bundle (a
directory, ``repro/evidence/<audit-id>``); `rb archive verify` takes an archive file
(``rb archive``'s tarball). Each names the other when handed the wrong kind.
"""

from __future__ import annotations

from pathlib import Path

import click

from reprobridge.cli.options import common_options, finish_verification, key_option


@click.command("verify")
@click.argument("bundle", type=click.Path(exists=True, path_type=Path))
@key_option(
    "The signer's public key (PEM). Without it a signature is checked only against "
    "the key inside the bundle, which proves nothing about who signed."
)
@common_options
def verify_command(bundle: Path, public_key: Path | None, as_json: bool) -> None:
    """Verify an evidence BUNDLE (repro/evidence/<audit-id>): exit 0 when every hash, the
    signature and every re-derived verdict agree, 1 otherwise."""
    from reprobridge.audit.verify import verify_audit
    from reprobridge.errors import AuditError

    if not bundle.is_dir():
        raise AuditError(
            "is a file, not an evidence bundle (a directory)",
            path=str(bundle),
            hint=f"an archive is checked with `rb archive verify {bundle}`",
        )
    out = verify_audit(bundle, public_key)
    states = ", ".join(sorted(set(out.runs.values()))) or "none"
    facts = [
        f"provenance: {out.provenance}",
        f"signature: {out.signature}",
        f"runs: {len(out.runs)} ({states})",
        f"re-derived verdict: {out.verdict or 'unknown'}",
        *(f"  not judged: {line}" for line in out.incomplete),
    ]
    finish_verification(out, as_json, "bundle", facts)
