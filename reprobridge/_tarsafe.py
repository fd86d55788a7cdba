"""Tar extraction that is safe on every Python 3.11, with or without tarfile's filters.

tarfile's extraction filters (``filter=`` on ``extract``/``extractall``,
``tarfile.data_filter``, ``tarfile.FilterError``) arrived in 3.11.4; Debian 12's own Python
is 3.11.2. Nothing here relies on them:

* :func:`member_problem` is rb's own check of a member for trees that hold only regular
  files and directories (rb archives, the audited source);
* :func:`extract_all_data` extracts a whole archive (a ``git archive`` of the repository
  under audit, which may hold symlinks inside its tree) with the ``data`` filter's rules:
  ``tarfile.data_filter`` where it exists, else :func:`_fallback_data_filter`, a
  re-statement of the same rules (no absolute or escaping names, no links out of the
  destination, no devices or FIFOs, no setuid/setgid/sticky or group/other-write bits, no
  ownership). A refused member is reported to a callback and skipped. ``filter=`` is passed
  only where the keyword exists.
* :func:`write_plain` writes one regular-file or directory member, whose name the caller
  has already checked, with rb's own code: ``O_CREAT | O_EXCL | O_NOFOLLOW`` (never through
  a link, never over an existing file) and at most ``limit`` bytes, so a member cannot
  grow past the size the caller expects.
"""

from __future__ import annotations

import copy
import os
import stat
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath


class UnsafeMember(Exception):
    """A member that must not be extracted; ``str()`` says why."""


class MemberTooLarge(Exception):
    """A member produced more bytes than the limit it was written with."""


def is_git_metadata(name: str) -> bool:
    """Whether the path ``name`` has a ``.git`` component, in any case (``.GIT``, ``.Git``):
    a repository's metadata (its config and hooks name programs git runs), never part of
    an archive."""
    return "/.git/" in f"/{name.strip('/')}/".lower()


def member_problem(info: tarfile.TarInfo) -> str | None:
    """Why ``info`` may not be unpacked from an rb archive or a source tree, or None.

    Only regular files (not sparse) and directories with a relative name without ``..``,
    empty, ``.`` or NUL components or backslashes, without a ``.git`` component in any
    case (:func:`is_git_metadata`), and without setuid, setgid or sticky bits, pass. Shared by ``rb archive verify``, ``rb unpack`` and the archive builder.
    """
    name = info.name
    shown = repr(name)
    if not name or "\x00" in name:
        return f"member {shown}: empty name or NUL byte"
    if "\\" in name:
        return f"member {shown}: backslash in the name"
    if name.startswith("/") or PurePosixPath(name).is_absolute():
        return f"member {shown}: absolute path"
    parts = name.rstrip("/").split("/") if info.isdir() else name.split("/")
    if ".." in parts:
        return f"member {shown}: '..' leaves the target directory"
    if any(p in ("", ".") for p in parts):
        return f"member {shown}: empty or '.' path component"
    if is_git_metadata(name):
        return f"member {shown}: is git metadata (.git); archives never carry it"
    if info.issym() or info.islnk():
        return f"member {shown}: is a {'symlink' if info.issym() else 'hard link'} to {info.linkname!r}; archives hold regular files only"
    if info.ischr() or info.isblk():
        return f"member {shown}: is a device; archives hold regular files only"
    if info.isfifo():
        return f"member {shown}: is a FIFO; archives hold regular files only"
    if info.issparse():
        return f"member {shown}: is a sparse file; archives hold regular files only"
    if not (info.isreg() or info.isdir()):
        return f"member {shown}: type {info.type!r} is not a regular file or directory"
    if info.mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX):
        return f"member {shown}: setuid, setgid or sticky bit"
    return None


def has_filters() -> bool:
    """Whether this Python's tarfile has extraction filters (3.11.4+, 3.12+).

    Looked up at call time (not import time) so a test can take them away.
    """
    return hasattr(tarfile, "data_filter") and hasattr(tarfile, "FilterError")


