"""The streamed source's fast path (issue 14): the chunked tar parser against tarfile, the
merge of an ordered stream with rb's own members (its safety rules), MANIFEST.json's
direct rendering against canonical_json, and the source size from git's listing."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest
from archive_helpers import read_members

from reprobridge.archive.build import manifest_json
from reprobridge.archive.pack import CHUNK, Entry, FileRecord, Member, write_archive
from reprobridge.archive.source import parse_tar
from reprobridge.archive.supplement import source_size
from reprobridge.errors import ArchiveError
from reprobridge.evidence.dsse import canonical_json

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false"]


class _Trickle:
    """A pipe that returns at most ``step`` bytes a read: every header and file then
    straddles the parser's refills."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data = io.BytesIO(data)
        self._step = step

    def read(self, n: int = -1, /) -> bytes:
        return self._data.read(self._step if n < 0 else min(n, self._step))


def _tar(fmt: int) -> tuple[bytes, dict[str, tuple[bytes | None, bool]]]:
    """A tar in ``fmt`` with directories, small, empty, chunk-sized and long-named files;
    and what each entry holds (None for a directory) and whether it is executable."""
    want: dict[str, tuple[bytes | None, bool]] = {}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for name in ("d", "d/" + "p" * 60):
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
            want[name] = (None, False)
        files = {
            "d/a.txt": (b"alpha\n", False),
            "d/empty": (b"", False),
            "d/run.sh": (b"#!/bin/sh\n", True),
            "d/block": (b"b" * 512, False),
            "d/below": (bytes(range(256)) * (CHUNK // 256) + b"x", False),  # CHUNK + 1
            "d/at": (b"c" * CHUNK, False),
            "d/under": (b"u" * (CHUNK - 1), False),
            # Over 100 bytes: ustar's prefix field (USTAR_FORMAT), a PAX path (PAX_FORMAT).
            "d/" + "p" * 60 + "/" + "q" * 70 + ".py": (b"long\n", False),
        }
        if fmt == tarfile.PAX_FORMAT:
            files["d/\u00e9t\u00e9-" + "n" * 120] = (b"pax path\n", False)
        for name, (data, exe) in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o775 if exe else 0o664
            tar.addfile(info, io.BytesIO(data))
            want[name] = (data, exe)
    return buf.getvalue(), want


@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT])
@pytest.mark.parametrize("step", [1 << 30, 4096, 700])
def test_parse_tar_matches_tarfile_across_reads(fmt: int, step: int) -> None:
    data, want = _tar(fmt)
    got: dict[str, tuple[bytes | None, bool]] = {}
    for e in parse_tar(_Trickle(data, step)):
        if e.kind == "dir":
            got[e.path] = (None, False)
        elif e.data is not None:
            got[e.path] = (e.data, e.executable)
        else:
            assert e.stream is not None and e.size >= CHUNK
            # Read it in odd pieces: the reader serves the parser's buffer, then the pipe.
            parts = []
            while chunk := e.stream.read(333_333):
                parts.append(chunk)
            got[e.path] = (b"".join(parts), e.executable)
    assert got == want


def test_parse_tar_skips_what_a_reader_leaves_unread() -> None:
    data, want = _tar(tarfile.PAX_FORMAT)
    paths = [e.path for e in parse_tar(_Trickle(data, 5000))]  # no stream is read
    assert paths == list(want)


def test_parse_tar_truncated_stream_is_an_archive_error() -> None:
    data, _ = _tar(tarfile.USTAR_FORMAT)
    cut = data[: len(data) // 2]
    with pytest.raises(ArchiveError, match="ended"):
        for e in parse_tar(io.BytesIO(cut)):
            if e.stream is not None:
                e.stream.read(CHUNK * 2)


def _pack(
    tmp_path: Path, listed: list[Member], ordered: list[Entry], name: str = "o.tar.gz"
) -> Path:
    out = tmp_path / name
    write_archive(listed, out, mtime=7, ordered=iter(ordered))
    return out


def test_ordered_stream_merges_with_listed_members(tmp_path: Path) -> None:
    ordered = [
        Entry("a.txt", "file", b"source a\n"),
        Entry("b", "dir"),
        Entry("b/run.sh", "file", b"#!/bin/sh\n", executable=True),
        # No "c" directory entry: the writer adds the missing parent.
        Entry("c/x.py", "file", b"x\n"),
        Entry("reprobridge.toml", "file", b"committed\n"),
    ]
    listed = [Member("reprobridge.toml", data=b"rb's own\n"), Member("b/z.txt", data=b"z\n")]
    out = _pack(tmp_path, listed, ordered)
    with tarfile.open(out) as tar:
        infos = tar.getmembers()
    names = [i.name for i in infos]
    assert names == ["a.txt", "b", "b/run.sh", "b/z.txt", "c", "c/x.py", "reprobridge.toml"]
    assert {i.name: i.mode for i in infos}["b/run.sh"] == 0o755
    assert all(i.mtime == 7 and i.uname == "" for i in infos)
    members = read_members(out)
    assert members["reprobridge.toml"] == b"rb's own\n"  # the listed member wins
    assert members["c/x.py"] == b"x\n"


@pytest.mark.parametrize(
    ("listed", "ordered", "message"),
    [
        # out of order, or twice
        ([], [Entry("b.txt", "file", b""), Entry("a.txt", "file", b"")], "out of order"),
        ([], [Entry("a.txt", "file", b""), Entry("a.txt", "file", b"")], "out of order"),
        # a file in one source, a directory in the other (both orders of appearance)
        ([Member("a/x", data=b"")], [Entry("a", "file", b"")], "directory in another"),
        ([Member("a", data=b"")], [Entry("a", "dir")], "directory in another"),
        ([Member("a", data=b"")], [Entry("a/x", "file", b"")], "file and also a directory"),
        # a streamed file that is the parent of a later streamed file
        ([], [Entry("a", "file", b""), Entry("a/x", "file", b"")], "file and also a directory"),
    ],
)
def test_ordered_stream_conflicts_are_refused(
    tmp_path: Path, listed: list[Member], ordered: list[Entry], message: str
) -> None:
    with pytest.raises(ArchiveError, match=message):
        _pack(tmp_path, listed, ordered)
    assert not (tmp_path / "o.tar.gz").exists()


@pytest.mark.parametrize("bad", ["/abs", "../x", "a/../b", "a//b", "./a", "a/.", "a/", "", "a\\b"])
def test_ordered_stream_unclean_paths_are_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ArchiveError, match="clean relative path"):
        _pack(tmp_path, [], [Entry(bad, "file", b"x")])


