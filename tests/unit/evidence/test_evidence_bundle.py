"""Bundle: layout, atomic writes, run states, journal chain, SHA256SUMS and tamper detection."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from evidence_helpers import AUDIT_ID, build_bundle

from reprobridge.evidence import Bundle, EvidenceError
from reprobridge.evidence.bundle import GENESIS_SHA256
from reprobridge.evidence.hashing import sha256_bytes


def _record(monkeypatch: pytest.MonkeyPatch, log: list[tuple[str, str]]) -> None:
    """From now on, each fsync (of the path its fd names) and rename goes to ``log``."""
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        log.append(("fsync", str(Path(f"/proc/self/fd/{fd}").readlink())))
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        log.append(("rename", str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_create_layout_and_refuses_existing(tmp_path: Path) -> None:
    root = tmp_path / "repro" / "evidence"
    bundle = Bundle.create(root, AUDIT_ID)  # creates the evidence dir too
    assert bundle.path == root / AUDIT_ID and bundle.audit_id == AUDIT_ID
    assert bundle.path.is_dir()
    with pytest.raises(EvidenceError, match="already exists"):
        Bundle.create(root, AUDIT_ID)
    assert Bundle.open(bundle.path).path == bundle.path


@pytest.mark.parametrize("bad", ["", ".", "..", "../x", "a/b", "-x", "x" * 200, "a\x00b"])
def test_create_rejects_bad_audit_ids(tmp_path: Path, bad: str) -> None:
    with pytest.raises(EvidenceError):
        Bundle.create(tmp_path, bad)


def test_create_refuses_symlinked_evidence_dir(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "repro").symlink_to(outside)
    with pytest.raises(EvidenceError, match="symlink"):
        Bundle.create(repo / "repro" / "evidence", AUDIT_ID)
    (outside / "evidence").symlink_to(outside)
    with pytest.raises(EvidenceError, match="symlink"):
        Bundle.create(outside / "evidence", AUDIT_ID)
    assert [p.name for p in outside.iterdir()] == ["evidence"]


def test_open_rejects_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(EvidenceError, match="not an evidence bundle"):
        Bundle.open(tmp_path / "nope")


def test_write_json_is_canonical(tmp_path: Path) -> None:
    bundle = Bundle.create(tmp_path, AUDIT_ID)
    with bundle.lock():
        path = bundle.write_json("plan.json", {"b": 1, "a": "é"})
    assert path.read_bytes() == '{\n  "a": "é",\n  "b": 1\n}\n'.encode()
    assert bundle.read_json("plan.json") == {"a": "é", "b": 1}


def test_write_json_refuses_nan(tmp_path: Path) -> None:
    bundle = Bundle.create(tmp_path, AUDIT_ID)
    with bundle.lock(), pytest.raises(EvidenceError, match="JSON"):
        bundle.write_json("plan.json", {"acc": float("nan")})


def test_writes_require_the_lock(tmp_path: Path) -> None:
    bundle = Bundle.create(tmp_path, AUDIT_ID)
    with pytest.raises(EvidenceError, match="lock"):
        bundle.write_json("plan.json", {})
    with pytest.raises(EvidenceError, match="lock"):
        bundle.journal_append({"event": "x"})


@pytest.mark.parametrize(
    "rel",
    [
        "../x",
        "/abs",
        "a/../../b",
        "a//b",
        "./a",
        ".hidden",
        "a/.tmp",
        "a\\b",
        "",
        "SHA256SUMS",
        "journal.jsonl",
        "runs/e/1/status.json",
        ".lock",
    ],
)
def test_write_refuses_escaping_or_reserved_paths(tmp_path: Path, rel: str) -> None:
    bundle = Bundle.create(tmp_path, AUDIT_ID)
    with bundle.lock(), pytest.raises(EvidenceError):
        bundle.write_bytes(rel, b"x")
    assert not (tmp_path / "x").exists() and not (tmp_path / "repro" / "evidence" / "x").exists()


def test_write_refuses_a_symlinked_subdir(tmp_path: Path) -> None:
    bundle = Bundle.create(tmp_path, AUDIT_ID)
    outside = tmp_path / "outside"
    outside.mkdir()
    (bundle.path / "fingerprint").symlink_to(outside)
    with bundle.lock(), pytest.raises(EvidenceError, match="symlink"):
        bundle.write_json("fingerprint/host.json", {})
    assert list(outside.iterdir()) == []


# ---------------------------------------------------------------- runs


def test_run_states_and_seal(tmp_path: Path) -> None:
    bundle = Bundle.create(tmp_path, AUDIT_ID)
    assert bundle.run_state("train", 1) == "missing"
    with bundle.lock():
        run = bundle.run_dir("train", 1)
        (run / "stdout.log").write_bytes(b"loss=0.1234\n")
        (run / "sub").mkdir()
        (run / "sub" / "out.txt").write_bytes(b"x")
        assert bundle.run_state("train", 1) == "partial"
        assert "not sealed" in bundle.check_run("train", 1)[0]
        status_path = bundle.seal_run("train", 1, {"exit": 0})
        assert bundle.run_state("train", 1) == "sealed"
        assert bundle.check_run("train", 1) == []
        status = json.loads(status_path.read_bytes())
        assert status["sealed"] is True and status["record"] == {"exit": 0}
        assert status["files"] == {
            "stdout.log": {"sha256": sha256_bytes(b"loss=0.1234\n"), "size": 12},
            "sub/out.txt": {"sha256": sha256_bytes(b"x"), "size": 1},
        }
        with pytest.raises(EvidenceError, match="already sealed"):
            bundle.seal_run("train", 1, {})
        with pytest.raises(EvidenceError, match="sealed"):
            bundle.write_json("runs/train/1/metrics.json", {})
    assert bundle.runs() == [("train", 1)]


def test_seal_puts_every_file_and_directory_of_the_run_on_disk_before_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's writes leave its directories to the seal (one fsync per directory per run
    instead of one per file, issue 14), so before status.json's rename the seal must have
    fsynced every file it lists (those the bundle did not write too: the sampler's
    timeline, copied outputs, the logs), each once, and every directory that got an
    entry, up to the bundle."""
    bundle = Bundle.create(tmp_path, AUDIT_ID)
    log: list[tuple[str, str]] = []

    def seal(k: int) -> tuple[list[str], list[str]]:
        """(fsynced before status.json's rename, fsynced after it) since the log began."""
        bundle.seal_run("e", k, {"exit": 0})
        status = str(bundle.path / "runs" / "e" / str(k) / "status.json")
        at = log.index(("rename", status))
        assert [p for kind, p in log if kind == "rename"][-1] == status
        return [p for _, p in log[:at]], [p for _, p in log[at + 1 :]]

    with bundle.lock():
        _record(monkeypatch, log)
        bundle.write_json("runs/e/0/datasets.json", [])  # makes runs/, runs/e/, runs/e/0/
        run = bundle.path / "runs" / "e" / "0"
        bundle.write_json("runs/e/0/env.json", {"A": "1"})
        (run / "stdout.log").write_bytes(b"acc=0.9\n")  # as run_monitored leaves it
        (run / "timeline.jsonl").write_bytes(b"{}\n")
        (run / "files" / "out" / "deep").mkdir(parents=True)
        (run / "files" / "out" / "deep" / "result.txt").write_bytes(b"acc=0.9\n")
        # The run's own writes fsync their data, never a directory.
        assert [Path(p).is_dir() for _, p in log if _ == "fsync"] == [False, False]
        before, after = seal(0)
        listed = json.loads((run / "status.json").read_bytes())["files"]
        files = [p for p in before if Path(p).is_file()]
        # Every listed file once: those written here at their write, the others at the seal.
        assert sorted(files) == sorted(str(run / name) for name in listed)
        dirs = [run / "files" / "out" / "deep", run / "files" / "out", run / "files", run]
        dirs += [run.parent, run.parent.parent, bundle.path]
        assert sorted(p for p in before if Path(p).is_dir()) == sorted(str(d) for d in dirs)
        assert ".status.json." in before[-1]
        assert after == [str(run)]  # status.json's name
        # The next run: its own directory and the one that got its entry, nothing above.
        log.clear()
        run1 = bundle.run_dir("e", 1)
        (run1 / "stdout.log").write_bytes(b"acc=0.9\n")
        before, after = seal(1)
        assert sorted(p for p in before if Path(p).is_dir()) == [str(run.parent), str(run1)]
        assert [p for p in before if Path(p).is_file()] == [str(run1 / "stdout.log")]


