"""Helpers for the archive tests: build trees in varied ways, craft hostile tars."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

from reprobridge.archive.pack import Member

TREE = {
    "b/z.txt": b"zzz\n",
    "a.txt": b"alpha\n",
    "b/c/d.bin": bytes(range(256)) * 40,
    "run.sh": b"#!/bin/sh\necho hi\n",
    "b/\u00e9t\u00e9.txt": b"non-ascii name\n",
    "long/" + "x" * 120 + ".txt": b"long name\n",
}


def make_tree(root: Path, *, reverse: bool, mtime: int, umask: int) -> None:
    """Write TREE under ``root`` in the given order, umask and mtimes."""
    old = os.umask(umask)
    try:
        for rel in sorted(TREE, reverse=reverse):
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(TREE[rel])
            if rel.endswith(".sh"):
                p.chmod(0o777 & ~umask | 0o100)
            os.utime(p, (mtime, mtime))
    finally:
        os.umask(old)


def walk_members(root: Path, *, reverse: bool = False) -> list[Member]:
    out = []
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in sorted(filenames, reverse=reverse):
            p = Path(dirpath) / name
            out.append(
                Member(
                    p.relative_to(root).as_posix(),
                    source=p,
                    executable=bool(p.stat().st_mode & 0o100),
                )
            )
    return out[::-1] if reverse else out


def craft_tar(path: Path, entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    """A .tar.gz with exactly these members (hostile ones included)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            if data is not None:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    path.write_bytes(gzip.compress(buf.getvalue(), mtime=0))
    return path


def read_members(path: Path) -> dict[str, bytes | None]:
    """name -> bytes (None for directories) of a .tar.gz."""
    out: dict[str, bytes | None] = {}
    with tarfile.open(path, "r:gz") as tar:
        for info in tar:
            f = tar.extractfile(info) if info.isreg() else None
            out[info.name] = f.read() if f else None
    return out


def rewrite(src: Path, dst: Path, change: dict[str, bytes]) -> Path:
    """Copy the .tar.gz ``src`` to ``dst`` with some members' bytes replaced."""
    entries: list[tuple[tarfile.TarInfo, bytes | None]] = []
    with tarfile.open(src, "r:gz") as tar:
        for info in tar:
            data = None
            if info.isreg():
                f = tar.extractfile(info)
                assert f is not None
                data = change.get(info.name, f.read())
            entries.append((info, data))
    return craft_tar(dst, entries)


MINIMAL_MANIFEST = b'schema = 1\n[project]\nname = "hostile"\n'
MINIMAL_CRATE = (
    b'{"@context": "https://w3id.org/ro/crate/1.1/context", "@graph": '
    b'[{"@id": "ro-crate-metadata.json"}, {"@id": "./"}]}'
)


def valid_archive(
    path: Path, entries: list[tuple[tarfile.TarInfo, bytes | None]], **fields: object
) -> Path:
    """A .tar.gz that passes every archive-level check (a valid ``reprobridge.toml`` and
    RO-Crate, a ``MANIFEST.json`` listing every file member with its real sha256 and
    size, the first of a duplicated name) around ``entries``: a refusal can only come from
    a member guard. ``fields`` go into MANIFEST.json too (``with_source=True``)."""
    import hashlib
    import json

    base: list[tuple[tarfile.TarInfo, bytes | None]] = []
    for name, data in (
        ("reprobridge.toml", MINIMAL_MANIFEST),
        ("ro-crate-metadata.json", MINIMAL_CRATE),
    ):
        base.append((tarfile.TarInfo(name), data))
    listed: dict[str, dict[str, object]] = {}
    for info, data in [*base, *entries]:
        if data is not None and info.isreg() and info.name not in listed:
            listed[info.name] = {
                "path": info.name,
                "sha256": hashlib.sha256(data).hexdigest(),
                "size": len(data),
            }
    doc = {
        **fields,
        "format": "rb-archive/1",
        "files": sorted(listed.values(), key=lambda e: str(e["path"])),
    }
    manifest = (tarfile.TarInfo("MANIFEST.json"), json.dumps(doc).encode())
    return craft_tar(path, [*base, *entries, manifest])
