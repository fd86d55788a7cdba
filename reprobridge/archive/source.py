"""The audited commit's tree as archive members, streamed from ``git archive``.

Contract of :func:`source_stream`: a context whose value yields one
:class:`~reprobridge.archive.pack.Member` per directory and regular file of ``commit``,
in ``git archive``'s order (which is the archive writer's order, see
:func:`reprobridge.archive.pack._sort_key`), read from git's pipe as the writer asks for
them: nothing is extracted to disk and re-read (issue 14 measured that at 38x ``tar czf``
on 20k files, most of it in per-file system calls). A file's bytes are in the member
(``data``) when small, else a bounded reader over the pipe (``stream``) that the writer
must consume before asking for the next member; what it leaves unread is skipped.

Git runs hardened (:func:`reprobridge._proc.git_stream`) with the repository's filter
drivers switched off (:func:`reprobridge._proc.git_filter_overrides`): ``git archive``
would otherwise run the repository's ``filter.<name>.smudge`` commands on the host. A
symlink, hard link or any other non-regular entry in the commit is an
:class:`~reprobridge.errors.ArchiveError` naming it (an archive that silently dropped or
followed it would not be the tree that was audited), as is a name that is not a clean
relative path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from reprobridge import _proc
from reprobridge.archive.pack import BLOCK, CHUNK, Member
from reprobridge.errors import ArchiveError

_ZERO = b"\0" * BLOCK


class _Bounded:
    """At most ``size`` bytes of ``pipe``: the reader of one streamed member."""

    def __init__(self, pipe: IO[bytes], size: int) -> None:
        self._pipe = pipe
        self.left = size

    def read(self, n: int, /) -> bytes:
        data = self._pipe.read(min(n, self.left))
        self.left -= len(data)
        return data

    def drain(self) -> None:
        while self.left:
            if not self.read(CHUNK):
                raise ArchiveError("the `git archive` stream ended inside a file")


def _octal(field: bytes) -> int:
    text = field.split(b"\0", 1)[0].strip()
    return int(text, 8) if text else 0


def _pax(data: bytes) -> dict[str, str]:
    """The records of a PAX extended header (``"<len> key=value\\n"`` each)."""
    out: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        space = data.index(b" ", pos)
        length = int(data[pos:space])
        key, _, value = data[space + 1 : pos + length - 1].partition(b"=")
        out[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return out


def _read_exact(pipe: IO[bytes], n: int) -> bytes:
    data = pipe.read(n)
    if len(data) != n:
        raise ArchiveError("the `git archive` stream ended early")
    return data


def parse_tar(pipe: IO[bytes]) -> Iterator[Member]:
    """The members of the tar stream ``pipe`` (``git archive``'s ustar + PAX dialect).

    Global PAX headers (git's commit comment) are skipped; PAX ``path`` and ``size``
    records apply to the next entry. The stream is read to its end.
    """
    pax: dict[str, str] = {}
    while True:
        hdr = _read_exact(pipe, BLOCK)
        if hdr == _ZERO:
            while pipe.read(CHUNK):  # the end-of-archive blocks and record padding
                pass
            return
        typ = hdr[156:157]
        size = _octal(hdr[124:136])
        pad = -size % BLOCK
        if typ in (b"g", b"x"):
            data = _read_exact(pipe, size + pad)[:size]
            if typ == b"x":
                pax.update(_pax(data))
            continue
        name = hdr[0:100].split(b"\0", 1)[0]
        prefix = hdr[345:500].split(b"\0", 1)[0]
        path = (
            pax.pop("path")
            if "path" in pax
            else ((prefix + b"/" + name) if prefix else name).decode("utf-8", "surrogateescape")
        )
        if "size" in pax:
            size = int(pax.pop("size"))
            pad = -size % BLOCK
        pax.clear()
        if typ == b"5":
            yield Member(path.rstrip("/"), kind="dir")
            continue
        if typ not in (b"0", b"\0"):
            raise ArchiveError(
                "is a link or special file in the commit; archives hold regular files only",
                path=path,
                hint="replace the link by the file it points to and commit",
            )
        executable = bool(_octal(hdr[100:108]) & 0o100)
        if size < CHUNK:
            data = _read_exact(pipe, size + pad)
            yield Member(path, data=data[:size] if pad else data, executable=executable)
            continue
        reader = _Bounded(pipe, size)
        yield Member(path, stream=reader, size=size, executable=executable)
        reader.drain()
        _read_exact(pipe, pad)


@contextmanager
def source_stream(root: Path, commit: str) -> Iterator[Iterator[Member]]:
    """The members of ``commit``'s tree, streamed (see the module doc)."""
    safe = _proc.git_filter_overrides(root)
    with _proc.git_stream(root, *safe, "archive", "--format=tar", commit) as pipe:
        yield parse_tar(pipe)
