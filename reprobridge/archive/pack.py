"""The deterministic archive writer: the same members give the same bytes, always.

Contract of :func:`write_archive`:

* members are written in byte order of their UTF-8 path (parent directories are added
  when missing), then the caller's *trailer* members in the order given; so the order in
  which files were created or listed never matters;
* every header is PAX (``tarfile``'s own encoder, so any tar reads it) with ``mtime`` the
  given epoch, ``uid = gid = 0``, empty user and group names, mode 0755 for directories
  and executables, 0644 for other files; only regular files and directories exist;
* the compressed stream carries no name and no time: gzip with ``MTIME = 0``, no FNAME,
  ``OS = 3`` (what ``gzip -n`` writes), or a zstd frame with a checksum and no dictionary;
  single-threaded compression, so the bytes do not depend on the number of cores;
* each file's bytes are hashed while they are written, so ``MANIFEST.json`` (built by the
  trailer from those hashes) describes exactly the archived bytes; a file that changes
  size while it is packed is an :class:`~reprobridge.errors.ArchiveError`;
* the output appears atomically (temporary sibling, fsync, rename) or not at all.

Speed: the GNU ``tar | gzip`` pipeline uses two cores. We do the same: this thread reads,
hashes and frames, a second thread compresses and writes (zlib, zstd and hashlib release
the GIL on large buffers). Small files are batched into 1 MiB chunks so the queue costs
nothing per file. Byte identity holds for one compressor library version; another zlib
(zlib-ng, say) may compress differently, which is why ``MANIFEST.json`` hashes members,
not the archive.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import queue
import stat
import struct
import tarfile
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple, Protocol

from reprobridge.errors import ArchiveError

Format = Literal["gz", "zst"]
#: The default format for paper supplements (see docs/archive.md for the measurement).
DEFAULT_FORMAT: Format = "gz"
GZIP_LEVEL = 6  # gzip's own default: what `gzip -n` produces, and what users compare with
ZSTD_LEVEL = 3  # zstd's own default
CHUNK = 1 << 20
BLOCK = 512
RECORD = 20 * BLOCK  # tar pads the archive to whole records (GNU tar's default blocking)

SDE_VAR = "SOURCE_DATE_EPOCH"


def parse_source_date_epoch(environ: Mapping[str, str] | None = None) -> int | None:
    """The ``SOURCE_DATE_EPOCH`` setting: an int, or None when unset or empty.

    Raises ArchiveError naming the variable unless it is a non-negative decimal integer
    (``abc``, ``-1``, ``1.5`` and ``0x10`` are refused; no silent fallback). Empty means
    "use the default" (the audited commit's time).
    """
    env = os.environ if environ is None else environ
    raw = env.get(SDE_VAR)
    if raw is None or raw.strip() == "":
        return None
    text = raw.strip()
    if not text.isascii() or not text.isdigit():
        raise ArchiveError(
            f"{SDE_VAR}={raw!r} is not a non-negative decimal integer (seconds since 1970)",
            hint=f"unset {SDE_VAR} to use the commit time, or set it to e.g. 1700000000",
        )
    value = int(text)
    if value >= 8**11:  # beyond ustar's 11 octal digits a PAX mtime would be needed; refuse
        raise ArchiveError(f"{SDE_VAR}={raw!r} is too large for a tar mtime")
    return value


class Reader(Protocol):
    """Where a streamed member's bytes come from (a pipe): ``read(n)`` returns at most
    ``n`` bytes, fewer only at the end."""

    def read(self, n: int, /) -> bytes: ...


@dataclass(frozen=True)
class Member:
    """One archive entry: a directory, or a file from ``source`` (disk), ``data`` (memory)
    or ``stream`` (``size`` bytes read once from a pipe, e.g. ``git archive``)."""

    path: str
    kind: Literal["file", "dir"] = "file"
    source: Path | None = None
    data: bytes | None = None
    executable: bool = False
    stream: Reader | None = None
    size: int = 0


class Entry(NamedTuple):
    """One member of an ordered stream (:func:`write_archive`'s ``ordered``: the entries of
    a ``git archive``), a directory or a file whose bytes are in ``data`` (small) or read
    once from ``stream`` (``size`` bytes). A tuple, not a :class:`Member`: a frozen
    dataclass cost ~1 us to build, per file of a 20k-file source tree."""

    path: str
    kind: Literal["file", "dir"]
    data: bytes | None = None
    executable: bool = False
    stream: Reader | None = None
    size: int = 0


class FileRecord(NamedTuple):
    """What was archived for one file: path, sha256 hex, size (a tuple: one per file)."""

    path: str
    sha256: str
    size: int


@dataclass(frozen=True)
class PackResult:
    """The written archive: where, its size in bytes, and every file record."""

    path: Path
    size: int
    files: list[FileRecord]


def check_member_path(path: str) -> str:
    """``path`` as a clean relative POSIX path, or ArchiveError (absolute, ``..``, empty,
    NUL, or a ``.git`` component in any case)."""
    # String checks only (no pathlib: this runs once per member). A path with no empty,
    # "." or ".." component is not absolute and is already in its normal form; with "/"
    # on both ends, those components are exactly "//", "/./" and "/../".
    wrapped = "/" + path + "/"
    if "//" in wrapped or "/./" in wrapped or "/../" in wrapped or "\x00" in path or "\\" in path:
        raise ArchiveError(f"member path {path!r} is not a clean relative path")
    if "/.git/" in wrapped.lower():
        # _tarsafe.is_git_metadata on a path already clean (inlined: once per member).
        raise ArchiveError(
            f"member path {path!r} is git metadata (.git); archives never carry it "
            "(its config and hooks name programs git would run where it is unpacked)"
        )
    return path


def _sort_key(path: str, kind: str = "file") -> bytes:
    """The archive order: UTF-8 bytes of the path, a directory's with a trailing ``/``.

    That is ``git archive``'s order (git sorts a tree's entries by name, a subtree's name
    with ``/`` appended), so a ``git archive`` stream merges into the archive as it comes,
    and a directory always precedes its contents."""
    raw = path.encode("utf-8", "surrogateescape")
    return raw + b"/" if kind == "dir" else raw


def _octal(value: int, width: int) -> bytes:
    return b"%0*o\0" % (width - 1, value)


@functools.lru_cache(maxsize=16)
def _ustar_parts(kind: str, mode: int, mtime: int) -> tuple[bytes, bytes, bytes, int]:
    """The fields of a ustar header that do not depend on the name or the size: mode,
    uid, gid (bytes 100-124), mtime (136-148), typeflag to the end (156-512), and the sum
    of their bytes plus eight spaces (the checksum field while it is computed)."""
    ids = _octal(mode, 8) + _octal(0, 8) + _octal(0, 8)
    mt = _octal(mtime, 12)
    # typeflag, linkname, "ustar\0" "00", uname, gname, devmajor, devminor, prefix, pad
    tail = (b"5" if kind == "dir" else b"0") + b"\0" * 100 + b"ustar\x0000" + b"\0" * 247
    return ids, mt, tail, sum(ids) + sum(mt) + sum(tail) + 8 * 0x20


_USTAR_SIZE = 8**11  # sizes from here on need a PAX size record


def _ustar(raw: bytes, size: int, parts: tuple[bytes, bytes, bytes, int]) -> bytes:
    """The ustar block of the short printable ASCII name ``raw`` (under 100 bytes), with
    ``parts`` from :func:`_ustar_parts`."""
    ids, mt, tail, fixed = parts
    size_field = b"%011o\0" % size
    # Only the name and the size vary: sum those bytes, not the whole block (2.5x faster
    # a header; one per file of a source tree).
    chksum = b"%06o\0 " % (fixed + sum(raw) + sum(size_field))
    return b"".join((raw.ljust(100, b"\0"), ids, size_field, mt, chksum, tail))


def _header(path: str, *, kind: str, size: int, mode: int, mtime: int) -> bytes:
    """One tar header. Short ASCII names get a plain ustar block built here (tarfile's
    PAX encoder costs ~40 us a member, most of a small file's time); anything else goes
    through tarfile's PAX encoder. Both give the bytes tarfile itself would write (a unit
    test compares them)."""
    name = path + "/" if kind == "dir" else path
    if len(name) < 100 and name.isascii() and name.isprintable() and size < _USTAR_SIZE:
        size = size if kind == "file" else 0
        return _ustar(name.encode("ascii"), size, _ustar_parts(kind, mode, mtime))
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if kind == "dir" else tarfile.REGTYPE
    info.size = size if kind == "file" else 0
    info.mode = mode
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


class _Compressor(Protocol):
    def compress(self, data: bytes | bytearray, /) -> bytes: ...
    def flush(self) -> bytes: ...


class _Gzip:
    """RFC 1952 by hand: zlib's raw deflate between a fixed header and a CRC trailer."""

    # ID1 ID2 CM=deflate FLG=0 MTIME=0 XFL=0 OS=3 (Unix), exactly what `gzip -n -6` writes.
    HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"

    def __init__(self, level: int) -> None:
        self._z = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS, 9)
        self._crc = 0
        self._size = 0
        self._started = False

    def compress(self, data: bytes | bytearray) -> bytes:
        self._crc = zlib.crc32(data, self._crc)
        self._size += len(data)
        out = self._z.compress(data)
        if not self._started:
            self._started = True
            return self.HEADER + out
        return out

    def flush(self) -> bytes:
        head = b"" if self._started else self.HEADER
        return head + self._z.flush() + struct.pack("<II", self._crc, self._size & 0xFFFFFFFF)


