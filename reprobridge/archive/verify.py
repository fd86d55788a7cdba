"""`rb archive verify` and `rb unpack`: check an archive, and unpack only what checks out.

Contract of :func:`verify_archive`: one streaming pass over the archive (gzip or zstd,
recognised by magic bytes, never by name) that never writes anything and reports every
problem, each naming the member and the reason:

* member safety: only regular files and directories (no symlinks, hard links, devices,
  FIFOs, sparse or other types); no absolute name, no ``..``, no empty, ``.`` or NUL
  component, no backslash; no ``.git`` component in any case (git metadata: its config
  and hooks name programs); no duplicate name; no file that is also a parent directory;
  no setuid/setgid/sticky bits;
* integrity: a truncated or corrupt stream is reported as such; ``MANIFEST.json`` exists,
  lists every other file (except the signature files) with the sha256 and size actually
  read, and nothing more;
* meaning: ``reprobridge.toml`` validates against the schema; ``ro-crate-metadata.json``
  is JSON-LD with a root dataset;
* signature (when present, or required by a key): the DSSE envelope verifies with the
  given public key (else with the archive's own ``signer.pub``, which proves integrity
  but not origin, and says so), and its subject is MANIFEST.json's actual sha256.

:func:`unpack` first compares the sizes the members declare with the space free where
``dest`` would be (and stops the verification as soon as they exceed it), verifies, then
extracts in a second pass, with the same member checks and rb's own writer
(:func:`reprobridge._tarsafe.write_plain`: new files only, never through a link, no
reliance on tarfile's extraction filters, which Python 3.11.2 lacks), into a fresh
directory beside ``dest``. No member is written past the size the first pass verified for
it; a full disk is a one-line ArchiveError. It re-hashes what it wrote against
MANIFEST.json, and only then renames it to ``dest``: a bad archive leaves nothing behind,
and nothing is ever written outside ``dest``.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from reprobridge._tarsafe import MemberTooLarge, UnsafeMember, member_problem, write_plain
from reprobridge.archive.build import (
    ARCHIVE_FORMAT,
    MANIFEST_JSON,
    PREDICATE_TYPE,
    SIGNATURE_FILE,
    SIGNER_PUB,
    UNLISTED,
)
from reprobridge.archive.rocrate import CRATE_FILE
from reprobridge.constants import MANIFEST_FILE
from reprobridge.errors import ArchiveError, ManifestError
from reprobridge.evidence.hashing import sha256_file
from reprobridge.evidence.verify import VerifyResult
from reprobridge.manifest.io import parse_document, validate_document

#: Members whose bytes are kept in memory during the scan (all small).
_KEEP = frozenset(
    {
        MANIFEST_JSON,
        SIGNATURE_FILE,
        SIGNER_PUB,
        CRATE_FILE,
        MANIFEST_FILE,
        "flake.lock",
        "repro/python/uv.lock",  # `rb archive --check` plans the wheels from it
    }
)
_KEEP_LIMIT = 32 << 20
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@dataclass
class ArchiveReport(VerifyResult):
    """What :func:`verify_archive` found. ``ok`` means no problem at all."""

    format: str = "unknown"
    files: dict[str, tuple[str, int]] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    manifest: dict[str, Any] | None = None
    kept: dict[str, bytes] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The `rb archive verify --json` document (stable keys)."""
        return {**super().to_json(), "format": self.format, "files": len(self.files)}


