"""`rb keygen`: an Ed25519 key pair for signing evidence bundles."""

from __future__ import annotations

from pathlib import Path

import click

DEFAULT_KEY = Path("~/.config/rb/signing-key.pem")


@click.command("keygen")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path), default=str(DEFAULT_KEY))
def keygen_command(path: Path) -> None:
    """Write a new Ed25519 private key to PATH (mode 0600; default ~/.config/rb/signing-key.pem)
    and its public key to PATH.pub. Refuses to overwrite, and refuses a path inside a git
    repository: the key must never travel with the evidence it signs."""
    from reprobridge.evidence.sign import generate_key

    public, keyid = generate_key(path.expanduser())
    click.echo(f"private key: {path.expanduser()} (keep it outside every repository)")
    click.echo(f"public key:  {public}")
    click.echo(f"keyid:       {keyid}")
