"""The evidence bundle: one directory per audit, written crash-safely, checkable by anyone.

Layout (``<repo>/repro/evidence/<audit-id>/``, constants.EVIDENCE_DIR)::

    audit.json  plan.json  journal.jsonl  fingerprint/*.json
    runs/<exp-id>/<k>/   stdout.log stderr.log ... status.json (written LAST)
    runs/<exp-id>/<k>.partial-<UTC>/   an interrupted run, set aside for forensics
    SHA256SUMS           sha256sum-compatible, over every file but itself and the signature
    statement.dsse.json  signer.pub        optional signature (reprobridge.evidence.sign)
    .lock  .lock.owner   the single-writer lock (never part of the evidence)

Invariants this module keeps, whatever the crash point:

* Every file is written atomically (temp file, fsync, rename: ``_fs.write_atomic``); a
  reader, or an auditor killed at any point, sees the old bytes or the new ones, never a
  mix. A failed write (ENOSPC) leaves the old file and no temp file. Outside ``runs/`` each
  write also fsyncs its directory; a run's directories are fsynced once, at its seal.
  Until then a power cut may lose a name of an unsealed run (the run is then ``missing``
  or ``partial`` and runs again), never a file of a sealed one.
* A run is *sealed* only when its ``status.json`` exists; it is written last and lists the
  sha256 and size of every other file of the run. Before it is written, every one of those
  files is on disk (fsynced when written here, the others, such as logs and copied
  outputs, by the seal; each file once) and so is every directory of the run and above it
  that got an entry: one fsync per directory per run rather than one per file, each a
  device flush, and the seal's all at once (``_fs.fsync_together``, which the filesystem
  commits together). So a run is ``missing``, ``partial`` (no
  status.json: interrupted), ``sealed`` (everything matches) or ``corrupt`` (status.json
  exists but something differs: tampering or bit rot, never reused silently).
* ``journal.jsonl`` is append-only and hash-chained (``seq``, ``prev_sha256``); a torn last
  line is cut off on the next locked read, earlier lines are never rewritten.
* A sealed run, and after ``SHA256SUMS`` the whole bundle, refuse further writes.
* Mutations require :meth:`Bundle.lock` (one auditor per bundle; a second fails fast).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import filelock

from reprobridge import _log
from reprobridge._fs import fsync_together, open_regular, read_regular, safe_target, write_atomic
from reprobridge.errors import UnsafePathError
from reprobridge.evidence import faults
from reprobridge.evidence.dsse import canonical_json
from reprobridge.evidence.errors import BundleLockedError, EvidenceError, SecretFoundError
from reprobridge.evidence.hashing import sha256_bytes, sha256_file, sha256_file_digest
from reprobridge.evidence.layout import (
    AUDIT_ID,
    JOURNAL_FILE,
    LOCK_FILE,
    LOCK_OWNER_FILE,
    RUNS_DIR,
    SIGNER_PUB_FILE,
    STATEMENT_FILE,
    STATUS_FILE,
    SUMS_FILE,
)
from reprobridge.evidence.records import STATUS_FORMAT, RunRecord
from reprobridge.evidence.redact import scan_for_secrets

RunState = Literal["missing", "partial", "sealed", "corrupt"]

#: Files at the bundle top that SHA256SUMS does not cover: itself, the signature over it,
#: and the lock (machinery, not evidence).
UNSUMMED_FILES = frozenset({SUMS_FILE, STATEMENT_FILE, SIGNER_PUB_FILE, LOCK_FILE, LOCK_OWNER_FILE})
#: Written by the signer after SHA256SUMS; every other write is refused once it exists.
_POST_SEAL_WRITABLE = frozenset({STATEMENT_FILE, SIGNER_PUB_FILE})

GENESIS_SHA256 = "0" * 64

# Experiment ids become directory names (reliability.md case 3).
_EXP_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_PARTIAL_DIR = re.compile(r"^\d+\.partial-[0-9TZ-]+$")
_HEX64_B = re.compile(rb"[0-9a-f]{64}")


def _journal_line(record: dict[str, Any]) -> bytes:
    try:
        text = json.dumps(
            record, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError) as exc:
        raise EvidenceError(f"journal event cannot be stored as JSON: {exc}") from exc
    return text.encode("utf-8")


def _fsync_dir(path: Path) -> None:
    # A rename or a new directory entry is durable only once its directory is fsynced.
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _leave_unrenamed_temp(target: Path, data: bytes) -> None:
    """Fault ``after_fsync_before_rename``: put on disk exactly what write_atomic would have.

    ``_fs.write_atomic`` has no hook between its fsync and its rename (see the change
    request in the report), so under a fault this reproduces that state, a complete and
    fsynced temp sibling named as write_atomic names it and an untouched target, then dies.
    Only ever reached with ``RB_TESTING=1``.
    """
    import tempfile

    target.parent.mkdir(parents=True, exist_ok=True)
    fd, _tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.write(fd, data)
    os.fsync(fd)
    faults.crash()


def _plain_rel(rel: str, *, allow_hidden: bool = False) -> bool:
    """A clean relative POSIX path: not empty, not absolute, no empty, ``.`` or ``..``
    component (so it is its own normal form), no backslash, NUL or newline, and no hidden
    component unless ``allow_hidden``. String operations only: `rb verify` checks one per
    SHA256SUMS line (a ``PurePosixPath`` each cost 1.3 s on 100,000 lines)."""
    if not rel or "\\" in rel or "\x00" in rel or "\n" in rel:
        return False
    for part in rel.split("/"):  # a leading "/" gives an empty first part
        if part in ("", ".", "..") or (part[0] == "." and not allow_hidden):
            return False
    return True


def _check_rel(rel: str) -> PurePosixPath:
    if not _plain_rel(rel):
        raise EvidenceError(
            "is not a plain relative path inside the bundle (no '..', no absolute path, "
            "no hidden component)",
            path=rel,
        )
    return PurePosixPath(rel)


class Bundle:
    """One audit's evidence directory. Construct with :meth:`create` or :meth:`open`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.audit_id = path.name
        #: Things worth telling the user that are not errors (a torn journal line cut off,
        #: stale temp files removed). Never holds secrets.
        self.notes: list[str] = []
        self._lock: filelock.BaseFileLock | None = None
        self._journal_tail: tuple[int, str] | None = None  # (last seq, sha256 of last line)
        # What the next seal must put on disk, and what it need not (see seal_run): the
        # directories that got an entry for a directory made here, and the files of runs
        # this object wrote and fsynced itself, by path, as (inode, size, mtime).
        self._unsynced_dirs: set[Path] = set()
        self._synced: dict[str, tuple[int, int, int]] = {}

    # ------------------------------------------------------------------ construction

    @classmethod
    def create(cls, root: Path, audit_id: str) -> Bundle:
        """Create the bundle directory ``<root>/<audit_id>/``.

        ``root`` is the evidence directory, normally ``<repo>/repro/evidence``
        (:data:`~reprobridge.constants.EVIDENCE_DIR`); it is created if missing. Refuses an
        existing bundle (use :meth:`open` to resume), an audit id that is not a plain name,
        and a ``root`` that is, or sits in, a symlink (``repro -> /elsewhere``), so evidence
        is never written outside the repository through a link.
        """
        if not AUDIT_ID.match(audit_id) or audit_id in (".", ".."):
            raise EvidenceError(
                "audit id must match [A-Za-z0-9][A-Za-z0-9_.-]{0,127}", field="audit_id"
            )
        for p in (root, root.parent):
            if p.is_symlink():
                raise EvidenceError(
                    "is a symlink; rb does not write evidence through symlinks", path=str(p)
                )
        root.mkdir(parents=True, exist_ok=True)
        path = root / audit_id
        try:
            path.mkdir()
        except FileExistsError:
            raise EvidenceError(
                "evidence bundle already exists",
                path=str(path),
                hint="resume it (rb audit --resume) or choose a new audit id",
            ) from None
        _fsync_dir(root)
        return cls(path)

    @classmethod
    def open(cls, path: Path) -> Bundle:
        """Open an existing bundle directory (read-only until :meth:`lock` is taken)."""
        if path.is_symlink() or not path.is_dir():
            raise EvidenceError("is not an evidence bundle directory", path=str(path))
        return cls(path)

    def __repr__(self) -> str:
        return f"Bundle({str(self.path)!r})"

    # ------------------------------------------------------------------ locking

    @contextlib.contextmanager
    def lock(self) -> Iterator[Bundle]:
        """Hold the bundle's single-writer lock (``<bundle>/.lock``, flock, timeout 0).

        A second auditor (another process, or another Bundle object here) gets
        :class:`BundleLockedError` at once, naming the lock file and, when known, the
        holder's pid and host. A crashed holder's lock dies with its process. On entry,
        temp files left by a killed writer outside ``runs/`` are removed (and noted): they
        are never evidence, while those inside a run dir go with the run when it is set aside.
        """
        if self._lock is not None:
            raise EvidenceError("lock is already held by this Bundle object", path=str(self.path))
        lock_path = self.path / LOCK_FILE
        lk = filelock.FileLock(str(lock_path), timeout=0)
        try:
            lk.acquire()
        except filelock.Timeout:
            raise BundleLockedError(
                f"another auditor holds the lock{self._holder_hint()}",
                path=str(lock_path),
                hint="wait for it to finish; the lock dies with its process",
            ) from None
        self._lock = lk
        try:
            owner = {"pid": os.getpid(), "host": socket.gethostname(), "since": _utc_iso()}
            with contextlib.suppress(OSError):
                write_atomic(self.path / LOCK_OWNER_FILE, canonical_json(owner))
            self._remove_stale_temps()
            yield self
        finally:
            self._lock = None
            self._journal_tail = None
            with contextlib.suppress(OSError):
                (self.path / LOCK_OWNER_FILE).unlink()
            lk.release()

    @property
    def locked(self) -> bool:
        """Whether this object holds the lock."""
        return self._lock is not None

    def _holder_hint(self) -> str:
        try:
            owner = json.loads(read_regular(self.path / LOCK_OWNER_FILE))
            return f" (pid {int(owner['pid'])} on {owner['host']} since {owner['since']})"
        except (OSError, ValueError, KeyError, TypeError):
            return ""

    def _require_lock(self) -> None:
        if self._lock is None:
            raise EvidenceError(
                "writing evidence requires the bundle lock; use `with bundle.lock():`",
                path=str(self.path),
            )

    def _remove_stale_temps(self) -> None:
        for dirpath, dirnames, filenames in os.walk(self.path):
            here = Path(dirpath)
            if here == self.path:
                dirnames[:] = [d for d in dirnames if d != RUNS_DIR]
            for name in filenames:
                if name.startswith(".") and name.endswith(".tmp"):
                    with contextlib.suppress(OSError):
                        (here / name).unlink()
                        rel = (here / name).relative_to(self.path).as_posix()
                        self.notes.append(
                            f"{rel}: removed a temp file left by an interrupted write"
                        )

    # ------------------------------------------------------------------ writing files

    def _target(self, rel: str) -> Path:
        _check_rel(rel)
        try:
            return safe_target(self.path, rel)
        except UnsafePathError as exc:
            raise EvidenceError(exc.message, path=rel) from exc

    def _guard_write(self, rel: str) -> None:
        self._require_lock()
        p = _check_rel(rel)
        if rel in (SUMS_FILE, JOURNAL_FILE, LOCK_FILE, LOCK_OWNER_FILE):
            raise EvidenceError("is written by the bundle itself, not through write_*", path=rel)
        if (self.path / SUMS_FILE).exists() and rel not in _POST_SEAL_WRITABLE:
            raise EvidenceError(
                "the bundle is sealed (SHA256SUMS exists); it is read-only", path=rel
            )
        if p.parts[0] == RUNS_DIR and len(p.parts) >= 4:
            if p.parts[3] == STATUS_FILE and len(p.parts) == 4:
                raise EvidenceError("status.json is written only by seal_run", path=rel)
            if (self.path / RUNS_DIR / p.parts[1] / p.parts[2] / STATUS_FILE).exists():
                raise EvidenceError("the run is sealed; its files are read-only", path=rel)

    def _commit(self, target: Path, data: bytes, rel: str, *, sync_dir: bool = True) -> Path:
        faults.hit("before_write")
        if faults.fire("after_fsync_before_rename"):
            _leave_unrenamed_temp(target, data)
        try:
            write_atomic(target, data, sync_dir=sync_dir)
        except OSError as exc:
            # write_atomic already removed its temp file; the previous bytes are untouched.
            raise EvidenceError(
                f"could not write evidence ({exc.strerror or exc}); the previous file is intact",
                path=rel,
                hint="free some disk space, then rb audit --resume",
            ) from exc
        faults.hit("after_rename")
        return target

    def write_bytes(self, rel: str, data: bytes) -> Path:
        """Atomically write ``data`` to ``<bundle>/<rel>``; return the path.

        Refuses paths that escape or hide (``..``, absolute, dot-components, symlinks),
        the files the bundle owns (SHA256SUMS, journal, status.json), files of a sealed
        run, and everything once the bundle is sealed (except the signature files).
        """
        self._guard_write(rel)
        target = self._target(rel)
        if not (rel.startswith(f"{RUNS_DIR}/") and rel.count("/") >= 3):
            return self._commit(target, bytes(data), rel)
        # A file of a run (runs/<exp>/<k>/...): fsynced now, its directory at the seal.
        self._make_dirs(target.parent)
        self._commit(target, bytes(data), rel, sync_dir=False)
        st = target.stat()
        self._synced[str(target)] = (st.st_ino, st.st_size, st.st_mtime_ns)
        return target

    def write_json(self, rel: str, data: Any) -> Path:
        """Atomically write ``data`` as canonical JSON (see :func:`canonical_json`)."""
        return self.write_bytes(rel, canonical_json(data))

    def read_json(self, rel: str) -> Any:
        """Parse ``<bundle>/<rel>`` as JSON (EvidenceError naming the file when it is not)."""
        target = self._target(rel)
        try:
            return json.loads(read_regular(target))
        except OSError as exc:
            raise EvidenceError(f"cannot be read ({exc.strerror or exc})", path=rel) from exc
        except ValueError as exc:
            raise EvidenceError(f"cannot be read as JSON: {exc}", path=rel) from exc

    # ------------------------------------------------------------------ runs

    @staticmethod
    def _run_rel(exp_id: str, k: int) -> str:
        if not isinstance(exp_id, str) or not _EXP_ID.match(exp_id):
            raise EvidenceError(
                "experiment id must match ^[a-z0-9][a-z0-9_.-]{0,63}$", field=str(exp_id)
            )
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise EvidenceError("run number must be an int >= 0", field=f"{exp_id}/{k!r}")
        return f"{RUNS_DIR}/{exp_id}/{k}"

    def run_dir(self, exp_id: str, k: int) -> Path:
        """``<bundle>/runs/<exp_id>/<k>/``, created if missing. Not fsynced here: the seal
        fsyncs the run's directory and its parents (a power cut before it loses an unsealed
        run, which ``--resume`` runs again)."""
        rel = self._run_rel(exp_id, k)
        path = self._target(rel)
        if not path.is_dir():
            self._require_lock()
            self._make_dirs(path)
        return path

    def _make_dirs(self, path: Path) -> None:
        """``path`` and its missing parents; the directories that got a new entry are
        remembered for the seal to fsync."""
        missing = []
        for d in (path, *path.parents):
            if d == self.path or d.is_dir():
                break
            missing.append(d)
        path.mkdir(parents=True, exist_ok=True)
        self._unsynced_dirs.update(d.parent for d in missing)

    def runs(self) -> list[tuple[str, int]]:
        """Every ``(exp_id, k)`` with a run directory (set-aside ``.partial-*`` dirs excluded)."""
        out: list[tuple[str, int]] = []
        runs = self.path / RUNS_DIR
        if not runs.is_dir():
            return out
        for exp in sorted(runs.iterdir()):
            if not exp.is_dir() or not _EXP_ID.match(exp.name):
                continue
            out.extend(
                (exp.name, int(d.name))
                for d in exp.iterdir()
                # canonical numbers only: "01" is not run 1 (SHA256SUMS still covers it)
                if d.name.isdigit() and d.name == str(int(d.name))
            )
        return sorted(out)

    def _run_files(self, run: Path) -> tuple[dict[str, Path], list[str]]:
        """Regular files under ``run`` except status.json, and the non-regular entries."""
        files: dict[str, Path] = {}
        odd: list[str] = []
        for dirpath, dirnames, filenames in os.walk(run):
            here = Path(dirpath)
            for name in [*dirnames]:
                if (here / name).is_symlink():
                    odd.append((here / name).relative_to(run).as_posix())
                    dirnames.remove(name)
            for name in filenames:
                p = here / name
                rel = p.relative_to(run).as_posix()
                if rel == STATUS_FILE:
                    continue
                if p.is_symlink() or not p.is_file():
                    odd.append(rel)
                else:
                    files[rel] = p
        return files, odd

    def seal_run(
        self,
        exp_id: str,
        k: int,
        record: RunRecord | dict[str, Any],
        *,
        scan_secrets: bool = True,
    ) -> Path:
        """Write the run's ``status.json`` last; from then on the run is immutable.

        ``status.json`` = ``{"format", "sealed": true, "record": record, "files": {name:
        {"sha256", "size"}}}`` over every other file in the run dir (recursively, posix
        names). Refuses an already sealed run, symlinks, special files and hidden (temp)
        files. With ``scan_secrets`` (default) every file is first run through the seal-time
        secret scanner and a finding raises :class:`SecretFoundError` (nothing is sealed).
        """
        self._require_lock()
        rel = self._run_rel(exp_id, k)
        if (self.path / SUMS_FILE).exists():
            raise EvidenceError("the bundle is sealed (SHA256SUMS exists)", path=rel)
        run = self._target(rel)
        if not run.is_dir():
            raise EvidenceError("run directory does not exist", path=rel)
        if (run / STATUS_FILE).exists():
            raise EvidenceError("run is already sealed", path=f"{rel}/{STATUS_FILE}")
        if isinstance(record, RunRecord):
            record = record.to_json()
        if not isinstance(record, dict):
            raise EvidenceError("run record must be a RunRecord or a dict", path=rel)
        files, odd = self._run_files(run)
        hidden = [n for n in files if any(part.startswith(".") for part in n.split("/"))]
        if odd or hidden:
            raise EvidenceError(
                f"cannot seal: not regular evidence files: {', '.join(sorted(odd + hidden))}",
                path=rel,
            )
        if scan_secrets:
            findings: list[str] = []
            for name in sorted(files):
                findings.extend(f"{rel}/{f}" for f in scan_for_secrets(files[name], display=name))
            if findings:
                raise SecretFoundError(
                    f"refusing to seal: {len(findings)} secret finding(s): {'; '.join(findings[:5])}",
                    findings=findings,
                    path=rel,
                )
        # What status.json lists is on disk before it: every file of the run but those
        # this object wrote and fsynced itself, unchanged since (an fsync is a device
        # flush even for a file already on disk), and the names: every directory of the
        # run, and those above it that got an entry here (the run's own directory in
        # runs/<exp>, ...). All at once, so the filesystem commits them together.
        unsynced = []
        for path in files.values():
            written = self._synced.pop(str(path), None)
            try:
                st = path.stat()
            except OSError:
                st = None  # reported by the hashing below
            if st is None or written != (st.st_ino, st.st_size, st.st_mtime_ns):
                unsynced.append(path)
        directories = {run}
        for name in files:
            directories.update(files[name].parents[: name.count("/")])
        directories.update(d for d in self._unsynced_dirs if d in run.parents)
        self._unsynced_dirs -= directories
        failed = fsync_together([*unsynced, *directories])
        for name in sorted(files):
            if files[name] in failed:
                raise EvidenceError(
                    f"cannot be put on disk: {failed[files[name]].strerror}", path=f"{rel}/{name}"
                )
        listing: dict[str, dict[str, Any]] = {}
        for name in sorted(files):
            try:
                digest, size = sha256_file(files[name])
            except OSError as exc:
                raise EvidenceError(f"cannot read: {exc.strerror}", path=f"{rel}/{name}") from exc
            listing[name] = {"sha256": digest, "size": size}
        # RunStatus's JSON form, with the record as given (a test may seal any dict).
        status = {"format": STATUS_FORMAT, "sealed": True, "record": record, "files": listing}
        return self._commit(run / STATUS_FILE, canonical_json(status), f"{rel}/{STATUS_FILE}")

    def check_run(self, exp_id: str, k: int) -> list[str]:
        """Problems of one run, each naming the file (empty = sealed and intact)."""
        return self._check_run_dir(self._run_rel(exp_id, k))[1]

    def run_state(self, exp_id: str, k: int) -> RunState:
        """``missing`` | ``partial`` (no status.json) | ``sealed`` | ``corrupt`` (see module doc)."""
        return self._check_run_dir(self._run_rel(exp_id, k))[0]

    def _check_run_dir(self, rel: str) -> tuple[RunState, list[str]]:
        run = self.path / rel
        if not run.is_dir() or run.is_symlink():
            return "missing", [f"{rel}: run is missing"]
        tree = scan_tree(run, prefix=f"{rel}/")
        return self._judge_run(rel, tree, len(tree.files))

    def _judge_run(self, rel: str, tree: Tree, count: int) -> tuple[RunState, list[str]]:
        """The run at ``rel`` judged against its ``status.json``, from ``tree``: a scan that
        holds (at least) every file under the run, by bundle-relative path, each hashed
        once; ``count`` is how many of its files are under the run. Reads only the run's
        ``status.json``."""
        status_path = self.path / rel / STATUS_FILE
        srel = f"{rel}/{STATUS_FILE}"
        try:
            raw = read_regular(status_path)
        except FileNotFoundError:
            return "partial", [f"{rel}: run is not sealed (no {STATUS_FILE}; interrupted)"]
        except OSError as exc:
            return "corrupt", [f"{srel}: unreadable ({exc.strerror or exc})"]
        try:
            status = json.loads(raw)
        except ValueError as exc:
            return "corrupt", [f"{srel}: not valid JSON ({exc})"]
        del raw
        listed = status.get("files") if isinstance(status, dict) else None
        if (
            not isinstance(status, dict)
            or status.get("sealed") is not True
            or not isinstance(listed, dict)
            or not isinstance(status.get("record"), dict)
        ):
            return "corrupt", [f"{srel}: not a sealed run status (files/record/sealed)"]
        del status  # the listing can be large: keep one copy
        prefix = f"{rel}/"
        problems = [f"{o}: not a regular file" for o in tree.odd if o.startswith(prefix)]
        found = 0
        for name, entry in sorted(listed.items()):
            if (
                not isinstance(entry, dict)
                or not isinstance(entry.get("sha256"), str)
                or not _HEX64.match(entry["sha256"])
                or not isinstance(entry.get("size"), int)
            ):
                problems.append(f"{srel}: malformed entry for {name!r}")
                continue
            got = tree.files.get(prefix + name) if name != STATUS_FILE else None
            if got is None:
                problems.append(f"{rel}/{name}: missing (listed in {STATUS_FILE})")
                continue
            found += 1
            if isinstance(got, str):
                problems.append(f"{rel}/{name}: unreadable ({got})")
            elif got[1] != entry["size"] or got[0].hex() != entry["sha256"]:
                problems.append(
                    f"{rel}/{name}: sha256 mismatch ({STATUS_FILE} says {entry['sha256'][:12]}… "
                    f"{entry['size']} B, file has {got[0].hex()[:12]}… {got[1]} B)"
                )
        if found != count - 1:  # status.json is under the run, never listed
            problems.extend(
                f"{f}: not listed in {STATUS_FILE} (added after sealing)"
                for f in sorted(f for f in tree.files if f.startswith(prefix))
                if f[len(prefix) :] not in listed and f != srel
            )
        return ("corrupt" if problems else "sealed"), problems

    def set_aside_partial(self, exp_id: str, k: int) -> Path:
        """Rename an interrupted (or corrupt) run dir to ``<k>.partial-<UTC>``; return it.

        The dir is kept, and covered by SHA256SUMS at the end, for forensics. Refuses a
        sealed run (it is reused, not redone) and a missing one. Setting aside a corrupt
        run is allowed, but the caller must report it (journal, report): corruption is
        never reused and never hidden.
        """
        self._require_lock()
        rel = self._run_rel(exp_id, k)
        state = self.run_state(exp_id, k)
        if state not in ("partial", "corrupt"):
            raise EvidenceError(
                f"only a partial or corrupt run can be set aside; this one is {state}", path=rel
            )
        run = self.path / rel
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        dest = run.with_name(f"{k}.partial-{stamp}")
        n = 1
        while dest.exists():
            dest = run.with_name(f"{k}.partial-{stamp}-{n}")
            n += 1
        run.rename(dest)
        _fsync_dir(run.parent)
        return dest

    # ------------------------------------------------------------------ journal

    def journal_append(self, event: dict[str, Any], *, sync: bool = True) -> dict[str, Any]:
        """Append one event as a JSON line with ``seq`` and ``prev_sha256``; fsync; return it.

        ``prev_sha256`` is the sha256 of the previous line's bytes (without its newline),
        ``0``*64 for the first. The line is written with one ``write`` on an ``O_APPEND`` fd;
        if that fails the file is cut back to its previous length, so a later append never
        lands behind a fragment. ``sync=False`` skips the fsync for an event that nothing
        depends on (a run started): a killed auditor still leaves the whole line (one
        write), and the next synced append puts it on disk; a power cut before that may
        lose it, never tear the chain (a torn tail is cut on the next read).
        """
        self._require_lock()
        if not isinstance(event, dict) or {"seq", "prev_sha256"} & set(event):
            raise EvidenceError(
                "journal event must be a dict without seq/prev_sha256", path=JOURNAL_FILE
            )
        if (self.path / SUMS_FILE).exists():
            raise EvidenceError("the bundle is sealed; the journal is closed", path=JOURNAL_FILE)
        if self._journal_tail is None:
            self.journal_records()  # verifies the chain and cuts a torn tail
        assert self._journal_tail is not None
        seq, prev = self._journal_tail
        record = {**event, "seq": seq + 1, "prev_sha256": prev}
        line = _journal_line(record)
        data = line + b"\n"
        path = self.path / JOURNAL_FILE
        created = not path.exists()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            start = os.fstat(fd).st_size
            if faults.fire("mid_journal_append"):
                os.write(fd, data[: len(data) // 2])
                os.fsync(fd)
                faults.crash()
            try:
                written = os.write(fd, data)
                if written != len(data):
                    raise OSError(28, "short write to the journal")
                if sync or created:
                    os.fsync(fd)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, start)
                    os.fsync(fd)
                raise EvidenceError(
                    f"could not append to the journal ({exc.strerror or exc}); earlier lines are intact",
                    path=JOURNAL_FILE,
                    hint="free some disk space, then rb audit --resume",
                ) from exc
        finally:
            os.close(fd)
        if created:
            _fsync_dir(self.path)
        self._journal_tail = (seq + 1, sha256_bytes(line))
        return record

    def journal_records(self, *, repair: bool = True) -> list[dict[str, Any]]:
        """Every journal record, after checking the hash chain.

        A torn last line (no trailing newline, or not JSON) is a crash mid-append: with the
        lock held and ``repair`` it is truncated away (a note goes to :attr:`notes`);
        without the lock it is only skipped (another auditor may be writing it). Any earlier
        damage, a bad ``seq`` or a broken ``prev_sha256`` raises EvidenceError naming the line.
        """
        path = self.path / JOURNAL_FILE
        try:
            raw = read_regular(path)
        except FileNotFoundError:
            self._journal_tail = (0, GENESIS_SHA256)
            return []
        except OSError as exc:
            raise EvidenceError(f"unreadable ({exc.strerror or exc})", path=JOURNAL_FILE) from exc
        lines = raw.split(b"\n")
        tail = lines.pop()  # b"" when the file ends with a newline
        records: list[dict[str, Any]] = []
        torn: bytes | None = tail or None
        for i, line in enumerate(lines):
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                if i == len(lines) - 1 and torn is None:
                    torn = line + b"\n"
                    break
                raise EvidenceError(
                    f"line {i + 1} is not a JSON object ({exc})", path=JOURNAL_FILE
                ) from exc
            records.append(rec)
        prev = GENESIS_SHA256
        for i, rec in enumerate(records):
            if rec.get("seq") != i + 1:
                raise EvidenceError(
                    f"line {i + 1}: seq is {rec.get('seq')!r}, expected {i + 1}", path=JOURNAL_FILE
                )
            if rec.get("prev_sha256") != prev:
                raise EvidenceError(
                    f"line {i + 1}: hash chain broken (prev_sha256 does not match line {i})",
                    path=JOURNAL_FILE,
                )
            prev = sha256_bytes(lines[i])
        if torn is not None:
            keep = len(raw) - len(torn)
            if repair and self._lock is not None:
                with open(path, "r+b") as fh:
                    fh.truncate(keep)
                    fh.flush()
                    os.fsync(fh.fileno())
                note = f"{JOURNAL_FILE}: cut off a torn last line ({len(torn)} bytes) left by an interrupted append"
                self.notes.append(note)
                _log.emit("evidence.journal_repaired", path=JOURNAL_FILE, bytes=len(torn))
            elif repair:
                self.notes.append(f"{JOURNAL_FILE}: ignored an incomplete last line (not locked)")
            else:
                raise EvidenceError(f"torn last line ({len(torn)} bytes)", path=JOURNAL_FILE)
        if self._lock is not None:
            self._journal_tail = (len(records), prev)
        return records

    # ------------------------------------------------------------------ sealing and checking

    def scan(self) -> Tree:
        """Every file of the bundle but SHA256SUMS, the signature and the lock, hashed once
        (one ``os.scandir`` walk), and every entry that is not a regular file."""
        return scan_tree(self.path, skip_top=UNSUMMED_FILES)

    def _runs_checked(self, tree: Tree) -> tuple[dict[tuple[str, int], RunState], list[str]]:
        """The state of every run and their problems, judged from ``tree`` (no re-hashing)."""
        counts: dict[str, int] = {}
        for rel in tree.files:
            head = rel.split("/", 3)
            if len(head) == 4 and head[0] == RUNS_DIR:  # under runs/<exp>/<k>/
                run = f"{head[0]}/{head[1]}/{head[2]}"
                counts[run] = counts.get(run, 0) + 1
        states: dict[tuple[str, int], RunState] = {}
        problems: list[str] = []
        for exp_id, k in self.runs():
            rel = self._run_rel(exp_id, k)
            run_dir = self.path / rel
            if run_dir.is_symlink() or not run_dir.is_dir():
                states[(exp_id, k)], found = "missing", [f"{rel}: run is missing"]
            else:
                states[(exp_id, k)], found = self._judge_run(rel, tree, counts.get(rel, 0))
            problems.extend(found)
        return states, problems

    def write_sha256sums(self) -> Path:
        """Seal the bundle: write ``SHA256SUMS`` (``<hex>  <relpath>``, sorted by path).

        Covers every file except SHA256SUMS, the signature files and the lock. Refuses to
        seal over evidence that is not sound: a corrupt or unsealed run (set it aside
        first), a broken journal, a symlink or special file, or a hidden file outside a
        set-aside ``.partial-*`` dir, so a seal can never launder tampering. Each file is
        read once: the digests that check the runs are the ones written.
        """
        self._require_lock()
        if (self.path / SUMS_FILE).exists():
            raise EvidenceError("the bundle is already sealed", path=SUMS_FILE)
        tree = self.scan()
        _states, problems = self._runs_checked(tree)
        self.journal_records()
        problems.extend(f"{rel}: not a regular file" for rel in tree.odd)
        for rel, got in tree.files.items():
            parts = rel.split("/")
            in_partial = len(parts) > 3 and parts[0] == RUNS_DIR and _PARTIAL_DIR.match(parts[2])
            if not in_partial and any(part.startswith(".") for part in parts):
                problems.append(f"{rel}: hidden or temporary file")
            if any(c in rel for c in "\\\n\r"):
                problems.append(f"{rel!r}: name cannot be listed in SHA256SUMS")
            if isinstance(got, str):
                problems.append(f"{rel}: unreadable ({got})")
        if problems:
            raise EvidenceError(
                f"refusing to seal: {'; '.join(problems[:5])}"
                + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""),
                path=str(self.path),
            )
        lines = [
            f"{got[0].hex()}  {rel}\n"
            for rel, got in sorted(tree.files.items())
            if not isinstance(got, str)  # an unreadable file was refused above
        ]
        return self._commit(self.path / SUMS_FILE, "".join(lines).encode("utf-8"), SUMS_FILE)

    def _check_sums(self, files: dict[str, tuple[bytes, int] | str]) -> list[str]:
        """SHA256SUMS against ``files`` (a :class:`Tree`'s, **consumed**: every listed
        path is popped), read line by line: problems in line order, then the files it does
        not list.

        Streaming is the point: a parsed copy of 100,000 lines cost 54 MB and
        1.6 s. The file rb writes is sorted, so a path listed twice is at most the line
        before; only a SHA256SUMS out of order (hand-edited) makes this remember the paths
        it has seen, from the first line out of order on.
        """
        path = self.path / SUMS_FILE
        try:
            fh = os.fdopen(open_regular(path), "rb")  # closed below; the lines stream
        except FileNotFoundError:
            return [f"{SUMS_FILE}: missing (the bundle was never sealed)"]
        except OSError as exc:
            return [f"{SUMS_FILE}: unreadable ({exc.strerror or exc})"]
        problems: list[str] = []
        seen: set[str] | None = None  # the listed paths, once a line came out of order
        prev = ""
        raw = b"\n"
        with fh:
            for n, raw in enumerate(fh, 1):
                rel = _sums_entry(raw)
                if rel is None:
                    problems.append(f"{SUMS_FILE}:{n}: malformed line")
                    continue
                if seen is None and rel <= prev:
                    seen = _listed_paths(path, n - 1)
                if seen is not None:
                    if rel in seen:
                        problems.append(f"{SUMS_FILE}:{n}: {rel} listed twice")
                        continue
                    seen.add(rel)
                prev = rel
                got = files.pop(rel, None)
                if got is None:
                    problems.append(f"{rel}: missing (listed in {SUMS_FILE})")
                elif isinstance(got, str):
                    problems.append(f"{rel}: unreadable ({got})")
                else:
                    expected = raw[:64].decode("ascii")
                    if got[0].hex() != expected:
                        problems.append(
                            f"{rel}: sha256 mismatch ({SUMS_FILE} says {expected[:12]}…, "
                            f"file has {got[0].hex()[:12]}…)"
                        )
            if not raw.endswith(b"\n"):
                problems.append(f"{SUMS_FILE}: truncated (no final newline)")
        problems.extend(
            f"{rel}: not listed in {SUMS_FILE} (added after sealing)" for rel in sorted(files)
        )
        return problems

    def verify_files(self) -> list[str]:
        """Re-hash everything: problems vs SHA256SUMS and vs each run's status.json.

        Each problem starts with the file it is about. Read-only; needs no lock.
        """
        return self.inspect()[0]

    def inspect(self) -> tuple[list[str], dict[tuple[str, int], RunState]]:
        """:meth:`verify_files`' problems and every run's state, from one walk of the
        bundle hashing each file once (``rb verify``'s integrity pass)."""
        tree = self.scan()
        states, run_problems = self._runs_checked(tree)
        problems = [f"{rel}: not a regular file" for rel in tree.odd]
        problems += self._check_sums(tree.files)  # consumes tree.files: runs were first
        return problems + run_problems, states


