"""`rb archive [opts]` packs a reproduction package; `rb archive verify FILE` checks one."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import click

from reprobridge.cli.options import (
    common_options,
    key_option,
    parse_overrides,
    print_json,
    repo_option,
    state,
)


@click.group("archive", invoke_without_command=True)
@click.option(
    "--evidence",
    "evidence",
    multiple=True,
    metavar="ID|all|latest|none",
    help="Audits to include (repeatable; default: latest).",
)
@click.option(
    "--with-source", is_flag=True, help="Add the source at the audited commit (git archive)."
)
@click.option(
    "--with-closure",
    is_flag=True,
    help="Add the devShell's Nix closure as a file binary cache under nix-cache/ (offline `nix develop`).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["gz", "zst"]),
    default="gz",
    show_default=True,
    help="Compression: gz (readable everywhere; the default for supplements) or zst (faster; needs zstandard).",
)
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Archive file.",
)
@click.option(
    "--sign",
    "sign_key",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Sign MANIFEST.json with this Ed25519 private key (see `rb keygen`). "
    "Default: RB_SIGN_KEY, else `sign_key` in the user config, else unsigned.",
)
@click.option(
    "--override-input",
    "overrides",
    multiple=True,
    metavar="NAME=URL",
    help="Override a flake input for --with-closure's nix calls.",
)
@repo_option(required=False)  # `rb archive verify FILE` needs no repository
@common_options
@click.pass_context
def archive_command(
    ctx: click.Context,
    evidence: tuple[str, ...],
    with_source: bool,
    with_closure: bool,
    fmt: str,
    output: Path | None,
    sign_key: Path | None,
    overrides: tuple[str, ...],
    root: Path,
    as_json: bool,
) -> None:
    """Pack a deterministic archive of the reproduction package: reprobridge.toml, flake.nix,
    flake.lock, repro/, REPRODUCE.md, selected evidence, MANIFEST.json (sha256 of every
    file) and RO-Crate metadata. Timestamps are SOURCE_DATE_EPOCH, else the commit time.

    `rb archive verify FILE` checks an archive."""
    if ctx.invoked_subcommand is not None:
        return
    from reprobridge.discovery import find_repository

    root = find_repository(root)  # packing does: found upwards, or the one-line error
    from reprobridge.archive.build import ArchiveOptions, build_archive
    from reprobridge.archive.pack import Format

    opts = ArchiveOptions(
        evidence=evidence or ("latest",),
        with_source=with_source,
        with_closure=with_closure,
        fmt=cast(Format, fmt),
        sign_key=state().operator.sign_key(sign_key),
        nix_overrides=parse_overrides(overrides),
    )
    res = build_archive(root, output, opts)
    if as_json:
        print_json(res)
        return
    click.echo(f"archive: {res.path} ({res.size} bytes, {res.files} files)")
    click.echo(f"commit: {res.commit}  mtime: {res.epoch}")
    click.echo(f"audits: {', '.join(res.audits) or 'none'}")
    click.echo(f"MANIFEST.json sha256: {res.manifest_sha256}{'  (signed)' if res.signed else ''}")


@archive_command.command("verify")
@click.argument("file", type=click.Path(exists=True, path_type=Path))
@key_option("The signer's public key (PEM); without it the archive's own signer.pub is used.")
@common_options
def verify_archive_command(file: Path, public_key: Path | None, as_json: bool) -> None:
    """Check FILE: member safety, every hash against MANIFEST.json, the manifest, the
    RO-Crate and the signature. Exit 0 when all hold, 1 otherwise."""
    from reprobridge.archive.verify import verify_archive
    from reprobridge.errors import ArchiveError

    if file.is_dir():
        raise ArchiveError(
            "is a directory, not an archive file",
            path=str(file),
            hint=f"an evidence bundle is checked with `rb verify {file}`",
        )
    rep = verify_archive(file, public_key)
    if as_json:
        print_json(rep)
    else:
        for p in rep.problems:
            click.echo(f"problem: {p}")
        click.echo(f"format: {rep.format}, {len(rep.files)} files")
        click.echo(f"signature: {rep.signature}")
        click.echo("archive: OK" if rep.ok else f"archive: {len(rep.problems)} problem(s)")
    if not rep.ok:
        raise click.exceptions.Exit(1)
