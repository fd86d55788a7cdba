"""Tar extraction on every Python 3.11: the workspace of a run is extracted under the
``data`` filter's rules with tarfile's filters (3.11.4+) and without them (Debian 12's
3.11.2, simulated by ``no_tar_filters``)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from reprobridge import _tarsafe
from reprobridge.audit.workspace import prepare_workspace
from tests.conftest import tar_member


@pytest.fixture(params=["tarfile-filters", "no-tar-filters"])
def filters(request: pytest.FixtureRequest) -> str:
    if request.param == "no-tar-filters":
        request.getfixturevalue("no_tar_filters")
        assert not _tarsafe.has_filters()
    elif not _tarsafe.has_filters():
        pytest.skip("this Python's tarfile has no extraction filters")
    return str(request.param)


def test_workspace_keeps_links_inside_and_skips_links_out(
    filters: str, make_repo, tmp_path: Path
) -> None:
    repo = make_repo({"run.sh": "echo hi\n", "sub/data.txt": "d\n"}, commit=False)
    (repo / "run.sh").chmod(0o755)
    (repo / "inside").symlink_to("sub/data.txt")
    (repo / "sub" / "up").symlink_to("../run.sh")
    (repo / "abs").symlink_to("/etc/passwd")
    (repo / "sub" / "out").symlink_to("../../../etc")
    import subprocess

    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "links"], check=True)

    ws = tmp_path / "ws"
    info = prepare_workspace(repo, ws)
    assert sorted(info.skipped) == ["abs", "sub/out"], info.skipped
    assert (ws / "inside").is_symlink() and (ws / "inside").read_text() == "d\n"
    assert (ws / "sub" / "up").read_text() == "echo hi\n"
    assert not (ws / "abs").exists() and not (ws / "abs").is_symlink()
    assert not (ws / "sub" / "out").is_symlink()
    assert os.access(ws / "run.sh", os.X_OK)
    assert (ws / "sub").stat().st_mode & 0o700 == 0o700  # the run may write its outputs


def _tar(*entries: tuple[tarfile.TarInfo, bytes | None]) -> tarfile.TarFile:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            info.size = len(data or b"")
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    buf.seek(0)
    return tarfile.open(fileobj=buf, mode="r:")


HOSTILE = {
    "dotdot": (tar_member("../evil"), b"x"),
    # Beside the destination, its name a prefix of the member's path: a string-prefix
    # "inside" check lets it out.
    "sibling-prefix": (tar_member("../dest-evil/pwned"), b"x"),
    "absolute": (tar_member("/tmp/rb-tarsafe-evil"), b"x"),
    "abs-link": (tar_member("l", tarfile.SYMTYPE, linkname="/etc"), None),
    "rel-link-out": (tar_member("d/l", tarfile.SYMTYPE, linkname="../../x"), None),
    "hardlink-out": (tar_member("h", tarfile.LNKTYPE, linkname="../x"), None),
    "device": (tar_member("dev", tarfile.CHRTYPE, devmajor=1, devminor=3), None),
    "fifo": (tar_member("f", tarfile.FIFOTYPE), None),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_data_rules_refuse_the_same_members(filters: str, case: str, tmp_path: Path) -> None:
    refused: list[str] = []
    dest = tmp_path / "dest"
    dest.mkdir()
    with _tar(HOSTILE[case], (tar_member("ok.txt", mode=0o6777), b"fine")) as tar:
        _tarsafe.extract_all_data(tar, dest, lambda m, why: refused.append(m.name))
    assert refused == [HOSTILE[case][0].name]
    assert sorted(p.name for p in dest.iterdir()) == ["ok.txt"]
    # Special bits and group/other write are dropped, as the data filter does.
    assert (dest / "ok.txt").stat().st_mode & 0o7777 == 0o755
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dest"]


def test_fallback_agrees_with_tarfile_data_filter(tmp_path: Path) -> None:
    """Where tarfile has its filter, the fallback refuses exactly what it refuses (an
    absolute name aside, which the fallback refuses instead of stripping)."""
    if not _tarsafe.has_filters():
        pytest.skip("this Python's tarfile has no data filter to compare with")
    members = [m for case, (m, _d) in HOSTILE.items() if case != "absolute"]
    members += [
        tar_member("a/b.txt"),
        tar_member("d", tarfile.DIRTYPE),
        tar_member("d/l", tarfile.SYMTYPE, linkname="../a/b.txt"),
        tar_member("h", tarfile.LNKTYPE, linkname="a/b.txt"),
        tar_member("in-but-absolute", tarfile.SYMTYPE, linkname=str(tmp_path / "a/b.txt")),
    ]
    for m in members:
        native = fallback = True
        try:
            tarfile.data_filter(m, str(tmp_path))
        except tarfile.FilterError:
            native = False
        try:
            _tarsafe._fallback_data_filter(m, str(tmp_path))
        except _tarsafe.UnsafeMember:
            fallback = False
        assert native == fallback, m.name