def _sums_entry(raw: bytes) -> str | None:
    """The path of one SHA256SUMS line (``<64 hex>  <path>\\n``; ``*`` for the second
    space is binary mode, as ``sha256sum`` writes it), or None when it is malformed or the
    path is not a plain relative one (``..``, absolute, ...)."""
    line = raw[:-1] if raw.endswith(b"\n") else raw
    if len(line) < 67 or line[64] != 0x20 or line[65] not in b" *":
        return None
    if not _HEX64_B.match(line, 0, 64):
        return None
    try:
        rel = line[66:].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return rel if _plain_rel(rel, allow_hidden=True) else None


def _listed_paths(path: Path, lines: int) -> set[str]:
    """The well-formed paths of the first ``lines`` lines of the SHA256SUMS at ``path``."""
    out: set[str] = set()
    with os.fdopen(open_regular(path), "rb") as fh:
        for _n, raw in zip(range(lines), fh, strict=False):
            rel = _sums_entry(raw)
            if rel is not None:
                out.add(rel)
    return out


@dataclass
class Tree:
    """What one ``os.scandir`` walk found: ``files`` maps each regular file's path (relative
    to the walk's base, with ``/``) to ``(sha256 digest, size)`` of the bytes read (the raw
    32 bytes: 100,000 hex strings would cost 5 MB more), or to why it could not be read;
    ``odd`` lists entries that are neither a regular file nor a real directory (links,
    FIFOs, sockets, devices), sorted."""

    files: dict[str, tuple[bytes, int] | str]
    odd: list[str]


def scan_tree(base: Path, *, prefix: str = "", skip_top: frozenset[str] = frozenset()) -> Tree:
    """Walk ``base`` once (``os.scandir``: the entry types come with the listing, no
    ``stat`` per entry) and hash every regular file once; paths in the result start with
    ``prefix``. Links are listed in ``odd``, never followed; ``skip_top`` names at the top
    of ``base`` are left out."""
    files: dict[str, tuple[bytes, int] | str] = {}
    odd: list[str] = []
    stack = [(os.fspath(base), prefix, True)]
    while stack:
        path, rel_dir, top = stack.pop()
        with os.scandir(path) as listing:
            for entry in listing:
                if top and entry.name in skip_top:
                    continue
                rel = rel_dir + entry.name
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, rel + "/", False))
                elif entry.is_file(follow_symlinks=False):
                    try:
                        files[rel] = sha256_file_digest(entry.path)
                    except OSError as exc:
                        files[rel] = str(exc.strerror or exc)
                else:
                    odd.append(rel)
    odd.sort()
    return Tree(files, odd)


def _utc_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
