"""The audited commit's tree as archive members, streamed from ``git archive``.

Contract of :func:`source_stream`: a context whose value yields one
:class:`~reprobridge.archive.pack.Entry` per directory and regular file of ``commit``,
in ``git archive``'s order (which is the archive writer's order, see
:func:`reprobridge.archive.pack._sort_key`), read from git's pipe as the writer asks for
them: nothing is extracted to disk and re-read (measured at 38x ``tar czf``
on 20k files, most of it in per-file system calls). A file's bytes are in the entry
(``data``) when small, else a bounded reader over the pipe (``stream``) that the writer
must consume before asking for the next member; what it leaves unread is skipped.

Git runs hardened (:func:`reprobridge._proc.git_stream`) with the repository's filter
drivers switched off (:func:`reprobridge._proc.git_driver_overrides`): ``git archive``
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
from reprobridge.archive.pack import BLOCK, CHUNK, Entry
from reprobridge.errors import ArchiveError

_ZERO = b"\0" * BLOCK


class _Bounded:
    """At most ``size`` bytes: first ``head`` (what the parser had already read), then
    ``pipe``; the reader of one streamed member."""

    def __init__(self, pipe: IO[bytes], size: int, head: bytes) -> None:
        self._pipe = pipe
        self._head = head
        self.left = size

    def read(self, n: int, /) -> bytes:
        n = min(n, self.left)
        data = self._head[:n]
        self._head = self._head[n:]
        if len(data) < n:
            data += self._pipe.read(n - len(data))
        self.left -= len(data)
        return data

    def drain(self) -> None:
        while self.left:
            if not self.read(CHUNK):
                raise ArchiveError("the `git archive` stream ended inside a file")


def _octal(field: bytes) -> int:
    text = field.split(b"\0", 1)[0].strip()
    try:
        return int(text, 8) if text else 0
    except ValueError:
        raise ArchiveError(f"the `git archive` stream has a bad number field {field!r}") from None


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


def _fill(pipe: IO[bytes], buf: bytes, pos: int, n: int) -> bytes:
    """``buf[pos:]`` plus enough of ``pipe`` to hold at least ``n`` bytes (read in chunks
    of at least CHUNK, so a header or a small file is a slice, not a read). A ``pos``
    past the end of ``buf`` (a directory entry's data, skipped unread) is skipped in
    ``pipe`` first."""
    skip = pos - len(buf)
    while skip > 0:
        data = pipe.read(min(skip, CHUNK))
        if not data:
            raise ArchiveError("the `git archive` stream ended early")
        skip -= len(data)
    parts = [buf[pos:]]
    have = len(parts[0])
    while have < n:
        data = pipe.read(max(n - have, CHUNK))
        if not data:
            raise ArchiveError("the `git archive` stream ended early")
        parts.append(data)
        have += len(data)
    return b"".join(parts)


def parse_tar(pipe: IO[bytes]) -> Iterator[Entry]:
    """The entries of the tar stream ``pipe`` (``git archive``'s ustar + PAX dialect).

    Global PAX headers (git's commit comment) are skipped; PAX ``path`` and ``size``
    records apply to the next entry. The stream is read to its end. Files under CHUNK
    come with their bytes; larger ones with a reader that must be consumed before the
    next entry is asked for (what is left unread is skipped).

    The stream is read in chunks and parsed by offset: one read and a dozen slices per
    header made this parser the largest part of packing a 20k-file tree."""
    buf = b""
    pos = 0
    pax: dict[str, str] = {}
    while True:
        if len(buf) - pos < BLOCK:
            buf, pos = _fill(pipe, buf, pos, BLOCK), 0
        end = pos + BLOCK
        if not buf[pos] and buf[pos:end] == _ZERO:
            while pipe.read(CHUNK):  # the end-of-archive blocks and record padding
                pass
            return
        typ = buf[pos + 156]
        if pax and "size" in pax and typ != 0x67 and typ != 0x78:
            size = int(pax["size"])  # the ustar field may be 0 or base-256 then
        else:
            try:  # digits and a NUL, as git and tarfile write them; else the careful parse
                size = int(buf[pos + 124 : pos + 135], 8)
            except ValueError:
                size = _octal(buf[pos + 124 : pos + 136])
        if size < 0:  # int() takes a sign; the offsets below must only move forward
            raise ArchiveError("the `git archive` stream has an entry of negative size")
        if typ == 0x67 or typ == 0x78:  # g (global PAX: git's commit id), x (next entry)
            stored = size + (-size % BLOCK)
            if len(buf) - end < stored:
                buf, end = _fill(pipe, buf, end, stored), 0
            if typ == 0x78:
                pax.update(_pax(buf[end : end + size]))
            pos = end + stored
            continue
        stored = size + (-size % BLOCK)
        nul = buf.find(b"\0", pos, pos + 100)
        name = buf[pos : nul if nul >= 0 else pos + 100]
        if "path" in pax:
            path = pax["path"]
        else:
            if buf[pos + 345]:
                nul = buf.find(b"\0", pos + 345, pos + 500)
                name = buf[pos + 345 : nul if nul >= 0 else pos + 500] + b"/" + name
            path = name.decode("utf-8", "surrogateescape")
        if pax:
            pax.clear()
        if typ == 0x35:  # 5: directory
            yield Entry(path.rstrip("/"), "dir")
            pos = end + stored
            continue
        if typ != 0x30 and typ != 0:  # 0 or NUL: regular file
            raise ArchiveError(
                "is a link or special file in the commit; archives hold regular files only",
                path=path,
                hint="replace the link by the file it points to and commit",
            )
        try:
            executable = bool(int(buf[pos + 100 : pos + 107], 8) & 0o100)
        except ValueError:
            executable = bool(_octal(buf[pos + 100 : pos + 108]) & 0o100)
        if size < CHUNK:
            if len(buf) - end < stored:
                buf, end = _fill(pipe, buf, end, stored), 0
            yield Entry(path, "file", buf[end : end + size], executable)
            pos = end + stored
            continue
        head = buf[end : end + size]
        reader = _Bounded(pipe, size, head)
        buf, pos = buf[end + len(head) :], 0
        yield Entry(path, "file", None, executable, reader, size)
        reader.drain()
        pad = stored - size
        if len(buf) - pos < pad:
            buf, pos = _fill(pipe, buf, pos, pad), 0
        pos += pad


@contextmanager
def source_stream(root: Path, commit: str) -> Iterator[Iterator[Entry]]:
    """The members of ``commit``'s tree, streamed (see the module doc)."""
    with _proc.git_stream(root, "archive", "--format=tar", commit) as pipe:
        yield parse_tar(pipe)
