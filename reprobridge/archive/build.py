"""`rb archive`: collect, describe, sign and pack a reproduction package.

Contract of :func:`build_archive`: the archive holds the members of
:mod:`reprobridge.archive.members` (plus ``nix-cache/`` with ``with_closure``), then
``ro-crate-metadata.json``, then ``MANIFEST.json`` (every other file's path, sha256 and
size, and what was packed), then, when signed, ``MANIFEST.dsse.json`` and ``signer.pub``.
The timestamp of every entry is ``SOURCE_DATE_EPOCH`` when set, else the audited commit's
time, so packing the same repository state twice gives byte-identical archives whatever
the file mtimes, umask, TZ, locale or creation order.

Signature: a DSSE envelope (Ed25519, :mod:`reprobridge.evidence.sign`) over an in-toto
statement whose one subject is ``MANIFEST.json`` by sha256; MANIFEST.json pins every other
member, and the verifier refuses members it does not list. It is stored *inside* the
archive (last, outside MANIFEST.json) so a supplement is one file to upload and keep.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobridge import __version__
from reprobridge.archive import members as mem
from reprobridge.archive.pack import (
    DEFAULT_FORMAT,
    Entry,
    FileRecord,
    Format,
    Member,
    PackResult,
    parse_source_date_epoch,
    write_archive,
)
from reprobridge.archive.rocrate import CRATE_FILE, build_crate
from reprobridge.constants import MANIFEST_FILE
from reprobridge.errors import ArchiveError, ManifestError
from reprobridge.evidence.dsse import canonical_json, json_str
from reprobridge.evidence.hashing import sha256_bytes
from reprobridge.evidence.provenance import provenance

MANIFEST_JSON = "MANIFEST.json"
SIGNATURE_FILE = "MANIFEST.dsse.json"
SIGNER_PUB = "signer.pub"
ARCHIVE_FORMAT = "rb-archive/1"
PREDICATE_TYPE = "https://reprobridge.dev/archive/v1"
CACHE_DIR = "nix-cache"
#: Members outside MANIFEST.json: itself and the signature over it.
UNLISTED = frozenset({MANIFEST_JSON, SIGNATURE_FILE, SIGNER_PUB})
#: Top-level names only rb writes.
RESERVED = UNLISTED | {CRATE_FILE}


@dataclass
class ArchiveOptions:
    """What to pack (the CLI's flags)."""

    evidence: Sequence[str] = ("latest",)
    with_source: bool = False
    with_closure: bool = False
    fmt: Format = DEFAULT_FORMAT
    sign_key: Path | None = None
    #: Environment to read SOURCE_DATE_EPOCH from (default: os.environ).
    environ: Mapping[str, str] | None = None
    #: For --with-closure: the nix binary, flake input overrides, and nix's environment.
    nix_binary: str = "nix"
    nix_overrides: dict[str, str] = field(default_factory=dict)
    nix_env: Mapping[str, str] | None = None
    #: Offline reproduction (:mod:`reprobridge.archive.supplement`): the wheels of
    #: uv.lock for ``platforms`` (default: this machine), datasets, repro/DATA.md.
    with_wheels: bool = False
    platforms: tuple[str, ...] = ()
    with_data: bool = False
    data_md: bool = False
    wheel_cache: Path | None = None
    #: Refuse an archive larger than this many bytes (before packing when the wheels and
    #: data alone exceed it, else once compressed).
    max_size: int | None = None
    #: Told the estimated size before packing (the CLI prints it).
    announce: Callable[[str], None] | None = None


@dataclass
class ArchiveResult:
    """The written archive and what is in it."""

    path: Path
    size: int
    files: int
    commit: str
    epoch: int
    audits: list[str]
    manifest_sha256: str
    signed: bool
    #: Audit id -> why it is not the operator's own bundle (packed because it was named;
    #: :mod:`reprobridge.evidence.provenance`).
    foreign: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The `rb archive --json` document (stable keys): the fields, ``path`` as a
        string and ``epoch`` as ``source_date_epoch``."""
        # Imported here: the record module (81 dataclasses, statistics) is ~50 ms of a
        # small archive's start, and only --json needs it.
        from reprobridge.evidence.records import jsonable

        doc: dict[str, Any] = jsonable(self)
        doc["source_date_epoch"] = doc.pop("epoch")
        return doc


def default_name(project: str, commit: str, fmt: Format) -> str:
    """``<project>-<commit12>.tar.gz`` (or ``.tar.zst``)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in project) or "repro"
    return f"{safe}-{commit[:12]}.tar.{fmt}"


