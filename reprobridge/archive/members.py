"""What goes into an archive: rb's artifacts, selected evidence, the source, the closure.

Contract of :func:`collect`:

* artifacts come from the working tree, as the auditor used them: ``reprobridge.toml``
  (required), ``flake.nix``, ``flake.lock``, ``REPRODUCE.md`` and the files under
  ``repro/`` that git tracks or would track (``git ls-files -co --exclude-standard``, so
  ignored caches stay out), except ``repro/evidence/`` and ``repro/logs/``;
* evidence: whole finished bundles (sealed: :class:`~reprobridge.evidence.store.EvidenceStore`)
  from ``repro/evidence/<id>/``, kept at that path, without the lock files; an unfinished
  bundle is refused;
* the source (``with_source``): :mod:`reprobridge.archive.source` streams ``git
  archive`` of the audited commit (the ``commit`` of the selected audits' ``plan.json``,
  which must agree; HEAD when no audit is selected) into the writer; the artifacts above
  win where both have a path;
* anything that is not a regular file or a directory (a symlink, a FIFO, a device, a
  socket) is an :class:`~reprobridge.errors.ArchiveError` naming it: an archive that
  silently drops or follows links would not be the tree that was audited.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from reprobridge import _proc
from reprobridge.archive.pack import Member
from reprobridge.constants import (
    EVIDENCE_DIR,
    FLAKE_FILE,
    FLAKE_LOCK_FILE,
    GUIDE_FILE,
    LOGS_DIR,
    MANIFEST_FILE,
    REPRO_DIR,
)
from reprobridge.errors import ArchiveError
from reprobridge.evidence.layout import AUDIT_FILE, PLAN_FILE
from reprobridge.evidence.store import EvidenceStore

if TYPE_CHECKING:
    # Imported where an audit is read: `rb archive --evidence none` needs no record types
    # (about 50 ms of a small archive's start).
    from reprobridge.evidence.records import AuditSummary, Plan

#: Top-level files of a bundle that are machinery, not evidence.
_BUNDLE_SKIP = frozenset({".lock", ".lock.owner"})
_R = TypeVar("_R", "AuditSummary", "Plan")


@dataclass
class Audit:
    """One selected evidence bundle and what the archive metadata needs from it
    (``summary`` and ``plan`` are None where the file is malformed: the archive still
    carries the bundle, whose integrity ``rb verify`` judges)."""

    audit_id: str
    path: Path
    summary: AuditSummary | None
    plan: Plan | None

    @property
    def commit(self) -> str | None:
        return (self.plan.commit or None) if self.plan is not None else None


def _regular_or_dir(path: Path, shown: str) -> os.stat_result:
    try:
        st = path.lstat()
    except OSError as exc:
        raise ArchiveError(f"cannot be read ({exc.strerror})", path=shown) from exc
    if stat.S_ISLNK(st.st_mode):
        raise ArchiveError(
            f"is a symlink to {str(path.readlink())!r}; archives hold regular files only",
            path=shown,
            hint="replace the link by the file it points to, or remove it",
        )
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        kind = (
            "FIFO"
            if stat.S_ISFIFO(st.st_mode)
            else "device"
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
            else "socket"
            if stat.S_ISSOCK(st.st_mode)
            else "special file"
        )
        raise ArchiveError(f"is a {kind}; archives hold regular files only", path=shown)
    return st


def _file_member(path: Path, rel: str) -> Member:
    st = _regular_or_dir(path, rel)
    if stat.S_ISDIR(st.st_mode):
        return Member(rel, kind="dir")
    return Member(rel, source=path, executable=bool(st.st_mode & 0o100))


def tree_members(
    base: Path, prefix: str, *, skip_top: frozenset[str] = frozenset()
) -> list[Member]:
    """Every file and directory under ``base`` as members named ``prefix/<relative path>``.

    Refuses (ArchiveError) any entry that is not a regular file or directory.
    """
    out: list[Member] = [Member(prefix, kind="dir")]
    _regular_or_dir(base, prefix)
    for dirpath, dirnames, filenames in os.walk(base):
        d = Path(dirpath)
        rel_dir = d.relative_to(base).as_posix()
        for name in [*dirnames, *filenames]:
            if rel_dir == "." and name in skip_top:
                continue
            rel = f"{prefix}/{name}" if rel_dir == "." else f"{prefix}/{rel_dir}/{name}"
            out.append(_file_member(d / name, rel))
    return out


def select_audits(root: Path, evidence: Sequence[str]) -> list[Audit]:
    """The bundles named by ``evidence``: ids, ``all``, ``latest`` or ``none``.

    ``latest`` is the newest finished bundle (ids start with a UTC timestamp), as for
    ``rb report``. Refuses an unknown id and a bundle that is not finished (not sealed: an
    audit still running or interrupted, even after its audit.json).
    """
    store = EvidenceStore(root / EVIDENCE_DIR)
    known = [p.name for p in store.bundles()]
    wanted: list[str] = []
    for item in evidence:
        if item == "none":
            continue
        if item == "all":
            wanted += known
        elif item == "latest":
            latest = store.latest()
            if latest is None:
                raise ArchiveError(
                    f"there is no finished audit under {EVIDENCE_DIR}/",
                    hint="run `rb audit` (or finish one with `rb audit --resume`)",
                )
            wanted.append(latest.name)
        elif item in known:
            wanted.append(item)
        else:
            raise ArchiveError(
                f"no audit {item!r} under {EVIDENCE_DIR}/ (known: {', '.join(known) or 'none'})"
            )
    audits: list[Audit] = []
    for audit_id in sorted(set(wanted)):
        path = store.root / audit_id
        shown = f"{EVIDENCE_DIR}/{audit_id}"
        state = store.state(path)
        if state == "unfinished":
            raise ArchiveError(
                "is not finished (not sealed: no SHA256SUMS): the audit is running or was "
                "interrupted",
                path=shown,
                hint="finish it with `rb audit --resume`, or leave it out with --evidence",
            )
        if state == "broken":
            raise ArchiveError(
                "is sealed but its plan.json or audit.json is missing (removed after sealing)",
                path=shown,
                hint=f"check it with `rb verify {shown}`, or leave it out with --evidence",
            )
        from reprobridge.evidence.records import AuditSummary, Plan

        audits.append(
            Audit(
                audit_id,
                path,
                _record(AuditSummary.from_json, path / AUDIT_FILE),
                _record(Plan.from_json, path / PLAN_FILE),
            )
        )
    return audits


def _record(parse: Callable[[Any], _R], path: Path) -> _R | None:
    """The record ``parse`` reads from the JSON file at ``path``; None when malformed."""
    from reprobridge.evidence.records import RecordError

    try:
        return parse(json.loads(path.read_bytes()))
    except (OSError, ValueError, RecordError):
        return None


def audited_commit(root: Path, audits: Sequence[Audit]) -> str:
    """The one commit the selected audits ran on (HEAD when none is selected)."""
    commits = {a.commit for a in audits if a.commit}
    if len(commits) > 1:
        raise ArchiveError(
            f"the selected audits ran on different commits ({', '.join(sorted(commits))})",
            hint="select audits of one commit with --evidence ID",
        )
    if commits:
        return commits.pop()
    head = _proc.head_commit(root)
    if head is None:
        raise ArchiveError("the repository has no commit to archive", path=str(root))
    return head


def commit_time(root: Path, commit: str) -> int:
    """The committer time (seconds since 1970) of ``commit``."""
    res = _proc.git(root, "show", "-s", "--format=%ct", commit, check=False)
    if res.returncode != 0 or not res.text.strip().isdigit():
        raise ArchiveError(
            f"cannot read the time of commit {commit[:12]} (is it in this repository?)",
            path=str(root),
        )
    return int(res.text.strip())


def artifact_members(root: Path) -> list[Member]:
    """rb's artifacts from the working tree (see the module doc)."""
    if not (root / MANIFEST_FILE).is_file():
        raise ArchiveError("not found; there is nothing to archive", path=MANIFEST_FILE)
    out: list[Member] = []
    for name in (MANIFEST_FILE, FLAKE_FILE, FLAKE_LOCK_FILE, GUIDE_FILE):
        if (root / name).exists() or (root / name).is_symlink():
            out.append(_file_member(root / name, name))
    res = _proc.git(root, "ls-files", "-z", "-co", "--exclude-standard", "--", REPRO_DIR)
    skip = (EVIDENCE_DIR + "/", LOGS_DIR + "/")
    for rel in sorted(set(res.stdout.decode("utf-8", "surrogateescape").split("\0"))):
        if not rel or rel.startswith(skip):
            continue
        path = root / rel
        if not path.exists() and not path.is_symlink():
            continue  # deleted in the working tree but still in the index
        out.append(_file_member(path, rel))
    return out


def merge(*groups: Sequence[Member]) -> list[Member]:
    """Members by path; a later group wins over an earlier one for the same path."""
    by_path: dict[str, Member] = {}
    for group in groups:
        for m in group:
            prev = by_path.get(m.path)
            if prev is not None and prev.kind == "dir" and m.kind == "dir":
                continue
            by_path[m.path] = m
    return list(by_path.values())
