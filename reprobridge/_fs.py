"""Writing files into a target repository: atomic, all-or-nothing, never through a symlink.

:func:`apply_changes` writes a set of files (and removes some) so that either all of them
change or none does: each file is written to a temporary sibling, fsynced and renamed into
place; the original bytes of every target are kept in memory and put back if any step
fails (a full disk, a permission error, an interrupt). A target whose parent chain leaves
the repository through a symlink is refused before anything is written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from reprobridge.errors import UnsafePathError, WriteError


@dataclass(frozen=True)
class Changes:
    """Paths (relative, sorted) that were, or would be, created, changed, left identical,
    or removed (:func:`planned_changes`)."""

    created: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


def planned_changes(root: Path, files: Mapping[str, bytes], remove: Iterable[str] = ()) -> Changes:
    """What :func:`apply_changes` does with the same arguments, without writing: each of
    ``files`` is created (no file at its path), changed (the file holds other bytes) or
    unchanged; each of ``remove`` that is a file is removed. Only reads; it does not check
    the paths (:func:`apply_changes` refuses an unsafe one before anything is written)."""
    created: list[str] = []
    changed: list[str] = []
    unchanged: list[str] = []
    for rel in sorted(files):
        path = root / rel
        old = path.read_bytes() if path.is_file() else None
        (created if old is None else unchanged if old == files[rel] else changed).append(rel)
    removed = [rel for rel in sorted(remove) if (root / rel).is_file()]
    return Changes(tuple(created), tuple(changed), tuple(unchanged), tuple(removed))


def safe_target(root: Path, rel: str) -> Path:
    """``root/rel`` after checking it stays inside ``root`` without following a symlink out.

    Raises UnsafePathError for absolute paths, ``..`` components, or any existing component
    that is a symlink.
    """
    parts = Path(rel).parts
    if Path(rel).is_absolute() or ".." in parts or not parts:
        raise UnsafePathError("is not a relative path inside the repository", path=rel)
    cur = root
    for part in parts:
        cur = cur / part
        if cur.is_symlink():
            raise UnsafePathError(
                f"{cur.relative_to(root)} is a symlink; rb does not write through symlinks",
                path=rel,
            )
    return cur


#: Opening for reading: never through a final symlink, and never waiting on a FIFO (opening a
#: FIFO for reading blocks until a writer comes, which in a bundle nobody ever will).
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_regular(path: Path) -> int:
    """A blocking read-only fd of the regular file at ``path``; OSError for a symlink
    (ELOOP), a FIFO, a device or a directory (EINVAL: "not a regular file"), and for a
    missing file. The file type is checked on the opened fd (``fstat``), so nothing can be
    swapped in between."""
    fd = os.open(path, _READ_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file at ``path``, opened with :func:`open_regular`."""
    with os.fdopen(open_regular(path), "rb") as fh:
        return fh.read()


def write_atomic(path: Path, data: bytes, *, mode: int = 0o644, sync_dir: bool = True) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same directory, fsync, rename,
    then fsync the directory so the new name survives a power cut too).

    ``sync_dir=False`` leaves the directory fsync to the caller, who fsyncs it once after
    several writes (the evidence bundle does, at a run's seal): the rename is as atomic (a
    reader, or a process killed at any point, sees the old bytes or the new ones) and the
    bytes are on disk, only the name is not durable until then."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if not sync_dir:
        return
    with contextlib.suppress(OSError):
        dirfd = os.open(path.parent, os.O_DIRECTORY)
        try:
            os.fsync(dirfd)
        finally:
            os.close(dirfd)


def fsync_together(paths: Iterable[Path], *, workers: int = 8) -> dict[Path, OSError]:
    """fsync every file or directory in ``paths``, several at once; the errors by path.

    At once because the filesystem then commits them together: a lone fsync is a journal
    commit and a device flush (1-8 ms each on a loaded machine, measured), and fsyncs
    waiting at the same time share one. ``workers`` threads at most (os.fsync releases
    the GIL)."""
    todo = list(dict.fromkeys(paths))
    errors: dict[Path, OSError] = {}
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                if not todo:
                    return
                path = todo.pop()
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                errors[path] = exc

    threads = [threading.Thread(target=work) for _ in range(min(workers, len(todo)) - 1)]
    for t in threads:
        t.start()
    work()
    for t in threads:
        t.join()
    return errors


def apply_changes(
    root: Path,
    files: Mapping[str, bytes],
    *,
    remove: tuple[str, ...] | list[str] = (),
    executable: frozenset[str] = frozenset(),
) -> Changes:
    """Write ``files`` and delete ``remove`` under ``root``, all or nothing.

    Raises UnsafePathError before any write, and WriteError (after restoring every file it
    touched and removing directories it created) when a write fails.
    """
    targets = {rel: safe_target(root, rel) for rel in [*files, *remove]}
    backups: dict[str, bytes | None] = {}
    created_dirs: list[Path] = []
    try:
        changes = planned_changes(root, files, remove)
        for rel in sorted((*changes.created, *changes.changed)):
            path = targets[rel]
            for parent in reversed(path.relative_to(root).parents[:-1]):
                d = root / parent
                if not d.exists():
                    d.mkdir()
                    created_dirs.append(d)
            backups[rel] = path.read_bytes() if rel in changes.changed else None
            write_atomic(path, files[rel], mode=0o755 if rel in executable else 0o644)
        for rel in changes.removed:
            path = targets[rel]
            backups[rel] = path.read_bytes()
            path.unlink()
    except (OSError, KeyboardInterrupt) as exc:
        _restore(root, backups, targets, created_dirs)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise WriteError(
            f"writing failed ({exc.strerror or exc}); every file was restored",
            path=getattr(exc, "filename", None) and os.path.relpath(str(exc.filename), root),
            hint="free some disk space or fix the permissions, then run the command again",
        ) from exc
    return changes


def _restore(
    root: Path, backups: dict[str, bytes | None], targets: dict[str, Path], created_dirs: list[Path]
) -> None:
    for rel, old in backups.items():
        path = targets[rel]
        with contextlib.suppress(OSError):
            if old is None:
                path.unlink(missing_ok=True)
            else:
                write_atomic(path, old)
    for d in reversed(created_dirs):
        with contextlib.suppress(OSError):
            d.rmdir()