def test_seal_fsyncs_a_file_changed_after_the_bundle_wrote_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = Bundle.create(tmp_path, AUDIT_ID)
    with bundle.lock():
        target = bundle.write_json("runs/e/0/metrics.json", {"acc": 0.9})
        target.write_bytes(b'{"acc": 0.95, "changed": true}')  # a new size, the same inode
        log: list[tuple[str, str]] = []
        _record(monkeypatch, log)
        bundle.seal_run("e", 0, {})
    assert ("fsync", str(target)) in log


def test_seal_refuses_when_a_file_cannot_be_put_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = Bundle.create(tmp_path, AUDIT_ID)
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if Path(f"/proc/self/fd/{fd}").readlink().name == "stdout.log":
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    with bundle.lock():
        run = bundle.run_dir("e", 0)
        (run / "stdout.log").write_bytes(b"acc=0.9\n")
        monkeypatch.setattr(os, "fsync", fsync)
        with pytest.raises(EvidenceError, match=r"stdout\.log") as caught:
            bundle.seal_run("e", 0, {})
    assert "cannot be put on disk: Input/output error" in caught.value.message
    assert not (run / "status.json").exists()


@pytest.mark.parametrize("bad", [("../x", 1), ("Train", 1), ("a/b", 1), ("e", -1), ("e", True)])
def test_run_ids_are_validated(tmp_path: Path, bad: tuple[str, int]) -> None:
    bundle = Bundle.create(tmp_path, AUDIT_ID)
    with bundle.lock(), pytest.raises(EvidenceError):
        bundle.run_dir(*bad)


