"""Hostile archives, crafted with tarfile directly: every one refused, with the reason,
and nothing written outside (or inside) the destination.

Each hostile member travels inside an otherwise valid archive (``valid_archive``: a
MANIFEST.json listing every file with its real hash and size, a valid reprobridge.toml
and RO-Crate), so the refusal can only come from the member guard under test; and each
guard is tested twice: in the verifying pass, and in the extraction pass on its own (as
if the archive had changed between the passes).
"""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path

import pytest
from archive_helpers import craft_tar, valid_archive

from reprobridge._tarsafe import MemberTooLarge, UnsafeMember, write_plain
from reprobridge.archive import verify as archive_verify
from reprobridge.archive.verify import ArchiveReport, member_problem, unpack, verify_archive
from reprobridge.errors import ArchiveError
from tests.conftest import tar_member

Entries = list[tuple[tarfile.TarInfo, bytes | None]]
ESCAPE = "escaped"  # where a member that got out would land: tmp_path / ESCAPE
GIT_CONFIG = b'[filter "x"]\n\tclean = touch /tmp/rb-test-never-written\n'


def _cases(tmp_path: Path) -> dict[str, tuple[Entries, str]]:
    return {
        "dotdot": ([(tar_member(f"../{ESCAPE}"), b"evil")], "'..'"),
        "nested-dotdot": ([(tar_member(f"a/../../{ESCAPE}"), b"evil")], "'..'"),
        "absolute": ([(tar_member(str(tmp_path / ESCAPE)), b"evil")], "absolute"),
        "backslash": ([(tar_member("a\\b"), b"x")], "backslash"),
        "dot-component": ([(tar_member("a/./b"), b"x")], "'.' path component"),
        "symlink-out": (
            [(tar_member("link", tarfile.SYMTYPE, linkname="/etc/passwd"), None)],
            "symlink",
        ),
        "symlink-in": (
            [(tar_member("a"), b"1"), (tar_member("l", tarfile.SYMTYPE, linkname="a"), None)],
            "symlink",
        ),
        "hardlink": (
            [(tar_member("hl", tarfile.LNKTYPE, linkname="/etc/passwd"), None)],
            "hard link",
        ),
        "device": ([(tar_member("dev", tarfile.CHRTYPE, devmajor=1, devminor=3), None)], "device"),
        "fifo": ([(tar_member("fifo", tarfile.FIFOTYPE), None)], "FIFO"),
        "sparse": ([(tar_member("sp", tarfile.GNUTYPE_SPARSE), b"hello")], "sparse"),
        "duplicate": ([(tar_member("a"), b"1"), (tar_member("a"), b"2")], "appears twice"),
        "file-then-dir": (
            [(tar_member("a"), b"1"), (tar_member("a", tarfile.DIRTYPE), None)],
            "appears twice",
        ),
        "setuid": ([(tar_member("s", mode=0o4755), b"x")], "setuid"),
        "file-as-parent": ([(tar_member("a"), b"1"), (tar_member("a/b"), b"2")], "is a file"),
        # git metadata in any case and form: unpacking makes DEST a git repository, whose
        # config (filters, fsmonitor) and hooks would then run the archive's programs.
        "git-config": ([(tar_member(".git/config"), GIT_CONFIG)], "git metadata"),
        "git-hook": (
            [(tar_member(".GIT/hooks/post-commit", mode=0o755), b"#!/bin/sh\nid\n")],
            "git metadata",
        ),
        "git-file": ([(tar_member("sub/.Git"), b"gitdir: /elsewhere/.git\n")], "git metadata"),
        "git-dir": ([(tar_member("a/b/.git", tarfile.DIRTYPE), None)], "git metadata"),
    }


CASE_NAMES = sorted(_cases(Path("/unused")))


def _nothing_escaped(tmp_path: Path, archive: Path) -> None:
    assert sorted(p.name for p in tmp_path.iterdir()) == [archive.name]


