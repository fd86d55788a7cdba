"""Copying the files a run declares out of its workspace, without following a single link.

The workspace is written by the run, which is untrusted: any component of a declared path
may be a symlink the run planted (``a -> ../../..``), a FIFO that blocks an ``open``, or a
device. The auditor runs outside the sandbox, so it must never resolve such a path on the
host. Contract of :func:`collect_files`:

* the source is opened component by component from a directory fd of the workspace root
  (``openat``: ``os.open(part, O_DIRECTORY | O_NOFOLLOW, dir_fd=...)``), the last one with
  ``O_NOFOLLOW | O_NONBLOCK`` and accepted only when ``fstat`` says it is a regular file, so
  a symlink anywhere on the path, or a path that is not a plain file, is refused and never
  followed;
* the destination is ``dest / rel`` for the *normalised* ``rel`` (the schema admits only
  relative, normalised paths without ``..``; :func:`~reprobridge.manifest.schema.check_rel_path`
  is applied again here, so a caller cannot pass anything else), created inside the bundle
  directory ``dest`` that the auditor made;
* a declared *directory* is copied file by file the same way (``scandir`` on its fd,
  ``openat`` per entry): regular files only, links and special files skipped and reported,
  at most :data:`MAX_TREE_FILES` files;
* nothing raises for what the run left behind: every path that was not copied is returned
  with the reason, for the run's record.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from reprobridge.manifest.schema import check_rel_path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1 << 20


class Refused(Exception):
    """A declared path that is not copied; ``str()`` is the reason, one line."""


def _describe(dir_fd: int, name: str, shown: str) -> str:
    """Why ``name`` under ``dir_fd`` cannot be used, from an lstat that follows nothing."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISLNK(st.st_mode):
        return f"refused: {shown} is a symlink (never followed)"
    if stat.S_ISDIR(st.st_mode):
        return f"refused: {shown} is a directory"
    return f"refused: {shown} is not a regular file"


def open_confined(root: Path, rel: str, *, directories: bool = False) -> int:
    """A read-only fd of the regular file ``root/rel``, reached without following links.

    With ``directories``, a directory there is accepted too (the caller tells them apart
    with ``fstat``). ``root`` itself must not be a symlink either. Raises :class:`Refused`
    with the reason (``missing``, ``refused: a is a symlink (never followed)``, ...).
    """
    try:
        rel = check_rel_path(rel)
    except ValueError as exc:
        raise Refused(f"refused: {exc}") from None
    parts = [] if rel == "." else rel.split("/")
    if not parts:
        raise Refused("refused: not a file path")
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        raise Refused(f"refused: the workdir cannot be opened ({exc.strerror or exc})") from None
    try:
        for i, part in enumerate(parts):
            shown = "/".join(parts[: i + 1])
            last = i == len(parts) - 1
            try:
                nxt = os.open(part, _FILE_FLAGS if last else _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in {errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.EMLINK}:
                    raise Refused(_describe(fd, part, shown)) from None
                raise Refused(f"{shown} cannot be read ({exc.strerror or exc})") from None
            os.close(fd)
            fd = nxt
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISREG(mode) or (directories and stat.S_ISDIR(mode))):
            raise Refused(f"refused: {rel} is not a regular file")
        os.set_blocking(fd, True)
        result, fd = fd, -1
        return result
    finally:
        if fd >= 0:
            os.close(fd)


#: The reason's prefix for a directory copied without some of its entries.
PARTLY_COPIED = "partly copied"
#: Files copied at most from one declared output directory.
MAX_TREE_FILES = 10_000


def _copy_tree(dir_fd: int, target: Path, budget: list[int]) -> list[str]:
    """Copy the regular files under the directory ``dir_fd`` to ``target``, never following
    a link; returns what was skipped (links, special files, past :data:`MAX_TREE_FILES`)."""
    skipped: list[str] = []
    target.mkdir(exist_ok=True)
    with os.scandir(dir_fd) as entries:
        names = sorted(e.name for e in entries)
    for name in names:
        shown = f"{target.name}/{name}"
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            skipped.append(f"{shown} vanished")
            continue
        if stat.S_ISDIR(st.st_mode):
            sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            try:
                skipped += _copy_tree(sub, target / name, budget)
            finally:
                os.close(sub)
            continue
        if not stat.S_ISREG(st.st_mode):
            skipped.append(f"{shown} is a link or not a regular file (never followed)")
            continue
        if budget[0] <= 0:
            skipped.append(f"{shown}: more than {MAX_TREE_FILES} files")
            continue
        budget[0] -= 1
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the lstat
                skipped.append(f"{shown} is not a regular file")
                continue
            os.set_blocking(fd, True)
            with contextlib.suppress(FileNotFoundError):
                (target / name).unlink()
            _copy_fd(fd, target / name)
        finally:
            os.close(fd)
    return skipped


def _copy_fd(src_fd: int, target: Path) -> None:
    # O_EXCL|O_NOFOLLOW: the destination is new inside a directory the auditor created.
    out = os.open(
        target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
    )
    try:
        while chunk := os.read(src_fd, _CHUNK):
            view = memoryview(chunk)
            while view:
                view = view[os.write(out, view) :]
    finally:
        os.close(out)


def collect_files(workspace: Path, workdir: str, rels: Iterable[str], dest: Path) -> dict[str, str]:
    """Copy each ``workspace/workdir/rel`` to ``dest/rel`` (see the module docstring).

    ``workspace`` is the run's workspace root (the walk starts there, so a ``workdir`` that
    is a symlink is refused too), ``workdir`` the experiment's, ``dest`` a directory of the
    bundle. Returns ``{rel: reason}`` for every path not copied; a missing one is ``missing``.
    """
    refused: dict[str, str] = {}
    for rel in sorted(set(rels)):
        try:
            check_rel_path(rel)
            check_rel_path(workdir)
        except ValueError as exc:
            refused[rel] = f"refused: {exc}"
            continue
        try:
            src_fd = open_confined(
                workspace, rel if workdir == "." else f"{workdir}/{rel}", directories=True
            )
        except Refused as exc:
            refused[rel] = str(exc)
            continue
        target = dest / rel
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if stat.S_ISDIR(os.fstat(src_fd).st_mode):
                skipped = _copy_tree(src_fd, target, [MAX_TREE_FILES])
                if skipped:
                    refused[rel] = f"{PARTLY_COPIED}: {skipped[0]}" + (
                        f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
                    )
                continue
            with contextlib.suppress(FileNotFoundError):
                target.unlink()  # a re-run of a set-aside run; never write through it
            _copy_fd(src_fd, target)
        except OSError as exc:
            # e.g. outputs `a` and `a/b` both declared: `a` cannot be a file and a directory.
            refused[rel] = f"cannot be copied ({exc.strerror or exc})"
        finally:
            os.close(src_fd)
    return refused