def test_seal_refuses_symlinks_and_temp_files(tmp_path: Path) -> None:
    bundle = Bundle.create(tmp_path, AUDIT_ID)
    with bundle.lock():
        run = bundle.run_dir("e", 1)
        (run / "link").symlink_to("/etc/passwd")
        with pytest.raises(EvidenceError, match="link"):
            bundle.seal_run("e", 1, {})
        (run / "link").unlink()
        (run / ".stdout.log.abc.tmp").write_bytes(b"")
        with pytest.raises(EvidenceError, match=r"stdout\.log\.abc\.tmp"):
            bundle.seal_run("e", 1, {})
    assert not (run / "status.json").exists()


def test_corrupt_run_states(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path, seal=False)
    run = bundle.path / "runs/train/1"
    (run / "stdout.log").write_bytes(b"epoch 1 loss=0.0001\n")
    assert bundle.run_state("train", 1) == "corrupt"
    assert any(
        p.startswith("runs/train/1/stdout.log: sha256 mismatch")
        for p in bundle.check_run("train", 1)
    )
    # An extra file in a sealed run is corruption too.
    (bundle.path / "runs/train/2/extra.txt").write_bytes(b"")
    assert bundle.check_run("train", 2) == [
        "runs/train/2/extra.txt: not listed in status.json (added after sealing)"
    ]
    # A deleted file.
    (bundle.path / "runs/train/2/extra.txt").unlink()
    (bundle.path / "runs/train/2/stderr.log").unlink()
    assert bundle.check_run("train", 2) == [
        "runs/train/2/stderr.log: missing (listed in status.json)"
    ]
    # status.json garbage.
    (bundle.path / "runs/train/2/status.json").write_bytes(b"{not json")
    assert bundle.run_state("train", 2) == "corrupt"
    assert "status.json: not valid JSON" in bundle.check_run("train", 2)[0]