def build_archive(root: Path, out: Path | None, opts: ArchiveOptions) -> ArchiveResult:
    """Pack ``root`` into ``out`` (default: :func:`default_name` in the current directory).

    Raises ArchiveError (exit 10) for anything that stops the archive: an unsealed or
    unknown audit, a symlink or special file, a bad SOURCE_DATE_EPOCH, a failed git or nix
    call; the output is then left as it was.
    """
    import tempfile

    from reprobridge.manifest.io import read_manifest

    root = Path(root).resolve()
    epoch_env = parse_source_date_epoch(opts.environ)
    try:
        manifest = read_manifest(root / MANIFEST_FILE)
    except ManifestError as exc:
        raise ArchiveError(f"the manifest does not validate: {exc}", path=MANIFEST_FILE) from exc
    audits = mem.select_audits(root, opts.evidence)
    foreign = {a.audit_id: why for a in audits if (why := provenance(a.path).foreign) is not None}
    commit = mem.audited_commit(root, audits)
    epoch = epoch_env if epoch_env is not None else mem.commit_time(root, commit)
    out = (
        Path(out)
        if out is not None
        else Path.cwd() / default_name(manifest.project.name, commit, opts.fmt)
    )

    groups: list[list[Member]] = []
    with tempfile.TemporaryDirectory(prefix="rb-archive-") as tmp:
        import contextlib

        with contextlib.ExitStack() as stack:
            source: Iterable[Entry] = ()
            if opts.with_source:
                from reprobridge.archive.source import source_stream

                source = _refuse_reserved(stack.enter_context(source_stream(root, commit)))
            from reprobridge.archive.supplement import collect_supplement

            extra = collect_supplement(
                root,
                manifest,
                with_wheels=opts.with_wheels,
                with_data=opts.with_data,
                data_md=opts.data_md,
                platforms=tuple(opts.platforms),
                cache=opts.wheel_cache,
            )
            groups.append(extra.members)
            groups.append(mem.artifact_members(root))
            for a in audits:
                groups.append(
                    mem.tree_members(
                        a.path,
                        f"repro/evidence/{a.audit_id}",
                        skip_top=frozenset({".lock", ".lock.owner"}),
                    )
                )
            if opts.with_closure:
                from reprobridge.archive.closure import export_closure

                cache = Path(tmp) / CACHE_DIR
                export_closure(
                    root,
                    cache,
                    key_name=f"rb-archive-{commit[:12]}",
                    nix=opts.nix_binary,
                    overrides=opts.nix_overrides,
                    env=opts.nix_env,
                )
                groups.append(mem.tree_members(cache, CACHE_DIR))
            members = mem.merge(*groups)
            listed_dirs = {m.path.split("/", 1)[0] for m in members if "/" in m.path}
            state: dict[str, Any] = {}

            def trailer(records: list[FileRecord]) -> list[Member]:
                top_dirs = sorted(
                    listed_dirs | {r.path.split("/", 1)[0] for r in records if "/" in r.path}
                )
                crate = canonical_json(
                    build_crate(
                        manifest,
                        records,
                        audits=audits,
                        commit=commit,
                        epoch=epoch,
                        directories=top_dirs,
                    )
                )
                listed = [*records, FileRecord(CRATE_FILE, sha256_bytes(crate), len(crate))]
                doc = {
                    "format": ARCHIVE_FORMAT,
                    "rb_version": __version__,
                    "project": manifest.project.name,
                    "commit": commit,
                    "source_date_epoch": epoch,
                    "audits": [a.audit_id for a in audits],
                    "with_source": opts.with_source,
                    "with_closure": opts.with_closure,
                    "with_wheels": opts.with_wheels,
                    "with_data": opts.with_data,
                    **({"offline": extra.doc} if extra.doc else {}),
                }
                manifest_bytes = manifest_json(
                    doc,
                    sorted(listed, key=lambda r: r.path.encode("utf-8", "surrogateescape")),
                )
                state["manifest_sha256"] = sha256_bytes(manifest_bytes)
                out_members = [
                    Member(CRATE_FILE, data=crate),
                    Member(MANIFEST_JSON, data=manifest_bytes),
                ]
                if opts.sign_key is not None:
                    envelope, pub = sign_manifest(manifest_bytes, opts.sign_key, doc)
                    out_members += [
                        Member(SIGNATURE_FILE, data=envelope),
                        Member(SIGNER_PUB, data=pub),
                    ]
                return out_members

            _refuse_reserved_list(members)
            _check_size(root, commit, members, extra, opts)
            result: PackResult = write_archive(
                members,
                out,
                mtime=epoch,
                fmt=opts.fmt,
                trailer=trailer,
                ordered=source,
                max_size=opts.max_size,
            )
    return ArchiveResult(
        path=result.path,
        size=result.size,
        files=len(result.files),
        commit=commit,
        epoch=epoch,
        audits=[a.audit_id for a in audits],
        foreign=foreign,
        manifest_sha256=state["manifest_sha256"],
        signed=opts.sign_key is not None,
    )