def _compressor(fmt: Format) -> _Compressor:
    if fmt == "gz":
        return _Gzip(GZIP_LEVEL)
    if fmt == "zst":
        try:
            import zstandard
        except ImportError as exc:
            raise ArchiveError(
                "the zst format needs the `zstandard` package",
                hint="pip install zstandard, or use --format gz",
            ) from exc
        # threads=0: one thread, so the frame does not depend on the machine's core count.
        cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True, threads=0)
        compressor: _Compressor = cctx.compressobj()
        return compressor
    raise ArchiveError(f"unknown archive format {fmt!r} (gz or zst)")


class _Sink:
    """The compress-and-write thread; ``put`` hands it framed tar bytes."""

    def __init__(self, fh: _BinaryWriter, fmt: Format) -> None:
        self._fh = fh
        self._comp = _compressor(fmt)
        self._q: queue.Queue[bytes | bytearray | None] = queue.Queue(maxsize=8)
        self._error: BaseException | None = None
        self.size = 0
        self._thread = threading.Thread(target=self._work, name="rb-archive-compress", daemon=True)
        self._thread.start()

    def _write(self, data: bytes) -> None:
        if data:
            self.size += len(data)
            self._fh.write(data)

    def _work(self) -> None:
        try:
            while True:
                item = self._q.get()
                if item is None:
                    self._write(self._comp.flush())
                    return
                self._write(self._comp.compress(item))
        except BaseException as exc:  # re-raised in the producer by put()/close()
            self._error = exc
            # Drain so a blocked producer wakes up and sees the error.
            with contextlib.suppress(queue.Empty):
                while True:
                    self._q.get_nowait()

    def put(self, data: bytes | bytearray) -> None:
        if self._error is not None:
            raise self._error
        self._q.put(data)

    def close(self) -> None:
        self._q.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def abort(self) -> None:
        # Empty the queue first so the sentinel always fits and the thread ends.
        with contextlib.suppress(queue.Empty):
            while True:
                self._q.get_nowait()
        with contextlib.suppress(queue.Full):
            self._q.put_nowait(None)