def test_ordered_stream_long_and_non_ascii_names_are_pax(tmp_path: Path) -> None:
    long = "d/" + "n" * 150 + ".txt"
    ordered = [
        Entry("d", "dir"),
        Entry(long, "file", b"long\n"),
        Entry("d/\u00e9t\u00e9", "file", b"accent\n", executable=True),
    ]
    out = _pack(tmp_path, [], ordered)
    with tarfile.open(out) as tar:
        infos = {i.name: i for i in tar.getmembers()}
    assert infos[long].size == 5 and infos["d/\u00e9t\u00e9"].mode == 0o755
    assert read_members(out)["d/\u00e9t\u00e9"] == b"accent\n"


def test_manifest_json_equals_canonical_json() -> None:
    names = ["a.txt", 'q"uote\\back', "tab\there", "\u00e9t\u00e9/\u4e2d.py", "ctl\x01\x7f", "z"]
    files = [FileRecord(n, f"{i:064x}", i * 1000) for i, n in enumerate(names)]
    doc = {
        "format": "rb-archive/1",
        "commit": "c" * 40,
        "audits": [],
        "with_source": True,
        "offline": {"wheels": {"files": ["x.whl"], "missing": []}},
        "zzz": {"files": []},  # the same key, deeper: not the one replaced
    }
    want = canonical_json(
        {**doc, "files": [{"path": f.path, "sha256": f.sha256, "size": f.size} for f in files]}
    )
    assert manifest_json(doc, files) == want
    assert manifest_json(doc, []) == canonical_json({**doc, "files": []})


def test_source_size_counts_blobs_only(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / "sub dir").mkdir(parents=True)
    (root / "a.txt").write_bytes(b"12345")
    (root / "sub dir" / "tab\tname 100644 blob").write_bytes(b"x" * 1000)
    (root / "link").symlink_to("a.txt")  # a blob too (its target), as git stores it
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*GIT, "-C", str(root), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(root), "commit", "-qm", "c"], check=True)
    assert source_size(root, "HEAD") == (3, 5 + 1000 + len("a.txt"))


def _header(name: str, *, typ: bytes = b"0", size: bytes = b"%011o" % 0) -> bytes:
    """A ustar header block with a raw size field (11 bytes) and a valid checksum."""
    block = bytearray(512)
    block[0 : len(name)] = name.encode()
    block[100:108] = b"0000644\0"
    block[124:135] = size
    block[156:157] = typ
    block[257:265] = b"ustar\x0000"
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def test_parse_tar_refuses_a_negative_size() -> None:
    # int() takes a sign: "-0000001000" would have moved the parser backwards, forever.
    data = _header("a.txt", size=b"-0000001000") + b"\0" * 1024
    with pytest.raises(ArchiveError, match="negative size"):
        list(parse_tar(io.BytesIO(data)))


def test_parse_tar_skips_a_directorys_data_and_takes_a_pax_size() -> None:
    # A directory entry with data: skipped, even past what the parser has buffered.
    dir_data = b"d" * 5000
    pax_rec = b"%d size=3\n" % (len(b" size=3\n") + 2)
    data = (
        _header("d/", typ=b"5", size=b"%011o" % len(dir_data))
        + dir_data.ljust(5120, b"\0")
        + _header("pax", typ=b"x", size=b"%011o" % len(pax_rec))
        + pax_rec.ljust(512, b"\0")
        # The ustar size field is not octal: the PAX size record stands for it.
        + _header("d/f", size=b"\x80" + b"\0" * 10)
        + b"abc".ljust(512, b"\0")
        + b"\0" * 1024
    )
    got = [(e.path, e.kind, e.data) for e in parse_tar(_Trickle(data, 700))]
    assert got == [("d", "dir", None), ("d/f", "file", b"abc")]
