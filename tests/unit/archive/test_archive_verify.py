"""Hostile archives, crafted with tarfile directly: every one refused, with the reason,
and nothing written outside (or inside) the destination."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from archive_helpers import craft_tar

from reprobridge.archive.verify import member_problem, unpack, verify_archive
from reprobridge.errors import ArchiveError


def _info(name: str, kind: bytes = tarfile.REGTYPE, **kw: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for k, v in kw.items():
        setattr(info, k, v)
    return info


Entries = list[tuple[tarfile.TarInfo, bytes | None]]
CASES: dict[str, tuple[Entries, str]] = {
    "dotdot": ([(_info("../x"), b"evil")], "'..'"),
    "nested-dotdot": ([(_info("a/../../x"), b"evil")], "'..'"),
    "absolute": ([(_info("/abs"), b"evil")], "absolute"),
    "symlink-out": ([(_info("link", tarfile.SYMTYPE, linkname="/etc/passwd"), None)], "symlink"),
    "hardlink": ([(_info("hl", tarfile.LNKTYPE, linkname="/etc/passwd"), None)], "hard link"),
    "device": ([(_info("dev", tarfile.CHRTYPE, devmajor=1, devminor=3), None)], "device"),
    "fifo": ([(_info("fifo", tarfile.FIFOTYPE), None)], "FIFO"),
    "duplicate": ([(_info("a"), b"1"), (_info("a"), b"2")], "appears twice"),
    "setuid": ([(_info("s", mode=0o4755), b"x")], "setuid"),
    "file-as-parent": ([(_info("a"), b"1"), (_info("a/b"), b"2")], "is a file"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_members_refused(case: str, tmp_path: Path) -> None:
    entries, reason = CASES[case]
    path = craft_tar(tmp_path / f"{case}.tar.gz", entries)
    rep = verify_archive(path)
    assert not rep.ok
    assert any(reason in p for p in rep.problems), rep.problems
    dest = tmp_path / "dest"
    with pytest.raises(ArchiveError, match="refused"):
        unpack(path, dest)
    assert not dest.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{case}.tar.gz"]
    assert not Path("/x").exists() or case not in ("absolute",)


def test_member_problem_accepts_plain_members() -> None:
    assert member_problem(_info("a/b.txt", mode=0o644)) is None
    assert member_problem(_info("a/", tarfile.DIRTYPE, mode=0o755)) is None


def test_not_an_archive_and_missing_manifest(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"hello world")
    with pytest.raises(ArchiveError, match="magic"):
        verify_archive(junk)
    plain = craft_tar(tmp_path / "plain.tar.gz", [(_info("a.txt"), b"x")])
    rep = verify_archive(plain)
    assert any("MANIFEST.json: missing" in p for p in rep.problems)


def test_unpack_refuses_non_empty_dest(tmp_path: Path) -> None:
    plain = craft_tar(tmp_path / "plain.tar.gz", [(_info("a.txt"), b"x")])
    dest = tmp_path / "d"
    dest.mkdir()
    (dest / "keep").write_text("mine")
    with pytest.raises(ArchiveError, match="not an empty directory"):
        unpack(plain, dest)
    assert (dest / "keep").read_text() == "mine"