class _BinaryWriter(Protocol):
    def write(self, data: bytes, /) -> int: ...


class _Framer:
    """Batches tar bytes into ~1 MiB chunks for the sink.

    A full batch is handed over as the bytearray itself and a new one started: copying it
    out (``bytes(buf)``) and clearing it made the allocator give back and fault in 1 MiB
    per chunk, ~4 us per small file of a source tree. The sink only reads it."""

    def __init__(self, sink: _Sink) -> None:
        self._sink = sink
        self._buf = bytearray()
        self.offset = 0

    def write(self, data: bytes) -> None:
        self.offset += len(data)
        if len(data) >= CHUNK:
            # Big chunks go straight through: no copy into the batch buffer.
            self.flush()
            self._sink.put(data)
            return
        self._buf += data
        if len(self._buf) >= CHUNK:
            self._sink.put(self._buf)
            self._buf = bytearray()

    def flush(self) -> None:
        if self._buf:
            self._sink.put(self._buf)
            self._buf = bytearray()


def _with_parents(members: Iterable[Member]) -> list[Member]:
    by_path: dict[str, Member] = {}
    for m in members:
        path = check_member_path(m.path)
        if path in by_path:
            raise ArchiveError(f"two members named {path!r}")
        by_path[path] = m if path == m.path else dataclasses.replace(m, path=path)
    for path in list(by_path):
        parent = path
        while "/" in parent:
            parent = parent.rsplit("/", 1)[0]
            existing = by_path.get(parent)
            if existing is None:
                by_path[parent] = Member(parent, kind="dir")
            elif existing.kind != "dir":
                raise ArchiveError(f"{parent!r} is a file and also a directory of {path!r}")
            else:
                break  # its own parents were added when it was seen
    return sorted(by_path.values(), key=lambda m: _sort_key(m.path, m.kind))


