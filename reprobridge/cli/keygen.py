"""`rb keygen`: an Ed25519 key pair for signing evidence bundles."""

from __future__ import annotations

from pathlib import Path

import click

from reprobridge.cli.options import common_options, print_json, state


@click.command("keygen")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path), required=False)
@common_options
def keygen_command(path: Path | None, as_json: bool) -> None:
    """Write a new Ed25519 private key to PATH (mode 0600) and its public key to PATH.pub.
    Default PATH: RB_SIGN_KEY, else `sign_key` in the user config, else
    $XDG_CONFIG_HOME/rb/signing-key.pem (~/.config/rb/signing-key.pem). Refuses to
    overwrite, and refuses a path inside a git repository: the key must never travel with
    the evidence it signs."""
    from reprobridge.evidence.sign import generate_key

    operator = state().operator
    path = operator.sign_key(path) or operator.sign_key_default
    public, keyid = generate_key(path.expanduser())
    if as_json:
        print_json(
            {"private_key": str(path.expanduser()), "public_key": str(public), "keyid": keyid}
        )
        return
    click.echo(f"private key: {path.expanduser()} (keep it outside every repository)")
    click.echo(f"public key:  {public}")
    click.echo(f"keyid:       {keyid}")
