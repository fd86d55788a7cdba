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
* the copies of one run total at most ``max_bytes`` (the operator's ``max_output_mb``;
  never the manifest's say): a file that does not fit in what is left is not copied
  (``refused: too large ...``), and a file that grows past it while being copied is
  removed again;
* a sparse file (:func:`is_sparse`: a ``truncate``d 2 GB file holds no data but would be
  written out in full) is refused, never copied densely;
* nothing raises for what the run left behind: every path that was not copied is returned
  with the reason, for the run's record. A declared directory with a file refused as too
  large or sparse is refused as a whole (``refused: ...``, so its output check fails);
  one with only links or special files skipped is ``partly copied``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from reprobridge.manifest.schema import check_rel_path
from reprobridge.settings import DEFAULT_MAX_OUTPUT_MB

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1 << 20
_MB = 1 << 20
#: Files at most this long are never called sparse: a small file's block count says little
#: (inline data, a filesystem's preallocation), and copying it costs nothing.
SPARSE_MIN_BYTES = 1 << 20
#: The reason's prefix for a file left out because of its size or its holes (a declared
#: directory holding one is refused as a whole).
REFUSED = "refused: "


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


def is_sparse(fd: int, st: os.stat_result) -> bool:
    """Whether the regular file open at ``fd`` (``st``: its fstat) is sparse: longer than
    :data:`SPARSE_MIN_BYTES`, with less than half of its length allocated
    (``st_blocks * 512``) and a hole before its end (``SEEK_HOLE``; a filesystem that cannot
    say is taken at its block count). A file a compressing filesystem stores small, with no
    hole, is not sparse. The file offset is left at 0."""
    if st.st_size <= SPARSE_MIN_BYTES or st.st_blocks * 512 >= st.st_size // 2:
        return False
    try:
        return os.lseek(fd, 0, os.SEEK_HOLE) < st.st_size
    except OSError:
        return True
    finally:
        os.lseek(fd, 0, os.SEEK_SET)


@dataclass
class _Budget:
    """What one run's copies may still take: ``left`` bytes of ``cap_mb`` MiB."""

    cap_mb: int
    left: int

    def refusal(self, fd: int, shown: str) -> str | None:
        """Why the regular file open at ``fd`` is not copied (sparse, or longer than what is
        left), or None."""
        st = os.fstat(fd)
        if is_sparse(fd, st):
            return (
                f"{REFUSED}{shown} is a sparse file ({_mb(st.st_size)} long, "
                f"{_mb(st.st_blocks * 512)} allocated); sparse files are not copied"
            )
        if st.st_size > self.left:
            return f"{REFUSED}{shown} is too large ({_mb(st.st_size)}{self._cap_words()})"
        return None

    def _cap_words(self) -> str:
        return f"; a run's copied outputs may total {self.cap_mb} MB: max_output_mb"

    def copy(self, src_fd: int, target: Path, shown: str) -> str | None:
        """Copy ``src_fd`` to the new file ``target`` within the budget; the refusal
        instead (nothing left at ``target``) when it is sparse, too large, or grows past
        what is left while it is copied."""
        refused = self.refusal(src_fd, shown)
        if refused is not None:
            return refused
        written = _copy_fd(src_fd, target, self.left)
        if written > self.left:
            target.unlink()
            return f"{REFUSED}{shown} grew past the cap while copied{self._cap_words()}"
        self.left -= written
        return None


def _mb(size: int) -> str:
    return f"{size / _MB:.1f} MB"


def _copy_tree(dir_fd: int, target: Path, budget: list[int], size: _Budget) -> list[str]:
    """Copy the regular files under the directory ``dir_fd`` to ``target``, never following
    a link; returns what was skipped (links, special files, past :data:`MAX_TREE_FILES`;
    sparse or too large files, as :data:`REFUSED` reasons)."""
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
                skipped += _copy_tree(sub, target / name, budget, size)
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
            why = size.copy(fd, target / name, shown)
            if why is not None:
                skipped.append(why)
        finally:
            os.close(fd)
    return skipped


def _copy_fd(src_fd: int, target: Path, limit: int) -> int:
    """Copy ``src_fd`` to the new file ``target``; the bytes written, which stop past
    ``limit`` (at most one chunk more: the caller removes such a copy)."""
    # O_EXCL|O_NOFOLLOW: the destination is new inside a directory the auditor created.
    out = os.open(
        target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
    )
    written = 0
    try:
        while written <= limit and (chunk := os.read(src_fd, _CHUNK)):
            view = memoryview(chunk)
            written += len(view)
            while view:
                view = view[os.write(out, view) :]
    finally:
        os.close(out)
    return written


def collect_files(
    workspace: Path,
    workdir: str,
    rels: Iterable[str],
    dest: Path,
    *,
    max_bytes: int = DEFAULT_MAX_OUTPUT_MB * _MB,
) -> dict[str, str]:
    """Copy each ``workspace/workdir/rel`` to ``dest/rel`` (see the module docstring).

    ``workspace`` is the run's workspace root (the walk starts there, so a ``workdir`` that
    is a symlink is refused too), ``workdir`` the experiment's, ``dest`` a directory of the
    bundle, ``max_bytes`` what all the copies may total (whole MiB: the operator's cap).
    Returns ``{rel: reason}`` for every path not copied; a missing one is ``missing``.
    """
    size = _Budget(max_bytes // _MB, max_bytes)
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
                skipped = _copy_tree(src_fd, target, [MAX_TREE_FILES], size)
                # A file left out for its size fails the directory: judged on what was
                # copied, it could pass without the one file that mattered.
                skipped.sort(key=lambda s: not s.startswith(REFUSED))
                if skipped:
                    first = (
                        skipped[0]
                        if skipped[0].startswith(REFUSED)
                        else (f"{PARTLY_COPIED}: {skipped[0]}")
                    )
                    more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
                    refused[rel] = first + more
                continue
            with contextlib.suppress(FileNotFoundError):
                target.unlink()  # a re-run of a set-aside run; never write through it
            why = size.copy(src_fd, target, rel)
            if why is not None:
                refused[rel] = why
        except OSError as exc:
            # e.g. outputs `a` and `a/b` both declared: `a` cannot be a file and a directory.
            refused[rel] = f"cannot be copied ({exc.strerror or exc})"
        finally:
            os.close(src_fd)
    return refused