def _write_merged(
    framer: _Framer,
    listed: list[Member],
    ordered: Iterable[Entry],
    mtime: int,
    records: list[FileRecord],
    names: dict[str, bool],
) -> None:
    """Write ``listed`` (sorted by :func:`_with_parents`) and ``ordered`` (already in archive
    order, consumed lazily: a pipe) as one sequence in archive order, appending each file's
    record to ``records`` and each path to ``names`` (True for a directory). For a path in
    both, ``listed`` wins (rb's artifacts over the committed source). A missing parent
    directory of an ``ordered`` entry is added; a file that is also a directory, an entry
    out of order or twice, and an unclean path are ArchiveErrors.

    One loop for the merge and the writing of ``ordered``'s small files (header, bytes,
    hash, record): on a source tree of 20k files the per-file Python is most of rb's own
    time (benchmarks/log-2026-11.md), so nothing here is a call that need not be one."""
    keys = [_sort_key(m.path, m.kind) for m in listed]
    i, n = 0, len(listed)
    prev = b""
    write = framer.write
    sha256 = hashlib.sha256
    plain = _ustar_parts("file", 0o644, mtime)
    exe = _ustar_parts("file", 0o755, mtime)
    zeros = b"\0" * BLOCK

    def put(m: Member) -> None:
        names[m.path] = m.kind == "dir"
        if m.kind == "dir":
            write(_header(m.path, kind="dir", size=0, mode=0o755, mtime=mtime))
        else:
            records.append(_write_file(framer, m, mtime))

    for path, kind, data, executable, stream, size in ordered:
        check_member_path(path)
        raw = path.encode("utf-8", "surrogateescape")
        key = raw + b"/" if kind == "dir" else raw
        if key <= prev:
            raise ArchiveError(f"streamed member {path!r} is out of order (or twice)")
        prev = key
        if i < n:
            while i < n and keys[i] < key:
                put(listed[i])
                i += 1
            if i < n and listed[i].path == path:
                if listed[i].kind != kind:
                    raise ArchiveError(
                        f"{path!r} is a file in one source and a directory in another"
                    )
                continue  # the listed member wins; it is written by the loop above next
        if path in names:
            raise ArchiveError(f"{path!r} is a file in one source and a directory in another")
        parent = path.rpartition("/")[0]
        if parent and not names.get(parent):
            missing: list[str] = []
            while parent and parent not in names:
                missing.append(parent)
                parent = parent.rpartition("/")[0]
            if parent and not names[parent]:
                raise ArchiveError(f"{parent!r} is a file and also a directory of {path!r}")
            for d in reversed(missing):
                put(Member(d, kind="dir"))
        names[path] = kind == "dir"
        if kind == "dir":
            write(_header(path, kind="dir", size=0, mode=0o755, mtime=mtime))
        elif data is not None:
            size = len(data)
            if len(raw) < 100 and size < _USTAR_SIZE and raw.isascii() and path.isprintable():
                header = _ustar(raw, size, exe if executable else plain)
            else:
                mode = 0o755 if executable else 0o644
                header = _header(path, kind="file", size=size, mode=mode, mtime=mtime)
            write(header + data + zeros[: -size % BLOCK])
            records.append(FileRecord(path, sha256(data).hexdigest(), size))
        else:
            assert stream is not None
            records.append(_write_stream(framer, path, stream, size, executable, mtime))
    while i < n:
        m = listed[i]
        parent = m.path.rpartition("/")[0]
        if m.path in names or (parent and names.get(parent) is False):
            raise ArchiveError(f"{m.path!r}: a file and a directory of one name")
        put(m)
        i += 1


