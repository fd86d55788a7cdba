"""verify_bundle: one report over files, runs, journal and signature (cases 19, 27)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from evidence_helpers import build_bundle

from reprobridge.evidence import EvidenceError, verify_bundle
from reprobridge.evidence.hashing import sha256_file, sha256_file_digest, sha256_files


def test_intact_bundle(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path)
    report = verify_bundle(bundle.path)
    assert report.ok and report.problems == []
    assert report.signature == "absent"
    assert report.runs == {"train/1": "sealed", "train/2": "sealed"}


def test_tampered_log_marks_run_corrupt(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path)
    (bundle.path / "runs/train/2/stdout.log").write_bytes(b"acc=0.99\n")
    report = verify_bundle(bundle.path)
    assert not report.ok
    assert report.runs["train/2"] == "corrupt"
    assert all(p.startswith("runs/train/2/stdout.log") for p in report.problems)
    assert len(report.problems) == 2  # vs SHA256SUMS and vs status.json


def test_rewritten_journal_is_reported(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path)
    journal = bundle.path / "journal.jsonl"
    lines = journal.read_bytes().split(b"\n")
    del lines[1]
    journal.write_bytes(b"\n".join(lines))
    problems = verify_bundle(bundle.path).problems
    assert any(p.startswith("journal.jsonl: sha256 mismatch") for p in problems)
    assert "journal.jsonl: line 2: seq is 3, expected 2" in problems


def test_verify_never_repairs(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path)
    journal = bundle.path / "journal.jsonl"
    with journal.open("ab") as fh:
        fh.write(b'{"torn')
    data = journal.read_bytes()
    report = verify_bundle(bundle.path)
    assert "journal.jsonl: torn last line (6 bytes)" in report.problems
    assert journal.read_bytes() == data


def test_not_a_bundle(tmp_path: Path) -> None:
    with pytest.raises(EvidenceError):
        verify_bundle(tmp_path / "missing")


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 * (1 << 20) + 17])
def test_sha256_file_matches_hashlib(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    f = tmp_path / "f"
    f.write_bytes(data)
    assert sha256_file(f) == (hashlib.sha256(data).hexdigest(), size)


def test_sha256_file_refuses_symlinks(tmp_path: Path) -> None:
    (tmp_path / "t").write_bytes(b"x")
    (tmp_path / "l").symlink_to(tmp_path / "t")
    with pytest.raises(OSError):
        sha256_file(tmp_path / "l")


def test_sha256_files_threads(tmp_path: Path) -> None:
    paths = []
    for i in range(300):
        p = tmp_path / f"f{i}"
        p.write_bytes(str(i).encode() * i)
        paths.append(p)
    got = sha256_files(paths, workers=4)
    assert got == {p: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_size) for p in paths}
    assert sha256_files(paths, workers=1) == got


def test_verify_and_seal_read_each_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 14: verify hashed each run file three times (SHA256SUMS, the run's status.json,
    then the run list), sealing twice. Now one walk hashes each file once for both."""
    import reprobridge.evidence.bundle as bundle_mod

    bundle = build_bundle(tmp_path, seal=False)
    hashed: list[str] = []

    def counting(path: Path | str) -> tuple[bytes, int]:
        hashed.append(str(path))
        return sha256_file_digest(path)

    monkeypatch.setattr(bundle_mod, "sha256_file_digest", counting)
    with bundle.lock():
        bundle.write_sha256sums()
    files = [p for p in bundle.path.rglob("*") if p.is_file() and not p.name.startswith(".lock")]
    summed = [p for p in files if p.name != "SHA256SUMS"]
    assert sorted(hashed) == sorted(str(p) for p in summed)
    hashed.clear()
    report = verify_bundle(bundle.path)
    assert report.ok and set(report.runs.values()) == {"sealed"}
    assert sorted(hashed) == sorted(str(p) for p in summed)
