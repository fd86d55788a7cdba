"""The deterministic writer: byte identity under reprotest-style variation, SOURCE_DATE_EPOCH,
headers equal to tarfile's own, refusal of non-regular files."""

from __future__ import annotations

import gzip
import os
import tarfile
import time
from pathlib import Path

import pytest
from archive_helpers import TREE, make_tree, walk_members

from reprobridge.archive.pack import (
    Entry,
    Member,
    _header,
    parse_source_date_epoch,
    write_archive,
)
from reprobridge.errors import ArchiveError


def _pack(tmp_path: Path, name: str, *, reverse: bool, mtime: int, umask: int, tz: str) -> bytes:
    root = tmp_path / f"tree-{name}"
    make_tree(root, reverse=reverse, mtime=mtime, umask=umask)
    os.environ["TZ"] = tz
    time.tzset()
    out = tmp_path / f"{name}.tar.gz"
    old = os.umask(umask)
    try:
        write_archive(walk_members(root, reverse=reverse), out, mtime=1_700_000_000)
    finally:
        os.umask(old)
    return out.read_bytes()


def test_byte_identical_under_variation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("LANG", "C")
    a = _pack(tmp_path, "a", reverse=False, mtime=1, umask=0o022, tz="UTC")
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    b = _pack(tmp_path, "b", reverse=True, mtime=2_000_000_000, umask=0o077, tz="Asia/Kathmandu")
    time.tzset()
    assert a == b
    # gzip header: no name, MTIME 0, OS 3, as `gzip -n`.
    assert a[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"


def test_content_is_normalised(tmp_path: Path) -> None:
    root = tmp_path / "t"
    make_tree(root, reverse=False, mtime=5, umask=0o002)
    out = tmp_path / "x.tar.gz"
    res = write_archive(walk_members(root), out, mtime=42)
    with tarfile.open(out, "r:gz") as tar:
        infos = tar.getmembers()
    names = [i.name for i in infos]
    assert names == sorted(names, key=lambda n: n.encode())
    for i in infos:
        assert (i.mtime, i.uid, i.gid, i.uname, i.gname) == (42, 0, 0, "", "")
        assert i.isreg() or i.isdir()
        assert i.mode == (0o755 if i.isdir() or i.name == "run.sh" else 0o644)
    assert {r.path for r in res.files} == set(TREE)
    assert gzip.decompress(out.read_bytes())  # a valid gzip stream, trailer included


@pytest.mark.parametrize("mode", [0o644, 0o755])
@pytest.mark.parametrize("mtime", [0, 99, 1796159100, 8**11 - 1])
def test_fast_header_equals_tarfile(mode: int, mtime: int) -> None:
    # The fast path sums only the name and size fields onto a cached sum of the others
    # (per kind, mode and mtime): every combination must still be tarfile's bytes.
    cases = [("a.txt", "file", 5), ("dir", "dir", 0), ("x" * 98, "file", 7**9)]
    cases += [("e", "file", 0), ("y" * 99, "file", 8**11 - 1), ("a/b/c", "dir", 0)]
    for name, kind, size in cases:
        info = tarfile.TarInfo(name + ("/" if kind == "dir" else ""))
        info.type = tarfile.DIRTYPE if kind == "dir" else tarfile.REGTYPE
        info.size, info.mode, info.mtime, info.uname, info.gname = size, mode, mtime, "", ""
        want = info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
        assert _header(name, kind=kind, size=size, mode=mode, mtime=mtime) == want, name


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "0x10", " 1e3"])
def test_source_date_epoch_invalid(value: str) -> None:
    with pytest.raises(ArchiveError, match="SOURCE_DATE_EPOCH"):
        parse_source_date_epoch({"SOURCE_DATE_EPOCH": value})


def test_source_date_epoch_valid_and_empty() -> None:
    assert parse_source_date_epoch({"SOURCE_DATE_EPOCH": "1700000000"}) == 1700000000
    assert parse_source_date_epoch({"SOURCE_DATE_EPOCH": "0"}) == 0
    assert parse_source_date_epoch({"SOURCE_DATE_EPOCH": ""}) is None  # default: commit time
    assert parse_source_date_epoch({}) is None


def test_refuses_symlink_and_fifo(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "link").symlink_to("/etc/passwd")
    os.mkfifo(tmp_path / "t" / "fifo")
    out = tmp_path / "o.tar.gz"
    for name in ("link", "fifo"):
        with pytest.raises(ArchiveError):
            write_archive([Member(name, source=tmp_path / "t" / name)], out, mtime=0)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_refuses_bad_member_names(tmp_path: Path) -> None:
    for bad in ("/abs", "../x", "a/../b", "a//b", ""):
        with pytest.raises(ArchiveError):
            write_archive([Member(bad, data=b"x")], tmp_path / "o.tar.gz", mtime=0)


@pytest.mark.parametrize("name", [".git/config", ".GIT/hooks/post-commit", "sub/.Git", "a/.git"])
def test_refuses_git_metadata_in_any_case(tmp_path: Path, name: str) -> None:
    """Listed or streamed from ``git archive`` (a crafted tree can hold ``.GIT``), no
    ``.git`` path is ever packed."""
    out = tmp_path / "o.tar.gz"
    with pytest.raises(ArchiveError, match="git metadata"):
        write_archive([Member(name, data=b"x")], out, mtime=0)
    entry = Entry(name, "file", b"x", False)
    with pytest.raises(ArchiveError, match="git metadata"):
        write_archive([], out, mtime=0, ordered=[entry])
    assert not out.exists()


def test_zst_is_deterministic(tmp_path: Path) -> None:
    pytest.importorskip("zstandard")
    root = tmp_path / "t"
    make_tree(root, reverse=False, mtime=5, umask=0o022)
    a = write_archive(walk_members(root), tmp_path / "a.tar.zst", mtime=1, fmt="zst")
    b = write_archive(walk_members(root, reverse=True), tmp_path / "b.tar.zst", mtime=1, fmt="zst")
    assert a.path.read_bytes() == b.path.read_bytes()


def test_benchmark_smoke() -> None:
    import subprocess
    import sys

    bench = Path(__file__).resolve().parents[3] / "benchmarks" / "archive.py"
    proc = subprocess.run(
        [sys.executable, str(bench), "--size-mb", "2", "--repeat", "1", "--formats", "gz"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "throughput rb / GNU tar" in proc.stdout and "ratio" in proc.stdout