# O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever; the
# fstat that follows refuses anything that is not a regular file (no effect on their reads).
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _write_file(framer: _Framer, m: Member, mtime: int) -> FileRecord:
    # Plain os.* calls, not file objects: for the many small files of a source tree the
    # per-file Python overhead is the whole cost (see benchmarks/archive.py).
    if m.stream is not None:
        return _write_stream(framer, m.path, m.stream, m.size, m.executable, mtime)
    if m.data is not None:
        data = m.data
        framer.write(_header(m.path, kind="file", size=len(data), mode=_mode(m), mtime=mtime))
        framer.write(data)
        size = len(data)
        digest = hashlib.sha256(data).hexdigest()
    else:
        assert m.source is not None
        try:
            fd = os.open(m.source, _OPEN_FLAGS)
        except OSError as exc:
            raise ArchiveError(
                f"cannot open {m.path} ({exc.strerror}; links are not archived)",
                path=str(m.source),
            ) from exc
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ArchiveError(
                    "is not a regular file (links, FIFOs and devices are not archived)",
                    path=str(m.source),
                )
            size = st.st_size
            header = _header(m.path, kind="file", size=size, mode=_mode(m), mtime=mtime)
            if size < CHUNK:
                # One read of size + 1 bytes: exactly size means it neither grew nor shrank.
                data = os.read(fd, size + 1)
                if len(data) == size:
                    framer.write(header + data + b"\0" * (-size % BLOCK))
                    return FileRecord(m.path, hashlib.sha256(data).hexdigest(), size)
                os.lseek(fd, 0, os.SEEK_SET)
            framer.write(header)
            h = hashlib.sha256()
            left = size
            while True:
                # Ask for one byte more than is left: a file that grew shows up here.
                chunk = os.read(fd, min(CHUNK, left + 1))
                if len(chunk) > left:
                    raise ArchiveError("grew while it was being archived", path=str(m.source))
                if not chunk:
                    if left:
                        raise ArchiveError("shrank while it was being archived", path=str(m.source))
                    break
                h.update(chunk)
                framer.write(chunk)
                left -= len(chunk)
                if not left and size >= CHUNK:
                    if os.read(fd, 1):
                        raise ArchiveError("grew while it was being archived", path=str(m.source))
                    break
            digest = h.hexdigest()
        finally:
            os.close(fd)
    pad = -size % BLOCK
    if pad:
        framer.write(b"\0" * pad)
    return FileRecord(m.path, digest, size)


def _write_stream(
    framer: _Framer, path: str, stream: Reader, size: int, executable: bool, mtime: int
) -> FileRecord:
    mode = 0o755 if executable else 0o644
    framer.write(_header(path, kind="file", size=size, mode=mode, mtime=mtime))
    h = hashlib.sha256()
    left = size
    while left:
        chunk = stream.read(min(CHUNK, left))
        if not chunk:
            raise ArchiveError(f"the stream ended {left} bytes short", path=path)
        h.update(chunk)
        framer.write(chunk)
        left -= len(chunk)
    if -size % BLOCK:
        framer.write(b"\0" * (-size % BLOCK))
    return FileRecord(path, h.hexdigest(), size)


def _mode(m: Member) -> int:
    return 0o755 if m.kind == "dir" or m.executable else 0o644


def write_archive(
    members: Iterable[Member],
    out: Path,
    *,
    mtime: int,
    fmt: Format = DEFAULT_FORMAT,
    trailer: Callable[[list[FileRecord]], Sequence[Member]] | None = None,
    ordered: Iterable[Entry] = (),
    max_size: int | None = None,
) -> PackResult:
    """Write ``members`` (sorted) then ``trailer(records)`` to ``out``; see the module doc.

    ``ordered`` are more members (:class:`Entry` tuples) already in archive order
    (:func:`_sort_key`), read lazily and merged in (a ``git archive`` stream: never extracted to disk); for a path
    in both, ``members`` wins. ``trailer`` receives the records of every file written so
    far and returns members to append in its order (the RO-Crate, ``MANIFEST.json``, a
    signature); their own records are added to the result too. With ``max_size``, a
    compressed archive larger than that many bytes is an ArchiveError. ``out`` is
    replaced atomically; on any error it is left as it was and no temporary file remains.
    """
    listed = _with_parents(members)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    records: list[FileRecord] = []
    try:
        with os.fdopen(fd, "wb") as fh:
            sink = _Sink(fh, fmt)
            try:
                framer = _Framer(sink)
                names: dict[str, bool] = {}
                _write_merged(framer, listed, ordered, mtime, records, names)
                if trailer is not None:
                    for m in trailer(list(records)):
                        path = check_member_path(m.path)
                        if path in names or "/" in path or m.kind != "file":
                            raise ArchiveError(
                                f"trailer member {path!r} is not a new top-level file"
                            )
                        names[path] = False
                        records.append(_write_file(framer, m, mtime))
                framer.write(b"\0" * (2 * BLOCK))
                framer.write(b"\0" * (-framer.offset % RECORD))
                framer.flush()
                sink.close()
                if max_size is not None and sink.size > max_size:
                    raise ArchiveError(
                        f"the archive would be {sink.size} bytes, more than --max-size "
                        f"({max_size} bytes); nothing was written",
                        path=str(out),
                        hint="leave out wheels, data or evidence, or raise --max-size",
                    )
            except BaseException:
                sink.abort()
                raise
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return PackResult(out, sink.size, records)