def _inside(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it, component by component (both resolved):
    ``/x/dest-evil`` is not inside ``/x/dest``, which a string prefix would say it is."""
    return Path(path).is_relative_to(root)


def _fallback_data_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """The rules of tarfile's ``data`` filter (CPython 3.12) for a Python without it.

    Stricter in one place: an absolute name is refused instead of having its ``/``
    stripped. Returns a sanitised copy; raises UnsafeMember.
    """
    dest_real = os.path.realpath(dest)
    name = member.name
    if name.startswith("/") or PurePosixPath(name).is_absolute():
        raise UnsafeMember(f"{name!r} is an absolute path")
    target = os.path.realpath(Path(dest_real, name))
    if not _inside(target, dest_real):
        raise UnsafeMember(f"{name!r} would be extracted to {target!r}, outside the destination")
    if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
        raise UnsafeMember(f"{name!r} is a special file")
    if member.issym() or member.islnk():
        if PurePosixPath(member.linkname).is_absolute():
            raise UnsafeMember(f"{name!r} is a link to an absolute path")
        # A symlink's target is relative to its own directory, a hard link's to the root.
        base = PurePosixPath(name).parent if member.issym() else PurePosixPath()
        link_target = os.path.realpath(Path(dest_real, base, member.linkname))
        if not _inside(link_target, dest_real):
            raise UnsafeMember(f"{name!r} would link to {link_target!r}, outside the destination")
    out = copy.copy(member)
    mode = member.mode & 0o755
    if member.isreg() or member.islnk():
        if not mode & 0o100:
            mode &= ~0o111
        mode |= 0o600
    elif member.isdir():
        # 3.11.2's extract cannot skip the chmod (mode None), so a directory gets the mode
        # the data filter leaves it in effect: readable and searchable, owner-writable.
        mode = 0o755
    out.mode = mode
    # No ownership from the archive: as root, tarfile would chown to these ids.
    out.uid, out.gid, out.uname, out.gname = os.getuid(), os.getgid(), "", ""
    return out


def data_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """``member`` as the ``data`` filter would extract it into ``dest``, or UnsafeMember.

    An absolute name is refused (tarfile's filter would strip its ``/``) with or without
    tarfile's filters, so every Python extracts the same tree.
    """
    if member.name.startswith("/"):
        raise UnsafeMember(f"{member.name!r} is an absolute path")
    if has_filters():
        try:
            return tarfile.data_filter(member, dest)
        except tarfile.FilterError as exc:
            raise UnsafeMember(str(exc)) from exc
    return _fallback_data_filter(member, dest)


def extract_all_data(
    tar: tarfile.TarFile,
    dest: Path,
    on_refused: Callable[[tarfile.TarInfo, str], None],
) -> None:
    """Extract every member of ``tar`` into ``dest`` under the ``data`` filter's rules.

    Each member is filtered just before it is extracted (so links already written are
    taken into account); a refused one goes to ``on_refused(member, reason)`` and is
    skipped.
    """
    dest_s = os.fspath(dest)

    def checked() -> Iterator[tarfile.TarInfo]:
        for member in tar:
            try:
                yield data_filter(member, dest_s)
            except UnsafeMember as exc:
                on_refused(member, str(exc))

    if has_filters():
        # Already filtered above; "fully_trusted" only stops tarfile filtering twice (and
        # the 3.12+ warning about a missing filter).
        tar.extractall(dest_s, members=checked(), filter="fully_trusted")
    else:
        tar.extractall(dest_s, members=checked())


def write_plain(
    tar: tarfile.TarFile, info: tarfile.TarInfo, root: Path, *, limit: int | None = None
) -> Path:
    """Write the regular-file or directory member ``info`` under ``root``; its path.

    The caller has checked the name (relative, no ``..``) and the type; ``root`` holds
    nothing but what this function wrote, so parents are plain directories. A file is
    created new (``O_EXCL | O_NOFOLLOW``) with mode 0644, or 0755 when the member is
    executable by its owner, and the member's mtime; writing stops with MemberTooLarge
    past ``limit`` bytes. Raises UnsafeMember for any other member type and for a file that
    exists already (a duplicate member).
    """
    target = root / info.name.rstrip("/")
    if info.isdir():
        target.mkdir(mode=0o755, parents=True, exist_ok=True)
        return target
    if not info.isreg() or info.issparse():
        raise UnsafeMember(f"{info.name!r} is not a regular file or directory")
    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    src = tar.extractfile(info)
    if src is None:
        raise UnsafeMember(f"{info.name!r} has no data")
    mode = 0o755 if info.mode & 0o100 else 0o644
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(target, flags, 0o600)
    except FileExistsError as exc:
        raise UnsafeMember(f"{info.name!r} is already in the destination") from exc
    with os.fdopen(fd, "wb") as out:
        written = 0
        while chunk := src.read(1 << 20):
            written += len(chunk)
            if limit is not None and written > limit:
                raise MemberTooLarge(f"more than its declared {limit} bytes")
            out.write(chunk)
        os.fchmod(out.fileno(), mode)
    os.utime(target, (info.mtime, info.mtime), follow_symlinks=False)
    return target