def _unpack_refused(path: Path, tmp_path: Path, reason: str) -> None:
    """``rb unpack`` refuses ``path`` for ``reason`` and writes nothing, anywhere."""
    dest = tmp_path / "dest"
    with pytest.raises(ArchiveError, match="refused") as err:
        unpack(path, dest)
    assert reason in str(err.value)
    assert not dest.exists()
    _nothing_escaped(tmp_path, path)


def test_the_harness_archive_is_valid(tmp_path: Path) -> None:
    """Without a hostile member the same archive verifies and unpacks: every refusal
    below is the guard's."""
    path = valid_archive(tmp_path / "ok.tar.gz", [(tar_member("a/b.txt"), b"fine")])
    rep = verify_archive(path)
    assert rep.ok, rep.problems
    unpack(path, tmp_path / "dest")
    assert (tmp_path / "dest" / "a" / "b.txt").read_bytes() == b"fine"


@pytest.mark.parametrize("case", CASE_NAMES)
def test_hostile_members_refused(case: str, tmp_path: Path) -> None:
    entries, reason = _cases(tmp_path)[case]
    path = valid_archive(tmp_path / f"{case}.tar.gz", entries)
    rep = verify_archive(path)
    assert not rep.ok
    assert any(reason in p for p in rep.problems), rep.problems
    _unpack_refused(path, tmp_path, reason)


def _trusting_verify(entries: Entries):
    """A first pass that was fooled: it vouches for every file member as it is."""

    def fake(path: Path, public_key: Path | None = None, *, space: int | None = None):
        rep = ArchiveReport(Path(path))
        for info, data in reversed(entries):
            if data is not None:
                rep.files[info.name.rstrip("/")] = (hashlib.sha256(data).hexdigest(), len(data))
        return rep

    return fake