def test_set_aside_partial(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path, seal=False)
    with bundle.lock():
        run = bundle.run_dir("train", 3)
        (run / "stdout.log").write_bytes(b"half")
        with pytest.raises(EvidenceError, match="sealed"):
            bundle.set_aside_partial("train", 1)
        dest = bundle.set_aside_partial("train", 3)
        assert dest.name.startswith("3.partial-") and (dest / "stdout.log").read_bytes() == b"half"
        assert bundle.run_state("train", 3) == "missing"
        # The same run again: a second set-aside dir, never overwriting the first.
        (bundle.run_dir("train", 3) / "stdout.log").write_bytes(b"again")
        dest2 = bundle.set_aside_partial("train", 3)
        assert dest2 != dest and dest.exists()
        # A corrupt run can be set aside too (the caller reports it); it is kept, not lost.
        (bundle.path / "runs/train/2/stdout.log").write_bytes(b"tampered")
        moved = bundle.set_aside_partial("train", 2)
        assert (moved / "stdout.log").read_bytes() == b"tampered"
        with pytest.raises(EvidenceError, match="missing"):
            bundle.set_aside_partial("train", 2)
    assert bundle.runs() == [("train", 1)]


# ---------------------------------------------------------------- journal


def test_journal_chain(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path, seal=False)
    records = bundle.journal_records()
    assert [r["seq"] for r in records] == [1, 2, 3, 4]
    assert records[0]["prev_sha256"] == GENESIS_SHA256
    lines = (bundle.path / "journal.jsonl").read_bytes().split(b"\n")
    assert records[1]["prev_sha256"] == sha256_bytes(lines[0])
    with bundle.lock():
        rec = bundle.journal_append({"event": "more"})
    assert rec["seq"] == 5 and rec["prev_sha256"] == sha256_bytes(lines[3])


def test_unsynced_journal_line_is_whole_and_the_next_append_syncs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = Bundle.create(tmp_path, AUDIT_ID)
    log: list[tuple[str, str]] = []
    journal = ("fsync", str(bundle.path / "journal.jsonl"))
    with bundle.lock():
        _record(monkeypatch, log)
        bundle.journal_append({"event": "first"}, sync=False)  # a new file is always synced
        assert log.count(journal) == 1
        bundle.journal_append({"event": "run-started"}, sync=False)
        assert log.count(journal) == 1
        bundle.journal_append({"event": "run-sealed"})
        assert log.count(journal) == 2
    assert [r["event"] for r in bundle.journal_records()] == ["first", "run-started", "run-sealed"]


def test_journal_rejects_reserved_keys(tmp_path: Path) -> None:
    bundle = Bundle.create(tmp_path, AUDIT_ID)
    with bundle.lock(), pytest.raises(EvidenceError):
        bundle.journal_append({"seq": 7})


def test_torn_journal_line_is_truncated_and_noted(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path, seal=False)
    journal = bundle.path / "journal.jsonl"
    good = journal.read_bytes()
    with journal.open("ab") as fh:
        fh.write(b'{"event":"run-sea')
    # Unlocked: skipped, not cut (another auditor might be mid-append).
    assert len(Bundle.open(bundle.path).journal_records()) == 4
    assert journal.read_bytes() != good
    with pytest.raises(EvidenceError, match="torn"):
        Bundle.open(bundle.path).journal_records(repair=False)
    reopened = Bundle.open(bundle.path)
    with reopened.lock():
        assert len(reopened.journal_records()) == 4
        assert any("torn last line" in n for n in reopened.notes)
        assert journal.read_bytes() == good  # earlier lines untouched, byte for byte
        reopened.journal_append({"event": "resumed"})
    assert [r["seq"] for r in reopened.journal_records()] == [1, 2, 3, 4, 5]


def test_torn_line_with_newline_but_bad_json_is_cut(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path, seal=False)
    journal = bundle.path / "journal.jsonl"
    with journal.open("ab") as fh:
        fh.write(b"\x00\x00\x00\n")
    with bundle.lock():
        assert len(bundle.journal_records()) == 4