@contextlib.contextmanager
def open_tar(path: Path) -> Iterator[tuple[tarfile.TarFile, str]]:
    """A streaming tar reader over ``path`` (gzip or zstd by magic): ``(tar, format)``."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 -- closed below
    except OSError as exc:
        raise ArchiveError(f"cannot be read ({exc.strerror})", path=str(path)) from exc
    with fh:
        magic = fh.read(4)
        fh.seek(0)
        if magic.startswith(GZIP_MAGIC):
            with tarfile.open(fileobj=fh, mode="r|gz") as tar:
                yield tar, "gz"
        elif magic == ZSTD_MAGIC:
            try:
                import zstandard
            except ImportError as exc:
                raise ArchiveError(
                    "is a zstd archive; reading it needs the `zstandard` package", path=str(path)
                ) from exc
            reader: IO[bytes] = zstandard.ZstdDecompressor().stream_reader(fh)
            with reader, tarfile.open(fileobj=reader, mode="r|") as tar:
                yield tar, "zst"
        else:
            raise ArchiveError(
                "is not a gzip or zstd compressed tar archive (unknown magic bytes)", path=str(path)
            )


def _corrupt_errors() -> tuple[type[BaseException], ...]:
    import zlib

    errors: list[type[BaseException]] = [tarfile.TarError, EOFError, zlib.error, OSError]
    with contextlib.suppress(ImportError):
        import zstandard

        errors.append(zstandard.ZstdError)
    return tuple(errors)


class _Gate:
    """The member checks both passes apply, in order: :func:`member_problem`, a name seen
    before (a duplicate, or a file and a directory of one name), a file used as a parent
    directory. ``admit`` records an accepted member."""

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.seen: set[str] = set()

    def problem(self, info: tarfile.TarInfo) -> str | None:
        problem = member_problem(info)
        if problem is not None:
            return problem
        name = info.name.rstrip("/")
        if name in self.seen:
            return f"member {name!r}: appears twice"
        for parent in PurePosixPath(name).parents:
            if str(parent) in self.files:
                return f"member {name!r}: its parent {str(parent)!r} is a file"
        self.seen.add(name)
        if not info.isdir():
            self.files.add(name)
        return None


def _scan(path: Path, report: ArchiveReport, *, space: int | None = None) -> None:
    """Walk the archive once, filling ``report`` (files, dirs, kept bytes, problems).

    With ``space`` (bytes free where it would be unpacked), the walk stops with a problem
    as soon as the sizes the members' headers declare add up to more, before reading
    the member that would not fit.
    """
    gate = _Gate()
    errors = _corrupt_errors()
    declared = 0
    try:
        with open_tar(path) as (tar, fmt):
            report.format = fmt
            for info in tar:
                declared += info.size if info.isreg() else 0
                if space is not None and declared > space:
                    report.problems.append(
                        f"member {info.name!r}: the members up to it declare {declared} bytes, "
                        f"more than the {space} bytes free where they would be unpacked"
                    )
                    return
                problem = gate.problem(info)
                if problem is not None:
                    report.problems.append(problem)
                    continue
                name = info.name.rstrip("/")
                if info.isdir():
                    report.dirs.add(name)
                    continue
                src = tar.extractfile(info)
                assert src is not None
                h = hashlib.sha256()
                size = 0
                keep = name in _KEEP and info.size <= _KEEP_LIMIT
                buf = bytearray()
                while chunk := src.read(1 << 20):
                    h.update(chunk)
                    size += len(chunk)
                    if keep:
                        buf += chunk
                report.files[name] = (h.hexdigest(), size)
                if keep:
                    report.kept[name] = bytes(buf)
    except ArchiveError:
        raise
    except errors as exc:
        report.problems.append(f"truncated or corrupt archive ({type(exc).__name__}: {exc})")


def _kept_json(report: ArchiveReport, name: str, missing: str) -> tuple[bool, Any]:
    """(True, parsed JSON) of a member kept while streaming, or (False, None) after
    recording why it is missing or unreadable."""
    raw = report.kept.get(name)
    if raw is None:
        report.problems.append(f"{name}: {missing}")
        return False, None
    try:
        return True, json.loads(raw)
    except ValueError as exc:
        report.problems.append(f"{name}: not valid JSON ({exc})")
        return False, None


def _check_manifest(report: ArchiveReport) -> None:
    ok, doc = _kept_json(report, MANIFEST_JSON, "missing (not an rb archive, or truncated)")
    if not ok:
        return
    if (
        not isinstance(doc, dict)
        or doc.get("format") != ARCHIVE_FORMAT
        or not isinstance(doc.get("files"), list)
    ):
        report.problems.append(f"{MANIFEST_JSON}: not an {ARCHIVE_FORMAT} manifest")
        return
    report.manifest = doc
    listed: dict[str, tuple[str, int]] = {}
    for entry in doc["files"]:
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("path"), str)
            and isinstance(entry.get("sha256"), str)
            and isinstance(entry.get("size"), int)
        ):
            report.problems.append(f"{MANIFEST_JSON}: malformed entry {entry!r:.80}")
            continue
        listed[entry["path"]] = (entry["sha256"], entry["size"])
    for name, (digest, size) in sorted(report.files.items()):
        if name in UNLISTED:
            continue
        want = listed.get(name)
        if want is None:
            report.problems.append(f"{name}: in the archive but not in {MANIFEST_JSON}")
        elif want[1] != size:
            report.problems.append(f"{name}: size {size} differs from {MANIFEST_JSON} ({want[1]})")
        elif want[0] != digest:
            report.problems.append(
                f"{name}: sha256 {digest[:12]}… differs from {MANIFEST_JSON} ({want[0][:12]}…): modified"
            )
    for name in sorted(set(listed) - set(report.files)):
        report.problems.append(f"{name}: listed in {MANIFEST_JSON} but missing from the archive")


def _check_rb_manifest(report: ArchiveReport) -> None:
    raw = report.kept.get(MANIFEST_FILE)
    if raw is None:
        report.problems.append(f"{MANIFEST_FILE}: missing from the archive")
        return
    try:
        validate_document(
            parse_document(raw.decode("utf-8"), path=MANIFEST_FILE), path=MANIFEST_FILE
        )
    except UnicodeDecodeError:
        report.problems.append(f"{MANIFEST_FILE}: not UTF-8")
    except ManifestError as exc:
        report.problems.append(f"{MANIFEST_FILE}: does not validate: {exc}")


def _check_crate(report: ArchiveReport) -> None:
    ok, crate = _kept_json(report, CRATE_FILE, "missing")
    if not ok:
        return
    graph = crate.get("@graph") if isinstance(crate, dict) else None
    ids = {e.get("@id") for e in graph if isinstance(e, dict)} if isinstance(graph, list) else set()
    if not (isinstance(crate, dict) and "@context" in crate and CRATE_FILE in ids and "./" in ids):
        report.problems.append(
            f"{CRATE_FILE}: no RO-Crate @context, metadata descriptor and root dataset"
        )


def _check_signature(report: ArchiveReport, public_key: Path | None) -> None:
    """:func:`reprobridge.evidence.dsse.verify` of ``MANIFEST.dsse.json`` over the
    archive's ``MANIFEST.json``, with the given key, else the archive's own signer.pub."""
    from reprobridge.evidence import dsse
    from reprobridge.evidence.errors import SignatureError
    from reprobridge.evidence.sign import load_public_key

    raw = report.kept.get(SIGNATURE_FILE)
    if raw is None:
        report.signature = "absent"
        if public_key is not None:
            report.problems.append(
                f"{SIGNATURE_FILE}: absent, but a key was given (unsigned archive)"
            )
        return
    try:
        if public_key is not None:
            key = load_public_key(public_key)
        else:
            pem = report.kept.get(SIGNER_PUB)
            if pem is None:
                raise ValueError(f"{SIGNER_PUB} missing")
            key = dsse.public_key_from_pem(pem)
    except (SignatureError, ValueError) as exc:
        report.signature = "invalid"
        report.problems.append(f"{SIGNATURE_FILE}: no usable key ({exc})")
        return
    actual = report.files.get(MANIFEST_JSON)
    checked = dsse.verify(
        raw,
        key,
        key_name="the given key" if public_key is not None else SIGNER_PUB,
        subject=MANIFEST_JSON,
        actual_digest=actual[0] if actual else None,
        predicate_type=PREDICATE_TYPE,
    )
    bad = [*checked.problems]
    if checked.subject_problem is not None:
        bad.append(f"{MANIFEST_JSON} {checked.subject_problem}")
    if bad:
        report.signature = "invalid"
        report.problems += [f"{SIGNATURE_FILE}: {b}" for b in bad]
    else:
        report.signature = (
            "valid (given key)"
            if public_key is not None
            else f"valid against the archive's own {SIGNER_PUB} only (proves integrity, not origin)"
        )


def verify_archive(
    path: Path, public_key: Path | None = None, *, space: int | None = None
) -> ArchiveReport:
    """Check the archive at ``path`` (see the module doc); never raises for a bad archive
    (every finding is in ``report.problems``), only ArchiveError for an unreadable file.

    ``space``: the bytes free where it would be unpacked; members declaring more in all
    are a problem, found before their bytes are read.
    """
    report = ArchiveReport(Path(path))
    _scan(Path(path), report, space=space)
    if any(p.startswith("truncated or corrupt") or "bytes free" in p for p in report.problems):
        return report
    _check_manifest(report)
    _check_rb_manifest(report)
    _check_crate(report)
    _check_signature(report, public_key)
    return report


def _refusal(report: ArchiveReport) -> ArchiveError:
    shown = "; ".join(report.problems[:3])
    more = f" (and {len(report.problems) - 3} more)" if len(report.problems) > 3 else ""
    return ArchiveError(
        f"refused: {shown}{more}",
        path=str(report.path),
        hint="`rb archive verify FILE` lists every problem",
    )


def unpack(
    path: Path,
    dest: Path,
    *,
    public_key: Path | None = None,
    prepare: Callable[[Path, ArchiveReport], None] | None = None,
) -> ArchiveReport:
    """Verify ``path`` and unpack it into ``dest`` (new, or an empty directory).

    ``prepare(staged, report)`` runs on the verified, extracted tree before it becomes
    ``dest`` (``rb unpack`` makes it a git repository there), so what it raises also
    leaves nothing behind. Raises ArchiveError with the reasons when the archive is
    refused; ``dest`` is then untouched. See the module doc for the order of operations.
    """
    path = Path(path)
    dest = Path(dest).absolute()
    if dest.is_symlink() or (dest.exists() and (not dest.is_dir() or any(dest.iterdir()))):
        raise ArchiveError("exists and is not an empty directory", path=str(dest))
    report = verify_archive(path, public_key, space=free_space(dest))
    if not report.ok:
        raise _refusal(report)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.rb-unpack-", dir=dest.parent))
    try:
        second = ArchiveReport(path)
        # A second pass over the stream (a streaming reader cannot rewind): it re-checks
        # every member before extracting it, writes no member past the size verified in
        # the first pass, and hashes what it wrote.
        _scan_extract(path, report, second, staging)
        if second.problems or second.files != report.files:
            raise _refusal(second if second.problems else _changed(report))
        for name, (digest, _size) in report.files.items():
            got = _hash_file(staging / name)
            if got != digest:
                raise ArchiveError(
                    f"{name}: differs after extraction (the file changed?)", path=str(path)
                )
        if prepare is not None:
            prepare(staging, report)
        if dest.exists():
            dest.rmdir()
        os.replace(staging, dest)
        os.chmod(dest, 0o755)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return report


def _changed(report: ArchiveReport) -> ArchiveReport:
    report.problems.append("the archive changed between verification and extraction")
    return report


def free_space(dest: Path) -> int:
    """Bytes free to an unprivileged writer on the file system that would hold ``dest``
    (its nearest existing ancestor's)."""
    probe = Path(dest).absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def _scan_extract(
    path: Path, verified: ArchiveReport, report: ArchiveReport, staging: Path
) -> None:
    """The extraction pass: the same member checks as :func:`_scan`, then rb's own writer
    (no reliance on tarfile's filters, absent before Python 3.11.4), each file stopped at
    the size ``verified`` (the first pass) found for it."""
    gate = _Gate()
    errors = _corrupt_errors()
    try:
        with open_tar(path) as (tar, _fmt):
            for info in tar:
                problem = gate.problem(info)
                name = info.name.rstrip("/")
                expected = verified.files.get(name)
                if (
                    problem is None
                    and info.isreg()
                    and (expected is None or expected[1] != info.size)
                ):
                    problem = (
                        f"member {name!r}: declares {info.size} bytes, "
                        f"{expected[1] if expected else 'none'} were verified"
                    )
                if problem is not None:
                    report.problems.append(problem)
                    return
                try:
                    target = write_plain(
                        tar, info, staging, limit=expected[1] if expected else None
                    )
                except (UnsafeMember, MemberTooLarge) as exc:
                    report.problems.append(f"member {name!r}: {exc}")
                    return
                except OSError as exc:
                    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                        raise ArchiveError(
                            f"no space left while unpacking {name!r}; nothing was kept",
                            path=str(staging.parent),
                            hint="free some space, or unpack elsewhere",
                        ) from exc
                    raise
                if info.isdir():
                    report.dirs.add(name)
                else:
                    report.files[name] = (_hash_file(target), target.stat().st_size)
    except errors as exc:
        report.problems.append(f"truncated or corrupt archive ({type(exc).__name__}: {exc})")


def _hash_file(path: Path) -> str:
    return sha256_file(path)[0]
