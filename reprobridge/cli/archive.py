"""`rb archive [opts]` packs a reproduction package; `rb archive verify FILE` checks one."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import click

from reprobridge.cli.options import (
    common_options,
    finish_verification,
    key_option,
    override_input_option,
    parse_overrides,
    print_json,
    repo_option,
    sign_option,
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
    "--supplement",
    is_flag=True,
    help="A paper supplement that reproduces offline: turns on --with-source, --with-wheels "
    "and repro/DATA.md (turn one off with --no-source / --no-wheels).",
)
@click.option(
    "--with-source/--no-source",
    default=None,
    help="Add the source at the audited commit (git archive). Default: on with --supplement.",
)
@click.option(
    "--with-wheels/--no-wheels",
    default=None,
    help="Add every wheel of repro/python/uv.lock for the target platforms under wheels/ "
    "(sha256-checked; fetched into rb's cache). Default: on with --supplement.",
)
@click.option(
    "--platform",
    "platforms",
    multiple=True,
    metavar="TAG",
    help="Target machine for --with-wheels as a platform tag, e.g. manylinux_2_28_x86_64 "
    "(repeatable; default: this machine).",
)
@click.option(
    "--with-data",
    is_flag=True,
    help="Carry datasets that declare a sha256 and a licence allowing redistribution; "
    "repro/DATA.md says how to get and verify the others.",
)
@click.option(
    "--max-size",
    metavar="SIZE",
    help="Refuse an archive larger than SIZE (e.g. 500M, 2G); nothing is written.",
)
@click.option(
    "--check",
    "check_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Report what the archive FILE lacks for offline reproduction; packs nothing.",
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
@sign_option("MANIFEST.json")
@override_input_option("Override a flake input for --with-closure's nix calls.")
@repo_option(required=False)  # `rb archive verify FILE` needs no repository
@common_options
@click.pass_context
def archive_command(
    ctx: click.Context,
    evidence: tuple[str, ...],
    supplement: bool,
    with_source: bool | None,
    with_wheels: bool | None,
    platforms: tuple[str, ...],
    with_data: bool,
    max_size: str | None,
    check_file: Path | None,
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
    `--supplement` adds what reproducing offline needs (source, wheels, repro/DATA.md).

    `rb archive verify FILE` checks an archive; `rb archive --check FILE` says what it
    lacks for offline reproduction."""
    if ctx.invoked_subcommand is not None:
        return
    if check_file is not None:
        _check(check_file, as_json=as_json)
        return
    from reprobridge.discovery import find_repository

    root = find_repository(root)  # packing does: found upwards, or the one-line error
    from reprobridge.archive.build import ArchiveOptions, build_archive
    from reprobridge.archive.pack import Format
    from reprobridge.archive.supplement import parse_size

    opts = ArchiveOptions(
        evidence=evidence or ("latest",),
        with_source=supplement if with_source is None else with_source,
        with_wheels=supplement if with_wheels is None else with_wheels,
        platforms=platforms,
        with_data=with_data,
        data_md=supplement or with_data,
        max_size=parse_size(max_size) if max_size is not None else None,
        announce=lambda text: click.echo(text, err=True),
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
    for audit_id, why in sorted(res.foreign.items()):
        click.echo(f"foreign audit: {audit_id}: {why}")
    click.echo(f"MANIFEST.json sha256: {res.manifest_sha256}{'  (signed)' if res.signed else ''}")


def _check(file: Path, *, as_json: bool) -> None:
    from reprobridge.archive.check import check_offline

    rep = check_offline(file)
    if as_json:
        print_json(rep.as_json())
    else:
        for item in rep.items:
            click.echo(f"{item.status:8s} {item.what}: {item.detail}")
        lacking = [i.what for i in rep.items if i.status == "lacks"]
        host = [w for w in lacking if w != "closure"]
        click.echo(
            "offline, host backend: "
            + ("complete" if rep.host_complete else f"lacks {', '.join(host)}")
            + "; Nix backend: "
            + ("complete" if rep.nix_complete else f"lacks {', '.join(lacking)}")
        )
    if not rep.complete:
        raise click.exceptions.Exit(1)


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
    facts = [f"format: {rep.format}, {len(rep.files)} files", f"signature: {rep.signature}"]
    finish_verification(rep, as_json, "archive", facts)