@pytest.mark.parametrize("damage", ["edit", "delete", "reorder", "garbage"])
def test_broken_chain_is_an_error(tmp_path: Path, damage: str) -> None:
    bundle = build_bundle(tmp_path, seal=False)
    journal = bundle.path / "journal.jsonl"
    lines = journal.read_bytes().split(b"\n")[:-1]
    if damage == "edit":
        lines[1] = lines[1].replace(b"train/1", b"train/9")
    elif damage == "delete":
        del lines[1]
    elif damage == "reorder":
        lines[1], lines[2] = lines[2], lines[1]
    else:
        lines[1] = b"not json"
    journal.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(EvidenceError, match=r"journal.jsonl: line \d"):
        Bundle.open(bundle.path).journal_records()


def test_journal_append_enospc_leaves_no_fragment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = build_bundle(tmp_path, seal=False)
    journal = bundle.path / "journal.jsonl"
    before = journal.read_bytes()
    real_write = os.write

    def failing_write(fd: int, data: bytes) -> int:
        real_write(fd, data[:5])  # a partial write reaches the disk, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    with bundle.lock():
        monkeypatch.setattr(os, "write", failing_write)
        with pytest.raises(EvidenceError, match="No space left"):
            bundle.journal_append({"event": "x"})
        monkeypatch.setattr(os, "write", real_write)
        assert journal.read_bytes() == before
        bundle.journal_append({"event": "after"})
    assert len(bundle.journal_records()) == 5


# ---------------------------------------------------------------- ENOSPC on atomic writes


def test_enospc_keeps_previous_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = Bundle.create(tmp_path, AUDIT_ID)
    with bundle.lock():
        bundle.write_json("plan.json", {"v": 1})
        real_fdopen = os.fdopen

        class Full:
            def __init__(self, fh: object) -> None:
                self._fh = fh

            def __enter__(self) -> Full:
                return self

            def __exit__(self, *exc: object) -> None:
                self._fh.close()  # type: ignore[attr-defined]

            def write(self, data: bytes) -> int:
                self._fh.write(data[:3])  # type: ignore[attr-defined]
                raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "fdopen", lambda fd, mode: Full(real_fdopen(fd, mode)))
        with pytest.raises(EvidenceError, match="No space left") as info:
            bundle.write_json("plan.json", {"v": 2})
        assert info.value.path == "plan.json" and info.value.exit_code == 9
        monkeypatch.setattr(os, "fdopen", real_fdopen)
    assert bundle.read_json("plan.json") == {"v": 1}
    assert sorted(p.name for p in bundle.path.iterdir() if p.name != ".lock") == ["plan.json"]


# ---------------------------------------------------------------- SHA256SUMS and tampering


