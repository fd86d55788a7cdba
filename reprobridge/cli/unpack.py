"""`rb unpack FILE DIR`: verify an archive, then unpack it safely into a new directory."""

from __future__ import annotations

from pathlib import Path

import click

from reprobridge.cli.options import common_options, key_option, print_json


@click.command("unpack")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("dest", type=click.Path(path_type=Path))
@key_option("Require a signature by this public key (PEM).")
@common_options
def unpack_command(file: Path, dest: Path, public_key: Path | None, as_json: bool) -> None:
    """Unpack FILE into DEST (new or empty) after verifying it completely (an archive with
    the source becomes a git repository with one commit, ready for `rb audit`); a refused archive
    (exit 10, with the reasons) leaves DEST untouched."""
    from reprobridge.archive.closure import cache_public_key
    from reprobridge.archive.restore import make_repository
    from reprobridge.archive.verify import unpack

    heads: list[str | None] = []
    rep = unpack(
        file,
        dest,
        public_key=public_key,
        # In the staging directory: a failure leaves nothing at DEST.
        prepare=lambda staged, report: heads.append(make_repository(staged, report.manifest or {})),
    )
    head = heads[0] if heads else None
    nix_key = cache_public_key(dest / "nix-cache")
    if as_json:
        print_json(
            {
                "path": str(dest),
                "files": len(rep.files),
                "signature": rep.signature,
                "git_commit": head,
                "nix_cache_public_key": nix_key,
            }
        )
        return
    click.echo(f"unpacked {len(rep.files)} files into {dest}")
    click.echo(f"signature: {rep.signature}")
    if head is not None:
        click.echo(f"git repository: {dest} at {head[:12]} (the archived source)")
        if (dest / "wheels").is_dir():
            click.echo(f"reproduce offline: cd {dest} && rb audit --offline")
    if nix_key is not None:
        # The key is covered by MANIFEST.json (and the archive's signature): trusting it
        # means trusting whoever made the archive, which `signature:` above qualifies.
        click.echo(f"nix-cache/ is signed with the Nix key: {nix_key}")
        click.echo(
            # substitute true: without a network interface Nix turns substitution off,
            # file caches included.
            f'nix develop --option substitute true --option substituters "file://'
            f"{dest.absolute()}/nix-cache\" --option trusted-public-keys '{nix_key}'"
        )