def manifest_json(doc: Mapping[str, Any], files: Sequence[FileRecord]) -> bytes:
    """``canonical_json`` of ``doc`` plus ``"files"``: one ``{"path", "sha256", "size"}``
     object per record, in the order given. The same bytes (a unit test compares them),
     written without a dict per file and a walk over it: 20k of them for a source tree
    ."""
    text = canonical_json({**doc, "files": []})
    if not files:
        return text
    # The top-level key is the only "files" at an indent of two spaces (strings cannot
    # hold a raw newline); its empty list is replaced by the rendered one.
    marker = b'\n  "files": []'
    enc = json_str
    body = ",".join(
        f'\n    {{\n      "path": {enc(r.path)},\n      "sha256": {enc(r.sha256)},'
        f'\n      "size": {int(r.size)}\n    }}'
        for r in files
    )
    head, found, tail = text.partition(marker)
    if not found:  # canonical_json changed its layout: a bug, never an input's doing
        raise AssertionError("MANIFEST.json: the files list was not where it is written")
    return b"".join((head, b'\n  "files": [', body.encode("utf-8"), b"\n  ]", tail))


def _check_size(
    root: Path, commit: str, members: list[Member], extra: Any, opts: ArchiveOptions
) -> None:
    """Tell ``opts.announce`` what is about to be packed; refuse ``--max-size`` early when
    the wheels and data (already compressed, as a rule) alone exceed it."""
    from reprobridge.archive.supplement import human_size, source_size, tar_size

    src_files, src_bytes = source_size(root, commit) if opts.with_source else (0, 0)
    total = tar_size(members) + src_bytes + 512 * src_files
    if opts.announce is not None:
        parts = [f"wheels {human_size(extra.wheel_bytes)}"] if opts.with_wheels else []
        parts += [f"data {human_size(extra.data_bytes)}"] if opts.with_data else []
        parts += [f"source {human_size(src_bytes)} in {src_files} files"] if src_files else []
        opts.announce(
            f"packing about {len(members) + src_files} entries, {human_size(total)} before "
            f"compression" + (f" ({', '.join(parts)})" if parts else "")
        )
    floor = extra.wheel_bytes + extra.data_bytes
    if opts.max_size is not None and floor > opts.max_size:
        raise ArchiveError(
            f"the wheels and data alone are {floor} bytes, more than --max-size "
            f"({opts.max_size} bytes); nothing was written",
            hint="leave out data (--with-data) or wheels (--no-wheels), or raise --max-size",
        )


def _reserved(path: str) -> ArchiveError:
    return ArchiveError(
        f"the repository has a file named {path}, which the archive reserves", path=path
    )


def _refuse_reserved_list(members: Iterable[Member]) -> None:
    for m in members:
        if m.path in RESERVED:
            raise _reserved(m.path)


def _refuse_reserved(members: Iterable[Entry]) -> Iterator[Entry]:
    """``members``, lazily, stopping with an ArchiveError at a reserved top-level name."""
    for m in members:
        if m.path in RESERVED:
            raise _reserved(m.path)
        yield m


def sign_manifest(
    manifest_bytes: bytes, key_path: Path, doc: Mapping[str, Any]
) -> tuple[bytes, bytes]:
    """``(DSSE envelope, signer public key PEM)`` over MANIFEST.json's sha256.

    Ed25519 signatures are deterministic, so a signed archive is reproducible too (for one
    key). The key must be outside every repository (see ``rb keygen``).
    """
    from reprobridge.evidence import dsse
    from reprobridge.evidence.errors import SignatureError
    from reprobridge.evidence.sign import load_private_key

    try:
        key = load_private_key(key_path)
    except SignatureError as exc:
        raise ArchiveError(f"cannot sign: {exc}") from exc
    envelope = dsse.sign(
        key,
        subject=MANIFEST_JSON,
        digest=sha256_bytes(manifest_bytes),
        predicate_type=PREDICATE_TYPE,
        predicate={
            "rb_version": __version__,
            "project": doc.get("project"),
            "commit": doc.get("commit"),
            "audits": doc.get("audits"),
            "source_date_epoch": doc.get("source_date_epoch"),
        },
    )
    return envelope, dsse.public_pem(key.public_key())