def test_sha256sums_format_is_sha256sum_compatible(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path)
    text = (bundle.path / "SHA256SUMS").read_text()
    paths = [line.split("  ", 1)[1] for line in text.splitlines()]
    assert paths == sorted(paths)
    assert "SHA256SUMS" not in paths and ".lock" not in paths
    assert set(paths) == {
        "audit.json",
        "fingerprint/gpu.json",
        "fingerprint/host.json",
        "journal.jsonl",
        "plan.json",
        *(
            f"runs/train/{k}/{n}"
            for k in (1, 2)
            for n in ("metrics.json", "status.json", "stderr.log", "stdout.log")
        ),
    }
    if shutil.which("sha256sum"):
        proc = subprocess.run(
            ["sha256sum", "--strict", "-c", "SHA256SUMS"],
            cwd=bundle.path,
            capture_output=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert bundle.verify_files() == []


def test_sealed_bundle_is_read_only(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path)
    with bundle.lock():
        with pytest.raises(EvidenceError, match="sealed"):
            bundle.write_json("audit.json", {"verdict": "FAIL"})
        with pytest.raises(EvidenceError, match="sealed"):
            bundle.journal_append({"event": "late"})
        with pytest.raises(EvidenceError, match="already sealed"):
            bundle.write_sha256sums()


def test_seal_refuses_corrupt_or_partial_runs_and_temp_files(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path, seal=False)
    (bundle.path / "runs/train/1/stdout.log").write_bytes(b"tampered")
    with bundle.lock(), pytest.raises(EvidenceError, match=r"runs/train/1/stdout\.log"):
        bundle.write_sha256sums()
    bundle = build_bundle(tmp_path / "b", seal=False)
    with bundle.lock():
        (bundle.run_dir("train", 3) / "stdout.log").write_bytes(b"half")
        with pytest.raises(EvidenceError, match="runs/train/3: run is not sealed"):
            bundle.write_sha256sums()
        dest = bundle.set_aside_partial("train", 3)
        (dest / ".stdout.log.x.tmp").write_bytes(b"forensics")  # allowed inside a .partial dir
        (bundle.path / ".audit.json.x.tmp").write_bytes(b"")
        with pytest.raises(EvidenceError, match="hidden or temporary"):
            bundle.write_sha256sums()
        (bundle.path / ".audit.json.x.tmp").unlink()
        bundle.write_sha256sums()
    assert f"runs/train/{dest.name}/.stdout.log.x.tmp" in (bundle.path / "SHA256SUMS").read_text()
    assert bundle.verify_files() == []


def test_lock_removes_stale_temp_files_outside_runs(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path, seal=False)
    (bundle.path / ".plan.json.abc.tmp").write_bytes(b"half")
    (bundle.path / "runs/train/1/.x.tmp").write_bytes(b"")
    with bundle.lock():
        assert not (bundle.path / ".plan.json.abc.tmp").exists()
        assert (bundle.path / "runs/train/1/.x.tmp").exists()  # a run's own evidence
        assert any(".plan.json.abc.tmp" in n for n in bundle.notes)


TAMPER_CASES = {
    "log": (
        "runs/train/1/stdout.log",
        [
            "runs/train/1/stdout.log: sha256 mismatch (SHA256SUMS",
            "runs/train/1/stdout.log: sha256 mismatch (status.json",
        ],
    ),
    "status": (
        "runs/train/1/status.json",
        ["runs/train/1/status.json: sha256 mismatch (SHA256SUMS"],
    ),
    "metrics": (
        "runs/train/2/metrics.json",
        ["runs/train/2/metrics.json: sha256 mismatch (SHA256SUMS"],
    ),
    "audit": ("audit.json", ["audit.json: sha256 mismatch (SHA256SUMS"]),
    "journal": ("journal.jsonl", ["journal.jsonl: sha256 mismatch (SHA256SUMS"]),
    "fingerprint": ("fingerprint/host.json", ["fingerprint/host.json: sha256 mismatch"]),
}


@pytest.mark.parametrize("case", sorted(TAMPER_CASES))
def test_tampering_is_named(tmp_path: Path, case: str) -> None:
    bundle = build_bundle(tmp_path)
    rel, expected = TAMPER_CASES[case]
    target = bundle.path / rel
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    problems = bundle.verify_files()
    for prefix in expected:
        assert any(p.startswith(prefix) for p in problems), (prefix, problems)


def test_tampered_status_record_is_caught_both_ways(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path)
    status = bundle.path / "runs/train/1/status.json"
    doc = json.loads(status.read_bytes())
    doc["files"]["stdout.log"]["sha256"] = "0" * 64
    status.write_text(json.dumps(doc))
    problems = bundle.verify_files()
    assert any(p.startswith("runs/train/1/status.json: sha256 mismatch") for p in problems)
    assert any(
        p.startswith("runs/train/1/stdout.log: sha256 mismatch (status.json") for p in problems
    )


def test_tampered_sha256sums(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path)
    sums = bundle.path / "SHA256SUMS"
    lines = sums.read_text().splitlines()
    _digest, rel = lines[0].split("  ", 1)
    lines[0] = f"{'f' * 64}  {rel}"
    lines.append("garbage line")
    sums.write_text("\n".join(lines) + "\n")
    problems = bundle.verify_files()
    assert any(
        p.startswith(f"{rel}: sha256 mismatch (SHA256SUMS says ffffffffffff") for p in problems
    )
    assert any(p.startswith("SHA256SUMS:") and "malformed" in p for p in problems)


def test_missing_and_extra_files(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path)
    (bundle.path / "fingerprint/gpu.json").unlink()
    (bundle.path / "fingerprint/extra.json").write_text("{}")
    problems = bundle.verify_files()
    assert "fingerprint/gpu.json: missing (listed in SHA256SUMS)" in problems
    assert "fingerprint/extra.json: not listed in SHA256SUMS (added after sealing)" in problems


def test_unsealed_bundle_reports_missing_sums(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path, seal=False)
    assert bundle.verify_files() == ["SHA256SUMS: missing (the bundle was never sealed)"]


def test_listed_path_escaping_is_malformed(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path)
    with (bundle.path / "SHA256SUMS").open("a") as fh:
        fh.write(f"{'0' * 64}  ../../etc/passwd\n")
    assert any("malformed line" in p for p in bundle.verify_files())


def test_sha256sums_read_line_by_line(tmp_path: Path) -> None:
    """Issue 14: SHA256SUMS is compared as it is read (no parsed copy). A file rb wrote is
    sorted; a hand-reordered one still verifies, and a path listed twice is named whether
    the copies are adjacent or far apart (the out-of-order path remembers what it saw)."""
    bundle = build_bundle(tmp_path)
    sums = bundle.path / "SHA256SUMS"
    lines = sums.read_text().splitlines(keepends=True)
    paths = [line.split("  ", 1)[1] for line in lines]
    assert paths == sorted(paths) and len(lines) > 4
    sums.write_text("".join(reversed(lines)))
    assert bundle.verify_files() == []
    sums.write_text("".join([*lines[:2], lines[1], *lines[2:]]))  # adjacent twin
    assert bundle.verify_files() == [
        f"SHA256SUMS:3: {lines[1].split('  ', 1)[1][:-1]} listed twice"
    ]
    sums.write_text("".join([*lines, lines[0]]))  # the first line again, last
    n = len(lines) + 1
    assert bundle.verify_files() == [
        f"SHA256SUMS:{n}: {lines[0].split('  ', 1)[1][:-1]} listed twice"
    ]
    sums.write_text("".join([*lines[:-1], lines[-1].rstrip("\n")]))
    assert bundle.verify_files() == ["SHA256SUMS: truncated (no final newline)"]


@pytest.mark.parametrize(
    "line",
    [
        b"\xff" * 64 + b"  audit.json\n",  # not hex, not UTF-8
        b"0" * 64 + b"  audit\xff.json\n",  # a path that is not UTF-8
        b"0" * 64 + b"  /etc/passwd\n",
        b"0" * 64 + b"  runs//x\n",
        b"0" * 64 + b"  runs/./x\n",
        b"0" * 64 + b"  runs/\n",
        b"0" * 63 + b"  audit.json\n",
        b"0" * 64 + b" audit.json\n",
        b"0" * 64 + b"\taudit.json\n",
        b"A" * 64 + b"  audit.json\n",
    ],
)
def test_malformed_sha256sums_lines(tmp_path: Path, line: bytes) -> None:
    bundle = build_bundle(tmp_path)
    sums = bundle.path / "SHA256SUMS"
    n = len(sums.read_bytes().splitlines()) + 1
    with sums.open("ab") as fh:
        fh.write(line)
    assert bundle.verify_files() == [f"SHA256SUMS:{n}: malformed line"]


def test_binary_mode_sha256sums_line_verifies(tmp_path: Path) -> None:
    # `sha256sum -b` writes "<hex> *<path>"; both forms are what sha256sum -c reads.
    bundle = build_bundle(tmp_path)
    sums = bundle.path / "SHA256SUMS"
    sums.write_text(sums.read_text().replace("  ", " *", 1))
    assert bundle.verify_files() == []


def test_symlink_in_bundle_is_reported(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path)
    (bundle.path / "fingerprint/nix.json").symlink_to("/etc/passwd")
    assert "fingerprint/nix.json: not a regular file" in bundle.verify_files()


def test_files_snapshot_unchanged_by_verify(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path)
    before = _files(bundle.path)
    bundle.verify_files()
    Bundle.open(bundle.path).journal_records(repair=False)
    assert _files(bundle.path) == before