@pytest.mark.parametrize("case", CASE_NAMES)
def test_extraction_pass_guards_on_its_own(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries, reason = _cases(tmp_path)[case]
    path = craft_tar(tmp_path / f"{case}.tar.gz", entries)
    monkeypatch.setattr(archive_verify, "verify_archive", _trusting_verify(entries))
    _unpack_refused(path, tmp_path, reason)


@pytest.mark.parametrize("case", CASE_NAMES)
def test_hostile_members_refused_without_tar_filters(
    case: str, tmp_path: Path, no_tar_filters: None
) -> None:
    """Python 3.11.2 (no tarfile filters): the same refusals, nothing written."""
    entries, reason = _cases(tmp_path)[case]
    _unpack_refused(valid_archive(tmp_path / f"{case}.tar.gz", entries), tmp_path, reason)


def test_unpack_without_tar_filters(tmp_path: Path, no_tar_filters: None) -> None:
    """Debian 12's Python 3.11.2 lacks tarfile's filters; unpack must not need them."""
    assert not hasattr(tarfile, "FilterError")
    path = valid_archive(
        tmp_path / "ok.tar.gz",
        [
            (tar_member("d", tarfile.DIRTYPE, mode=0o755), None),
            (tar_member("d/run.sh", mode=0o755, mtime=1234567), b"#!/bin/sh\n"),
            (tar_member("d/data.txt", mode=0o600), b"data"),
        ],
    )
    rep = unpack(path, tmp_path / "dest")
    dest = tmp_path / "dest"
    assert rep.ok and "d/run.sh" in rep.files
    assert (dest / "d" / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (dest / "d" / "run.sh").stat().st_mtime == 1234567
    assert (dest / "d" / "data.txt").stat().st_mode & 0o777 == 0o644
    assert (dest / "d" / "data.txt").read_bytes() == b"data"


def test_declared_sizes_larger_than_free_space_are_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small archive of a large compressible member (a zip bomb in spirit): the declared
    sizes are compared with the free space before anything is unpacked."""
    big = b"\0" * (4 << 20)
    path = valid_archive(tmp_path / "bomb.tar.gz", [(tar_member("zeros.bin"), big)])
    assert path.stat().st_size < 64 << 10
    monkeypatch.setattr(archive_verify, "free_space", lambda dest: 1 << 20)
    with pytest.raises(ArchiveError, match="bytes free") as err:
        unpack(path, tmp_path / "dest")
    assert "zeros.bin" in str(err.value)
    _nothing_escaped(tmp_path, path)
    # With the space, the same archive unpacks.
    monkeypatch.setattr(archive_verify, "free_space", lambda dest: 1 << 30)
    unpack(path, tmp_path / "dest")
    assert (tmp_path / "dest" / "zeros.bin").stat().st_size == len(big)


def test_free_space_probes_the_nearest_existing_ancestor(tmp_path: Path) -> None:
    assert archive_verify.free_space(tmp_path / "not" / "yet") > 0


def test_member_grown_since_verification_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The extraction pass writes no member past the size the first pass verified."""
    entries: Entries = [(tar_member("a.bin"), b"x" * 1000)]
    path = craft_tar(tmp_path / "grown.tar.gz", entries)
    monkeypatch.setattr(
        archive_verify, "verify_archive", _trusting_verify([(tar_member("a.bin"), b"x" * 10)])
    )
    with pytest.raises(ArchiveError, match="declares 1000 bytes, 10 were verified"):
        unpack(path, tmp_path / "dest")
    _nothing_escaped(tmp_path, path)


def test_write_plain_stops_at_the_limit(tmp_path: Path) -> None:
    path = craft_tar(tmp_path / "a.tar.gz", [(tar_member("a.bin"), b"y" * (3 << 20))])
    out = tmp_path / "out"
    out.mkdir()
    with tarfile.open(path, "r|gz") as tar:
        info = next(iter(tar))
        with pytest.raises(MemberTooLarge, match="1048576"):
            write_plain(tar, info, out, limit=1 << 20)
    assert (out / "a.bin").stat().st_size <= 1 << 20


def test_member_problem_accepts_plain_members() -> None:
    assert member_problem(tar_member("a/b.txt", mode=0o644)) is None
    assert member_problem(tar_member("a/", tarfile.DIRTYPE, mode=0o755)) is None


def test_not_an_archive_and_missing_manifest(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"hello world")
    with pytest.raises(ArchiveError, match="magic"):
        verify_archive(junk)
    plain = craft_tar(tmp_path / "plain.tar.gz", [(tar_member("a.txt"), b"x")])
    rep = verify_archive(plain)
    assert any("MANIFEST.json: missing" in p for p in rep.problems)


def test_same_size_edit_is_caught_by_the_manifest_hash(tmp_path: Path) -> None:
    """A member changed without changing its size: only its sha256 can tell."""
    good = valid_archive(tmp_path / "good.tar.gz", [(tar_member("data.txt"), b"accuracy=0.91\n")])
    assert verify_archive(good).ok
    members: Entries = []
    with tarfile.open(good, "r:gz") as tar:
        for info in tar:
            f = tar.extractfile(info)
            data = f.read() if f else None
            if info.name == "data.txt":
                data = b"accuracy=0.99\n"
            members.append((info, data))
    bad = craft_tar(tmp_path / "bad.tar.gz", members)
    rep = verify_archive(bad)
    got, want = (
        hashlib.sha256(b).hexdigest()[:12] for b in (b"accuracy=0.99\n", b"accuracy=0.91\n")
    )
    assert rep.problems == [
        f"data.txt: sha256 {got}… differs from MANIFEST.json ({want}…): modified"
    ]
    with pytest.raises(ArchiveError, match=r"data.txt: sha256 .* modified"):
        unpack(bad, tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


def test_unpack_refuses_non_empty_dest(tmp_path: Path) -> None:
    plain = craft_tar(tmp_path / "plain.tar.gz", [(tar_member("a.txt"), b"x")])
    dest = tmp_path / "d"
    dest.mkdir()
    (dest / "keep").write_text("mine")
    with pytest.raises(ArchiveError, match="not an empty directory"):
        unpack(plain, dest)
    assert (dest / "keep").read_text() == "mine"


def test_write_plain_never_overwrites_nor_follows(tmp_path: Path) -> None:
    path = craft_tar(tmp_path / "a.tar.gz", [(tar_member("a.bin"), b"new")])
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.bin").symlink_to(tmp_path / "victim")
    with (
        tarfile.open(path, "r|gz") as tar,
        pytest.raises(UnsafeMember, match="already in the destination"),
    ):
        write_plain(tar, next(iter(tar)), out)
    assert not (tmp_path / "victim").exists()


def _source_archive(path: Path, *extra: tuple[tarfile.TarInfo, bytes | None]) -> Path:
    """An archive with the source (``rb unpack`` commits it) whose ``.gitattributes``
    sends every file through filter ``x``, plus ``extra`` members."""
    return valid_archive(
        path,
        [
            (tar_member(".gitattributes"), b"* filter=x diff=x\n"),
            (tar_member("train.py"), b"print('acc=0.9')\n"),
            *extra,
        ],
        with_source=True,
        source_date_epoch=1700000000,
        commit="0" * 40,
    )


def test_rb_unpack_refuses_git_metadata_and_runs_nothing(tmp_path: Path) -> None:
    """The archive's ``.git/config`` names a clean filter for every file and its
    post-commit hook is executable: unpacking (which commits the source) would run both.
    ``rb archive verify`` names the members; ``rb unpack`` fails with one line and leaves
    nothing at DEST."""
    from rbcli import rb

    marker = tmp_path / "marker"
    config = f'[filter "x"]\n\tclean = touch {marker}; cat\n'.encode()
    hook = f"#!/bin/sh\ntouch {marker}\n".encode()
    path = _source_archive(
        tmp_path / "evil.tar.gz",
        (tar_member(".git/config"), config),
        (tar_member(".git/hooks/post-commit", mode=0o755), hook),
    )
    proc = rb("archive", "verify", str(path), cwd=tmp_path)
    assert proc.returncode != 0 and "archive: OK" not in proc.stdout
    assert "'.git/config': is git metadata" in proc.stdout + proc.stderr
    dest = tmp_path / "dest"
    proc = rb("unpack", str(path), str(dest), cwd=tmp_path)
    assert proc.returncode == 10, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "git metadata" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not dest.exists() and not marker.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.tar.gz"]


def test_rb_unpack_commits_without_running_the_archives_drivers(tmp_path: Path) -> None:
    """Without a ``.git`` the archive's attributes name a driver no config defines: the
    commit runs nothing and succeeds."""
    from rbcli import rb

    marker = tmp_path / "marker"
    path = _source_archive(tmp_path / "ok.tar.gz")
    dest = tmp_path / "dest"
    proc = rb("unpack", str(path), str(dest), cwd=tmp_path, env={"RB_TEST_SECRET": "s3cr3t"})
    assert proc.returncode == 0, proc.stderr
    assert "git repository:" in proc.stdout
    assert (dest / ".git").is_dir() and not marker.exists()


def test_a_failed_git_commit_leaves_nothing_at_dest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Making the repository happens before the unpacked tree becomes DEST."""
    from click.testing import CliRunner

    from reprobridge.archive import restore
    from reprobridge.cli.unpack import unpack_command
    from reprobridge.errors import CommandFailed

    def failing(dest: Path, doc: dict[str, object]) -> str:
        raise CommandFailed("`git add -A` exited with 128: fatal: boom", argv=["git"])

    monkeypatch.setattr(restore, "make_repository", failing)
    path = _source_archive(tmp_path / "ok.tar.gz")
    dest = tmp_path / "dest"
    got = CliRunner().invoke(unpack_command, [str(path), str(dest)])
    assert got.exit_code != 0
    assert not dest.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.tar.gz"]
